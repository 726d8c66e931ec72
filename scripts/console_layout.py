"""How a program's output is laid out in a page's code block: no line wider than :data:`PAGE_WIDTH`.

The site's code blocks show :data:`PAGE_WIDTH` columns without scrolling sideways in a 1280 px window
(docs/assets/stylesheets/site.css; tests/test_docs_site.py measures it in Chromium and holds every code
line of every page to it). A program's output is wider in three ways, each laid out as a narrow terminal
user would read it, with every word and figure kept:

- a line of prose (no run of two spaces after its indentation) is folded at spaces into lines of about
  :data:`WRAP`, the later ones indented two more spaces;
- a labelled line (``  dataset     metaqa (import sha256 …)``: a label, a gap of two spaces or more,
  a value of prose) has its value folded, the later lines starting under the value;
- a table (a header, a rule of dashes per column, rows) is shown in groups of columns one under the
  other, each group repeating the table's leading label columns (K, B, format: what names a row), as
  pandas and R print a frame too wide for the screen (``workbench.tables.split_tables``: the CLI's own
  rule for a terminal narrower than its table).

Widths are terminal columns (a CJK character is two), as the page shows them. A figure that differs by
machine (a timing, a masked number) may then move a line break: :func:`unfold` joins the folded lines
again, and scripts/docs_examples.py compares a page with a program's output unfolded, so a break is never
a difference. A table's groups follow its printed widths, which a masked figure may change: no masked example
shows a table wide enough to be split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from workbench.tables import columns, split_tables

# The widest code line a page shows: what fits the content column of a 1280 px window (site.css).
PAGE_WIDTH = 100
# A line of prose wider than PAGE_WIDTH is folded into lines of about WRAP: a paragraph's measure.
WRAP = 80
ELISION = "…"
# A label and its value: "  planned on  vm: AMD EPYC, …" (a label of words, then two spaces or more).
_LABELLED = re.compile(r"^(\S+(?: \S+)*? {2,})(\S.*)$")


def _prefixes(line: str) -> tuple[str, str, str] | None:
    """``line`` as (its first line's prefix, a later line's prefix, the words to fold), or None if it is no prose."""
    body = line.lstrip(" ")
    indent = line[:len(line) - len(body)]
    if "  " not in body:
        return indent, indent + "  ", body
    labelled = _LABELLED.match(body)
    if labelled and "  " not in labelled.group(2):
        head = indent + labelled.group(1)
        return head, " " * columns(head), labelled.group(2)
    return None


def fold(line: str) -> list[str]:
    """``line`` as a page shows it: whole, or, when it is prose wider than :data:`PAGE_WIDTH`, folded at spaces.

    Prose is a line with no run of two spaces after its indentation, or the value of a labelled line (a
    table row has runs of spaces between its columns and is never folded). It is folded into the fewest
    lines of about :data:`WRAP`, of even length (no short last word alone).
    """
    prefixes = _prefixes(line)
    if prefixes is None or columns(line) <= PAGE_WIDTH:
        return [line]
    first, later, body = prefixes
    words = body.split(" ")
    count = -(-columns(line) // WRAP)  # the fewest lines of WRAP: filled evenly, the narrowest width that fits
    for limit in range(-(-columns(line) // count) + 2, WRAP + 20):
        folded = _greedy(words, first, later, limit)
        if len(folded) <= count:
            break
    return folded


def _greedy(words: list[str], first: str, later: str, limit: int) -> list[str]:
    """``words`` on lines of at most ``limit`` columns, after ``first``, then ``later``."""
    folded, current, width = [], [], columns(first)
    for word in words:
        if current and width + 1 + columns(word) > limit:
            folded.append((later if folded else first) + " ".join(current))
            current, width = [], columns(later)
        width += columns(word) + (1 if current else 0)
        current.append(word)
    folded.append((later if folded else first) + " ".join(current))
    return folded


def continuation_indent(line: str) -> int | None:
    """The indentation of the lines :func:`fold` continues ``line`` on (None: it never folds ``line``)."""
    prefixes = _prefixes(line)
    return None if prefixes is None else columns(prefixes[1])


def unfold(lines: Sequence[str]) -> list[str]:
    """``lines`` with each line that continues a line of prose (indented as :func:`fold` does) joined to it."""
    out: list[str] = []
    for line in lines:
        # Never onto a blank line or an elision ("…": any lines, scripts/docs_examples.py).
        joins = out and out[-1].strip() not in ("", ELISION) and line.strip()
        if joins and len(line) - len(line.lstrip(" ")) == continuation_indent(out[-1]):
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return out


def layout(lines: Sequence[str]) -> list[str]:
    """A program's output as a page shows it: wide tables in groups of columns, long prose folded."""
    return [part for line in split_tables(lines, PAGE_WIDTH) for part in fold(line)]
