"""Stopping rules for sequential runs: ask each configuration only until the sweep's question is answered.

Why: on a laptop the model is the cost, and most answers of a sweep go to cells that were
clearly worse early on. A sequential run (``run --stop-when best|precision``) answers the
samples in one seeded random order and stops asking a configuration once what it says of it is
proved by confidence sequences (:mod:`workbench.metrics.confseq`), valid at whatever moment it
stopped, for the full run's values.

Arms. Cells whose prompts are identical on every sample (same model, same evidence window: the
plan knows every window before any answer) are one *arm*: one configuration, answered and
decided together, reported as identical (:func:`arms_of`). Every arm answers a prefix of the one
shared order; two arms' paired differences use the samples both answered (their common prefix).

The ``best`` rule, LUCB-style (Kalyanakrishnan et al. 2012, fixed-confidence ε-best arm): the
*leader* is the arm not ruled out with the highest running mean. After each step:

- an arm whose difference interval with some other arm lies below 0 is *dropped*: it is
  ``worse`` (than that arm), so it is not the best; it is never asked again;
- an arm whose difference interval with the leader has its upper end ≤ E is *settled* and
  paused (``tied``, or ``worse`` if that upper end is below 0): it cannot beat the leader by
  more than E. It is asked again if a new leader leaves it unsettled, answering from where it
  paused;
- the run ends when every arm left is settled against the leader, which is the winner.

Each step asks, for every unsettled arm, whichever of it and the leader has answered fewer
samples (both when even): the pair's common prefix grows by one sample, and nothing is asked that
no decision needs. Each arm's stop records the difference interval it was settled on
(:class:`Versus`: this arm − that arm, valid at any stopping time).

What is proved. α is split in two halves (Bonferroni). α/2 goes to the difference sequences
that involve the best arm b: each pair sequence runs at level α/(2(A − 1)). If those A − 1
sequences all hold (probability ≥ 1 − α/2), b is never dropped (that would need an interval
wholly below 0 for a difference that is ≥ 0), and at the end b is the winner or settled against
it: the winner is within E of the best. α/2 goes to the A arms' own intervals for their full-run
S_llm, each at α/(2A), which then all hold together. So, with probability ≥ 1 − α: the winner is
within E of the best, no arm dropped as worse is the best, and every arm's interval covers its
full-run value. Each ``worse`` or ``tied`` label is what its own versus interval says, at level
1 − α/(2(A − 1)). At n = N every interval is exact, so the rule always ends; an exact tie goes
to the arm listed first (the lower cell id).

The ``precision`` rule asks each arm until its interval's half-width is ≤ E, each at α/A.

One core, two drivers: :class:`Engine` runs the rule over R orders at once (vectorised); the
live run is an engine of one order (:class:`SequentialRun`, fed as answers come) and a replay
(:func:`workbench.runs.replay.simulate_many`) one of many, so both reach identical decisions. Bets are tuned to the
known horizon N (any predictable bet keeps validity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from workbench.metrics.confseq import DEFAULT_GRID, BettingBatch

__all__ = ["RULES", "REASONS", "StopSettings", "Versus", "CellState", "Outcome", "Engine", "SequentialRun",
           "arms_of", "split_alpha", "sample_order", "distinct_groups", "full_run_calls", "optional_float", "within_verdict"]

RULES = ("best", "precision")
REASONS = ("best", "worse", "tied", "precision")
_CODE = {reason: k + 1 for k, reason in enumerate(REASONS)}
_BEST, _WORSE, _TIED, _PRECISION = (_CODE[r] for r in REASONS)
# Pair sequences read on a grid of 2000 steps of the [0, 1] scale: 0.001 on the difference (live runs only).
PAIR_GRID = 2 * DEFAULT_GRID
# An exact difference at n = N that is this close to a bound counts as on it (float sums of scores).
_EXACT_SLACK = 1e-12


@dataclass(frozen=True)
class StopSettings:
    """A stopping rule and its settings: ``rule`` is ``best`` or ``precision``.

    ``tolerance`` is E: for ``best`` the margin within which an arm cannot beat the winner, for
    ``precision`` the target half-width. ``limit`` caps the steps (None: until decided).
    """

    rule: str
    alpha: float = 0.05
    tolerance: float = 0.02
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {', '.join(RULES)}, got {self.rule!r}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be in [0, 1), got {self.tolerance}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be at least 1, got {self.limit}")


@dataclass(frozen=True)
class Versus:
    """The difference interval (this arm − ``other``) an arm was settled on; ``lo``/``hi`` None in a replay."""

    other: int
    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class CellState:
    """One arm now: samples answered, its interval for its full-run S_llm (None before any), why it stopped,
    and the difference it was settled on (``best``)."""

    answered: int
    lo: float | None
    hi: float | None
    stopped: str | None
    versus: Versus | None = None


@dataclass(frozen=True)
class Outcome:
    """A finished (or capped) sequential run: per arm state, the winner (``best``), calls used and full, steps."""

    cells: tuple[CellState, ...]
    winner: int | None
    calls: int
    full_calls: int
    rounds: int


def arms_of(groups: np.ndarray) -> np.ndarray:
    """Each cell's arm: the index of the first cell whose prompt group is the same on every sample (N × K in)."""
    groups = np.asarray(groups)
    arm = np.arange(groups.shape[1])
    for c in range(groups.shape[1]):
        for d in range(c):
            if arm[d] == d and np.array_equal(groups[:, c], groups[:, d]):
                arm[c] = d
                break
    return arm


def split_alpha(rule: str, arms: int, *, told_best: bool = False) -> tuple[float, float]:
    """(the level of each pair sequence, of each arm's own sequence) as shares of α (see the module).

    ``best``: α/2 over the A − 1 differences with the best arm, α/2 over the A arms; ``precision``:
    every arm at α/A (no pair is read). ``told_best`` (a benchmark's oracle) spends all of α on its
    A − 1 pairs and reports no arm interval.
    """
    if rule == "precision":
        return 0.0, 1.0 / arms
    if told_best:
        return 1.0 / max(arms - 1, 1), 1.0 / arms
    return 0.5 / max(arms - 1, 1), 0.5 / arms


def sample_order(population: int, seed: int, replay: int = 0) -> np.ndarray:
    """The seeded random order of samples 0..N−1: a pure function of (seed, replay)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(replay)])).permutation(population)


def distinct_groups(groups: np.ndarray) -> np.ndarray:
    """Prompt groups relabelled per sample (N × K): each cell's group is the first cell with the same prompt on it."""
    groups = np.asarray(groups)
    out = np.tile(np.arange(groups.shape[1]), (groups.shape[0], 1))
    for c in range(groups.shape[1]):
        for d in range(c):
            same = (groups[:, c] == groups[:, d]) & (out[:, c] == c)
            out[same, c] = out[same, d]
    return out


def full_run_calls(groups: np.ndarray) -> int:
    """Model calls of the full run: every cell on every sample, one call per distinct prompt."""
    relabelled = distinct_groups(groups)
    return int((relabelled == np.arange(relabelled.shape[1])).sum())


def _pair_tables(arms: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (a, b), a < b, in a fixed order."""
    return np.triu_indices(arms, k=1)


class Engine:
    """The rule over ``runs`` independent orders of ``arms`` arms at once (see the module).

    Each step: :meth:`asked` is the (runs × arms) mask of arms to answer their next sample
    (position :attr:`n` in their order); :meth:`feed` takes their scores. ``pair_grid`` reads
    the versus intervals (live runs); ``told_best`` fixes the leader (a benchmark's oracle).
    """

    def __init__(self, runs: int, arms: int, population: int, settings: StopSettings, *,
                 cell_grid: int | None = DEFAULT_GRID, pair_grid: int | None = None, told_best: int | None = None):
        if arms < 1:
            raise ValueError(f"a run needs at least one arm, got {arms}")
        self.R, self.A, self.N, self.settings = runs, arms, int(population), settings
        self.best = settings.rule == "best"
        self.told_best = told_best
        pair_share, cell_share = split_alpha(settings.rule, arms, told_best=told_best is not None)
        self.pair_alpha, self.cell_alpha = settings.alpha * pair_share, settings.alpha * cell_share
        # The arms' own sequences: read by precision's decisions and shown; a replay of best computes them
        # afterwards (cell_grid None here), which gives the same intervals at less cost.
        self.cells = (BettingBatch(runs * arms, population, self.cell_alpha, grid=cell_grid, horizon=True)
                      if cell_grid is not None or not self.best else None)
        self.pa, self.pb = _pair_tables(arms)
        self.P = self.pa.size
        E = settings.tolerance
        self.pairs = (BettingBatch(runs * self.P, population, self.pair_alpha, grid=pair_grid, horizon=True,
                                   probes=(np.array([-E, 0.0, E]) + 1.0) / 2.0) if self.best and self.P else None)
        self.n = np.zeros((runs, arms), dtype=np.int64)
        self.sums = np.zeros((runs, arms))
        self.hist = np.zeros((runs, arms, population))
        self.m = np.zeros((runs, self.P), dtype=np.int64)          # samples fed to each pair: the common prefix
        self.dropped = np.zeros((runs, arms), dtype=bool)
        self.code = np.zeros((runs, arms), dtype=np.int8)          # the arm's standing: 0 asked, else a reason
        self.vs = np.full((runs, arms), -1, dtype=np.int64)        # the arm it was settled against
        self.stop_step = np.full((runs, arms), -1, dtype=np.int64)
        self.steps = np.zeros(runs, dtype=np.int64)
        self.stop_lo = np.full((runs, arms), np.nan)
        self.stop_hi = np.full((runs, arms), np.nan)
        self.leader = np.zeros(runs, dtype=np.int64)
        self.done = np.zeros(runs, dtype=bool)
        self._asked = np.ones((runs, arms), dtype=bool)
        if self.best and arms == 1:
            raise ValueError("best needs two or more distinct configurations to compare")

    # -- reading ------------------------------------------------------------------------------------------
    def asked(self) -> np.ndarray:
        """(runs × arms): the arms that answer their next sample in the next step (none once a run is done)."""
        return self._asked & ~self.done[:, None]

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Each arm's interval for its full-run S_llm now (runs × arms; NaN before its first answer or untracked)."""
        if self.cells is None:
            nan = np.full((self.R, self.A), np.nan)
            return nan, nan
        lo, hi = self.cells.intervals()
        return lo.reshape(self.R, self.A), hi.reshape(self.R, self.A)

    def pair_interval(self, run: int, a: int, b: int) -> tuple[float, float] | None:
        """The interval of (arm a − arm b) over their common prefix (needs ``pair_grid``), or None.

        Closed: an end at an excluded candidate is read one float inside (``strict``), so a difference
        proved below 0 has an upper end below 0, and one proved at most E an upper end at most E. At
        n = N it is the exact difference.
        """
        if self.pairs is None or a == b or self.pairs.grid is None:
            return None
        first, second = min(a, b), max(a, b)
        p = int(np.flatnonzero((self.pa == first) & (self.pb == second))[0])
        if self.m[run, p] == self.N:
            d = (math.fsum(self.hist[run, a]) - math.fsum(self.hist[run, b])) / self.N
            return d, d
        lo_b, hi_b = self.pairs.intervals(strict=True)
        row = run * self.P + p
        if np.isnan(lo_b[row]):
            return None
        d_lo, d_hi = 2.0 * lo_b[row] - 1.0, 2.0 * hi_b[row] - 1.0
        return (float(d_lo), float(d_hi)) if a < b else (float(-d_hi), float(-d_lo))

    # -- one step -----------------------------------------------------------------------------------------
    def feed(self, x: np.ndarray) -> None:
        """Record one step: ``x`` (runs × arms) holds each asked arm's score on its next sample (others unread)."""
        asked = self.asked()
        if not asked.any():
            raise ValueError("every run is done: no arm is asked")
        x = np.asarray(x, dtype=np.float64).reshape(self.R, self.A)
        r, a = np.nonzero(asked)
        values = x[r, a]
        if not np.all((values >= 0) & (values <= 1)):
            raise ValueError("scores must lie in [0, 1]")
        if self.cells is not None:
            self.cells.update(values, r * self.A + a)
        self.hist[r, a, self.n[r, a]] = values
        self.n[r, a] += 1
        self.sums[r, a] += values
        self.steps += asked.any(axis=1)
        if self.pairs is not None:
            common = np.minimum(self.n[:, self.pa], self.n[:, self.pb])
            rr, pp = np.nonzero(common > self.m)
            pos = self.m[rr, pp]
            diff = (self.hist[rr, self.pa[pp], pos] - self.hist[rr, self.pb[pp], pos] + 1.0) / 2.0
            self.pairs.update(diff, rr * self.P + pp)
            self.m[rr, pp] += 1
        self._decide(asked.any(axis=1))

    def _verdicts(self) -> tuple[np.ndarray, np.ndarray]:
        """(below, within), each runs × arms × arms: hi(c − d) < 0, and hi(c − d) ≤ E, as proved now."""
        R, A = self.R, self.A
        below = np.zeros((R, A, A), dtype=bool)
        within = np.zeros((R, A, A), dtype=bool)
        if self.pairs is None:
            return below, within
        st = self.pairs.probe_status()
        v = [s.reshape(R, self.P) for s in (st["below"][:, 1], st["at_most"][:, 2], st["above"][:, 1],
                                             st["at_least"][:, 0])]
        below[:, self.pa, self.pb], within[:, self.pa, self.pb] = v[0], v[1]
        below[:, self.pb, self.pa], within[:, self.pb, self.pa] = v[2], v[3]
        # At n = N the difference is known exactly: decided on exact sums, not on a float running total.
        rr, pp = np.nonzero(self.m == self.N)
        for r, p in zip(rr.tolist(), pp.tolist()):
            a, b = int(self.pa[p]), int(self.pb[p])
            d = (math.fsum(self.hist[r, a]) - math.fsum(self.hist[r, b])) / self.N
            E = self.settings.tolerance
            below[r, a, b], within[r, a, b] = d < -_EXACT_SLACK, d <= E + _EXACT_SLACK
            below[r, b, a], within[r, b, a] = -d < -_EXACT_SLACK, -d <= E + _EXACT_SLACK
        return below, within

    def _decide(self, stepped: np.ndarray) -> None:
        lo, hi = self.intervals()
        live = ~self.done
        if not self.best:
            narrow = (hi - lo) / 2.0 <= self.settings.tolerance
            self._stop(live[:, None] & (self.code == 0) & narrow & stepped[:, None], _PRECISION, lo, hi)
            self._asked = self.code == 0
            self.done |= ~self._asked.any(axis=1) | self._capped()
            return
        below, within = self._verdicts()
        if self.told_best is not None:
            # The oracle reads only the differences with the arm it was told is best: its α is spent on those.
            others = np.arange(self.A) != self.told_best
            below[:, :, others] = False
            within[:, :, others] = False
        rows = np.arange(self.R)
        arm = np.arange(self.A)[None, :]
        # Dropped: proved below some arm, so not the best; the versus is the highest-scoring such arm.
        mean = np.where(self.n > 0, self.sums / np.maximum(self.n, 1), -np.inf)
        newly = live[:, None] & ~self.dropped & below.any(axis=2)
        if self.told_best is not None:
            newly[:, self.told_best] = False
        above_it = np.where(below, mean[:, None, :], -np.inf).argmax(axis=2)
        self._stop(newly, _WORSE, lo, hi)
        self.vs = np.where(newly, above_it, self.vs)
        self.dropped |= newly
        # The leader: the arm left with the highest running mean (told, for the oracle); ties to the lower index.
        standing = np.where(self.dropped, -np.inf, mean)
        leader = standing.argmax(axis=1) if self.told_best is None else np.full(self.R, self.told_best)
        self.leader = np.where(live, leader, self.leader)
        lead = self.leader
        settled = within[rows, :, lead]                       # hi(c − leader) ≤ E
        unsettled = ~self.dropped & ~settled & (arm != lead[:, None])
        n_lead = self.n[rows, lead][:, None]
        ask = unsettled & (self.n <= n_lead)
        ask[rows, lead] |= (unsettled & (self.n >= n_lead)).any(axis=1)
        ask &= self.n < self.N
        # Paused: settled against the leader of now (worse if the interval lies below 0); asked again if a new
        # leader leaves them unsettled.
        paused = ~self.dropped & settled & (arm != lead[:, None]) & live[:, None]
        word = np.where(below[rows, :, lead], _WORSE, _TIED).astype(np.int8)
        self._stop(paused & (self.code == 0), _TIED, lo, hi)
        self.code = np.where(paused, word, self.code)
        self.vs = np.where(paused, lead[:, None], self.vs)
        again = live[:, None] & ~paused & ~self.dropped & (self.code != 0)
        self.code[again], self.vs[again], self.stop_step[again] = 0, -1, -1
        finished = live & ~unsettled.any(axis=1)
        won = np.zeros_like(paused)
        won[rows, lead] = finished
        self._stop(won, _BEST, lo, hi)
        self._asked = ask
        self.done |= finished | self._capped() | (live & ~ask.any(axis=1))

    def _stop(self, mask: np.ndarray, code: int, lo: np.ndarray, hi: np.ndarray) -> None:
        """Arms in ``mask`` stop now with ``code``: their step and their interval at it are kept."""
        self.code = np.where(mask, np.int8(code), self.code)
        self.stop_step = np.where(mask, self.steps[:, None], self.stop_step)
        self.stop_lo = np.where(mask, lo, self.stop_lo)
        self.stop_hi = np.where(mask, hi, self.stop_hi)

    def _capped(self) -> np.ndarray:
        limit = self.settings.limit
        return np.zeros(self.R, dtype=bool) if limit is None else self.steps >= limit

    # -- results ------------------------------------------------------------------------------------------
    def winner(self, run: int) -> int | None:
        """The arm the ``best`` rule named in ``run``, once it has."""
        best = np.flatnonzero(self.code[run] == _BEST)
        return int(best[0]) if best.size else None

    def state(self, run: int, arm: int) -> CellState:
        """Arm ``arm`` of ``run``: answered, its interval (at its stop, or now), its standing and its versus."""
        code = int(self.code[run, arm])
        if code:
            lo, hi = self.stop_lo[run, arm], self.stop_hi[run, arm]
        else:
            lo_now, hi_now = self.intervals()
            lo, hi = lo_now[run, arm], hi_now[run, arm]
        versus = None
        other = int(self.vs[run, arm])
        if code in (_WORSE, _TIED) and other >= 0:
            pair = self.pair_interval(run, arm, other)
            if pair is None:
                versus = Versus(other, None, None)
            else:
                versus = Versus(other, *within_verdict(pair[0], pair[1], code == _WORSE, self.settings.tolerance))
        return CellState(int(self.n[run, arm]), optional_float(lo), optional_float(hi), None if code == 0 else REASONS[code - 1],
                         versus)


def within_verdict(lo: float, hi: float, worse: bool, tolerance: float) -> tuple[float, float]:
    """A versus interval kept within the bound its verdict was proved at (below 0 for ``worse``, at most E for
    ``tied``): the verdict was read exactly, and the interval crossed back from the [0, 1] scale may carry
    float noise (under 1e-12) past that bound."""
    bound = np.nextafter(0.0, -1.0) if worse else tolerance
    top = min(hi, bound) if hi - bound < _EXACT_SLACK else hi
    return min(lo, top), top


def optional_float(x: float) -> float | None:
    """``x``, or None where it is NaN (an end not yet known)."""
    return None if np.isnan(x) else float(x)


class SequentialRun:
    """The live state of a sequential run over the arms of ``cells`` (``arms[c]``: the cell's arm) on ``population``
    samples: an :class:`Engine` of one order, fed as the answers come.

    Each step: :meth:`asked` lists the arms to ask and :meth:`position` where each is in the order;
    pass their scores to :meth:`feed`. The state is a pure function of the steps fed, so a resumed
    run rebuilds it by feeding its recorded answers again in the same steps.
    """

    def __init__(self, arms: Sequence[int], population: int, settings: StopSettings, *,
                 pair_grid: int | None = PAIR_GRID, grid: int = DEFAULT_GRID):
        self.arm_of = np.asarray(arms, dtype=np.int64)
        self.members = sorted(set(self.arm_of.tolist()))
        self.population, self.settings = int(population), settings
        self.engine = Engine(1, len(self.members), population, settings, cell_grid=grid, pair_grid=pair_grid)

    @property
    def round(self) -> int:
        return int(self.engine.steps[0])

    @property
    def done(self) -> bool:
        return bool(self.engine.done[0])

    def asked(self) -> list[int]:
        """The arms (by their first cell) to answer their next sample in the next step."""
        return [self.members[a] for a in np.flatnonzero(self.engine.asked()[0])]

    def position(self, arm: int) -> int:
        """How many samples of the order ``arm`` (a first cell) has answered: its next one is at that position."""
        return int(self.engine.n[0, self.members.index(arm)])

    def feed(self, scores: Sequence[float]) -> list[int]:
        """Record one step: the scores of :meth:`asked`'s arms, in that order. Returns the arms whose standing changed."""
        asked = self.asked()
        if len(scores) != len(asked):
            raise ValueError(f"{len(scores)} scores for {len(asked)} asked arms")
        before = self.engine.code[0].copy()
        x = np.zeros((1, len(self.members)))
        for arm, score in zip(asked, scores):
            x[0, self.members.index(arm)] = float(score)
        self.engine.feed(x)
        return [self.members[a] for a in np.flatnonzero(self.engine.code[0] != before)]

    @property
    def winner(self) -> int | None:
        w = self.engine.winner(0)
        return None if w is None else self.members[w]

    @property
    def leader(self) -> int | None:
        return None if self.round == 0 or not self.settings.rule == "best" else self.members[int(self.engine.leader[0])]

    def state(self, cell: int) -> CellState:
        """Cell ``cell``'s standing: its arm's, with the versus naming the other arm's first cell."""
        s = self.engine.state(0, self.members.index(int(self.arm_of[cell])))
        if s.versus is not None:
            s = CellState(s.answered, s.lo, s.hi, s.stopped,
                          Versus(self.members[s.versus.other], s.versus.lo, s.versus.hi))
        return s

    def states(self) -> tuple[CellState, ...]:
        return tuple(self.state(c) for c in range(self.arm_of.size))

    def pair_interval(self, a: int, b: int) -> tuple[float, float] | None:
        """The interval for the full-run mean of (cell a − cell b) over their arms' common samples (``best``)."""
        ia, ib = self.members.index(int(self.arm_of[a])), self.members.index(int(self.arm_of[b]))
        return self.engine.pair_interval(0, ia, ib)
