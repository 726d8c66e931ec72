"""Stopping rules for sequential runs: ask each cell only until the sweep's question is answered.

Why: on a laptop the model is the cost, and most answers of a sweep go to cells that were
clearly worse early on. A sequential run (``run --stop-when best|precision``) answers the
samples in one seeded random order, in rounds across the cells still asked, and stops asking a
cell once its question is settled, with intervals (:mod:`workbench.metrics.confseq`) that hold
at whatever round it stopped, for the full run's value.

The protocol. Cells c = 1..K share one random order of the N samples (:func:`sample_order`). In
round t every cell still asked answers the t-th sample of the order, so a cell that stopped after
n_c rounds has answered exactly the first n_c samples, and two cells' paired differences use
their common prefix. Each cell has a confidence sequence (CS) for its full-run S_llm (the mean of
its scores over all N samples), each pair of cells one for the full-run mean difference.

The rules (:class:`StopSettings`):

- ``best``: the *leader* is the asked cell with the highest running mean. After each round, an
  asked cell stops when the CS of (its mean − the leader's) has its upper end ≤ the tolerance E:
  it cannot beat the leader by more than E, so naming the leader loses at most E (the ε-best rule
  that gives the savings). Why it stopped is said as ``"worse"`` when the CS lies below 0 (known
  worse) or its running difference is below −E (it trails by more than the tolerance, and cannot
  lead by more than it), and as ``"tied"`` otherwise (within E of the leader, as far as is known).
  With E > 0 the upper end crosses E before it crosses 0, so without the second test a cell 0.3
  behind would read "tied". The run ends when one cell is left: that cell is ``"best"``, the winner. The pair sequences of
  every two asked cells are kept up to date, since the leader can change. The decisions read the
  pair's capital at the differences 0 and ±E exactly (the CS's *probes*), not on its grid; the
  reported pair interval contains those probes' verdicts, so it agrees with them.
- ``precision``: each cell stops once its CS half-width is ≤ E (``"precision"``).
- A cell that answers all N samples is ``"exhausted"`` (the rule saved nothing on it), unless
  it is the winner; one still asked is None. ``limit`` caps the rounds: cells still asked then keep None (undecided), and there is no
  winner. (A live ``--limit L`` that restricts the dataset to its first L samples is a smaller
  population instead: pass those L samples.)

Alpha. ``alpha`` is the probability that *any* interval the run reports misses, at any time,
however long it ran. It is split equally (Bonferroni) over every sequence the run can report:
the K cell sequences, plus for ``best`` the K(K−1)/2 pair sequences, so each sequence runs at
level ``alpha / (K + K(K−1)/2)`` (``best``) or ``alpha / K`` (``precision``)
(:func:`sequence_alpha`). Each sequence is time-uniform, so the union bound covers every round
and every stopping time at once.

Calls. On a given sample, cells whose prompts are identical cost one model call: the caller
gives a prompt-group id per sample and cell, and a round costs the number of distinct groups
among the cells asked in it (:func:`round_calls`). The full run costs that over all K cells and
all N samples.

One core, two drivers: :class:`SequentialRun` is the live run's state (feed a round's scores, ask
who is still asked); :func:`simulate` drives it over a complete score matrix. :func:`simulate_many`
is the vectorised replay of many orders at once: it advances the very same
:class:`~workbench.metrics.confseq.BettingBatch` rows and applies the very same round functions
(:func:`_best_round`, :func:`_precision_round`), so it reaches identical decisions, intervals and
call counts (tests/test_stopping.py checks it against :func:`simulate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from workbench.metrics.confseq import DEFAULT_GRID, BettingBatch

__all__ = [
    "RULES",
    "REASONS",
    "StopSettings",
    "CellState",
    "Outcome",
    "SequentialRun",
    "sequence_count",
    "sequence_alpha",
    "sample_order",
    "round_calls",
    "full_run_calls",
    "simulate",
    "simulate_many",
]

RULES = ("best", "precision")
REASONS = ("best", "worse", "tied", "precision", "exhausted")
# Stop reasons as small integers in the vectorised code: 0 is "still asked" (None).
_CODE = {reason: k + 1 for k, reason in enumerate(REASONS)}
_BEST, _WORSE, _TIED, _PRECISION, _EXHAUSTED = (_CODE[r] for r in REASONS)
# Pair sequences read the interval on a grid of 2000 steps of the [0, 1] scale: 0.001 on the difference.
PAIR_GRID = 2 * DEFAULT_GRID


@dataclass(frozen=True)
class StopSettings:
    """A stopping rule and its settings: ``rule`` is ``best`` or ``precision``.

    ``tolerance`` is E: for ``best`` the difference within which two cells count as tied, for
    ``precision`` the target half-width. ``limit`` caps the rounds (None: up to N).
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
class CellState:
    """One cell now: samples answered, the interval for its full-run S_llm (None before any), why it stopped."""

    answered: int
    lo: float | None
    hi: float | None
    stopped: str | None


@dataclass(frozen=True)
class Outcome:
    """A finished (or capped) sequential run: per cell state, the winner (``best`` only), calls used and full."""

    cells: tuple[CellState, ...]
    winner: int | None
    calls: int
    full_calls: int
    rounds: int


def sequence_count(rule: str, cells: int) -> int:
    """How many sequences a run can report: K cells, plus K(K−1)/2 pairs for ``best``."""
    return cells + (cells * (cells - 1) // 2 if rule == "best" else 0)


def sequence_alpha(settings: StopSettings, cells: int) -> float:
    """Each sequence's level: ``alpha`` split equally over :func:`sequence_count` sequences (Bonferroni)."""
    return settings.alpha / max(sequence_count(settings.rule, cells), 1)


def sample_order(population: int, seed: int, replay: int = 0) -> np.ndarray:
    """The seeded random order of samples 0..N−1: a pure function of (seed, replay)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(replay)])).permutation(population)


def round_calls(groups: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """Model calls of one round per row: distinct prompt groups among the asked cells.

    ``groups`` and ``asked`` are (rows, K): the group ids (≥ 0) of each cell on the row's sample,
    and which cells answer it.
    """
    g = np.where(asked, groups, -1)
    g.sort(axis=1)
    fresh = np.ones_like(g, dtype=bool)
    fresh[:, 1:] = g[:, 1:] != g[:, :-1]
    return ((g >= 0) & fresh).sum(axis=1)


def full_run_calls(groups: np.ndarray) -> int:
    """Model calls of the full run: every cell on every sample, one call per distinct prompt group."""
    groups = np.asarray(groups)
    return int(round_calls(groups, np.ones(groups.shape, dtype=bool)).sum())


def _pair_tables(cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (a, b), a < b, in a fixed order, and the (K, K) table of each ordered pair's index."""
    a, b = np.triu_indices(cells, k=1)
    index = np.full((cells, cells), -1, dtype=np.int64)
    index[a, b] = index[b, a] = np.arange(a.size)
    return a, b, index


def _probes(tolerance: float) -> np.ndarray:
    """The differences −E, 0, E on the [0, 1] scale of the pair sequences."""
    return (np.array([-tolerance, 0.0, tolerance]) + 1.0) / 2.0


def _pair_verdicts(status: dict[str, np.ndarray]) -> np.ndarray:
    """(rows, 4) booleans from a pair batch's probe status: a worse, a tied, b worse, b tied (D = a − b)."""
    return np.stack([
        status["below"][:, 1],      # hi < 0: a is worse than b
        status["at_most"][:, 2],    # hi ≤ E: a cannot beat b by more than E
        status["above"][:, 1],      # lo > 0: b is worse than a
        status["at_least"][:, 0],   # lo ≥ −E: b cannot beat a by more than E
    ], axis=1)


def _best_round(asked: np.ndarray, sums: np.ndarray, verdicts: np.ndarray, index: np.ndarray, answered: int,
                tolerance: float) -> np.ndarray:
    """The ``best`` rule after a round, for R runs at once: each cell's new stop code (0: still asked).

    ``asked`` (R, K) are the cells that answered this round, ``sums`` (R, K) their score sums
    (all asked cells have answered ``answered`` samples, so sums rank their means; equal sums go
    to the lower cell index), ``verdicts`` (R, pairs, 4) the pairs' :func:`_pair_verdicts`,
    ``index`` the pair table. A stopping cell is "worse" when its CS lies below 0 or its running
    difference with the leader is below −``tolerance``, else "tied".
    """
    runs, cells = asked.shape
    codes = np.zeros((runs, cells), dtype=np.int8)
    live = asked.any(axis=1)
    leader = np.where(asked, sums, -np.inf).argmax(axis=1)
    rows = np.arange(runs)
    for c in range(cells):
        check = asked[:, c] & (leader != c)
        if not check.any():
            continue
        pair = index[c, leader]
        first = c < leader                      # c is a in (a, b): its difference is D, else −D
        worse = np.where(first, verdicts[rows, pair, 0], verdicts[rows, pair, 2])
        tied = np.where(first, verdicts[rows, pair, 1], verdicts[rows, pair, 3])
        behind = sums[:, c] - sums[rows, leader] < -tolerance * answered
        codes[:, c] = np.where(check & (worse | (tied & behind)), _WORSE, np.where(check & tied, _TIED, 0))
    left = asked & (codes == 0)
    alone = live & (left.sum(axis=1) == 1)
    codes[alone, leader[alone]] = _BEST
    return codes


def _precision_round(asked: np.ndarray, lo: np.ndarray, hi: np.ndarray, tolerance: float) -> np.ndarray:
    """The ``precision`` rule after a round: cells whose interval half-width is ≤ E stop (code per cell)."""
    narrow = asked & ((hi - lo) / 2.0 <= tolerance)
    return np.where(narrow, _PRECISION, 0).astype(np.int8)


def _end_of_round(codes: np.ndarray, asked: np.ndarray, answered: int, population: int) -> np.ndarray:
    """After the last sample every cell asked in it is exhausted, but the winner: the rule saved nothing on them.

    (At n = N every interval is exact, so the rule itself would always decide there.)
    """
    if answered >= population:
        codes = np.where(asked & (codes != _BEST), _EXHAUSTED, codes).astype(np.int8)
    return codes


def _reason(code: int) -> str | None:
    return None if code == 0 else REASONS[code - 1]


def _optional(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


class SequentialRun:
    """The live state of a sequential run over ``cells`` cells and a population of ``population`` samples.

    Each round: :meth:`asked` lists the cells to ask on the next sample of the order; pass their
    scores (in [0, 1], in that order) to :meth:`feed`. :meth:`state` gives each cell's
    :class:`CellState`, :meth:`pair_interval` a pair's difference interval; :attr:`done` says
    when the run is over. The state is a pure function of the rounds fed, so a resumed run
    rebuilds it by feeding its recorded complete rounds again, in order.
    """

    def __init__(self, cells: int, population: int, settings: StopSettings, *, pair_grid: int | None = PAIR_GRID,
                 grid: int = DEFAULT_GRID) -> None:
        if cells < 1:
            raise ValueError(f"a run needs at least one cell, got {cells}")
        self.cells, self.population, self.settings = cells, int(population), settings
        self.alpha = sequence_alpha(settings, cells)
        self._cells = BettingBatch(cells, population, self.alpha, grid=grid)
        self._pa, self._pb, self._index = _pair_tables(cells)
        self._pairs = (BettingBatch(self._pa.size, population, self.alpha, grid=pair_grid,
                                    probes=_probes(settings.tolerance)) if settings.rule == "best" else None)
        self._codes = np.zeros(cells, dtype=np.int8)
        self.round = 0
        if settings.rule == "best" and cells == 1:
            self._codes[0] = _BEST      # nothing to compare: the only cell is the best one

    @property
    def _asked_mask(self) -> np.ndarray:
        return self._codes == 0

    @property
    def done(self) -> bool:
        """True once no cell is asked any more (or the round limit was reached)."""
        limit = self.settings.limit
        return not self._asked_mask.any() or self.round >= self.population or (limit is not None and self.round >= limit)

    def asked(self) -> np.ndarray:
        """Indices of the cells to ask on the next sample (empty when the run is done)."""
        return np.array([], dtype=np.int64) if self.done else np.flatnonzero(self._asked_mask)

    @property
    def winner(self) -> int | None:
        """The cell the ``best`` rule named, once it has."""
        best = np.flatnonzero(self._codes == _BEST)
        return int(best[0]) if best.size else None

    @property
    def leader(self) -> int | None:
        """The asked cell with the highest running mean now (``best``; None before the first round)."""
        if self.round == 0:
            return None
        mask = self._asked_mask if self._asked_mask.any() else self._codes == _BEST
        return int(np.where(mask, self._cells.total, -np.inf).argmax()) if mask.any() else None

    def feed(self, scores: Sequence[float] | np.ndarray) -> list[int]:
        """Record one round: ``scores`` of the :meth:`asked` cells on the next sample. Returns the cells that stopped."""
        asked = self.asked()
        if asked.size == 0:
            raise ValueError("the run is done: no cell is asked")
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
        if scores.size != asked.size:
            raise ValueError(f"{scores.size} scores for {asked.size} asked cells")
        self._cells.update(scores, asked)
        mask = self._asked_mask
        if self._pairs is not None:
            both = np.flatnonzero(mask[self._pa] & mask[self._pb])
            full = np.zeros(self.cells)
            full[asked] = scores
            self._pairs.update((full[self._pa[both]] - full[self._pb[both]] + 1.0) / 2.0, both)
        self.round += 1
        lo, hi = self._cells.intervals()
        if self.settings.rule == "best":
            verdicts = _pair_verdicts(self._pairs.probe_status())
            codes = _best_round(mask[None], self._cells.total[None], verdicts[None], self._index, self.round,
                                self.settings.tolerance)[0]
        else:
            codes = _precision_round(mask[None], lo[None], hi[None], self.settings.tolerance)[0]
        codes = _end_of_round(codes[None], mask[None], self.round, self.population)[0]
        stopped = np.flatnonzero(codes)
        self._codes[stopped] = codes[stopped]
        return [int(c) for c in stopped]

    def state(self, cell: int) -> CellState:
        """Cell ``cell`` now: answered samples, its interval for the full-run S_llm, why it stopped (or None)."""
        lo, hi = self._cells.intervals()
        return CellState(int(self._cells.n[cell]), _optional(lo[cell]), _optional(hi[cell]), _reason(self._codes[cell]))

    def states(self) -> tuple[CellState, ...]:
        """Every cell's :meth:`state`, in cell order."""
        return tuple(self.state(c) for c in range(self.cells))

    def pair_interval(self, a: int, b: int) -> tuple[float, float] | None:
        """The interval for the full-run mean of (cell a − cell b) over their common samples (``best`` only)."""
        if self._pairs is None or a == b:
            return None
        lo, hi = self._pairs.intervals()
        p = self._index[a, b]
        if np.isnan(lo[p]):
            return None
        d_lo, d_hi = 2.0 * lo[p] - 1.0, 2.0 * hi[p] - 1.0
        return (float(d_lo), float(d_hi)) if a < b else (float(-d_hi), float(-d_lo))


def _check_matrix(scores: np.ndarray, groups: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] < 1 or scores.shape[1] < 1:
        raise ValueError(f"scores must be an (N samples × K cells) matrix, got shape {scores.shape}")
    if not np.all((scores >= 0) & (scores <= 1)):
        raise ValueError("scores must lie in [0, 1]")
    if groups is None:
        groups = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    groups = np.asarray(groups)
    if groups.shape != scores.shape:
        raise ValueError(f"groups must match scores' shape {scores.shape}, got {groups.shape}")
    if not np.issubdtype(groups.dtype, np.integer) or (groups < 0).any():
        raise ValueError("group ids must be non-negative integers")
    return scores, groups


def _retire(batch: BettingBatch, ids: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Drop a batch's rows that are no longer read, once they are a quarter of it; the kept rows' ids."""
    if keep.size and keep.mean() < 0.75:
        batch.keep(np.flatnonzero(keep))
        return ids[keep]
    return ids


def simulate(scores: np.ndarray, groups: np.ndarray | None, order: np.ndarray | Sequence[int],
             settings: StopSettings) -> Outcome:
    """Run the rule as a live run would, answering from the complete ``scores`` (N × K) in ``order``.

    ``groups`` (N × K) are the prompt-group ids (None: every cell its own prompt).
    """
    scores, groups = _check_matrix(scores, groups)
    order = np.asarray(order, dtype=np.int64)
    run = SequentialRun(scores.shape[1], scores.shape[0], settings)
    calls = 0
    while not run.done:
        sample = order[run.round]
        asked = run.asked()
        mask = np.zeros(scores.shape[1], dtype=bool)
        mask[asked] = True
        calls += int(round_calls(groups[sample][None], mask[None])[0])
        run.feed(scores[sample, asked])
    return Outcome(run.states(), run.winner, calls, full_run_calls(groups), run.round)


def simulate_many(scores: np.ndarray, groups: np.ndarray | None, orders: np.ndarray,
                  settings: StopSettings) -> list[Outcome]:
    """:func:`simulate` for many orders at once (R × N), vectorised over orders, cells and pairs.

    Every cell and pair sequence is advanced every round whether asked or not (its state at
    round t is what a live run's is if it was asked through round t), and a cell's interval is
    taken at the round it stopped.
    """
    scores, groups = _check_matrix(scores, groups)
    orders = np.atleast_2d(np.asarray(orders, dtype=np.int64))
    runs, (population, cells) = orders.shape[0], scores.shape
    alpha = sequence_alpha(settings, cells)
    best = settings.rule == "best"
    pa, pb, index = _pair_tables(cells)
    # Each batch row is one (order, cell) or (order, pair) sequence; ``*_ids`` say which (flat index).
    # Rows nobody will read again (a stopped cell's, a pair with a stopped cell) are dropped.
    cell_batch, cell_ids = BettingBatch(runs * cells, population, alpha), np.arange(runs * cells)
    pair_batch = BettingBatch(runs * pa.size, population, alpha, grid=None, probes=_probes(settings.tolerance))
    pair_ids = np.arange(runs * pa.size) if best else np.arange(0)
    if not best:
        pair_batch.keep(pair_ids)
    codes = np.zeros((runs, cells), dtype=np.int8)
    if best and cells == 1:
        codes[:] = _BEST
    answered = np.zeros((runs, cells), dtype=np.int64)
    stop_lo = np.full((runs, cells), np.nan)
    stop_hi = np.full((runs, cells), np.nan)
    calls = np.zeros(runs, dtype=np.int64)
    rounds = np.zeros(runs, dtype=np.int64)
    last = population if settings.limit is None else min(population, settings.limit)
    for t in range(last):
        asked = codes == 0
        live = asked.any(axis=1)
        if not live.any():
            break
        x = scores[orders[:, t]]                                     # (R, K)
        calls += np.where(live, round_calls(groups[orders[:, t]], asked), 0)
        rounds += live
        answered += asked
        cell_batch.update(x.reshape(-1)[cell_ids])
        lo, hi, sums = (np.full(runs * cells, np.nan) for _ in range(3))
        lo[cell_ids], hi[cell_ids] = cell_batch.intervals()
        sums[cell_ids] = cell_batch.total
        lo, hi, sums = lo.reshape(runs, cells), hi.reshape(runs, cells), sums.reshape(runs, cells)
        if best:
            pair_batch.update(((x[:, pa] - x[:, pb] + 1.0) / 2.0).reshape(-1)[pair_ids])
            verdicts = np.zeros((runs * pa.size, 4), dtype=bool)
            verdicts[pair_ids] = _pair_verdicts(pair_batch.probe_status())
            new = _best_round(asked, sums, verdicts.reshape(runs, pa.size, 4), index, t + 1, settings.tolerance)
        else:
            new = _precision_round(asked, lo, hi, settings.tolerance)
        new = _end_of_round(new, asked, t + 1, population)
        stop_lo = np.where(asked, lo, stop_lo)
        stop_hi = np.where(asked, hi, stop_hi)
        codes = np.where(new != 0, new, codes)
        still = codes == 0
        cell_ids = _retire(cell_batch, cell_ids, still.reshape(-1)[cell_ids])
        if best:
            r, p = np.divmod(pair_ids, pa.size)
            pair_ids = _retire(pair_batch, pair_ids, still[r, pa[p]] & still[r, pb[p]])
    full = full_run_calls(groups)
    outcomes = []
    for r in range(runs):
        states = tuple(CellState(int(answered[r, c]), _optional(stop_lo[r, c]), _optional(stop_hi[r, c]),
                                 _reason(codes[r, c])) for c in range(cells))
        winner = np.flatnonzero(codes[r] == _BEST)
        outcomes.append(Outcome(states, int(winner[0]) if winner.size else None, int(calls[r]), full,
                                int(rounds[r])))
    return outcomes
