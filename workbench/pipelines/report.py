"""The SearChain report: cover-EM and acc with CIs, rounds and steps, knowledge sources,
citation coverage, and the paired difference against plain RAG on the same samples."""

from __future__ import annotations

import json
from dataclasses import asdict
from functools import partial
from typing import Any

import numpy as np

from workbench.metrics.stats import RESAMPLES, SEED, bootstrap_mean, bootstrap_ratio, paired_mean_difference
from workbench.pipelines.runner import get_pipeline_run
from workbench.store.db import Store

_COLUMNS = ("cover", "acc", "rounds", "steps", "n_model", "n_corrected", "n_completed", "n_unchecked", "n_cited",
            "baseline_cover", "baseline_acc")


def searchain_report(store: Store, name: str | None = None, *, resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, Any]:
    """Every SearChain figure of a run over its finished samples (95% bootstrap CIs, paired by sample)."""
    prun = get_pipeline_run(store, name)
    prun_id, name, config = prun.id, prun.name, prun.config
    status = dict(store.conn.execute("SELECT status, count(*) FROM pipeline_samples WHERE prun_id = ?"
                                     " GROUP BY status", (prun_id,)).fetchall())
    rows = store.conn.execute(f"SELECT {', '.join(_COLUMNS)}, outcome FROM pipeline_samples"
                              " WHERE prun_id = ? AND status = 'done' ORDER BY sid", (prun_id,)).fetchall()
    n = len(rows)
    out: dict[str, Any] = {"run": name, "config": asdict(config), "n": n,
                           "jobs": sum(status.values()), "done": status.get("done", 0),
                           "errors": status.get("error", 0), "pending": status.get("pending", 0)}
    if n == 0:
        return out
    data = {c: np.array([np.nan if r[i] is None else r[i] for r in rows], dtype=np.float64)
            for i, c in enumerate(_COLUMNS)}
    # Every figure is resampled with the same weights (a function of the sample's position,
    # the resample and the seed), so all of them are paired by sample.
    _mean = partial(bootstrap_mean, resamples=resamples, seed=seed)
    _share = partial(bootstrap_ratio, resamples=resamples, seed=seed)
    _difference = partial(paired_mean_difference, resamples=resamples, seed=seed)

    steps = data["steps"]
    out.update({
        "cover_em": _mean(data["cover"]),
        "acc": _mean(data["acc"]),
        "rounds": _mean(data["rounds"]),
        "steps": _mean(steps),
        "rounds_histogram": {int(k): int(v) for k, v in zip(*np.unique(data["rounds"], return_counts=True))},
        "outcomes": {o: sum(1 for r in rows if r[-1] == o) for o in sorted({r[-1] for r in rows})},
        "sources": {k: _share(data[f"n_{k}"], steps) for k in ("model", "corrected", "completed", "unchecked")},
        "citation_coverage": _share(data["n_cited"], steps),
    })
    if not np.isnan(data["baseline_cover"]).any():
        diff = data["cover"] - data["baseline_cover"]
        out["baseline"] = {"k": config.baseline_k, "cover_em": _mean(data["baseline_cover"]),
                           "acc": _mean(data["baseline_acc"]),
                           "cover_em_difference": _difference(data["cover"], data["baseline_cover"]),
                           "acc_difference": _difference(data["acc"], data["baseline_acc"]),
                           "wins": int((diff > 0).sum()), "losses": int((diff < 0).sum()),
                           "ties": int((diff == 0).sum())}
    return out


def sample_rows(store: Store, name: str | None = None, *, offset: int = 0, limit: int = 50) -> tuple[int, list[dict]]:
    """(total, one page of samples) of a SearChain run: id, question, status, outcome, scores, rounds."""
    prun = get_pipeline_run(store, name)
    prun_id, dataset_id = prun.id, prun.dataset_id
    total = store.conn.execute("SELECT count(*) FROM pipeline_samples WHERE prun_id = ?", (prun_id,)).fetchone()[0]
    keys = ("sid", "sample_id", "question", "status", "outcome", "cover", "baseline_cover", "rounds", "steps")
    rows = store.conn.execute(
        "SELECT p.sid, s.id, s.question, p.status, p.outcome, p.cover, p.baseline_cover, p.rounds, p.steps"
        " FROM pipeline_samples p JOIN samples s ON s.dataset_id = ? AND s.sid = p.sid WHERE p.prun_id = ?"
        " ORDER BY p.sid LIMIT ? OFFSET ?", (dataset_id, prun_id, limit, max(0, offset))).fetchall()
    return total, [dict(zip(keys, r)) for r in rows]


def chain_tree(store: Store, name: str | None, sid: int) -> dict[str, Any]:
    """One sample's stored tree: nodes with their evidence and feedback, branches, the final content."""
    from workbench.evidence.units import render_line
    from workbench.evidence.stored import load_units

    prun = get_pipeline_run(store, name)
    prun_id, name, dataset_id = prun.id, prun.name, prun.dataset_id
    job = store.conn.execute(
        "SELECT s.id, s.question, s.answers, p.status, p.error, p.outcome, p.rounds, p.steps, p.final_content,"
        " p.prediction, p.cover, p.acc, p.baseline_prediction, p.baseline_cover FROM pipeline_samples p"
        " JOIN samples s ON s.dataset_id = ? AND s.sid = p.sid WHERE p.prun_id = ? AND p.sid = ?",
        (dataset_id, prun_id, sid)).fetchone()
    if job is None:
        raise ValueError(f"sample {sid} is not in SearChain run {name!r}")
    keys = ("sample_id", "question", "answers", "status", "error", "outcome", "rounds", "steps", "final_content",
            "prediction", "cover", "acc", "baseline_prediction", "baseline_cover")
    out = dict(zip(keys, job))
    out["answers"] = json.loads(out["answers"])
    node_rows = store.conn.execute(
        "SELECT node, parent, branch, query, answer, unsolved, status, evidence_uid, reader_answer, confidence,"
        " feedback, in_final FROM chain_nodes WHERE prun_id = ? AND sid = ? ORDER BY node", (prun_id, sid)).fetchall()
    uids = {r[7] for r in node_rows if r[7] is not None}
    units = {u: v for u, v in load_units(store, dataset_id).items() if u in uids} if uids else {}
    nkeys = ("node", "parent", "branch", "query", "answer", "unsolved", "status", "evidence_uid", "reader_answer",
             "confidence", "feedback", "in_final")
    out["nodes"] = []
    for r in node_rows:
        node = dict(zip(nkeys, r))
        node["unsolved"], node["in_final"] = bool(node["unsolved"]), bool(node["in_final"])
        node["evidence"] = render_line(units[node["evidence_uid"]]) if node["evidence_uid"] in units else None
        out["nodes"].append(node)
    out["branches"] = [dict(zip(("branch", "from_node", "output", "parse_error"), r)) for r in store.conn.execute(
        "SELECT branch, from_node, output, parse_error FROM chain_branches WHERE prun_id = ? AND sid = ?"
        " ORDER BY branch", (prun_id, sid))]
    return out


def pipeline_runs(store: Store) -> list[dict[str, Any]]:
    """Every SearChain run, newest first, with its dataset and progress."""
    rows = store.conn.execute(
        "SELECT r.name, d.name, count(p.sid), coalesce(sum(p.status = 'done'), 0) FROM pipeline_runs r"
        " JOIN datasets d ON d.id = r.dataset_id LEFT JOIN pipeline_samples p ON p.prun_id = r.id"
        " GROUP BY r.id ORDER BY r.id DESC").fetchall()
    return [{"name": n, "dataset": d, "jobs": j, "done": done} for n, d, j, done in rows]


def chain_for_sample(store: Store, dataset_id: int, sid: int) -> str | None:
    """The newest SearChain run that finished ``sid`` of the dataset, or None."""
    row = store.conn.execute(
        "SELECT r.name FROM pipeline_runs r JOIN pipeline_samples p ON p.prun_id = r.id WHERE r.dataset_id = ?"
        " AND p.sid = ? AND p.status = 'done' ORDER BY r.id DESC LIMIT 1", (dataset_id, sid)).fetchone()
    return row[0] if row else None
