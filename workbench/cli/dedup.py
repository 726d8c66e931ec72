"""Verbs for entity deduplication: dedup import / run / resume / eval / review / decide / export (docs/design.md §8)."""

from __future__ import annotations

import argparse
import sys
from functools import partial

from workbench.cli.common import SharedParents, add_bootstrap, add_json, add_served, chosen_model, model_options
from workbench.cli.exit_codes import OK
from workbench.cli.shared import emit_json, run_pass, store_of
from workbench.cli.types import chosen_name, name_or_path
from workbench.cli.shared import print_tables
from workbench.models.embedders import DEDUP, default_threshold
from workbench.tables import fmt_estimate, table


def cmd_dedup_import(args) -> int:
    """Import a KG directory: triples, chunks and gold clusters."""
    from workbench.kg.importer import import_kg

    name = name_or_path(args.name, args.directory, "KG")
    report = import_kg(store_of(args), args.directory, name, replace=args.replace)
    if report.replaced is not None:
        from workbench.kg.importer import describe_kg_contents

        print(f"replaced KG {report.kg}: deleted {describe_kg_contents(report.replaced)}", file=sys.stderr)
    if args.json:
        emit_json(report)
    else:
        state = "unchanged (already imported)" if report.unchanged else "imported"
        print(f"{report.kg}: {state}: {report.triples:,} triples, {report.entities:,} entities, "
              f"{report.chunks:,} chunks, {report.gold:,} gold cluster lines")
    return OK


def cmd_dedup_run(args) -> int:
    """Plan a dedup run (candidates by blocking) or find it, and judge its pending pairs per mode."""
    from workbench.kg.runner import DedupConfig, plan_dedup

    config = DedupConfig(modes=tuple(m for m in args.modes.split(",") if m), max_relations=args.max_relations,
                         max_text_chunks=args.max_text_chunks, chunk_max_chars=args.chunk_max_chars,
                         fuzzy_threshold=args.fuzzy_threshold, use_neighbours=not args.no_neighbours,
                         model=chosen_model(args, args.model), max_tokens=args.max_tokens,
                         embedding_model=args.embedding_model,
                         embedding_threshold=args.embedding_threshold)
    config.validate()
    config.check_models(timeout=args.timeout)   # before the store is opened: a refused model file leaves nothing behind
    store = store_of(args)
    name, created, stats = plan_dedup(store, args.kg, config, args.name)
    if not args.json:
        pc = stats.get("pairs_completeness")
        print(f"dedup {name}: {'planned' if created else 'found (same config): resuming'}: "
              f"{stats['candidate_pairs']:,} candidate pairs of {stats['all_pairs']:,} "
              f"(reduction ratio {stats['reduction_ratio']:.4f}"
              + (f", pairs-completeness {pc:.3f}" if pc is not None else "") + f") × {len(config.modes)} modes",
              file=sys.stderr)
    args.run = name
    return _execute(args, store)


def cmd_dedup_resume(args) -> int:
    """Continue a dedup run's pending verdicts."""
    return _execute(args, store_of(args))


def _execute(args, store) -> int:
    from workbench.kg.runner import execute_dedup, get_dedup_run
    from workbench.models.cached import default_llm

    dedup = get_dedup_run(store, args.run)
    llm = (default_llm(store, dedup.config.model, **model_options(args))
           if any(m != "embedding" for m in dedup.config.modes) else None)
    return run_pass("dedup", "verdicts", partial(execute_dedup, store, dedup.name, llm=llm,
                                                 retry_errors=args.retry_errors, timeout=args.timeout),
                    as_json=args.json, resume_hint=f"workbench dedup resume {dedup.name}", llm=llm,
                    wait=args.wait)


def cmd_dedup_eval(args) -> int:
    """Pairwise and B-cubed precision/recall/F1 per mode against the gold clusters."""
    from workbench.cli.judge import estimates_table
    from workbench.judges.report import estimates_json, labelled_estimates
    from workbench.kg.merges import METRIC_NAMES, evaluate

    store = store_of(args)
    r = evaluate(store, args.run, threshold=args.threshold, resamples=args.resamples, seed=args.seed)
    labelled = labelled_estimates(store, "dedup", r["run"], threshold=args.threshold)
    if args.json:
        emit_json({**r, "human_labels": None if labelled is None else estimates_json(labelled)})
        return OK
    c = r["candidates"]
    pc = c.get("pairs_completeness")
    print(f"dedup {r['run']} · {r['entities']:,} entities · merge threshold {r['threshold']} · verdicts "
          + ", ".join(f"{k} {v:,}" for k, v in r["verdicts"].items()) + " · 95% bootstrap CI over entities")
    print(f"candidates: {c['candidate_pairs']:,} pairs of {c['all_pairs']:,} (reduction ratio "
          f"{c['reduction_ratio']:.4f}); pairs-completeness " + ("—" if pc is None else f"{pc:.3f}")
          + " · by reason " + ", ".join(f"{k} {v}" for k, v in c.get("by_reason", {}).items()))
    short = {"pairwise_precision": "pair P", "pairwise_recall": "pair R", "pairwise_f1": "pair F1",
             "bcubed_precision": "B³ P", "bcubed_recall": "B³ R", "bcubed_f1": "B³ F1"}
    rows = [[mode, "", ""] + [fmt_estimate(getattr(s, m)) for m in METRIC_NAMES] for mode, s in r["modes"].items()]
    if "graph+text − graph" in r:
        rows.append(["graph+text − graph", "", ""]
                    + [fmt_estimate(r["graph+text − graph"][m]) for m in METRIC_NAMES])
    print_tables(table(["mode", "", ""] + [short[m] for m in METRIC_NAMES], rows))
    if labelled is not None:
        print(f"\nwith human labels (`workbench judge report dedup {r['run']}`): pair precision of each mode's own "
              f"merges\n(same at confidence ≥ {args.threshold}), judged (its mean stated probability) and corrected "
              "(95% CLT intervals, uniform labels only)")
        print_tables(estimates_table(labelled))
    return OK


def cmd_dedup_review(args) -> int:
    """List the proposed merges of a mode by confidence band."""
    from workbench.kg.merges import proposals

    items = proposals(store_of(args), args.run, args.mode, threshold=args.threshold, band=args.band,
                      only_coreferent=not args.all)
    if args.json:
        emit_json(items)
        return OK
    for p in items:
        state = p.decision or ("merge" if p.merged else "no merge")
        print(f"{p.confidence:.2f}  {'same' if p.is_coreferent else 'different':9}  {state:9}  "
              f"{p.name_a!r} ~ {p.name_b!r}  [{p.reasons}]  {p.rationale[:80]}")
    print(f"{len(items)} pairs", file=sys.stderr)
    return OK


def cmd_dedup_decide(args) -> int:
    """Accept, reject (revert) or clear the decision on one merge."""
    from workbench.kg.merges import decide
    from workbench.kg.runner import entity_id, get_dedup_run

    store = store_of(args)
    dedup = get_dedup_run(store, args.run)
    a, b = (entity_id(store, dedup.kg_id, entity) for entity in (args.a, args.b))
    decision = {"accept": "accepted", "reject": "rejected", "revert": "rejected", "clear": None}[args.decision]
    decide(store, dedup.name, a, b, args.mode, decision)
    print(f"{args.a!r} ~ {args.b!r} ({args.mode}): {decision or 'decision cleared'}", file=sys.stderr)
    return OK


def cmd_dedup_export(args) -> int:
    """Write the deduplicated KG, the alias map and the merges with provenance."""
    from workbench.kg.merges import export_kg

    result = export_kg(store_of(args), args.run, args.mode, args.out, threshold=args.threshold, force=args.force)
    if args.json:
        emit_json(result)
    else:
        print(f"{result['out']}: {result['triples']:,} triples over {result['entities']:,} entities; "
              f"{result['merged_clusters']:,} merged clusters in aliases.jsonl, {result['merges']:,} merges with "
              "provenance in merges.jsonl", file=sys.stderr)
    return OK


def register(subparsers, parents: SharedParents) -> None:
    """Add the ``dedup`` verbs to the CLI."""
    merge = argparse.ArgumentParser(add_help=False)
    merge.add_argument("--threshold", type=float, default=0.5, help="judge confidence needed to merge (0.5)")

    p = subparsers.add_parser("dedup", parents=[parents.db], help="entity deduplication for KG construction")
    psub = p.add_subparsers(dest="dedup_verb", metavar="VERB", required=True)
    q = psub.add_parser("import", parents=[parents.db],
                        help="import a KG: kb.jsonl (+source_chunks), chunks.jsonl, gold_clusters.jsonl")
    q.add_argument("directory")
    q.add_argument("--name", type=chosen_name, help="KG name (default: the directory name)")
    q.add_argument("--replace", action="store_true", help="replace a KG of that name holding other content")
    add_json(q)
    q.set_defaults(func=cmd_dedup_import)

    q = psub.add_parser("run", parents=[parents.db, parents.model_pass, parents.model_choice],
                        help="candidates by blocking, then the judge per mode")
    q.add_argument("kg", nargs="?", help="KG name (default: the latest import)")
    q.add_argument("--name", type=chosen_name, help="run name (default: dedup-KG-<config hash>, so re-running resumes)")
    q.add_argument("--modes", default="graph,graph+text", help="graph,graph+text,embedding (default graph,graph+text)")
    q.add_argument("--max-relations", type=int, default=10, help="relations per entity shown to the judge (10)")
    q.add_argument("--max-text-chunks", type=int, default=5, help="text chunks per entity in graph+text (5)")
    q.add_argument("--chunk-max-chars", type=int, default=200, help="characters per chunk (200)")
    q.add_argument("--fuzzy-threshold", type=float, default=0.85, help="name similarity within a block (0.85)")
    q.add_argument("--no-neighbours", action="store_true", help="no shared-neighbour blocking")
    q.add_argument("--model", default="default",
                   help="the judge: a GGUF (default: SmolLM2-135M), or with --backend openai a served model's name")
    q.add_argument("--max-tokens", type=int, default=64, help="tokens per verdict (64)")
    q.add_argument("--embedding-model", help="the embedding mode's model: default (multilingual-e5-small, shipped), "
                                              "all-minilm-l6-v2, a BERT checkpoint (directory or .zip) or an "
                                              "embedding GGUF")
    q.add_argument("--embedding-threshold", type=float,
                   help=f"cosine for the embedding mode (default: the model's own: {default_threshold(None, DEDUP)} "
                        f"for multilingual-e5-small, {default_threshold('all-minilm-l6-v2', DEDUP)} for "
                        "all-MiniLM-L6-v2)")
    q.set_defaults(func=cmd_dedup_run)

    q = psub.add_parser("resume", parents=[parents.db, parents.model_pass],
                        help="continue a dedup run's pending verdicts")
    q.add_argument("run", nargs="?", help="run name (default: the latest)")
    add_served(q)
    q.set_defaults(func=cmd_dedup_resume)

    q = psub.add_parser("eval", parents=[parents.db, merge],
                        help="pairwise and B-cubed P/R/F1 per mode vs gold clusters")
    q.add_argument("run", nargs="?", help="run name (default: the latest)")
    add_bootstrap(q)
    add_json(q)
    q.set_defaults(func=cmd_dedup_eval, readonly=True)

    q = psub.add_parser("review", parents=[parents.db, merge], help="list proposed merges by confidence band")
    q.add_argument("run", nargs="?", help="run name (default: the latest)")
    q.add_argument("--mode", default="graph+text", help="graph | graph+text | embedding (default graph+text)")
    q.add_argument("--band", default="all", choices=("all", "high", "mid", "low", "below"),
                   help="high ≥0.9, mid 0.7–0.9, low 0.5–0.7, below <0.5")
    q.add_argument("--all", action="store_true", help="also pairs judged different")
    add_json(q)
    q.set_defaults(func=cmd_dedup_review, readonly=True)

    for verb, text in (("accept", "accept a merge"), ("reject", "reject a merge"),
                       ("revert", "revert a merge (= reject it; clusters are recomputed)"),
                       ("clear", "clear a decision (the threshold decides again)")):
        q = psub.add_parser(verb, parents=[parents.db], help=text)
        q.add_argument("run", help="run name")
        q.add_argument("a", help="entity name")
        q.add_argument("b", help="entity name")
        q.add_argument("--mode", default="graph+text", help="the mode whose merge it is (default graph+text)")
        q.set_defaults(func=cmd_dedup_decide, decision=verb)

    q = psub.add_parser("export", parents=[parents.db, merge],
                        help="write the deduplicated KG, the alias map and the merges with provenance")
    q.add_argument("run", nargs="?", help="run name (default: the latest)")
    q.add_argument("--mode", default="graph+text", help="whose merges (default graph+text)")
    q.add_argument("--out", required=True, metavar="DIR",
                   help="output directory (created if missing; never the KG's own source directory)")
    q.add_argument("--force", action="store_true",
                   help="replace kb.jsonl, aliases.jsonl and merges.jsonl in DIR if they exist (atomically)")
    add_json(q)
    q.set_defaults(func=cmd_dedup_export, readonly=True, out_target="directory")
