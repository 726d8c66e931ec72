"""A RAGChecker output file's own claims and checks, kept as a claim run.

RAGChecker's checker made every verdict; here they become the rows a claim run writes
(:func:`workbench.claims.record.write_job`), with ``ragchecker`` as the one verifier and the
vote equal to its label. ``claims report`` then reads them like any claim run, so the figures
RAGChecker computed come back (its convention), beside the workbench's (undefined is None).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Sequence

from workbench.claims.record import job_metrics, write_job
from workbench.claims.reference import ReferenceChecks
from workbench.claims.runner import ClaimsConfig
from workbench.claims.types import Claim, Verdict
from workbench.claims.vote import judge_claim, summarize
from workbench.store.db import utcnow

CHECKER = "ragchecker"
#: The claim run of an imported file: its claims came with it ("import"), RAGChecker checked them.
IMPORTED = ClaimsConfig(decomposer="import", verifiers=(CHECKER,), model="none")


@dataclass(frozen=True)
class CheckedAnswer:
    """One answer with RAGChecker's claims and labels (E, N, C), as read from its output file."""

    sid: int
    response: str
    visible: list[int]                    # the units of the retrieved contexts, in the file's order
    response_claims: list[str]
    gt_answer_claims: list[str]
    answer2response: list[str]
    response2answer: list[str]
    retrieved2response: list[list[str]]
    retrieved2answer: list[list[str]]


def _verdict(label: str) -> Verdict:
    return Verdict(CHECKER, label == "E", 1.0 if label == "E" else 0.0, label)


def _labels(label: str) -> dict[str, str]:
    return {CHECKER: label, "vote": label}


def write_imported(conn, run_id: int, cell_id: str, answers: Sequence[CheckedAnswer]) -> tuple[int, dict]:
    """Write the checked answers as the claim run :data:`IMPORTED` over run ``run_id``, in the caller's
    transaction; return its id and, per sid, RAGChecker's metrics as computed from the labels."""
    crid = conn.execute("INSERT INTO claim_runs (run_id, config_key, config, created_at) VALUES (?, ?, ?, ?)",
                        (run_id, IMPORTED.key(), json.dumps({**asdict(IMPORTED), "source": CHECKER}),
                         utcnow())).lastrowid
    computed = {}
    for a in answers:
        results = [judge_claim(Claim(text, None, None, "import"), {CHECKER: [_verdict(x) for x in row]})
                   for text, row in zip(a.response_claims, a.retrieved2response)]
        checks = ReferenceChecks([_labels(x) for x in a.answer2response], [_labels(x) for x in a.response2answer],
                                 [[_labels(x) for x in row] for row in a.retrieved2answer])
        reference = [Claim(text, None, None, "import") for text in a.gt_answer_claims]
        # RAGChecker has no gold units: a relevant context is one that entails some reference claim.
        metrics = job_metrics(results, checks, len(a.visible), None)
        write_job(conn, crid, cell_id, a.sid, a.visible, results, checks, reference, summarize(a.response, results),
                  metrics)
        computed[a.sid] = metrics["ragchecker"]
    return crid, computed
