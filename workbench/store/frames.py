"""A run's events read into typed columns (an Arrow table), for exports and data frames.

Creating Python objects is what costs most when a 5M-event run is read. The sqlite3 module
spends about 1.5 µs on each 9-column row it returns, which is 7 s for 5M rows before
anything is done with them. So SQLite aggregates each chunk of rows into a single row of
text columns, and the columns are parsed in C:

- integers as comma-separated text (``group_concat``), which is exact;
- texts as JSON arrays (``json_group_array``), which is exact, NULL included;
- scores as the integer ``score · 2^60``. That is exact for every score in [0, 1] down to
  2^-8, because multiplying by a power of two is exact. Any other score (a tiny or
  out-of-range value) is read per row. SQLite's own REAL → text is not used, because it
  keeps 15 digits.

On the 5M-event benchmark store this reads the run in 9 s. Fetching it row by row took
13 s, and fetching it cell by cell in order took 24 s (``bench/bench_analysis.py``).

The chunks are rowid ranges, read in storage order. That matters: a sweep writes its
events sample by sample, so one cell's rows are spread over the whole table, and reading
them cell by cell through the index costs a B-tree lookup per row. Within a chunk, every
aggregate sees the rows in the same order. At the end the columns are put in cell id then
sample order, the order of ``workbench export events``. The whole read is one snapshot,
so a run that is being written is read as of one instant, and the writer is never blocked
(WAL).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
_CELL_FIELDS = ("cell_id", "kind", "k", "budget", "format", "shuffle")
_INTS = ("sid", "h_set", "h_vis", "k_eff", "evidence_tokens", "truncated")
_SCALE = 1 << 60           # an integer in SQL: exactly 2^60 as a REAL operand
_NULL, _PER_ROW = -1, -2   # the scaled-score column's markers: a NULL score, a score read per row
_EXACT = f"score BETWEEN 0 AND 1 AND score * {_SCALE} = CAST(score * {_SCALE} AS INTEGER)"
_CHUNK = ("SELECT json_group_array(cell_id), " + ", ".join(f"group_concat({c})" for c in _INTS)
          + f", group_concat(CASE WHEN score IS NULL THEN {_NULL} WHEN {_EXACT} THEN CAST(score * {_SCALE} AS INTEGER)"
          f" ELSE {_PER_ROW} END), json_group_array(prediction)"
          # `+run_id` keeps SQLite on the rowid range. Through the run_id index every row would be
          # a separate table lookup.
          " FROM events WHERE rowid BETWEEN ? AND ? AND +run_id = ?")
_PER_ROW_SCORES = ("SELECT score FROM events WHERE rowid BETWEEN ? AND ? AND +run_id = ?"
                   f" AND score IS NOT NULL AND NOT ({_EXACT})")


def event_table(store: Store, run: Run, *, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> pa.Table:
    """Every event of ``run`` as a table of :data:`EVENT_SCHEMA`, in cell id then sample order.

    The rows are read in rowid ranges of ``chunk_rows``, all in one read transaction. An
    event whose sample is gone from the dataset has no sample id, so it is left out, as the
    join this replaced left it out.
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be at least 1, not {chunk_rows}")
    with store.snapshot() as conn:
        sids, ids = _sample_ids(conn, run.dataset_id)
        cells = conn.execute(f"SELECT {', '.join(_CELL_FIELDS)} FROM cells WHERE run_id = ? ORDER BY cell_id",
                             (run.id,)).fetchall()
        cell_ids = pa.array([c[0] for c in cells], pa.string())
        first, last = _rowid_range(conn, run.id)
        chunks = []
        for start in range(first, last + 1, chunk_rows):
            span = (start, min(start + chunk_rows - 1, last), run.id)
            chunk = _chunk(conn.execute(_CHUNK, span).fetchone(), cell_ids)
            if chunk is not None:
                if (chunk["score"] == _PER_ROW).any():
                    _read_scores_per_row(conn, span, chunk)
                chunks.append(chunk)
    return _assemble(chunks, cells, sids, ids)


_ROW_FIELDS = ("h_set", "h_vis", "k_eff", "evidence_tokens", "truncated", "prediction", "score")


def event_rows(store: Store, run: Run) -> Iterator[dict[str, Any]]:
    """The events of ``run`` as records of :data:`EVENT_FIELDS`, as :func:`event_table` has them, streamed.

    For the CSV and JSONL exports: one cell at a time, each read in sample order through the
    primary key, so memory holds a row rather than the run (a 5M-event run as a table takes
    1.4 GiB). Reading row by row costs more time than the table's chunks, which is why the
    frames and the Parquet export use those. One read transaction, as for the table.
    """
    with store.snapshot() as conn:
        ids = dict(conn.execute("SELECT sid, id FROM samples WHERE dataset_id = ?", (run.dataset_id,)))
        cells = conn.execute(f"SELECT {', '.join(_CELL_FIELDS)} FROM cells WHERE run_id = ? ORDER BY cell_id",
                             (run.id,)).fetchall()
        for cell in cells:
            fields = dict(zip(_CELL_FIELDS, cell))
            for sid, *values in conn.execute(f"SELECT sid, {', '.join(_ROW_FIELDS)} FROM events"
                                             " WHERE run_id = ? AND cell_id = ? ORDER BY sid", (run.id, cell[0])):
                sample_id = ids.get(sid)
                if sample_id is not None:      # a sample gone from the dataset: left out, as by the table
                    yield {"sample_id": sample_id, **fields, **dict(zip(_ROW_FIELDS, values))}


def _rowid_range(conn, run_id: int) -> tuple[int, int]:
    """The first and last rowid to scan for the run's events (an empty range when there are none)."""
    others = conn.execute("SELECT EXISTS (SELECT 1 FROM events WHERE run_id < ?)"
                          " OR EXISTS (SELECT 1 FROM events WHERE run_id > ?)", (run_id, run_id)).fetchone()[0]
    # With no other run's events in the table, the table's own ends cost nothing (the rowid
    # B-tree's first and last entry). Otherwise the run_id index bounds the scan to this run.
    if others:
        first, last = conn.execute("SELECT min(rowid), max(rowid) FROM events WHERE run_id = ?", (run_id,)).fetchone()
    else:
        first, last = conn.execute("SELECT (SELECT min(rowid) FROM events), (SELECT max(rowid) FROM events)").fetchone()
    return (first, last) if first is not None else (0, -1)


def _sample_ids(conn, dataset_id: int) -> tuple[np.ndarray, pa.Array]:
    """The dataset's sids (ascending) and, at the same positions, their public sample ids."""
    sids, ids = [], []
    for sid, sample_id in conn.execute("SELECT sid, id FROM samples WHERE dataset_id = ? ORDER BY sid",
                                       (dataset_id,)):
        sids.append(sid)
        ids.append(sample_id)
    return np.asarray(sids, dtype=np.int64), pa.array(ids, pa.string())


def _chunk(row: tuple, cell_ids: pa.Array) -> dict[str, np.ndarray | pa.Array] | None:
    """One chunk's aggregated row as columns (None when the range holds none of the run's rows).

    The cell becomes its position in ``cell_ids``. The score is still scaled, with its markers.
    """
    cells, *ints, scores, predictions = row
    if ints[0] is None:  # no row in the range: group_concat of nothing is NULL
        return None
    out: dict[str, np.ndarray | pa.Array] = {
        "cell": pc.index_in(pa.array(json.loads(cells), pa.string()), value_set=cell_ids).to_numpy(),
        "score": np.fromstring(scores, dtype=np.int64, sep=","),
        "prediction": pa.array(json.loads(predictions), pa.string())}
    for name, text in zip(_INTS, ints):
        out[name] = np.fromstring(text, dtype=np.int64, sep=",")
    return out


def _read_scores_per_row(conn, span: tuple, chunk: dict) -> None:
    """Fill in the chunk's scores that the scaled integer cannot hold, from the rows themselves.

    Both queries scan the same rowid range in storage order with the same test, so the
    rows returned here are the marked ones, in order.
    """
    marked = np.flatnonzero(chunk["score"] == _PER_ROW)
    exact = np.array([r[0] for r in conn.execute(_PER_ROW_SCORES, span)], dtype=np.float64)
    if len(exact) != len(marked):
        raise RuntimeError(f"events rowids {span[0]}–{span[1]}: {len(marked)} scores to read per row, "
                           f"{len(exact)} read")
    chunk["exact"] = (marked, exact)


def _scores(chunk: dict) -> np.ndarray:
    """The chunk's scores as floats: NaN for NULL, and the per-row ones put back."""
    scaled = chunk.pop("score")
    scores = np.where(scaled == _NULL, np.nan, scaled / float(_SCALE))   # exact: ≤ 53 significant bits over 2^60
    if "exact" in chunk:
        marked, exact = chunk.pop("exact")
        scores[marked] = exact
    return scores


def _assemble(chunks: list[dict], cells: list[tuple], sids: np.ndarray, ids: pa.Array) -> pa.Table:
    """The chunks' columns joined, put in (cell id, sid) order, and given their cells' and samples' fields."""
    def column(name: str):
        parts = [_scores(c) if name == "score" else c.pop(name) for c in chunks]
        if name == "prediction":
            return pa.concat_arrays(parts) if parts else pa.array([], pa.string())
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64 if name == "score" else np.int64)

    cell, sid = column("cell"), column("sid")
    # Cells are numbered in cell id order, and (cell, sid) is unique: one sort on one key.
    low = int(sid.min(initial=0))
    order = np.argsort(cell.astype(np.int64) * (int(sid.max(initial=0)) - low + 1) + (sid - low))
    cell, sid = cell[order], sid[order]
    pos = np.minimum(np.searchsorted(sids, sid), max(len(sids) - 1, 0))
    known = sids[pos] == sid if len(sids) else np.zeros(len(sid), dtype=bool)
    by_cell = pa.array(cell)
    arrays = {"sample_id": ids.take(pa.array(pos)) if len(sids) else pa.nulls(len(sid), pa.string())}
    for i, name in enumerate(_CELL_FIELDS):  # a cell's own fields, repeated on each of its rows
        arrays[name] = pa.array([c[i] for c in cells], EVENT_SCHEMA.field(name).type).take(by_cell)
    for name in _INTS[1:]:
        arrays[name] = pa.array(column(name)[order])
    arrays["prediction"] = column("prediction").take(pa.array(order))
    arrays["score"] = pa.array(column("score")[order], pa.float64(), from_pandas=True)  # NaN → null
    table = pa.Table.from_arrays([arrays[name] for name in EVENT_FIELDS], schema=EVENT_SCHEMA)
    return table if known.all() else table.filter(pa.array(known))
