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
:func:`workbench.runs.stopping.simulate_many`, which reaches the live run's decisions exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from workbench.metrics.stats import wilson_interval
from workbench.runs.stopping import REASONS, Outcome, StopSettings, sample_order, simulate_many

__all__ = ["ReplaySummary", "replay", "replay_outcomes", "covered", "COVER_SLACK"]

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
    ``coverage_interval`` its 95 % Wilson interval.
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
    answered_mean: tuple[float, ...]
    stopped: tuple[dict[str, int], ...]                   # per cell: how many replays stopped it for each reason

    def as_dict(self) -> dict:
        """The summary as plain JSON-ready values."""
        return asdict(self)


def covered(outcome: Outcome, truth: np.ndarray) -> bool:
    """Whether every cell's reported interval holds its full-run value (a cell never asked reports none)."""
    return all(cell.lo is None or cell.lo - COVER_SLACK <= value <= cell.hi + COVER_SLACK
               for cell, value in zip(outcome.cells, truth))


def replay_outcomes(scores: np.ndarray, groups: np.ndarray | None, settings: StopSettings, seed: int,
                    replays: int) -> list[Outcome]:
    """The outcome of each of ``replays`` seeded orders (the r-th is ``sample_order(N, seed, r)``)."""
    population = np.asarray(scores).shape[0]
    out: list[Outcome] = []
    for start in range(0, replays, _CHUNK):
        orders = np.stack([sample_order(population, seed, r) for r in range(start, min(replays, start + _CHUNK))])
        out.extend(simulate_many(scores, groups, orders, settings))
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
    named = None
    if rule == "best":
        top = truth.max()
        named = int(sum(o.winner is not None and truth[o.winner] >= top - tolerance for o in outcomes))
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
        covered=hits, coverage=hits / replays, coverage_interval=wilson_interval(hits, replays),
        answered_mean=tuple(float(np.mean([o.cells[c].answered for o in outcomes])) for c in range(cells)),
        stopped=tuple(stopped),
    )
