"""A run started from any state of the Runs list is shown and highlighted, and p pauses it (issue 54, case 3).

Datasets → howtocook → enter narrows Runs to howtocook; n, the dataset set to metaqa, ctrl+s: the run executed
unseen ("Runs of howtocook (0 of 5) … No run yet"), and p answered "No run to pause of howtocook". The class,
generated over the states of the list a run can be started from (every dataset's runs, the cursor off the first
row; narrowed to the run's dataset, to another with runs, to one with none; no run at all, narrowed or not): once
started from the form, the run is a row of the list, highlighted, and p pauses it.

One app is shared by the states (tests/tui_shared_c.py's ``Restoring``), its database put back before each. The
run is answered by tests/tuistates.py's ``GatedBackend`` (the run named ``live``): it stays executing until the
test lets it go, however fast the machine.
"""

from __future__ import annotations

import pytest
from textual.widgets import Checkbox, Input, Select

from conftest import copy_db
from tui_shared_c import Restoring
from tuikit import SIZE, until_loaded, wait_for
from tuistates import LIVE, GatedBackend, few_resamples, no_model_runs, restore
from tuiwalk import draw_only_when_looked_at
from workbench.tui.screens.run_form import RunForm

#: Each state of the list: (the database: "demo" has runs on metaqa and prefs and none on howtocook, "metaqa" no run
#: at all; the dataset the list is narrowed to from Datasets, or None; the row highlighted, None: as the list opens; the
#: run's dataset).
STATES = {
    "every dataset's runs, the cursor on the last": ("demo", None, "last", "metaqa"),
    "narrowed to the run's dataset": ("demo", "metaqa", None, "metaqa"),
    "narrowed to another dataset with runs": ("demo", "prefs", None, "metaqa"),
    "narrowed to a dataset with no run (the issue's)": ("demo", "howtocook", None, "metaqa"),
    "no run at all": ("metaqa", None, None, "metaqa"),
    "no run at all, narrowed to the run's dataset": ("metaqa", "metaqa", None, "metaqa"),
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory, demo_template):
    """One app on a copy of the demo-like database for every state (its content put back before each); the
    screens it opens on the way bootstrap little and draw only when looked at (their figures are not the subject)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        few_resamples(monkeypatch)
        draw_only_when_looked_at(monkeypatch)
        app = Restoring(demo_template, copy_db(demo_template, tmp_path_factory.mktemp("started") / "wb.db"))
        try:
            yield app
        finally:
            app.close()


def _text(widget) -> str:
    return str(widget.render())


async def _list_in_state(pilot, narrowed: str | None, cursor: str | None):
    """Runs as the state has it: narrowed from Datasets (enter on the dataset's row), or every dataset's runs with
    the cursor on the first or the last row. Returns the Runs screen."""
    app = pilot.app
    app.dataset_filter = None                     # as a new app has it: every dataset's runs
    if narrowed is not None:
        await pilot.press("d")
        datasets = await until_loaded(pilot, "datasets")
        table = datasets.query_one("DataTable")
        table.move_cursor(row=table.get_row_index(narrowed))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_mode == "runs" and app.dataset_filter == narrowed,
                       what=f"Runs narrowed to {narrowed}")
    else:
        await pilot.press("r")
    runs = await until_loaded(pilot, "runs")
    if narrowed is not None:
        assert f"Runs of {narrowed}" in _text(runs.query_one("#heading"))
    table = runs.query_one("#runs")
    if cursor == "last":
        table.move_cursor(row=table.row_count - 1)
    return runs


async def _start_from_the_form(pilot, dataset: str) -> None:
    """n, the dataset, the name and a small grid set, ctrl+s."""
    app = pilot.app
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, RunForm))
    form = app.screen
    form.query_one("#dataset", Select).value = dataset
    # One cell of 8 questions, none of whose prompts an earlier run answered: each job waits for the gate.
    for field, value in (("name", LIVE), ("k", "2"), ("budget", "64"), ("limit", "8")):
        form.query_one(f"#{field}", Input).value = value
    form.query_one("#oracle", Checkbox).value = False
    await wait_for(pilot, lambda: form.loaded and "1 cells × 8 of" in _text(form.query_one("#summary")),
                   what=lambda: f"the form's summary for 8 questions of {dataset}: {_text(form.query_one('#summary'))}")
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: not isinstance(app.screen, RunForm), what="the form closed")


@pytest.mark.parametrize("state", list(STATES))
def test_a_run_started_from_the_runs_list_is_shown_highlighted_and_p_pauses_it(state, shared, demo_template,
                                                                                  metaqa_template, monkeypatch):
    database, narrowed, cursor, dataset = STATES[state]
    restore(shared.db, demo_template if database == "demo" else metaqa_template)
    gate = GatedBackend()
    no_model_runs(monkeypatch, gate)

    async def start(pilot):
        app = pilot.app
        runs = await _list_in_state(pilot, narrowed, cursor)
        await _start_from_the_form(pilot, dataset)
        table, status = runs.query_one("#runs"), runs.query_one("#status")
        try:
            await wait_for(pilot, lambda: app.screen is runs and LIVE in app.executions and table.display
                           and LIVE in table.rows and runs._selected() == LIVE,
                           what=lambda: f"{LIVE} listed and highlighted (heading: {_text(runs.query_one('#heading'))}; "
                                        f"rows: {[k.value for k in table.rows]}; highlighted: {runs._selected()})")
            assert str(table.get_cell(LIVE, "dataset")) == dataset
            assert app.dataset_filter in (None, dataset)      # the list shows the run's dataset
            pausing = app.executions[LIVE]
            await pilot.press("p")
            await wait_for(pilot, pausing.is_set, what=lambda: f"p pausing {LIVE} (status: {_text(status)})")
        finally:
            gate.release()
            await wait_for(pilot, lambda: LIVE not in app.executions, what=f"{LIVE} stopped")
        await wait_for(pilot, lambda: f"{LIVE} paused" in _text(status), what=lambda: f"paused: {_text(status)}")

    shared.walk(start, SIZE)
