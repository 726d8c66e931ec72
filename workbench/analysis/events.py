"""A run's events as a frame: one row per (sample, cell)."""

from __future__ import annotations

from typing import Iterator

import pandas as pd
import pyarrow as pa

from workbench.analysis.source import Db, reading
from workbench.analysis.typed import FLOAT, INT, NULLABLE_INT, STR, arrow_schema, frame_from_arrow
from workbench.store.db import Store
from workbench.store.frames import DEFAULT_CHUNK_ROWS, EVENT_FIELDS, event_table
from workbench.store.queries import Run, get_run

#: The columns of :func:`events`, the same as ``workbench export events``.
EVENT_DTYPES: dict[str, object] = {
    "sample_id": STR, "cell_id": STR, "kind": STR,
    "k": NULLABLE_INT,        # <NA> for an oracle cell
    "budget": INT, "format": STR,
    "shuffle": NULLABLE_INT,  # the oracle's linear shuffle; <NA> for every other cell
    "h_set": INT, "h_vis": INT, "k_eff": INT, "evidence_tokens": INT, "truncated": INT,
    "prediction": STR,        # NaN until generated or imported
    "score": FLOAT,           # NaN until scored
}
assert tuple(EVENT_DTYPES) == EVENT_FIELDS, "the frame's columns are the export's"


def events(db: Db, run: str | None = None, *, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> pd.DataFrame:
    """Every event of ``run`` (default: the most recent) as a frame typed by :data:`EVENT_DTYPES`.

    The rows are in cell id then sample order, as in ``workbench export events``. They are
    read in rowid chunks of ``chunk_rows`` straight into columns, never as a Python object
    per value: a 5M-event run takes 8.7 s and 1.34 GiB at the peak (``bench/bench_analysis.py``).
    All the rows come from one snapshot of the database.
    """
    with reading(db) as store:
        # Handed over without a name of our own, so the conversion can free each column as it goes.
        return frame_from_arrow(event_table(store, get_run(store, run), chunk_rows=chunk_rows), EVENT_DTYPES)


def event_parquet_batches(store: Store, run: Run) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The schema and the batches of a Parquet events export: the frame's schema, one row group per chunk."""
    schema = arrow_schema(EVENT_DTYPES, {"export": "events", "run": run.name, "dataset": run.dataset})
    plain = pa.schema([schema.field(name) for name in schema.names])  # the frame's Arrow types, no metadata
    table = event_table(store, run).cast(plain)
    return schema, iter(table.to_batches(max_chunksize=DEFAULT_CHUNK_ROWS))
