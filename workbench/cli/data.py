"""Verbs for datasets: import a dataset directory (or another tool's results), list datasets."""

from __future__ import annotations

import sys
from dataclasses import asdict

from workbench.cli.common import SCORES, SharedParents, add_json
from workbench.cli.exit_codes import OK
from workbench.cli.shared import emit_json, list_rows, say_dataset_replaced, store_of
from workbench.cli.types import chosen_name, name_or_path


def cmd_import(args) -> int:
    """Import a directory of kb/samples/retrieval JSONL as a dataset, or another tool's results (--from)."""
    from workbench.data.importer import import_dataset

    if args.source_format == "ragchecker-meta":
        return _import_meta(args)
    if args.baselines is not None:
        from workbench.errors import BadInput

        raise BadInput("--baselines goes with --from ragchecker-meta (the scores of its response pairs)")
    if args.source_format == "ragchecker":
        return _import_ragchecker(args)
    if args.score is not None:
        from workbench.errors import BadInput

        raise BadInput("--score goes with --from ragchecker (a dataset directory holds no predictions)")
    store = store_of(args)
    dataset = name_or_path(args.name, args.directory, "dataset")
    report = import_dataset(store, args.directory, dataset, strict=args.strict, replace=args.replace)
    verb = _say_import(args, report)
    if verb is None:
        return OK
    print(f"{report.dataset}: {verb}: {report.units:,} {report.unit_kind}s, {report.samples:,} samples, "
          f"{report.retrievals:,} retrieval rows ({', '.join(report.retrievers) or 'no retriever'})"
          f"{f', {report.unknown_units:,} units outside the KB' if report.unknown_units else ''}")
    return OK


def _say_import(args, report) -> str | None:
    """What every import says first: a ``--replace``'s deletions, then the JSON (None: done) or the warnings and its verb."""
    say_dataset_replaced(report)
    if args.json:
        emit_json(asdict(report))
        return None
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return "unchanged (already imported)" if report.unchanged else "imported"


def _import_ragchecker(args) -> int:
    """``import --from ragchecker FILE``: a dataset of the retrieved contexts and a run of the responses."""
    from workbench.data.ragchecker import DEFAULT_SCORE, import_ragchecker

    if args.strict:
        from workbench.errors import BadInput

        raise BadInput("--strict is about a dataset directory's kb.jsonl; RAGChecker's JSON has no KB")
    store = store_of(args)
    name = name_or_path(args.name, args.directory, "dataset", stem=True)
    report = import_ragchecker(store, args.directory, name, score=args.score or DEFAULT_SCORE, replace=args.replace)
    verb = _say_import(args, report)
    if verb is None:
        return OK
    print(f"{report.dataset}: {verb}: {report.units:,} chunks (the distinct retrieved contexts), "
          f"{report.samples:,} samples, {report.retrievals:,} retrieval rows ({', '.join(report.retrievers)})")
    print(f"run {report.run}: 1 cell k{report.k}-b{report.budget}-score (K = the most contexts of a query, "
          f"B = the longest evidence, nothing cut), {report.scored:,} of {report.events:,} responses "
          f"scored ({report.score})")
    if report.claim_run is not None:
        print(f"claim run {report.claim_run}: RAGChecker's claims and checks of {report.checked:,} responses kept "
              f"(decomposer import, verifier ragchecker)")
        if report.file_figures:
            agree = report.file_figures - len(report.figure_mismatches)
            print(f"the file's own figures: {agree:,} of {report.file_figures:,} equal those its labels give"
                  + ("" if not report.figure_mismatches else " (differences on stderr)"))
        for line in report.figure_mismatches:
            print(f"warning: {line}", file=sys.stderr)
        print(f"next: workbench claims report {report.run}; or check it yourself: workbench claims run {report.run}"
              f" --decomposer llm --verifiers nli")
        return OK
    print(f"next: workbench claims run {report.run} --decomposer rule --verifiers lexical;"
          f" workbench claims report {report.run}; workbench ledger {report.run}")
    return OK


def _import_meta(args) -> int:
    """``import --from ragchecker-meta HUMAN.json [--baselines FILE ...] --name NAME``: a meta set."""
    from workbench.data.meta_import import import_meta
    from workbench.errors import BadInput

    for flag, given, why in (("--score", args.score is not None, "its responses are scored with cover"),
                             ("--strict", args.strict, "it has no KB")):
        if given:
            raise BadInput(f"{flag} does not go with --from ragchecker-meta ({why})")
    if args.name is None:
        raise BadInput("--from ragchecker-meta needs --name NAME: the meta set, its dataset and its runs "
                       "NAME.model1 and NAME.model2 are named by it")
    store = store_of(args)
    report = import_meta(store, args.directory, args.name, baselines=args.baselines or (), replace=args.replace)
    verb = _say_import(args, report)
    if verb is None:
        return OK
    counts = sorted(report.annotators)
    annotators = " to ".join(str(n) for n in dict.fromkeys((counts[0], counts[-1]))) if counts else "0"
    print(f"{report.dataset}: {verb}: {report.samples:,} instances (queries with a reference answer and two "
          f"responses), {annotators} annotators per instance, {report.labels:,} labels "
          f"({report.annotations:,} annotations × correctness, completeness, overall), "
          f"{len(report.systems):,} systems")
    print(f"runs {' and '.join(report.runs)}: the responses of each side, {report.events // 2:,} events each, "
          f"{report.scored:,} of {report.events:,} scored ({report.score}) against the reference answer")
    for b in report.baselines:
        scorers = "; ".join(f"{evaluator} ({', '.join(metrics)})" for evaluator, metrics in b.scorers.items())
        undefined = f", {b.undefined:,} undefined" if b.undefined else ""
        print(f"baseline {b.file}: {scorers}: {b.instances:,} instances scored{undefined}")
    if not report.baselines:
        print("no baselines (--baselines FILE ...: RAGChecker's baseline_*.json, to compare with)")
    print(f"next: workbench meta run {report.dataset}; workbench meta report {report.dataset}")
    return OK


def cmd_datasets(args) -> int:
    """List the datasets with their stats."""
    from workbench.store.queries import list_datasets

    return list_rows(list_datasets(store_of(args)), as_json=args.json,
                     empty="no datasets yet: `workbench import DIR --name NAME`",
                     line=lambda r: f"{r['name']}: {r['units']:,} {r['unit_kind']}s ({r['units_outside_kb']:,} "
                                    f"outside KB), {r['samples']:,} samples, retrievers: "
                                    f"{', '.join(r['retrievers']) or '—'}")


def register(subparsers, parents: SharedParents) -> None:
    """Add ``import`` and ``datasets`` to the CLI."""
    p = subparsers.add_parser("import", parents=[parents.db],
                              help="import a dataset directory (kb/samples/retrieval.jsonl), or RAGChecker's JSON")
    p.add_argument("directory", metavar="PATH",
                   help="directory holding kb.jsonl, samples.jsonl and retrieval.jsonl; with --from ragchecker, "
                        "RAGChecker's input JSON file; with --from ragchecker-meta, its human_labeled_data.json")
    p.add_argument("--from", dest="source_format", choices=("dataset", "ragchecker", "ragchecker-meta"),
                   default="dataset",
                   help="what PATH holds: a dataset directory (default); RAGChecker's {\"results\": [...]}, "
                        "imported as a dataset of its retrieved contexts plus a run of the same name holding "
                        "its responses; or RAGChecker's human preference labels (ragchecker-meta), imported as "
                        "the meta set NAME: a dataset of its queries, runs NAME.model1 and NAME.model2 holding "
                        "the two responses of each, and the annotators' labels (see `workbench meta`)")
    p.add_argument("--name", type=chosen_name,
                   help="dataset name (default: the directory name; the file name without extension with "
                        "--from ragchecker; required with --from ragchecker-meta)")
    p.add_argument("--baselines", nargs="+", metavar="FILE",
                   help="with --from ragchecker-meta: baseline files scoring the same response pairs "
                        "(RAGChecker's baseline_*.json: model1.EVALUATOR.METRIC), to compare with the people")
    p.add_argument("--score", choices=SCORES,
                   help="with --from ragchecker: how a response is scored against gt_answer (default: cover)")
    p.add_argument("--strict", action="store_true", help="reject gold/retrieved triples missing from kb.jsonl")
    p.add_argument("--replace", action="store_true",
                   help="replace a dataset of that name holding other content (its runs are deleted with it)")
    add_json(p)
    p.set_defaults(func=cmd_import)

    p = subparsers.add_parser("datasets", parents=[parents.db], help="list datasets with their stats")
    add_json(p)
    p.set_defaults(func=cmd_datasets, readonly=True)
