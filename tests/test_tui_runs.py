"""The newcomer pass on Runs, driven by keys: the new-run form, a live runs list,
a greeting on an empty database, and quitting while a run executes.

The runs that execute are answered by tests/tuistates.py's GatedBackend: what a model says is not what
these tests are about, and each job ends when the test lets it, so the run is exactly as far along as
each step needs (executing under the quit question, moving job by job) however fast the machine.
"""

from __future__ import annotations

import asyncio
import re
import threading
from dataclasses import replace

import pytest
from textual.widgets import Input, Select

from conftest import copy_db
from tui_shared_c import camera, snap
from tuikit import (PATIENCE, SIZE, SMALL, EchoBackend, answered_run, open_runs, row_at, screen_text, settled_after,
                    snap_app, type_text, until_loaded, wait_for)
from tuistates import GatedBackend, no_model_runs
from workbench.data.importer import import_dataset
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.tui.app import WorkbenchApp
from workbench.tui.dialogs import ConfirmDialog, ErrorDialog
from workbench.tui.screens.run_form import RunForm


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory, swept_template):
    """The swept database the form's tests share: each plans nothing (and asserts so)."""
    return copy_db(swept_template, tmp_path_factory.mktemp("runs-form") / "wb.db")


@pytest.fixture(scope="module")
def shared(shared_db):
    """One app on ``shared_db`` for the form's tests (tests/tui_shared_a.py), made fresh before each; the form's
    snapshots are taken in it (tests/tui_shared_c.py)."""
    yield from camera(shared_db)


def _runs(db) -> dict[str, dict[str, int]]:
    """Job counts by status of every run, read as the CLI would (another connection)."""
    from workbench.store.queries import list_runs

    store = open_store(db)
    try:
        return {r["name"]: r for r in list_runs(store)}
    finally:
        store.close()


async def _open_form(pilot) -> RunForm:
    """Runs, then n: the form with its summary computed (the model checked) and the dataset list focused."""
    app = pilot.app
    await pilot.press("r")
    await until_loaded(pilot, "runs")
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, RunForm))
    form = app.screen
    await wait_for(pilot, lambda: form.loaded and "jobs" in _summary(form)
                   and app.focused is form.query_one("#dataset"), what="the form ready")
    return form


def _summary(form: RunForm) -> str:
    return str(form.query_one("#summary").render())


def _status(app) -> str:
    return str(app.screen.query_one("#status").render())


async def _exited(app, timeout: float = PATIENCE) -> None:
    """Wait until the app exits by itself (sleeping, not pumping it through the Pilot)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not app._exit and loop.time() < deadline:
        await asyncio.sleep(0.01)
    assert app._exit, "the app did not exit"


# -- the new-run form (items 5 and 6) -------------------------------------------------------
def test_enter_walks_the_form_and_the_summary_says_what_will_run_before_anything_starts(shared, shared_db):
    async def look(pilot):
        app = pilot.app
        form = await _open_form(pilot)
        # The defaults: (5 K × 2 B × linear) + 2 B × (struct + 2 shuffles) oracle cells, on 20 of 300 questions.
        assert "16 cells (6 oracle) × 20 of 300 samples = 320 jobs" in _summary(form)
        assert "model SmolLM2-135M-Instruct" in _summary(form) and "(default)" in _summary(form)
        assert app.focused.id == "dataset"
        await pilot.press("enter")               # the dataset list opens …
        await wait_for(pilot, lambda: form.query_one("#dataset", Select).expanded)
        await pilot.press("enter")               # … and Enter picks the highlighted dataset
        await wait_for(pilot, lambda: not form.query_one("#dataset", Select).expanded)
        await pilot.press("tab")
        assert app.focused.id == "model"
        for expected in ("k", "budget", "format", "limit"):   # Enter in a field moves to the next one
            await pilot.press("enter")
            assert app.focused.id == expected
        await pilot.press("ctrl+a", "ctrl+k")
        await type_text(pilot, "4")
        await pilot.press("enter")
        assert isinstance(app.screen, RunForm) and not app.executions
        assert "16 cells (6 oracle) × 4 of 300 samples = 64 jobs" in _summary(form)   # recomputed live
        form.query_one("#k", Input).value = "5"
        await wait_for(pilot, lambda: "8 cells (6 oracle) × 4 of 300 samples = 32 jobs" in _summary(form),
                       what=lambda: f"the summary for K=5 (it says {_summary(form)!r})")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RunForm))

    shared.walk(look, SIZE)
    assert list(_runs(shared_db)) == ["sweep"], "nothing was planned"


def test_a_bad_field_keeps_the_form_with_what_was_typed_and_names_the_field(shared, shared_db):
    async def look(pilot):
        app = pilot.app
        form = await _open_form(pilot)
        form.query_one("#name", Input).value = "mine"
        form.query_one("#budget", Input).value = "64,x"
        await wait_for(pilot, lambda: "budgets B: expected comma-separated integers" in _summary(form),
                       what="the bad budget named before starting")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "Cannot start: budgets B: expected comma-separated integers" in _summary(form),
                       what="starting refused")
        assert app.screen is form
        assert app.focused.id == "budget"
        assert form.query_one("#name", Input).value == "mine"
        await pilot.press("end", "backspace", "backspace")
        await wait_for(pilot, lambda: "8 cells (3 oracle) × 20 of 300 samples = 160 jobs" in _summary(form),
                       what="the summary for B=64 only")

    shared.walk(look, SIZE)
    assert list(_runs(shared_db)) == ["sweep"]


def test_a_run_that_cannot_be_planned_reopens_the_form_with_the_typed_values(shared, shared_db):
    """"sweep" exists with another config: the core refuses to mix them, and the form names the run name."""
    async def look(pilot):
        app = pilot.app
        form = await _open_form(pilot)
        form.query_one("#name", Input).value = "sweep"
        form.query_one("#k", Input).value = "3"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, RunForm) and app.screen is not form)
        again = app.screen
        await wait_for(pilot, lambda: app.focused is again.query_one("#name"), what="the name field focused")
        assert "Cannot start: run name: run 'sweep' exists with a different config" in str(
            again.query_one("#form-error").render())
        assert again.query_one("#k", Input).value == "3" and again.query_one("#name", Input).value == "sweep"
        await pilot.press("end", "2")                                            # another name: the line goes
        await wait_for(pilot, lambda: not again.query_one("#form-error").display, what="the error line gone")

    shared.walk(look, SIZE)
    sweep = _runs(shared_db)["sweep"]
    assert (sweep["cells"], sweep["jobs"]) == (6, 6 * 300), "the existing run is untouched"


def test_snapshot_new_run_form_at_80x24(snapshot, request, shared):
    assert snap(snapshot, request, shared, SMALL, _open_form)


def test_snapshot_new_run_form_at_120x40(snapshot, request, shared):
    assert snap(snapshot, request, shared, SIZE, _open_form)


# -- a live runs list (item 7) ---------------------------------------------------------------
async def test_a_run_written_elsewhere_appears_when_coming_back_to_runs(swept_db):
    app = WorkbenchApp(swept_db, poll_seconds=0.2)
    async with app.run_test(size=SIZE) as pilot:
        table = await open_runs(pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: app.current_mode == "datasets")
        version = app._version
        store = open_store(swept_db)                          # the CLI plans a run meanwhile
        plan_sweep(store, SweepConfig(ks=(2,), budgets=(64,), formats=("score",), limit=5), name="from-cli")
        store.close()
        await wait_for(pilot, lambda: app._version != version)  # the change was seen (by Datasets)
        await pilot.press("r")
        await wait_for(pilot, lambda: table.row_count == 2)
        assert table.get_row_at(1)[0] == "from-cli"


async def test_a_run_another_process_is_writing_shows_as_running_with_its_pid_not_paused(live_db):
    """`workbench resume live` in a shell holds the run's lease: the TUI names that writer."""
    import subprocess
    import sys

    writer = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from workbench.store import open_store
from workbench.store.lease import hold
store = open_store({str(live_db)!r})
with hold(store, "run:live", what="workbench resume live"):
    print("holding", flush=True)
    time.sleep(120)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "holding"
        app = WorkbenchApp(live_db)
        async with app.run_test(size=SIZE) as pilot:
            table = await open_runs(pilot)
            await wait_for(pilot, lambda: row_at(table, 0)["state"] != "", what="the state column")
            assert row_at(table, 0)["state"] == f"pid {writer.pid}"
    finally:
        writer.kill()
        writer.wait()
    app = WorkbenchApp(live_db)                      # the writer gone (kill -9 too): paused again
    async with app.run_test(size=SIZE) as pilot:
        table = await open_runs(pilot)
        assert row_at(table, 0)["state"] == "paused"


@pytest.fixture
def half_done_db(live_db):
    """``live`` with 2 of its 6 jobs done (an execution stopped after them, as a Ctrl-C would)."""
    from workbench.runs.executor import execute
    from workbench.store.queries import get_run

    store = open_store(live_db)
    stop = threading.Event()
    report = execute(store, get_run(store, "live"), stop=stop, backend=EchoBackend(),
                     progress=lambda p: stop.set() if p.done >= 2 else None)
    store.close()
    assert report.done == 2 and report.stopped
    return live_db


async def test_a_resumed_run_shows_its_overall_progress_in_the_line_and_the_row(half_done_db, monkeypatch):
    # No polling: the row can only follow the progress messages themselves. The jobs end one at a time, when the
    # test lets them (GatedBackend), so the line and the row are seen at every step of the run.
    gate = GatedBackend(free=0)
    no_model_runs(monkeypatch, gate)
    app = WorkbenchApp(half_done_db, poll_seconds=3600)
    try:
        async with app.run_test(size=SIZE) as pilot:
            table = await open_runs(pilot)
            assert (row_at(table, 0)["done"], row_at(table, 0)["jobs"]) == ("2", "6")
            await pilot.press("u")
            seen = []

            def watch():
                match = re.search(r"live: (\d+)/(\d+) jobs done", _status(app))
                if match and "live" in app.executions:
                    seen.append((match.group(1), match.group(2), row_at(table, 0)["done"], row_at(table, 0)["state"]))
                return "live finished" in _status(app)

            for done in (3, 4, 5):
                gate.allow()
                await wait_for(pilot, lambda: watch() or any(line == str(done) for line, *_ in seen),
                               what=f"job {done} of 6 shown")
            gate.allow()
            await wait_for(pilot, watch, what="live finished")
            assert seen, "the progress line was shown while the run executed"
            assert all(total == "6" for _, total, _, _ in seen), seen           # the run's 6 jobs, not the 4 left
            assert all(line == row and state == "running" for line, _, row, state in seen), seen
            assert {line for line, _, _, _ in seen} & {"3", "4", "5"}, seen      # the row moved during the run
            assert "6/6 jobs done" in _status(app) and "4 this time" in _status(app)
            await wait_for(pilot, lambda: row_at(table, 0)["done"] == "6")
    finally:
        gate.release()


async def test_after_p_the_jobs_still_ending_keep_the_line_saying_the_run_is_pausing(half_done_db, monkeypatch):
    # Once, the tick of the job in progress (and of a cached burst after it) replaced "pausing live …" with the
    # jobs/s line, as if p had not been taken. The tick is shown here as the screen's timer shows it: the one that
    # ends the run lands a moment before the run finishes, too short a while to catch it in the act.
    gate = GatedBackend(free=0)
    no_model_runs(monkeypatch, gate)
    app = WorkbenchApp(half_done_db, poll_seconds=3600)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_runs(pilot)
            await pilot.press("u")
            gate.allow()
            await wait_for(pilot, lambda: "live: 3/6 jobs done" in _status(app), what="job 3 of 6 shown")
            await pilot.press("p")
            assert _status(app) == "pausing live after the job in progress … (3/6 jobs done)"
            screen = app.screen
            tick = screen._last_progress["live"]
            # A cached job ends after p: its tick keeps the line, and moves the line's count and the row.
            screen._show_progress("live", replace(tick, done=tick.done + 1, cache_hits=tick.cache_hits + 1))
            assert _status(app) == "pausing live after the job in progress … (4/6 jobs done)"
            assert row_at(screen.query_one("#runs"), 0)["done"] == "4"
            gate.release()
            await wait_for(pilot, lambda: "live paused" in _status(app), what="the run paused")
    finally:
        gate.release()


async def test_resuming_a_run_planned_without_a_model_says_why_in_a_toast_and_starts_no_bar(tmp_path, tiny_dir):
    # Once: "A background task failed / ValueError", and "loading the model …" animated on behind it. Now the
    # state the table shows answers before anything starts.
    store = open_store(tmp_path / "wb.db")
    import_dataset(store, tiny_dir, "tiny")
    plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), dataset="tiny", name="recorded")
    store.close()
    app = WorkbenchApp(tmp_path / "wb.db")
    async with app.run_test(size=SIZE) as pilot:
        await open_runs(pilot)
        await pilot.press("u")

        def told() -> list[str]:
            return [str(n.message) for n in app._notifications if "has no model" in str(n.message)]

        await wait_for(pilot, lambda: told() or isinstance(app.screen, ErrorDialog), what="a word on the resume")
        assert not isinstance(app.screen, ErrorDialog) and not app.worker_errors
        assert told() == ["Nothing to resume: run recorded has no model (planned by `sweep`): import its predictions "
                          "(`workbench predictions import`), or plan a run with a model (n)."]
        assert not app.screen.query_one("#progress").display
        assert "loading the model" not in _status(app)
        assert "recorded" not in app.executions


async def test_p_on_a_run_not_executing_here_says_why_nothing_pauses(swept_db):
    answered_run(swept_db, "answered")
    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SIZE) as pilot:
        table = await open_runs(pilot, rows=2)
        assert [row_at(table, i)["state"] for i in range(2)] == ["sweep", "done"]
        for row, why in ((1, "run answered is finished"), (0, "run sweep has no model")):
            table.move_cursor(row=row)
            await pilot.press("p")
            await wait_for(pilot, lambda: any(f"nothing to pause: {why}" in str(n.message) for n in app._notifications),
                           what=f"a word on why p paused nothing ({why})")


# -- greeting on an empty database (item 12) ------------------------------------------------
async def test_an_empty_database_greets_with_what_to_do_first(tmp_path, tiny_dir):
    app = WorkbenchApp(tmp_path / "new.db")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "datasets" and "Welcome" in screen_text(app))
        text = screen_text(app)
        assert all(w in text for w in ("press i to import", "sample_data/metaqa", "just demo", "? lists every key"))
        assert not app.screen.query_one("#datasets").display   # the greeting, not an empty table
        await pilot.press("r")                                # Runs greets too while there is nothing
        await wait_for(pilot, lambda: app.current_mode == "runs" and "just demo" in screen_text(app))
        text = screen_text(app)
        assert "d then i" in text and "sample_data/metaqa" in text and "? lists every key" in text
        assert not app.screen.query_one("#runs").display
        store = open_store(tmp_path / "new.db")
        import_dataset(store, tiny_dir, "tiny")
        store.close()
    app = WorkbenchApp(tmp_path / "new.db")
    async with app.run_test(size=SIZE) as pilot:               # a dataset, no run: Runs says press n
        await wait_for(pilot, lambda: app.current_mode == "runs" and "No run yet" in screen_text(app))
        assert "Press n to start one on tiny" in screen_text(app)
        await pilot.press("d")                                # and Datasets shows its table again
        await wait_for(pilot, lambda: app.current_mode == "datasets" and app.screen.query_one("#datasets").display)
        assert not app.screen.query_one("#welcome").display


def test_snapshot_runs_greeting_at_80x24(snap_compare, tmp_path):
    app = snap_app(tmp_path / "new.db")
    assert snap_compare(app, terminal_size=SMALL, run_before=settled_after(("r", "runs")))


# -- quitting while a run executes (item 13) ------------------------------------------------
async def _start_live_then_ask_to_quit(pilot) -> None:
    """Runs, u on the planned run `live`, then q: the quit question is up while it executes."""
    app = pilot.app
    await open_runs(pilot)
    await pilot.press("u")
    await wait_for(pilot, lambda: "live" in app.executions)
    await pilot.press("q")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))


async def test_q_during_a_run_asks_then_stops_it_after_the_job_in_progress_and_quits(live_db, monkeypatch):
    """The run's second job waits until the test lets it end (GatedBackend), so the run is still executing when
    the question is answered, however fast this machine runs its six questions (on a fast one the run once ended
    under the dialog)."""
    gate = GatedBackend(free=1)
    no_model_runs(monkeypatch, gate)
    try:
        app = WorkbenchApp(live_db)
        async with app.run_test(size=SIZE) as pilot:
            await _start_live_then_ask_to_quit(pilot)
            question = app.screen.question
            assert "stops after the job in progress" in question
            assert "u in Runs" in question and "`workbench resume live`" in question
            await pilot.press("n")                                  # no: the run goes on
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmDialog), what="the question answered")
            assert not app._exit and "live" in app.executions
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            await pilot.press("y")
            await wait_for(pilot, lambda: any("Stopping live" in n.message for n in app._notifications),
                           what="saying it stops")
            gate.release()                                          # the job in progress ends, and the run stops
            await _exited(app)
    finally:
        gate.release()
    jobs = _runs(live_db)["live"]
    assert jobs["done"] + jobs["pending"] == 6 and jobs["pending"] > 0, "stopped cleanly, resumable"


async def test_q_answered_after_the_run_ended_under_the_question_just_quits(live_db, monkeypatch):
    gate = GatedBackend(free=0)
    no_model_runs(monkeypatch, gate)
    try:
        app = WorkbenchApp(live_db)
        async with app.run_test(size=SIZE) as pilot:
            await _start_live_then_ask_to_quit(pilot)
            gate.release()                                          # the run ends under the question
            await wait_for(pilot, lambda: not app.executions, what="the run ending under the question")
            await pilot.press("y")
            await _exited(app)
            assert not any("Stopping" in n.message for n in app._notifications)
    finally:
        gate.release()
    assert _runs(live_db)["live"]["done"] == 6


async def test_q_with_no_run_executing_quits_at_once(swept_db):
    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "ledger")
        await pilot.press("q")
        await _exited(app)
        assert not isinstance(app.screen, ConfirmDialog)


async def test_the_progress_line_catches_up_after_a_burst_of_jobs(swept_db):
    """Cached jobs finish in a burst and then a generation may take long: the line must show the
    burst's last job at once, not the first one until the next job ends (it once read 1/12 beside a row of 4)."""
    from workbench.runs.executor import Progress

    app = WorkbenchApp(swept_db, poll_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        await open_runs(pilot)
        screen = app.screen
        # What the executor's progress callback delivers for four jobs finishing within a few milliseconds.
        for done in range(1, 5):
            screen._latest["sweep"] = Progress(done, 12, done, 0, 0, 10 * done, 1.0, 0, 12)
        await wait_for(pilot, lambda: "sweep: 4/12 jobs done" in _status(app), what="the burst's last job shown")
        assert row_at(app.screen.query_one("#runs"), 0)["done"] == "4"
