"""Bring-your-own generator: export the exact prompts, import predictions back.

``prompts export`` writes one JSON object per (sample, cell) with the chat messages and
the prompt as text (for a completion-style run, with the answer cue the model saw); ``predictions import`` reads ``{"sample_id", "cell_id",
"prediction"}`` lines, scores them with the run's scorer and fills the events, in one
transaction, with the importers' ``file:line: field: reason`` errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from workbench.data.errors import ProblemLog
from workbench.data.fields import check_required, check_str, json_type
from workbench.data.infile import check_input
from workbench.data.jsonl import read_jsonl
from workbench.errors import BadInput
from workbench.metrics.scoring import get_scorer
from workbench.runs.generation import GenerationConfig, stored_generations
from workbench.runs.prompt import PromptTemplate
from workbench.store.db import Store
from workbench.store.queries import EXTERNAL_MODEL, Run, load_samples


def _check_text(value):
    # An empty prediction is a legitimate (wrong) answer, unlike an empty id.
    if not isinstance(value, str):
        return "", f"expected a string, got {json_type(value)}"
    return None


def export_prompts(store: Store, run: Run, out: TextIO, template: PromptTemplate | None = None) -> int:
    """Write the prompt of every (sample, cell) of ``run`` as JSONL; return the count.

    Each line: ``sample_id``, ``cell_id``, ``prompt_style``, the chat ``messages`` and the
    ``prompt`` as text, which for a ``completion`` run is exactly the text its model continued
    (the answer cue included), and for a ``chat`` run the messages flattened.
    """
    # Each cell is prompted as its model is (a run of several models has settings per model).
    prompting = {}
    for label, gen in stored_generations(run.config).items() or [(None, None)]:
        config = GenerationConfig.from_stored(gen) if gen else None
        style = config.prompt_style if config is not None else "chat"
        chosen = template or (config.template if config is not None else PromptTemplate())
        prompting[label] = (style, chosen, chosen.completion if style == "completion" else chosen.text)
    samples = {s.sid: s for s in load_samples(store, run.dataset_id)}
    count = 0
    for cell_id, sid, evidence, model in store.conn.execute(
            "SELECT e.cell_id, e.sid, v.text, c.model FROM events e JOIN evidence v ON v.sha256 = e.evidence_sha256"
            " JOIN cells c ON c.run_id = e.run_id AND c.cell_id = e.cell_id"
            " WHERE e.run_id = ? ORDER BY e.cell_id, e.sid", (run.id,)):
        sample = samples[sid]
        style, template_of_cell, as_text = prompting[model]
        messages = template_of_cell.messages(evidence, sample.question)
        out.write(json.dumps({"sample_id": sample.id, "cell_id": cell_id, "prompt_style": style, "messages": messages,
                              "prompt": as_text(evidence, sample.question)}, ensure_ascii=False) + "\n")
        count += 1
    return count


@dataclass
class PredictionsReport:
    read: int
    scored: int
    unchanged: int
    score: str
    overwritten: int = 0        # earlier predictions replaced (only with ``replace``)
    claims_reset: int = 0       # claim results computed on them, set back to pending


def import_predictions(store: Store, run: Run, path: str | Path, *, replace: bool = False) -> PredictionsReport:
    """Score and store predictions for ``run``; all or nothing.

    A job that already holds a different prediction is an error unless ``replace``; then
    the claim results verified on the old prediction are deleted and their claim jobs set
    back to pending (a ``claims`` pass redoes them), and the report counts both.
    """
    path = check_input(path, hint="expected predictions JSONL")
    display = str(path)
    scorer_name = run.config.get("score", "acc")
    scorer = get_scorer(scorer_name)
    samples = {s.id: s for s in load_samples(store, run.dataset_id)}
    jobs = {(cid, sid): pred for cid, sid, pred in store.conn.execute(
        "SELECT cell_id, sid, prediction FROM events WHERE run_id = ?", (run.id,))}
    cells = {cid for cid, _ in jobs}
    log = ProblemLog()
    seen: dict[tuple[str, int], int] = {}
    updates: list[tuple] = []
    overwritten: list[tuple[str, int]] = []
    unchanged = read = 0
    for lineno, rec in read_jsonl(path, log, display=display):
        read += 1
        if not check_required(log, display, lineno, rec,
                              (("sample_id", check_str), ("cell_id", check_str), ("prediction", _check_text))):
            continue
        sample = samples.get(rec["sample_id"])
        if sample is None:
            log.add(display, lineno, "$.sample_id", f"unknown sample id {rec['sample_id']!r} in dataset {run.dataset!r}")
            continue
        if rec["cell_id"] not in cells:
            log.add(display, lineno, "$.cell_id", f"unknown cell {rec['cell_id']!r} in run {run.name!r}")
            continue
        key = (rec["cell_id"], sample.sid)
        if key in seen:
            log.add(display, lineno, "$", f"duplicate prediction for ({sample.id!r}, {key[0]!r}) (first on line {seen[key]})")
            continue
        seen[key] = lineno
        if key not in jobs:
            log.add(display, lineno, "$.sample_id", f"sample {sample.id!r} is in dataset {run.dataset!r} but not in run "
                                                   f"{run.name!r} (the run was planned over other samples)")
            continue
        old = jobs[key]
        if old == rec["prediction"]:
            unchanged += 1
            continue
        if old is not None and not replace:
            log.add(display, lineno, "$.prediction",
                    f"({sample.id!r}, {key[0]!r}) already has a different prediction; pass --replace to overwrite")
            continue
        score = scorer(rec["prediction"], sample.answers, sample.aliases)
        updates.append((rec["prediction"], score, run.id, key[0], key[1], old))
        if old is not None:
            overwritten.append(key)
    log.raise_if_any()
    with store.transaction() as conn:
        # Only where the prediction is still the one checked above: a run written by another
        # process meanwhile is never overwritten unseen.
        changed = conn.executemany("UPDATE events SET prediction = ?, score = ?, status = 'done', source = 'import',"
                                   " error = NULL WHERE run_id = ? AND cell_id = ? AND sid = ? AND prediction IS ?",
                                   updates).rowcount
        if changed != len(updates):
            raise BadInput(f"run {run.name!r} got new predictions from another process while {display} was read; "
                           "nothing was written (rerun when that process is done)")
        if updates:
            conn.execute("UPDATE runs SET model = coalesce(model, ?) WHERE id = ?", (EXTERNAL_MODEL, run.id))
        claims_reset = _reset_claims(conn, run.id, overwritten)
    return PredictionsReport(read=read, scored=len(updates), unchanged=unchanged, score=scorer_name,
                             overwritten=len(overwritten), claims_reset=claims_reset)


def _reset_claims(conn, run_id: int, jobs: list[tuple[str, int]]) -> int:
    """Forget the claim results of overwritten predictions (they verified an answer that is gone);
    return how many claim jobs go back to pending."""
    reset = 0
    of_run = "claim_run_id IN (SELECT id FROM claim_runs WHERE run_id = ?)"
    for cell_id, sid in jobs:
        for table in ("claims", "claim_verdicts"):
            conn.execute(f"DELETE FROM {table} WHERE cell_id = ? AND sid = ? AND {of_run}", (cell_id, sid, run_id))
        reset += conn.execute(
            "UPDATE claim_jobs SET status = 'pending', error = NULL, n_claims = NULL, n_supported = NULL,"
            " support_ratio = NULL, rejected = NULL, filtered_answer = NULL, metrics = NULL, finished_at = NULL"
            f" WHERE cell_id = ? AND sid = ? AND status != 'pending' AND {of_run}", (cell_id, sid, run_id)).rowcount
    return reset
