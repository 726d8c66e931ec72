"""Verbs for claim verification: claims run / report / show / check (docs/design.md §6)."""

from __future__ import annotations

import argparse
import sys

from workbench.claims.decompose import DECOMPOSERS
from workbench.claims.vote import TIES
from workbench.cli.common import SharedParents, add_bootstrap, add_json, chosen_model, model_options
from workbench.cli.exit_codes import OK
from workbench.cli.shared import emit_json, run_pass, store_of
from workbench.cli.shared import print_tables
from workbench.models.embedders import CLAIMS, LONG_ANSWERS, default_threshold
from workbench.tables import fmt_estimate, table


def claims_config(args):
    """The ClaimsConfig of the verification options (:func:`verification_parent`), validated, its models checked."""
    from workbench.claims.runner import ClaimsConfig

    config = ClaimsConfig(decomposer=args.decomposer, verifiers=tuple(v for v in args.verifiers.split(",") if v),
                          ties=args.ties, reject_below=args.reject_below, lexical_threshold=args.lexical_threshold,
                          embedding_threshold=args.embedding_threshold, long_clause=args.long_clause,
                          model=chosen_model(args, args.model), embedding_model=args.embedding_model,
                          nli_model=args.nli_model)
    config.validate()
    config.check_models(timeout=args.timeout)   # before the store is opened: a refused model file leaves nothing behind
    return config


def cmd_claims_run(args) -> int:
    """Decompose and verify every finished answer of a run (resumable, cached)."""
    from workbench.claims.report import verified_totals
    from workbench.claims.runner import run_claims
    from workbench.models.cached import default_llm
    from workbench.store.queries import get_run

    config = claims_config(args)
    store = store_of(args)
    run = get_run(store, args.run)
    llm = default_llm(store, config.model, **model_options(args)) if config.needs_llm else None
    reports = []

    def execute(**kwargs):
        reports.append(run_claims(store, run, config, cells=args.cell, limit=args.limit, llm=llm,
                                  retry_errors=args.retry_errors, model_options=model_options(args), **kwargs))
        return reports[-1]

    code = run_pass("claims", "answers", execute, as_json=args.json, resume_hint=f"workbench claims run {run.name}",
                    llm=llm, wait=args.wait)
    if not args.json:
        answers, claims = verified_totals(store, run, config.key())
        embedded = ""
        if reports and reports[-1].embedded is not None:
            embedded = (f"; embedding: {reports[-1].embedded:,} texts embedded, "
                        f"{reports[-1].embeddings_cached:,} from the store")
        print(f"claim run over {run.name}: {answers:,} answers verified, {claims:,} claims{embedded}", file=sys.stderr)
    return code


def cmd_claims_report(args) -> int:
    """RAGChecker-style metrics per cell of a claim run, with bootstrap intervals."""
    from workbench.claims.metrics import FORMULAS, METRICS
    from workbench.claims.report import claim_runs, claims_by_cell, ragchecker_by_cell
    from workbench.cli.judge import estimates_table
    from workbench.judges.report import estimates_json, labelled_estimates
    from workbench.runs.report import cell_order
    from workbench.store.queries import get_run

    store = store_of(args)
    run = get_run(store, args.run)
    runs = claim_runs(store, run)
    if not runs:
        raise ValueError(f"run {run.name!r} has no claim run yet (`workbench claims run {run.name}`)")
    info = next((r for r in runs if r.id == args.claim_run), None) if args.claim_run else runs[0]
    if info is None:
        raise ValueError(f"--claim-run: {args.claim_run} is not a claim run of {run.name!r} "
                         f"(it has {', '.join(str(r.id) for r in runs)})")
    by_cell = claims_by_cell(store, run, info.id, resamples=args.resamples, seed=args.seed)
    labelled = labelled_estimates(store, "claims", run.name, claim_run=info.id)
    ragchecker = ragchecker_by_cell(store, run, info.id)
    if args.json:
        emit_json({"claim_run": info.id, "config": info.config, "jobs": info.jobs, "done": info.done,
                   "cells": by_cell, "ragchecker": ragchecker,
                   "human_labels": None if labelled is None else estimates_json(labelled)})
        return OK
    cfg = info.config
    print(f"run {run.name} · claim run {info.id}: {cfg['decomposer']} + {','.join(cfg['verifiers'])} "
          f"(ties → {cfg['ties']}) · {info.done:,} of {info.jobs:,} answers, {info.claims:,} claims · "
          f"95% bootstrap CI over samples")
    half = (len(METRICS) + 1) // 2
    for names in (METRICS[:half], METRICS[half:]):
        print()
        print_tables(table(["cell", "", "answers", *(_SHORT.get(n, n) for n in names)],
                    [[c, "", str(by_cell[c]["jobs"]), *(fmt_estimate(_est(by_cell[c].get(n))) for n in names)]
                     for c in cell_order(store, run) if c in by_cell]))
    print("\n" + "\n".join(f"  {_SHORT.get(n, n)} = {n}: {FORMULAS[n]}" for n in METRICS if n in FORMULAS))
    _print_ragchecker(ragchecker, [c for c in cell_order(store, run) if c in ragchecker])
    if labelled is not None:
        print(f"\nwith human labels (`workbench judge report claims {run.name}`): faithfulness over claims, the share "
              "of all claims\nsupported by a shown unit, judged and corrected (95% CLT intervals, uniform labels only)")
        print_tables(estimates_table(labelled))
    return OK


def _print_ragchecker(by_cell: dict, cells: list[str]) -> None:
    """RAGChecker's own figures: its convention, its groups, ×100 to one decimal as it prints them."""
    from workbench.claims.metrics import RAGCHECKER_GROUPS, RAGCHECKER_NAMES

    cells = [c for c in cells if by_cell[c]["answers"]]
    if not cells:
        return
    print("\nRAGChecker's convention: an empty set counts as 0 and every answer is in the mean; ×100 as it prints "
          "them\n(`--json`: unrounded, and per query). `differ`: answers with a metric the tables above leave "
          "undefined (—).")
    groups = list(RAGCHECKER_GROUPS.items())
    for part in (groups[:2], groups[2:]):
        names = [(group, name) for group, metrics in part for name in metrics]
        head = ["cell", "", "answers", "differ",
                *(_SHORT.get(RAGCHECKER_NAMES[name], RAGCHECKER_NAMES[name]) for _, name in names)]
        rows = [[c, "", str(by_cell[c]["answers"]), str(by_cell[c]["differs"]),
                 *(f"{by_cell[c]['overall'][group][name]:.1f}" for group, name in names)] for c in cells]
        print()
        print_tables(table(head, rows))
    missing = sum(by_cell[c]["missing"] for c in cells)
    if missing:
        print(f"{missing:,} answers were checked by an older version, which stored no RAGChecker figures: not counted")


_SHORT = {"faithfulness": "faithful", "hallucination": "halluc", "self_knowledge": "self_know",
          "noise_sensitivity_relevant": "noise_rel", "noise_sensitivity_irrelevant": "noise_irr",
          "context_utilization": "ctx_util", "context_precision": "ctx_prec"}


def _est(metric):
    from workbench.metrics.ledger import Estimate

    return Estimate(None, None, None) if metric is None else Estimate(metric.mean, metric.low, metric.high)


def cmd_claims_show(args) -> int:
    """The claims of one answer: each verdict, its verifiers' votes and its best unit."""
    from workbench.claims.report import answer_claims
    from workbench.runs.report import first_cell
    from workbench.store.queries import get_run, sample_sid

    store = store_of(args)
    run = get_run(store, args.run)
    cell = args.cell or first_cell(store, run)
    sid = sample_sid(store, run.dataset_id, args.sample)
    detail = answer_claims(store, run, cell, sid)
    if detail is None:
        raise ValueError(f"sample {args.sample!r} in cell {cell} has no verified claims "
                         f"(`workbench claims run {run.name} --cell {cell}`)")
    if args.json:
        emit_json(detail)
        return OK
    print(_render_claims(detail))
    return OK


def _render_claims(detail: dict) -> str:
    ratio = detail["support_ratio"]
    lines = [f"support {'—' if ratio is None else f'{ratio:.3f}'} ({detail['n_supported']} of "
             f"{detail['n_claims']} claims)" + (" · rejected" if detail["rejected"] else "")]
    for c in detail["claims"]:
        mark = "✔ supported  " if c["supported"] else "✘ unsupported"
        votes = ", ".join(f"{v} {'yes' if x['supported'] else 'no'} {x['score']:.2f}"
                          for v, x in c["verifiers"].items())
        kind = {"hallucination": " · hallucination", "self_knowledge": " · self-knowledge"}.get(c.get("kind"), "")
        correct = c.get("correct_by", {}).get("vote")
        lines.append(f"{c['idx'] + 1}. {mark} {c['text']}   [{votes}]"
                     + (f" · vs reference {correct}" if correct else "") + kind)
        if c.get("units"):
            lines.append("     units " + " ".join(f"{u['label']}:{u['vote']}" for u in c["units"]))
        if c["best_unit"]:
            b = c["best_unit"]
            lines.append(f"     ← [{b['label']}] {' '.join(b['text'].split())[:160]}")
    if detail["filtered_answer"]:
        lines.append(f"filtered answer: {detail['filtered_answer']}")
    reference = detail.get("reference")
    if reference:
        missed = sum(g["missed"] for g in reference)
        lines.append(f"reference: {len(reference)} claims, {len(reference) - missed} in the response, {missed} missed"
                     " (E entailed, N neutral, C contradicted)")
        for g in reference:
            held = ", ".join(g["entailing"]) or "no unit"
            lines.append(f"R{g['idx'] + 1}. in response {g['in_response']}{' · missed' if g['missed'] else ''}"
                         f"   {g['text']}   [held by {held}]")
            if g["units"]:
                lines.append("     units " + " ".join(f"{u['label']}:{u['vote']}" for u in g["units"]))
    return "\n".join(lines)


def cmd_claims_check(args) -> int:
    """Decompose and verify one answer against a given context (units of a dataset, a document, or text)."""
    from workbench.claims.check import check_answer, context_units

    config = claims_config(args)
    store = store_of(args)
    labels, texts = context_units(store, dataset=args.dataset, doc=args.doc, units=args.units, texts=args.context)
    result = check_answer(store, args.answer, labels, texts, config, question=args.question or "",
                          model_options=model_options(args))
    if args.json:
        emit_json(result)
        return OK
    print(f"{len(result['claims'])} claims from {len(labels)} context units in {result['seconds']:.1f}s "
          f"({result['model_calls']} model calls, {result['cache_hits']} cached)")
    print(_render_claims(result))
    return OK


def verification_parent(parents: SharedParents, *, decomposer: str = "hybrid",
                        verifiers: str = "lexical,embedding,llm_judge", ties: str = "unsupported",
                        lexical_threshold: float = 0.6, threshold_use: str = CLAIMS) -> argparse.ArgumentParser:
    """The options of a claim verification (decomposer, verifiers, thresholds, models), for every verb that
    verifies claims: ``claims run|check`` (the three-verifier vote) and ``meta run`` (the offline checker tuned
    on RAGChecker's preference data, docs/checkers.md)."""
    verify = argparse.ArgumentParser(add_help=False, parents=[parents.model_pass, parents.model_choice])
    verify.add_argument("--decomposer", choices=DECOMPOSERS, default=decomposer,
                        help="claim decomposer (default %(default)s)")
    verify.add_argument("--verifiers", default=verifiers,
                        help="comma list of lexical,embedding,llm_judge,nli (default %(default)s; lexical,embedding,"
                             "llm_judge is the three-verifier vote, a token-overlap proxy standing in for nli)")
    verify.add_argument("--ties", choices=TIES, default=ties,
                        help="a tied vote between verifiers counts as (default %(default)s)")
    verify.add_argument("--reject-below", type=float, default=0.5,
                        help="reject an answer whose support ratio is below this (default 0.5)")
    verify.add_argument("--lexical-threshold", type=float, default=lexical_threshold,
                        help="lexical coverage for support (%(default)s)")
    verify.add_argument("--embedding-threshold", type=float,
                        help="cosine for support (default: the embedding model's own for "
                             f"{'long answers' if threshold_use == LONG_ANSWERS else 'claims'}: "
                             f"{default_threshold(None, threshold_use)} for multilingual-e5-small, "
                             f"{default_threshold('all-minilm-l6-v2', threshold_use)} for all-MiniLM-L6-v2; "
                             "a long unit is compared sentence by sentence)")
    verify.add_argument("--long-clause", type=int, default=40, help="hybrid: clauses longer than this go to the LLM")
    verify.add_argument("--model", default="default",
                        help="the LLM decomposer's, the judge's and nli's model: a GGUF (default SmolLM2), or with "
                             "--backend openai a served model's name")
    verify.add_argument("--embedding-model",
                        help="the embedding verifier's model: default (multilingual-e5-small, shipped), "
                             "all-minilm-l6-v2 (English only), a BERT checkpoint (directory or .zip, converted once) "
                             "or an embedding GGUF")
    verify.add_argument("--nli-model", help="another GGUF chat model for the nli verifier (default: --model); it "
                                            "chooses Entailment, Neutral or Contradiction from its next-token logits")
    return verify


def register(subparsers, parents: SharedParents) -> None:
    """Add ``claims run|report|show|check`` to the CLI."""
    verify = verification_parent(parents)

    p = subparsers.add_parser("claims", parents=[parents.db], help="claim decomposition and atomic verification")
    psub = p.add_subparsers(dest="claims_verb", metavar="VERB", required=True)
    q = psub.add_parser("run", parents=[parents.db, verify],
                        help="decompose and verify every finished answer of a run (resumable, cached)")
    q.add_argument("run", nargs="?", help="run name (default: the latest)")
    q.add_argument("--cell", action="append", help="only this cell (repeatable), e.g. k5-b128-linear")
    q.add_argument("--limit", type=int, help="only the first N samples")
    q.set_defaults(func=cmd_claims_run)

    q = psub.add_parser("report", parents=[parents.db], help="RAGChecker-style metrics per cell with 95%% CIs")
    q.add_argument("run", nargs="?", help="run name (default: the latest)")
    q.add_argument("--claim-run", type=int, help="claim run id (default: the latest)")
    add_bootstrap(q)
    add_json(q)
    q.set_defaults(func=cmd_claims_report, readonly=True)

    q = psub.add_parser("show", parents=[parents.db], help="the claims of one answer: verdicts and attribution")
    q.add_argument("run", help="run name")
    q.add_argument("sample", help="sample id")
    q.add_argument("--cell", help="cell id (default: the run's first)")
    add_json(q)
    q.set_defaults(func=cmd_claims_show, readonly=True)

    q = psub.add_parser("check", parents=[parents.db, verify],
                        help="decompose and verify one answer against a document, units or text")
    q.add_argument("answer", help="the answer text to verify")
    q.add_argument("--dataset", help="dataset holding the context (with --doc or --units)")
    q.add_argument("--doc", help="a corpus document id (its chunks are the context), e.g. dishes/meat_dish/红烧肉.md")
    q.add_argument("--units", help="comma list of unit labels, e.g. C12,C13 or T5")
    q.add_argument("--context", action="append", help="a context passage (repeatable)")
    q.add_argument("--question", help="the question, shown to the judge as background")
    q.set_defaults(func=cmd_claims_check)
