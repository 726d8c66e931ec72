"""Exports of events and ledgers as CSV, JSONL or Parquet, written only to the path the user named.

Writing never replaces what the user did not name: a symbolic link keeps pointing where it
did (its target gets the export), and a device or FIFO is written through, not swapped.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import tempfile
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from workbench.errors import BadInput, EnvironmentFault
from workbench.store.db import Store
from workbench.store.queries import Run

if TYPE_CHECKING:  # pyarrow loads only for an events or Parquet export, not for every file written here
    import pyarrow as pa

__all__ = ["event_records", "ledger_records", "flatten", "render", "parquet_chunks", "write_atomic"]


def event_records(store: Store, run: Run) -> Iterable[dict[str, Any]]:
    """One dict per (sample, cell) of the run, in cell then sample order.

    The keys are :data:`workbench.store.frames.EVENT_FIELDS`.
    """
    # The one reader of a run's events (workbench.store.frames): the record exports, the Parquet
    # export and the analysis API's frames see the same rows.
    from workbench.store.frames import DEFAULT_CHUNK_ROWS, event_table

    for batch in event_table(store, run).to_batches(max_chunksize=DEFAULT_CHUNK_ROWS):
        yield from batch.to_pylist()


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
    """A Parquet file of ``batches`` (all of ``schema``) as byte chunks, for :func:`write_atomic`.

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


def write_atomic(path: str | Path, chunks: Iterable[str | bytes]) -> int:
    """Write ``chunks`` (text as UTF-8, or bytes) to exactly ``path``; return the bytes written.

    A regular file (new or existing) is written to a temp file in its directory and renamed
    over it, keeping an existing file's permissions: a reader never sees half a file. A
    symbolic link is followed and its target written the same way: the link stays. Anything
    else that exists there (``/dev/null``, a FIFO, a terminal) is written through, never
    replaced. A directory, or a missing parent directory, is :class:`BadInput`; a failed write
    (a full disk, ``/dev/full``, no permission) is one :class:`EnvironmentFault` line.
    """
    target = Path(os.path.realpath(path))
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise EnvironmentFault(f"cannot write {path}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{path}: is a directory; name the file to write")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return _write_through(path, chunks)
    if not target.parent.is_dir():
        where = Path(path).parent if Path(path).parent.resolve() == target.parent else target.parent
        raise BadInput(f"{where}: directory does not exist")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        # mkstemp makes the file 0600; the file should look as any other the user writes.
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as fh:
            size = _write_chunks(fh, chunks)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise EnvironmentFault(f"cannot write {path}: {exc.strerror or exc}; nothing was written") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return size


def _write_chunks(fh, chunks: Iterable[str | bytes]) -> int:
    """Write text (as UTF-8) or bytes chunks to a binary file; return the bytes written."""
    size = 0
    for chunk in chunks:
        data = chunk.encode("utf-8") if isinstance(chunk, str) else chunk
        fh.write(data)
        size += len(data)
    return size


def _write_through(path: str | Path, chunks: Iterable[str | bytes]) -> int:
    """Write into an existing non-regular file (a device, a FIFO) as it is: it cannot be swapped."""
    try:
        with open(path, "wb") as fh:
            size = _write_chunks(fh, chunks)
    except OSError as exc:
        raise EnvironmentFault(f"cannot write {path}: {exc.strerror or exc}") from None
    return size


def _current_umask() -> int:
    # Read once at import: os.umask can only be read by setting it, which races with threads.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _current_umask()
