"""Sequential runs in the store: the seeded order, the rounds a live run executes, the state every reader sees.

A sequential run (``run --stop-when best|precision``) is an ordinary run whose config holds a
``sequential`` block (:class:`SequentialConfig`) and whose samples are answered in one seeded
random order, stored with the run when it is planned (``sequential_order``). Its grid cells (the
oracle controls are not part of a sequential run) are grouped into arms, cells whose prompts are
the same on every sample (:func:`~workbench.runs.stopping.arms_of`), and asked step by step as the
rule (:mod:`workbench.runs.stopping`) says: each asked arm answers the next sample of the order
it has not answered, with all its cells. An arm dropped as worse has its remaining jobs marked
``skipped`` (never generated, and ``resume`` finds nothing of theirs to do); an arm settled against
the leader pauses, its jobs pending, and answers again if a new leader leaves it unsettled; once
the run is decided, every job still pending is skipped.

Nothing else is stored: the rule's state (each arm's confidence sequence, who stopped when, on
which difference, the winner) is a pure function of the answered steps, so
:func:`sequential_status` rebuilds it from the events, as ``resume`` does after a kill -9, the
ledger, the TUI and ``compare`` do. A step's jobs are committed one by one; a step is complete
when all its jobs are done, and only complete steps are fed to the rule.

Model calls are counted as the executor makes them: cells whose evidence window is the same on a
sample render the same prompt and cost one call, whichever arm asked it first. The full run's
calls are the distinct (sample, window) pairs of every grid cell; the calls a sequential run
used, those its arms asked.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np

from workbench.runs.stopping import (RULES, CellState, SequentialRun, StopSettings, arms_of, distinct_groups,
                                     sample_order)
from workbench.store.db import Store
from workbench.store.queries import Run

__all__ = ["SequentialConfig", "SequentialStatus", "sequential_config", "write_order", "read_order",
           "decision_cells", "sequential_status", "summary_line", "cell_line", "stopped_lines", "complete_answers", "run_rounds",
           "SKIPPED", "DEFAULT_ALPHA", "DEFAULT_TOLERANCE", "DEFAULT_PRECISION", "STOP_REASONS"]

#: The status of a job a sequential run will not ask: its cell stopped before its sample's round.
SKIPPED = "skipped"
#: The defaults of α, of best's tolerance E and of precision's half-width E (the CLI's and the TUI's alike).
DEFAULT_ALPHA, DEFAULT_TOLERANCE, DEFAULT_PRECISION = 0.05, 0.02, 0.05
#: Why a cell stopped being asked, in words (``stopped`` of a cell's state; ``versus_words`` says against what).
STOP_REASONS = {"best": "the best cell", "worse": "proved worse", "tied": "within the tolerance",
                "precision": "its interval narrow enough"}


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
    """Where a sequential run stands, rebuilt from its answered steps (see the module).

    ``states`` has each cell's answered samples, its interval for the full run's S_llm (valid at
    any stopping time, at ``cell_alpha``), its standing and the difference it was settled on
    (``versus``, valid at ``pair_alpha``); ``stopped_at`` the step each stopped cell stopped at;
    ``same_as`` names, for a cell whose prompts are another's on every sample, that cell (one arm,
    decided together). ``decided_at`` is the step the run ended (None while cells are still asked).
    Calls count distinct prompts (see the module).
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
    pair_alpha: float
    cell_alpha: float
    leader: str | None = None
    pairs: dict[str, tuple[float, float] | None] = field(default_factory=dict)   # cell → interval of (cell − leader)
    same_as: dict[str, str] = field(default_factory=dict)
    state: SequentialRun | None = field(default=None, repr=False, compare=False)

    def versus(self, cell: str) -> dict | None:
        """The difference ``cell`` was settled on: ``{"cell", "lo", "hi"}`` (this cell − that one), or None."""
        v = self.states[cell].versus
        return None if v is None else {"cell": self.cells[v.other], "lo": v.lo, "hi": v.hi}

    def versus_cell(self, cell: str) -> str:
        """The settled-on difference in a table cell: ``k5-b128 [-0.349,+0.017]``, or ``—``."""
        v = self.versus(cell)
        if v is None:
            return "—"
        return v["cell"] + ("" if v["lo"] is None else f" [{v['lo']:+.3f},{v['hi']:+.3f}]")

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
                                            f"sequence over their common samples, valid under stopping at level "
                                            f"1 − {self.pair_alpha:.2g})")
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
                "stopped": state.stopped, "stopped_at_round": self.stopped_at.get(cell),
                "versus": self.versus(cell), "same_as": self.same_as.get(cell)}

    def as_dict(self) -> dict:
        """The run-level summary (JSON-ready)."""
        return {"rule": self.config.rule, "alpha": self.config.alpha, "tolerance": self.config.tolerance,
                "seed": self.config.seed, "samples": self.population, "rounds": self.rounds,
                "decided_at_round": self.decided_at, "winner": self.winner, "leader": self.leader,
                "calls_used": self.calls_used, "calls_full": self.calls_full,
                "calls_saved": self.calls_full - self.calls_used if self.done else None,
                "jobs_asked": self.jobs_asked, "jobs_full": self.jobs_full,
                "pair_alpha": self.pair_alpha, "cell_alpha": self.cell_alpha,
                "arms": len(set(self.cells) - set(self.same_as))}


def versus_words(status: SequentialStatus, cell: str) -> str | None:
    """What a settled cell's stop rests on, in words: "worse than k10-b128 by 0.030 to 0.120", or "within 0.02 of
    k5-b128 (-0.349 to +0.017)" (this − that: it cannot beat that cell by more than E); None when nothing was
    settled against another cell."""
    v = status.states[cell].versus
    if v is None:
        return None
    other = status.cells[v.other]
    if v.lo is None:
        return f"settled against {other}"
    if v.hi < 0:
        return f"worse than {other} by {-v.hi:.3f} to {-v.lo:.3f}"
    return f"within {status.config.tolerance:g} of {other} ({v.lo:+.3f} to {v.hi:+.3f})"


def summary_line(status: SequentialStatus) -> str:
    """One line: the rule, where the run stands (or when it was decided and what), and the calls it used."""
    s = status
    used = f"{s.calls_used:,} of the full run's {s.calls_full:,} model calls"
    if s.calls_full:
        used += f" ({s.calls_used / s.calls_full:.2f})"
    if not s.done:
        asked = sum(1 for st in s.states.values() if st.stopped is None)
        lead = f", leader {s.leader}" if s.leader else ""
        return (f"sequential ({s.config.describe()}): round {s.rounds:,}, {asked} of "
                f"{len(s.cells)} cells still asked{lead}; {used} so far")
    what = f"best {s.winner}" if s.winner else "every cell's interval narrow enough"
    if s.config.rule == "best" and s.winner is None:
        what = "no winner within the round limit"
    return (f"sequential ({s.config.describe()}): decided at round {s.rounds:,}: {what}; "
            f"{used}, {s.calls_full - s.calls_used:,} saved")


def _natural(cell: str) -> list:
    """A cell id's sort key with its numbers as numbers: k2-b128 before k10-b128."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", cell)]


def stopped_lines(status: SequentialStatus, most: int | None = None) -> list[str]:
    """The cells that stopped being asked, in the order they stopped, each with what its stop rests on:
    ``round 40  k1-b128 worse than k10-b128 by 0.030 to 0.120``. At most ``most`` cells (the last line says how
    many more)."""
    stopped = sorted(status.stopped_at.items(), key=lambda item: (item[1], _natural(item[0])))
    if not stopped:
        return ["no cell stopped yet"]
    width = len(f"{stopped[-1][1]:,}")
    lines = []
    for cell, at in stopped:
        st = status.states[cell]
        words = versus_words(status, cell) or STOP_REASONS.get(st.stopped, st.stopped)
        same = f", as {status.same_as[cell]} (same prompts)" if cell in status.same_as else ""
        lines.append(f"  round {at:>{width},}  {cell} {words}{same}")
    if most is not None and len(lines) > most:
        lines = lines[:most - 1] + [f"  … and {len(lines) - most + 1} more"]
    return ["stopped (round, cell, the difference it was settled on, this − that):", *lines]


def cell_line(status: SequentialStatus, cell: str) -> str:
    """One cell's standing: answered of N, its interval for the full run's S_llm (valid at any stopping time),
    whether, when and why it stopped, and the difference it was settled on."""
    st = status.states[cell]
    interval = "—" if st.lo is None else f"[{st.lo:.3f}, {st.hi:.3f}]"
    if st.stopped is None:
        why = "still asked"
    else:
        at = status.stopped_at.get(cell)
        why = (f"stopped{f' at round {at:,}' if at is not None else ''}: "
               + (versus_words(status, cell) or STOP_REASONS.get(st.stopped, st.stopped)))
    same = f" · same prompts as {status.same_as[cell]}" if cell in status.same_as else ""
    return f"{st.answered:,} of {status.population:,} answered · S_llm {interval} · {why}{same}"


class _Events:
    """A sequential run's events of its grid cells, indexed by (sid, cell)."""

    def __init__(self, store: Store, run: Run, cells: list[str]):
        self.index = {c: i for i, c in enumerate(cells)}
        self.rows: dict[tuple[int, str], tuple[str, float | None, tuple[str | None, str]]] = {}
        for cid, sid, status, score, sha, model in store.conn.execute(
                "SELECT e.cell_id, e.sid, e.status, e.score, e.evidence_sha256, c.model FROM events e"
                " JOIN cells c ON c.run_id = e.run_id AND c.cell_id = e.cell_id WHERE e.run_id = ?", (run.id,)):
            if cid in self.index:
                self.rows[(sid, cid)] = (status, score, (model, sha))
        self.prompts: dict[tuple[str | None, str], int] = {}

    def group(self, sid: int, cid: str) -> int:
        """The prompt group of a job: same sample, same evidence window and same model, same call (within one
        run; in a run of several models, one window is a call of each model)."""
        prompt = self.rows[(sid, cid)][2]
        return self.prompts.setdefault(prompt, len(self.prompts))

    def groups(self, sids: Sequence[int], cells: Sequence[str]) -> np.ndarray:
        """The prompt groups of ``sids`` × ``cells`` (a cell with no job on a sample: a group of its own)."""
        return np.array([[self.group(sid, c) if (sid, c) in self.rows else -1 - k for k, c in enumerate(cells)]
                         for sid in sids], dtype=np.int64)

    def score(self, sid: int, cells: Sequence[str]) -> float | None:
        """The score of an arm's ``cells`` on ``sid`` (its first cell's) once every one is done, else None."""
        for cid in cells:
            status, score, _ = self.rows.get((sid, cid), ("missing", None, ""))
            if status != "done" or score is None:
                return None
        return float(self.rows[(sid, cells[0])][1])


@dataclass
class _Rebuilt:
    """A sequential run's rule fed every complete step of its events."""

    config: SequentialConfig
    cells: list[str]
    order: list[int]
    members: dict[str, list[str]]        # an arm (its first cell) → its cells
    state: SequentialRun
    stopped_at: dict[str, int]
    events: _Events
    calls: int


def _rebuild(store: Store, run: Run) -> _Rebuilt:
    """Feed the rule every complete step of ``run`` (see the module)."""
    config = sequential_config(run)
    if config is None:
        raise ValueError(f"run {run.name!r} is not a sequential run")
    cells, order = decision_cells(store, run), read_order(store, run)
    events = _Events(store, run, cells)
    groups = events.groups(order, cells)
    arm = arms_of(groups)
    members: dict[str, list[str]] = {}
    for c, a in enumerate(arm):
        members.setdefault(cells[a], []).append(cells[c])
    state = SequentialRun(arm, len(order), config.settings)
    relabel = distinct_groups(groups)
    asked: set[tuple[int, int]] = set()
    stopped_at: dict[str, int] = {}
    while not state.done:
        step = [(a, state.position(a)) for a in state.asked()]
        scores = [events.score(order[pos], members[cells[a]]) for a, pos in step]
        if any(x is None for x in scores):
            break
        asked.update((pos, int(relabel[pos, a])) for a, pos in step)
        for a in state.feed(scores):
            for cell in members[cells[a]]:
                if state.state(cells.index(cell)).stopped is None:
                    stopped_at.pop(cell, None)
                else:
                    stopped_at[cell] = state.round
    return _Rebuilt(config, cells, order, members, state, stopped_at, events, len(asked))


def sequential_status(store: Store, run: Run) -> SequentialStatus | None:
    """The state of a sequential run now (None for another run), rebuilt from its events."""
    if sequential_config(run) is None:
        return None
    b = _rebuild(store, run)
    cells, state = b.cells, b.state
    groups = b.events.groups(b.order, cells)
    full = int((distinct_groups(groups) == np.arange(len(cells))).sum())
    states = dict(zip(cells, state.states()))
    winner = None if state.winner is None else cells[state.winner]
    leader = None if state.leader is None else cells[state.leader]
    pairs = {}
    if b.config.rule == "best" and state.leader is not None:
        for i, c in enumerate(cells):
            if i != state.leader:
                pairs[c] = state.pair_interval(i, state.leader)
    same_as = {cell: first for first, group in b.members.items() for cell in group if cell != first}
    asked_jobs = sum(s.answered for s in states.values())
    engine = state.engine
    return SequentialStatus(b.config, cells, len(b.order), state.round, states, b.stopped_at, winner, state.done,
                            b.calls, full, asked_jobs, len(b.order) * len(cells), engine.pair_alpha,
                            engine.cell_alpha, leader, pairs, same_as, state)


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
    """Execute a sequential run's pending ``jobs`` (``(job, evidence)`` pairs) step by step.

    ``process(subset)`` does the jobs of one step (cached ones committed, the others generated,
    each committed on its own). After a complete step the rule is fed; an arm dropped as worse has
    its pending jobs marked skipped (``on_skipped(n)``), and so has every job left once the run is
    decided. ``stopping()`` true ends before the next step. A step left incomplete by a failed job
    ends the run with ``on_halt(why)``: the rule needs every asked arm's answer (``--retry-errors``
    asks it again).
    """
    b = _rebuild(store, run)
    state, cells, order = b.state, b.cells, b.order
    by_key = {(job.sid, job.cell_id): (job, text) for job, text in jobs}
    on_skipped(_skip_settled(store, run, b))
    while not state.done:
        if stopping():
            return
        step = [(a, state.position(a)) for a in state.asked()]
        todo = [by_key[(order[pos], c)] for a, pos in step for c in b.members[cells[a]] if (order[pos], c) in by_key]
        if todo:
            process(todo)
        wanted = [(order[pos], c) for a, pos in step for c in b.members[cells[a]]]
        rows = {(sid, c): (status, score) for c, sid, status, score in store.conn.execute(
            f"SELECT cell_id, sid, status, score FROM events WHERE run_id = ? AND (sid, cell_id) IN "
            f"(VALUES {','.join(['(?, ?)'] * len(wanted))})", (run.id, *(v for key in wanted for v in key)))}
        failed = [c for sid, c in wanted if rows.get((sid, c), (None, None))[0] != "done"
                  or rows[(sid, c)][1] is None]
        if failed:
            if not stopping():
                on_halt(f"step {state.round + 1} of the sequential run needs every asked cell's answer; "
                        f"{', '.join(failed)} failed on it (`--retry-errors` asks again)")
            return
        state.feed([float(rows[(order[pos], cells[a])][1]) for a, pos in step])
        on_skipped(_skip_settled(store, run, b))


def _skip_settled(store: Store, run: Run, b: _Rebuilt) -> int:
    """Mark skipped the pending jobs no step will ask: a dropped arm's, and every one once the run is decided."""
    if b.state.done:
        return mark_skipped(store, run, b.cells)
    engine = b.state.engine
    dropped = [cell for a, first in enumerate(_engine_members(b)) if engine.dropped[0, a]
               for cell in b.members[first]]
    return mark_skipped(store, run, dropped)


def _engine_members(b: _Rebuilt) -> list[str]:
    """The first cell of each of the engine's arms, in the engine's order."""
    return [b.cells[m] for m in b.state.members]
