"""The top-level parser and the entry point: each verb group adds its own verbs.

Handlers import the rest of the workbench when they run: the store alone (sqlite_utils,
pandas) takes about a second to load, and ``workbench --help`` needs none of it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from workbench.cli import (byo, claims, compare, data, dedup, judge, ledger, meta, report, retrieval, runs, searchain,
                           triage, tui)
from workbench.cli.common import shared_parents, top_db_parent
from workbench.cli.exit_codes import OK, failure_of
from workbench.cli.ranges import apply_ranges
from workbench.cli.shared import close_stores
from workbench.dbfiles import expect, unexpect
from workbench.paths import expand_home
from workbench.terminal import EscapingStream

DESCRIPTION = ("Dissipation Workbench: where the score of a retrieval-augmented QA system goes\n"
               "(retrieval, the prompt interface, reasoning). The same verbs as the TUI, for\n"
               "scripts and CI.")
EPILOG = """\
first steps:
  workbench import sample_data/metaqa --name metaqa
  workbench run metaqa --limit 20 --k 1,5,20 --budget 128 --format linear
  workbench ledger                 the dissipation ledger with 95% CIs
  workbench compare RUN_A RUN_B    B against A: paired deltas, p-values, flips by stage
  workbench                        the terminal UI (? lists its keys)

every verb takes --help. Exit codes: 0 success, 1 unexpected failure, 2 bad input or usage
(nothing written). WORKBENCH_DEBUG=1 shows the traceback behind a database error. A table
wider than the terminal (or COLUMNS) is printed in groups of columns, each repeating the
row's labels; into a pipe or a file it stays one grid (--json for programs)."""

# In the order the top-level help lists their verbs.
VERB_GROUPS = (tui, data, runs, ledger, compare, report, retrieval, claims, meta, searchain, dedup, judge, triage, byo)


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree; every verb has ``--help``, every number its range (:mod:`workbench.cli.ranges`)."""
    parser = argparse.ArgumentParser(prog="workbench", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, parents=[top_db_parent()])
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    parents = shared_parents()
    for group in VERB_GROUPS:
        group.register(subparsers, parents)
    apply_ranges(parser)
    _own_errors(parser)
    return parser


def _own_errors(parser: argparse.ArgumentParser) -> None:
    """Each verb's parser remembers itself, so that an error found after parsing names that verb."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(verb_parser=sub)
                _own_errors(sub)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but an unknown argument is reported by the verb it was given to
    (``workbench compare: error: unrecognized arguments: --threads 0``), not by ``workbench``."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        getattr(args, "verb_parser", parser).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``workbench`` script; no verb opens the TUI.

    Everything a verb prints goes through :class:`~workbench.terminal.EscapingStream`: a
    control character from the data (a name, a question, a model's answer) is shown as
    ``\\u001b``, never obeyed by the terminal. The TUI draws on its own (and escapes too).
    """
    out, err = sys.stdout, sys.stderr
    if not isinstance(out, EscapingStream):
        sys.stdout, sys.stderr = EscapingStream(out), EscapingStream(err)
    try:
        return _run(parse(build_parser(), argv))
    finally:
        sys.stdout, sys.stderr = out, err


def _run(args: argparse.Namespace) -> int:
    if args.verb is None:
        args.func = tui.cmd_tui
    try:
        if getattr(args, "db", None) is not None:
            # `--db=~/w.db` reaches us with its tilde (the shell expands only a word's start): the
            # verb, the guards and the messages all see the path it means.
            args.db = expand_home(args.db, "--db")
            # Known as this process's database before the verb opens it: no input or output may be it.
            expect(args.db)
        if getattr(args, "out_target", None) is not None and args.out is not None:
            args.out = expand_home(args.out, "--out")   # only the tilde: `./-` still names a file called -
            # Before any work, so a refused --out costs nothing (the write checks it again). Loaded
            # here, as the handlers load theirs: `workbench --help` needs no store.
            from workbench.data.outfile import check_directory, check_target
            from workbench.store.db import default_db_path

            database = getattr(args, "db", None) or default_db_path()
            if args.out_target == "directory":    # its files are checked by the verb, which knows them
                check_directory(args.out, files=(), database=database)
            else:
                check_target(args.out, force=args.force, database=database)
        return args.func(args)
    except BrokenPipeError:
        return OK
    except Exception as exc:
        failure = failure_of(exc, getattr(args, "db", None))
        if failure is None:
            raise
        code, message = failure
        print(message, file=sys.stderr)
        return code
    finally:
        close_stores(args)
        if getattr(args, "db", None) is not None:
            unexpect(args.db)
