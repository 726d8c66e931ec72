"""Verbs for a bring-your-own generator: export the exact prompts of a run, import the
predictions made for them."""

from __future__ import annotations

import io
import sys

from workbench.cli.common import SharedParents, add_out
from workbench.cli.exit_codes import OK
from workbench.cli.shared import store_of, write_out


def cmd_prompts_export(args) -> int:
    """Write the exact prompt of every (sample, cell) of a run as JSONL."""
    from workbench.data.outfile import is_stdout
    from workbench.data.predictions import export_prompts
    from workbench.store.queries import get_run

    store = store_of(args)
    run = get_run(store, args.run)
    buf = io.StringIO()
    count = export_prompts(store, run, buf)
    write_out(args.out, buf.getvalue(), f"{count:,} prompts of run {run.name}", force=args.force)
    if is_stdout(args.out):
        print(f"{count:,} prompts", file=sys.stderr)
    return OK


def cmd_predictions_import(args) -> int:
    """Read predictions JSONL into a run and score them."""
    from workbench.data.predictions import import_predictions
    from workbench.store.queries import get_run

    store = store_of(args)
    run = get_run(store, args.run)
    report = import_predictions(store, run, args.file, replace=args.replace)
    if report.overwritten:
        print(f"replaced {report.overwritten:,} earlier predictions of run {run.name}"
              + (f"; {report.claims_reset:,} claim results verified on them deleted (their claim jobs are "
                 "pending again: rerun claims to redo them)" if report.claims_reset else ""), file=sys.stderr)
    print(f"run {run.name}: {report.read:,} predictions read, {report.scored:,} scored ({report.score}), "
          f"{report.unchanged:,} unchanged")
    return OK


def register(subparsers, parents: SharedParents) -> None:
    """Add ``prompts export`` and ``predictions import`` to the CLI."""
    p = subparsers.add_parser("prompts", parents=[parents.db], help="bring-your-own generator: export prompts")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("export", parents=[parents.db],
                        help="write the exact prompt of every (sample, cell) as JSONL")
    q.add_argument("run", nargs="?", help="run name (default: the most recent)")
    add_out(q, "JSONL file to write, or - for stdout")
    q.set_defaults(func=cmd_prompts_export, readonly=True)

    p = subparsers.add_parser("predictions", parents=[parents.db], help="bring-your-own generator: import predictions")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("import", parents=[parents.db], help='read {"sample_id","cell_id","prediction"} JSONL')
    q.add_argument("file", help="predictions JSONL")
    q.add_argument("run", nargs="?", help="run name (default: the most recent)")
    q.add_argument("--replace", action="store_true",
                   help="overwrite predictions that differ (claim results verified on them are deleted)")
    q.set_defaults(func=cmd_predictions_import)
