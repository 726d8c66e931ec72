"""The incremental ledger: running sums and Poisson replicate sums per group of cells (docs/design.md §3).

A run's ledger is a function of sums. Per *group* of cells (:mod:`workbench.runs.groups`)
each sample contributes a vector; the point estimates come from the plain sums and the
intervals from the replicate sums
``Σ_i w(seed, sid_i, r) · x_i``, r = 1..R, whose Poisson weights are a pure function of
(seed, sid, r) (:func:`workbench.metrics.resample.poisson_weights`).

So the state can be *maintained*: when an event changes, each group it belongs to loses the
sample's old contribution and gains its new one, in O(R) per group. :class:`LedgerReader`
keeps a state at a watermark of the event log (:mod:`workbench.store.ledger_state`), applies
only the changes after it, and persists the state (sums, replicate sums, watermark) in one
transaction, so a cold reader loads it in O(groups × R) and catches up. A kill -9 leaves the
old state or the new one; a state that cannot be trusted (log pruned past its watermark,
changed grid) is reloaded or rebuilt from scratch. :func:`verify` compares the incremental
state with a from-scratch build at the same instant (``workbench ledger --verify``).

Tag exclusion is the same arithmetic: the reader keeps the summed contributions of the
excluded samples, maintained by the same deltas, and shows base − excluded.

A sample's contribution to a group reads its rows in the group's cells; a cell group has one
cell, so a changed event costs one row. An oracle or noise group also reads the sample's
rows in the group's other cells (its partners): those are counted in ``rows_read`` too.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from workbench.metrics.scoring import get_scorer
from workbench.metrics.resample import poisson_weights
from workbench.metrics.stats import RESAMPLES, SEED
from workbench.runs.cells import Cell, run_cells
from workbench.runs.groups import SCORE, Group, GroupSums, Rows, contributions, copied_columns, run_groups
from workbench.store.db import Store
from workbench.store.ledger_state import (
    Change,
    Image,
    changes_since,
    current_seq,
    load_sums,
    log_floor,
    logging_active,
    open_header,
    read_rows,
    save_state,
    state_header,
)
from workbench.store.lookup import NotFound
from workbench.store.queries import Run, sample_answers

#: A long-lived reader (the TUI) saves its state after this many changed events; a one-shot
#: reader (the CLI) after any.
PERSIST_EVERY = 1000
_CHUNK_ENTRIES = 1 << 22  # samples × resamples of weights generated at once in a build


@dataclass
class RefreshStats:
    """What one refresh cost: changed events applied, log and event rows read, and how it started."""

    changed: int = 0
    log_rows: int = 0
    rows_read: int = 0
    rebuilt: bool = False
    loaded: bool = False
    saved: bool = False
    seconds: float = 0.0


@dataclass
class LedgerState:
    """A reader's view: per group its sums, at ``watermark``, with the excluded samples left out."""

    groups: dict[str, Group]
    sums: dict[str, GroupSums]
    resamples: int
    watermark: int
    excluded: frozenset[int] = field(default_factory=frozenset)


class LedgerReader:
    """A run's ledger state, kept up to date from the event log (thread-safe: one refresh at a time).

    ``score`` other than the run's own re-scores stored predictions (its own state, built once).
    ``persist_every``: changed events between two saves (1: save after any change);
    ``persist=False`` saves nothing and opens no header (a preview, ``--verify``).
    """

    def __init__(self, store: Store, run: Run, *, score: str | None = None, seed: int = SEED,
                 resamples: int = RESAMPLES, persist_every: int = PERSIST_EVERY,
                 persist: bool = True) -> None:
        self.store, self.run, self.seed = store, run, seed
        own = run.config.get("score", "acc")
        self.score_name = score or own
        self._scorer: Callable[..., float] | None = get_scorer(self.score_name) if self.score_name != own else None
        self.resamples = max(int(resamples), 0)
        self.persist_every = persist_every
        self.persist = persist and not store.readonly
        self.cells: dict[str, Cell] = {}
        self.groups: list[Group] = []
        self._by_cell: dict[str, list[Group]] = {}
        self._state: dict[str, GroupSums] | None = None
        self.watermark = 0
        self._base_watermark: int | None = None
        self._dirty: set[str] = set()
        self._pending = 0
        self._excluded: frozenset[int] = frozenset()
        self._excl: dict[str, GroupSums] = {}
        self._logged = False
        self._data_version: int | None = None
        self._answers: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self.stats = RefreshStats()

    # ----------------------------------------------------------------- public

    @property
    def ready(self) -> bool:
        """Whether a state is in memory (the next refresh costs only the changes since it)."""
        return self._state is not None

    def refresh(self, exclude: Iterable[int] = (), store: Store | None = None) -> LedgerState:
        """Catch up with the database (load or build the state first if needed); the view without ``exclude``.

        ``store``: the connection to read through this time (a TUI worker opens its own).
        """
        with self._lock:
            if store is not None:
                self.store = store
            t0 = time.perf_counter()
            stats = RefreshStats()
            self._check_grid()
            if self._state is None and self.persist:
                open_header(self.store, self.run.id, self.score_name, self.seed, self.resamples, self._keys())
            with self.store.snapshot() as conn:
                if conn.execute("SELECT 1 FROM runs WHERE id = ?", (self.run.id,)).fetchone() is None:
                    raise NotFound(f"run {self.run.name!r} no longer exists")
                self._revalidate(conn)
                if self._state is None:
                    self._load_or_build(conn, stats)
                if self._logged:
                    self._catch_up(conn, stats)
                self._exclude(conn, frozenset(int(s) for s in exclude), stats)
            if self.persist and (stats.rebuilt or self._pending >= self.persist_every):
                stats.saved = self.save()
            stats.seconds = time.perf_counter() - t0
            self.stats = stats
            return self._view()

    def save(self) -> bool:
        """Persist the base state (no exclusion) at its watermark; False if a state as new is stored."""
        if self._state is None or not self.persist:
            return False
        keys = self._keys()
        saved = save_state(self.store, self.run.id, self.score_name, self.seed, resamples=self.resamples,
                           watermark=self.watermark, groups=keys,
                           sums={g: (s.sums, s.reps) for g, s in self._state.items()},
                           base_watermark=self._base_watermark, dirty=self._dirty)
        # Either way the stored state is now at least as new as ours: later saves may write only what changes.
        self._base_watermark, self._dirty, self._pending = self.watermark, set(), 0
        return saved

    # ----------------------------------------------------------------- loading

    def _keys(self) -> list[str]:
        return [g.key for g in self.groups]

    def _check_grid(self) -> None:
        cells = run_cells(self.store, self.run.id)
        groups = run_groups(cells)
        if [g.key for g in groups] != self._keys() or cells != self.cells:
            self.cells, self.groups, self._state = cells, groups, None
            self._by_cell = {}
            for g in groups:
                for cid in g.cells:
                    self._by_cell.setdefault(cid, []).append(g)

    def _revalidate(self, conn) -> None:
        """Drop an in-memory state the log can no longer bring up to date."""
        if self._state is None:
            return
        if self._logged:
            if log_floor(conn, self.run.id) > self.watermark or not logging_active(conn, self.run.id):
                self._state = None  # pruned past us (another reader saved): reload the saved state
        elif self.store.data_version() != self._data_version:
            self._state = None  # no log for this run (nothing saved, read-only): rebuild on any write

    def _load_or_build(self, conn, stats: RefreshStats) -> None:
        self._logged = logging_active(conn, self.run.id)
        self._data_version = self.store.data_version()
        self._excluded, self._excl = frozenset(), {}
        head = state_header(conn, self.run.id, self.score_name, self.seed)
        if (head is not None and head.watermark is not None and head.groups == self._keys()
                and head.resamples >= self.resamples):
            loaded = load_sums(conn, head.id, {g.key: g.width for g in self.groups}, head.resamples)
            if set(loaded) == set(head.groups):
                self.resamples = head.resamples
                self._state = {g: GroupSums(*loaded[g]) for g in head.groups}
                self.watermark = self._base_watermark = head.watermark
                self._dirty, self._pending = set(), 0
                stats.loaded = True
                return
        self._build(conn, stats)

    def _build(self, conn, stats: RefreshStats) -> None:
        """The state from scratch, from every row of the run in this snapshot."""
        self.watermark = current_seq(conn)
        per_cell = {cid: self._read(conn, cid, None) for cid in self.cells}
        stats.rows_read += sum(len(sids) for sids, _ in per_cell.values())
        universe = np.unique(np.concatenate([sids for sids, _ in per_cell.values()])) if per_cell else np.zeros(0, np.int64)
        aligned = {}
        for cid, (sids, values) in per_cell.items():
            rows = Rows.absent(len(universe))
            pos = np.searchsorted(universe, sids)
            rows.present[pos] = True
            rows.values[pos] = values
            aligned[cid] = rows
        self._state = {g.key: GroupSums.zeros(g.width, self.resamples) for g in self.groups}
        plans = {g.key: copied_columns(g, aligned) for g in self.groups}
        step = max(1, _CHUNK_ENTRIES // max(self.resamples, 1))
        for start in range(0, len(universe), step):
            part = slice(start, start + step)
            chunk = {cid: Rows(r.present[part], r.values[part]) for cid, r in aligned.items()}
            weights = poisson_weights(universe[part], self.resamples, self.seed)
            blocks = [contributions(g, chunk)[:, plans[g.key][0]] for g in self.groups]
            if not blocks:
                break
            x = np.hstack(blocks)
            sums, reps = x.sum(axis=0), weights.T @ x
            at = 0
            for g in self.groups:
                st, take = self._state[g.key], plans[g.key][0]
                st.sums[take] += sums[at:at + len(take)]
                st.reps[:, take] += reps[:, at:at + len(take)]
                at += len(take)
        for g in self.groups:  # the columns equal to another by construction, copied once at the end
            st, (_, copies) = self._state[g.key], plans[g.key]
            for dst, src in copies:
                st.sums[dst], st.reps[:, dst] = st.sums[src], st.reps[:, src]
        self._base_watermark, self._dirty, self._pending = None, set(self._keys()), 0
        stats.rebuilt = True

    def _read(self, conn, cid: str, sids) -> tuple[np.ndarray, np.ndarray]:
        """A cell's rows (all or of ``sids``), re-scored when this state uses another scorer."""
        got, values, preds = read_rows(conn, self.run.id, cid, sids, predictions=self._scorer is not None)
        if self._scorer is not None:
            for i, (sid, pred) in enumerate(zip(got.tolist(), preds)):
                if pred is not None:
                    values[i, SCORE] = self._rescore(sid, pred)
        return got, values

    def _rescore(self, sid: int, prediction: str) -> float:
        if sid not in self._answers:
            self._answers.update(sample_answers(self.store, self.run.dataset_id, [sid]))
        answers, aliases = self._answers[sid]
        return float(self._scorer(prediction, answers, aliases))

    def _image_values(self, sid: int, image: Image) -> np.ndarray:
        values = np.array(image.values, dtype=np.float64)
        if self._scorer is not None and image.prediction is not None:
            values[SCORE] = self._rescore(sid, image.prediction)
        return values

    # ----------------------------------------------------------------- deltas

    def _catch_up(self, conn, stats: RefreshStats) -> None:
        changes, log_rows = changes_since(conn, self.run.id, self.watermark, predictions=self._scorer is not None)
        watermark = current_seq(conn)
        stats.log_rows += log_rows
        stats.rows_read += log_rows  # each log row comes with the event's current row
        stats.changed += len(changes)
        if changes:
            self._apply(conn, changes, stats)
        self.watermark = watermark

    def _apply(self, conn, changes: list[Change], stats: RefreshStats) -> None:
        """Subtract each changed sample's old contribution from its groups and add the new one."""
        if self._scorer is not None:
            missing = {c.sid for c in changes if (c.old and c.old.prediction) or (c.new and c.new.prediction)}
            missing -= set(self._answers)
            if missing:
                self._answers.update(sample_answers(self.store, self.run.dataset_id, missing))
        changed = {(c.cell_id, c.sid): c for c in changes if c.cell_id in self._by_cell}
        affected: dict[str, set[int]] = {}
        for cid, sid in changed:
            for g in self._by_cell[cid]:
                affected.setdefault(g.key, set()).add(sid)
        groups = {g.key: g for g in self.groups}
        partners: dict[str, dict[int, np.ndarray]] = {}
        for key, sids in affected.items():
            for cid in groups[key].cells:
                need = [s for s in sids if (cid, s) not in changed and s not in partners.get(cid, {})]
                if need:
                    got, values = self._read(conn, cid, need)
                    stats.rows_read += len(got)
                    partners.setdefault(cid, {}).update(zip(got.tolist(), values))
        every = np.array(sorted({s for sids in affected.values() for s in sids}), dtype=np.int64)
        weights = poisson_weights(every, self.resamples, self.seed)
        index = {int(s): i for i, s in enumerate(every)}
        for key, sids in affected.items():
            g = groups[key]
            order = sorted(sids)
            old, new = self._rows(g, order, changed, partners, "old"), self._rows(g, order, changed, partners, "new")
            delta = contributions(g, new) - contributions(g, old)
            w = weights[[index[s] for s in order]]
            self._state[key].add(delta, w)
            gone = np.isin(order, list(self._excluded)) if self._excluded else None
            if gone is not None and gone.any():
                self._excl.setdefault(key, GroupSums.zeros(g.width, self.resamples)).add(delta[gone], w[gone])
            self._dirty.add(key)
        self._pending += len(changes)

    def _rows(self, group: Group, sids: list[int], changed: dict, partners: dict, when: str) -> dict[str, Rows]:
        out = {}
        for cid in group.cells:
            rows = Rows.absent(len(sids))
            for i, sid in enumerate(sids):
                change = changed.get((cid, sid))
                if change is None:
                    values = partners.get(cid, {}).get(sid)
                else:
                    image = change.old if when == "old" else change.new
                    values = None if image is None else self._image_values(sid, image)
                if values is not None:
                    rows.present[i] = True
                    rows.values[i] = values
            out[cid] = rows
        return out

    def _exclude(self, conn, exclude: frozenset[int], stats: RefreshStats) -> None:
        """Move samples in or out of the excluded sums: their current contributions, added or taken away."""
        added, removed = exclude - self._excluded, self._excluded - exclude
        if not added and not removed:
            return
        sids = sorted(added | removed)
        sign = np.array([1.0 if s in added else -1.0 for s in sids])[:, None]
        rows = {}
        for cid in self.cells:
            got, values = self._read(conn, cid, sids)
            stats.rows_read += len(got)
            r = Rows.absent(len(sids))
            pos = np.searchsorted(np.array(sids), got)
            r.present[pos] = True
            r.values[pos] = values
            rows[cid] = r
        weights = poisson_weights(sids, self.resamples, self.seed)
        for g in self.groups:
            block = contributions(g, rows) * sign
            self._excl.setdefault(g.key, GroupSums.zeros(g.width, self.resamples)).add(block, weights)
        self._excluded = exclude

    def _view(self) -> LedgerState:
        sums = {}
        for g in self.groups:
            base = self._state[g.key]
            ex = self._excl.get(g.key) if self._excluded else None
            sums[g.key] = base if ex is None else GroupSums(base.sums - ex.sums, base.reps - ex.reps)
        return LedgerState({g.key: g for g in self.groups}, sums, self.resamples, self.watermark, self._excluded)


# --------------------------------------------------------------------------- verification


@dataclass
class Verification:
    """``ledger --verify``: the incremental state against a from-scratch build at one watermark."""

    watermark: int
    groups: int
    resamples: int
    max_point_diff: float
    max_replicate_diff: float
    differences: list[str]

    @property
    def ok(self) -> bool:
        return not self.differences


def verify(store: Store, run: Run, *, score: str | None = None, seed: int = SEED,
           tolerance: float = 1e-9) -> Verification:
    """Compare the persisted state caught up from the log with a from-scratch build, in one snapshot.

    Point sums must agree to ``tolerance`` (relative to the sum's size, 1 at least), and so
    must the replicate sums. Nothing is written. A run with no saved state has nothing to
    compare: the caller reads the ledger first (which saves one).
    """
    incremental = LedgerReader(store, run, score=score, seed=seed, resamples=1, persist=False)
    scratch = LedgerReader(store, run, score=score, seed=seed, resamples=1, persist=False)
    incremental._check_grid()
    scratch._check_grid()
    with store.snapshot() as conn:
        head = state_header(conn, run.id, incremental.score_name, seed)
        if head is None or head.watermark is None:
            raise NotFound(f"run {run.name!r} has no saved ledger state for score {incremental.score_name!r},"
                           f" seed {seed}: read its ledger first")
        incremental.resamples = scratch.resamples = head.resamples
        stats = RefreshStats()
        incremental._load_or_build(conn, stats)
        if stats.rebuilt:
            raise NotFound(f"the saved ledger state of run {run.name!r} is for another grid of cells;"
                           " read its ledger first")
        incremental._catch_up(conn, stats)
        scratch._build(conn, RefreshStats())
    diffs, max_point, max_rep = [], 0.0, 0.0
    for g in incremental.groups:
        a, b = incremental._state[g.key], scratch._state[g.key]
        scale = max(1.0, float(np.abs(b.sums).max(initial=0.0)))
        dp = float(np.abs(a.sums - b.sums).max(initial=0.0)) / scale
        dr = float(np.abs(a.reps - b.reps).max(initial=0.0)) / max(1.0, float(np.abs(b.reps).max(initial=0.0)))
        max_point, max_rep = max(max_point, dp), max(max_rep, dr)
        if dp > tolerance or dr > tolerance:
            diffs.append(f"{g.key}: point sums differ by {dp:.3g}, replicate sums by {dr:.3g} (relative)")
    return Verification(incremental.watermark, len(incremental.groups), head.resamples, max_point, max_rep, diffs)
