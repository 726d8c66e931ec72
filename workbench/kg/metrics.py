"""Entity-clustering evaluation against gold clusters (docs/design.md §8).

``pred[i]`` and ``gold[i]`` are the cluster labels of entity i (any labels; only equality
matters). Two families of scores:

* Pairwise: a pair of entities is *predicted* if both are in one predicted cluster, *gold*
  if both are in one gold cluster. P = TP / predicted pairs, R = TP / gold pairs. With no
  predicted pairs P is ``None`` (undefined, shown ``—``), with no gold pairs R is ``None``;
  F1 is their harmonic mean, ``None`` if either is ``None`` and 0 when both are 0.
* B-cubed (Bagga & Baldwin 1998): per entity e, P_e = |C_pred(e) ∩ C_gold(e)| / |C_pred(e)|
  and R_e = |∩| / |C_gold(e)| (each cluster contains e itself, so both are > 0); P and R are
  the means over entities and F1 their harmonic mean. Always defined for n ≥ 1.

Per-entity contributions. Both families are ratios of sums over entities:
``tp_e = |∩| − 1`` (gold-and-predicted partners of e), ``pred_e = |C_pred(e)| − 1``,
``gold_e = |C_gold(e)| − 1``, so Σ tp_e = 2·TP, Σ pred_e = 2·predicted pairs,
Σ gold_e = 2·gold pairs (each pair is counted from both ends), and pairwise P = Σtp/Σpred,
R = Σtp/Σgold; B-cubed P = Σ bp_e / n, R = Σ br_e / n.

Uncertainty. Intervals are percentile bootstrap intervals (as the ledger's, docs/design.md §3: 2,000 seeded
resamples of Poisson(1) weights per entity shared through :class:`workbench.metrics.stats.ResampledColumns`,
every resampled sum one product ``Wᵀ X``, no Python loop over resamples; a resample's n is its Σw). The resampling
unit is the *entity*: a resample reweights the per-entity contributions above, keeping each
entity's clusters as they were (a ratio estimator; duplicating an entity creates no new
pairs). This ignores that entities of one cluster are correlated — their contributions
move together — so the intervals are optimistic (too narrow) as absolute statements about
a population of clusters. They are still useful for comparing two configurations on the
same entities: :func:`paired_difference` uses the same weights for both, so the shared cluster
structure largely cancels ("graph+text" minus "graph only"). A resample where a score is
undefined (zero denominator) gives NaN and is left out of the percentile; an interval always
contains its point (:func:`workbench.metrics.stats.percentile_interval`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from workbench.metrics.stats import (
    RESAMPLES,
    SEED,
    Estimate,
    ResampledColumns,
    check_bootstrap_args,
    optional_float,
    percentile_interval,
    ratio,
)

__all__ = ["METRICS", "ClusterScores", "pair_counts", "pairwise", "bcubed", "per_entity",
           "cluster_scores", "paired_difference"]

METRICS: tuple[str, ...] = ("pairwise_precision", "pairwise_recall", "pairwise_f1",
                            "bcubed_precision", "bcubed_recall", "bcubed_f1")

# The per-entity columns, in the order they are stacked into X for W @ X.
_COLUMNS: tuple[str, ...] = ("tp", "pred", "gold", "bp", "br")


@dataclass(frozen=True)
class ClusterScores:
    """The six scores of a clustering, each a point estimate with a bootstrap interval."""

    pairwise_precision: Estimate
    pairwise_recall: Estimate
    pairwise_f1: Estimate
    bcubed_precision: Estimate
    bcubed_recall: Estimate
    bcubed_f1: Estimate


# --------------------------------------------------------------------------- per entity


def _codes(labels: Sequence[object], what: str) -> np.ndarray:
    """Labels → dense integer codes 0..k-1 (only equality of labels matters)."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{what} labels must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    _, inv = np.unique(arr, return_inverse=True)
    return inv.reshape(-1).astype(np.int64)


def _sizes(pred: Sequence[object], gold: Sequence[object]) -> tuple[np.ndarray, ...]:
    """Per entity: (|C_pred(e)|, |C_gold(e)|, |C_pred(e) ∩ C_gold(e)|), int64 arrays."""
    p, g = _codes(pred, "pred"), _codes(gold, "gold")
    if len(p) != len(g):
        raise ValueError(f"pred and gold must label the same entities; {len(p)} != {len(g)}")
    if len(p) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    size_p = np.bincount(p)[p]
    size_g = np.bincount(g)[g]
    # One code per (pred cluster, gold cluster) cell of the contingency table; its count
    # is the intersection size. Codes < n² fit int64 for any realistic n.
    joint = _codes(p * (int(g.max()) + 1) + g, "joint")
    inter = np.bincount(joint)[joint]
    return size_p, size_g, inter


def per_entity(pred: Sequence[object], gold: Sequence[object]) -> dict[str, np.ndarray]:
    """Each entity's contribution: ``tp``, ``pred``, ``gold`` (partner counts) and ``bp``, ``br``.

    ``tp_e = |∩| − 1``, ``pred_e = |C_pred(e)| − 1``, ``gold_e = |C_gold(e)| − 1`` (float64,
    integral) and the B-cubed terms ``bp_e = |∩| / |C_pred(e)|``, ``br_e = |∩| / |C_gold(e)|``.
    Summed over entities: Σtp = 2·TP, Σpred = 2·predicted pairs, Σgold = 2·gold pairs.
    """
    size_p, size_g, inter = _sizes(pred, gold)
    return {
        "tp": (inter - 1).astype(np.float64),
        "pred": (size_p - 1).astype(np.float64),
        "gold": (size_g - 1).astype(np.float64),
        "bp": inter / size_p,
        "br": inter / size_g,
    }


def pair_counts(pred: Sequence[object], gold: Sequence[object]) -> tuple[int, int, int]:
    """(true-positive pairs, predicted pairs, gold pairs) of a clustering."""
    size_p, size_g, inter = _sizes(pred, gold)
    # Each pair is seen from both of its ends, hence the exact halving.
    return (
        int(np.sum(inter - 1)) // 2,
        int(np.sum(size_p - 1)) // 2,
        int(np.sum(size_g - 1)) // 2,
    )


# --------------------------------------------------------------------------- formulas


def _f1(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Harmonic mean, NaN if either is NaN, 0 when both are 0 (vectorized)."""
    p = np.asarray(p, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    out = ratio(2 * p * r, p + r)
    out[(p == 0) & (r == 0)] = 0.0
    return out


def _scores(sums: np.ndarray, n: np.ndarray | float) -> dict[str, np.ndarray]:
    """THE formulas: sums of the :data:`_COLUMNS` (``[..., 5]``) and entity count → scores.

    Used for every resample; the point functions below apply the same ratios to the
    unweighted data.
    """
    tp, pred, gold, bp, br = np.moveaxis(np.asarray(sums, dtype=np.float64), -1, 0)
    p, r = ratio(tp, pred), ratio(tp, gold)
    bP, bR = ratio(bp, n), ratio(br, n)
    return {
        "pairwise_precision": p,
        "pairwise_recall": r,
        "pairwise_f1": _f1(p, r),
        "bcubed_precision": bP,
        "bcubed_recall": bR,
        "bcubed_f1": _f1(bP, bR),
    }


def pairwise(
    pred: Sequence[object], gold: Sequence[object]
) -> tuple[float | None, float | None, float | None]:
    """Pairwise (precision, recall, F1); ``None`` where undefined (see module doc)."""
    tp, n_pred, n_gold = pair_counts(pred, gold)
    p, r = ratio(tp, n_pred), ratio(tp, n_gold)
    return optional_float(p), optional_float(r), optional_float(_f1(p, r))


def bcubed(pred: Sequence[object], gold: Sequence[object]) -> tuple[float, float, float]:
    """B-cubed (precision, recall, F1): means of the per-entity P_e and R_e (module doc)."""
    terms = per_entity(pred, gold)
    if len(terms["bp"]) == 0:
        raise ValueError("B-cubed needs at least one entity")
    p, r = float(np.mean(terms["bp"])), float(np.mean(terms["br"]))
    return p, r, float(_f1(p, r))


# --------------------------------------------------------------------------- bootstrap


def _boot(preds: Sequence[Sequence[object]], gold: Sequence[object], resamples: int, seed: int):
    """Points and resampled scores (``{metric: [resamples]}``) of each prediction in ``preds``.

    All predictions share the entities' weights, so differences between them are paired. Identical columns
    are stacked into X once, so identical predictions get bit-identical resampled scores
    (an exact 0 difference).
    """
    blocks = [per_entity(pred, gold) for pred in preds]
    n = len(blocks[0]["tp"]) if blocks else 0
    if n == 0:
        raise ValueError("clustering scores need at least one entity")
    columns = ResampledColumns(n)
    index = [columns.add(np.column_stack([terms[name] for name in _COLUMNS])) for terms in blocks]
    entities = columns.add(np.ones((n, 1)))[0]  # a resample's entity count Σw (Poisson weights)
    if resamples == 0:
        return None
    # exact: tp/pred/gold sums are then exact integers, independent of BLAS order.
    sums = columns.resampled_sums(resamples, seed, exact=True)
    return [_scores(sums[:, idx], sums[:, entities]) for idx in index]


def _points(pred: Sequence[object], gold: Sequence[object]) -> dict[str, float | None]:
    return dict(zip(METRICS, (*pairwise(pred, gold), *bcubed(pred, gold))))


def cluster_scores(
    pred: Sequence[object],
    gold: Sequence[object],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
) -> ClusterScores:
    """All six scores: points exactly as :func:`pairwise` / :func:`bcubed`, entity-bootstrap CIs.

    ``resamples=0`` gives no intervals. See the module doc for what the interval ignores.
    """
    resamples = check_bootstrap_args(resamples, alpha)
    boots = _boot([pred], gold, resamples, seed)
    points = _points(pred, gold)
    return ClusterScores(
        **{m: percentile_interval(points[m], None if boots is None else boots[0][m], alpha) for m in METRICS}
    )


def paired_difference(
    pred_a: Sequence[object],
    pred_b: Sequence[object],
    gold: Sequence[object],
    metric: str,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
) -> Estimate:
    """``metric(a) − metric(b)`` with a paired interval: both scored on the same resamples.

    E.g. a = "graph+text" clustering, b = "graph only". ``None`` if the metric is undefined
    for either. Identical predictions give exactly 0 with a zero-width interval.
    """
    resamples = check_bootstrap_args(resamples, alpha)
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of: {', '.join(METRICS)}")
    pa, pb = _points(pred_a, gold)[metric], _points(pred_b, gold)[metric]
    value = None if pa is None or pb is None else pa - pb
    boots = _boot([pred_a, pred_b], gold, resamples, seed)
    diff = None if boots is None else boots[0][metric] - boots[1][metric]
    return percentile_interval(value, diff, alpha)
