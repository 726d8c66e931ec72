"""``meta report``: each scorer's agreement with people, as RAGChecker's meta-evaluation measures it.

For a human label (correctness, completeness, overall) and a scorer, an instance's value is
the scorer's score of response 2 minus its score of response 1, and each instance counts once
per annotator (RAGChecker's ``data/meta_evaluation/meta_eval.py``): the correlation is over
(instance, annotator) pairs, its bootstrap resamples *instances* (both annotators of an
instance share one weight: they are not independent evidence). Pearson and Spearman are
given ×100, with 95 % percentile intervals (:mod:`workbench.metrics.correlation`, through the
one statistics module). The scorers:

- ``annotators``: annotator 1's label against annotator 2's, instance by instance: the ceiling;
- each imported baseline (``evaluator.metric``): a metric named after a label is correlated
  with that label only (RAGChecker's correctness_label with correctness), any other with all three;
- each claim run over both responses (``meta run``): precision for correctness, recall for
  completeness, F1 for overall;
- ``similarity``: the whole-answer cosine with the reference, against all three;
- ``length``: the response's length in words, against all three: what a checker must beat.

An instance whose difference is undefined for a scorer (a response with no claim has no
precision) is left out of that scorer's row, and ``n`` says how many pairs remain.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from workbench.meta.run import SIMILARITY
from workbench.meta.sets import LABELS, MetaSet, get_meta_set, human_labels, meta_set_names, responses, stored_scores
from workbench.metrics.correlation import correlation
from workbench.metrics.stats import RESAMPLES, SEED, Estimate
from workbench.retrieval.text import tokenize
from workbench.store.db import Store
from workbench.tables import fmt_estimate

__all__ = ["MetaRow", "meta_report", "rows_json", "CLAIM_METRIC", "claim_scores", "length_scores",
           "PREFERENCE_COLUMNS", "preference_rows", "preference_cells", "model_name"]

#: The claim metric each human label is correlated with (RAGChecker's mapping).
CLAIM_METRIC = {"correctness": "precision", "completeness": "recall", "overall": "f1"}


@dataclass(frozen=True)
class MetaRow:
    """One scorer against one human label: Pearson and Spearman ×100 with 95 % intervals, over ``n`` pairs."""

    label: str
    scorer: str
    kind: str                   # annotators | baseline | claims | similarity | length
    pearson: Estimate
    spearman: Estimate
    n: int
    config: dict[str, Any] | None = field(default=None, compare=False)


def _scaled(e: Estimate) -> Estimate:
    scale = lambda v: None if v is None else 100.0 * v  # noqa: E731
    return Estimate(scale(e.value), scale(e.lo), scale(e.hi))


def _row(label: str, scorer: str, kind: str, x: list[float], y: list[float], keys: list[int], *,
         resamples: int, seed: int, config: dict | None = None) -> MetaRow:
    c = correlation(x, y, keys=keys, resamples=resamples, seed=seed)
    return MetaRow(label, scorer, kind, _scaled(c.pearson), _scaled(c.spearman), c.n, config)


def _against_labels(label: str, scores: dict[int, tuple[float | None, float | None]],
                    labels: list[tuple[int, int, int]]) -> tuple[list[float], list[float], list[int]]:
    """(deltas, human values, instance keys) over the label's (instance, annotator) pairs with a defined delta."""
    x, y, keys = [], [], []
    for sid, _annotator, value in labels:
        first, second = scores.get(sid, (None, None))
        if first is None or second is None:
            continue
        x.append(second - first)
        y.append(float(value))
        keys.append(sid)
    return x, y, keys


def claim_scores(store: Store, meta: MetaSet) -> list[tuple[str, dict, dict[str, dict[int, list]]]]:
    """Every claim configuration run over both responses: (name, config with its ``key``,
    {metric: {sid: [score of response 1, score of response 2]}}), oldest first."""
    side_of = {meta.run1.id: 0, meta.run2.id: 1}
    found: dict[str, tuple[dict, dict[str, dict[int, list]]]] = {}
    sides: dict[str, set[int]] = {}
    for run_id, key, config, sid, metrics in store.conn.execute(
            "SELECT c.run_id, c.config_key, c.config, j.sid, j.metrics FROM claim_runs c JOIN claim_jobs j"
            " ON j.claim_run_id = c.id WHERE c.run_id IN (?, ?) AND j.status = 'done' ORDER BY c.id",
            (meta.run1.id, meta.run2.id)):
        values = json.loads(metrics)
        entry = found.setdefault(key, (json.loads(config), {m: {} for m in CLAIM_METRIC.values()}))
        sides.setdefault(key, set()).add(side_of[run_id])
        for metric in CLAIM_METRIC.values():
            entry[1][metric].setdefault(sid, [None, None])[side_of[run_id]] = values.get(metric)
    out = []
    for key, (config, scores) in found.items():
        if sides[key] != {0, 1}:
            continue     # only one response checked so far: no difference to correlate
        name = f"claims {config['decomposer']} + {','.join(config['verifiers'])} ({key[:6]})"
        out.append((name, {**config, "key": key}, scores))
    return out


def model_name(metric: str) -> str:
    """A converted model's file stem without the content hash (and version) the converter appends.

    ``all-minilm-l6-v2-0872f5d7d0e806c4`` → ``all-minilm-l6-v2``;
    ``multilingual-e5-small-1571fc9827503943-v1`` → ``multilingual-e5-small``.
    """
    return re.sub(r"-[0-9a-f]{16}(-v\d+)?$", "", metric)


def length_scores(pairs: dict[int, tuple[str, str]]) -> dict[int, tuple[float, float]]:
    """Each response's length in words (the CJK-aware tokenizer's tokens), by sid."""
    return {sid: (float(len(tokenize(a))), float(len(tokenize(b)))) for sid, (a, b) in pairs.items()}


def meta_report(store: Store, meta: MetaSet, *, resamples: int = RESAMPLES, seed: int = SEED,
                labels: tuple[str, ...] = LABELS) -> list[MetaRow]:
    """Every scorer's correlation with every human label it answers to (of ``labels``; see the module docstring)."""
    wanted, labels = labels, human_labels(store, meta)
    rows: list[MetaRow] = []
    stored = stored_scores(store, meta)
    claims = claim_scores(store, meta)
    lengths = length_scores(responses(store, meta))
    options = dict(resamples=resamples, seed=seed)
    for label in wanted:
        pairs_of_label = labels[label]
        by_sid: dict[int, dict[int, int]] = {}
        for sid, annotator, value in pairs_of_label:
            by_sid.setdefault(sid, {})[annotator] = value
        both = [(sid, a) for sid, a in by_sid.items() if 0 in a and 1 in a]
        rows.append(_row(label, "annotators", "annotators", [float(a[0]) for _, a in both],
                         [float(a[1]) for _, a in both], [sid for sid, _ in both], **options))
        for (scorer, metric), scores in stored.items():
            if scorer == SIMILARITY:
                continue
            named = metric.removesuffix("_label")
            if named in LABELS and named != label:
                continue
            x, y, keys = _against_labels(label, {s: tuple(v) for s, v in scores.items()}, pairs_of_label)
            rows.append(_row(label, f"{scorer}.{metric}", "baseline", x, y, keys, **options))
        for name, config, scores in claims:
            metric = CLAIM_METRIC[label]
            x, y, keys = _against_labels(label, {s: tuple(v) for s, v in scores[metric].items()}, pairs_of_label)
            rows.append(_row(label, f"{name} · {metric}", "claims", x, y, keys, config=config, **options))
        for (scorer, metric), scores in stored.items():
            if scorer == SIMILARITY:
                x, y, keys = _against_labels(label, {s: tuple(v) for s, v in scores.items()}, pairs_of_label)
                rows.append(_row(label, f"similarity ({model_name(metric)})", "similarity", x, y, keys, **options))
        x, y, keys = _against_labels(label, lengths, pairs_of_label)
        rows.append(_row(label, "length (words)", "length", x, y, keys, **options))
    return rows


def rows_json(rows: list[MetaRow]) -> list[dict[str, Any]]:
    """The rows as ``--json`` gives them: label, scorer, kind, pearson, spearman, low, high (Pearson's), the
    Spearman interval, n, and a claim scorer's config."""
    return [{"label": r.label, "scorer": r.scorer, "kind": r.kind, "pearson": r.pearson.value,
             "spearman": r.spearman.value, "low": r.pearson.lo, "high": r.pearson.hi,
             "spearman_low": r.spearman.lo, "spearman_high": r.spearman.hi, "n": r.n,
             **({"config": r.config} if r.config is not None else {})} for r in rows]


#: The columns of the short table of every meta set's scorers beside κ (judge report, HTML report, TUI).
PREFERENCE_COLUMNS = ["meta set", "scorer", "pearson ×100", "spearman ×100", "n"]


def preference_rows(store: Store, *, label: str = "overall", resamples: int = RESAMPLES,
                    seed: int = SEED) -> list[tuple[str, MetaRow]]:
    """Every imported meta set's scorers against one human label, as ``(set name, row)``: what the judge
    reports show beside κ, so which checker tracks people's preferences reads in one place."""
    out = []
    for name in meta_set_names(store):
        rows = meta_report(store, get_meta_set(store, name), resamples=resamples, seed=seed, labels=(label,))
        out += [(name, r) for r in rows]
    return out


def preference_cells(name: str, row: MetaRow, *, estimate=None, text=str) -> list[str]:
    """One row of :data:`PREFERENCE_COLUMNS`, its estimates to two decimals (``estimate`` formats them)."""
    fmt = estimate or (lambda e: fmt_estimate(e, 2))
    return [text(name), text(row.scorer), fmt(row.pearson), fmt(row.spearman), str(row.n)]
