"""What ``workbench export`` writes: the analysis frames as Parquet, or their plain records as CSV or JSONL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pyarrow as pa

from workbench.analysis.claims import CLAIM_DTYPES, chosen_claim_run, claim_records
from workbench.analysis.events import event_parquet_batches
from workbench.analysis.ledger import LEDGER_CONTROLS_DTYPES, ledger_frame, ledger_provenance, ledger_report
from workbench.analysis.samples import SAMPLE_DTYPES, sample_records
from workbench.analysis.typed import arrow_batches, arrow_schema, typed_frame
from workbench.data.exports import event_records, ledger_records
from workbench.runs.report import first_cell
from workbench.store.db import Store
from workbench.store.lookup import NotFound
from workbench.store.manifests import get_manifest
from workbench.store.queries import Run
from workbench.metrics.stats import RESAMPLES, SEED

EXPORTS: tuple[str, ...] = ("events", "ledger", "samples", "claims")


@dataclass(frozen=True)
class ExportOptions:
    """How an export is computed. The ledger's options apply to ``ledger``, ``cell`` and
    ``quadrant`` to ``samples``, and ``claim_run`` to ``claims``."""

    score: str | None = None
    resamples: int = RESAMPLES
    seed: int = SEED
    exclude_tags: Sequence[str] = ()
    cell: str | None = None
    quadrant: str = "all"
    claim_run: int | None = None


def check_export(store: Store, what: str, run: Run, options: ExportOptions) -> None:
    """Refuse options that do not apply to ``what``, and a claims export of a run without a claim run."""
    if what != "samples" and (options.cell is not None or options.quadrant != "all"):
        raise ValueError("--cell and --quadrant apply to `export samples` only")
    if what != "claims" and options.claim_run is not None:
        raise ValueError("--claim-run applies to `export claims` only")
    if what == "claims" and chosen_claim_run(store, run, options.claim_run) is None:
        raise ValueError(f"run {run.name!r} has no claim run yet (`workbench claims run {run.name}`)")


def export_records(store: Store, what: str, run: Run, options: ExportOptions) -> Iterable[dict[str, Any]]:
    """The CSV and JSONL records of an export. Events stream, and the ledger keeps its oracle rows."""
    if what == "events":
        return event_records(store, run)
    if what == "ledger":
        return ledger_records(_report(store, run, options))
    if what == "samples":
        return sample_records(store, run, options.cell, options.quadrant)
    if what == "claims":
        return claim_records(store, run, options.claim_run)
    raise ValueError(f"nothing to export called {what!r}; choose from {', '.join(EXPORTS)}")


def export_parquet(store: Store, what: str, run: Run,
                   options: ExportOptions) -> tuple[pa.Schema, Iterable[pa.RecordBatch]]:
    """The schema and record batches of a Parquet export: the frame of the same name in :mod:`workbench.analysis`.

    Events stream chunk by chunk. The others are small, and are built as a frame first. The
    run's manifest (``runs show``), when it has one, rides in the footer under ``workbench_manifest``.
    """
    schema, batches = _parquet_parts(store, what, run, options)
    try:
        manifest = get_manifest(store, run.id)
    except NotFound:
        return schema, batches
    return schema.with_metadata({**schema.metadata, b"workbench_manifest": json.dumps(manifest).encode()}), batches


def _parquet_parts(store: Store, what: str, run: Run,
                   options: ExportOptions) -> tuple[pa.Schema, Iterable[pa.RecordBatch]]:
    if what == "events":
        return event_parquet_batches(store, run)
    if what == "ledger":
        report = _report(store, run, options)
        schema = arrow_schema(LEDGER_CONTROLS_DTYPES, ledger_provenance(report))
        return schema, arrow_batches(ledger_frame(report, controls=True), schema)
    if what == "samples":
        cell = options.cell or first_cell(store, run)
        records = sample_records(store, run, cell, options.quadrant)
        schema = arrow_schema(SAMPLE_DTYPES, {"export": "samples", "run": run.name, "dataset": run.dataset,
                                              "cell": cell, "quadrant": options.quadrant})
        return schema, arrow_batches(typed_frame(records, SAMPLE_DTYPES), schema)
    if what == "claims":
        schema = arrow_schema(CLAIM_DTYPES, {"export": "claims", "run": run.name, "dataset": run.dataset,
                                             "claim_run": chosen_claim_run(store, run, options.claim_run)})
        return schema, arrow_batches(typed_frame(claim_records(store, run, options.claim_run), CLAIM_DTYPES), schema)
    raise ValueError(f"nothing to export called {what!r}; choose from {', '.join(EXPORTS)}")


def _report(store: Store, run: Run, options: ExportOptions):
    return ledger_report(store, run, score=options.score, resamples=options.resamples, seed=options.seed,
                         exclude_tags=options.exclude_tags)
