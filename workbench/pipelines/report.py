"""The SearChain report: cover-EM and acc with CIs, rounds and steps, knowledge sources,
citation coverage, and the paired difference against plain RAG on the same samples."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import numpy as np

from workbench.metrics.ledger import Estimate, iter_resample_counts
from workbench.pipelines.runner import get_pipeline_run
from workbench.store.db import Store

_COLUMNS = ("cover", "acc", "rounds", "steps", "n_model", "n_corrected", "n_completed", "n_unchecked", "n_cited",
            "baseline_cover", "baseline_acc")


def _boot(n: int, resamples: int, seed: int) -> np.ndarray:
    """The (resamples × n) resample-count matrix shared by every figure (so differences are paired)."""
    w = np.empty((resamples, n))
    for start, chunk in iter_resample_counts(n, resamples, seed, dtype=np.float64):
        w[start:start + len(chunk)] = chunk
    return w


def _interval(point: float | None, boot: np.ndarray, alpha: float = 0.05) -> Estimate:
    if point is None:
        return Estimate(None, None, None)
    finite = boot[np.isfinite(boot)]
    if finite.size == 0:
        return Estimate(point, None, None)
    lo, hi = np.percentile(finite, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Estimate(point, float(min(lo, point)), float(max(hi, point)))


def _mean(x: np.ndarray, w: np.ndarray | None) -> Estimate:
    if len(x) == 0:
        return Estimate(None, None, None)
    point = float(np.mean(x))
    if w is None:
        return Estimate(point, None, None)
    return _interval(point, w @ x / len(x))


def _share(num: np.ndarray, den: np.ndarray, w: np.ndarray | None) -> Estimate:
    """A pooled ratio Σnum / Σden (e.g. corrected steps over all steps), resampled by sample."""
    total = float(den.sum())
    if total == 0:
        return Estimate(None, None, None)
    point = float(num.sum()) / total
    if w is None:
        return Estimate(point, None, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _interval(point, (w @ num) / (w @ den))


def searchain_report(store: Store, name: str | None = None, *, resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Every SearChain figure of a run over its finished samples (95% bootstrap CIs, paired by sample)."""
    prun_id, name, dataset_id, config = get_pipeline_run(store, name)
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
    w = _boot(n, resamples, seed) if n >= 2 and resamples > 0 else None
    steps = data["steps"]
    out.update({
        "cover_em": _mean(data["cover"], w),
        "acc": _mean(data["acc"], w),
        "rounds": _mean(data["rounds"], w),
        "steps": _mean(steps, w),
        "rounds_histogram": {int(k): int(v) for k, v in zip(*np.unique(data["rounds"], return_counts=True))},
        "outcomes": {o: sum(1 for r in rows if r[-1] == o) for o in sorted({r[-1] for r in rows})},
        "sources": {k: _share(data[f"n_{k}"], steps, w) for k in ("model", "corrected", "completed", "unchecked")},
        "citation_coverage": _share(data["n_cited"], steps, w),
    })
    if not np.isnan(data["baseline_cover"]).any():
        diff = data["cover"] - data["baseline_cover"]
        out["baseline"] = {"k": config.baseline_k, "cover_em": _mean(data["baseline_cover"], w),
                           "acc": _mean(data["baseline_acc"], w),
                           "cover_em_difference": _mean(diff, w),
                           "acc_difference": _mean(data["acc"] - data["baseline_acc"], w),
                           "wins": int((diff > 0).sum()), "losses": int((diff < 0).sum()),
                           "ties": int((diff == 0).sum())}
    return out


def sample_rows(store: Store, name: str | None = None, *, offset: int = 0, limit: int = 50) -> tuple[int, list[dict]]:
    """(total, one page of samples) of a SearChain run: id, question, status, outcome, scores, rounds."""
    prun_id, _, dataset_id, _ = get_pipeline_run(store, name)
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
    from workbench.store.queries import load_units

    prun_id, name, dataset_id, _ = get_pipeline_run(store, name)
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
