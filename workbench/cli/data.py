"""Verbs for datasets: import a dataset directory, list datasets."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from workbench.cli.common import SharedParents, add_json
from workbench.cli.exit_codes import OK
from workbench.cli.shared import emit_json, list_rows, say_dataset_replaced, store_of
from workbench.cli.types import chosen_name


def cmd_import(args) -> int:
    """Import a directory of kb/samples/retrieval JSONL as a dataset."""
    from workbench.data.importer import import_dataset

    store = store_of(args)
    dataset = args.name or Path(args.directory).resolve().name
    report = import_dataset(store, args.directory, dataset, strict=args.strict, replace=args.replace)
    say_dataset_replaced(report)
    if args.json:
        emit_json(asdict(report))
        return OK
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    verb = "unchanged (already imported)" if report.unchanged else "imported"
    print(f"{report.dataset}: {verb}: {report.units:,} {report.unit_kind}s, {report.samples:,} samples, "
          f"{report.retrievals:,} retrieval rows ({', '.join(report.retrievers) or 'no retriever'})"
          f"{f', {report.unknown_units:,} units outside the KB' if report.unknown_units else ''}")
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
                              help="import a dataset directory (kb/samples/retrieval.jsonl)")
    p.add_argument("directory", help="directory holding kb.jsonl, samples.jsonl and retrieval.jsonl")
    p.add_argument("--name", type=chosen_name, help="dataset name (default: the directory name)")
    p.add_argument("--strict", action="store_true", help="reject gold/retrieved triples missing from kb.jsonl")
    p.add_argument("--replace", action="store_true",
                   help="replace a dataset of that name holding other content (its runs are deleted with it)")
    add_json(p)
    p.set_defaults(func=cmd_import)

    p = subparsers.add_parser("datasets", parents=[parents.db], help="list datasets with their stats")
    add_json(p)
    p.set_defaults(func=cmd_datasets, readonly=True)
