"""Sequential runs in the store: the seeded order, the rounds a live run executes, the state every reader sees.

A sequential run (``run --stop-when best|precision``) is an ordinary run whose config holds a
``sequential`` block (:class:`SequentialConfig`) and whose samples are answered in one seeded
random order, stored with the run when it is planned (``sequential_order``). Its grid cells (the
oracle controls are not part of a sequential run) are asked in rounds: in round t every cell
still asked answers the t-th sample of the order; after the round the stopping rule
(:mod:`workbench.runs.stopping`) may stop some. A stopped cell's remaining jobs are marked
``skipped``: they are never generated, and ``resume`` finds nothing of theirs to do.

Nothing else is stored: the rule's state (each cell's confidence sequence, who stopped when and
why, the winner) is a pure function of the answered rounds, so :func:`sequential_status` rebuilds
it from the events, as ``resume`` does after a kill -9, the ledger, the TUI and ``compare`` do.
A round's jobs are committed one by one; a round is complete when all its jobs are done, and
only complete rounds are fed to the rule.

Model calls are counted as the executor makes them: on one sample, cells whose evidence window
is the same render the same prompt and cost one call. The full run's calls are the distinct
(sample, window) pairs of every grid cell; the calls a sequential run used, those of the cells
it asked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np

from workbench.runs.stopping import RULES, CellState, SequentialRun, StopSettings, round_calls, sample_order
from workbench.store.db import Store
from workbench.store.queries import Run

__all__ = ["SequentialConfig", "SequentialStatus", "sequential_config", "write_order", "read_order",
           "decision_cells", "sequential_status", "summary_line", "cell_line", "stopped_line", "complete_answers", "run_rounds",
           "SKIPPED", "DEFAULT_ALPHA", "DEFAULT_TOLERANCE", "DEFAULT_PRECISION", "STOP_REASONS"]

#: The status of a job a sequential run will not ask: its cell stopped before its sample's round.
SKIPPED = "skipped"
#: The defaults of α, of best's tolerance E and of precision's half-width E (the CLI's and the TUI's alike).
DEFAULT_ALPHA, DEFAULT_TOLERANCE, DEFAULT_PRECISION = 0.05, 0.02, 0.05
#: Why a cell stopped being asked, in words (``stopped`` of a cell's state).
STOP_REASONS = {"best": "the best cell", "worse": "worse than the leader", "tied": "within the tolerance of the leader",
                "precision": "its interval narrow enough", "exhausted": "every sample answered"}


@dataclass(frozen=True)
class SequentialConfig:
    """How a sequential run stops; stored as the run config's ``sequential`` (part of the run's identity).

    ``tolerance`` is E: for ``best`` the difference within which a cell cannot beat the leader,
    for ``precision`` the interval half-width each cell is asked until. ``seed`` orders the samples.
    """

    rule: str
    alpha: float = 0.05
    tolerance: float = 0.02
    seed: int = 0

    def validate(self) -> None:
        """Refuse settings that cannot work, naming the option."""
        if self.rule not in RULES:
            raise ValueError(f"--stop-when: {self.rule!r} is not one of {', '.join(RULES)}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"--alpha: must lie strictly between 0 and 1, got {self.alpha:g}")
        option = "--tolerance" if self.rule == "best" else "--precision"
        low = 0.0 if self.rule == "best" else 0.0005
        if not low <= self.tolerance < 1:
            raise ValueError(f"{option}: must lie in [{low:g}, 1), got {self.tolerance:g}")

    @property
    def settings(self) -> StopSettings:
        return StopSettings(self.rule, alpha=self.alpha, tolerance=self.tolerance)

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """``best, α 0.05, tolerance 0.02, seed 0`` (or ``precision, α 0.05, half-width 0.05, seed 0``)."""
        what = "tolerance" if self.rule == "best" else "half-width"
        return f"{self.rule}, α {self.alpha:g}, {what} {self.tolerance:g}, seed {self.seed}"


def sequential_config(run: Run) -> SequentialConfig | None:
    """The run's stopping settings, or None for a run that answers every sample of every cell."""
    stored = run.config.get("sequential")
    return SequentialConfig(**stored) if stored else None


def write_order(conn, run_id: int, sids: Sequence[int], seed: int) -> list[int]:
    """Store the order in which a sequential run answers its samples ``sids``; returns it (sids)."""
    order = [int(sids[i]) for i in sample_order(len(sids), seed)]
    conn.executemany("INSERT INTO sequential_order (run_id, pos, sid) VALUES (?, ?, ?)",
                     [(run_id, pos, sid) for pos, sid in enumerate(order)])
    return order


def read_order(store: Store, run: Run) -> list[int]:
    """The sids of ``run`` in the order its rounds answer them."""
    return [sid for (sid,) in store.conn.execute(
        "SELECT sid FROM sequential_order WHERE run_id = ? ORDER BY pos", (run.id,))]


def decision_cells(store: Store, run: Run) -> list[str]:
    """The cells the stopping rule weighs: every grid cell of the run, in id order."""
    return [cid for (cid,) in store.conn.execute(
        "SELECT cell_id FROM cells WHERE run_id = ? AND kind = 'retrieval' ORDER BY cell_id", (run.id,))]


@dataclass
class SequentialStatus:
    """Where a sequential run stands, rebuilt from its answered rounds (see the module).

    ``states`` has each cell's answered samples, its interval for the full run's S_llm (valid at
    any stopping time, at the run's level over every cell and comparison) and why it stopped;
    ``stopped_at`` the round each stopped cell stopped at. ``decided_at`` is the round the run
    ended (None while cells are still asked). Calls count distinct prompts (see the module).
    """

    config: SequentialConfig
    cells: list[str]
    population: int
    rounds: int
    states: dict[str, CellState]
    stopped_at: dict[str, int]
    winner: str | None
    done: bool
    calls_used: int
    calls_full: int
    jobs_asked: int
    jobs_full: int
    sequence_alpha: float
    leader: str | None = None
    pairs: dict[str, tuple[float, float] | None] = field(default_factory=dict)   # cell → interval of (cell − leader)
    state: SequentialRun | None = field(default=None, repr=False, compare=False)

    def pair_interval(self, a: str, b: str) -> tuple[float, float] | None:
        """The confidence sequence of (S_llm of ``a`` − that of ``b``) over their common samples (``best`` only)."""
        if self.state is None or a not in self.cells or b not in self.cells:
            return None
        return self.state.pair_interval(self.cells.index(a), self.cells.index(b))

    def pair_line(self, a: str, b: str) -> str | None:
        """When the run's rule settled ``a`` against ``b``, and the difference's interval valid under stopping."""
        if a not in self.states or b not in self.states:
            return None
        said = []
        for cell in (a, b):
            st = self.states[cell]
            when = f" at round {self.stopped_at[cell]:,}" if cell in self.stopped_at else ""
            said.append(f"{cell} {st.stopped or 'still asked'}{when} ({st.answered:,} of {self.population:,} answered)")
        pair = self.pair_interval(a, b)
        interval = "" if pair is None else (f"; {a} − {b} lies in [{pair[0]:+.3f}, {pair[1]:+.3f}] (confidence "
                                            "sequence over their common samples, valid under stopping)")
        return f"sequential run ({self.config.describe()}): " + ", ".join(said) + interval

    @property
    def decided_at(self) -> int | None:
        return self.rounds if self.done else None

    @property
    def calls_saved(self) -> int:
        """Calls the full run would have made that this one has not, and will not."""
        return self.calls_full - self.calls_used if self.done else 0

    def cell_record(self, cell: str) -> dict:
        """The ``sequential`` block of one cell in ``ledger --json``."""
        state = self.states[cell]
        return {"answered": state.answered, "of": self.population, "lo": state.lo, "hi": state.hi,
                "stopped": state.stopped, "stopped_at_round": self.stopped_at.get(cell)}

    def as_dict(self) -> dict:
        """The run-level summary (JSON-ready)."""
        return {"rule": self.config.rule, "alpha": self.config.alpha, "tolerance": self.config.tolerance,
                "seed": self.config.seed, "samples": self.population, "rounds": self.rounds,
                "decided_at_round": self.decided_at, "winner": self.winner, "leader": self.leader,
                "calls_used": self.calls_used, "calls_full": self.calls_full,
                "calls_saved": self.calls_full - self.calls_used if self.done else None,
                "jobs_asked": self.jobs_asked, "jobs_full": self.jobs_full,
                "sequence_alpha": self.sequence_alpha}


def summary_line(status: SequentialStatus) -> str:
    """One line: the rule, where the run stands (or when it was decided and what), and the calls it used."""
    s = status
    used = f"{s.calls_used:,} of the full run's {s.calls_full:,} model calls"
    if s.calls_full:
        used += f" ({s.calls_used / s.calls_full:.2f})"
    if not s.done:
        asked = sum(1 for st in s.states.values() if st.stopped is None)
        lead = f", leader {s.leader}" if s.leader else ""
        return (f"sequential ({s.config.describe()}): round {s.rounds:,} of {s.population:,}, {asked} of "
                f"{len(s.cells)} cells still asked{lead}; {used} so far")
    what = f"best {s.winner}" if s.winner else "every cell's interval narrow enough"
    if s.config.rule == "best" and s.winner is None:
        what = "no single best cell (the rest exhausted the samples)"
    return (f"sequential ({s.config.describe()}): decided at round {s.rounds:,} of {s.population:,}: {what}; "
            f"{used}, {s.calls_full - s.calls_used:,} saved")


def stopped_line(status: SequentialStatus) -> str:
    """The cells that stopped being asked, in the order they stopped: ``k1-b32 worse (round 40), …``."""
    stopped = sorted(status.stopped_at.items(), key=lambda item: (item[1], item[0]))
    if not stopped:
        return "no cell stopped yet"
    return "stopped: " + ", ".join(f"{cell} {status.states[cell].stopped} (round {at:,})" for cell, at in stopped)


def cell_line(status: SequentialStatus, cell: str) -> str:
    """One cell's standing: answered of N, its interval for the full run's S_llm (valid at any stopping time),
    and whether, when and why it stopped."""
    st = status.states[cell]
    interval = "—" if st.lo is None else f"[{st.lo:.3f}, {st.hi:.3f}]"
    if st.stopped is None:
        why = "still asked"
    else:
        at = status.stopped_at.get(cell)
        why = f"stopped{f' at round {at:,}' if at is not None else ''}: {STOP_REASONS.get(st.stopped, st.stopped)}"
    return f"{st.answered:,} of {status.population:,} answered · S_llm {interval} · {why}"


class _Events:
    """A sequential run's events of its grid cells, indexed by (sid, cell)."""

    def __init__(self, store: Store, run: Run, cells: list[str]):
        self.index = {c: i for i, c in enumerate(cells)}
        self.rows: dict[tuple[int, str], tuple[str, float | None, str]] = {}
        for cid, sid, status, score, sha in store.conn.execute(
                "SELECT cell_id, sid, status, score, evidence_sha256 FROM events WHERE run_id = ?", (run.id,)):
            if cid in self.index:
                self.rows[(sid, cid)] = (status, score, sha)
        self.shas: dict[str, int] = {}

    def group(self, sid: int, cid: str) -> int:
        """The prompt group of a job: same sample and same evidence window, same prompt (within one run)."""
        sha = self.rows[(sid, cid)][2]
        return self.shas.setdefault(sha, len(self.shas))

    def round_scores(self, sid: int, cells: Sequence[str]) -> list[float] | None:
        """The scores of ``cells`` on ``sid`` if every one is done, else None (the round is not complete)."""
        out = []
        for cid in cells:
            status, score, _ = self.rows.get((sid, cid), ("missing", None, ""))
            if status != "done" or score is None:
                return None
            out.append(float(score))
        return out


def _rebuild(store: Store, run: Run) -> tuple[SequentialConfig, list[str], list[int], SequentialRun, dict, _Events,
                                             int]:
    """Feed the rule every complete round of ``run``: (config, cells, order, state, stopped_at, events, calls)."""
    config = sequential_config(run)
    if config is None:
        raise ValueError(f"run {run.name!r} is not a sequential run")
    cells, order = decision_cells(store, run), read_order(store, run)
    events = _Events(store, run, cells)
    state = SequentialRun(len(cells), len(order), config.settings)
    stopped_at: dict[str, int] = {}
    calls = 0
    while not state.done:
        sid = order[state.round]
        asked = [cells[i] for i in state.asked()]
        scores = events.round_scores(sid, asked)
        if scores is None:
            break
        calls += _calls(events, sid, asked)
        for i in state.feed(scores):
            stopped_at[cells[i]] = state.round
    return config, cells, order, state, stopped_at, events, calls


def _calls(events: _Events, sid: int, asked: Sequence[str]) -> int:
    groups = np.array([[events.group(sid, c) for c in asked]])
    return int(round_calls(groups, np.ones(groups.shape, dtype=bool))[0])


def sequential_status(store: Store, run: Run) -> SequentialStatus | None:
    """The state of a sequential run now (None for another run), rebuilt from its events."""
    if sequential_config(run) is None:
        return None
    config, cells, order, state, stopped_at, events, calls = _rebuild(store, run)
    full = sum(_calls(events, sid, [c for c in cells if (sid, c) in events.rows]) for sid in order)
    states = dict(zip(cells, state.states()))
    winner = None if state.winner is None else cells[state.winner]
    leader = None if state.leader is None else cells[state.leader]
    pairs = {}
    if config.rule == "best" and state.leader is not None:
        for i, c in enumerate(cells):
            if i != state.leader:
                pairs[c] = state.pair_interval(i, state.leader)
    asked_jobs = sum(s.answered for s in states.values())
    return SequentialStatus(config, cells, len(order), state.round, states, stopped_at, winner, state.done, calls,
                            full, asked_jobs, len(order) * len(cells), state.alpha, leader, pairs, state)


def complete_answers(store: Store, run: Run) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A complete run's grid cells, its scores (N samples × K cells, sid order) and prompt groups, for a replay.

    Refused (``ValueError``) unless every grid cell answered every sample: a replay asks what a
    rule would have saved on answers that were all given.
    """
    cells = decision_cells(store, run)
    if not cells:
        raise ValueError(f"run {run.name!r} has no grid cells to replay")
    events = _Events(store, run, cells)
    sids = sorted({sid for sid, _ in events.rows})
    answered = sum(1 for status, score, _ in events.rows.values() if status == "done" and score is not None)
    if answered < len(sids) * len(cells):
        raise ValueError(f"--replay needs a complete run: run {run.name!r} has {answered:,} of its "
                         f"{len(sids) * len(cells):,} grid jobs answered ({_completing(run, events)})")
    scores = np.array([[events.rows[(sid, c)][1] for c in cells] for sid in sids], dtype=np.float64)
    groups = np.array([[events.group(sid, c) for c in cells] for sid in sids], dtype=np.int64)
    return cells, scores, groups


def _completing(run: Run, events: _Events) -> str:
    """What would complete ``run``'s answers, in words: the command, or why none does."""
    if sequential_config(run):
        # A sequential run skips the jobs of the cells it stops: resuming it does not complete it.
        return "a sequential run stops asking once decided: replay a run made without --stop-when"
    if run.model is None:
        # A sweep plans jobs for answers made elsewhere: no model of the workbench's gives them.
        return f"a sweep has no model: import its answers with `workbench predictions import FILE {run.name}`"
    statuses = Counter(status for status, _, _ in events.rows.values())
    failed, pending = statuses["error"], statuses["pending"]
    if failed:
        more = f" and answers the {pending:,} pending" if pending else ""
        return f"`workbench resume {run.name} --retry-errors` asks the {failed:,} failed jobs again{more}"
    return f"`workbench resume {run.name}` answers the {pending:,} pending jobs"


def mark_skipped(store: Store, run: Run, cells: Sequence[str]) -> int:
    """Mark the pending jobs of stopped ``cells`` ``skipped`` (one transaction); how many were."""
    if not cells:
        return 0
    marks = ",".join("?" * len(cells))
    with store.transaction() as conn:
        return conn.execute(f"UPDATE events SET status = '{SKIPPED}' WHERE run_id = ? AND status = 'pending'"
                            f" AND cell_id IN ({marks})", (run.id, *cells)).rowcount


def run_rounds(store: Store, run: Run, jobs: Sequence, process: Callable[[list], None], *,
               stopping: Callable[[], bool], on_skipped: Callable[[int], None],
               on_halt: Callable[[str], None]) -> None:
    """Execute a sequential run's pending ``jobs`` (``(job, evidence)`` pairs) round by round.

    ``process(subset)`` does the jobs of one round (cached ones committed, the others generated,
    each committed on its own). After a complete round the rule is fed; a cell that stops has its
    pending jobs marked skipped (``on_skipped(n)``). ``stopping()`` true ends before the next
    round. A round left incomplete by a failed job ends the run with ``on_halt(why)``: the rule
    needs every asked cell's answer on a sample (``--retry-errors`` asks it again).
    """
    config, cells, order, state, _, events, _ = _rebuild(store, run)
    stopped = [cells[i] for i in range(len(cells)) if state.states()[i].stopped is not None]
    on_skipped(mark_skipped(store, run, stopped))
    by_key = {(job.sid, job.cell_id): (job, text) for job, text in jobs}
    while not state.done:
        if stopping():
            return
        sid = order[state.round]
        asked = [cells[i] for i in state.asked()]
        todo = [by_key[(sid, c)] for c in asked if (sid, c) in by_key]
        if todo:
            process(todo)
        rows = dict(((s, c), (status, score)) for c, s, status, score in store.conn.execute(
            f"SELECT cell_id, sid, status, score FROM events WHERE run_id = ? AND sid = ? AND cell_id IN "
            f"({','.join('?' * len(asked))})", (run.id, sid, *asked)))
        scores = [rows.get((sid, c), (None, None)) for c in asked]
        if any(status != "done" or score is None for status, score in scores):
            if not stopping():
                failed = [c for c, (status, _) in zip(asked, scores) if status != "done"]
                on_halt(f"round {state.round + 1} of the sequential run needs every asked cell's answer on a "
                        f"sample; {', '.join(failed)} failed on it (`--retry-errors` asks again)")
            return
        newly = [cells[i] for i in state.feed([float(score) for _, score in scores])]
        if newly:
            on_skipped(mark_skipped(store, run, newly))
