"""Reading claim runs: RAGChecker-style metrics per cell, and the claims of one answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from workbench.claims.metrics import METRICS, aggregate
from workbench.store.db import Store
from workbench.store.queries import Run

# The columns a ledger view shows beside the dissipation terms. An answer's support ratio
# (supported claims / claims) is its faithfulness, so it is not shown twice.
LEDGER_METRICS = ("faithfulness", "hallucination", "self_knowledge", "noise_sensitivity_relevant",
                  "context_utilization")


@dataclass(frozen=True)
class ClaimRunInfo:
    id: int
    config: dict
    jobs: int
    done: int
    errors: int
    claims: int


def claim_runs(store: Store, run: Run) -> list[ClaimRunInfo]:
    """The claim runs over ``run``, newest first, with their progress."""
    rows = store.conn.execute(
        "SELECT c.id, c.config, count(j.sid), coalesce(sum(j.status = 'done'), 0),"
        " coalesce(sum(j.status = 'error'), 0), coalesce(sum(j.n_claims), 0)"
        " FROM claim_runs c LEFT JOIN claim_jobs j ON j.claim_run_id = c.id WHERE c.run_id = ?"
        " GROUP BY c.id ORDER BY c.id DESC", (run.id,)).fetchall()
    return [ClaimRunInfo(i, json.loads(cfg), n, d, e, c) for i, cfg, n, d, e, c in rows]


def latest_claim_run(store: Store, run: Run) -> ClaimRunInfo | None:
    """The newest claim run over ``run`` that has finished jobs, else None."""
    for info in claim_runs(store, run):
        if info.done:
            return info
    return None


def verified_totals(store: Store, run: Run, config_key: str) -> tuple[int, int]:
    """(answers verified, claims extracted) by the claim run over ``run`` under ``config_key``."""
    return store.conn.execute(
        "SELECT count(*), coalesce(sum(n_claims), 0) FROM claim_jobs j JOIN claim_runs c ON c.id = j.claim_run_id"
        " WHERE c.run_id = ? AND c.config_key = ? AND j.status = 'done'", (run.id, config_key)).fetchone()


def claims_by_cell(store: Store, run: Run, claim_run: int | None = None, *, exclude: Sequence[int] = (),
                   resamples: int = 2000, seed: int = 0) -> dict[str, dict]:
    """Per cell: every claim metric (mean over the samples where it is defined, 95% CI) and ``jobs``.

    The support ratio is the claim-level support of each answer (supported claims / claims);
    the RAGChecker-style metrics come from each job's stored per-sample values.
    """
    if claim_run is None:
        info = latest_claim_run(store, run)
        if info is None:
            return {}
        claim_run = info.id
    skip = set(exclude)
    out = {}
    for cell_id, by_sid in claim_values(store, claim_run).items():
        kept = [(sid, values) for sid, values in by_sid.items() if sid not in skip]
        if kept:
            # Keyed by sid: the same bootstrap weights as the ledger's terms of these samples.
            out[cell_id] = {"jobs": len(kept),
                            **aggregate([v for _, v in kept], resamples=resamples, seed=seed,
                                        names=("support_ratio", *METRICS), keys=[sid for sid, _ in kept])}
    return out


def claim_values(store: Store, claim_run: int) -> dict[str, dict[int, dict[str, float | None]]]:
    """Per cell, per sid (ascending): the support ratio and every metric of each verified answer."""
    per_cell: dict[str, dict[int, dict[str, float | None]]] = {}
    for cell_id, sid, ratio, metrics in store.conn.execute(
            "SELECT cell_id, sid, support_ratio, metrics FROM claim_jobs WHERE claim_run_id = ? AND status = 'done'"
            " ORDER BY cell_id, sid", (claim_run,)):
        per_cell.setdefault(cell_id, {})[sid] = {"support_ratio": ratio, **json.loads(metrics)}
    return per_cell


def answer_claims(store: Store, run: Run, cell_id: str, sid: int, claim_run: int | None = None) -> dict | None:
    """The claims of one answer with their verdicts and attribution; None if unverified.

    ``verifiers`` gives, per verifier, whether any shown unit supported the claim and its
    best score; the full claim × unit table stays in ``claim_verdicts``.
    """
    if claim_run is None:
        info = latest_claim_run(store, run)
        if info is None:
            return None
        claim_run = info.id
    job = store.conn.execute(
        "SELECT status, error, n_claims, n_supported, support_ratio, rejected, filtered_answer, metrics"
        " FROM claim_jobs WHERE claim_run_id = ? AND cell_id = ? AND sid = ?", (claim_run, cell_id, sid)).fetchone()
    if job is None:
        return None
    kind = store.conn.execute("SELECT unit_kind FROM datasets WHERE id = ?", (run.dataset_id,)).fetchone()[0]
    prefix = "T" if kind == "triple" else "C"
    claims = []
    for idx, text, start, end, source, supported, correct, best_uid, best_score in store.conn.execute(
            "SELECT idx, text, span_start, span_end, source, supported, correct, best_uid, best_score FROM claims"
            " WHERE claim_run_id = ? AND cell_id = ? AND sid = ? ORDER BY idx", (claim_run, cell_id, sid)):
        best = None
        if best_uid is not None:
            head, relation, tail, chunk = store.conn.execute(
                "SELECT head, relation, tail, text FROM units WHERE dataset_id = ? AND uid = ?",
                (run.dataset_id, best_uid)).fetchone()
            best = {"label": f"{prefix}{best_uid}", "uid": best_uid, "score": best_score,
                    "text": chunk if chunk is not None else f"{head} | {relation} | {tail}"}
        per_verifier = {v: {"supported": bool(s), "score": sc} for v, s, sc in store.conn.execute(
            "SELECT verifier, max(supported), max(score) FROM claim_verdicts WHERE claim_run_id = ? AND cell_id = ?"
            " AND sid = ? AND idx = ? AND verifier != 'vote' GROUP BY verifier", (claim_run, cell_id, sid, idx))}
        claims.append({"idx": idx, "text": text, "span": None if start is None else [start, end], "source": source,
                       "supported": bool(supported), "correct": bool(correct), "best_unit": best,
                       "verifiers": per_verifier})
    status, error, n, n_sup, ratio, rejected, filtered, metrics = job
    return {"claim_run": claim_run, "status": status, "error": error, "claims": claims, "n_claims": n,
            "n_supported": n_sup, "support_ratio": ratio, "rejected": None if rejected is None else bool(rejected),
            "filtered_answer": filtered, "metrics": json.loads(metrics) if metrics else None}
