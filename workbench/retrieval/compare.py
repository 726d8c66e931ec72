"""Retrievers side by side on one corpus: each one's metrics, and paired differences against the first.

Every retriever is evaluated on the same questions (those all of them answered), so a
difference is paired per question: its interval comes from a bootstrap that resamples
questions and keeps both retrievers' values of a question together
(:func:`~workbench.metrics.stats.paired_mean_difference`), much narrower than two
independent intervals. Hit rate is 0/1 per question, so its difference also gets McNemar's
exact p-value, and the questions it flips (found by one retriever only) are listed, as
``compare`` lists the samples two runs flip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from workbench.metrics.significance import mcnemar_exact
from workbench.metrics.stats import RESAMPLES, SEED, Estimate, paired_mean_difference
from workbench.retrieval.evaluate import RetrievalEval, evaluate_retrieval
from workbench.store.db import Store


@dataclass(frozen=True)
class Delta:
    """``other − baseline`` of one metric at one k and level, over the shared questions."""

    baseline: float | None
    other: float | None
    delta: Estimate
    p: float | None = None          # McNemar's exact p (hit rate only)


@dataclass
class RetrievalComparison:
    """Retrievers on the same questions: their evaluations, and each one's deltas against the first."""

    dataset: str
    retrievers: tuple[str, ...]
    ks: tuple[int, ...]
    n: int                                                   # questions every retriever answered
    evals: dict[str, RetrievalEval] = field(default_factory=dict)
    # retriever (not the first) → level → (metric, k) → Delta
    deltas: dict[str, dict[str, dict[tuple[str, int], Delta]]] = field(default_factory=dict)
    # retriever (not the first) → {"gained": [...], "lost": [...]}: doc-level hit at the largest k
    flips: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def compare_retrievers(store: Store, dataset: str | None, retrievers: Sequence[str], ks: Sequence[int] = (1, 3, 5, 10),
                       *, resamples: int = RESAMPLES, seed: int = SEED) -> RetrievalComparison:
    """Evaluate ``retrievers`` (at least two, stored for ``dataset``) and their paired differences to the first."""
    retrievers = tuple(dict.fromkeys(retrievers))
    if len(retrievers) < 2:
        raise ValueError("--retriever: name two or more retrievers to compare (e.g. bm25,dense,hybrid)")
    evals = {r: evaluate_retrieval(store, dataset, r, ks, resamples=resamples, seed=seed) for r in retrievers}
    first = evals[retrievers[0]]
    out = RetrievalComparison(first.dataset, retrievers, tuple(first.ks), 0, evals)
    for level in first.per_query:
        tables = {r: evals[r].per_query[level] for r in retrievers}
        shared = set(tables[retrievers[0]].query_ids)
        for table in tables.values():
            shared &= set(table.query_ids)
        ids = sorted(shared)
        out.n = len(ids)
        rows = {r: _rows(tables[r].query_ids, ids) for r in retrievers}
        base = tables[retrievers[0]]
        for other in retrievers[1:]:
            per = out.deltas.setdefault(other, {}).setdefault(level, {})
            for key in base.values:
                a = base.values[key][rows[retrievers[0]]]
                b = tables[other].values[key][rows[other]]
                p = mcnemar_exact(a, b) if key[0] == "hit_rate" else None
                per[key] = Delta(_mean(a), _mean(b), paired_mean_difference(b, a, resamples=resamples, seed=seed),
                                 p)
            if level == "doc":
                key = ("hit_rate", max(first.ks))
                a = base.values[key][rows[retrievers[0]]]
                b = tables[other].values[key][rows[other]]
                out.flips[other] = {"gained": [q for q, x, y in zip(ids, a, b) if y > x],
                                    "lost": [q for q, x, y in zip(ids, a, b) if y < x]}
    return out


def _rows(query_ids: Sequence[str], ids: Sequence[str]) -> np.ndarray:
    position = {q: i for i, q in enumerate(query_ids)}
    return np.array([position[q] for q in ids], dtype=np.int64)


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None
