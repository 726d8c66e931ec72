"""Write the TUI's key reference (docs/keys.md) from the screens' own bindings, so it cannot drift.

    .venv/bin/python scripts/tui_keys.py            # rewrite docs/keys.md
    .venv/bin/python scripts/tui_keys.py --check    # exit 1 if docs/keys.md is stale

The table is what the app's `?` screen shows (``workbench.tui.help.help_sections``): every
binding of every screen, with the widget and dialog keys the help adds.
tests/test_tui_keys.py checks that the file is current.
"""

from __future__ import annotations

import sys
from pathlib import Path

from generated_doc import write_or_check
from workbench.tui.app import WorkbenchApp
from workbench.tui.help import help_sections

OUT = Path(__file__).resolve().parents[1] / "docs" / "keys.md"


def cell(text: str) -> str:
    """``text`` fit for a Markdown table cell."""
    return text.replace("|", "\\|")


def render() -> str:
    """docs/keys.md as the bindings give it now."""
    lines = ["# Every key of every screen", "",
             "Generated from the screens' bindings by `scripts/tui_keys.py` (a test fails when it is stale);",
             "the app shows the same list on `?`. [The TUI](tui.md) says what each screen is for.", ""]
    for title, items in help_sections(WorkbenchApp):
        lines += [f"## {title}", "", "| key | what it does |", "| --- | --- |"]
        lines += [f"| `{cell(key)}` | {cell(what)} |" for key, what in items]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return write_or_check(OUT, render(), "tui_keys.py", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
