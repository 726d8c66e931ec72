"""Typed reads of datasets, units, samples, retrieval results and runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from workbench.store.db import Store
from workbench.store.lease import hold
from workbench.store.lookup import NotFound, named_or_latest


@dataclass(frozen=True)
class Dataset:
    id: int
    name: str
    unit_kind: str
    source: str | None
    created_at: str


@dataclass(frozen=True)
class Sample:
    sid: int
    id: str
    question: str
    answers: list[str]
    aliases: dict[str, list[str]]
    gold_paths: list[list[int]]
    meta: dict[str, Any]


@dataclass(frozen=True)
class Run:
    id: int
    name: str
    dataset_id: int
    dataset: str
    retriever: str | None
    config: dict[str, Any]
    model: str | None
    created_at: str


def get_dataset(store: Store, name: str | None = None) -> Dataset:
    """The named dataset, or the most recently imported one when ``name`` is None."""
    return Dataset(*named_or_latest(
        store.conn, "datasets", "id, name, unit_kind, source, created_at", name, what="dataset",
        none_yet="no dataset imported yet: run `workbench import DIR --name NAME` first"))


def list_datasets(store: Store) -> list[dict[str, Any]]:
    """Every dataset with its unit, sample and retriever counts."""
    out = []
    for ds_id, name, kind, created in store.conn.execute(
            "SELECT id, name, unit_kind, created_at FROM datasets ORDER BY id"):
        q = lambda sql: store.conn.execute(sql, (ds_id,)).fetchone()[0]  # noqa: E731
        out.append({
            "name": name, "unit_kind": kind, "created_at": created,
            "units": q("SELECT count(*) FROM units WHERE dataset_id = ?"),
            "units_outside_kb": q("SELECT count(*) FROM units WHERE dataset_id = ? AND in_kb = 0"),
            "samples": q("SELECT count(*) FROM samples WHERE dataset_id = ?"),
            "retrievers": [r[0] for r in store.conn.execute(
                "SELECT DISTINCT retriever FROM retrievals WHERE dataset_id = ? ORDER BY 1", (ds_id,))],
            "hops": {str(h): n for h, n in store.conn.execute(
                "SELECT json_extract(meta, '$.hops') AS h, count(*) FROM samples WHERE dataset_id = ?"
                " AND h IS NOT NULL GROUP BY h ORDER BY h", (ds_id,))},
        })
    return out


def load_samples(store: Store, dataset_id: int) -> list[Sample]:
    """All samples of a dataset in sid order (sids are 1..N)."""
    return [
        Sample(sid, sample_id, question, json.loads(answers), json.loads(aliases), json.loads(gold), json.loads(meta))
        for sid, sample_id, question, answers, aliases, gold, meta in store.conn.execute(
            "SELECT sid, id, question, answers, aliases, gold_paths, meta FROM samples"
            " WHERE dataset_id = ? ORDER BY sid", (dataset_id,))
    ]


def sample_answers(store: Store, dataset_id: int, sids) -> dict[int, tuple[list[str], dict[str, list[str]]]]:
    """The gold answers and aliases of some samples (what a scorer needs), by sid."""
    out = {}
    wanted = sorted(set(int(s) for s in sids))
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        for sid, answers, aliases in store.conn.execute(
                f"SELECT sid, answers, aliases FROM samples WHERE dataset_id = ? AND sid IN ({','.join('?' * len(part))})",
                (dataset_id, *part)):
            out[sid] = (json.loads(answers), json.loads(aliases))
    return out


def load_sample(store: Store, dataset_id: int, sid: int) -> Sample:
    """One sample of a dataset by sid (NotFound names it)."""
    row = store.conn.execute("SELECT sid, id, question, answers, aliases, gold_paths, meta FROM samples"
                             " WHERE dataset_id = ? AND sid = ?", (dataset_id, sid)).fetchone()
    if row is None:
        raise NotFound(f"no sample {sid} in this dataset")
    sid, sample_id, question, answers, aliases, gold, meta = row
    return Sample(sid, sample_id, question, json.loads(answers), json.loads(aliases), json.loads(gold), json.loads(meta))


def retrievers(store: Store, dataset_id: int) -> list[str]:
    """Retriever names present for a dataset."""
    return [r[0] for r in store.conn.execute(
        "SELECT DISTINCT retriever FROM retrievals WHERE dataset_id = ? ORDER BY 1", (dataset_id,))]


def load_retrieval(store: Store, dataset_id: int, retriever: str) -> dict[int, list[int]]:
    """sid -> retrieved uids in rank order, for one retriever."""
    return {sid: json.loads(uids) for sid, uids in store.conn.execute(
        "SELECT sid, uids FROM retrievals WHERE dataset_id = ? AND retriever = ?", (dataset_id, retriever))}


#: The model a run's row names once its answers were imported (``predictions import``, an imported run): no model
#: of the workbench's answered them.
EXTERNAL_MODEL = "external"
_RUN_SOURCE = "runs r JOIN datasets d ON d.id = r.dataset_id"
_RUN_COLUMNS = "r.id, r.name, r.dataset_id, d.name, r.retriever, r.config, r.model, r.created_at"


def _run(row: tuple) -> Run:
    return Run(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]), row[6], row[7])


def get_run(store: Store, name: str | None = None) -> Run:
    """The named run, or the most recent one when ``name`` is None."""
    return _run(named_or_latest(store.conn, _RUN_SOURCE, _RUN_COLUMNS, name, what="run",
                                none_yet="no run yet: plan one with `workbench sweep`", alias="r."))


def run_by_id(store: Store, run_id: int) -> Run:
    """The run with this id (what labels and other rows refer to); NotFound when it is gone."""
    row = store.conn.execute(f"SELECT {_RUN_COLUMNS} FROM {_RUN_SOURCE} WHERE r.id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFound(f"no run with id {run_id} (deleted?)")
    return _run(row)


def list_runs(store: Store) -> list[dict[str, Any]]:
    """Every run with its dataset, cell count and scoring progress."""
    rows = store.conn.execute(
        "SELECT r.id, r.name, d.name, r.retriever, r.model, r.created_at,"
        " (SELECT count(*) FROM cells c WHERE c.run_id = r.id)"
        " FROM runs r JOIN datasets d ON d.id = r.dataset_id ORDER BY r.id").fetchall()
    out = []
    for run_id, name, dataset, retriever, model, created, cells in rows:
        status = dict(store.conn.execute(
            "SELECT status, count(*) FROM events WHERE run_id = ? GROUP BY status", (run_id,)).fetchall())
        out.append({"name": name, "dataset": dataset, "retriever": retriever, "model": model, "created_at": created,
                    "cells": cells, "jobs": sum(status.values()), "done": status.get("done", 0),
                    "pending": status.get("pending", 0), "errors": status.get("error", 0),
                    "skipped": status.get("skipped", 0)})
    return out


def delete_run(store: Store, name: str) -> dict[str, int]:
    """Delete a run with its cells, events and claim runs (cached generations stay: they are shared).

    Returns what went, counted in the deleting transaction: ``cells``, ``events``,
    ``answered_events`` (those holding a prediction) and ``claim_runs``. A run another
    process is writing is not deleted under it: :class:`~workbench.store.lease.LeaseHeld`.
    """
    run = get_run(store, name)
    with hold(store, f"run:{run.name}", what=f"delete run {run.name}"), store.transaction() as conn:
        one = lambda sql: conn.execute(sql, (run.id,)).fetchone()[0]  # noqa: E731
        gone = {"cells": one("SELECT count(*) FROM cells WHERE run_id = ?"),
                "events": one("SELECT count(*) FROM events WHERE run_id = ?"),
                "answered_events": one("SELECT count(*) FROM events WHERE run_id = ? AND prediction IS NOT NULL"),
                "claim_runs": one("SELECT count(*) FROM claim_runs WHERE run_id = ?")}
        # The run's row first: its cells, events and ledger states go by cascade, and the event
        # log's triggers see the run gone and log nothing (a 5M-event run would log 5M rows).
        conn.execute("DELETE FROM runs WHERE id = ?", (run.id,))
        conn.execute("DELETE FROM event_log WHERE run_id = ?", (run.id,))
    return gone


def sample_sid(store: Store, dataset_id: int, sample_id: str) -> int:
    """The sid of a sample id (NotFound names the id)."""
    row = store.conn.execute("SELECT sid FROM samples WHERE dataset_id = ? AND id = ?",
                             (dataset_id, sample_id)).fetchone()
    if row is None:
        raise NotFound(f"no sample {sample_id!r} in this dataset")
    return row[0]


def run_names(store: Store, dataset_id: int | None = None) -> list[str]:
    """Run names in creation order, optionally of one dataset (no event counting: cheap)."""
    if dataset_id is None:
        return [r[0] for r in store.conn.execute("SELECT name FROM runs ORDER BY id")]
    return [r[0] for r in store.conn.execute("SELECT name FROM runs WHERE dataset_id = ? ORDER BY id", (dataset_id,))]


def latest_run_name(store: Store) -> str | None:
    """The most recently planned run, or None."""
    row = store.conn.execute("SELECT name FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    return row[0] if row else None


def opening_run_name(store: Store) -> str | None:
    """The run to open first: the most recent one a model answered in, else the most recent run, or None.

    A model's answers are what the Ledger's plots and terms are about; a run of imported answers
    (model ``external``) or one planned and not yet executed shows little, so the newest run is only
    the fallback. ``model`` narrows to candidate runs cheaply before looking for one answered event.
    """
    row = store.conn.execute(
        "SELECT name FROM runs r WHERE model IS NOT NULL AND model != ? AND EXISTS ("
        " SELECT 1 FROM events e WHERE e.run_id = r.id AND e.status = 'done' AND e.source IN ('model', 'cache'))"
        " ORDER BY id DESC LIMIT 1", (EXTERNAL_MODEL,)).fetchone()
    return row[0] if row else latest_run_name(store)
