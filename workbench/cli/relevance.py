"""``retrieval judge``: the local model judges the relevance of each retrieved chunk (resumable, cached);
and the judged figures ``retrieval eval`` prints beside the gold-based ones.

The verb is added to the ``retrieval`` group by :func:`register_relevance`; the human side (labels,
κ, PPI) is ``judge report relevance`` and the TUI's Labels screen, as for every judge.
"""

from __future__ import annotations

import argparse
from functools import partial

from workbench.cli.common import SharedParents, chosen_model, model_options
from workbench.cli.shared import run_pass, store_of
from workbench.tables import fmt_estimate
from workbench.metrics.stats import RESAMPLES, SEED

JUDGE_EPILOG = """\
each (question, chunk) pair of the retriever's top k is one forward pass of the local model choosing
"Yes" or "No" (is this passage relevant to answering the question?), cached like every model call
and committed on its own: Ctrl-C or a kill loses nothing, and the same command again judges only
what is left. A pair already judged under the same model and prompt (for another retriever, or at
another k) is read from the cache. Judged precision@k and nDCG@k, with the verdicts as qrels, sit
beside the gold-based figures in `workbench retrieval eval`; `workbench judge report relevance
DATASET` measures the judge against human labels (κ, PPI).

examples:
  workbench retrieval judge hc --retriever bm25 --k 5 --limit 5
  workbench retrieval judge hc --retriever dense --k 10"""


def cmd_retrieval_judge(args) -> int:
    """Judge the relevance of a retriever's top-k chunks with the local model; say what it did, and the judged
    figures."""
    from workbench.models.cached import default_llm
    from workbench.models.check import GENERATOR, check_model_options
    from workbench.retrieval.relevance import judge_relevance
    from workbench.store.queries import get_dataset

    model = chosen_model(args, args.model)
    check_model_options(("--model", model, GENERATOR), timeout=args.timeout)
    store = store_of(args)
    dataset = get_dataset(store, args.dataset).name
    hint = (f"workbench retrieval judge {dataset} --retriever {args.retriever} --k {args.k}"
            + (f" --model {model}" if model != "default" else "")
            + (f" --max-chars {args.max_chars}" if args.max_chars is not None else "")
            + (f" --limit {args.limit}" if args.limit is not None else ""))
    cut = {} if args.max_chars is None else {"max_chars": args.max_chars}
    llm = default_llm(store, model, **model_options(args))
    code = run_pass("relevance", "pairs", partial(judge_relevance, store, dataset, args.retriever, k=args.k,
                                                  model=model, limit=args.limit, llm=llm,
                                                  retry_errors=args.retry_errors, **cut),
                    as_json=args.json, resume_hint=hint, llm=llm, wait=args.wait)
    if not args.json:
        line = judged_line(store, dataset, args.retriever, args.k)
        if line:
            print(line)
    return code


def judged_line(store, dataset: str, retriever: str, k: int, *, resamples: int = RESAMPLES) -> str | None:
    """One line: the pool's size and the judged precision@k and nDCG@k over the questions judged to depth k."""
    from workbench.retrieval.relevance import judged_metrics

    j = judged_metrics(store, dataset, retriever, (k,), resamples=resamples)
    if j is None:
        return None
    at = j.at[0]
    return (f"{j.dataset} · {j.retriever}: {j.pairs:,} pairs judged by {j.judge} ({j.relevant:,} relevant); "
            f"judged precision@{k} {fmt_estimate(at.precision)} · nDCG@{k} {fmt_estimate(at.ndcg)} over "
            f"{at.judged:,} of {j.questions:,} questions ({at.unjudged:,} not judged to depth {k})")


def judged_rows(store, dataset: str, retriever: str, ks, *, resamples: int = RESAMPLES,
                seed: int = SEED) -> tuple[str, list[list[str]]] | None:
    """What ``retrieval eval`` prints beside the gold-based figures: a title and rows of the eval's table shape
    (``["metric", "", ""] + ["@k" ...]``): judged precision, judged nDCG and the questions judged at each k.
    None when the retriever's results were never judged (nothing to print)."""
    from workbench.retrieval.relevance import judged_metrics

    j = judged_metrics(store, dataset, retriever, ks, resamples=resamples, seed=seed)
    if j is None:
        return None
    title = (f"chunk-level, LLM-judged (judge {j.judge}; {j.pairs:,} pairs judged, {j.relevant:,} relevant; "
             "a question counts at k once its top k is judged)")
    rows = [["judged precision", "", ""] + [fmt_estimate(a.precision) for a in j.at],
            ["judged ndcg", "", ""] + [fmt_estimate(a.ndcg) for a in j.at],
            ["n judged questions", "", ""] + [f"{a.judged:,} of {j.questions:,}" for a in j.at]]
    return title, rows


def judged_json(store, dataset: str, retriever: str, ks, *, resamples: int = RESAMPLES, seed: int = SEED) -> dict | None:
    """The judged figures for ``retrieval eval --json`` (under ``"judged"``): per k the estimates and counts;
    None when the retriever's results were never judged."""
    from workbench.retrieval.relevance import judged_metrics

    j = judged_metrics(store, dataset, retriever, ks, resamples=resamples, seed=seed)
    if j is None:
        return None
    return {"judge": j.judge, "config_key": j.config_key, "questions": j.questions, "pairs": j.pairs,
            "relevant": j.relevant,
            **{f"@{a.k}": {"precision": a.precision, "ndcg": a.ndcg, "judged": a.judged, "unjudged": a.unjudged}
               for a in j.at}}


def register_relevance(retrieval_subparsers, parents: SharedParents) -> None:
    """Add ``retrieval judge`` to the ``retrieval`` group (its subparsers)."""
    q = retrieval_subparsers.add_parser(
        "judge", parents=[parents.db, parents.model_pass, parents.model_choice], epilog=JUDGE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="the local model judges the relevance of a retriever's top-k chunks (resumable, cached)")
    q.add_argument("dataset", nargs="?", help="corpus dataset (default: the most recent import)")
    q.add_argument("--retriever", default="bm25", help="retriever name whose results are judged (default bm25)")
    q.add_argument("--k", type=int, default=5, help="chunks judged per question: its top k (default 5)")
    q.add_argument("--limit", type=int, help="only the first N questions (a later run adds the rest)")
    q.add_argument("--model", default="default",
                   help="the judge: a GGUF (default: SmolLM2-135M), or with --backend openai a served model's name")
    q.add_argument("--max-chars", type=int,
                   help="characters of a chunk shown to the judge (default 600; another cut is another judge)")
    q.set_defaults(func=cmd_retrieval_judge)
