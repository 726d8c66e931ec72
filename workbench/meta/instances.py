"""Where a checker and the annotators part ways: a meta set's instances, worst disagreement first.

For a scorer and a label, an instance's scorer difference (response 2 minus response 1) and
its annotators' mean label are each standardized over the instances both are defined on; the
instance's disagreement is the distance between the two z-scores. Ordered by it, the first
instances are those that pull the scorer's Pearson down most, where a user reads why: the
query, the reference, both responses and each response's claims with their verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.claims.report import answer_claims
from workbench.meta.report import CLAIM_METRIC, MetaRow, model_name, claim_scores, length_scores
from workbench.meta.sets import MetaSet, human_labels, responses, stored_scores
from workbench.runs.report import first_cell
from workbench.store.db import Store
from workbench.store.queries import load_samples

__all__ = ["Disagreement", "disagreements", "instance_detail"]


@dataclass(frozen=True)
class Disagreement:
    """One instance under one scorer and label: the scorer's difference, the people's, and how far apart."""

    sid: int
    instance: str           # the instance's id in the imported file
    query: str
    delta: float            # the scorer's score of response 2 minus response 1
    human: float            # the annotators' mean label (-2 … 2)
    distance: float         # |z(delta) − z(human)|: the larger, the more this instance disagrees


def _scores_of(store: Store, meta: MetaSet, row: MetaRow) -> dict[int, tuple[float | None, float | None]]:
    """The two responses' scores under the report row's scorer, by sid."""
    if row.kind == "claims":
        key = (row.config or {}).get("key")
        for name, config, scores in claim_scores(store, meta):
            if config.get("key") == key:
                return {s: tuple(v) for s, v in scores[CLAIM_METRIC[row.label]].items()}
        return {}
    if row.kind == "length":
        return length_scores(responses(store, meta))
    for (scorer, metric), scores in stored_scores(store, meta).items():
        if row.scorer in (f"{scorer}.{metric}", f"similarity ({model_name(metric)})"):
            return {s: tuple(v) for s, v in scores.items()}
    return {}


def disagreements(store: Store, meta: MetaSet, row: MetaRow) -> list[Disagreement]:
    """The instances of ``meta`` under ``row``'s scorer and label, the largest disagreement first.

    Annotators (``row.kind == "annotators"``) compare annotator 1 with annotator 2 the same way.
    Instances whose difference is undefined are left out.
    """
    labels: dict[int, list[int]] = {}
    for sid, _annotator, value in human_labels(store, meta)[row.label]:
        labels.setdefault(sid, []).append(value)
    if row.kind == "annotators":
        paired = {sid: (float(v[0]), float(v[1])) for sid, v in labels.items() if len(v) >= 2}
        deltas = {sid: a for sid, (a, _) in paired.items()}
        humans = {sid: b for sid, (_, b) in paired.items()}
    else:
        scores = _scores_of(store, meta, row)
        deltas = {sid: b - a for sid, (a, b) in scores.items() if a is not None and b is not None and sid in labels}
        humans = {sid: float(np.mean(labels[sid])) for sid in deltas}
    sids = sorted(deltas)
    if not sids:
        return []
    x = np.array([deltas[s] for s in sids], dtype=float)
    y = np.array([humans[s] for s in sids], dtype=float)

    def z(v: np.ndarray) -> np.ndarray:
        sd = v.std()
        return (v - v.mean()) / sd if sd > 0 else np.zeros_like(v)

    distance = np.abs(z(x) - z(y))
    samples = {s.sid: s for s in load_samples(store, meta.dataset_id)}
    out = [Disagreement(sid, samples[sid].id, samples[sid].question, float(dx), float(hy), float(d))
           for sid, dx, hy, d in zip(sids, x, y, distance)]
    return sorted(out, key=lambda d: (-d.distance, d.sid))


def instance_detail(store: Store, meta: MetaSet, sid: int, claim_run_key: str | None = None) -> dict[str, Any]:
    """One instance as a user reads it: query, reference, both responses with their systems, every
    annotator's labels, and each response's claims and verdicts under the claim configuration
    ``claim_run_key`` (the newest checked one when None; none when never checked)."""
    sample = next(s for s in load_samples(store, meta.dataset_id) if s.sid == sid)
    pair = responses(store, meta).get(sid, ("", ""))
    systems = dict(store.conn.execute("SELECT side, system FROM meta_systems WHERE set_id = ? AND sid = ?",
                                      (meta.id, sid)).fetchall())
    annotators: dict[int, dict[str, int]] = {}
    for label, values in human_labels(store, meta).items():
        for s, annotator, value in values:
            if s == sid:
                annotators.setdefault(annotator, {})[label] = value
    sides = []
    for side, run in enumerate(meta.runs(), start=1):
        claim_run = None
        if claim_run_key is not None:
            found = store.conn.execute("SELECT id FROM claim_runs WHERE run_id = ? AND config_key = ?",
                                       (run.id, claim_run_key)).fetchone()
            claim_run = found[0] if found else -1
        detail = answer_claims(store, run, first_cell(store, run), sid, claim_run) if claim_run != -1 else None
        sides.append({"side": side, "system": systems.get(side), "response": pair[side - 1], "claims": detail})
    return {"sid": sid, "instance": sample.id, "query": sample.question,
            "reference": sample.answers[0] if sample.answers else "",
            "annotators": [annotators[a] for a in sorted(annotators)], "responses": sides}
