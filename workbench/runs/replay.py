"""What a stopping rule would have done: replay it over a complete run's answers in many random orders.

Why: a sequential run saves calls only if its rule stops early on *this kind* of sweep, and its
guarantees (the named winner is within E of the best cell; every interval covers the full-run
value) are promises about chance. Replaying the rule over the recorded answers of a complete run,
in R seeded random orders, shows both at once: the share of model calls it would have used, how
often it named the full run's best cell, and how often every interval it reported covered the
value the full run measured. It is the user's "would it have paid?" (``ledger --replay``) and the
test of the method (``just bench``).

Pure: scores and prompt groups in, a :class:`ReplaySummary` out. The r-th replay answers in
``sample_order(N, seed, r)``, a pure function of (seed, r), so a replay is the same on any machine
and any prefix of R replays is the same whatever R is. It runs
:func:`simulate_many` (the rule's :class:`~workbench.runs.stopping.Engine` over many orders), which reaches the live run's decisions exactly.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from workbench.metrics.stats import wilson_interval
from workbench.metrics.confseq import DEFAULT_GRID, BettingBatch
from workbench.runs.stopping import (PAIR_GRID, REASONS, CellState, Engine, Outcome, StopSettings, Versus, arms_of,
                                     distinct_groups, full_run_calls, optional_float, sample_order, within_verdict)

__all__ = ["ReplaySummary", "replay", "replay_outcomes", "simulate", "simulate_many", "differences_covered", "covered", "labels_right", "COVER_SLACK"]

# An interval "covers" the full-run value up to float noise: at n = N the interval is the running
# sum over N, the truth a mean summed in another order; they may differ in the last bits.
COVER_SLACK = 1e-9
# Orders replayed per vectorised batch: bounds memory (each holds K grid rows and K(K−1)/2 pair rows).
_CHUNK = 100


@dataclass(frozen=True)
class ReplaySummary:
    """What R replays of a stopping rule did (shares are of R, call shares of the full run's calls).

    ``named_best`` counts replays whose winner is within ``tolerance`` of the full run's best
    cell by full-run means (None for ``precision``, which names no winner); ``covered`` counts
    replays where every cell's interval at its stopping time held its full-run S_llm, with
    ``coverage_interval`` its 95 % Wilson interval. For ``best``, ``labels_right`` counts replays
    whose every ``worse``/``tied`` word is true of the full run, and ``differences_covered`` those
    whose every versus interval held the full run's difference.
    """

    rule: str
    alpha: float
    tolerance: float
    seed: int
    replays: int
    cells: int
    population: int
    full_calls: int
    call_share_mean: float
    call_share_sd: float
    call_share_quantiles: tuple[float, float, float]      # 5 %, 50 %, 95 %
    named_best: int | None
    named_best_share: float | None
    covered: int
    coverage: float
    coverage_interval: tuple[float, float]
    labels_right: int | None                              # best: replays whose every worse/tied claim is true
    differences_covered: int | None                       # best: replays whose every versus interval held
    answered_mean: tuple[float, ...]
    stopped: tuple[dict[str, int], ...]                   # per cell: how many replays stopped it for each reason

    def as_dict(self) -> dict:
        """The summary as plain JSON-ready values."""
        return asdict(self)


def covered(outcome: Outcome, truth: np.ndarray) -> bool:
    """Whether every cell's reported interval holds its full-run value (a cell never asked reports none)."""
    return all(cell.lo is None or cell.lo - COVER_SLACK <= value <= cell.hi + COVER_SLACK
               for cell, value in zip(outcome.cells, truth))


def differences_covered(outcome: Outcome, truth: np.ndarray) -> bool:
    """Whether every settled cell's versus interval holds the full run's difference (this cell − that cell)."""
    return all(cell.versus is None or cell.versus.lo is None
               or cell.versus.lo - COVER_SLACK <= value - truth[cell.versus.other] <= cell.versus.hi + COVER_SLACK
               for cell, value in zip(outcome.cells, truth))


def labels_right(outcome: Outcome, truth: np.ndarray, tolerance: float) -> bool:
    """Whether every word the run said of a comparison is true of the full run: each ``worse`` arm below the
    arm it names, each ``tied`` one no more than E above it (``tolerance``)."""
    for cell, value in zip(outcome.cells, truth):
        if cell.versus is None:
            continue
        gap = value - truth[cell.versus.other]
        if (cell.stopped == "worse" and not gap < COVER_SLACK) or (cell.stopped == "tied" and gap > tolerance
                                                                   + COVER_SLACK):
            return False
    return True


def replay_outcomes(scores: np.ndarray, groups: np.ndarray | None, settings: StopSettings, seed: int,
                    replays: int, *, told_best: int | None = None) -> list[Outcome]:
    """The outcome of each of ``replays`` seeded orders (the r-th is ``sample_order(N, seed, r)``); ``told_best``
    replays the oracle that is told the best cell (benchmarks)."""
    population = np.asarray(scores).shape[0]
    out: list[Outcome] = []
    for start in range(0, replays, _CHUNK):
        orders = np.stack([sample_order(population, seed, r) for r in range(start, min(replays, start + _CHUNK))])
        out.extend(simulate_many(scores, groups, orders, settings, told_best=told_best))
    return out


def replay(scores: np.ndarray, groups: np.ndarray | None = None, rule: str = "best", alpha: float = 0.05,
           tolerance: float = 0.02, seed: int = 0, replays: int = 1000, *, limit: int | None = None) -> ReplaySummary:
    """Replay ``rule`` over the complete ``scores`` (N samples × K cells, in [0, 1]) in ``replays`` seeded orders.

    ``groups`` (N × K prompt-group ids, None: all distinct) decide which answers share a model
    call; ``tolerance`` is E (``best``: the tie margin; ``precision``: the half-width).
    """
    if replays < 1:
        raise ValueError(f"replays must be at least 1, got {replays}")
    settings = StopSettings(rule, alpha, tolerance, limit)
    scores = np.asarray(scores, dtype=np.float64)
    outcomes = replay_outcomes(scores, groups, settings, seed, replays)
    truth = scores.mean(axis=0)
    shares = np.array([o.calls / o.full_calls for o in outcomes])
    hits = int(sum(covered(o, truth) for o in outcomes))
    named = right = pairs = None
    if rule == "best":
        top = truth.max()
        named = int(sum(o.winner is not None and truth[o.winner] >= top - tolerance for o in outcomes))
        right = int(sum(labels_right(o, truth, tolerance) for o in outcomes))
        pairs = int(sum(differences_covered(o, truth) for o in outcomes))
    cells = scores.shape[1]
    stopped = []
    for c in range(cells):
        counts: dict[str, int] = {}
        for o in outcomes:
            key = o.cells[c].stopped or "undecided"
            counts[key] = counts.get(key, 0) + 1
        stopped.append({k: counts[k] for k in (*REASONS, "undecided") if k in counts})
    return ReplaySummary(
        rule=rule, alpha=alpha, tolerance=tolerance, seed=seed, replays=replays, cells=cells,
        population=scores.shape[0], full_calls=outcomes[0].full_calls,
        call_share_mean=float(shares.mean()), call_share_sd=float(shares.std(ddof=1)) if replays > 1 else 0.0,
        call_share_quantiles=tuple(float(q) for q in np.quantile(shares, [0.05, 0.5, 0.95])),
        named_best=named, named_best_share=None if named is None else named / replays,
        covered=hits, coverage=hits / replays, coverage_interval=wilson_interval(hits, replays), labels_right=right,
        differences_covered=pairs,
        answered_mean=tuple(float(np.mean([o.cells[c].answered for o in outcomes])) for c in range(cells)),
        stopped=tuple(stopped),
    )


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


def simulate(scores: np.ndarray, groups: np.ndarray | None, order: np.ndarray | Sequence[int],
             settings: StopSettings, *, told_best: int | None = None) -> Outcome:
    """The rule as a live run would run it, answering from the complete ``scores`` (N × K) in ``order``:
    :func:`simulate_many` of one order, with the versus intervals read."""
    return simulate_many(scores, groups, np.asarray(order)[None, :], settings, told_best=told_best,
                         pair_grid=PAIR_GRID)[0]


def simulate_many(scores: np.ndarray, groups: np.ndarray | None, orders: np.ndarray, settings: StopSettings, *,
                  told_best: int | None = None, pair_grid: int | None = None) -> list[Outcome]:
    """The rule over many orders at once (R × N), from complete scores and prompt groups (N × K; None: all distinct).

    Outcomes are per cell: a cell reports its arm's state (cells of one arm are identical). A call is
    a distinct (sample, prompt) answered, whichever arm asked it first. ``told_best`` (a cell)
    runs the oracle that is told the best arm in advance (benchmarks).
    """
    scores, groups = _check_matrix(scores, groups)
    orders = np.atleast_2d(np.asarray(orders, dtype=np.int64))
    runs, (population, cells) = orders.shape[0], scores.shape
    arm_of = arms_of(groups)
    members = sorted(set(arm_of.tolist()))
    index = {m: i for i, m in enumerate(members)}
    arm_scores = scores[:, members]
    told = None if told_best is None else index[int(arm_of[told_best])]
    best = settings.rule == "best"
    engine = Engine(runs, len(members), population, settings, pair_grid=pair_grid, told_best=told,
                    cell_grid=None if best else DEFAULT_GRID)
    relabel = distinct_groups(groups)[:, members]                         # N × A: the call each arm's answer is
    answered = np.zeros((runs, population, cells), dtype=bool)
    calls = np.zeros(runs, dtype=np.int64)
    rows = np.arange(runs)
    while not engine.done.all():
        asked = engine.asked()
        if not asked.any():
            break
        pos = np.minimum(engine.n, population - 1)
        sample = orders[rows[:, None], pos]                               # R × A
        for a in range(len(members)):
            r = np.flatnonzero(asked[:, a])
            s, g = sample[r, a], relabel[sample[r, a], a]
            fresh = ~answered[r, s, g]
            calls[r] += fresh
            answered[r, s, g] = True
        engine.feed(arm_scores[sample, np.arange(len(members))[None, :]])
    full = full_run_calls(groups)
    lo, hi = (_final_intervals(arm_scores, orders, engine.n, engine.cell_alpha) if best
              else (engine.stop_lo, engine.stop_hi))
    # Without a pair grid the engine decided on its probes alone; the versus intervals are read afterwards.
    versus = (_final_versus(arm_scores, orders, engine) if best and told is None and pair_grid is None
              else None)
    outcomes = []
    for r in range(runs):
        states = []
        for c in range(cells):
            a = index[int(arm_of[c])]
            s = engine.state(r, a)
            if best and told is None:
                s = CellState(s.answered, optional_float(lo[r, a]), optional_float(hi[r, a]), s.stopped, s.versus)
            if s.versus is not None:
                v_lo, v_hi = (s.versus.lo, s.versus.hi) if versus is None else versus.get((r, a), (None, None))
                s = CellState(s.answered, s.lo, s.hi, s.stopped, Versus(members[s.versus.other], v_lo, v_hi))
            states.append(s)
        w = engine.winner(r)
        outcomes.append(Outcome(tuple(states), None if w is None else members[w], int(calls[r]), full,
                                int(engine.steps[r])))
    return outcomes


def _final_intervals(scores: np.ndarray, orders: np.ndarray, answered: np.ndarray,
                     alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Each arm's interval after its ``answered`` samples of its order (runs × arms): the sequence a live run
    keeps, read where the arm stopped. Rows are advanced together and kept only while they still have samples."""
    runs, arms = answered.shape
    population = scores.shape[0]
    flat = answered.reshape(-1)
    rows = np.argsort(-flat, kind="stable")                       # the longest first: the active rows are a prefix
    r, a = np.divmod(rows, arms)
    batch = BettingBatch(rows.size, population, alpha, horizon=True)
    lo = np.full(rows.size, np.nan)
    hi = np.full(rows.size, np.nan)
    active = rows.size
    for t in range(int(flat.max(initial=0))):
        still = int(np.count_nonzero(flat[rows[:active]] > t))
        if still < active:
            end_lo, end_hi = batch.intervals()
            lo[still:active], hi[still:active] = end_lo[still:active], end_hi[still:active]
            batch.keep(np.arange(still))
            active = still
        batch.update(scores[orders[r[:active], t], a[:active]])
    if active:
        end_lo, end_hi = batch.intervals()
        lo[:active], hi[:active] = end_lo[:active], end_hi[:active]
    out_lo, out_hi = np.full(flat.size, np.nan), np.full(flat.size, np.nan)
    out_lo[rows], out_hi[rows] = lo, hi
    return out_lo.reshape(runs, arms), out_hi.reshape(runs, arms)


def _final_versus(scores: np.ndarray, orders: np.ndarray, engine: Engine) -> dict[tuple[int, int], tuple]:
    """The versus interval of each settled arm, (run, arm) → (lo, hi): the difference sequence (arm − the arm it
    was settled against) over their common prefix, as the live engine reads it with its pair grid. The sequence
    depends only on that prefix, so it is rebuilt afterwards, all rows at once, and read at the prefix's end."""
    runs, arms = engine.n.shape
    population = scores.shape[0]
    run, arm = np.nonzero((engine.vs >= 0) & np.isin(engine.code, (REASONS.index("worse") + 1,
                                                                     REASONS.index("tied") + 1)))
    if run.size == 0:
        return {}
    other = engine.vs[run, arm]
    common = np.minimum(engine.n[run, arm], engine.n[run, other])
    rows = np.argsort(-common, kind="stable")                      # the longest first: active rows are a prefix
    run, arm, other, common = run[rows], arm[rows], other[rows], common[rows]
    batch = BettingBatch(run.size, population, engine.pair_alpha, grid=PAIR_GRID, horizon=True)
    lo, hi = np.full(run.size, np.nan), np.full(run.size, np.nan)
    active = run.size

    def read(upto: int, end: int) -> None:
        b_lo, b_hi = batch.intervals(strict=True)
        lo[upto:end], hi[upto:end] = 2.0 * b_lo[upto:end] - 1.0, 2.0 * b_hi[upto:end] - 1.0

    for t in range(int(common.max())):
        still = int(np.count_nonzero(common[:active] > t))
        if still < active:
            read(still, active)
            batch.keep(np.arange(still))
            active = still
        sample = orders[run[:active], t]
        batch.update((scores[sample, arm[:active]] - scores[sample, other[:active]] + 1.0) / 2.0)
    if active:
        read(0, active)
    out = {}
    tolerance = engine.settings.tolerance
    for k in range(run.size):
        r, a, o = int(run[k]), int(arm[k]), int(other[k])
        if common[k] == population:                                # the exact difference, as the engine reads it
            d = (math.fsum(engine.hist[r, a]) - math.fsum(engine.hist[r, o])) / population
            v_lo, v_hi = d, d
        else:
            v_lo, v_hi = float(lo[k]), float(hi[k])
        out[(r, a)] = within_verdict(v_lo, v_hi, engine.code[r, a] == REASONS.index("worse") + 1, tolerance)
    return out
