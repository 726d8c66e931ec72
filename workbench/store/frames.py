"""A run's events read in column chunks (Arrow record batches), for exports and data frames.

A 5M-event run does not fit in memory as Python objects. Here it never exists that way.
Each cell's rows come from one indexed query, read ``chunk_rows`` at a time with
``fetchmany``. Each chunk becomes typed columns (a :class:`pyarrow.RecordBatch`) before the
next one is read. Every batch is read in one snapshot, so a run that is being written is
read as of one instant, and the writer is never blocked (WAL).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from workbench.store.db import Store
from workbench.store.queries import Run

#: One event row: its sample, its cell's grid point, the window it saw and its answer.
EVENT_SCHEMA = pa.schema([
    ("sample_id", pa.string()), ("cell_id", pa.string()), ("kind", pa.string()), ("k", pa.int64()),
    ("budget", pa.int64()), ("format", pa.string()), ("shuffle", pa.int64()), ("h_set", pa.int64()),
    ("h_vis", pa.int64()), ("k_eff", pa.int64()), ("evidence_tokens", pa.int64()), ("truncated", pa.int64()),
    ("prediction", pa.string()), ("score", pa.float64()),
])
EVENT_FIELDS: tuple[str, ...] = tuple(EVENT_SCHEMA.names)
DEFAULT_CHUNK_ROWS = 100_000
_INTS = ("h_set", "h_vis", "k_eff", "evidence_tokens", "truncated")


def event_batches(store: Store, run: Run, *, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
    """The run's events as record batches of :data:`EVENT_SCHEMA`, in cell id then sample order.

    A batch holds at most ``chunk_rows`` rows of one cell. All batches come from one read
    transaction. Leaving the iterator early ends it, because closing the generator ends the
    snapshot.
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be at least 1, not {chunk_rows}")
    with store.snapshot() as conn:
        sids, ids = _sample_ids(conn, run.dataset_id)
        cells = conn.execute("SELECT cell_id, kind, k, budget, format, shuffle FROM cells WHERE run_id = ?"
                             " ORDER BY cell_id", (run.id,)).fetchall()
        for cell in cells:
            cursor = conn.execute(
                "SELECT sid, h_set, h_vis, k_eff, evidence_tokens, truncated, prediction, score FROM events"
                " WHERE run_id = ? AND cell_id = ? ORDER BY sid", (run.id, cell[0]))
            while rows := cursor.fetchmany(chunk_rows):
                batch = _batch(cell, rows, sids, ids)
                if batch.num_rows:
                    yield batch


def _sample_ids(conn, dataset_id: int) -> tuple[np.ndarray, pa.Array]:
    """The dataset's sids (ascending) and, at the same positions, their public sample ids."""
    sids, ids = [], []
    for sid, sample_id in conn.execute("SELECT sid, id FROM samples WHERE dataset_id = ? ORDER BY sid",
                                       (dataset_id,)):
        sids.append(sid)
        ids.append(sample_id)
    return np.asarray(sids, dtype=np.int64), pa.array(ids, pa.string())


def _batch(cell: tuple, rows: list[tuple], sids: np.ndarray, ids: pa.Array) -> pa.RecordBatch:
    """One cell's rows as columns. The cell's own fields are repeated, and sample ids are taken by sid."""
    cell_id, kind, k, budget, fmt, shuffle = cell
    cols = list(zip(*rows))
    sid = np.asarray(cols[0], dtype=np.int64)
    pos = np.minimum(np.searchsorted(sids, sid), max(len(sids) - 1, 0))
    known = sids[pos] == sid if len(sids) else np.zeros(len(sid), dtype=bool)
    n = len(rows)
    repeat = lambda value, type_: pa.repeat(pa.scalar(value, type_), n)  # noqa: E731
    columns = [ids.take(pa.array(pos)) if len(sids) else pa.nulls(n, pa.string()),
               repeat(cell_id, pa.string()), repeat(kind, pa.string()), repeat(k, pa.int64()),
               repeat(budget, pa.int64()), repeat(fmt, pa.string()), repeat(shuffle, pa.int64()),
               *(pa.array(np.asarray(cols[1 + i], dtype=np.int64)) for i in range(len(_INTS))),
               pa.array(cols[6], pa.string()), pa.array(cols[7], pa.float64())]
    batch = pa.RecordBatch.from_arrays(columns, schema=EVENT_SCHEMA)
    # An event whose sample is gone from the dataset has no sample id. The joined query that
    # this replaced never returned such an event, so it is left out here too.
    return batch if known.all() else batch.filter(pa.array(known))
