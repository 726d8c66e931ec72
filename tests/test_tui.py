"""The TUI driven by keys through Textual's Pilot, on real SQLite stores.

The flow test runs the real default model on three MetaQA questions: import → start a
run → watch it finish → ledger → dissipation quadrant → tag → ledger without the tagged. It is the
TUI's smoke test of generation: the one test here whose run worker loads and runs llama.cpp.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from textual.app import ScreenStackError

from workbench.store import open_store
from workbench.triage import add_tag
from workbench.tui.app import WorkbenchApp
from workbench.tui.dialogs import ErrorDialog
from workbench.tui.help import HelpScreen

from conftest import SAMPLE_METAQA, copy_db
from tui_shared_a import running
from tui_shared_b import from_palette, import_prompt, typed
from tuikit import (MODEL_PATIENCE, PATIENCE, SIZE, PacedServer, heading, open_runs, plan_served_run, row_at, settle,
                    settled_after, snap_app, until_loaded, wait_for)


@pytest.fixture(scope="module")
def looking(tmp_path_factory, swept_template):
    """One app on a copy of the swept database for the tests that only look and navigate: each walks it made fresh
    (tests/tui_shared_a.py). The one write (a tag, by the quitting test) is one no other test here reads or
    excludes. A test that writes what others would see, or needs another database, starts its own app."""
    yield from running(copy_db(swept_template, tmp_path_factory.mktemp("tui-looking") / "wb.db"))


def test_help_and_every_mode_opens_from_the_keyboard_and_the_command_palette_switches_screens(looking):
    async def walk(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "ledger" and "Ledger" in heading(app))
        for key, mode in (("d", "datasets"), ("r", "runs"), ("s", "samples"), ("l", "ledger")):
            await pilot.press(key)
            await wait_for(pilot, lambda: app.current_mode == mode)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await wait_for(pilot, lambda: app.current_mode == "ledger")
        await from_palette(pilot, "Go to Samples")
        await wait_for(pilot, lambda: app.current_mode == "samples")

    looking.walk(walk, SIZE)


async def test_datasets_screen_imports_a_directory_and_shows_stats(tmp_path, tiny_dir):
    app = WorkbenchApp(tmp_path / "new.db")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "datasets")
        await import_prompt(pilot)
        await typed(pilot, str(tiny_dir))
        await pilot.press("enter")
        await pilot.press("enter")  # accept the default name
        table = app.screen.query_one("DataTable")
        await wait_for(pilot, lambda: table.row_count == 1)
        row = table.get_row_at(0)
        assert row[0] == "tiny" and row[2] == "5" and row[4] == "3" and row[5] == "1:1 2:1" and row[6] == "bm25"


# A failing worker's error dialog, and the app going on after it: tests/test_tui_screens.py's
# test_a_bad_path_is_refused_in_a_dialog_before_the_name_is_asked_and_the_app_keeps_going.


def test_ledger_switches_budget_format_and_shows_a_paired_difference(looking):
    async def walk(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: "Ledger" in heading(app) and app.screen.view is not None)
        table = app.screen.query_one("#ledger")
        assert table.row_count == 3
        assert "S_set" in str(app.screen.query_one("#main-plot").render())
        await pilot.press("space", "down", "space")
        side = app.screen.query_one("#side")
        await wait_for(pilot, lambda: "S_vis:" in str(side.render()))
        assert "paired difference" in str(side.render())
        await pilot.press("o")
        await wait_for(pilot, lambda: "Oracle" in str(app.screen.query_one("#main-plot").render()))

    looking.walk(walk, SIZE)


def test_samples_page_filter_search_and_detail(looking):
    async def walk(pilot):
        app = pilot.app
        await pilot.press("s")
        await wait_for(pilot, lambda: app.current_mode == "samples" and "300 samples" in heading(app))
        screen = app.screen
        assert "page 1/6" in heading(app) and screen.query_one("DataTable").row_count == 50
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: "page 2/6" in heading(app))
        await pilot.press("5")  # retrieval misses at K=1
        await wait_for(pilot, lambda: "retrieval-miss" in heading(app) and "page 1/" in heading(app))
        misses = screen.total
        assert 0 < misses < 300
        await pilot.press("1", "slash")
        await typed(pilot, "directed")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "search “directed”" in heading(app) and app.screen.total > 0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SampleDetailScreen"
                       and app.screen.detail is not None)
        text = str(app.screen.query_one("#detail").render())
        assert "Gold paths" in text and "Evidence in window order" in text and "Prompt" in text
        await pilot.press("right")
        await wait_for(pilot, lambda: app.screen.cell_id != "k1-b64-score")

    looking.walk(walk, SIZE)


@pytest.fixture
def served_db(tmp_path, metaqa_template):
    """MetaQA, and a run ``served`` of 6 questions planned for a served model that answers when the test lets it."""
    server = PacedServer()
    db = copy_db(metaqa_template, tmp_path / "wb.db")
    plan_served_run(db, "served", server)
    yield db, server
    server.close()


async def test_cli_writes_while_the_tui_reads(served_db):
    """A CLI run writes jobs while the app polls the same file: live rows, no lock errors.

    The CLI's model is served (tests/tuikit.py's PacedServer): each job commits when the test lets it, so
    the row is seen moving job by job however fast the machine; what the model says is not the subject."""
    db, server = served_db
    app = WorkbenchApp(db, poll_seconds=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await wait_for(pilot, lambda: app.current_mode == "runs")
        proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "--db", str(db), "resume", "served"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        table = app.screen.query_one("DataTable")
        seen = set()

        def done_count():
            if table.row_count:
                seen.add(row_at(table, 0)["done"])
            return table.row_count and row_at(table, 0)["done"]

        try:
            for done in range(1, 7):
                server.allow()
                await wait_for(pilot, lambda: done_count() == str(done), what=f"the CLI's job {done} shown done")
            await wait_for(pilot, lambda: proc.poll() is not None and done_count() == "6",
                           what="the CLI's 6 jobs shown done")
        finally:
            server.release()
            proc.wait(timeout=PATIENCE)
        assert proc.returncode == 0, proc.stderr.read()
        assert len(seen) > 1  # the count moved while we watched
        assert not isinstance(app.screen, ErrorDialog)


@pytest.mark.real_model
@pytest.mark.budget(20)
async def test_flow_import_run_ledger_dissipation_tag_exclude(tmp_path):
    """The acceptance flow, keyboard only, with the real default model (three questions, 8 tokens each: the
    model's words are not the subject, that the TUI's run worker generates, and what follows, is)."""
    app = WorkbenchApp(tmp_path / "flow.db")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "datasets")
        await import_prompt(pilot)
        await typed(pilot, str(SAMPLE_METAQA))
        await pilot.press("enter", "enter")
        await wait_for(pilot, lambda: app.screen.query_one("DataTable").row_count == 1)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.current_mode == "runs")
        await pilot.press("n")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RunForm")
        form = app.screen
        form.query_one("#k").value = "5"
        form.query_one("#budget").value = "256"
        form.query_one("#format").value = "score"
        form.query_one("#limit").value = "3"
        form.query_one("#max_tokens").value = "8"
        form.query_one("#name").value = "flow"
        from textual.widgets import Checkbox

        form.query_one("#oracle", Checkbox).value = False
        await pilot.press("ctrl+s")
        runs = app.screen
        await wait_for(pilot, lambda: "flow finished" in str(runs.query_one("#status").render()),
                       timeout=MODEL_PATIENCE, what="the flow run finished")
        await pilot.press("l")
        await wait_for(pilot, lambda: app.current_mode == "ledger" and app.screen.view is not None
                       and app.screen.view.report.run == "flow")
        before = app.screen.view.report.rows[0]
        assert before["S_llm"].value is not None and before["n"].value == 3
        await pilot.press("enter")  # samples of the highlighted cell: all 3, whatever the model answered
        await wait_for(pilot, lambda: app.current_mode == "samples" and "flow" in heading(app)
                       and "page 1/" in heading(app) and app.screen.total == 3)
        await pilot.press("A")
        await wait_for(pilot, lambda: any(r.tags for r in app.screen.rows))
        await pilot.press("l", "e")
        await wait_for(pilot, lambda: app.screen.view is not None and app.screen.view.report.excluded == 1)
        after = app.screen.view.report.rows[0]
        assert after["n"].value == 2
        assert "excluded" in heading(app)


# -- snapshots at 120×40 -------------------------------------------------------------------
def test_snapshot_ledger(snap_compare, swept_db):
    assert snap_compare(snap_app(swept_db), terminal_size=SIZE, run_before=settle)


def test_snapshot_samples(snap_compare, swept_db):
    assert snap_compare(snap_app(swept_db), terminal_size=SIZE, run_before=settled_after(("s", "samples")))


def test_snapshot_runs_and_datasets(snap_compare, swept_db):
    assert snap_compare(snap_app(swept_db), terminal_size=SIZE, run_before=settled_after(("r", "runs")))


def test_snapshot_sample_detail(snap_compare, swept_db):
    open_detail = settled_after(("s", "samples"), ("enter", "SampleDetailScreen"))
    assert snap_compare(snap_app(swept_db), terminal_size=SIZE, run_before=open_detail)


async def test_deleting_a_run_asks_first(swept_db):
    from workbench.tui.dialogs import ConfirmDialog

    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_runs(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("n")  # no: nothing happens
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen.query_one("DataTable").row_count == 0)
    store = open_store(swept_db)
    assert store.count("runs") == 0 and store.count("events") == 0


# The Retrieval screen's curves, a miss and the next retriever: tests/test_tui_screens.py, on its shared corpus app.


def test_a_write_seen_while_quitting_is_ignored_not_a_crash(looking, monkeypatch):
    # Quitting removes the screens a tick before the poll timer stops: a database write seen
    # in that tick has no screen to tell, and must not raise (CI saw ScreenStackError).
    async def walk(pilot):
        app = pilot.app
        await until_loaded(pilot)
        # No await from the write to the poll below: the app's own poll timer cannot see the write first.
        writer = open_store(app.db_path)
        add_tag(writer, 1, 1, "seen-while-quitting")
        writer.close()

        def no_screens(self):
            raise ScreenStackError("No screens on stack")

        with monkeypatch.context() as m:
            m.setattr(WorkbenchApp, "screen", property(no_screens))
            app._poll()            # sees the write, finds no screen, returns
        assert app._version == app.store.data_version()

    looking.walk(walk, SIZE)


def test_a_worker_that_raises_a_bug_fails_the_wait_at_once_not_after_the_patience(looking):
    """Once, a test waited its full patience (minutes) for a screen whose worker had died."""
    import time

    async def walk(pilot):
        app = pilot.app
        await until_loaded(pilot)

        def broken(store):
            raise TypeError("a bug in a loader")

        app.screen.load("broken", broken)
        started = time.monotonic()
        with pytest.raises(AssertionError, match="a worker raised TypeError: a bug in a loader"):
            await wait_for(pilot, lambda: False, timeout=60, what="something the broken worker owed")
        assert time.monotonic() - started < 10
        app.worker_errors.remove(app.worker_errors[-1])   # planted, not found: the next test on this app has none

    looking.walk(walk, SIZE)
