"""Reading claim runs: RAGChecker-style metrics per cell, and the claims of one answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from workbench.claims.metrics import METRICS, RAGCHECKER_NAMES, aggregate, ragchecker_overall
from workbench.store.db import Store
from workbench.store.queries import Run
from workbench.metrics.stats import RESAMPLES, SEED

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
                   resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, dict]:
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
    """The claims of one answer and of its reference, with every verdict; None if unverified.

    Each response claim has ``verifiers`` (per verifier: did any shown unit support it, its
    best score), ``units`` (per shown unit, in the window's order: the vote's three-way label
    and each verifier's), ``correct_by`` (per checker, its label against the reference answer)
    and ``kind``: ``faithful`` (some unit entails it), else ``self_knowledge`` (correct though
    no unit holds it) or ``hallucination``. ``reference`` lists the reference's claims, each
    with ``in_response`` (the vote's label against the response), ``units`` (the vote per
    unit), ``entailing`` (the units that entail it) and ``missed`` (not in the response);
    it is None for a claim run made before reference claims were stored.
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
    key = (claim_run, cell_id, sid)
    visible = store.conn.execute("SELECT visible FROM events WHERE run_id = ? AND cell_id = ? AND sid = ?",
                                 (run.id, cell_id, sid)).fetchone()
    order = {uid: j for j, uid in enumerate(json.loads(visible[0]) if visible and visible[0] else [])}
    per_unit: dict[int, dict[int, dict[str, str]]] = {}
    for idx, uid, verifier, supported, label in store.conn.execute(
            "SELECT idx, uid, verifier, supported, label FROM claim_verdicts WHERE claim_run_id = ? AND cell_id = ?"
            " AND sid = ?", key):
        # Rows written before verdicts had three-way labels read as E when supported, else N.
        per_unit.setdefault(idx, {}).setdefault(uid, {})[verifier] = label or ("E" if supported else "N")
    checks: dict[tuple[str, int], dict[int, dict[str, str]]] = {}
    for relation, idx, uid, checker, label in store.conn.execute(
            "SELECT relation, idx, uid, checker, label FROM claim_checks WHERE claim_run_id = ? AND cell_id = ?"
            " AND sid = ?", key):
        checks.setdefault((relation, idx), {}).setdefault(uid, {})[checker] = label

    def units_of(by_uid: dict[int, dict[str, str]]) -> list[dict]:
        return [{"uid": uid, "label": f"{prefix}{uid}", "vote": labels.get("vote", "N"),
                 "by": {k: v for k, v in labels.items() if k != "vote"}}
                for uid, labels in sorted(by_uid.items(), key=lambda kv: order.get(kv[0], len(order) + kv[0]))]

    claims = []
    for idx, text, start, end, source, supported, correct, best_uid, best_score in store.conn.execute(
            "SELECT idx, text, span_start, span_end, source, supported, correct, best_uid, best_score FROM claims"
            " WHERE claim_run_id = ? AND cell_id = ? AND sid = ? ORDER BY idx", key):
        best = None
        if best_uid is not None:
            head, relation, tail, chunk = store.conn.execute(
                "SELECT head, relation, tail, text FROM units WHERE dataset_id = ? AND uid = ?",
                (run.dataset_id, best_uid)).fetchone()
            best = {"label": f"{prefix}{best_uid}", "uid": best_uid, "score": best_score,
                    "text": chunk if chunk is not None else f"{head} | {relation} | {tail}"}
        per_verifier = {v: {"supported": bool(s), "score": sc} for v, s, sc in store.conn.execute(
            "SELECT verifier, max(supported), max(score) FROM claim_verdicts WHERE claim_run_id = ? AND cell_id = ?"
            " AND sid = ? AND idx = ? AND verifier != 'vote' GROUP BY verifier", (*key, idx))}
        correct_by = checks.get(("answer2response", idx), {}).get(-1, {})
        claims.append({"idx": idx, "text": text, "span": None if start is None else [start, end], "source": source,
                       "supported": bool(supported), "correct": bool(correct), "best_unit": best,
                       "verifiers": per_verifier, "units": units_of(per_unit.get(idx, {})),
                       "correct_by": correct_by,
                       "kind": "faithful" if supported else ("self_knowledge" if correct else "hallucination")})
    status, error, n, n_sup, ratio, rejected, filtered, metrics = job
    return {"claim_run": claim_run, "status": status, "error": error, "claims": claims, "n_claims": n,
            "n_supported": n_sup, "support_ratio": ratio, "rejected": None if rejected is None else bool(rejected),
            "filtered_answer": filtered, "metrics": json.loads(metrics) if metrics else None,
            "reference": _reference(store, key, sid, checks, units_of) if status == "done" else None}


def _reference(store: Store, key: tuple, sid: int, checks: dict, units_of) -> list[dict] | None:
    rows = store.conn.execute("SELECT idx, text, source FROM ref_claims WHERE claim_run_id = ? AND sid = ?"
                              " ORDER BY idx", (key[0], sid)).fetchall()
    if not rows or not any(relation == "response2answer" for relation, _ in checks):
        return None
    out = []
    for idx, text, source in rows:
        in_response = checks.get(("response2answer", idx), {}).get(-1, {})
        units = units_of(checks.get(("retrieved2answer", idx), {}))
        out.append({"idx": idx, "text": text, "source": source, "in_response": in_response.get("vote", "N"),
                    "in_response_by": {k: v for k, v in in_response.items() if k != "vote"}, "units": units,
                    "entailing": [u["label"] for u in units if u["vote"] == "E"],
                    "missed": in_response.get("vote", "N") != "E"})
    return out


def ragchecker_by_cell(store: Store, run: Run, claim_run: int) -> dict[str, dict]:
    """Per cell, RAGChecker's figures under RAGChecker's convention (an empty set counts as 0).

    ``overall``: per group (RAGChecker's ``overall_metrics``, ``retriever_metrics``,
    ``generator_metrics``), each metric's mean over *all* the cell's answers × 100, unrounded
    (RAGChecker prints it rounded to one decimal). ``per_query``: each answer's values (0-1) by
    sample id. ``differs``: how many answers have a metric that the workbench leaves undefined
    (``None``, out of its mean) where RAGChecker counts 0. ``missing``: answers checked before
    these figures were stored (a claim run made by an older version: run it again under a new config).
    """
    ids = dict(store.conn.execute("SELECT sid, id FROM samples WHERE dataset_id = ?", (run.dataset_id,)))
    out: dict[str, dict] = {}
    for cell_id, by_sid in claim_values(store, claim_run).items():
        per_query = [{"sid": sid, "id": ids.get(sid), **v["ragchecker"]} for sid, v in by_sid.items()
                     if v.get("ragchecker") is not None]
        values = [{k: q[k] for k in RAGCHECKER_NAMES} for q in per_query]
        differs = sum(1 for v in by_sid.values() if v.get("ragchecker") is not None
                      and any(v.get(ours) is None for ours in RAGCHECKER_NAMES.values()))
        out[cell_id] = {"answers": len(per_query), "missing": len(by_sid) - len(per_query), "differs": differs,
                        "overall": ragchecker_overall(values), "per_query": per_query}
    return out
