"""Merges of a dedup run: proposals by confidence, reviewer decisions, clusters, export, evaluation.

A pair is merged in a mode when the judge said coreferent with confidence ≥ the
threshold and no reviewer rejected it, or when a reviewer accepted it. Clusters are the
transitive closure of the merged pairs (union-find); reverting a merge is rejecting it,
after which the clusters are recomputed from the remaining merges. Every merge keeps its
provenance: the pair, both contexts exactly as the judge saw them, and the verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.data.outfile import check_directory, make_directory, write_atomic
from workbench.errors import BadInput
from workbench.kg.metrics import cluster_scores, paired_difference
from workbench.kg.runner import KG, get_dedup_run
from workbench.kg.unionfind import choose_representative, merge_clusters
from workbench.store.db import Store, utcnow
from workbench.metrics.stats import RESAMPLES, SEED

BANDS = {"all": (0.0, 1.01), "high": (0.9, 1.01), "mid": (0.7, 0.9), "low": (0.5, 0.7), "below": (0.0, 0.5)}
METRIC_NAMES = ("pairwise_precision", "pairwise_recall", "pairwise_f1", "bcubed_precision", "bcubed_recall",
                "bcubed_f1")


@dataclass(frozen=True)
class Proposal:
    """A judged pair with its verdict, the reviewer's decision and whether it merges."""

    a: int
    b: int
    name_a: str
    name_b: str
    mode: str
    is_coreferent: bool
    confidence: float
    rationale: str
    reasons: str
    decision: str | None        # accepted | rejected | None
    merged: bool
    context_a: str
    context_b: str


def proposals(store: Store, run: str | None, mode: str, *, threshold: float = 0.5, band: str = "all",
              only_coreferent: bool = True, limit: int = 500, pair: tuple[int, int] | None = None) -> list[Proposal]:
    """The run's judged pairs in ``mode``, by confidence (highest first), within a confidence band
    (only the pair (a, b), a < b, when ``pair`` is given)."""
    dedup = get_dedup_run(store, run)
    dedup.require_mode(mode)
    run_id, kg_id = dedup.id, dedup.kg_id
    if band not in BANDS:
        raise ValueError(f"band {band!r} is not one of {', '.join(BANDS)}")
    lo, hi = BANDS[band]
    rows = store.conn.execute(
        "SELECT v.a, v.b, ea.name, eb.name, v.is_coreferent, v.confidence, v.rationale, p.reasons, d.decision,"
        " v.context_a, v.context_b FROM dedup_verdicts v"
        " JOIN dedup_pairs p ON p.run_id = v.run_id AND p.a = v.a AND p.b = v.b"
        " JOIN kg_entities ea ON ea.kg_id = ? AND ea.eid = v.a JOIN kg_entities eb ON eb.kg_id = ? AND eb.eid = v.b"
        " LEFT JOIN dedup_decisions d ON d.run_id = v.run_id AND d.a = v.a AND d.b = v.b AND d.mode = v.mode"
        " WHERE v.run_id = ? AND v.mode = ? AND v.status = 'done' AND v.confidence >= ? AND v.confidence < ?"
        + (" AND v.is_coreferent = 1" if only_coreferent else "")
        + (" AND v.a = ? AND v.b = ?" if pair is not None else "")
        + " ORDER BY v.confidence DESC, v.a, v.b LIMIT ?",
        (kg_id, kg_id, run_id, mode, lo, hi, *(pair or ()), limit)).fetchall()
    return [Proposal(a, b, na, nb, mode, bool(co), conf, why or "", reasons, dec,
                     is_merged(bool(co), conf, dec, threshold), ca or "", cb or "")
            for a, b, na, nb, co, conf, why, reasons, dec, ca, cb in rows]


def is_merged(coreferent: bool, confidence: float, decision: str | None, threshold: float) -> bool:
    """Whether a judged pair merges: a reviewer's decision if any, else the judge's "same" at ≥ threshold."""
    if decision is not None:
        return decision == "accepted"
    return coreferent and confidence >= threshold


def decide(store: Store, run: str | None, a: int, b: int, mode: str, decision: str | None) -> None:
    """Record a reviewer's decision on a pair (``None`` clears it; ``rejected`` also reverts a merge)."""
    dedup = get_dedup_run(store, run)
    dedup.require_mode(mode)
    run_id, a, b = dedup.id, min(a, b), max(a, b)
    if store.conn.execute("SELECT 1 FROM dedup_pairs WHERE run_id = ? AND a = ? AND b = ?",
                          (run_id, a, b)).fetchone() is None:
        raise ValueError(f"({a}, {b}) is not a candidate pair of this run")
    if decision not in (None, "accepted", "rejected"):
        raise ValueError(f"decision {decision!r} is not accepted, rejected or None")
    with store.transaction() as conn:
        conn.execute("DELETE FROM dedup_decisions WHERE run_id = ? AND a = ? AND b = ? AND mode = ?",
                     (run_id, a, b, mode))
        if decision is not None:
            conn.execute("INSERT INTO dedup_decisions VALUES (?, ?, ?, ?, ?, ?)",
                         (run_id, a, b, mode, decision, utcnow()))


def merged_pairs(store: Store, run_id: int, mode: str, threshold: float) -> list[tuple[int, int]]:
    """The pairs that merge in ``mode``: judged coreferent ≥ threshold and not rejected, or accepted."""
    rows = store.conn.execute(
        "SELECT v.a, v.b, v.is_coreferent, v.confidence, d.decision FROM dedup_verdicts v"
        " LEFT JOIN dedup_decisions d ON d.run_id = v.run_id AND d.a = v.a AND d.b = v.b AND d.mode = v.mode"
        " WHERE v.run_id = ? AND v.mode = ? AND v.status = 'done' ORDER BY v.a, v.b", (run_id, mode)).fetchall()
    return [(a, b) for a, b, co, conf, dec in rows if is_merged(bool(co), conf or 0.0, dec, threshold)]


def clusters(store: Store, run: str | None, mode: str, threshold: float = 0.5) -> tuple[KG, list[int]]:
    """The KG and each entity's cluster label after the mode's merges."""
    dedup = get_dedup_run(store, run)
    graph = KG(store, dedup.kg_id)
    return graph, merge_clusters(len(graph.names), merged_pairs(store, dedup.id, mode, threshold))


EXPORT_FILES = ("kb.jsonl", "aliases.jsonl", "merges.jsonl")


def _refuse_source(store: Store, out: Path) -> None:
    """Refuse an output directory a KG or dataset of this database was imported from (its kb.jsonl)."""
    real = out.resolve()
    for kind, name, source in store.conn.execute(
            "SELECT 'KG', name, source FROM kgs WHERE source IS NOT NULL"
            " UNION ALL SELECT 'dataset', name, source FROM datasets WHERE source IS NOT NULL"):
        if Path(source).is_dir() and Path(source).resolve() == real:
            raise BadInput(f"{out}: is where {kind} {name!r} was imported from; export the deduplicated KG "
                           "to another directory (its kb.jsonl would be replaced)")


def export_kg(store: Store, run: str | None, mode: str, out_dir: str | Path, threshold: float = 0.5, *,
              force: bool = False) -> dict:
    """Write the deduplicated KG (kb.jsonl), the alias map (aliases.jsonl) and the merges with provenance.

    The directory and every file in it pass the output guard before anything is written
    (``force`` replaces existing files), and the KG's own source directory is refused: its
    kb.jsonl is what was imported.
    """
    dedup = get_dedup_run(store, run)
    out = check_directory(out_dir, files=())
    _refuse_source(store, out)    # before the files' own refusals: it says more than "kb.jsonl exists"
    check_directory(out, files=EXPORT_FILES, force=force)
    name, kg_id = dedup.name, dedup.kg_id
    graph, labels = clusters(store, name, mode, threshold)
    members: dict[int, list[int]] = {}
    for eid, label in enumerate(labels):
        members.setdefault(label, []).append(eid)
    rep = {}
    for group in members.values():
        chosen = choose_representative(group, graph.degree, graph.names)
        for eid in group:
            rep[eid] = chosen
    make_directory(out)
    triples, seen = [], set()
    for h, r, t, chunks in store.conn.execute(
            "SELECT head, relation, tail, chunks FROM kg_triples WHERE kg_id = ? ORDER BY tid", (kg_id,)):
        triple = (graph.names[rep[h]], r, graph.names[rep[t]])
        if triple not in seen:
            seen.add(triple)
            triples.append(json.dumps({"triple": list(triple), "source_chunks": json.loads(chunks)},
                                      ensure_ascii=False) + "\n")
    aliases = [json.dumps({"entity": graph.names[rep[g[0]]], "aliases": [graph.names[e] for e in g if e != rep[g[0]]],
                           "rule": "most connected, then longest name, then first seen"}, ensure_ascii=False) + "\n"
               for g in members.values() if len(g) > 1]
    merges = [json.dumps({"a": p.name_a, "b": p.name_b, "confidence": p.confidence, "rationale": p.rationale,
                          "decision": p.decision, "context_a": p.context_a, "context_b": p.context_b},
                         ensure_ascii=False) + "\n"
              for p in proposals(store, name, mode, threshold=threshold, only_coreferent=False, limit=10 ** 9)
              if p.merged]
    for fname, lines in zip(EXPORT_FILES, (triples, aliases, merges)):
        write_atomic(out / fname, lines, force=force)
    return {"run": name, "mode": mode, "triples": len(triples), "entities": len(members),
            "merged_clusters": len(aliases), "merges": len(merges), "out": str(out)}


def evaluate(store: Store, run: str | None = None, *, threshold: float = 0.5, resamples: int = RESAMPLES,
             seed: int = SEED) -> dict[str, Any]:
    """Pairwise and B-cubed P/R/F1 with CIs per mode against gold clusters, and graph+text − graph."""
    dedup = get_dedup_run(store, run)
    run_id, name, config = dedup.id, dedup.name, dedup.config
    graph = KG(store, dedup.kg_id)
    if all(g is None for g in graph.gold):
        raise ValueError("this KG has no gold clusters (gold_clusters.jsonl) to evaluate against")
    # An entity without a gold line is its own cluster.
    gold_labels = {g: i for i, g in enumerate(dict.fromkeys(x for x in graph.gold if x is not None))}
    gold = [gold_labels[g] if g is not None else len(gold_labels) + i for i, g in enumerate(graph.gold)]
    n = len(graph.names)
    preds = {"no merges": list(range(n))}
    for mode in config.modes:
        preds[mode] = merge_clusters(n, merged_pairs(store, run_id, mode, threshold))
    status = dict(store.conn.execute("SELECT status, count(*) FROM dedup_verdicts WHERE run_id = ? GROUP BY status",
                                     (run_id,)).fetchall())
    out = {"run": name, "threshold": threshold, "entities": n, "verdicts": status,
           "candidates": json.loads(store.conn.execute("SELECT candidate_stats FROM dedup_runs WHERE id = ?",
                                                       (run_id,)).fetchone()[0]),
           "modes": {m: cluster_scores(p, gold, resamples=resamples, seed=seed) for m, p in preds.items()}}
    if "graph" in preds and "graph+text" in preds:
        out["graph+text − graph"] = {m: paired_difference(preds["graph+text"], preds["graph"], gold, m,
                                                          resamples=resamples, seed=seed) for m in METRIC_NAMES}
    return out


def decision_counts(store: Store, run: str | None) -> dict[str, int]:
    """How many reviewer decisions each mode of the run holds (decisions are per mode), every mode listed."""
    dedup = get_dedup_run(store, run)
    counts = dict(store.conn.execute("SELECT mode, count(*) FROM dedup_decisions WHERE run_id = ? GROUP BY mode",
                                     (dedup.id,)).fetchall())
    return {mode: counts.get(mode, 0) for mode in dedup.config.modes}
