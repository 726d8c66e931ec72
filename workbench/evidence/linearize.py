"""Linearization templates (score / linear / struct) and the exact parser.

docs/design.md §3: ``score`` keeps the retriever's order, ``linear`` is a seeded shuffle,
``struct`` follows head→tail chains without looking at gold paths.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence

from .units import Unit, normalize_text, render_line

__all__ = ["FORMATS", "order_units", "linearize", "parse"]

FORMATS = ("score", "linear", "struct")

# A triple line needs its two " | " separators; fields themselves may contain
# pipes, so only "at least two" can be checked. Labels are canonical (no leading 0).
_TRIPLE_LINE = re.compile(r"\[(T(?:0|[1-9][0-9]*))\] .* \| .* \| .*")
_CHUNK_LINE = re.compile(r"\[(C(?:0|[1-9][0-9]*))\] .*")


def order_units(units: Sequence[Unit], fmt: str, *, seed: int | str = 0) -> list[Unit]:
    """Return ``units`` reordered by template ``fmt`` (always a permutation).

    ``seed`` only matters for ``linear``; callers pass e.g.
    ``f"{run_seed}:{sample_id}:{m}"``.
    """
    if fmt == "score":
        return list(units)
    if fmt == "linear":
        return _shuffled(units, seed)
    if fmt == "struct":
        return _struct(units)
    raise ValueError(f"unknown linearization format {fmt!r}; expected one of {FORMATS}")


def linearize(units: Sequence[Unit], fmt: str, *, seed: int | str = 0) -> str:
    """Render ``units`` in ``fmt`` order, one line each, every line ending in ``\\n``."""
    return "".join(render_line(u) + "\n" for u in order_units(units, fmt, seed=seed))


def parse(text: str) -> list[str]:
    """Labels of the complete, well-formed unit lines in ``text``, in text order.

    A line counts only once its ``\\n`` is in the text: a partial last line is
    exactly the "cut part-way" case of docs/design.md §3 and is not visible.
    """
    labels: list[str] = []
    for line in text.split("\n")[:-1]:
        m = _TRIPLE_LINE.fullmatch(line) if line.startswith("[T") else _CHUNK_LINE.fullmatch(line)
        if m:
            labels.append(m.group(1))
    return labels


def _shuffled(units: Sequence[Unit], seed: int | str) -> list[Unit]:
    # Seed from sha256, not hash(): str hashing is salted per process.
    digest = hashlib.sha256(f"{seed}".encode("utf-8")).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    # Sorting first makes the order a function of (seed, multiset of units) only,
    # so the same oracle path shuffles identically however its units were listed.
    out = sorted(units, key=lambda u: (u.uid, u.kind))
    rng.shuffle(out)
    return out


def _struct(units: Sequence[Unit]) -> list[Unit]:
    """Groups (triple components, chunk documents) by best rank, each group contiguous."""
    groups: list[tuple[int, list[int]]] = []  # (best rank, member ranks in output order)
    triples = [i for i, u in enumerate(units) if u.kind == "triple"]
    if triples:
        groups.extend(_triple_groups(units, triples))
    by_doc: dict[object, list[int]] = {}
    for i, u in enumerate(units):
        if u.kind == "chunk":
            # A chunk without doc_id has nothing to group with: it stands alone.
            key = ("doc", u.doc_id) if u.doc_id is not None else ("solo", i)
            by_doc.setdefault(key, []).append(i)
    groups.extend((members[0], members) for members in by_doc.values())
    groups.sort(key=lambda g: g[0])
    return [units[i] for _, members in groups for i in members]


def _triple_groups(units: Sequence[Unit], ranks: list[int]) -> list[tuple[int, list[int]]]:
    head = {i: normalize_text(units[i].head or "") for i in ranks}
    tail = {i: normalize_text(units[i].tail or "") for i in ranks}

    # Connected components over entities (shared as head or tail), by union-find.
    parent: dict[str, str] = {}

    def find(e: str) -> str:
        parent.setdefault(e, e)
        while parent[e] != e:
            parent[e] = parent[parent[e]]
            e = parent[e]
        return e

    for i in ranks:
        a, b = find(head[i]), find(tail[i])
        if a != b:
            parent[b] = a
    comps: dict[str, list[int]] = {}
    for i in ranks:  # ranks ascend, so each component's list is in rank order
        comps.setdefault(find(head[i]), []).append(i)
    return [(members[0], _component_order(members, head, tail)) for members in comps.values()]


def _component_order(members: list[int], head: dict[int, str], tail: dict[int, str]) -> list[int]:
    out_edges: dict[str, list[int]] = {}
    for i in members:
        out_edges.setdefault(head[i], []).append(i)
    tails = {tail[i] for i in members}
    # dicts keep insertion order, so starts come in rank order of their first triple.
    starts = [e for e in out_edges if e not in tails]

    emitted: set[int] = set()
    visited: set[str] = set()
    order: list[int] = []

    def visit(entity: str) -> None:
        # Iterative DFS: a long chain must not hit the recursion limit.
        if entity in visited:
            return
        visited.add(entity)
        stack = [iter(out_edges.get(entity, ()))]
        while stack:
            for i in stack[-1]:
                if i in emitted:
                    continue
                emitted.add(i)
                order.append(i)
                nxt = tail[i]
                if nxt not in visited:
                    visited.add(nxt)
                    stack.append(iter(out_edges.get(nxt, ())))
                break  # descend into the tail before the next sibling
            else:
                stack.pop()

    for e in starts:
        visit(e)
    # Cycles leave triples unreached; a visited head has emitted all its edges,
    # so the best-ranked leftover always has an unvisited head.
    for i in members:
        if i not in emitted:
            visit(head[i])
    return order
