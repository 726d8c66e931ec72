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
  pandas and R print a frame too wide for the screen.

Widths are terminal columns (a CJK character is two), as the page shows them. A figure that differs by
machine (a timing, a masked number) may then move a line break: :func:`unfold` joins the folded lines
again, and scripts/docs_examples.py compares a page with a program's output unfolded, so a break is never
a difference. A table's groups follow its printed widths, which a masked figure may change: no masked example
shows a table wide enough to be split.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

# The widest code line a page shows: what fits the content column of a 1280 px window (site.css).
PAGE_WIDTH = 100
# A line of prose wider than PAGE_WIDTH is folded into lines of about WRAP: a paragraph's measure.
WRAP = 80
ELISION = "…"
# A label and its value: "  planned on  vm: AMD EPYC, …" (a label of words, then two spaces or more).
_LABELLED = re.compile(r"^(\S+(?: \S+)*? {2,})(\S.*)$")
# The rule under a table's header: a run of dashes per column, two spaces or more between them.
_RULE = re.compile(r"^ *-+(?: {2,}-+)+ *$")


def columns(text: str) -> int:
    """How many terminal columns ``text`` takes: a wide (CJK) character two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


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


def _is_row(line: str, spans: list[tuple[int, int]]) -> bool:
    """Whether ``line`` is a row of the table whose columns are ``spans``: blank between them, past the first."""
    return len(line.rstrip()) > spans[0][1] and all(
        not line[end:start].strip() for (_, end), (start, _) in zip(spans, spans[1:]))


def _label_columns(rows: Sequence[str], spans: list[tuple[int, int]]) -> int:
    """How many leading columns name a row: left-aligned in every row (as a table's labels are), at least one."""
    count, width = 0, 0
    for start, end in spans[:-1]:
        cells = [row[start:end] for row in rows]
        width += end - start + 2
        if count and (width > PAGE_WIDTH // 3 or any(cell.strip() and cell[0] == " " for cell in cells)):
            break
        count += 1
    return count


def _groups(spans: list[tuple[int, int]], key: int) -> list[list[int]]:
    """The other columns in the fewest groups that fit :data:`PAGE_WIDTH` beside the key's, of even widths."""
    keyed = spans[key - 1][1]
    widths = [end - previous for (_, previous), (_, end) in zip(spans[key - 1:], spans[key:])]

    def grouped(limit: int) -> list[list[int]]:
        groups, width = [[]], keyed
        for column, added in enumerate(widths, key):
            if groups[-1] and width + added > limit:
                groups.append([])
                width = keyed
            groups[-1].append(column)
            width += added
        return groups

    widest = grouped(PAGE_WIDTH)
    return next((g for limit in range(keyed + -(-sum(widths) // len(widest)), PAGE_WIDTH)
                 if len(g := grouped(limit)) <= len(widest)), widest)


def _split(table: list[str], spans: list[tuple[int, int]]) -> list[str]:
    """A table (its header, rule and rows) as groups of columns, each after the key columns, a blank line between."""
    key = _label_columns(table[2:], spans)
    out: list[str] = []
    for group in _groups(spans, key):
        if out:
            out.append("")
        chosen = [*range(key), *group]
        # Each column with the gap before it as the table had it.
        out += ["".join(line[(spans[c - 1][1] if c else 0):spans[c][1]] for c in chosen).rstrip() for line in table]
    return out


def split_tables(lines: Sequence[str]) -> list[str]:
    """``lines`` with every table wider than :data:`PAGE_WIDTH` shown in groups of columns (see the module)."""
    out: list[str] = []
    at = 0
    while at < len(lines):
        if at + 1 < len(lines) and lines[at].strip() and _RULE.match(lines[at + 1]):
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[at + 1])]
            end = at + 2
            while end < len(lines) and _is_row(lines[end], spans):
                end += 1
            table = list(lines[at:end])
            out += _split(table, spans) if max(map(columns, table)) > PAGE_WIDTH else table
            at = end
        else:
            out.append(lines[at])
            at += 1
    return out


def layout(lines: Sequence[str]) -> list[str]:
    """A program's output as a page shows it: wide tables in groups of columns, long prose folded."""
    return [part for line in split_tables(lines) for part in fold(line)]
