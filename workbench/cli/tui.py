"""The ``tui`` verb (also ``workbench`` with no verb): the terminal UI."""

from __future__ import annotations

from workbench.cli.common import SharedParents
from workbench.cli.exit_codes import OK


def cmd_tui(args) -> int:
    """Open the terminal UI on ``--db``."""
    # The only place the CLI reaches into workbench.tui (and so Textual): every other verb runs without it.
    from workbench.tui.app import run_tui

    run_tui(args.db)
    return OK


def register(subparsers, parents: SharedParents) -> None:
    """Add ``tui`` to the CLI."""
    p = subparsers.add_parser("tui", parents=[parents.db], help="the terminal UI (also: `workbench` with no verb)")
    p.set_defaults(func=cmd_tui)
