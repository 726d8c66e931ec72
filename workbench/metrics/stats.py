"""Bootstrap statistics shared by every metric module: one owner for the interval rules.

Resample weights. A bootstrap resample r is a row of multinomial counts W[r] (how many
times each of the n items was drawn: n uniform draws with replacement). W depends only on
``(n, resamples, seed)`` (:func:`iter_resample_counts`), so two statistics computed on the
same items with the same arguments see the same resamples: their difference is a *paired*
bootstrap. Every resampled statistic is a product ``W @ X``, never a Python loop over
resamples.

Intervals. A 95 % (``alpha=0.05``) percentile interval over the resampled values. A
resample where the statistic is undefined (NaN, e.g. a zero denominator) is left out; no
defined resample, an undefined point, or ``resamples=0`` gives no interval (``None``,
never 0). The one clamping rule: an interval always contains its point estimate — if the
percentiles miss it (float round-off on a constant column, or a strongly skewed
resampling distribution), the nearer end is moved onto the point. So every
:class:`Estimate` has ``lo <= value <= hi`` or ``lo is hi is None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable, Iterator, Mapping, TypeVar

import numpy as np

__all__ = [
    "Estimate",
    "check_bootstrap_args",
    "common_length",
    "ratio",
    "optional_float",
    "iter_resample_counts",
    "ResampledColumns",
    "percentile_interval",
    "percentile_intervals",
    "bootstrap_mean",
    "bootstrap_means",
    "mean_and_resampled",
    "bootstrap_ratio",
    "paired_mean_difference",
]

K = TypeVar("K", bound=Hashable)

# W is generated in chunks of at most this many entries (rows × n) and at most
# _CHUNK_MAX_ROWS rows; each chunk is filled _DRAW_ROWS rows at a time (cache-friendly).
_CHUNK_ENTRIES = 1 << 24
_CHUNK_MAX_ROWS = 256
_DRAW_ROWS = 16
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
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def optional_float(x: np.ndarray | float) -> float | None:
    """A scalar as a Python float, or ``None`` if it is NaN (undefined)."""
    x = float(x)
    return None if np.isnan(x) else x


# --------------------------------------------------------------------------- resample weights


def _chunk_rows(n: int) -> int:
    return max(1, min(_CHUNK_MAX_ROWS, _CHUNK_ENTRIES // max(n, 1)))


def iter_resample_counts(
    n: int, resamples: int, seed: int, dtype: type = np.float32
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(first_row, W_chunk)``: the bootstrap resample-count matrix W, in row chunks.

    Row r of W holds how many times each of the ``n`` items was drawn in resample r
    (multinomial counts summing to ``n``: ``n`` uniform draws with replacement, counted with
    ``np.bincount``). W depends only on ``(n, resamples, seed)``: the chunking is a function
    of ``n`` alone, so every caller with the same arguments sees the same W. Memory stays
    bounded by one chunk (at most 16 M entries). The chunk buffer is reused: copy a chunk
    if you keep it past the next iteration.
    """
    rng = np.random.default_rng(seed)
    step = _chunk_rows(n)
    draw = min(_DRAW_ROWS, step)
    idx_dtype = np.uint32 if n <= np.iinfo(np.uint32).max else np.int64
    buf = np.empty((min(step, resamples), n), dtype=dtype)
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        w = buf[:rows]
        for s in range(0, rows, draw):
            r = min(draw, rows - s)
            # uint32 draws are ~4x faster than int64 ones, and a row-by-row bincount of
            # them (cache-sized) is faster than one offset bincount over the whole block.
            idx = rng.integers(0, n, size=(r, n), dtype=idx_dtype)
            for j in range(r):
                w[s + j] = np.bincount(idx[j], minlength=n)
        yield start, w


class ResampledColumns:
    """Columns over the same n items, resampled together by one product ``W @ X``.

    Each distinct column is stored once: identical columns (a mask shared by two cells, a
    prediction compared with itself) get one index, which saves work and makes their
    resampled sums bit-identical, so a paired difference of equal inputs is exactly 0.
    """

    def __init__(self, n: int) -> None:
        self.n = n
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
        """(resamples × number of distinct columns) float64: ``W @ X`` for the shared W.

        Large products run in float32 (relative error ~1e-6 on the sums, far below the
        Monte-Carlo error of the bootstrap) unless ``exact``: float64 throughout, so sums
        of integer columns are exact integers whatever the BLAS order.
        """
        u = len(self.cols)
        out = np.empty((resamples, u), dtype=np.float64)
        if resamples == 0 or u == 0:
            return out
        work = resamples * self.n * u
        dtype = np.float64 if exact or work <= _FLOAT64_MAX_WORK else np.float32
        x = np.empty((self.n, u), dtype=dtype)
        for j, col in enumerate(self.cols):
            x[:, j] = col
        for start, w in iter_resample_counts(self.n, resamples, seed, dtype):
            out[start : start + len(w)] = w @ x
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
    mat = np.column_stack([np.asarray(boots[k], dtype=np.float64) for k in names])
    undefined_somewhere = ~np.isfinite(mat).all(axis=0)
    lo = np.full(len(names), np.nan)
    hi = np.full(len(names), np.nan)
    clean = ~undefined_somewhere
    if clean.any() and len(mat):
        lo[clean], hi[clean] = np.percentile(mat[:, clean], _quantiles(alpha), axis=0)
    out = {}
    for j, k in enumerate(names):
        if points[k] is None:
            out[k] = Estimate(None, None, None)
        elif undefined_somewhere[j] or not len(mat):
            out[k] = percentile_interval(points[k], mat[:, j], alpha)
        else:
            out[k] = _containing(points[k], lo[j], hi[j])
    return out


# --------------------------------------------------------------------------- bootstraps


def mean_and_resampled(
    values: np.ndarray, resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Means over items (axis 0) and their resampled means ``W @ values / n`` (resamples × ...).

    ``n`` must be at least 1. Public for a caller that needs the resampled means themselves
    (e.g. a paired bootstrap's p-value), not only their interval.
    """
    n = values.shape[0]
    boot = np.empty((resamples,) + values.shape[1:], dtype=np.float64)
    for start, w in iter_resample_counts(n, resamples, seed, dtype=np.float64):
        boot[start : start + w.shape[0]] = w @ values / n
    return values.mean(axis=0), boot


def bootstrap_mean(
    values: np.ndarray, *, resamples: int = 2000, seed: int = 0, alpha: float = 0.05
) -> Estimate:
    """The mean of ``values`` (one per item) with a percentile bootstrap interval.

    No items give ``Estimate(None, None, None)``; one item (no spread to resample) or
    ``resamples=0`` give the mean without an interval. Values must be finite: leave
    undefined items out before calling.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"bootstrap_mean takes a 1-D array, got shape {values.shape}")
    resamples = check_bootstrap_args(resamples, alpha)
    if len(values) == 0:
        return Estimate(None, None, None)
    if len(values) < 2 or resamples == 0:
        return Estimate(float(np.mean(values)), None, None)
    mean, boot = mean_and_resampled(values, resamples, seed)
    return percentile_interval(float(mean), boot, alpha)


def bootstrap_means(
    block: np.ndarray, *, resamples: int = 2000, seed: int = 0, alpha: float = 0.05
) -> list[Estimate]:
    """:func:`bootstrap_mean` of each column of an (items × m) block, all on the same resamples."""
    block = np.asarray(block, dtype=np.float64)
    if block.ndim != 2:
        raise ValueError(f"bootstrap_means takes an (items × m) array, got shape {block.shape}")
    resamples = check_bootstrap_args(resamples, alpha)
    n, m = block.shape
    if n == 0:
        return [Estimate(None, None, None)] * m
    if n < 2 or resamples == 0:
        return [Estimate(float(v), None, None) for v in block.mean(axis=0)]
    means, boot = mean_and_resampled(block, resamples, seed)
    points = {j: float(means[j]) for j in range(m)}
    return list(percentile_intervals(points, {j: boot[:, j] for j in range(m)}, alpha).values())


def bootstrap_ratio(
    num: np.ndarray,
    den: np.ndarray,
    *,
    resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> Estimate:
    """The pooled ratio Σnum / Σden over items, resampled by item (e.g. cited steps / steps).

    ``None`` when Σden is 0; a resample whose Σden is 0 is undefined and left out. One item
    or ``resamples=0`` give the ratio without an interval.
    """
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    n = common_length([len(num), len(den)], "ratio numerator and denominator")
    resamples = check_bootstrap_args(resamples, alpha)
    total = float(den.sum())
    if total == 0:
        return Estimate(None, None, None)
    point = float(num.sum()) / total
    if n < 2 or resamples == 0:
        return Estimate(point, None, None)
    boot = np.empty(resamples, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for start, w in iter_resample_counts(n, resamples, seed, dtype=np.float64):
            boot[start : start + w.shape[0]] = (w @ num) / (w @ den)
    return percentile_interval(point, boot, alpha)


def paired_mean_difference(
    a: np.ndarray,
    b: np.ndarray,
    *,
    resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> Estimate:
    """mean(a) − mean(b) over the same items, with a paired bootstrap interval.

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
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"paired_mean_difference takes 1-D arrays, got shapes {a.shape} and {b.shape}")
    common_length([len(a), len(b)], "paired measurements")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("paired measurements must be finite; leave out the items either side lacks")
    return bootstrap_mean(a - b, resamples=resamples, seed=seed, alpha=alpha)
