"""Retrieval metrics at k (docs/design.md §5), with the trec_eval / ranx definitions.

Inputs
------
``qrels``  ``{query id: {item id: grade}}``. A grade ≥ 1 means relevant (ranx's default
           ``rel_lvl=1``); grades ≤ 0 are treated as not relevant.
``run``    ``{query id: [(item id, score), ...]}``, best first.

Ranking and ties. The rank of an item is its position after a *stable* sort by score,
descending: a run that is already in rank order is used as is, and items with equal
scores keep the order they were given in (the retriever's order). This is what ranx
does for lists of up to 15 items per query (numba's ``argsort`` falls back to a stable
insertion sort below 16 elements); for longer lists ranx's order among tied items is an
artefact of an unstable quicksort (neither input order nor item-id order), so no rule can
agree with it there. Pass ``ties="id"`` to break ties by item id instead (deterministic
whatever order the input had). A repeated item id keeps its first (best) rank only.

Metrics, per query, at each k (``R`` = number of relevant items, ``hits@k`` = relevant
items among the first k ranked):

==============  ==========================================================================
``recall``      hits@k / R                                   (0 when R = 0)
``precision``   hits@k / k   — divided by k even when fewer than k items were retrieved
``hit_rate``    1 if hits@k > 0 else 0
``mrr``         1 / rank of the first relevant item within the first k, else 0
``f1``          2·P·R / (P + R) of precision@k and recall@k, 0 when both are 0
``ndcg``        DCG@k / IDCG@k, DCG@k = Σ_{i ≤ k} grade_i / log2(i + 1) (Järvelin &
                Kekäläinen: the gain is the grade itself, *not* 2^grade − 1, which is
                ranx's ``ndcg_burges``); IDCG@k is the DCG of the grades sorted
                descending; 0 when there is no relevant item
==============  ==========================================================================

The names are ranx's (``f"{metric}@{k}"`` is the ranx metric string). Queries are those
of ``qrels``; a query of ``qrels`` without a run entry scores 0 on every metric; run
entries for queries not in ``qrels`` are ignored (ranx's ``make_comparable=True``).

Document level ("any chunk of the gold document counts"): map the chunk run
through :func:`doc_level` — each document takes the rank of its best chunk — and judge it
against document qrels. Chunk level: use the chunk ids directly, with graded chunk labels
when they exist.

Uncertainty: :func:`aggregate` gives the mean over queries with a 95 % percentile
bootstrap interval (:func:`workbench.metrics.stats.bootstrap_means`: Poisson weights keyed
by the query's position, for the same ``(resamples, seed)``), overall and per group of queries (e.g.
question strategy or category), each group bootstrapped over its own queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

import numpy as np

from workbench.metrics.stats import RESAMPLES, SEED, Estimate, bootstrap_means

METRICS: tuple[str, ...] = ("recall", "precision", "hit_rate", "mrr", "f1", "ndcg")
ALL = METRICS
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)

Key = tuple[str, int]  # (metric, k)
Run = Mapping[str, Sequence[tuple[str, float]]]
Qrels = Mapping[str, Mapping[str, int]]


def ranx_name(metric: str, k: int) -> str:
    """The ranx metric string for (metric, k), e.g. ``ranx_name("ndcg", 5) == "ndcg@5"``."""
    return f"{metric}@{k}"


def rank(items: Sequence[tuple[str, float]], ties: Literal["input", "id"] = "input") -> list[str]:
    """Item ids in rank order: score descending, ties by input order (or by id), no repeats."""
    indexed = list(enumerate(items))
    if ties == "input":
        indexed.sort(key=lambda t: -float(t[1][1]))
    elif ties == "id":
        indexed.sort(key=lambda t: (-float(t[1][1]), str(t[1][0])))
    else:
        raise ValueError(f"ties must be 'input' or 'id', got {ties!r}")
    seen: set[str] = set()
    out: list[str] = []
    for _, (item, _score) in indexed:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


@dataclass(frozen=True)
class PerQuery:
    """Per-query metric values: ``values[(metric, k)]`` is an array aligned with ``query_ids``."""

    query_ids: tuple[str, ...]
    ks: tuple[int, ...]
    metrics: tuple[str, ...]
    values: dict[Key, np.ndarray] = field(repr=False)

    def __getitem__(self, key: Key | str) -> np.ndarray:
        if isinstance(key, str):  # "recall@5"
            m, _, k = key.partition("@")
            key = (m, int(k))
        return self.values[key]

    def __len__(self) -> int:
        return len(self.query_ids)

    def mean(self) -> dict[Key, float]:
        """Plain means over queries (what ``ranx.evaluate`` returns); 0.0 with no query."""
        return {key: float(v.mean()) if v.size else 0.0 for key, v in self.values.items()}

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{"recall@5": {query id: value}}`` — the shape of ranx's ``run.scores``."""
        return {ranx_name(m, k): dict(zip(self.query_ids, map(float, v)))
                for (m, k), v in self.values.items()}


def evaluate(
    qrels: Qrels,
    run: Run,
    ks: Sequence[int] = DEFAULT_KS,
    metrics: Sequence[str] = ALL,
    *,
    ties: Literal["input", "id"] = "input",
) -> PerQuery:
    """Every metric at every k, per query of ``qrels`` (see the module doc for definitions)."""
    ks = tuple(int(k) for k in ks)
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be positive integers, got {ks!r}")
    metrics = tuple(metrics)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; known: {METRICS}")

    qids = tuple(qrels)
    nq, kmax = len(qids), max(ks)
    # gains[i, r] = grade of the item at rank r+1 of query i (0 if not relevant / absent)
    gains = np.zeros((nq, kmax), dtype=np.float64)
    ideal = np.zeros((nq, kmax), dtype=np.float64)
    n_rel = np.zeros(nq, dtype=np.float64)
    for i, q in enumerate(qids):
        judged = {d: g for d, g in qrels[q].items() if g >= 1}
        n_rel[i] = len(judged)
        top = sorted(judged.values(), reverse=True)[:kmax]
        ideal[i, : len(top)] = top
        ranked = rank(run.get(q, ()), ties=ties)[:kmax]
        gains[i, : len(ranked)] = [judged.get(d, 0) for d in ranked]

    relevant = gains > 0
    cum_hits = np.cumsum(relevant, axis=1)
    discount = 1.0 / np.log2(np.arange(2, kmax + 2))
    cum_dcg = np.cumsum(gains * discount, axis=1)
    cum_idcg = np.cumsum(ideal * discount, axis=1)
    has_rel = relevant.any(axis=1)
    first = np.where(has_rel, relevant.argmax(axis=1) + 1, 0)  # 1-based, 0 = none

    values: dict[Key, np.ndarray] = {}
    safe_rel = np.where(n_rel > 0, n_rel, 1.0)
    for k in ks:
        hits = cum_hits[:, k - 1].astype(np.float64)
        rec = hits / safe_rel
        prec = hits / k
        per = {
            "recall": rec,
            "precision": prec,
            "hit_rate": (hits > 0).astype(np.float64),
            "mrr": np.where((first >= 1) & (first <= k), 1.0 / np.maximum(first, 1), 0.0),
            "f1": np.divide(2 * prec * rec, prec + rec, out=np.zeros(nq), where=(prec + rec) > 0),
            "ndcg": np.divide(cum_dcg[:, k - 1], cum_idcg[:, k - 1], out=np.zeros(nq),
                              where=cum_idcg[:, k - 1] > 0),
        }
        for m in metrics:
            values[(m, k)] = per[m]
    return PerQuery(query_ids=qids, ks=ks, metrics=metrics, values=values)


def doc_level(
    run_chunks: Run,
    chunk_parent: Mapping[str, str],
    *,
    ties: Literal["input", "id"] = "input",
) -> dict[str, list[tuple[str, float]]]:
    """Map a ranked chunk run to a ranked document run: each document keeps its best rank.

    ``chunk_parent`` maps chunk id → document id (the chunk's ``parent_id``). The document's
    score is its best chunk's score, and documents come out in the order of their best
    chunks, so :func:`evaluate` on the result against document qrels counts a document as
    retrieved at rank r when any of its chunks is the r-th distinct document's best chunk.
    """
    out: dict[str, list[tuple[str, float]]] = {}
    for q, items in run_chunks.items():
        score_of: dict[str, float] = {}
        for chunk, score in items:
            score_of.setdefault(chunk, float(score))
        docs: list[tuple[str, float]] = []
        seen: set[str] = set()
        for chunk in rank(items, ties=ties):
            try:
                doc = chunk_parent[chunk]
            except KeyError:
                raise KeyError(f"chunk {chunk!r} (query {q!r}) has no parent document") from None
            if doc not in seen:
                seen.add(doc)
                docs.append((doc, score_of[chunk]))
        out[q] = docs
    return out


@dataclass(frozen=True)
class Aggregate:
    """Means with 95 % bootstrap intervals, overall and per group of queries."""

    overall: dict[Key, Estimate]
    n: int
    by_group: dict[str, dict[Key, Estimate]]
    n_by_group: dict[str, int]


def aggregate(
    per_query: PerQuery,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    groups: Mapping[str, str] | None = None,
) -> Aggregate:
    """Mean of every (metric, k) over queries with a 95 % percentile bootstrap interval.

    The resampling unit is the query. W depends only on ``(n, resamples, seed)``, so one
    call is reproducible and all metrics of a call share their resamples (paired). With
    ``groups`` (query id → label) each group is also bootstrapped over its own queries;
    every query must have a label. A group of one query has its mean but no interval.
    """
    keys = list(per_query.values)
    block = (np.column_stack([per_query.values[k] for k in keys]) if keys
             else np.zeros((len(per_query), 0)))
    overall = dict(zip(keys, bootstrap_means(block, resamples=resamples, seed=seed)))
    by_group: dict[str, dict[Key, Estimate]] = {}
    n_by_group: dict[str, int] = {}
    if groups is not None:
        missing = [q for q in per_query.query_ids if q not in groups]
        if missing:
            raise ValueError(f"{len(missing)} queries have no group, e.g. {missing[:3]}")
        labels = np.array([groups[q] for q in per_query.query_ids], dtype=object)
        for g in dict.fromkeys(labels):  # first-seen order
            rows = labels == g
            by_group[g] = dict(zip(keys, bootstrap_means(block[rows], resamples=resamples, seed=seed)))
            n_by_group[g] = int(rows.sum())
    return Aggregate(overall=overall, n=len(per_query), by_group=by_group, n_by_group=n_by_group)
