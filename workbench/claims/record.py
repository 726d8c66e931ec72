"""Writing one checked answer (a claim job) to the store: its claims, every verdict and its metrics.

One seam for the claim run (:mod:`workbench.claims.runner`) and for a RAGChecker output file
whose checks are imported as they are (:mod:`workbench.claims.imported`), so both leave the
same rows and every report reads them alike.
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from workbench.claims.metrics import ragchecker_metrics, sample_metrics
from workbench.claims.reference import ReferenceChecks
from workbench.claims.types import Claim
from workbench.claims.vote import AnswerVerdict, ClaimResult
from workbench.store.db import utcnow

RELATIONS = ("answer2response", "response2answer", "retrieved2answer")


def job_metrics(results: Sequence[ClaimResult], checks: ReferenceChecks, n_units: int,
                relevant: np.ndarray | None) -> dict:
    """The answer's metrics under both conventions: the workbench's (undefined is None) and, under
    ``"ragchecker"``, RAGChecker's own (an empty set counts as 0)."""
    claim_unit = np.array([r.unit_votes for r in results], dtype=bool).reshape(len(results), n_units)
    table = checks.table(claim_unit, relevant)
    return {**sample_metrics(table), "ragchecker": ragchecker_metrics(table)}


def write_job(conn, crid: int, cell_id: str, sid: int, visible: Sequence[int], results: Sequence[ClaimResult],
              checks: ReferenceChecks, reference: Sequence[Claim], summary: AnswerVerdict, metrics: dict) -> None:
    """Replace the job's rows and mark it done, in the caller's transaction.

    ``results`` are the response claims judged against the ``visible`` units; ``checks`` the
    three relations against the reference (whose claims are ``reference``).
    """
    claim_rows, verdict_rows = [], []
    for idx, r in enumerate(results):
        best_uid = visible[r.best_unit] if r.best_unit is not None else None
        claim_rows.append((crid, cell_id, sid, idx, r.claim.text, r.claim.start, r.claim.end, r.claim.source,
                           int(r.supported), int(checks.answer2response[idx]["vote"] == "E"), best_uid,
                           r.best_score))
        for name, verdicts in r.verdicts.items():
            verdict_rows += [(crid, cell_id, sid, idx, uid, name, int(v.supported), float(v.score), v.label)
                             for uid, v in zip(visible, verdicts)]
        labels = r.unit_labels or ["E" if vote else "N" for vote in r.unit_votes]
        verdict_rows += [(crid, cell_id, sid, idx, uid, "vote", int(vote), 1.0 if vote else 0.0, label)
                         for uid, vote, label in zip(visible, r.unit_votes, labels)]
    check_rows = [(crid, cell_id, sid, "answer2response", i, -1, checker, label)
                  for i, labels in enumerate(checks.answer2response) for checker, label in labels.items()]
    check_rows += [(crid, cell_id, sid, "response2answer", g, -1, checker, label)
                   for g, labels in enumerate(checks.response2answer) for checker, label in labels.items()]
    check_rows += [(crid, cell_id, sid, "retrieved2answer", g, uid, checker, label)
                   for g, row in enumerate(checks.retrieved2answer)
                   for uid, labels in zip(visible, row) for checker, label in labels.items()]
    conn.executemany("INSERT OR IGNORE INTO ref_claims VALUES (?, ?, ?, ?, ?)",
                     [(crid, sid, g, c.text, c.source) for g, c in enumerate(reference)])
    for table_name in ("claims", "claim_verdicts", "claim_checks"):
        conn.execute(f"DELETE FROM {table_name} WHERE claim_run_id = ? AND cell_id = ? AND sid = ?",
                     (crid, cell_id, sid))
    conn.executemany("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", claim_rows)
    conn.executemany("INSERT INTO claim_verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", verdict_rows)
    conn.executemany("INSERT INTO claim_checks VALUES (?, ?, ?, ?, ?, ?, ?, ?)", check_rows)
    n_supported = sum(r.supported for r in results)
    conn.execute("INSERT INTO claim_jobs (claim_run_id, cell_id, sid) VALUES (?, ?, ?)"
                 " ON CONFLICT (claim_run_id, cell_id, sid) DO NOTHING", (crid, cell_id, sid))
    conn.execute("UPDATE claim_jobs SET status = 'done', error = NULL, n_claims = ?, n_supported = ?,"
                 " support_ratio = ?, rejected = ?, filtered_answer = ?, metrics = ?, finished_at = ?"
                 " WHERE claim_run_id = ? AND cell_id = ? AND sid = ?",
                 (len(results), n_supported, summary.support_ratio, int(summary.rejected), summary.filtered_answer,
                  json.dumps(metrics), utcnow(), crid, cell_id, sid))
