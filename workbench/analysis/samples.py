"""One cell's samples as a frame: the rows of the TUI's samples view, filtered by quadrant."""

from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.analysis.source import Db, reading
from workbench.analysis.typed import FLOAT, INT, STR, typed_frame
from workbench.browse import list_samples
from workbench.runs.report import cell_order, first_cell
from workbench.store.db import Store
from workbench.store.lookup import NotFound
from workbench.store.queries import Run, get_run

#: The columns of :func:`samples`. ``tags`` is the sample's tags, sorted and separated by
#: spaces; it is "" when the sample has none. A tag never contains a space.
SAMPLE_DTYPES: dict[str, object] = {
    "cell_id": STR, "sample_id": STR, "question": STR, "h_set": INT, "h_vis": INT, "k_eff": INT,
    "truncated": INT, "score": FLOAT, "prediction": STR, "tags": STR,
}
_PAGE = 10_000


def samples(db: Db, run: str | None = None, cell: str | None = None, quadrant: str = "all") -> pd.DataFrame:
    """The samples of ``cell`` (default: the run's first) in ``quadrant``, typed by :data:`SAMPLE_DTYPES`.

    These are the rows of the samples view: ``quadrant`` is one of
    :data:`workbench.browse.QUADRANTS`, such as ``"dissipation"`` (a visible hit, but the
    answer is wrong), ``"leakage"`` or ``"interface"``. The rows are in sample order.
    """
    with reading(db) as store:
        return typed_frame(sample_records(store, get_run(store, run), cell, quadrant), SAMPLE_DTYPES)


def sample_records(store: Store, run: Run, cell: str | None, quadrant: str = "all") -> list[dict[str, Any]]:
    """The rows of :func:`samples` as plain records (``None`` = undefined), for the CSV and JSONL exports."""
    cell = cell or first_cell(store, run)
    cells = cell_order(store, run)
    if cell not in cells:
        raise NotFound(f"no cell {cell!r} in run {run.name!r} (known: {', '.join(cells) or 'none'})")
    out: list[dict[str, Any]] = []
    with store.snapshot():  # every page from one instant: rows do not move between pages meanwhile
        while True:
            page = list_samples(store, run, cell, quadrant=quadrant, offset=len(out), limit=_PAGE)
            out += [{"cell_id": cell, "sample_id": r.sample_id, "question": r.question, "h_set": r.h_set,
                     "h_vis": r.h_vis, "k_eff": r.k_eff, "truncated": r.truncated, "score": r.score,
                     "prediction": r.prediction, "tags": " ".join(r.tags)} for r in page.rows]
            if not page.rows or len(out) >= page.total:
                return out
