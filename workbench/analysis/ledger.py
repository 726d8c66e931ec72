"""A run's dissipation ledger as a frame: one row per retrieval cell, every term with its 95% interval;
with ``controls=True`` also the oracle controls' rows (as the Parquet export holds them)."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from workbench.analysis.source import Db, reading
from workbench.analysis.typed import FLOAT, INT, NULLABLE_INT, STR, typed_frame
from workbench.claims.report import LEDGER_METRICS
from workbench.data.exports import flatten, ledger_records
from workbench.metrics.ledger import TERMS
from workbench.runs.report import LedgerReport, run_ledger
from workbench.store.db import Store
from workbench.store.queries import Run, get_run
from workbench.metrics.stats import RESAMPLES, SEED


def _interval(name: str, dtype) -> dict[str, object]:
    return {name: dtype, f"{name}_lo": FLOAT, f"{name}_hi": FLOAT}


#: The columns of :func:`ledger`: the cell's grid point, then ``<term>``, ``<term>_lo`` and
#: ``<term>_hi`` for every term of :data:`workbench.metrics.ledger.TERMS`, then the latest
#: claim run's per-cell metrics (all undefined when the run has none).
LEDGER_DTYPES: dict[str, object] = {
    "cell_id": STR, "k": INT, "budget": INT, "format": STR,
    **{col: dtype for term in TERMS for col, dtype in _interval(term, NULLABLE_INT if term == "n" else FLOAT).items()},
    "claims_n": NULLABLE_INT,
    **{col: dtype for metric in LEDGER_METRICS for col, dtype in _interval(metric, FLOAT).items()},
}

#: The columns of :func:`ledger` with ``controls=True`` (and of ``export ledger`` as Parquet): ``kind``
#: first (``retrieval``; ``oracle``: an oracle budget's controls, its cell id ``oracle-bB``; ``noise``:
#: the noise loss of a real linear cell at that budget, paired with the oracle), then the retrieval
#: columns (``k`` and ``format`` empty on oracle rows), then the controls' terms, empty on the rows
#: they do not belong to.
CONTROL_TERMS = ("Acc_struct", "Acc_linear", "L_struct", "L_noise", "L_noise_unpaired")
LEDGER_CONTROLS_DTYPES: dict[str, object] = {
    "kind": STR, **LEDGER_DTYPES, "k": NULLABLE_INT, "p_star_visible": FLOAT,
    **{col: dtype for term in CONTROL_TERMS for col, dtype in _interval(term, FLOAT).items()},
}


def ledger(db: Db, run: str | None = None, *, score: str | None = None, resamples: int = RESAMPLES, seed: int = SEED,
           exclude_tags: Sequence[str] = (), controls: bool = False) -> pd.DataFrame:
    """The ledger of ``run`` (default: the most recent), one row per retrieval cell, typed by :data:`LEDGER_DTYPES`.

    The rows and values are those of ``workbench ledger RUN --json`` and ``export ledger``,
    with the same arguments. An undefined term, such as ``Acc_hit`` with no visible hit, is
    NaN. Through a read-only store the ledger's incremental state is loaded if one was saved,
    and caught up in memory. Otherwise it is built in memory, and nothing is saved.
    ``controls=True`` adds the oracle controls' rows (:data:`LEDGER_CONTROLS_DTYPES`), as the
    Parquet export holds them.
    """
    with reading(db) as store:
        return ledger_frame(ledger_report(store, get_run(store, run), score=score, resamples=resamples, seed=seed,
                                          exclude_tags=exclude_tags), controls=controls)


def ledger_report(store: Store, run: Run, *, score: str | None, resamples: int, seed: int,
                  exclude_tags: Sequence[str]) -> LedgerReport:
    """The run's :class:`LedgerReport` (what the ``ledger`` verb prints)."""
    return run_ledger(store, run, score=score, resamples=resamples, seed=seed,
                      exclude_tags=exclude_tags)


def ledger_frame(report: LedgerReport, *, controls: bool = False) -> pd.DataFrame:
    """A ledger report as a typed frame, each ``{value, lo, hi}`` term as three columns.

    The retrieval rows; with ``controls`` also an ``oracle`` row per oracle budget and a
    ``noise`` row per real linear cell paired with it.
    """
    records = ledger_records(report)
    if not controls:
        return typed_frame((flatten(rec) for rec in records if rec["kind"] == "retrieval"), LEDGER_DTYPES)
    return typed_frame((flatten(row) for rec in records for row in _rows(rec)), LEDGER_CONTROLS_DTYPES)


def _rows(record: dict) -> list[dict]:
    """A ledger record as flat rows: itself, or an oracle budget's row and its noise rows."""
    if record["kind"] != "oracle":
        return [record]
    oracle = {k: v for k, v in record.items() if k != "L_noise"}
    noise = [{"kind": "noise", "budget": record["budget"], "format": "linear", **paired}
             for paired in record.get("L_noise") or ()]
    return [oracle, *noise]


def ledger_provenance(report: LedgerReport) -> dict[str, object]:
    """How the ledger was computed, stored with a Parquet export of it."""
    return {"export": "ledger", "run": report.run, "dataset": report.dataset, "score": report.score,
            "resamples": report.resamples, "seed": report.seed, "exclude_tags": report.exclude_tags,
            "excluded": report.excluded, "jobs_done": report.jobs_done, "jobs_total": report.jobs_total,
            "claims": report.claims, "interval": "95% percentile bootstrap over samples (Poisson weights)"}
