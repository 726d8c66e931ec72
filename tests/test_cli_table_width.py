"""The CLI's tables fit the terminal: wider than it, a table is printed in groups of columns.

`workbench ledger` printed its reasoning table 145 columns wide whatever the terminal (`COLUMNS=80` too), so
every row wrapped onto a second line. A table wider than the terminal now comes in groups of columns, each
repeating the columns that name a row (K, B, format, n), as pandas and R print a wide frame; into a pipe or a
file, with no COLUMNS set, it stays one grid for the program reading it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tuikit import answered_run
from workbench.tables import column_groups, columns, fit_tables, table

TERMS = ("S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak")


@pytest.fixture
def answered_db(swept_db):
    """MetaQA with a finished one-cell run ``answered``: its ledger has the reasoning table, six terms wide."""
    answered_run(swept_db, "answered")
    return swept_db


def ledger(db, columns: int | None) -> str:
    # No COLUMNS in the environment (tests/conftest.py drops it): None prints as into a pipe.
    env = os.environ if columns is None else {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run([sys.executable, "-m", "workbench.cli", "--db", str(db), "ledger", "answered"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def reasoning(text: str) -> list[str]:
    """The lines of the reasoning table, from its title to the next blank line after its last group."""
    lines = text.splitlines()
    start = lines.index("Reasoning, dissipation and leakage") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip() and
                (i + 1 == len(lines) or not lines[i + 1].startswith("K "))), len(lines))
    return lines[start:end]


# At 120 columns the labels' third of the width would also hold S_llm, whose figures are all as wide as its
# column: only its right-aligned header tells it is no label (it was repeated in every group).
@pytest.mark.parametrize("width", [80, 120])
def test_a_narrow_terminal_gets_the_reasoning_table_in_groups_each_named_by_its_row_labels(answered_db, width):
    whole, fitted = reasoning(ledger(answered_db, None)), reasoning(ledger(answered_db, width))
    assert max(map(len, whole)) > width and all(term in whole[0] for term in TERMS)    # one grid: the case
    assert max(map(len, fitted)) <= width
    groups = "\n".join(fitted).split("\n\n")
    assert len(groups) == 2
    heads = [group.splitlines()[0].split() for group in groups]
    assert all(head[:4] == ["K", "B", "format", "n"] for head in heads)
    assert [t for head in heads for t in head[4:]] == list(TERMS)                   # each term once, in order
    # Each row keeps its labels and every figure: the groups' rows side by side are the grid's row.
    row = whole[2].split()
    assert groups[0].splitlines()[2].split() + groups[1].splitlines()[2].split()[4:] == row


def test_into_a_pipe_or_at_a_width_it_fits_a_table_is_printed_as_one_grid(answered_db):
    whole = ledger(answered_db, None)
    assert ledger(answered_db, 400) == whole
    assert "\n\nK " not in "\n".join(reasoning(whole))


def test_the_groups_are_the_fewest_that_fit_and_of_even_widths():
    # Four columns of 20 after 10 of labels, at 60: two groups of two (not three, then one).
    assert column_groups(10, [20, 20, 20, 20], 60) == [[0, 1], [2, 3]]
    assert column_groups(10, [20, 20, 20, 20], 100) == [[0, 1, 2, 3]]
    # A column wider than the room left stands alone rather than being cut.
    assert column_groups(10, [20, 90, 20], 60) == [[0], [1], [2]]


def test_a_chinese_name_counts_two_columns_a_character_in_the_grid_and_in_its_groups():
    grid = table(["菜谱", "", "", "faithful", "halluc"], [["番茄炒蛋", "", "", "0.500 [0.100,0.900]", "—"]])
    lines = grid.splitlines()
    assert [columns(line) for line in lines] == [41, 41, 41]        # aligned as a terminal draws it
    assert [len(line) for line in lines] != [41, 41, 41]
    assert fit_tables(grid, 41) == grid
    first, second = (group.splitlines() for group in fit_tables(grid, 40).split("\n\n"))
    assert first == ["菜谱                     faithful", "--------      -------------------",
                     "番茄炒蛋      0.500 [0.100,0.900]"]
    assert second == ["菜谱      halluc", "--------  ------", "番茄炒蛋       —"]
