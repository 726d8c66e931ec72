"""Runs and its new-run form read whole at 80×24 (issue 54, case 8).

At 80 columns the Runs table cut another process's pid ("running: pid 1", it was 10590), and the form's stop-when
field showed "best: until the best cell is". Each is checked on the picture the screen draws, in the demo-like
database (tests/tuistates.py: the runs and names the issue was seen with): the state of a run another process
writes is whole and every column of the table is on the screen; every choice of every list of the form reads whole
in its field.
"""

from __future__ import annotations

import pytest
from textual.widgets import Select

from conftest import copy_db
from test_leases import _plant, _started, sleeper  # noqa: F401  (sleeper: the fixture of a live process)
from tuikit import SMALL, open_runs, screen_lines, until_loaded, wait_for
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.run_form import RunForm


@pytest.fixture
def demo_db(tmp_path, demo_template):
    return copy_db(demo_template, tmp_path / "demo.db")


async def test_the_pid_of_another_process_writing_a_run_is_whole_at_80_columns(demo_db, sleeper):  # noqa: F811
    store = open_store(demo_db)
    _plant(store, "run:demo", sleeper.pid, _started(sleeper), command="workbench resume demo")
    store.close()
    app = WorkbenchApp(demo_db, poll_seconds=3600)
    async with app.run_test(size=SMALL) as pilot:
        table = await open_runs(pilot, rows=5)
        await until_loaded(pilot, "runs")
        row = next(line for line in screen_lines(app) if line.startswith(" demo "))
        assert f" pid {sleeper.pid} " in row, row        # it read "running: pid 1" (of 10590)
        assert table.max_scroll_x == 0, "a column of the runs table is off the screen"
        assert str(table.get_cell("demo", "state")) == f"pid {sleeper.pid}"


async def test_the_state_of_a_run_of_long_named_models_is_on_the_screen_at_80_columns(demo_db):
    # The state was the last column: a run's models (``default,gemma3-270m`` and longer) pushed it off the right.
    models = ("smollm2-135m-instruct-q8_0", "gemma-3-270m-it-q8_0")
    store = open_store(demo_db)
    plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("linear",), limit=2), dataset="metaqa",
               name="pair", generations={m: GenerationConfig(backend="openai", base_url="http://127.0.0.1:9/v1",
                                                            model=m).as_dict() for m in models})
    store.close()
    app = WorkbenchApp(demo_db, poll_seconds=3600)
    async with app.run_test(size=SMALL) as pilot:
        table = await open_runs(pilot, rows=6)
        await until_loaded(pilot, "runs")
        assert table.max_scroll_x > 0, "the models are wider than the screen (the case)"
        row = next(line for line in screen_lines(app) if line.startswith(" pair "))
        assert " paused " in row, row


async def test_every_choice_of_the_new_run_form_reads_whole_at_80_columns(demo_db):
    app = WorkbenchApp(demo_db, poll_seconds=3600)
    async with app.run_test(size=SMALL) as pilot:
        await open_runs(pilot, rows=5)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, RunForm))
        form = app.screen
        body = form.query_one(".form-body")
        for select in form.query(Select):
            for label, value in select._options:
                select.value = value
                body.scroll_to_widget(select, animate=False)
                await pilot.pause()
                line = screen_lines(app)[select.region.y]
                assert str(label) in line, f"{select.id}: {label!r} is not whole at 80 columns: {line!r}"
