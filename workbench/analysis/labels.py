"""Human labels of judged items as a frame: one row per label, as ``workbench judge labels export`` writes them."""

from __future__ import annotations

import pandas as pd

from workbench.analysis.source import Db, reading
from workbench.analysis.typed import BOOL, NULLABLE_INT, STR, TIME, typed_frame
from workbench.data.labels import label_records

#: The columns of :func:`labels`. Item fields that a kind does not have are missing: ``run`` (all but
#: relevance), ``dataset`` and ``chunk_id`` (relevance), ``sample_id`` (claims, answers, relevance),
#: ``cell_id`` (claims and answers), ``claim`` and ``text`` (claims), ``a`` and ``b`` (dedup pairs, the
#: entities' names). ``label`` is True for supported / the same entity / a correct answer / a relevant
#: chunk; ``via`` is how the item was chosen (only ``uniform`` labels feed a prediction-powered estimate).
LABEL_DTYPES: dict[str, object] = {
    "kind": STR, "run": STR, "dataset": STR, "sample_id": STR, "cell_id": STR, "chunk_id": STR,
    "claim": NULLABLE_INT, "text": STR, "a": STR, "b": STR, "label": BOOL, "annotator": STR, "via": STR,
    "labelled_at": TIME,
}


def labels(db: Db, kind: str | None = None, run: str | None = None) -> pd.DataFrame:
    """Every human label (of ``kind``: claim, dedup_pair, answer or relevance; of the run, dedup run or dataset
    ``run``), typed by :data:`LABEL_DTYPES`, in the order of a label file."""
    with reading(db) as store, store.snapshot() as conn:
        return typed_frame(list(label_records(conn, kinds=None if kind is None else [kind], run=run)), LABEL_DTYPES)
