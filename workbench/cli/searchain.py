"""Verbs for SearChain: searchain run / resume / report / show (docs/design.md §7)."""

from __future__ import annotations

import sys
from functools import partial

from workbench.cli.common import (SharedParents, add_bootstrap, add_json, add_seed, add_served, chosen_model,
                                  model_options)
from workbench.cli.exit_codes import OK
from workbench.cli.shared import emit_json, run_pass, store_of
from workbench.cli.types import chosen_name


def cmd_searchain_run(args) -> int:
    """Plan a SearChain run over a dataset's samples (or find it) and run its pending samples."""
    from workbench.models.check import GENERATOR, check_model_options
    from workbench.pipelines.runner import SearChainConfig, plan_searchain

    model = chosen_model(args, args.model)
    check_model_options(("--model", model, GENERATOR), timeout=args.timeout)
    config = SearChainConfig(model=model, n_ctx=args.n_ctx, max_tokens=args.max_tokens, grammar=args.grammar,
                             threshold=args.threshold,
                             max_rounds=args.max_rounds, reader=args.reader, baseline_k=args.baseline_k,
                             baseline_retriever=args.baseline_retriever, hops=args.hops, limit=args.limit,
                             seed=args.seed)
    store = store_of(args)
    name, created = plan_searchain(store, args.dataset, config, args.name)
    if not args.json:
        print(f"searchain {name}: {'planned' if created else 'found (same config): resuming'}", file=sys.stderr)
    args.run = name
    return _execute(args, store)


def cmd_searchain_resume(args) -> int:
    """Continue a SearChain run's pending samples."""
    return _execute(args, store_of(args))


def _execute(args, store) -> int:
    from workbench.models.cached import default_llm
    from workbench.pipelines.runner import execute_searchain, get_pipeline_run

    prun = get_pipeline_run(store, args.run)
    llm = default_llm(store, prun.config.model, n_ctx=prun.config.n_ctx, seed=prun.config.seed,
                      **model_options(args))
    return run_pass("searchain", "samples", partial(execute_searchain, store, prun.name, llm=llm,
                                                    retry_errors=args.retry_errors),
                    as_json=args.json, resume_hint=f"workbench searchain resume {prun.name}", llm=llm,
                    wait=args.wait)


def cmd_searchain_report(args) -> int:
    """Cover-EM, rounds, knowledge sources, citations and the paired difference vs plain RAG."""
    from workbench.pipelines.render import render_report
    from workbench.pipelines.report import searchain_report

    report = searchain_report(store_of(args), args.run, resamples=args.resamples, seed=args.seed)
    if args.json:
        emit_json(report)
        return OK
    print(render_report(report))
    return OK


def cmd_searchain_show(args) -> int:
    """One sample's reasoning tree with its feedback and evidence."""
    from workbench.pipelines.render import render_tree
    from workbench.pipelines.report import chain_tree
    from workbench.pipelines.runner import get_pipeline_run
    from workbench.store.queries import sample_sid

    store = store_of(args)
    prun = get_pipeline_run(store, args.run)
    tree = chain_tree(store, prun.name, sample_sid(store, prun.dataset_id, args.sample))
    if args.json:
        emit_json(tree)
        return OK
    print(render_tree(tree))
    return OK


def register(subparsers, parents: SharedParents) -> None:
    """Add ``searchain run|resume|report|show`` to the CLI."""

    p = subparsers.add_parser("searchain", parents=[parents.db],
                              help="SearChain (Chain-of-Query + retrieval) as a system under test")
    psub = p.add_subparsers(dest="searchain_verb", metavar="VERB", required=True)
    q = psub.add_parser("run", parents=[parents.db, parents.model_pass, parents.model_choice],
                        help="plan and run SearChain over a dataset's samples")
    q.add_argument("dataset", nargs="?", help="dataset name (default: the most recent import)")
    q.add_argument("--hops", type=int, help="only samples with meta.hops == N (e.g. 2 for MetaQA 2-hop)")
    q.add_argument("--limit", type=int, help="only the first N (selected) samples")
    q.add_argument("--name", type=chosen_name,
                   help="run name (default: searchain-DATASET-<config hash>, so re-running resumes)")
    q.add_argument("--reader", choices=("extractive", "llm"), default="extractive",
                   help="who answers a step from its top-1 unit (default extractive)")
    q.add_argument("--threshold", type=float, default=0.75, help="reader confidence needed to correct (0.75)")
    q.add_argument("--max-rounds", type=int, default=5, help="feedback rounds before stopping (5)")
    q.add_argument("--baseline-k", type=int, default=10, help="plain-RAG baseline over the top-K units (10; 0: none)")
    q.add_argument("--baseline-retriever", help="stored retriever for the baseline (default: the dataset's first)")
    q.add_argument("--model", default="default",
                   help="a GGUF (default: SmolLM2-135M), or with --backend openai a served model's name")
    q.add_argument("--n-ctx", type=int, default=4096, help="context window (4096: the chat grows each round)")
    q.add_argument("--max-tokens", type=int, default=200, help="tokens per chain (200)")
    q.add_argument("--no-grammar", dest="grammar", action="store_false",
                   help="let the model write chains freely (default: a GBNF grammar holds them to the CoQ format)")
    add_seed(q, "sampling seed (0)")
    q.set_defaults(func=cmd_searchain_run)

    q = psub.add_parser("resume", parents=[parents.db, parents.model_pass],
                        help="continue a SearChain run's pending samples")
    q.add_argument("run", nargs="?", help="run name (default: the latest)")
    add_served(q)
    q.set_defaults(func=cmd_searchain_resume)

    q = psub.add_parser("report", parents=[parents.db],
                        help="cover-EM, rounds, knowledge sources, citations, and the paired difference vs plain RAG")
    q.add_argument("run", nargs="?", help="run name (default: the latest)")
    add_bootstrap(q)
    add_json(q)
    q.set_defaults(func=cmd_searchain_report, readonly=True)

    q = psub.add_parser("show", parents=[parents.db], help="one sample's reasoning tree with feedback and evidence")
    q.add_argument("run", help="run name")
    q.add_argument("sample", help="sample id")
    add_json(q)
    q.set_defaults(func=cmd_searchain_show, readonly=True)
