"""p-values for paired comparisons, and the Holm adjustment across a family of them.

Two runs scored on the same samples are paired: a test that ignores the pairing (an
unpaired z-test of two means) misses real differences, because what the runs share (a
sample's difficulty) is counted as noise. Every test here is paired.

- :func:`mcnemar_exact`: for a 0/1 measure (a hit, an exact-match score) the only
  informative samples are the discordant ones; under H0 each falls either way with
  probability 1/2, so the two-sided p-value is an exact binomial tail.
- :func:`bootstrap_p`: for any other statistic (a mean of fractional scores, a conditional
  accuracy, a ratio), the two-sided p-value of the paired bootstrap of its difference:
  twice the smaller share of resampled differences on either side of 0. It inverts the
  percentile interval of :mod:`workbench.metrics.stats`: the 1−α interval excludes 0
  exactly when p < α (up to the resolution of the resamples), so a difference marked
  significant is one whose interval excludes 0.
- :func:`holm`: the Holm step-down adjustment, which controls the family-wise error rate
  across, e.g., every cell of a comparison, without assuming independence.
"""

from __future__ import annotations

import math
from typing import Mapping, TypeVar

import numpy as np

K = TypeVar("K")


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> float | None:
    """Two-sided exact McNemar p-value of paired 0/1 outcomes ``a`` and ``b`` (None if either is not 0/1).

    With ``n01`` samples 0 in ``a`` and 1 in ``b`` and ``n10`` the reverse, p is
    ``min(1, 2·P(X ≤ min(n01, n10)))`` for X ~ Binomial(n01 + n10, 1/2); 1.0 when no
    sample is discordant.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes differ in length: {a.shape} vs {b.shape}")
    if not (np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all()):
        return None
    n01 = int(np.count_nonzero((a == 0) & (b == 1)))
    n10 = int(np.count_nonzero((a == 1) & (b == 0)))
    return binomial_two_sided(min(n01, n10), n01 + n10)


def binomial_two_sided(k: int, n: int) -> float:
    """``min(1, 2·P(X ≤ k))`` for X ~ Binomial(n, 1/2), k ≤ n/2, computed in log space (n may be large)."""
    if n == 0:
        return 1.0
    if not 0 <= k <= n:
        raise ValueError(f"k must be within [0, n], got k={k}, n={n}")
    k = min(k, n - k)
    # log C(n, i) for i = 0..k, by the ratio C(n, i+1)/C(n, i) = (n−i)/(i+1): no huge integers.
    steps = np.log(np.arange(n, n - k, -1, dtype=np.float64)) - np.log(np.arange(1, k + 1, dtype=np.float64))
    log_terms = np.concatenate([[0.0], np.cumsum(steps)]) - n * math.log(2.0)
    top = log_terms.max()
    tail = math.exp(top) * float(np.exp(log_terms - top).sum())
    return min(1.0, 2.0 * tail)


def bootstrap_p(point: float | None, boot: np.ndarray | None) -> float | None:
    """Two-sided p-value of a paired bootstrap of a difference: ``2·min(share ≤ 0, share ≥ 0)``, at most 1.

    ``boot`` holds the difference under each resample (NaN where undefined, ignored).
    None when the point or every resample is undefined. A difference that is exactly 0 in
    every resample (the two sides agree on every sample) has p = 1.
    """
    if point is None or boot is None:
        return None
    boot = np.asarray(boot, dtype=np.float64)
    finite = boot[np.isfinite(boot)]
    if finite.size == 0:
        return None
    below = np.count_nonzero(finite <= 0) / finite.size
    above = np.count_nonzero(finite >= 0) / finite.size
    return float(min(1.0, 2.0 * min(below, above)))


def holm(pvalues: Mapping[K, float | None]) -> dict[K, float | None]:
    """Holm-adjusted p-values of one family (undefined p-values stay None and are not counted).

    Sorted ascending, the i-th of m p-values becomes ``max_{j ≤ i} min(1, (m − j + 1)·p_(j))``.
    """
    defined = sorted(((p, key) for key, p in pvalues.items() if p is not None), key=lambda t: t[0])
    m = len(defined)
    out: dict[K, float | None] = {key: None for key in pvalues}
    running = 0.0
    for i, (p, key) in enumerate(defined):
        running = max(running, min(1.0, (m - i) * p))
        out[key] = running
    return out
