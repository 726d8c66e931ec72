"""Exports of events and ledgers as CSV, JSONL or Parquet records.

Where they are written is :mod:`workbench.data.outfile`'s to decide (``write_atomic``).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from workbench.store.db import Store
from workbench.store.queries import Run

if TYPE_CHECKING:  # pyarrow loads only for an events or Parquet export, not for every file written here
    import pyarrow as pa

__all__ = ["event_records", "ledger_records", "flatten", "render", "parquet_chunks"]


def event_records(store: Store, run: Run) -> Iterable[dict[str, Any]]:
    """One dict per (sample, cell) of the run, in cell then sample order, streamed (one row in memory).

    The keys are :data:`workbench.store.frames.EVENT_FIELDS`; the rows are those of
    :func:`~workbench.store.frames.event_table` (tests/test_analysis.py compares them).
    """
    from workbench.store.frames import event_rows

    yield from event_rows(store, run)


def ledger_records(report) -> list[dict[str, Any]]:
    """The ledger as one JSON-ready object per cell; every term is ``{value, lo, hi}``."""
    out = []
    for row in report.rows:
        out.append({"kind": "retrieval", **{k: _plain(v) for k, v in row.items()}})
    for row in report.oracle:
        out.append({"kind": "oracle", "cell_id": f"oracle-b{row['budget']}",
                    **{k: _plain(v) for k, v in row.items()}})
    return out


def _plain(value: Any) -> Any:
    if is_dataclass(value):
        return asdict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    """``{"S_vis": {"value", "lo", "hi"}}`` → ``S_vis``, ``S_vis_lo``, ``S_vis_hi`` columns for CSV."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, dict) and set(value) == {"value", "lo", "hi"}:
            flat[key], flat[f"{key}_lo"], flat[f"{key}_hi"] = value["value"], value["lo"], value["hi"]
        elif isinstance(value, dict):
            for sub, subval in flatten(value).items():
                flat[f"{key}.{sub}"] = subval
        elif isinstance(value, list):
            flat[key] = json.dumps(value, ensure_ascii=False)
        else:
            flat[key] = value
    return flat


def render(records: Iterable[dict[str, Any]], fmt: str) -> Iterable[str]:
    """Records as JSONL lines or CSV text chunks (header from the first record)."""
    if fmt == "jsonl":
        for rec in records:
            yield json.dumps(rec, ensure_ascii=False) + "\n"
        return
    if fmt != "csv":
        raise ValueError(f"--format: {fmt!r} is not csv or jsonl")
    writer = None
    buf = io.StringIO()
    # A list (the ledger: retrieval and oracle rows differ) gets the union of its columns;
    # a stream (events: uniform rows) takes its header from the first row.
    fields = list(dict.fromkeys(k for rec in records for k in flatten(rec))) if isinstance(records, list) else None
    for rec in records:
        flat = flatten(rec)
        if writer is None:
            writer = csv.DictWriter(buf, fieldnames=fields or list(flat), extrasaction="ignore",
                                    lineterminator="\n")
            writer.writeheader()
        writer.writerow({k: "" if v is None else v for k, v in flat.items()})
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()


def parquet_chunks(schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> Iterator[bytes]:
    """A Parquet file of ``batches`` (all of ``schema``) as byte chunks, for :func:`workbench.data.outfile.write_atomic`.

    One row group per batch, handed on as soon as it is encoded, so the encoded file is
    never held whole. The columns are plain and typed, with nulls where values
    are undefined, and there is no index column. ``schema``'s metadata (pandas' dtypes, the
    export's provenance) goes into the file's footer. Compression is zstd, which DuckDB,
    polars and pandas all read.
    """
    import pyarrow.parquet as pq

    sink = _Collect()
    with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        for batch in batches:
            writer.write_batch(batch)
            yield sink.take()
    yield sink.take()  # the footer, written on close


class _Collect(io.RawIOBase):
    """A write-only sink that gives out what was written since the last take (its position keeps counting)."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[bytes] = []
        self._position = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        chunk = bytes(data)
        self._parts.append(chunk)
        self._position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        # Parquet records each column chunk's offset from this: the bytes written so far.
        return self._position

    def take(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out
