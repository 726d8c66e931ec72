"""Verbs for trusting the judges: ``judge report``, ``judge queue`` and ``judge labels export|import``.

Labels themselves are made by keyboard in the TUI (the Labels screen), or imported.
"""

from __future__ import annotations

import argparse
import sys

from workbench.cli.common import SharedParents, add_bootstrap, add_json, add_out
from workbench.cli.exit_codes import OK
from workbench.cli.shared import emit_json, store_of
from workbench.cli.shared import print_tables
from workbench.tables import fmt_estimate, fmt_number, table

KINDS = ("claims", "dedup", "answers", "relevance")

REPORT_EPILOG = """\
what it says:
  per judge (each claim verifier and their vote; each dedup mode; the answer scorer; each model
  that judged the relevance of retrieved chunks), against
  the human label of every labelled item (the majority of its annotators):
    TN FP FN TP      the confusion matrix, the human label as the truth
    accuracy, κ      Cohen's kappa with a 95% bootstrap CI over items: agreement beyond chance
    judge+ human+    how often the judge and the humans say yes: a biased judge shows here
    baseline         the accuracy of always giving the humans' commonest label
  then the judged metric three ways, from the labels drawn by the uniform queue only:
    naive            the judge's own estimate over every item (biased if the judge is)
    human            the labelled items alone (unbiased, wide)
    PPI              prediction-powered (power-tuned, PPI++): the judge's estimate corrected
                     by its error on the labelled items; unbiased, narrower than human when the
                     judge is good. λ: how much of the judge it uses (0: none, the human estimate)
  a claim verifier's verdict on a claim is "supported on at least one shown unit"; relevance is
  judged of (question, retrieved chunk) pairs of a dataset (`workbench retrieval judge`).

examples:
  workbench judge report claims demo
  workbench judge report dedup films-dedup --threshold 0.7 --json
  workbench judge report relevance hc --retriever bm25"""


def cmd_judge_report(args) -> int:
    """Each judge against the human labels, and the judged metric corrected by them."""
    from workbench.judges.report import AGREEMENT_COLUMNS, METRIC, agreement_cells, judge_report, report_json

    _check_retriever(args)
    store = store_of(args)
    report = judge_report(store, args.kind, args.run, claim_run=args.claim_run, threshold=args.threshold,
                          retriever=args.retriever, resamples=args.resamples, seed=args.seed)
    preferences = _preferences(store, args) if report.kind == "claim" else None
    if args.json:
        emit_json({**report_json(report), **({"preferences": preferences[1]} if preferences else {})})
        return OK
    what = {"claim": "claims", "dedup_pair": "candidate pairs", "answer": "answers",
            "relevance": "judged (question, chunk) pairs"}[report.kind]
    print(f"judges of {report.run} · {report.source}")
    who = ", ".join(f"{a} {n}" for a, n in report.annotators.items()) or "nobody yet"
    print(f"{report.items:,} {what} · {report.labelled_items:,} labelled ({report.uniform_items:,} from the uniform "
          f"queue) · {report.labels:,} labels by {who}")
    notes = [f"{report.ties} split evenly between annotators (left out of agreement)" if report.ties else "",
             f"{report.stale} claim labels whose claim text has changed (not used)" if report.stale else "",
             (f"{report.unmatched} labels of items no longer judged" + (
                 f" or not judged of {args.retriever}'s results" if args.retriever else "") + " (not used)")
             if report.unmatched else ""]
    for note in filter(None, notes):
        print(f"  note: {note}")
    if not report.labelled_items:
        print(f"\nno labels yet: label {what} by keyboard in the TUI (Labels screen), or "
              f"`workbench judge labels import FILE`")
        _print_preferences(preferences)
        return OK
    print("\nagreement with the human labels (κ: 95% bootstrap CI over items)")
    print_tables(table(AGREEMENT_COLUMNS, [agreement_cells(j) for j in report.agreement], left=1))
    for p in report.annotator_agreement:
        a = p.agreement
        print(f"annotators {p.a} ~ {p.b} (the human ceiling): κ {fmt_estimate(a.kappa)} on {a.n} common items, "
              f"agreement {fmt_number(a.accuracy, 3)}")
    metric = METRIC[report.kind]
    scope = {"claim": "the share of all claims supported by a shown unit",
             "dedup_pair": f"the share of each mode's merges (same, confidence ≥ {report.threshold}) that are "
                           "the same entity; naive = the mode's mean stated probability",
             "answer": "the share of answers that are correct; naive = the scorer's mean score",
             "relevance": "the share of judged (question, retrieved chunk) pairs that are relevant; naive = the "
                          "judge's share"}[report.kind]
    print(f"\n{metric}: {scope} (95% CLT intervals, uniform labels only)")
    print_tables(estimates_table(report.estimates))
    _print_preferences(preferences)
    return OK


def _preferences(store, args) -> tuple[list, list[dict]] | None:
    """Every meta set's scorers against the overall preference label: (rows, their JSON), or None without a set."""
    from workbench.meta.report import preference_rows, rows_json

    rows = preference_rows(store, resamples=args.resamples, seed=args.seed)
    return (rows, [{"meta_set": name, **row} for (name, _), row in zip(rows, rows_json([r for _, r in rows]))]) \
        if rows else None


def _print_preferences(preferences) -> None:
    """Beside κ on claim labels: how far each checker tracks people's pairwise preferences (`meta report`)."""
    from workbench.meta.report import PREFERENCE_COLUMNS, preference_cells

    if not preferences:
        return
    rows = preferences[0]
    print("\nagreement with people's preferences between two answers (overall label; score difference against "
          "each annotator, 95% bootstrap CI over instances; `workbench meta report SET` has every label)")
    print_tables(table(PREFERENCE_COLUMNS, [preference_cells(name, r) for name, r in rows], left=2))


def _check_retriever(args) -> None:
    if args.retriever is not None and args.kind != "relevance":
        raise ValueError(f"--retriever: only relevance is judged per retriever, not {args.kind}")


def estimates_table(estimates) -> str:
    """The naive, human-only and PPI estimates of each judge, one row each (also under claims report and dedup eval)."""
    from workbench.judges.report import ESTIMATE_COLUMNS, estimate_cells

    return table(ESTIMATE_COLUMNS, [estimate_cells(e) for e in estimates], left=1)


def cmd_judge_queue(args) -> int:
    """The next items to label, in the queue's order."""
    from workbench.judges.items import population
    from workbench.judges.queue import label_queue
    from workbench.store.labels import default_annotator

    _check_retriever(args)
    store = store_of(args)
    pop = population(store, args.kind, args.run, claim_run=args.claim_run, threshold=args.threshold,
                     retriever=args.retriever)
    annotator = args.annotator or default_annotator()
    queue = label_queue(store.conn, pop, annotator, order=args.order, seed=args.seed)
    shown = queue.head(store, args.limit)     # with their texts: an answer's is read from its event
    if args.json:
        emit_json({"order": queue.order, "annotator": annotator, "labelled": queue.labelled, "total": queue.total,
                   "items": [{"key": vars(i.key), "text": i.text, "verdicts": i.verdicts} for i in shown]})
        return OK
    print(f"{pop.source} · {annotator} has labelled {queue.labelled:,} of {queue.total:,} · {queue.describe}")
    for i in shown:
        where = "" if i.sample is None else f"{i.sample[0]} sid {i.sample[1]}: "
        print(f"  {where}{' '.join(i.text.split())[:100]}")
    return OK


def cmd_labels_export(args) -> int:
    """Write every label (or one kind's, or one run's) as JSON Lines."""
    from workbench.data.labels import export_labels
    from workbench.data.outfile import is_stdout

    kinds = None if args.kind is None else [args.kind]
    n = export_labels(store_of(args), args.out, kinds=kinds, run=args.run, force=args.force)
    print(f"wrote {n:,} labels to {'stdout' if is_stdout(args.out) else args.out}", file=sys.stderr)
    return OK


def cmd_labels_import(args) -> int:
    """Merge a label file into the store: one transaction, nothing written on a bad line."""
    from workbench.data.labels import import_labels

    r = import_labels(store_of(args), args.file, replace=args.replace)
    print(f"{args.file}: {r.lines:,} labels · {r.added:,} added, {r.changed:,} changed, {r.unchanged:,} "
          f"already stored", file=sys.stderr)
    return OK


LABELS_EPILOG = """\
one JSON object a line, e.g.
  {"kind": "claim", "run": "demo", "sample_id": "q12", "cell_id": "k5-b128-linear", "claim": 2,
   "text": "…", "label": true, "annotator": "ana", "via": "uniform", "labelled_at": "…"}
  {"kind": "dedup_pair", "run": "films-dedup", "a": "J. Ford", "b": "John Ford", "label": true, …}
  {"kind": "answer", "run": "demo", "sample_id": "q12", "cell_id": "k5-b128-linear", "label": false, …}
  {"kind": "relevance", "dataset": "hc", "sample_id": "filename:zh:…", "chunk_id": "…#2", "label": true, …}
label: true = supported by a shown unit / the same entity / a correct answer / a relevant chunk. via: how the item
was chosen (uniform, disagreement, browse; default import): only uniform labels feed the
prediction-powered estimates. An import is one transaction: a bad line (named FILE:LINE) writes
nothing, and re-importing the same labels changes nothing."""


def register(subparsers, parents: SharedParents) -> None:
    """Add ``judge report|queue|labels`` to the CLI."""
    p = subparsers.add_parser("judge", parents=[parents.db],
                              help="trust the judges: agreement with human labels, corrected estimates")
    psub = p.add_subparsers(dest="judge_verb", metavar="VERB", required=True)

    def population_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("kind", choices=KINDS, help="what was judged: claims (verifiers), dedup (modes), "
                                                   "answers (the scorer), relevance (of retrieved chunks)")
        q.add_argument("run", nargs="?", help="run name (a dedup run's for dedup, a dataset's for relevance; "
                                              "default: the latest)")
        q.add_argument("--claim-run", type=int, help="claims: the claim run id (default: the latest)")
        q.add_argument("--threshold", type=float, default=0.5,
                       help="dedup: a mode merges a pair it calls the same at this confidence (default 0.5)")
        q.add_argument("--retriever", help="relevance: only the pairs judged of this retriever's results "
                                           "(default: every retriever's)")

    q = psub.add_parser("report", parents=[parents.db], epilog=REPORT_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        help="each judge against the human labels: confusion, κ, rates; naive vs PPI estimates")
    population_args(q)
    add_bootstrap(q)
    add_json(q)
    q.set_defaults(func=cmd_judge_report, readonly=True)

    q = psub.add_parser("queue", parents=[parents.db], help="the next items to label, in the queue's order")
    population_args(q)
    q.add_argument("--order", choices=("uniform", "disagreement"), default="uniform",
                   help="uniform random (default; unbiased estimates) or where the judges disagree")
    q.add_argument("--annotator", help="whose labels to skip (default: $WORKBENCH_ANNOTATOR or the login name)")
    q.add_argument("--limit", type=int, default=10, help="items to list (default 10)")
    q.add_argument("--seed", type=int, default=0,
                   help="the uniform order's seed (default 0: every annotator sees the same order)")
    add_json(q)
    q.set_defaults(func=cmd_judge_queue, readonly=True)

    q = psub.add_parser("labels", parents=[parents.db], help="human labels: export and import as JSON Lines")
    lsub = q.add_subparsers(dest="labels_verb", metavar="ACTION", required=True)
    e = lsub.add_parser("export", parents=[parents.db], epilog=LABELS_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter, help="write labels as JSON Lines")
    add_out(e, "the JSONL file to write, or - for stdout")
    e.add_argument("--kind", choices=("claim", "dedup_pair", "answer", "relevance"), help="only this kind of label")
    e.add_argument("--run", help="only the labels of this run (or dedup run, or dataset: its relevance labels)")
    e.set_defaults(func=cmd_labels_export, readonly=True)
    i = lsub.add_parser("import", parents=[parents.db], epilog=LABELS_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        help="merge a label file (one transaction; re-importing is a no-op)")
    i.add_argument("file", help="the JSONL file to read")
    i.add_argument("--replace", action="store_true",
                   help="where an annotator's stored label differs from the file's, the file wins "
                        "(default: refuse, naming the line)")
    i.set_defaults(func=cmd_labels_import)
