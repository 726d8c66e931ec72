"""A claim run's verified answers as a frame: one row per answer, with its support ratio and per-answer metrics."""

from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.analysis.source import Db, reading
from workbench.analysis.typed import FLOAT, INT, STR, typed_frame
from workbench.claims.metrics import METRICS, RAGCHECKER_NAMES
from workbench.claims.report import claim_runs, claim_values, latest_claim_run
from workbench.store.db import Store
from workbench.store.lookup import NotFound
from workbench.store.queries import Run, get_run, load_samples

#: The columns of :func:`claims`. ``support_ratio`` is the answer's supported claims over its
#: claims, and NaN when it has no claim. The rest are the RAGChecker-style metrics of
#: :data:`workbench.claims.metrics.METRICS` for that answer, NaN where undefined; then the same
#: answer's figures under RAGChecker's own convention (``ragchecker_<its metric name>``: an empty
#: set counts as 0, never NaN; NaN only for an answer checked before these were stored).
RAGCHECKER_COLUMNS = tuple(f"ragchecker_{name}" for name in RAGCHECKER_NAMES)
CLAIM_DTYPES: dict[str, object] = {
    "claim_run": INT, "cell_id": STR, "sample_id": STR, "support_ratio": FLOAT, **{m: FLOAT for m in METRICS},
    **{c: FLOAT for c in RAGCHECKER_COLUMNS},
}


def claims(db: Db, run: str | None = None, *, claim_run: int | None = None) -> pd.DataFrame:
    """The verified answers of ``run``'s latest claim run, or of ``claim_run``, typed by :data:`CLAIM_DTYPES`.

    There is one row per finished claim job, that is per (cell, sample) answer, in cell id
    then sample order. ``workbench claims report`` averages these rows per cell. A run with
    no claim run gives an empty frame.
    """
    with reading(db) as store:
        return typed_frame(claim_records(store, get_run(store, run), claim_run), CLAIM_DTYPES)


def chosen_claim_run(store: Store, run: Run, claim_run: int | None) -> int | None:
    """``claim_run`` if it is one of ``run``'s, else the latest with finished jobs (None if there is none)."""
    if claim_run is None:
        info = latest_claim_run(store, run)
        return info.id if info else None
    known = [info.id for info in claim_runs(store, run)]
    if claim_run not in known:
        raise NotFound(f"no claim run {claim_run} over run {run.name!r} (known: {', '.join(map(str, known)) or 'none'})")
    return claim_run


def claim_records(store: Store, run: Run, claim_run: int | None = None) -> list[dict[str, Any]]:
    """The rows of :func:`claims` as plain records (``None`` = undefined), for the CSV and JSONL exports."""
    chosen = chosen_claim_run(store, run, claim_run)
    if chosen is None:
        return []
    ids = {s.sid: s.id for s in load_samples(store, run.dataset_id)}
    return [_record(chosen, cell_id, ids[sid], values)
            for cell_id, by_sid in claim_values(store, chosen).items() for sid, values in by_sid.items()]


def _record(claim_run: int, cell_id: str, sample_id: str, values: dict) -> dict[str, Any]:
    theirs = values.get("ragchecker") or {}
    return {"claim_run": claim_run, "cell_id": cell_id, "sample_id": sample_id,
            **{k: v for k, v in values.items() if k != "ragchecker"},
            **{f"ragchecker_{name}": theirs.get(name) for name in RAGCHECKER_NAMES}}
