"""Write the TUI's key reference (docs/keys.md) from the screens' own bindings, so it cannot drift.

    .venv/bin/python scripts/tui_keys.py            # rewrite docs/keys.md
    .venv/bin/python scripts/tui_keys.py --check    # exit 1 if docs/keys.md is stale

The table is what the app's `?` screen shows (``workbench.tui.help.help_sections``): every
binding of every screen, with the widget and dialog keys the help adds.
tests/test_tui_keys.py checks that the file is current.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.tui.app import WorkbenchApp
from workbench.tui.help import help_sections

OUT = Path(__file__).resolve().parents[1] / "docs" / "keys.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    """docs/keys.md as the bindings give it now."""
    lines = ["# Every key of every screen", "",
             "Generated from the screens' bindings by `scripts/tui_keys.py` (a test fails when it is stale);",
             "the app shows the same list on `?`. [The TUI](tui.md) says what each screen is for.", ""]
    for title, items in help_sections(WorkbenchApp):
        lines += [f"## {title}", "", "| key | what it does |", "| --- | --- |"]
        lines += [f"| `{_cell(key)}` | {_cell(what)} |" for key, what in items]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write docs/keys.md from the TUI's bindings.")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/keys.md is not what the bindings give")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is stale: run `python scripts/tui_keys.py`", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
