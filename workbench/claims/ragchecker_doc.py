"""A claim run as RAGChecker's checking-outputs document (``export claims --to ragchecker``).

The document is what RAGChecker's ``RAGResults.from_json`` reads and its metric code
(``ragchecker/computation.py``) computes from: per answer of one cell, the query, the reference
(``gt_answer``), the response, the shown units as ``retrieved_context``, the claims of both sides
and the four label matrices (the vote's labels, as Entailment, Neutral or Contradiction), with
the per-query ``metrics`` and the overall figures rounded as RAGChecker rounds them.
Claims are written as one-string lists (``[text]``): RAGChecker's claims are lists of strings
(its triplets), and its metrics read only the labels.
"""

from __future__ import annotations

import json
from typing import Any

from workbench.claims.metrics import ragchecker_overall
from workbench.claims.runner import list_answer, unit_text
from workbench.store.db import Store
from workbench.store.queries import Run, load_samples

NAMES = {"E": "Entailment", "N": "Neutral", "C": "Contradiction"}


def checking_outputs(store: Store, run: Run, claim_run: int, cell_id: str) -> tuple[dict[str, Any], int]:
    """The document of ``cell_id``'s verified answers under ``claim_run``, and how many answers of the
    cell are left out (not verified, or failed). Raises ``ValueError`` for a claim run made before
    reference claims were checked (it has no reference checks to write)."""
    conn = store.conn
    jobs = conn.execute("SELECT sid, status, metrics FROM claim_jobs WHERE claim_run_id = ? AND cell_id = ?"
                        " ORDER BY sid", (claim_run, cell_id)).fetchall()
    done = [(sid, json.loads(m)) for sid, status, m in jobs if status == "done"]
    if done and not conn.execute("SELECT 1 FROM claim_checks WHERE claim_run_id = ? AND cell_id = ? LIMIT 1",
                                 (claim_run, cell_id)).fetchone():
        raise ValueError(f"claim run {claim_run} was made before reference claims were checked: it has no "
                         f"answer2response, response2answer or retrieved2answer to write; run `workbench claims "
                         f"run {run.name}` again")
    samples = {s.sid: s for s in load_samples(store, run.dataset_id)}
    results, per_query = [], []
    for sid, metrics in done:
        results.append(_result(store, run, claim_run, cell_id, samples[sid], metrics.get("ragchecker")))
        if metrics.get("ragchecker") is not None:
            per_query.append(metrics["ragchecker"])
    overall = ragchecker_overall(per_query) if len(per_query) == len(done) and done else None
    document = {"results": results,
                "metrics": {group: {k: round(v, 1) for k, v in values.items()} for group, values in overall.items()}
                if overall else {}}
    return document, len(jobs) - len(done)


def _result(store: Store, run: Run, crid: int, cell_id: str, sample, metrics: dict | None) -> dict[str, Any]:
    conn = store.conn
    key = (crid, cell_id, sample.sid)
    prediction, visible = conn.execute("SELECT prediction, visible FROM events WHERE run_id = ? AND cell_id = ?"
                                       " AND sid = ?", (run.id, cell_id, sample.sid)).fetchone()
    uids = json.loads(visible or "[]")
    column = {uid: j for j, uid in enumerate(uids)}
    units = {uid: (chunk_id, unit_text(row)) for uid, chunk_id, *row in conn.execute(
        f"SELECT uid, chunk_id, head, relation, tail, text FROM units WHERE dataset_id = ? AND uid IN"
        f" ({','.join('?' * len(uids))})", (run.dataset_id, *uids))} if uids else {}
    claims = [text for (text,) in conn.execute("SELECT text FROM claims WHERE claim_run_id = ? AND cell_id = ?"
                                               " AND sid = ? ORDER BY idx", key)]
    refs = [text for (text,) in conn.execute("SELECT text FROM ref_claims WHERE claim_run_id = ? AND sid = ?"
                                             " ORDER BY idx", (crid, sample.sid))]
    r2r = [["Neutral"] * len(uids) for _ in claims]
    for idx, uid, label, supported in conn.execute(
            "SELECT idx, uid, label, supported FROM claim_verdicts WHERE claim_run_id = ? AND cell_id = ? AND sid = ?"
            " AND verifier = 'vote'", key):
        r2r[idx][column[uid]] = NAMES[label or ("E" if supported else "N")]
    a2r, r2a = ["Neutral"] * len(claims), ["Neutral"] * len(refs)
    ret2a = [["Neutral"] * len(uids) for _ in refs]
    for relation, idx, uid, label in conn.execute(
            "SELECT relation, idx, uid, label FROM claim_checks WHERE claim_run_id = ? AND cell_id = ? AND sid = ?"
            " AND checker = 'vote'", key):
        if relation == "answer2response":
            a2r[idx] = NAMES[label]
        elif relation == "response2answer":
            r2a[idx] = NAMES[label]
        else:
            ret2a[idx][column[uid]] = NAMES[label]
    response, _ = list_answer(prediction)
    return {"query_id": sample.id, "query": sample.question, "gt_answer": "; ".join(sample.answers),
            "response": response,
            "retrieved_context": [{"doc_id": units[u][0] or f"T{u}", "text": units[u][1]}
                                  for u in uids],
            "response_claims": [[c] for c in claims], "gt_answer_claims": [[g] for g in refs],
            "answer2response": a2r, "response2answer": r2a, "retrieved2response": r2r, "retrieved2answer": ret2a,
            "metrics": metrics or {}}
