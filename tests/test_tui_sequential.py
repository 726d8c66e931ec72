"""A sequential run from the TUI: the New-run form's stopping rule, and Runs and Ledger saying how it stopped.

The run's answers come from :class:`seqkit.Reader`, which reads them off the evidence shown (a real
model's text depends on the CPU; the rounds do not depend on the model), so the cells differ as
their windows do and the run decides before its last sample.
"""

from __future__ import annotations

import re

import functools
import shutil
from pathlib import Path

import pytest
from textual.widgets import Checkbox, Input, Select

from conftest import new_template
from seqkit import Reader
from tuikit import PATIENCE, SIZE, until_loaded, wait_for
from workbench.store import open_store
from workbench.store.queries import get_run
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.run_form import RunForm


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    with new_template(tmp_path_factory, "tui-seq.db") as store:
        return store.path


@pytest.fixture
def db(template, tmp_path) -> Path:
    return Path(shutil.copyfile(template, tmp_path / "wb.db"))


@pytest.fixture
def reader_runs(monkeypatch):
    """Runs the TUI starts are answered by the Reader (no model is loaded to answer; the form still checks it)."""
    from workbench.runs import executor
    from workbench.tui.screens import runs

    def execute(store, run, **kwargs):
        return executor.execute(store, run, **{**kwargs, "backend": Reader()})

    monkeypatch.setattr(runs, "execute", functools.wraps(executor.execute)(execute))


async def open_form(pilot) -> RunForm:
    """Runs, then n: the New-run form."""
    await pilot.press("r")
    await until_loaded(pilot, "runs")
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, RunForm))
    return pilot.app.screen


def text(widget) -> str:
    return str(widget.render())


async def test_the_form_plans_a_run_that_stops_when_decided_and_runs_and_ledger_say_how_it_stopped(db, reader_runs):
    app = WorkbenchApp(db, poll_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot)
        summary = form.query_one("#summary")
        await wait_for(pilot, lambda: "jobs" in text(summary), what="the summary")
        for wid, value in (("k", "1,5,20"), ("budget", "32,256"), ("limit", "150"), ("name", "seq")):
            form.query_one(f"#{wid}", Input).value = value
        form.query_one("#stop_when", Select).value = "best"
        # The oracle controls would be asked on every sample: the form names the field before Start.
        await wait_for(pilot, lambda: "oracle cells: a sequential run" in text(summary), what="the oracle refusal")
        form.query_one("#oracle", Checkbox).value = False
        await wait_for(pilot, lambda: "stops when decided" in text(summary), what="the sequential summary")
        assert "900 jobs at most" in text(summary) and "best, α 0.05, tolerance 0.02" in text(summary)
        form.query_one("#alpha", Input).value = "x"
        await wait_for(pilot, lambda: "α (chance of a miss): expected a number" in text(summary))
        form.query_one("#alpha", Input).value = "0.1"
        await wait_for(pilot, lambda: "α 0.1," in text(summary), what="α taken")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not isinstance(app.screen, RunForm))
        table = app.screen.query_one("#runs")
        await wait_for(pilot, lambda: "seq" in table.rows and str(table.get_cell("seq", "state")) == "decided",
                       timeout=PATIENCE * 4, what="the run decided")
        box = app.screen.query_one("#sequential")
        await wait_for(pilot, lambda: box.display and "decided at round" in text(box), what="the sequential line")
        said = text(box)
        assert "saved" in said and "stopped (round, cell, the difference it was settled on" in said
        assert re.search(r"round +\d+  k\S+ (worse than|within [\d.]+ of) k\S+ (by |\()[-+]?\d\.\d{3} to [-+]?\d\.\d{3}", said), said
        assert str(table.get_cell("seq", "%")) == "100"         # the skipped jobs are settled, not left to do
        status = text(app.screen.query_one("#status"))
        assert "skipped (stopped when decided)" in status
        # The Ledger's side panel: the highlighted cell's interval valid under stopping, and why it stopped.
        await pilot.press("enter")
        await until_loaded(pilot, "ledger")
        side = app.screen.query_one("#side")
        await wait_for(pilot, lambda: "Sequential" in text(side), what="the ledger's sequential lines")
        assert "valid at any stopping time" in text(side) and "answered · S_llm [" in text(side)
        # The bootstrap intervals say what they are valid for: the answered samples, not the stopped run's full one.
        assert "95% CI of its answers only" in text(side)
        assert "not valid under stopping" in " ".join(text(app.screen.query_one("#heading")).split())
    store = open_store(db)
    try:
        config = get_run(store, "seq").config["sequential"]
        assert (config["rule"], config["alpha"], config["tolerance"]) == ("best", 0.1, 0.02)
        skipped = store.conn.execute("SELECT count(*) FROM events WHERE status = 'skipped'").fetchone()[0]
        assert skipped > 0
    finally:
        store.close()


async def test_a_stopping_setting_without_a_rule_is_refused_naming_its_field(db):
    app = WorkbenchApp(db, poll_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot)
        form.query_one("#stop_width", Input).value = "0.05"
        summary = form.query_one("#summary")
        await wait_for(pilot, lambda: "E (tolerance / ±): only with a stopping rule" in text(summary))
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, RunForm)
