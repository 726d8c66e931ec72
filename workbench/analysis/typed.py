"""Typed frames: every frame of the analysis API has a fixed column → dtype map.

The dtypes depend on the column, never on the data. A run with no oracle cell still gets a
nullable ``k``, and a ledger with no claim run still has its claim columns, which are all
undefined. So code written against one run works on the next one, and Parquet files of
different runs share one schema.

Undefined stays undefined: NaN in a float column, ``<NA>`` in a nullable integer column,
and NaN in a string column (pandas' ``str`` dtype). Parquet stores all of these as nulls.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

STR = pd.StringDtype(na_value=np.nan)   # pandas' default "str" dtype; NaN when missing
INT = np.dtype("int64")                 # never missing
NULLABLE_INT = pd.Int64Dtype()          # "Int64": <NA> when missing (a count or a grid point that may be absent)
FLOAT = np.dtype("float64")             # NaN = undefined (an empty conditioning set, an unscored job)
BOOL = np.dtype("bool")
TIME = pd.DatetimeTZDtype("us", "UTC")

Dtypes = Mapping[str, Any]


def empty_frame(dtypes: Dtypes) -> pd.DataFrame:
    """No rows, every column of ``dtypes`` with its dtype."""
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in dtypes.items()})


def typed_frame(records: Iterable[Mapping[str, Any]], dtypes: Dtypes) -> pd.DataFrame:
    """Plain records (``None`` = undefined) as a frame with exactly the columns and dtypes of ``dtypes``.

    Keys that are not in ``dtypes`` are dropped. Columns that no record has are undefined.
    """
    records = list(records)
    if not records:
        return empty_frame(dtypes)
    frame = pd.DataFrame.from_records(records, columns=list(dtypes))
    for name, dtype in dtypes.items():
        if isinstance(dtype, pd.DatetimeTZDtype):  # ISO-8601 text as written by the store
            frame[name] = pd.to_datetime(frame[name], utc=True).astype(dtype)
    return frame.astype(dict(dtypes))


def frame_from_arrow(table: pa.Table, dtypes: Dtypes) -> pd.DataFrame:
    """An Arrow table whose columns are those of ``dtypes`` as a typed frame.

    Arrow's buffers are released column by column as they convert, so a large table is not
    held twice at the peak.
    """
    if table.schema.names != list(dtypes):
        raise ValueError(f"columns {table.schema.names} are not {list(dtypes)}")
    # The table is not used after this: each column's buffers go as soon as it has converted.
    frame = table.to_pandas(split_blocks=True, self_destruct=True)
    wrong = {name: dtype for name, dtype in dtypes.items() if frame[name].dtype != dtype}
    return frame.astype(wrong) if wrong else frame


def arrow_schema(dtypes: Dtypes, provenance: Mapping[str, Any] | None = None) -> pa.Schema:
    """The Arrow schema of a frame typed by ``dtypes``, with pandas' metadata and no index.

    With pandas' metadata, ``pandas.read_parquet`` gives back these dtypes, such as ``Int64``
    for a nullable count. DuckDB and polars ignore it and read plain typed columns.
    ``provenance`` (what was exported, and how a ledger was computed) is stored as JSON
    under the key ``workbench``.
    """
    schema = pa.Schema.from_pandas(empty_frame(dtypes), preserve_index=False)
    if provenance:
        schema = schema.with_metadata({**schema.metadata,
                                       b"workbench": json.dumps(dict(provenance), ensure_ascii=False).encode()})
    return schema


def arrow_batches(frame: pd.DataFrame, schema: pa.Schema) -> list[pa.RecordBatch]:
    """A typed frame as record batches of ``schema`` (for a Parquet file)."""
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False).to_batches()
