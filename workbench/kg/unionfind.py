"""Union-find for transitive entity merges, and the representative rule (docs/design.md §8).

Merges are *pairs* the judge (or a human in triage) accepted. Clusters are the connected
components of those pairs: a~b and b~c put a, b and c in one cluster even though (a, c) was
never judged. :func:`merge_clusters` turns a list of pairs into one label per entity.

Revert semantics. The merge log is the source of truth, not the union-find forest: union-find
cannot split a set, so reverting a merge *removes that pair from the list of accepted pairs
and recomputes the clusters from the remaining pairs*. Hence, after accepting (a, b) and
(b, c), reverting (a, b) keeps b~c and splits a off — unless another accepted path still
links a to b or c (e.g. an accepted (a, c)), in which case a stays. :func:`revert_merge`
does the removal; recomputation is :func:`merge_clusters` on what is left. This makes a
revert order-independent and exact: the clusters depend only on the set of accepted pairs.

Representative. Each cluster shows one entity as its name (:func:`choose_representative`):
the most connected entity (highest degree in the graph); ties go to the longest name, taken
as the most complete surface form ("United Nations" over "UN"); remaining ties go to the
smallest id, so the choice is deterministic.
"""

from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["UnionFind", "merge_clusters", "revert_merge", "choose_representative"]


class UnionFind:
    """Disjoint sets over the ids ``0 .. n-1``: union by size, find with path compression.

    Both together keep every operation effectively constant time (inverse Ackermann), which
    matters at 100k entities with many candidate merges.
    """

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or int(n) != n or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        self.n = int(n)
        self._parent = list(range(self.n))
        self._size = [1] * self.n

    def _check(self, x: int) -> None:
        # Explicit check: a negative index would silently wrap around in a Python list.
        if not 0 <= x < self.n:
            raise IndexError(f"entity id {x} out of range 0..{self.n - 1}")

    def find(self, x: int) -> int:
        """The root of ``x``'s set; every node on the way is re-pointed at the root."""
        self._check(x)
        root = x
        while self._parent[root] != root:
            root = self._parent[root]
        # Iterative compression (no recursion limit on long chains).
        while self._parent[x] != root:
            self._parent[x], x = root, self._parent[x]
        return root

    def union(self, a: int, b: int) -> int:
        """Join the sets of ``a`` and ``b``; return the root of the joined set.

        The larger set's root becomes the root (on equal sizes, ``a``'s root), which keeps
        the trees shallow. Joining two members of one set is a no-op returning its root.
        """
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self._size[ra] < self._size[rb]:
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._size[ra] += self._size[rb]
        return ra

    def clusters(self) -> list[list[int]]:
        """Every set (singletons included), members sorted, sets sorted by first member."""
        groups: dict[int, list[int]] = {}
        for x in range(self.n):  # ascending x: members come out sorted
            groups.setdefault(self.find(x), []).append(x)
        return sorted(groups.values(), key=lambda members: members[0])


def merge_clusters(n: int, merges: Iterable[tuple[int, int]]) -> list[int]:
    """Labels after applying every merge pair transitively: ``label[i]`` = smallest member.

    The smallest member (rather than the union-find root) is used as the cluster id so the
    labels depend only on the set of pairs, not on the order they were applied in.
    """
    uf = UnionFind(n)
    for a, b in merges:
        uf.union(a, b)
    label = [0] * n
    for members in uf.clusters():
        for x in members:
            label[x] = members[0]
    return label


def revert_merge(merges: Iterable[tuple[int, int]], pair: tuple[int, int]) -> list[tuple[int, int]]:
    """The accepted pairs without ``pair`` (either orientation, every occurrence).

    Recompute the clusters with :func:`merge_clusters` on the result (see module doc).
    Raises ``KeyError`` if ``pair`` was never accepted, so a typo cannot pass as a revert.
    """
    accepted = list(merges)  # materialize once: an iterator could only be read once
    target = frozenset(pair)
    kept = [(a, b) for a, b in accepted if frozenset((a, b)) != target]
    if len(kept) == len(accepted):
        raise KeyError(f"merge {pair!r} is not among the accepted pairs")
    return kept


def choose_representative(
    members: Sequence[int], degree: Sequence[int], names: Sequence[str]
) -> int:
    """The cluster's representative id among ``members`` (the stated rule, module doc).

    ``degree`` and ``names`` are indexed by entity id. Order of preference: highest degree
    (the most connected node carries the most context), then the longest name (the most
    complete surface form, "United Nations" over "UN"), then the smallest id (deterministic).
    """
    if len(members) == 0:
        raise ValueError("a cluster needs at least one member")
    return min(members, key=lambda m: (-degree[m], -len(names[m]), m))
