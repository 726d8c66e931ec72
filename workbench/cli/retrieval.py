"""Verbs for retrieval evaluation: corpus import, questions, retrieve, retrieval eval/export."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from dataclasses import asdict

from workbench.cli.common import (SharedParents, add_json, add_model_threads, add_out, add_resamples, add_timeout,
                                  chosen_model, model_options)
from workbench.cli.exit_codes import OK
from workbench.cli.relevance import judged_json, judged_rows, register_relevance
from workbench.cli.shared import emit_json, say, say_dataset_replaced, store_of, write_out
from workbench.cli.types import chosen_name, integers, name_or_path
from workbench.cli.shared import print_tables
from workbench.compare.render import fmt_delta, fmt_p
from workbench.models.base import ModelError
from workbench.models.registry import served_model
from workbench.retrieval.runs import RETRIEVERS
from workbench.tables import fmt_estimate, table


def cmd_corpus_import(args) -> int:
    """Import a Markdown tree as a corpus dataset: its documents and their chunks."""
    from workbench.data.corpus import ChunkConfig, import_corpus
    from workbench.data.importer import count_noun

    config = ChunkConfig(by=args.chunk_by, max_chars=args.max_chars, overlap=args.overlap,
                         category_depth=args.category_depth)
    dataset = name_or_path(args.name, args.directory, "dataset")
    report = import_corpus(store_of(args), args.directory, dataset, config, replace=args.replace)
    # Skipped entries and a replacement are said on stderr even with --json (which also holds them).
    for link in report.skipped_links:
        _skipped("symbolic link leaves the corpus root", link)
    for entry in report.not_regular:
        _skipped("not a regular file", entry)
    say_dataset_replaced(report)
    if args.json:
        emit_json(asdict(report))
        return OK
    for problem in report.unreadable:
        _skipped("unreadable", problem)
    verb = "unchanged (already imported)" if report.unchanged else "imported"
    cats = ", ".join(f"{c} {n}" for c, n in sorted(report.categories.items()))
    skipped = (f"; {count_noun(len(report.skipped_links), 'link')} leaving the root skipped"
               if report.skipped_links else "")
    if report.not_regular:
        skipped += f"; {count_noun(len(report.not_regular), 'entry', 'entries')} not a regular file skipped"
    print(f"{report.dataset}: {verb}: {count_noun(report.documents, 'document')}, {count_noun(report.chunks, 'chunk')}"
          + (f" ({cats})" if cats else "") + skipped)
    return OK


def _skipped(why: str, entry: str) -> None:
    """One warning line for a corpus entry passed over; a file name can hold a line break, shown escaped."""
    # The stream escapes every other control character (workbench.terminal), but lets newlines through.
    entry = entry.replace("\n", "\\u000a")
    print(f"warning: {why}, skipped: {entry}", file=sys.stderr)


def cmd_retrieve(args) -> int:
    """Run a built-in retriever (BM25, dense or hybrid) over a dataset's units for every question; store the results."""
    from workbench.models.check import EMBEDDING, check_model_options
    from workbench.retrieval.runs import retrieve

    retriever, model = args.retriever, args.embedding_model
    if args.dense_model:          # the older spelling: dense retrieval with this model
        retriever, model = ("dense" if retriever == "bm25" else retriever), model or args.dense_model
    if retriever != "bm25" or model is not None:
        option = "--dense-model" if args.embedding_model is None and args.dense_model else "--embedding-model"
        check_model_options((option, model, EMBEDDING), timeout=args.timeout)
    try:
        report = retrieve(store_of(args), args.dataset, name=args.name, k=args.k, mode=args.mode,
                          retriever=retriever, embedding_model=model, replace=args.replace, n_threads=args.threads,
                          on_wait=say, timeout=args.timeout)
    except ModelError as exc:
        raise ValueError(f"--embedding-model: {exc}") from None
    if report.replaced is not None:
        print(f"replaced retriever {report.retriever} of {report.dataset}: deleted "
              f"{report.replaced['retrieval_rows']:,} retrieval rows ({report.replaced['runs_planned_on_them']:,} "
              "runs planned on them keep their events)", file=sys.stderr)
    if args.json:
        emit_json(asdict(report))
        return OK
    state = "unchanged" if report.unchanged else "stored"
    parts = []
    if report.index_dir is not None:
        parts.append(f"BM25 index {'built' if report.index_built else 'loaded (corpus unchanged)'} at {report.index_dir}")
    if report.embedding_model is not None:
        parts.append(f"embedded {report.embedded:,} texts, {report.cached:,} from the cache "
                     f"({report.embedding_model if served_model(report.embedding_model) else Path(report.embedding_model).name})")
    tokens = f"; {report.mode} tokens" if report.mode else ""
    print(f"{report.dataset}: retriever {report.retriever} ({report.method}{tokens}): "
          f"{report.queries:,} questions {state}; " + "; ".join(parts))
    return OK


def cmd_retrieval_export(args) -> int:
    """Write stored retrieval results as retrieval.jsonl."""
    from workbench.retrieval.runs import export_retrieval

    buf = io.StringIO()
    rows = export_retrieval(store_of(args), buf, args.dataset, args.retriever)
    write_out(args.out, buf.getvalue(), f"{rows:,} retrieval rows", force=args.force)
    return OK


def cmd_questions_generate(args) -> int:
    """Add questions to a corpus: one per document from its file name, or written by a model."""
    from workbench.models.cached import default_llm
    from workbench.models.check import GENERATOR, check_model_options
    from workbench.retrieval.evaluate import filename_questions, llm_questions

    if args.strategy == "llm":
        model = chosen_model(args, args.model)
        check_model_options(("--model", model, GENERATOR), timeout=args.timeout)
        store = store_of(args)
        llm = default_llm(store, model, **model_options(args), on_wait=say)
        try:
            added = llm_questions(store, args.dataset, n=args.n, limit=args.limit, max_tokens=args.max_tokens,
                                  llm=llm)
        finally:
            llm.close()
    else:
        added = filename_questions(store_of(args), args.dataset, lang=args.lang)
    print(f"{added:,} {args.strategy} questions added")
    return OK


def cmd_retrieval_eval(args) -> int:
    """IR metrics at each cut-off, doc and chunk level, with bootstrap intervals and the misses; several retrievers side by side."""
    from workbench.metrics.ir import METRICS
    from workbench.retrieval.evaluate import evaluate_retrieval

    names = [r for r in args.retriever.split(",") if r]
    if len(names) > 1:
        return _compare_retrievers(args, names)
    store = store_of(args)
    report = evaluate_retrieval(store, args.dataset, names[0] if names else "bm25", args.k, resamples=args.resamples)
    if args.json:
        emit_json({**_eval_json(report), "judged": judged_json(store, report.dataset, report.retriever, report.ks,
                                                              resamples=args.resamples)})
        return OK
    print(f"{report.dataset} · retriever {report.retriever} · {report.n:,} questions · 95% bootstrap CI")
    for level, data in report.levels.items():
        rows = [[m, "", ""] + [fmt_estimate(data["overall"][(m, k)]) for k in report.ks] for m in METRICS]
        print_tables(f"\n{level}-level\n" + table(["metric", "", ""] + [f"@{k}" for k in report.ks], rows))
    judged = judged_rows(store, report.dataset, report.retriever, report.ks, resamples=args.resamples)
    if judged is not None:
        title, rows = judged
        print_tables(f"\n{title}\n" + table(["metric", "", ""] + [f"@{k}" for k in report.ks], rows))
    k = 5 if 5 in report.ks else max(report.ks)
    for group in ("by_strategy", "by_category"):
        parts = [f"{label} {fmt_estimate(v[('recall', k)], 2)}"
                 for label, v in report.levels["doc"][group].items()]
        print(f"\ndoc-level recall@{k} {group.replace('_', ' ')}: " + "; ".join(parts))
    print(f"\ndoc-level misses at @{max(report.ks)}: {len(report.misses):,}")
    for miss in report.misses[: args.misses]:
        print(f"  {miss['question']}  gold {miss['gold']}  got {', '.join(miss['retrieved']) or '—'}")
    return OK


def _eval_json(report) -> dict:
    def named(d):
        return {f"{m}@{k}": est for (m, k), est in d.items()}

    return {"dataset": report.dataset, "retriever": report.retriever, "n": report.n,
            "levels": {lvl: {"overall": named(d["overall"]),
                             **{g: {label: named(v) for label, v in d[g].items()}
                                for g in ("by_strategy", "by_category")}}
                       for lvl, d in report.levels.items()},
            "per_question": {lvl: pq.as_dict() for lvl, pq in report.per_query.items()},
            "misses": report.misses}


def _compare_retrievers(args, names: list[str]) -> int:
    from workbench.metrics.ir import METRICS
    from workbench.data.importer import count_noun
    from workbench.retrieval.compare import compare_retrievers

    c = compare_retrievers(store_of(args), args.dataset, names, args.k, resamples=args.resamples)
    base = c.retrievers[0]
    if args.json:
        emit_json({"dataset": c.dataset, "retrievers": list(c.retrievers), "n": c.n,
                   "evals": {r: _eval_json(e) for r, e in c.evals.items()},
                   "deltas": {r: {lvl: {f"{m}@{k}": {"baseline": d.baseline, "other": d.other, "delta": d.delta,
                                                     "p": d.p} for (m, k), d in per.items()}
                                  for lvl, per in levels.items()} for r, levels in c.deltas.items()},
                   "flips": c.flips})
        return OK
    print(f"{c.dataset} · {', '.join(c.retrievers)} · {c.n:,} questions · 95% bootstrap CI; "
          f"Δ = retriever − {base}, paired over the same questions")
    for level in c.evals[base].levels:
        rows = [[f"{m}@{k}"] + [fmt_estimate(c.evals[r].levels[level]["overall"][(m, k)]) for r in c.retrievers]
                for m in METRICS for k in c.ks]
        print_tables(f"\n{level}-level\n" + table(["metric"] + list(c.retrievers), rows))
        rows = [[f"{m}@{k}"] + [_delta_cell(c.deltas[r][level][(m, k)]) for r in c.retrievers[1:]]
                for m in METRICS for k in c.ks]
        print_tables("\n" + table([f"Δ vs {base}"] + list(c.retrievers[1:]), rows))
    k = max(c.ks)
    for other in c.retrievers[1:]:
        flips, p = c.flips[other], c.deltas[other]["doc"][("hit_rate", k)].p
        print(f"\ndoc-level hit@{k}, {other} vs {base}: {count_noun(len(flips['gained']), 'question')} found by "
              f"{other} only, {len(flips['lost']):,} by {base} only (McNemar p {fmt_p(p)})")
    return OK


def _delta_cell(d) -> str:
    """A paired difference with its interval, and McNemar's p where there is one (hit rate)."""
    return fmt_delta(d) + ("" if d.p is None else f" p {fmt_p(d.p)}")


def register(subparsers, parents: SharedParents) -> None:
    """Add ``corpus``, ``retrieve``, ``retrieval`` and ``questions`` to the CLI."""
    p = subparsers.add_parser("corpus", parents=[parents.db], help="Markdown corpora for retrieval evaluation")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("import", parents=[parents.db], help="import a Markdown tree: documents and their chunks")
    q.add_argument("directory")
    q.add_argument("--name", type=chosen_name, help="dataset name (default: the directory name)")
    q.add_argument("--chunk-by", choices=("heading", "size"), default="heading")
    q.add_argument("--max-chars", type=int, default=500, help="chunk size cap in characters (default 500)")
    q.add_argument("--overlap", type=int, default=50,
                   help="characters repeated between size-cut chunks (default 50; less than --max-chars)")
    q.add_argument("--category-depth", type=int, default=2,
                   help="folder level that names the category (default 2; 1 = the top folder)")
    q.add_argument("--replace", action="store_true",
                   help="replace a dataset of that name holding other content (its runs are deleted with it)")
    add_json(q, help=None)
    q.set_defaults(func=cmd_corpus_import)

    p = subparsers.add_parser("retrieve", parents=[parents.db],
                              help="run a built-in retriever (bm25, dense, hybrid) over a dataset's units for every "
                                   "question",
                              epilog="dense embeds every unit once with multilingual-e5-small (shipped; nothing is "
                                     "downloaded; English and Chinese, units as 'passage: ', questions as 'query: ', a "
                                     "text past 512 tokens averaged window by window) and keeps the vectors in the "
                                     "database by model: a re-run embeds nothing, a "
                                     "changed corpus only its changed units. hybrid fuses the BM25 and dense rankings "
                                     "(reciprocal rank fusion, k = 60).")
    p.add_argument("dataset", nargs="?", help="dataset name (default: the most recent import)")
    p.add_argument("--retriever", choices=RETRIEVERS, default="bm25",
                   help="bm25 (default), dense (cosine of embeddings), hybrid (RRF of the two)")
    p.add_argument("--name", type=chosen_name,
                   help="retriever name to store the results under (default: the --retriever)")
    p.add_argument("--embedding-model",
                   help="dense, hybrid: default (multilingual-e5-small), all-minilm-l6-v2 (English only), a BERT "
                        "checkpoint (directory or .zip, converted once) or an embedding GGUF")
    p.add_argument("--dense-model", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, help="CPU threads for the embedding model (default: every core this process may use)")
    add_timeout(p)
    p.add_argument("--k", type=int, default=50, help="results per question (default 50)")
    p.add_argument("--mode", choices=("auto", "jieba", "bigram", "en"), default="auto",
                   help="BM25 tokenizer (bm25, hybrid)")
    p.add_argument("--replace", action="store_true", help="replace different results stored under --name")
    add_json(p, help=None)
    p.set_defaults(func=cmd_retrieve)

    p = subparsers.add_parser("retrieval", parents=[parents.db], help="retrieval runs: evaluate and export")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("eval", parents=[parents.db], help="Recall/Precision/Hit/MRR/F1/nDCG at k, doc and chunk level")
    q.add_argument("dataset", nargs="?", help="corpus dataset (default: the most recent import)")
    q.add_argument("--retriever", default="bm25",
                   help="retriever name (default bm25); a comma list (bm25,dense,hybrid) compares them side by side, "
                        "with paired differences against the first and the questions they flip")
    q.add_argument("--k", type=integers, default=(1, 3, 5, 10), help="cut-offs (default 1,3,5,10)")
    add_resamples(q, help=None)
    q.add_argument("--misses", type=int, default=10, help="how many doc-level misses to list (default 10)")
    add_json(q, help=None)
    q.set_defaults(func=cmd_retrieval_eval, readonly=True)
    q = psub.add_parser("export", parents=[parents.db], help="write retrieval results as retrieval.jsonl")
    q.add_argument("dataset", nargs="?", help="dataset name (default: the most recent import)")
    q.add_argument("--retriever", help="only this retriever (default: all)")
    add_out(q, "JSONL file to write, or - for stdout")
    q.set_defaults(func=cmd_retrieval_export, readonly=True)
    register_relevance(psub, parents)

    p = subparsers.add_parser("questions", parents=[parents.db], help="generate questions for a Markdown corpus")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("generate", parents=[parents.db, parents.model_choice],
                        help="one question per document from its file name, or written by a model")
    q.add_argument("dataset", nargs="?", help="corpus dataset (default: the most recent import)")
    q.add_argument("--strategy", choices=("filename", "llm"), default="filename",
                   help="filename: a template per language; llm: the local model writes N questions per document")
    q.add_argument("--lang", choices=("zh", "en"), default="zh",
                   help="template: 如何做{菜名}？ or How do I make {name}?")
    q.add_argument("--n", type=int, default=3, help="llm: questions per document (default 3)")
    q.add_argument("--limit", type=int, help="llm: only the first N documents")
    q.add_argument("--max-tokens", type=int, default=160,
                   help="llm: tokens the model may write per document (default 160; the questions it completed "
                        "before the cut are kept)")
    q.add_argument("--model", default="default",
                   help="llm: a GGUF (default: SmolLM2-135M), or with --backend openai a served model's name; its "
                        "answers are cached, so a second run asks nothing again")
    add_model_threads(q)
    q.set_defaults(func=cmd_questions_generate)
