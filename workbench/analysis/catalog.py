"""What a database holds, as frames: its datasets, its runs and the triage tags on samples."""

from __future__ import annotations

import json

import pandas as pd

from workbench.analysis.source import Db, reading
from workbench.analysis.typed import INT, STR, TIME, typed_frame
from workbench.store.queries import get_dataset, list_datasets, list_runs
from workbench.triage import tagged_samples

#: The columns of :func:`datasets`. ``retrievers`` is the retriever names joined by commas.
#: ``hops`` is a JSON object mapping a hop count to its number of samples.
DATASET_DTYPES: dict[str, object] = {
    "name": STR, "unit_kind": STR, "created_at": TIME, "units": INT, "units_outside_kb": INT, "samples": INT,
    "retrievers": STR, "hops": STR,
}
#: The columns of :func:`runs`. ``retriever`` and ``model`` are NaN when the run has none; ``skipped`` counts the
#: jobs a sequential run never asks (their cells stopped when decided).
RUN_DTYPES: dict[str, object] = {
    "name": STR, "dataset": STR, "retriever": STR, "model": STR, "created_at": TIME, "cells": INT, "jobs": INT,
    "done": INT, "pending": INT, "errors": INT, "skipped": INT,
}
#: The columns of :func:`tags`: one row per tag on a sample. ``note`` is the sample's note,
#: and "" when it has none.
TAG_DTYPES: dict[str, object] = {"dataset": STR, "sample_id": STR, "tag": STR, "note": STR, "question": STR}


def datasets(db: Db) -> pd.DataFrame:
    """Every dataset with its unit, sample and retriever counts (``workbench datasets``), typed by :data:`DATASET_DTYPES`."""
    with reading(db) as store:
        rows = list_datasets(store)
    return typed_frame(({**r, "retrievers": ",".join(r["retrievers"]), "hops": json.dumps(r["hops"])} for r in rows),
                       DATASET_DTYPES)


def runs(db: Db) -> pd.DataFrame:
    """Every run with its dataset and job counts (``workbench runs``), typed by :data:`RUN_DTYPES`."""
    with reading(db) as store:
        return typed_frame(list_runs(store), RUN_DTYPES)


def tags(db: Db, dataset: str | None = None) -> pd.DataFrame:
    """The triage tags of every dataset (or of ``dataset``), one row per (sample, tag), typed by :data:`TAG_DTYPES`.

    The same samples as ``workbench tags export``, in dataset then sample then tag order.
    """
    with reading(db) as store:
        names = [dataset] if dataset is not None else [d["name"] for d in list_datasets(store)]
        rows = []
        for name in names:
            found = get_dataset(store, name)
            rows += [{"dataset": found.name, "sample_id": s["sample_id"], "tag": tag, "note": s["note"],
                      "question": s["question"]} for s in tagged_samples(store, found.id) for tag in s["tags"]]
    return typed_frame(rows, TAG_DTYPES)
