"""What a docs page's code block holds, in the page's source: commands and program output, never prose,
and no line wider than a page shows (scripts/console_layout.py's PAGE_WIDTH, what fits a 1280 px window;
tests/test_docs_site.py measures the built site in Chromium).

Prose in a code block does not wrap: a reader scrolls sideways for each sentence, and it reads as
something to type. Descriptions belong in paragraphs, lists or tables.
"""

from __future__ import annotations

import re

from conftest import REPO, load_script

console_layout = load_script("console_layout")
PAGE_WIDTH = console_layout.PAGE_WIDTH
PAGES = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^`\s]*)")


def fenced_blocks(markdown: str) -> list[tuple[int, str, list[str]]]:
    """Each fenced code block of ``markdown``: (the line of its opening fence, its language, its lines)."""
    blocks, opened = [], None
    for number, line in enumerate(markdown.splitlines(), 1):
        fence = _FENCE.match(line)
        if opened is None:
            if fence:
                opened = (number, fence.group(1), fence.group(2), [])
        elif line.strip().startswith(opened[1]) and not line.strip().strip(opened[1][0]):
            blocks.append((opened[0], opened[2], opened[3]))
            opened = None
        else:
            opened[3].append(line)
    return blocks


# A line a reader types (a prompt, a program, a variable set) or a program's message starts so; words to read do not.
_COMMAND = re.compile(r"^(?:\$ |> |# |\.venv/|(?:workbench|just|pip|python3?|duckdb|git|cd|export|sudo|apt-get)(?:\s|$)"
                      r"|[A-Z][A-Z0-9_]*=|(?:error|warning|note|usage): )")
_WORD = re.compile(r"[(\"'`]*[A-Za-z][A-Za-z'’-]*[)\"'`.,;:!?]*")


# A name and what it is, aligned: "  store/     db.py: opening a database; …". What follows the name is read.
_NAMED = re.compile(r"^\S+(?: \S+)*? {2,}(?=\S)")


def reads_as_a_sentence(line: str) -> bool:
    """Six words or more, mostly plain words, single-spaced (a table or an aligned listing has wider gaps),
    after the name a line may start with."""
    text = _NAMED.sub("", line.strip(), count=1)
    words = text.split(" ")
    return "  " not in text and len(words) >= 6 and sum(bool(_WORD.fullmatch(w)) for w in words) >= 0.7 * len(words)


def is_prose(language: str, lines: list[str]) -> bool:
    """Whether a code block is prose: no language, no command, and half its lines or more read as sentences."""
    lines = [line.strip() for line in lines if line.strip()]
    if language not in ("", "text") or not lines or any(_COMMAND.match(line) for line in lines):
        return False
    return 2 * sum(map(reads_as_a_sentence, lines)) >= len(lines)


def test_prose_in_a_code_block_is_told_from_commands_and_output():
    # What docs/layout.md was: a description of the folders, in a code block.
    layout = ["workbench/   store/ (SQLite, migrations runner, lookup: NotFound and named_or_latest, queries, lease),",
              "             data/ (import, corpus, export, predictions, labels),",
              "             evidence/ (units, stored, linearize, tokenizers, window), metrics/ (stats: every bootstrap",
              "             and interval; scoring, ledger, oracle, ir, agreement: κ, ppi), passes/ (plan-or-find, the",
              "docs/        the documentation site (mkdocs.yml; `just docs` builds it into site/): a page per task,"]
    assert is_prose("", layout)
    # What docs/design.md's code layout was: a tree whose names each had a paragraph beside them.
    tree = ["workbench/            the package (importable without Textual)",
            "  store/              db.py: opening a database; caches.py: the BM25 index cache beside it; schema.py:",
            "                      numbered migrations, applied once, and the schema status; faults.py: a file that",
            "                      cannot serve and the one line that says so; lookup.py: NotFound and",
            "  evidence/           units (and stored.py: a dataset's units from the store), linearization,",
            "                      tokenizers, the token-budget window",
            "  triage.py           tags and notes",
            "  metrics/            answer scoring, the ledger, oracle controls, IR metrics, agreement and"]
    assert is_prose("", tree)
    assert not is_prose("", ["workbench/", "  store/  data/  evidence/", "  cli/  tui/", "tests/"])   # names only
    assert not is_prose("", ["  jobs            72", "  unique prompts  25 after dedup", "  to generate     25"])
    assert not is_prose("", ["pip install rust-just && just demo", "just test"])
    assert not is_prose("console", ["$ workbench ledger recorded", "run recorded · dataset metaqa · score acc"])
    assert not is_prose("", ["workbench ledger                 # where the score went, per cell, with 95% CIs"])
    assert not is_prose("", ["K  B   format  n  S_set  S_vis", "1  64  linear  3  1.000  1.000"])
    assert not is_prose("", ["note: the BM25 index is damaged (a symbolic link, not a regular file); rebuilding it"])
    assert not is_prose("python", ["import workbench.analysis as wa", "# the events of a run, as a data frame"])


def test_no_code_block_holds_prose():
    found = {f"{page.name}:{line}": lines[0].strip()[:60] for page in PAGES
             for line, language, lines in fenced_blocks(page.read_text(encoding="utf-8")) if is_prose(language, lines)}
    assert not found, f"code blocks of prose (write them as paragraphs, lists or tables): {found}"


def test_no_code_block_line_is_wider_than_a_page():
    """The sources, with their lines: README.md (not part of the site) and every page's fenced blocks."""
    found = {f"{page.name}:{start + offset}": console_layout.columns(text) for page in PAGES
             for start, _, lines in fenced_blocks(page.read_text(encoding="utf-8"))
             for offset, text in enumerate(lines, 1) if console_layout.columns(text) > PAGE_WIDTH}
    assert not found, f"code lines wider than {PAGE_WIDTH} columns (page:line: columns): {found}"
