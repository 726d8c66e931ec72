"""The Ledger on the demo's kind of data (tests/tuistates.py): the heading of a run whose answers were imported, the
claims panel at 200 and 80 columns, and a mark that leaves the table as wide as it was.

One app shared by the tests (they only look, mark and unmark: tests/tui_shared_a.py), on a copy of the demo-like
database the contract tests build once per session.
"""

from __future__ import annotations

import sqlite3

import pytest
from rich.text import Text

from conftest import copy_db
from contractroom import whole_in_view
from tui_shared_a import running
from tuikit import SMALL, WIDE, heading, until_loaded, wait_for
from tuistates import few_resamples

# The claim run as `workbench claims run` records its default configuration: the longest names the panel shows.
# (The demo-like run's claims were made with rule + lexical, which need no model; the panel only reads the names.)
DEFAULT_CLAIMS = ("hybrid", ("lexical", "embedding", "llm_judge"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_template):
    db = copy_db(demo_template, tmp_path_factory.mktemp("ledger-demo") / "demo.db")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE claim_runs SET config = json_set(config, '$.decomposer', ?, '$.verifiers', json(?))",
                     (DEFAULT_CLAIMS[0], '["' + '","'.join(DEFAULT_CLAIMS[1]) + '"]'))
        imported = dict(conn.execute(
            "SELECT r.name, count(*) FROM events e JOIN runs r ON r.id = e.run_id"
            " WHERE e.source = 'import' AND e.status = 'done' GROUP BY r.name").fetchall())
    conn.close()
    assert imported.get("recorded"), "the demo-like database has a run of imported answers"
    with pytest.MonkeyPatch.context() as monkeypatch:
        few_resamples(monkeypatch)      # these tests are about the heading and the widths, not the intervals
        for shared in running(db):
            shared.imported = imported
            yield shared


async def ledger_of(pilot, run: str):
    """The Ledger showing ``run`` (m cycles the runs of the dataset, as a user would), its full bootstrap applied."""
    app = pilot.app
    screen = await until_loaded(pilot, "ledger")
    for _ in range(len(screen.view.runs)):
        if screen.view.report.run == run:
            break
        await pilot.press("m")
        await until_loaded(pilot, "ledger")
    assert screen.view.report.run == run, f"m never reached {run}: {screen.view.runs}"
    await wait_for(pilot, lambda: screen.loaded and screen.view.report.resamples == screen.resamples)
    return app.screen


def test_the_heading_of_a_run_of_imported_answers_says_they_were_imported(demo):
    """Not "no model (sweep)": the heading says whose answers the ledger is of, for each kind of run."""

    async def look(pilot):
        app = pilot.app
        await ledger_of(pilot, "recorded")
        assert f"imported answers ({demo.imported['recorded']:,})" in heading(app) and "no model" not in heading(app)
        await ledger_of(pilot, "sweep")
        assert "no model (sweep)" in heading(app) and "imported" not in heading(app)
        screen = await ledger_of(pilot, "demo")
        report = screen.view.report
        assert f"{report.jobs_done:,}/{report.jobs_total:,} jobs" in heading(app)

    demo.walk(look, WIDE)


def claims_heading(side) -> list[str]:
    """The side panel's lines from "Claims" to its first metric, as shown."""
    lines = Text.from_markup(str(side.render())).plain.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Claims"))
    end = next(i for i in range(start + 1, len(lines)) if "[" in lines[i] or "—" in lines[i])
    return lines[start:end]


@pytest.mark.parametrize("size", [WIDE, SMALL], ids=["200x50", "80x24"])
def test_the_claims_heading_fits_the_side_panel_broken_between_names(demo, size):
    """Each line of the heading within the panel (none left to wrap mid-list), every name whole, and at 200
    columns two lines: how many answers, then the decomposer and verifiers."""

    async def look(pilot):
        screen = await ledger_of(pilot, "recorded")
        side = screen.query_one("#side")
        lines = claims_heading(side)
        assert all(len(line) <= side.size.width for line in lines), (side.size.width, lines)
        words = " ".join(lines).replace(",", " ").split()
        assert {DEFAULT_CLAIMS[0], *DEFAULT_CLAIMS[1]} <= set(words), lines
        assert "answers" in lines[0]
        if size == WIDE:
            assert len(lines) == 2, lines

    demo.walk(look, size)


def test_a_cleared_mark_gives_the_k_column_its_width_back(demo):
    """At 80×24: ● on the K = 20 row widens K; cleared, every column is as wide and as whole in view as before
    (the K column kept "● 20"'s width and the heading read "D_rat")."""

    async def look(pilot):
        screen = await ledger_of(pilot, "demo")
        table = screen.query_one("#ledger")
        widths = [c.get_render_width(table) for c in table.ordered_columns]
        whole = whole_in_view(table)
        row = next(i for i in range(table.row_count) if str(table.get_cell_at((i, 0))) == "20")
        table.move_cursor(row=row)
        await pilot.press("space")
        await wait_for(pilot, lambda: str(table.get_cell_at((row, 0))) == "● 20")
        assert table.ordered_columns[0].get_render_width(table) > widths[0], "the mark widens K while it shows"
        await pilot.press("space")
        await wait_for(pilot, lambda: str(table.get_cell_at((row, 0))) == "20")
        await pilot.pause()
        assert [c.get_render_width(table) for c in table.ordered_columns] == widths
        assert whole_in_view(table) == whole

    demo.walk(look, SMALL)
