"""Writing a generated docs page, or checking that it is current: the seam of every reference generator."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(out: Path, text: str, script: str, argv: list[str]) -> int:
    """Write ``text`` to ``out``; with ``--check`` in ``argv``, exit status 1 if ``out`` differs (naming ``script``)."""
    if "--check" in argv:
        if not out.is_file() or out.read_text(encoding="utf-8") != text:
            print(f"{out} is stale: run `python scripts/{script}`", file=sys.stderr)
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({len(text.splitlines()):,} lines)")
    return 0
