"""Verbs for retrieval evaluation: corpus import, questions, retrieve, retrieval eval/export."""

from __future__ import annotations

import sys
from pathlib import Path

from workbench.cli_shared import emit_json as _emit_json
from workbench.cli_shared import store_of as _store
from workbench.cli_shared import write_out as _write_out


def cmd_corpus_import(args) -> int:
    from dataclasses import asdict

    from workbench.data.corpus import ChunkConfig, import_corpus
    from workbench.data.importer import count_noun, describe_dataset_contents

    config = ChunkConfig(by=args.chunk_by, max_chars=args.max_chars, overlap=args.overlap,
                         category_depth=args.category_depth)
    name = args.name or Path(args.directory).resolve().name
    report = import_corpus(_store(args), args.directory, name, config, replace=args.replace)
    # Skipped links and a replacement are said on stderr even with --json (which also holds them).
    for link in report.skipped_links:
        print(f"warning: symbolic link leaves the corpus root, skipped: {link}", file=sys.stderr)
    if report.replaced is not None:
        print(f"replaced dataset {report.dataset}: deleted {describe_dataset_contents(report.replaced)}",
              file=sys.stderr)
    if args.json:
        _emit_json(asdict(report))
        return 0
    for problem in report.unreadable:
        print(f"warning: unreadable, skipped: {problem}", file=sys.stderr)
    verb = "unchanged (already imported)" if report.unchanged else "imported"
    cats = ", ".join(f"{c} {n}" for c, n in sorted(report.categories.items()))
    skipped = (f"; {count_noun(len(report.skipped_links), 'link')} leaving the root skipped"
               if report.skipped_links else "")
    print(f"{report.dataset}: {verb}: {count_noun(report.documents, 'document')}, {count_noun(report.chunks, 'chunk')}"
          + (f" ({cats})" if cats else "") + skipped)
    return 0


def cmd_retrieve(args) -> int:
    from dataclasses import asdict

    from workbench.retrieval.runs import retrieve

    report = retrieve(_store(args), args.dataset, name=args.name, k=args.k, mode=args.mode,
                      dense_model=args.dense_model, replace=args.replace)
    if report.replaced is not None:
        print(f"replaced retriever {report.retriever} of {report.dataset}: deleted "
              f"{report.replaced['retrieval_rows']:,} retrieval rows ({report.replaced['runs_planned_on_them']:,} "
              "runs planned on them keep their events)", file=sys.stderr)
    if args.json:
        _emit_json(asdict(report))
        return 0
    index = "built" if report.index_built else "loaded (corpus unchanged)"
    state = "unchanged" if report.unchanged else "stored"
    print(f"{report.dataset}: retriever {report.retriever} ({report.mode} tokens): {report.queries:,} questions "
          f"{state}; index {index} at {report.index_dir}")
    return 0


def cmd_retrieval_export(args) -> int:
    import io

    from workbench.retrieval.runs import export_retrieval

    buf = io.StringIO()
    count = export_retrieval(_store(args), buf, args.dataset, args.retriever)
    _write_out(args.out, buf.getvalue(), f"{count:,} retrieval rows")
    return 0


def cmd_questions_generate(args) -> int:
    from workbench.retrieval.evaluate import filename_questions, llm_questions

    if args.strategy == "llm":
        added = llm_questions(_store(args), args.dataset, n=args.n, limit=args.limit)
    else:
        added = filename_questions(_store(args), args.dataset, lang=args.lang)
    print(f"{added:,} {args.strategy} questions added")
    return 0


def cmd_retrieval_eval(args) -> int:
    from workbench.metrics.ir import METRICS
    from workbench.retrieval.evaluate import evaluate_retrieval
    from workbench.tables import fmt_estimate, table

    report = evaluate_retrieval(_store(args), args.dataset, args.retriever, args.k, resamples=args.resamples)
    if args.json:
        def named(d):
            return {f"{m}@{k}": est for (m, k), est in d.items()}

        _emit_json({"dataset": report.dataset, "retriever": report.retriever, "n": report.n,
                    "levels": {lvl: {"overall": named(d["overall"]),
                                     **{g: {name: named(v) for name, v in d[g].items()}
                                        for g in ("by_strategy", "by_category")}}
                               for lvl, d in report.levels.items()},
                    "per_question": {lvl: pq.as_dict() for lvl, pq in report.per_query.items()},
                    "misses": report.misses})
        return 0
    print(f"{report.dataset} · retriever {report.retriever} · {report.n:,} questions · 95% bootstrap CI")
    for level, data in report.levels.items():
        rows = [[m, "", ""] + [fmt_estimate(data["overall"][(m, k)]) for k in report.ks] for m in METRICS]
        print(f"\n{level}-level\n" + table(["metric", "", ""] + [f"@{k}" for k in report.ks], rows))
    k = 5 if 5 in report.ks else max(report.ks)
    for group in ("by_strategy", "by_category"):
        parts = [f"{name} {fmt_estimate(v[('recall', k)], 2)}" for name, v in report.levels["doc"][group].items()]
        print(f"\ndoc-level recall@{k} {group.replace('_', ' ')}: " + "; ".join(parts))
    print(f"\ndoc-level misses at @{max(report.ks)}: {len(report.misses):,}")
    for miss in report.misses[: args.misses]:
        print(f"  {miss['question']}  gold {miss['gold']}  got {', '.join(miss['retrieved']) or '—'}")
    return 0
