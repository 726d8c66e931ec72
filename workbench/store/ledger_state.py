"""The incremental ledger's tables: the event log (what changed since a watermark) and persisted states.

Schema and the reasons for it: ``migrations/0011_event_log.sql``. The arithmetic lives in
:mod:`workbench.runs.aggregate`; this module only reads and writes rows.

Every reader of changes works inside :meth:`Store.snapshot`, so the log, the events and the
watermark it records are one instant of the database.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Sequence

import numpy as np

from workbench.store.db import Store, utcnow

#: The event columns a ledger state is computed from, in the order of a row image.
ROW_COLUMNS: tuple[str, ...] = ("h_set", "h_vis", "k_eff", "evidence_tokens", "truncated", "score")
_SQL_ROW = ", ".join(f"e.{c}" for c in ROW_COLUMNS)
_SQL_OLD = ", ".join(f"l.{c}" for c in ROW_COLUMNS)
# A header whose builder has not written its sums for this long was left by a killed process.
_ABANDONED_AFTER = timedelta(minutes=30)
_IN_CHUNK = 500  # ids per "IN (...)" list: well under SQLite's variable limit


@dataclass(frozen=True)
class Image:
    """One event row as the ledger sees it: ``values`` in :data:`ROW_COLUMNS` order (score NaN = none)."""

    values: tuple[float, ...]
    prediction: str | None = None


@dataclass(frozen=True)
class Change:
    """An event changed since a watermark: its image then (``None``: absent) and now (``None``: deleted)."""

    cell_id: str
    sid: int
    old: Image | None
    new: Image | None


@dataclass(frozen=True)
class StateHeader:
    """A persisted ledger state's header (``watermark`` None: being built, or left by a killed builder)."""

    id: int
    resamples: int
    watermark: int | None
    groups: list[str]
    updated_at: str


def _image(values: Sequence, prediction: str | None = None) -> Image:
    *ints, score = values
    return Image((*(float(v) for v in ints), float("nan") if score is None else float(score)), prediction)


# --------------------------------------------------------------------------- the log


def current_seq(conn: sqlite3.Connection) -> int:
    """The highest change sequence number ever assigned (0 before any): every change so far is ≤ it."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'event_log'").fetchone()
    return int(row[0]) if row else 0


def log_floor(conn: sqlite3.Connection, run_id: int) -> int:
    """The highest seq pruned from the run's log: a delta from a lower watermark is incomplete."""
    row = conn.execute("SELECT seq FROM event_log_floor WHERE run_id = ?", (run_id,)).fetchone()
    return int(row[0]) if row else 0


def logging_active(conn: sqlite3.Connection, run_id: int) -> bool:
    """Whether the run's changes are being logged (it has a ledger state, built or being built)."""
    return conn.execute("SELECT 1 FROM ledger_states WHERE run_id = ? LIMIT 1", (run_id,)).fetchone() is not None


def changes_since(conn: sqlite3.Connection, run_id: int, since: int,
                  predictions: bool = False) -> tuple[list[Change], int]:
    """The run's events changed after ``since``, one :class:`Change` per event, and the log rows read.

    The old image is the one logged by the *first* change after ``since`` (the row as of the
    watermark); the new one is the event as it is now, read in the same query.
    """
    pred_old, pred_new = (", l.prediction", ", e.prediction") if predictions else ("", "")
    rows = conn.execute(
        f"SELECT l.cell_id, l.sid, l.existed, {_SQL_OLD}{pred_old}, e.sid IS NOT NULL, {_SQL_ROW}{pred_new}"
        " FROM event_log l LEFT JOIN events e ON e.run_id = l.run_id AND e.cell_id = l.cell_id AND e.sid = l.sid"
        " WHERE l.run_id = ? AND l.seq > ? ORDER BY l.seq", (run_id, since)).fetchall()
    width = len(ROW_COLUMNS) + (1 if predictions else 0)
    first: dict[tuple[str, int], Change] = {}
    for row in rows:
        key = (row[0], row[1])
        if key in first:
            continue
        old_part, new_part = row[3:3 + width], row[4 + width:]
        old = _image(old_part[:len(ROW_COLUMNS)], old_part[-1] if predictions else None) if row[2] else None
        exists = row[3 + width]
        new = _image(new_part[:len(ROW_COLUMNS)], new_part[-1] if predictions else None) if exists else None
        first[key] = Change(row[0], row[1], old, new)
    return list(first.values()), len(rows)


def read_rows(conn: sqlite3.Connection, run_id: int, cell_id: str, sids: Iterable[int] | None = None,
              predictions: bool = False) -> tuple[np.ndarray, np.ndarray, list[str | None] | None]:
    """One cell's rows (all, or those of ``sids``) in sid order: sids, values (n × 6, score NaN), predictions."""
    # -1 stands for a NULL score (scores lie in [0, 1]): the rows then convert to one float array at once.
    cols = "e.sid, " + ", ".join(f"e.{c}" for c in ROW_COLUMNS[:-1]) + ", ifnull(e.score, -1.0)"
    base = f"SELECT {cols}{', e.prediction' if predictions else ''} FROM events e WHERE e.run_id = ? AND e.cell_id = ?"
    if sids is None:
        rows = conn.execute(base + " ORDER BY e.sid", (run_id, cell_id)).fetchall()
    else:
        wanted = sorted(set(int(s) for s in sids))
        rows = []
        for i in range(0, len(wanted), _IN_CHUNK):
            part = wanted[i:i + _IN_CHUNK]
            rows += conn.execute(base + f" AND e.sid IN ({','.join('?' * len(part))}) ORDER BY e.sid",
                                 (run_id, cell_id, *part)).fetchall()
    width = 1 + len(ROW_COLUMNS)
    preds = None
    if predictions:
        preds = [r[-1] for r in rows]
        rows = [r[:width] for r in rows]
    table = np.array(rows, dtype=np.float64).reshape(len(rows), width)
    values = table[:, 1:]
    values[values[:, -1] < 0, -1] = np.nan
    return table[:, 0].astype(np.int64), values, preds


# --------------------------------------------------------------------------- persisted states


def state_header(conn: sqlite3.Connection, run_id: int, score: str, seed: int) -> StateHeader | None:
    """The persisted state of (run, scorer, seed), if any."""
    row = conn.execute("SELECT id, resamples, watermark, groups, updated_at FROM ledger_states"
                       " WHERE run_id = ? AND score = ? AND seed = ?", (run_id, score, seed)).fetchone()
    return None if row is None else StateHeader(row[0], row[1], row[2], json.loads(row[3]), row[4])


def open_header(store: Store, run_id: int, score: str, seed: int, resamples: int, groups: list[str]) -> None:
    """Make sure (run, scorer, seed) has a header, so the run's changes are logged from now on.

    Called *before* a builder takes its snapshot: a change committed between the two is
    then in both the snapshot and the log, never in neither.
    """
    with store.transaction() as conn:
        conn.execute("INSERT OR IGNORE INTO ledger_states (run_id, score, seed, resamples, watermark, groups,"
                     " updated_at) VALUES (?, ?, ?, ?, NULL, ?, ?)",
                     (run_id, score, seed, resamples, json.dumps(groups), utcnow()))


def load_sums(conn: sqlite3.Connection, state_id: int, widths: dict[str, int],
              resamples: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A state's sums and the first ``resamples`` replicate sums of each group: O(groups × resamples)."""
    out = {}
    for grp, sums, reps in conn.execute("SELECT grp, sums, replicates FROM ledger_sums WHERE state_id = ?",
                                        (state_id,)):
        width = widths[grp]
        out[grp] = (np.frombuffer(sums, dtype=np.float64).copy(),
                    np.frombuffer(reps, dtype=np.float64).reshape(-1, width)[:resamples].copy())
    return out


def save_state(store: Store, run_id: int, score: str, seed: int, *, resamples: int, watermark: int,
               groups: list[str], sums: dict[str, tuple[np.ndarray, np.ndarray]], base_watermark: int | None,
               dirty: set[str]) -> bool:
    """Persist a state at ``watermark`` in one transaction; False if a state as new is already stored.

    Only the ``dirty`` groups (changed since ``base_watermark``, the state this one was loaded
    from or last saved as) are written when the stored state is that one or a newer one of
    the same shape; otherwise every group. Then the run's log is pruned below the oldest
    state it still serves.
    """
    with store.transaction() as conn:
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            return False  # deleted meanwhile
        head = state_header(conn, run_id, score, seed)
        if head is not None and head.watermark is not None and head.watermark >= watermark:
            return False
        partial = (head is not None and head.watermark is not None and base_watermark is not None
                   and head.watermark >= base_watermark and head.resamples == resamples and head.groups == groups)
        if head is None:
            conn.execute("INSERT INTO ledger_states (run_id, score, seed, resamples, watermark, groups, updated_at)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (run_id, score, seed, resamples, watermark, json.dumps(groups), utcnow()))
            head = state_header(conn, run_id, score, seed)
        else:
            conn.execute("UPDATE ledger_states SET resamples = ?, watermark = ?, groups = ?, updated_at = ?"
                         " WHERE id = ?", (resamples, watermark, json.dumps(groups), utcnow(), head.id))
        if not partial:
            conn.execute("DELETE FROM ledger_sums WHERE state_id = ?", (head.id,))
        names = groups if not partial else [g for g in groups if g in dirty]
        conn.executemany("INSERT OR REPLACE INTO ledger_sums (state_id, grp, sums, replicates) VALUES (?, ?, ?, ?)",
                         [(head.id, g, sums[g][0].astype(np.float64).tobytes(),
                           np.ascontiguousarray(sums[g][1], dtype=np.float64).tobytes()) for g in names])
        _prune(conn, run_id)
    return True


def _prune(conn: sqlite3.Connection, run_id: int) -> None:
    """Drop the run's log rows every state has passed; a header left unbuilt for long is dropped first."""
    stale = (datetime.now(timezone.utc) - _ABANDONED_AFTER).isoformat(timespec="seconds")
    conn.execute("DELETE FROM ledger_states WHERE run_id = ? AND watermark IS NULL AND updated_at < ?",
                 (run_id, stale))
    building, floor = conn.execute("SELECT count(*) - count(watermark), min(watermark) FROM ledger_states"
                                   " WHERE run_id = ?", (run_id,)).fetchone()
    if building or floor is None:
        return  # a builder's snapshot may still need the changes after it
    conn.execute("DELETE FROM event_log WHERE run_id = ? AND seq <= ?", (run_id, floor))
    conn.execute("INSERT INTO event_log_floor (run_id, seq) VALUES (?, ?)"
                 " ON CONFLICT (run_id) DO UPDATE SET seq = max(seq, excluded.seq)", (run_id, floor))

