"""The analysis API: a workbench database as pandas frames, for notebooks and scripts.

Every function takes a database path (or a :class:`~workbench.store.db.Store`, used as it
is) and returns a :class:`pandas.DataFrame` with a fixed column → dtype map
(``*_DTYPES``; see :mod:`workbench.analysis.typed`). An undefined value is NaN or
``<NA>``, never 0. A path is opened read-only with SQLite's ``mode=ro``, so the API never
writes, and a run being written by another process is read while it goes on.

    from workbench import analysis
    led = analysis.ledger("demo.db", "demo")     # one row per retrieval cell
    led[["cell_id", "S_vis", "S_vis_lo", "S_vis_hi", "S_llm"]]
    ev = analysis.events("demo.db", "demo")      # one row per (sample, cell)
    ev.groupby("format")["score"].mean()

Functions:
- :func:`datasets`, :func:`runs` and :func:`tags`: what the database holds;
- :func:`events`: a run's events, read in column chunks;
- :func:`ledger`: the dissipation ledger with 95% intervals;
- :func:`samples`: one cell's samples by quadrant, as in the samples view;
- :func:`claims`: a claim run's verified answers;
- :func:`compare`: run B against run A, one row per cell pair and term;
- :func:`labels`: the human labels of judged items (claims, dedup pairs, answers).

A missing run, dataset or cell raises :class:`~workbench.store.lookup.NotFound`.
``workbench export {events,ledger,samples,claims} RUN --format parquet`` writes the same
frames as Parquet files.
"""

from workbench.analysis.catalog import DATASET_DTYPES, RUN_DTYPES, TAG_DTYPES, datasets, runs, tags
from workbench.analysis.claims import CLAIM_DTYPES, claims
from workbench.analysis.comparison import COMPARE_DTYPES, compare
from workbench.analysis.events import EVENT_DTYPES, events
from workbench.analysis.labels import LABEL_DTYPES, labels
from workbench.analysis.ledger import LEDGER_CONTROLS_DTYPES, LEDGER_DTYPES, ledger
from workbench.analysis.samples import SAMPLE_DTYPES, samples
from workbench.analysis.source import connect
from workbench.store.lookup import NotFound

__all__ = [
    "CLAIM_DTYPES", "COMPARE_DTYPES", "DATASET_DTYPES", "EVENT_DTYPES", "LABEL_DTYPES", "LEDGER_CONTROLS_DTYPES", "LEDGER_DTYPES",
    "RUN_DTYPES", "SAMPLE_DTYPES", "TAG_DTYPES", "NotFound", "claims", "compare", "connect", "datasets", "events",
    "labels", "ledger", "runs", "samples", "tags",
]
