"""Bootstrap statistics shared by every metric module: one owner for the interval rules.

Resample weights (:mod:`workbench.metrics.resample`): a Poisson bootstrap keyed by item. In resample r, item i carries the
weight w(seed, key_i, r) ~ Poisson(1), where ``key_i`` is the item's stable id (a sample's
sid; by default its position). The weight is a *pure function* of (seed, key, r)
(:func:`poisson_weights`): the r-th 32-bit word of numpy's counter-based Philox4x64
generator keyed by (key, seed), mapped to Poisson(1) by its inverse CDF. So

- every statistic over the same items sees the same resamples, whatever else it is
  computed with: differences between cells of a run, between runs of a dataset (aligned by
  sid) and between a ledger read now and one read later are *paired* bootstraps;
- a resample's sums can be kept up to date one item at a time: adding item i adds
  ``w(seed, i, ·) ⊗ x_i`` to the replicate sums, in O(resamples) (the incremental ledger,
  :mod:`workbench.runs.aggregate`);
- asking for fewer resamples takes a prefix: resample r does not depend on how many there are.

Why Poisson and not the classical multinomial (n draws with replacement): the multinomial
counts of one item depend on n and on every other item, so no per-item update exists; with
independent Poisson(1) weights the resampled sums are sums of independent per-item terms.
This is the Poisson bootstrap of Hanley & MacGibbon (2006) and Chamandy et al. (2012,
"Estimating uncertainty for massive data streams"); for the means and ratios of means used
here it is asymptotically equivalent to the classical bootstrap (the resample size Σw is
random, so every mean is the weighted mean Σw·x / Σw). A resample where every weight of a
denominator is 0 is undefined (NaN) and left out, as any undefined resample is.

Every resampled statistic is a matrix product ``Wᵀ X`` over chunks of items, never a
Python loop over resamples.

Intervals. A 95 % (``alpha=0.05``) percentile interval over the resampled values. A
resample where the statistic is undefined (NaN, e.g. a zero denominator) is left out; no
defined resample, an undefined point, or ``resamples=0`` gives no interval (``None``,
never 0). The one clamping rule: an interval always contains its point estimate — if the
percentiles miss it (float round-off on a constant column, or a strongly skewed
resampling distribution), the nearer end is moved onto the point. So every
:class:`Estimate` has ``lo <= value <= hi`` or ``lo is hi is None``.

One non-bootstrap interval lives here too, :func:`wilson_interval`: the binomial interval of a
share of trials (e.g. of replays whose intervals all covered, :mod:`workbench.runs.replay`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Hashable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from workbench.metrics.resample import item_keys, iter_resample_weights

__all__ = [
    "RESAMPLES",
    "SEED",
    "Estimate",
    "check_bootstrap_args",
    "common_length",
    "ratio",
    "optional_float",
    "ResampledColumns",
    "percentile_interval",
    "percentile_intervals",
    "percentile_rows",
    "bootstrap_mean",
    "bootstrap_means",
    "mean_and_resampled",
    "bootstrap_ratio",
    "paired_columns",
    "paired_mean_difference",
    "wilson_interval",
]

K = TypeVar("K", bound=Hashable)

#: The resamples and seed of every interval the workbench shows unless asked otherwise: the CLI's ``--resamples``
#: and ``--seed`` defaults, the reports, and every screen's full pass. One figure is one statistic wherever it is
#: read: a screen drawing its interval from fewer resamples than the CLI showed the same estimate with another
#: interval (a quick first pass is a preview, replaced by the full one).
RESAMPLES = 2000
SEED = 0

# Products with at most this many multiply-adds run in float64, larger ones in float32.
_FLOAT64_MAX_WORK = 1 << 28


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its bootstrap interval; ``None`` means undefined (``—``)."""

    value: float | None
    lo: float | None
    hi: float | None


def check_bootstrap_args(resamples: int, alpha: float) -> int:
    """``resamples`` as an int after checking it is a count ≥ 0 and that 0 < ``alpha`` < 1."""
    if isinstance(resamples, bool) or int(resamples) != resamples or resamples < 0:
        raise ValueError(f"resamples must be a non-negative integer, got {resamples!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    return int(resamples)


def common_length(lengths: Iterable[int], what: str) -> int:
    """The one length shared by arrays that are resampled together (0 if there are none).

    Paired resampling needs every array aligned on the same items; ``what`` names them in
    the error.
    """
    distinct = set(lengths)
    if len(distinct) > 1:
        raise ValueError(f"{what} must be aligned on the same samples; lengths {sorted(distinct)}")
    return distinct.pop() if distinct else 0


def ratio(num: np.ndarray | float, den: np.ndarray | float) -> np.ndarray:
    """num / den elementwise, NaN where den == 0 (an empty conditioning set is undefined)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.asarray(np.true_divide(num, den), dtype=np.float64)
    undefined = np.broadcast_to(den <= 0, out.shape)
    return np.where(undefined, np.nan, out) if undefined.any() else out


def optional_float(x: np.ndarray | float) -> float | None:
    """A scalar as a Python float, or ``None`` if it is NaN (undefined)."""
    x = float(x)
    return None if np.isnan(x) else x


class ResampledColumns:
    """Columns over the same items, resampled together by one product ``Wᵀ X``.

    ``keys`` are the items' bootstrap keys (:func:`item_keys`; an int n means positions
    0..n-1). Each distinct column is stored once: identical columns (a mask shared by two
    cells, a prediction compared with itself) get one index, which saves work and makes
    their resampled sums bit-identical, so a paired difference of equal inputs is exactly 0.
    """

    def __init__(self, keys: int | np.ndarray | Sequence[int]) -> None:
        self.keys = item_keys(keys) if isinstance(keys, (int, np.integer)) else item_keys(len(keys), keys)
        self.n = len(self.keys)
        n = self.n
        self.cols: list[np.ndarray] = []
        self._by_key: dict[bytes, list[int]] = {}
        # A few entries of each column, to find candidate duplicates without full compares.
        self._probe = np.unique(np.linspace(0, max(n - 1, 0), num=min(n, 256)).astype(np.int64))

    def add(self, block: np.ndarray) -> np.ndarray:
        """Add the columns of an n × k block; return their k indices (columns of the sums)."""
        block = np.asarray(block, dtype=np.float64)
        index = np.empty(block.shape[1], dtype=np.int64)
        for j in range(block.shape[1]):
            col = np.ascontiguousarray(block[:, j])
            key = col[self._probe].tobytes()
            for u in self._by_key.get(key, ()):
                if np.array_equal(self.cols[u], col):
                    index[j] = u
                    break
            else:
                self._by_key.setdefault(key, []).append(len(self.cols))
                index[j] = len(self.cols)
                self.cols.append(col)
        return index

    def resampled_sums(self, resamples: int, seed: int, *, exact: bool = False) -> np.ndarray:
        """(resamples × number of distinct columns) float64: ``Wᵀ X`` for the items' weights.

        Large products run in float32 within a chunk of items, accumulated in float64
        (relative error ~1e-7 on the sums, far below the Monte-Carlo error of the
        bootstrap) unless ``exact``: float64 throughout, so sums of integer columns are exact
        integers whatever the BLAS order.
        """
        u = len(self.cols)
        out = np.zeros((resamples, u), dtype=np.float64)
        if resamples == 0 or u == 0:
            return out
        work = resamples * self.n * u
        dtype = np.float64 if exact or work <= _FLOAT64_MAX_WORK else np.float32
        x = np.empty((self.n, u), dtype=dtype)
        for j, col in enumerate(self.cols):
            x[:, j] = col
        for items, w in iter_resample_weights(self.keys, resamples, seed, dtype):
            out += w.T @ x[items]
        return out


# --------------------------------------------------------------------------- intervals


def _quantiles(alpha: float) -> list[float]:
    return [100 * alpha / 2, 100 * (1 - alpha / 2)]


def _containing(point: float, lo: float, hi: float) -> Estimate:
    """THE clamping rule: the interval is widened, if needed, to contain its point."""
    return Estimate(point, float(min(lo, point)), float(max(hi, point)))


def percentile_interval(
    point: float | None, boot: np.ndarray | None, alpha: float = 0.05
) -> Estimate:
    """``point`` with the percentile interval of the defined (finite) values of ``boot``.

    No interval when ``point`` or ``boot`` is ``None`` or no resample is defined; an
    undefined point stays ``None``. The interval contains the point (module doc).
    """
    if point is None or boot is None:
        return Estimate(point, None, None)
    boot = np.asarray(boot, dtype=np.float64)
    finite = boot[np.isfinite(boot)]
    if finite.size == 0:
        return Estimate(point, None, None)
    lo, hi = np.percentile(finite, _quantiles(alpha))
    return _containing(point, lo, hi)


def percentile_intervals(
    points: Mapping[K, float | None],
    boots: Mapping[K, np.ndarray] | None,
    alpha: float = 0.05,
) -> dict[K, Estimate]:
    """:func:`percentile_interval` of many statistics at once (one vectorized percentile).

    ``boots[k]`` holds the resampled values of ``points[k]`` (all of one length);
    ``boots=None`` (no resampling) gives points without intervals.
    """
    names = list(points)
    if boots is None or not names:
        return {k: Estimate(points[k], None, None) for k in names}
    rows = np.vstack([np.asarray(boots[k], dtype=np.float64) for k in names])
    return dict(zip(names, percentile_rows([points[k] for k in names], rows, alpha)))


def percentile_rows(points: Sequence[float | None], rows: np.ndarray, alpha: float = 0.05) -> list[Estimate]:
    """:func:`percentile_interval` of ``points[i]`` over the resampled values ``rows[i]`` (m × resamples).

    The same numbers as ``np.percentile`` (its default linear method), computed by one sort
    of the rows: a ledger refresh takes the intervals of 50 cells × 13 terms at once.
    """
    rows = np.asarray(rows, dtype=np.float64)
    m, r = rows.shape
    clean = np.isfinite(rows).all(axis=1) if r else np.zeros(m, dtype=bool)
    lo = np.full(m, np.nan)
    hi = np.full(m, np.nan)
    if clean.all():
        lo, hi = _row_quantiles(rows, _quantiles(alpha))
    elif clean.any():
        lo[clean], hi[clean] = _row_quantiles(rows[clean], _quantiles(alpha))
    out = []
    for i, point in enumerate(points):
        if point is None:
            out.append(Estimate(None, None, None))
        elif not clean[i]:
            out.append(percentile_interval(point, rows[i], alpha))
        else:
            out.append(_containing(point, lo[i], hi[i]))
    return out


def _row_quantiles(rows: np.ndarray, percents: Sequence[float]) -> list[np.ndarray]:
    """numpy's linear-method percentiles of each row, bit for bit, from one sort of the rows.

    (A sort beats ``np.percentile`` along the rows — it partitions once per percent and
    order statistic — on a ledger's resampled terms, which are full of ties.)
    """
    srt = np.sort(rows, axis=1)
    n = srt.shape[1]
    out = []
    for q in percents:
        virtual = np.true_divide(q, 100) * (n - 1)
        below = int(np.floor(virtual))
        above = min(below + 1, n - 1)
        gamma = virtual - below
        a, b = srt[:, below], srt[:, above]
        diff = b - a
        # numpy's _lerp: from the nearer end, so that gamma = 1 gives b exactly.
        out.append(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)
    return out


# --------------------------------------------------------------------------- bootstraps


def mean_and_resampled(
    values: np.ndarray, resamples: int, seed: int, keys: np.ndarray | Sequence[int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Means over items (axis 0) and their resampled means ``Σw·x / Σw`` (resamples × ...).

    ``n`` must be at least 1; ``keys`` are the items' bootstrap keys (default: positions). A
    resample whose weights are all 0 gives NaN. Public for a caller that needs the resampled
    means themselves (e.g. a paired bootstrap's p-value), not only their interval.
    """
    n = values.shape[0]
    flat = values.reshape(n, -1)
    num = np.zeros((resamples, flat.shape[1]), dtype=np.float64)
    den = np.zeros(resamples, dtype=np.float64)
    for items, w in iter_resample_weights(item_keys(n, keys), resamples, seed):
        num += w.T @ flat[items]
        den += w.sum(axis=0)
    boot = ratio(num, den[:, None]).reshape((resamples,) + values.shape[1:])
    return values.mean(axis=0), boot


def bootstrap_mean(
    values: np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED, alpha: float = 0.05,
    keys: np.ndarray | Sequence[int] | None = None,
) -> Estimate:
    """The mean of ``values`` (one per item) with a percentile bootstrap interval.

    No items give ``Estimate(None, None, None)``; ``resamples=0`` gives the mean without an
    interval. One item is resampled like many: its interval is the point itself (all a
    bootstrap can say of one item), shown rather than left out. Values must be finite: leave
    undefined items out before calling. ``keys``: the items' bootstrap keys (e.g. sids, so the
    interval pairs with the ledger's); default their positions.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"bootstrap_mean takes a 1-D array, got shape {values.shape}")
    resamples = check_bootstrap_args(resamples, alpha)
    if len(values) == 0:
        return Estimate(None, None, None)
    if resamples == 0:
        return Estimate(float(np.mean(values)), None, None)
    mean, boot = mean_and_resampled(values, resamples, seed, keys)
    return percentile_interval(float(mean), boot, alpha)


def bootstrap_means(
    block: np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED, alpha: float = 0.05,
    keys: np.ndarray | Sequence[int] | None = None,
) -> list[Estimate]:
    """:func:`bootstrap_mean` of each column of an (items × m) block, all on the same resamples."""
    block = np.asarray(block, dtype=np.float64)
    if block.ndim != 2:
        raise ValueError(f"bootstrap_means takes an (items × m) array, got shape {block.shape}")
    resamples = check_bootstrap_args(resamples, alpha)
    n, m = block.shape
    if n == 0:
        return [Estimate(None, None, None)] * m
    if resamples == 0:
        return [Estimate(float(v), None, None) for v in block.mean(axis=0)]
    means, boot = mean_and_resampled(block, resamples, seed, keys)
    points = {j: float(means[j]) for j in range(m)}
    return list(percentile_intervals(points, {j: boot[:, j] for j in range(m)}, alpha).values())


def bootstrap_ratio(
    num: np.ndarray,
    den: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
) -> Estimate:
    """The pooled ratio Σnum / Σden over items, resampled by item (e.g. cited steps / steps).

    ``None`` when Σden is 0; a resample whose Σden is 0 is undefined and left out.
    ``resamples=0`` gives the ratio without an interval (one item: the point as its interval).
    """
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    n = common_length([len(num), len(den)], "ratio numerator and denominator")
    resamples = check_bootstrap_args(resamples, alpha)
    total = float(den.sum())
    if total == 0:
        return Estimate(None, None, None)
    point = float(num.sum()) / total
    if resamples == 0:
        return Estimate(point, None, None)
    wnum = np.zeros(resamples, dtype=np.float64)
    wden = np.zeros(resamples, dtype=np.float64)
    for items, w in iter_resample_weights(item_keys(n), resamples, seed):
        wnum += num[items] @ w
        wden += den[items] @ w
    return percentile_interval(point, ratio(wnum, wden), alpha)


def paired_columns(a: np.ndarray | Sequence[float], b: np.ndarray | Sequence[float],
                   what: str) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` as float64 columns of one length with finite values, else ``ValueError`` naming ``what``."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"{what}: two 1-D arrays expected, got shapes {a.shape} and {b.shape}")
    common_length([len(a), len(b)], what)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError(f"{what} must be finite; leave out the items either side lacks")
    return a, b


def paired_mean_difference(
    a: np.ndarray,
    b: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
    keys: np.ndarray | Sequence[int] | None = None,
) -> Estimate:
    """mean(a) − mean(b) over the same items (bootstrap ``keys``, default positions), with a paired bootstrap interval.

    ``a[i]`` and ``b[i]`` are two measurements of item i (e.g. the score of question i in
    run A and in run B). Each resample draws items, keeping both measurements of an item
    together, so what the two share (an item's difficulty) cancels and the interval is
    that of the *difference*, much narrower than two independent intervals would suggest.
    Equal inputs (two or more items) give exactly ``Estimate(0.0, 0.0, 0.0)``. The interval
    excludes 0 at level ``alpha`` when one side is reliably better.

    Both arrays must have the same length and finite values: align them on the items both
    sides measured before calling. Rules as :func:`bootstrap_mean` (no items → ``None``,
    one item or ``resamples=0`` → no interval).
    """
    a, b = paired_columns(a, b, "paired measurements")
    return bootstrap_mean(a - b, resamples=resamples, seed=seed, alpha=alpha, keys=keys)


def wilson_interval(successes: int, trials: int, alpha: float = 0.05) -> tuple[float, float] | None:
    """The Wilson score interval for a binomial proportion, at level ``1 − alpha``; None with no trials.

    For figures such as "the intervals covered in 998 of 1,000 replays": unlike the normal
    (Wald) interval it stays inside [0, 1] and does not collapse to a point at 0 or n successes.
    """
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be within [0, trials], got {successes} of {trials}")
    z = NormalDist().inv_cdf(1 - alpha / 2)
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)
