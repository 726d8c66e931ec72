"""Dense retrieval: cosine over an embedding model's unit vectors, exact, and its fusion with BM25.

The vectors come from :class:`~workbench.models.embedder.CachedEmbedder` (the store's
``embeddings`` table), so there is no index file: a search is one matrix product over every
unit (numpy, exact). At 384 dimensions in float32 that is 1.5 KB a unit: 100k units are a
150 MB matrix and a query 17 ms on this machine's 2 cores; past a few million units, or many
thousands of queries at once, an approximate index (HNSW, IVF) would take over.

``hybrid`` is reciprocal rank fusion (Cormack et al., 2009) of the BM25 and dense rankings:
``score(d) = Σ 1 / (RRF_K + rank(d))`` over the rankings that hold ``d``, ranks from 1.
"""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

#: RRF's constant: 60, as in the paper and in most toolkits.
RRF_K = 60


def cosine_top_k(queries: np.ndarray, vectors: np.ndarray, ids: Sequence[Hashable],
                 k: int) -> list[list[tuple[Hashable, float]]]:
    """The ``k`` nearest ``ids`` of each query row by cosine (rows are unit length); ties by id order."""
    if len(ids) == 0:
        return [[] for _ in range(len(queries))]
    sims = queries @ vectors.T
    k = min(k, len(ids))
    out = []
    for row in sims:
        # Every unit scoring at least the k-th best, then exact order: a full sort of 100k scores costs 2×.
        kth = np.partition(row, len(row) - k)[len(row) - k]
        candidates = np.flatnonzero(row >= kth)
        top = candidates[np.lexsort((candidates, -row[candidates]))][:k]
        out.append([(ids[i], float(row[i])) for i in top])
    return out


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hashable]], k: int,
                           rrf_k: int = RRF_K) -> list[tuple[Hashable, float]]:
    """Fuse ranked id lists: the top ``k`` by RRF score; ties by the first ranking that holds the id."""
    scores: dict[Hashable, float] = {}
    first_seen: dict[Hashable, tuple[int, int]] = {}
    for r, ranking in enumerate(rankings):
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (rrf_k + rank)
            first_seen.setdefault(doc, (rank, r))
    ordered = sorted(scores, key=lambda d: (-scores[d], first_seen[d]))
    return [(d, scores[d]) for d in ordered[:k]]
