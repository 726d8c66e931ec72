"""Anytime-valid confidence sequences for a finite population's mean, sampled without replacement.

Why this exists: a sequential run (``run --stop-when best|precision``) looks at its intervals
after every round and stops when they say so. A bootstrap or t interval is valid only at a
sample size fixed in advance; looked at every round and acted on, it misses far more often than
its level says. A *confidence sequence* (CS) is a sequence of intervals that covers at every time
at once, so it holds at whatever moment the run stopped, for whatever reason. The target is the
mean over the run's N questions (what the full run would have measured), and the questions are
answered in a random order without replacement, so the intervals shrink to that exact value at
n = N.

The construction is the betting ("hedged capital") CS of Waudby-Smith & Ramdas: "Confidence
sequences for sampling without replacement" (NeurIPS 2020) and "Estimating means of bounded
random variables by betting" (JRSS-B 2024), as in their package ``confseq.betting``. For values
x_i in [0, 1] drawn without replacement from a population of N, and a candidate mean m:

- after i−1 draws with sum S_{i−1}, the mean of what is left would be
  ``μ_i(m) = (N·m − S_{i−1}) / (N − i + 1)``, so E[x_i | past] = μ_i(m) when m is the truth;
- the capital processes ``K⁺_t(m) = Π_{i≤t} (1 + λ⁺_i·(x_i − μ_i(m)))`` and
  ``K⁻_t(m) = Π_{i≤t} (1 − λ⁻_i·(x_i − μ_i(m)))`` are nonnegative martingales under the truth
  when the bets λ are predictable (fixed before x_i is seen) and keep every factor positive;
- hedging (the maximum form, θ = 1/2): m is excluded once ``max(K⁺/2, K⁻/2) ≥ 1/α``, i.e.
  ``K⁺ ≥ 2/α`` or ``K⁻ ≥ 2/α``. By Ville's inequality each side crosses with probability at
  most α/2 at any time ever, so the truth is excluded, at any time, with probability ≤ α;
- bets: the predictable plug-in ``λ̂_i = sqrt(2·log(2/α) / (σ̂²_{i−1} · i · log(1+i)))`` (or, where the
  number of draws that may come is known and small, tuned to that horizon:
  ``λ̂_i = sqrt(2·log(2/α) / (σ̂²_{i−1} · N))``, ``horizon=True``: the stopping rules use it) with
  the regularised running variance ``σ̂²_{i−1} = (1/4 + Σ_{s<i}(x_s − x̄_s)²) / i``,
  ``x̄_s = (1/2 + S_s)/(s + 1)``, truncated per candidate:
  ``λ⁺ = min(λ̂, c/μ_i(m))``, ``λ⁻ = min(λ̂, c/(1 − μ_i(m)))``, c = 1/2, which keeps every factor
  at least 1 − c.

Each factor of K⁺ is nonincreasing in m (λ⁺·(x − μ) is the smaller of λ̂·(x − μ) and
c·(x/μ − 1), both decreasing in μ, and μ_i(m) increases with m) and each factor of K⁻ is
nondecreasing. So the candidates excluded by K⁺ form a prefix of [0, 1] and those excluded by
K⁻ a suffix: the CS is an interval ``(lo, hi)``, and its running intersection (a candidate once
excluded stays excluded) keeps only the largest prefix and suffix seen.

The interval is read on a grid ``m_j = j/M`` of the [0, 1] scale: ``lo`` is the largest grid
point excluded from below, ``hi`` the smallest excluded from above. The exact ends lie strictly
inside, so the interval rounds outward, by less than 1/M at each end (``DEFAULT_GRID`` = 1000:
at most 0.001). It is then intersected with the range that sampling without replacement leaves
possible, ``[S_n/N, (S_n + N − n)/N]``, which is a single point at n = N: the interval is exact
there. A batch may also carry *probes*: extra candidates tracked exactly, not on the grid (the
stopping rules decide on the differences 0 and ±E that way), which tighten the interval too.

Grid points already excluded are not recomputed: each row keeps only the window of grid points
still inside its interval, repacked as the windows shrink. Capitals are kept as products, not
logs, so every number comes from IEEE-exact basic operations (+ − × ÷ √ and min): a sequence
computed alone, in a batch of any shape, live or offline, gives bit-identical intervals and
decisions (:mod:`workbench.runs.stopping` relies on that).

Before any draw (n = 0) there is no interval: None (NaN in the batch arrays), never 0. If the
two ends ever cross (possible only after the truth was excluded: a miss, probability ≤ α), the
interval is the point where they met, clipped into the possible range.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

__all__ = [
    "DEFAULT_GRID",
    "TRUNCATION",
    "BettingBatch",
    "WoRConfidenceSequence",
    "PairedDifferenceSequence",
    "wor_confidence_sequence",
    "paired_difference_sequence",
]

# Grid intervals on the [0, 1] scale: the interval ends round outward by less than 1/DEFAULT_GRID.
DEFAULT_GRID = 1000
# The bets' truncation c: every capital factor stays ≥ 1 − c (the papers use 1/2 or 3/4).
TRUNCATION = 0.5
# A window is repacked once the widest row needs at most this share of it.
_REPACK_SHARE = 0.75
# Columns searched first for an interval end's move in one draw (the whole window if they all moved).
_BAND = 16


@lru_cache(maxsize=64)
def _log1p_table(population: int) -> np.ndarray:
    """``log(1 + i)`` for i = 0..N, from math.log so that every caller gets the same bits."""
    return np.array([math.log1p(i) for i in range(population + 1)], dtype=np.float64)


def _as_alpha(alpha: float | np.ndarray, rows: int) -> np.ndarray:
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (rows,)).copy()
    if not np.all((a > 0) & (a < 1)):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return a


class BettingBatch:
    """Many independent without-replacement betting CSs (rows), advanced one draw at a time.

    Every row samples from a population of ``population`` values in [0, 1] at level
    ``1 − alpha`` (a float, or one per row). ``grid`` is M, the number of grid steps on [0, 1]
    (None: no grid, probes only). ``probes`` (one row of candidates shared by all rows, or one per
    row) are candidate means tracked exactly, for decisions such as "the interval lies below 0.5".
    """

    def __init__(self, rows: int, population: int, alpha: float | np.ndarray, *, grid: int | None = DEFAULT_GRID,
                 probes: Sequence[float] | np.ndarray | None = None, horizon: bool = False) -> None:
        if population < 1:
            raise ValueError(f"population must be at least 1, got {population}")
        if rows < 0:
            raise ValueError(f"rows must be ≥ 0, got {rows}")
        self.rows, self.population = rows, int(population)
        self.horizon = horizon
        self.alpha = _as_alpha(alpha, rows)
        self._threshold = 2.0 / self.alpha
        self._bet_scale = np.array([2.0 * math.log(2.0 / a) for a in self.alpha], dtype=np.float64)
        self._logs = _log1p_table(self.population)
        self.n = np.zeros(rows, dtype=np.int64)
        self.total = np.zeros(rows, dtype=np.float64)
        self._sq_dev = np.zeros(rows, dtype=np.float64)
        self.grid = grid
        if grid is not None:
            if grid < 1:
                raise ValueError(f"grid must be at least 1, got {grid}")
            width = grid + 1
            self._offset = np.zeros(rows, dtype=np.int64)
            self._p = np.full(rows, -1, dtype=np.int64)       # largest grid index excluded from below
            self._q = np.full(rows, width, dtype=np.int64)    # smallest grid index excluded from above
            self._kp = np.ones((rows, width), dtype=np.float64)
            self._km = np.ones((rows, width), dtype=np.float64)
            self._m = np.broadcast_to(np.arange(width) / grid, (rows, width)).copy()
        pm = np.zeros((rows, 0)) if probes is None else np.broadcast_to(
            np.asarray(probes, dtype=np.float64), (rows, np.shape(probes)[-1])).copy()
        self.probes = pm
        self._pkp = np.ones_like(pm)
        self._pkm = np.ones_like(pm)
        self._p_lower = np.zeros(pm.shape, dtype=bool)       # probe excluded from below (lo > probe)
        self._p_upper = np.zeros(pm.shape, dtype=bool)       # probe excluded from above (hi < probe)

    # -- one draw -------------------------------------------------------------------------------

    def update(self, x: np.ndarray | Sequence[float], rows: np.ndarray | None = None) -> None:
        """Add one draw to each row in ``rows`` (all rows if None): ``x[k]`` is row ``rows[k]``'s value."""
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        idx = None if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
        count = self.rows if idx is None else idx.size
        if x.size != count:
            raise ValueError(f"{x.size} values for {count} rows")
        if count == 0:
            return
        if not np.all((x >= 0.0) & (x <= 1.0)):
            raise ValueError("values must lie in [0, 1]")
        n = self.n if idx is None else self.n[idx]
        if np.any(n >= self.population):
            raise ValueError(f"a row already has all {self.population} draws")
        total = self.total if idx is None else self.total[idx]
        sq_dev = self._sq_dev if idx is None else self._sq_dev[idx]
        i = n + 1
        remaining = (self.population - n).astype(np.float64)
        # μ_i(m) = m·a − b: the remaining population's mean if the whole population's were m.
        a = self.population / remaining
        b = total / remaining
        var_prev = (0.25 + sq_dev) / i
        scale = self._bet_scale if idx is None else self._bet_scale[idx]
        # The bet: tuned to the known horizon N (the population) with ``horizon``, else the plug-in that
        # suits any length. Both are predictable (fixed before x_i is seen), so either keeps the CS valid.
        lam = np.sqrt(scale / ((self.population if self.horizon else i * self._logs[i]) * var_prev))
        new_total = total + x
        det_lo = new_total / self.population
        det_hi = (new_total + (self.population - i)) / self.population
        thr = self._threshold if idx is None else self._threshold[idx]
        if self.grid is not None:
            self._update_grid(idx, x, a, b, lam, thr, det_lo, det_hi)
        if self.probes.shape[1]:
            self._update_probes(idx, x, a, b, lam, thr, det_lo, det_hi)
        mean_hat = (0.5 + new_total) / (i + 1)
        new_sq = sq_dev + (x - mean_hat) ** 2
        if idx is None:
            self.n, self.total, self._sq_dev = i, new_total, new_sq
        else:
            self.n[idx], self.total[idx], self._sq_dev[idx] = i, new_total, new_sq

    @staticmethod
    def _bet(kp: np.ndarray, km: np.ndarray, m: np.ndarray, x: np.ndarray, a: np.ndarray, b: np.ndarray,
             lam: np.ndarray) -> None:
        """Multiply both capitals at candidates ``m`` (rows × columns) by this draw's factors, in place."""
        # Clamped: a feasible candidate's μ is in [0, 1] (rounding may push it just outside, where
        # c/μ would flip sign); an excluded one's value no longer matters.
        mu = np.multiply(m, a[:, None])
        mu -= b[:, None]
        np.maximum(mu, 0.0, out=mu)
        np.minimum(mu, 1.0, out=mu)
        dev = np.subtract(x[:, None], mu)
        lam = lam[:, None]
        if np.all(lam <= TRUNCATION):
            # c/μ and c/(1 − μ) are ≥ c ≥ λ̂ for every μ in [0, 1]: the truncation cannot bind, and
            # skipping it gives the very same bits, in fewer passes.
            dev *= lam
            mu[...] = dev
            dev += 1.0
            kp *= dev
            np.subtract(1.0, mu, out=mu)
            km *= mu
            return
        # μ = 0 or 1 divides by zero: the bound is then +inf and λ̂ applies. Every factor is at
        # least 1 − c > 0; a capital far outside the interval may overflow to +inf, which excludes.
        with np.errstate(divide="ignore", over="ignore"):
            step = np.divide(TRUNCATION, mu)
            np.minimum(step, lam, out=step)
            step *= dev
            step += 1.0
            kp *= step
            np.subtract(1.0, mu, out=step)
            np.divide(TRUNCATION, step, out=step)
            np.minimum(step, lam, out=step)
            step *= dev
            np.subtract(1.0, step, out=step)
            km *= step

    def _update_grid(self, idx, x, a, b, lam, thr, det_lo, det_hi) -> None:
        whole = idx is None
        kp = self._kp if whole else self._kp[idx]
        km = self._km if whole else self._km[idx]
        m = self._m if whole else self._m[idx]
        offset = self._offset if whole else self._offset[idx]
        p_old = self._p if whole else self._p[idx]
        q_old = self._q if whole else self._q[idx]
        with np.errstate(over="ignore"):
            self._bet(kp, km, m, x, a, b, lam)
        p_new = self._lower_edge(kp, offset, p_old, q_old, thr, det_lo)
        q_new = self._upper_edge(km, offset, q_old, p_new, thr, det_hi)
        if whole:
            self._p, self._q = p_new, q_new
        else:
            self._kp[idx], self._km[idx], self._p[idx], self._q[idx] = kp, km, p_new, q_new
        self._repack()

    def _lower_edge(self, kp, offset, p_old, q_old, thr, det_lo) -> np.ndarray:
        """The new largest excluded-from-below grid index: p_old plus the run of excluded points above it.

        The run stops at the upper end q_old, so a row never reads a column outside its own
        interval. It is looked for in a band of columns just above p_old (the edge moves a few
        grid steps per draw), and over the whole window for the rows whose band is all excluded.
        """
        def run(cols: np.ndarray, rows: np.ndarray | slice) -> np.ndarray:
            gidx = offset[rows, None] + cols
            inside = np.minimum(cols, kp.shape[1] - 1)
            excluded = (np.take_along_axis(kp[rows], inside, axis=1) >= thr[rows, None]) | (
                gidx / self.grid < det_lo[rows, None])
            excluded &= gidx < q_old[rows, None]
            return np.where(excluded.all(axis=1), cols.shape[1], np.argmin(excluded, axis=1))

        return p_old + self._edge_run(run, p_old + 1 - offset, kp.shape[1], +1)

    def _upper_edge(self, km, offset, q_old, p_new, thr, det_hi) -> np.ndarray:
        """The new smallest excluded-from-above grid index: q_old minus the run of excluded points below it."""
        def run(cols: np.ndarray, rows: np.ndarray | slice) -> np.ndarray:
            gidx = offset[rows, None] + cols
            inside = np.maximum(cols, 0)
            excluded = (np.take_along_axis(km[rows], inside, axis=1) >= thr[rows, None]) | (
                gidx / self.grid > det_hi[rows, None])
            excluded &= gidx > p_new[rows, None]
            return np.where(excluded.all(axis=1), cols.shape[1], np.argmin(excluded, axis=1))

        return q_old - self._edge_run(run, q_old - 1 - offset, km.shape[1], -1)

    @staticmethod
    def _edge_run(run, start: np.ndarray, width: int, direction: int) -> np.ndarray:
        """Length of the run of excluded columns from ``start`` in ``direction``: a band first, then the window."""
        band = min(_BAND, width)
        cols = start[:, None] + direction * np.arange(band)[None, :]
        found = run(cols, slice(None))
        more = np.flatnonzero(found == band)
        if more.size and band < width:
            found[more] = run(start[more, None] + direction * np.arange(width + 1)[None, :], more)
        return found

    def _repack(self) -> None:
        """Drop the grid columns every row has excluded, once the widest interval needs few enough."""
        width = self._kp.shape[1]
        alive = int((self._q - self._p - 1).max()) if self.rows else 0
        keep = max(alive, 1)
        if keep > _REPACK_SHARE * width or width <= 4:
            return
        start = self._p + 1
        cols = np.clip((start - self._offset)[:, None] + np.arange(keep)[None, :], 0, width - 1)
        self._kp = np.take_along_axis(self._kp, cols, axis=1)
        self._km = np.take_along_axis(self._km, cols, axis=1)
        self._offset = start
        self._m = (start[:, None] + np.arange(keep)[None, :]) / self.grid

    def _update_probes(self, idx, x, a, b, lam, thr, det_lo, det_hi) -> None:
        m = self.probes if idx is None else self.probes[idx]
        kp = self._pkp if idx is None else self._pkp[idx]
        km = self._pkm if idx is None else self._pkm[idx]
        self._bet(kp, km, m, x, a, b, lam)
        lower = (kp >= thr[:, None]) | (m < det_lo[:, None])
        upper = (km >= thr[:, None]) | (m > det_hi[:, None])
        if idx is None:
            self._p_lower |= lower
            self._p_upper |= upper
        else:
            self._pkp[idx], self._pkm[idx] = kp, km
            self._p_lower[idx] |= lower
            self._p_upper[idx] |= upper

    def keep(self, rows: np.ndarray | Sequence[int]) -> None:
        """Keep only ``rows`` (in that order), e.g. to stop paying for sequences nobody will read again.

        Rows are independent, so every kept row goes on exactly as it would have.
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        self.rows = rows.size
        for name in ("alpha", "_threshold", "_bet_scale", "n", "total", "_sq_dev", "probes", "_pkp", "_pkm",
                     "_p_lower", "_p_upper"):
            setattr(self, name, getattr(self, name)[rows])
        if self.grid is not None:
            for name in ("_offset", "_p", "_q", "_kp", "_km", "_m"):
                setattr(self, name, getattr(self, name)[rows])
            self._repack()

    # -- reading --------------------------------------------------------------------------------

    def wor_range(self) -> tuple[np.ndarray, np.ndarray]:
        """The means still possible given the draws, ``[S_n/N, (S_n + N − n)/N]``, per row."""
        lo = self.total / self.population
        hi = (self.total + (self.population - self.n)) / self.population
        return lo, hi

    def intervals(self, *, strict: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Each row's running interval ``(lo, hi)`` for the population mean; NaN for rows with no draw.

        An end set by an excluded candidate (a grid point, a probe) is that candidate: the interval
        is open there. ``strict`` moves such an end one float inward, so that the interval reads as
        closed: a difference whose upper end was the excluded 0 then reads as below 0, as it is.
        """
        det_lo, det_hi = self.wor_range()
        excl_lo = np.full(self.rows, -np.inf)
        excl_hi = np.full(self.rows, np.inf)
        if self.grid is not None:
            excl_lo = np.maximum(excl_lo, self._p / self.grid)
            excl_hi = np.minimum(excl_hi, self._q / self.grid)
        if self.probes.shape[1]:
            excl_lo = np.maximum(excl_lo, np.where(self._p_lower, self.probes, -np.inf).max(axis=1))
            excl_hi = np.minimum(excl_hi, np.where(self._p_upper, self.probes, np.inf).min(axis=1))
        lo, hi = np.maximum(det_lo, excl_lo), np.minimum(det_hi, excl_hi)
        if strict:
            lo = np.where(excl_lo >= det_lo, np.nextafter(lo, np.inf), lo)
            hi = np.where(excl_hi <= det_hi, np.nextafter(hi, -np.inf), hi)
        crossed = lo > hi
        if crossed.any():
            # Only after a miss: the two ends met. Report where, kept within the possible range.
            mid = np.clip((lo + hi) / 2, det_lo, det_hi)
            lo, hi = np.where(crossed, mid, lo), np.where(crossed, mid, hi)
        none = self.n == 0
        return np.where(none, np.nan, lo), np.where(none, np.nan, hi)

    def probe_status(self) -> dict[str, np.ndarray]:
        """Where the interval lies relative to each probe (rows × probes booleans, all sticky).

        ``below``: every mean still in the interval is < the probe (hi < m); ``at_most``: hi ≤ m;
        ``above``: every mean is > the probe (lo > m); ``at_least``: lo ≥ m. The strict forms come
        from the capital alone; the others also count the without-replacement range reaching m
        exactly (at n = N).
        """
        det_lo, det_hi = self.wor_range()
        drawn = (self.n > 0)[:, None]
        return {
            "below": self._p_upper & drawn,
            "at_most": (self._p_upper | (det_hi[:, None] <= self.probes)) & drawn,
            "above": self._p_lower & drawn,
            "at_least": (self._p_lower | (det_lo[:, None] >= self.probes)) & drawn,
        }

    def run(self, values: np.ndarray) -> np.ndarray:
        """Feed ``values`` (rows × draws) column by column; the interval after each draw, (rows, draws, 2)."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[0] != self.rows:
            raise ValueError(f"values must be ({self.rows}, draws), got {values.shape}")
        out = np.empty((self.rows, values.shape[1], 2), dtype=np.float64)
        for t in range(values.shape[1]):
            self.update(values[:, t])
            out[:, t, 0], out[:, t, 1] = self.intervals()
        return out


# -- one sequence -------------------------------------------------------------------------------


def _interval_or_none(lo: float, hi: float) -> tuple[float, float] | None:
    return None if math.isnan(lo) else (float(lo), float(hi))


class WoRConfidenceSequence:
    """The running CS for the mean of a population of ``population`` values in [0, 1], drawn in random order.

    Feed draws with :meth:`update` (one value or several, in draw order); :meth:`interval` is
    valid at level ``1 − alpha`` at any stopping time and exact once all N are drawn.
    """

    def __init__(self, population: int, alpha: float = 0.05, *, grid: int = DEFAULT_GRID) -> None:
        self._batch = BettingBatch(1, population, alpha, grid=grid)

    @property
    def n(self) -> int:
        """Draws so far."""
        return int(self._batch.n[0])

    @property
    def mean(self) -> float | None:
        """Mean of the draws so far (None before any)."""
        return float(self._batch.total[0]) / self.n if self.n else None

    def update(self, values: float | Sequence[float] | np.ndarray) -> None:
        """Add the next draw(s), in the order they were drawn."""
        for v in np.atleast_1d(np.asarray(values, dtype=np.float64)):
            self._batch.update(np.array([v]))

    def interval(self) -> tuple[float, float] | None:
        """``(lo, hi)`` for the population mean now; None before the first draw."""
        lo, hi = self._batch.intervals()
        return _interval_or_none(lo[0], hi[0])


def _to_unit(d: np.ndarray) -> np.ndarray:
    """A difference in [−1, 1] on the [0, 1] scale the CS works on."""
    return (np.asarray(d, dtype=np.float64) + 1.0) / 2.0


def _check_pair(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values differ in shape: {a.shape} vs {b.shape}")
    return a, b


class PairedDifferenceSequence:
    """The running CS for the population mean of ``a − b``, two cells answered on the same questions.

    D = a − b lies in [−1, 1]; the CS of (D + 1)/2 is mapped back, so the grid of ``grid`` steps
    on [0, 1] is a grid of step 2/grid on the difference (the default 2000: 0.001).
    """

    def __init__(self, population: int, alpha: float = 0.05, *, grid: int = 2 * DEFAULT_GRID) -> None:
        self._batch = BettingBatch(1, population, alpha, grid=grid)

    @property
    def n(self) -> int:
        """Pairs drawn so far."""
        return int(self._batch.n[0])

    def update(self, a: float | Sequence[float] | np.ndarray, b: float | Sequence[float] | np.ndarray) -> None:
        """Add the next pair(s) of values of the two cells on the same question(s), in draw order."""
        a, b = _check_pair(np.atleast_1d(a), np.atleast_1d(b))
        for y in _to_unit(a - b):
            self._batch.update(np.array([y]))

    def interval(self) -> tuple[float, float] | None:
        """``(lo, hi)`` for the population mean of a − b now; None before the first pair."""
        lo, hi = self._batch.intervals()
        return _interval_or_none(2.0 * lo[0] - 1.0, 2.0 * hi[0] - 1.0)


# -- offline ------------------------------------------------------------------------------------


def wor_confidence_sequence(values: np.ndarray | Sequence[float], population: int, alpha: float = 0.05, *,
                            grid: int = DEFAULT_GRID) -> np.ndarray:
    """The CS after each draw of ``values`` (in draw order): shape (n, 2), or (B, n, 2) for a (B, n) batch.

    Vectorised over sequences and grid points; each row is one sequence from a population of
    ``population`` values in [0, 1].
    """
    values = np.asarray(values, dtype=np.float64)
    single = values.ndim == 1
    batch = np.atleast_2d(values)
    out = BettingBatch(batch.shape[0], population, alpha, grid=grid).run(batch)
    return out[0] if single else out


def paired_difference_sequence(a: np.ndarray | Sequence[float], b: np.ndarray | Sequence[float], population: int,
                               alpha: float = 0.05, *, grid: int = 2 * DEFAULT_GRID) -> np.ndarray:
    """The CS for the population mean of ``a − b`` after each paired draw: shape (n, 2) (or (B, n, 2))."""
    a, b = _check_pair(a, b)
    unit = wor_confidence_sequence(_to_unit(a - b), population, alpha, grid=grid)
    return 2.0 * unit - 1.0
