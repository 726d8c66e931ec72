"""How far an automatic checker follows human judgments: Pearson's r and Spearman's ρ with a CI.

Issue 36's meta-evaluation (RAGChecker's Table 2, Ru et al. 2024): for each pair of responses
a checker's score difference (model2 − model1) is set against the humans' preference label,
and the checker is as good as the correlation of the two over the instances. One figure per
checker and label is easy to over-read, so each comes with a 95 % percentile bootstrap
interval on the Poisson weights of :mod:`workbench.metrics.stats`, under its rules: ``None``
when undefined (never 0), the interval contains its point, undefined resamples are left out.
Two checkers scored on the same keys and seed see the same resamples (a paired comparison).

Cluster keys. Each instance appears once per annotator: two items, one score difference, two
labels. They are not independent draws, and resampling them apart would treat every instance
as two and make the interval too narrow. So the weights are drawn per distinct ``key`` and
every item carries its key's weight: an instance is drawn with all its labels or not at all.

A resample is the multiset in which item i appears w_i times. Its Pearson r comes from the
weighted moments ``Wᵀ X``; its Spearman ρ is the Pearson r of the multiset's average ranks,
rank_i = (weight of values below v_i) + (weight of values equal to v_i + 1) / 2, found for a
chunk of resamples at once from one sort per column. A resample in which one column has a
single value (among the items it draws) is undefined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from workbench.metrics.resample import iter_resample_weights
from workbench.metrics.stats import (
    RESAMPLES,
    SEED,
    Estimate,
    check_bootstrap_args,
    paired_columns,
    optional_float,
    percentile_rows,
)

__all__ = ["Correlation", "correlation", "pearson", "spearman"]

# Resamples are handled in chunks of at most this many (items × resamples) entries: a chunk
# holds about ten float64 arrays of that size (≈ 80 MB at most), however many items there are.
_CHUNK_ENTRIES = 1 << 20


@dataclass(frozen=True)
class Correlation:
    """Pearson's r and Spearman's ρ (each in [-1, 1], not × 100) of ``n`` paired items, with intervals."""

    pearson: Estimate
    spearman: Estimate
    n: int


class _Ties:
    """One column's sort order and tie groups: all its weighted average ranks need."""

    def __init__(self, v: np.ndarray) -> None:
        self.order = np.argsort(v, kind="stable")
        sorted_v = v[self.order]
        first = np.ones(len(v), dtype=bool)
        first[1:] = sorted_v[1:] != sorted_v[:-1]
        self.group = np.cumsum(first) - 1  # the tie group of each sorted position
        self.starts = np.flatnonzero(first)
        self.ends = np.append(self.starts[1:], len(v))

    def ranks(self, w: np.ndarray) -> np.ndarray:
        """Average ranks (items × resamples) in each resample's multiset, item i taken ``w[i, r]`` times."""
        cum = np.zeros((len(self.order) + 1, w.shape[1]))
        np.cumsum(w[self.order], axis=0, out=cum[1:])
        # A tie group with weight `below` before it and `upto` up to its end holds the ranks
        # below + 1 .. upto; each of its items gets their mean. With integer weights the sums
        # are exact, so ranks are exact half-integers.
        group_rank = (cum[self.starts] + cum[self.ends] + 1) / 2
        out = np.empty_like(w)
        out[self.order] = group_rank[self.group]
        return out


def _standardized(v: np.ndarray) -> np.ndarray:
    # Raw moments of data far from 0 lose their variance to cancellation; centred and scaled,
    # Σw·x² is of the order of Σw and nothing cancels. (A constant column is caught by its ranks.)
    centred = v - v.mean()
    scale = float(np.sqrt(np.mean(centred * centred)))
    return centred / scale if scale > 0 else centred


class _Pair:
    """Two columns prepared once for any number of weighted resamples."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        a, b = _standardized(x), _standardized(y)
        self.moments = np.column_stack([np.ones(len(a)), a, b, a * a, b * b, a * b])
        self.ties = (_Ties(x), _Ties(y))

    def correlations(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Pearson r, Spearman ρ) of each resample, a column of ``w`` (items × resamples); NaN where undefined."""
        s, sa, sb, saa, sbb, sab = (w.T @ self.moments).T
        # The ranks of a multiset of Σw values average exactly (Σw + 1)/2; centred there they
        # are exact, so a column constant in a resample has a rank variance of exactly 0,
        # where its raw moments leave round-off. That zero decides "undefined" for both.
        mid = (s + 1) / 2
        dx = self.ties[0].ranks(w) - mid
        dy = self.ties[1].ranks(w) - mid
        wdx = w * dx
        vx, vy, cxy = (wdx * dx).sum(axis=0), (w * dy * dy).sum(axis=0), (wdx * dy).sum(axis=0)
        defined = (vx > 0) & (vy > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = (s * sab - sa * sb) / np.sqrt((s * saa - sa * sa) * (s * sbb - sb * sb))
            rho = cxy / np.sqrt(vx * vy)
        return np.where(defined, np.clip(r, -1, 1), np.nan), np.where(defined, np.clip(rho, -1, 1), np.nan)


def _points(x: np.ndarray, y: np.ndarray) -> tuple[float | None, float | None]:
    """Both point values: the statistics of the resample that takes every item once."""
    if len(x) < 2:
        return None, None
    r, rho = _Pair(x, y).correlations(np.ones((len(x), 1)))
    return optional_float(r[0]), optional_float(rho[0])


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Pearson's r of paired values (scipy.stats.pearsonr's statistic).

    ``None`` when undefined: fewer than two items, or a column with a single value.
    """
    return _points(*paired_columns(x, y, "correlated values"))[0]


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Spearman's ρ: Pearson's r of the average ranks, tied values sharing their mean rank (as scipy.stats.spearmanr).

    ``None`` when undefined, as :func:`pearson`.
    """
    return _points(*paired_columns(x, y, "correlated values"))[1]


def _key_weights(keys: np.ndarray, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The Poisson weights of the distinct keys (keys × resamples, as bytes) and each item's row in them.

    A key's weights are generated from resample 0 on, so a chunk of resamples cannot be drawn
    on its own: they are drawn once and kept as bytes (200 MB at 100k keys × 2000 resamples);
    only the float work is chunked.
    """
    distinct, inverse = np.unique(keys, return_inverse=True)
    per_key = np.empty((len(distinct), resamples), dtype=np.uint8)
    for rows, w in iter_resample_weights(distinct, resamples, seed, np.uint8):
        per_key[rows] = w
    return per_key, inverse


def correlation(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    keys: Sequence[int] | np.ndarray | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
) -> Correlation:
    """Pearson's r and Spearman's ρ of paired values, each with its percentile bootstrap interval.

    ``keys``: each item's cluster key, a non-negative integer (default: its position, every
    item its own cluster). Items with the same key are resampled together, sharing one
    Poisson weight per resample: give an instance's labels by several annotators the
    instance's id. Values must be finite and aligned item by item. An undefined statistic
    (fewer than two items, a constant column) is ``None`` without an interval;
    ``resamples=0`` gives the points without intervals.
    """
    x, y = paired_columns(x, y, "correlated values")
    resamples = check_bootstrap_args(resamples, alpha)
    n = len(x)
    cluster = np.arange(n, dtype=np.int64) if keys is None else np.asarray(keys, dtype=np.int64).reshape(-1)
    if len(cluster) != n:
        raise ValueError(f"{len(cluster)} bootstrap keys for {n} items")
    if n and cluster.min() < 0:
        raise ValueError("bootstrap keys must be non-negative integers")
    r, rho = _points(x, y)
    if resamples == 0 or r is None or rho is None:
        return Correlation(Estimate(r, None, None), Estimate(rho, None, None), n)
    per_key, inverse = _key_weights(cluster, resamples, seed)
    pair = _Pair(x, y)
    boot = np.empty((2, resamples))
    step = max(1, _CHUNK_ENTRIES // n)
    for start in range(0, resamples, step):
        chunk = slice(start, min(start + step, resamples))
        boot[0, chunk], boot[1, chunk] = pair.correlations(per_key[inverse, chunk].astype(np.float64))
    r_est, rho_est = percentile_rows([r, rho], boot, alpha)
    return Correlation(r_est, rho_est, n)
