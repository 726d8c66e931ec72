"""What the TUI says in the cases issue 45 listed: the new-run form, a run started and resumed, its rate, the
wait for the model, an export of nothing, the labels left out of κ.

The key contract (test_tui_key_contract.py) checks that each of these keys says something; these check what.
"""

from __future__ import annotations

import pytest
from textual.widgets import Select

from conftest import copy_db
from tui_shared_a import running
from tuikit import SIZE, answered_run, open_runs, screen_text, wait_for
from tuistates import no_model_runs
from workbench.data.importer import import_dataset
from workbench.runs.executor import Progress
from workbench.store import open_store
from workbench.tui.app import WorkbenchApp
from workbench.tui.label_text import report_lines
from workbench.tui.messages import Loaded
from workbench.tui.screens.run_form import FormError, RunForm
from workbench.tui.screens.runs import rate_line


@pytest.fixture(scope="module")
def shared(tmp_path_factory, swept_template):
    """One app on a copy of the swept database for the tests that do not change it (tests/tui_shared_a.py)."""
    yield from running(copy_db(swept_template, tmp_path_factory.mktemp("says-why") / "wb.db"))


def said(app, words: str) -> bool:
    return any(words in str(n.message) for n in app._notifications)


@pytest.fixture
def runs_db(swept_db, tiny_dir, tmp_path):
    """MetaQA swept (``sweep``) and answered (``answered``), then, imported last, a dataset with no retrieval results."""
    answered_run(swept_db, "answered")
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("kb.jsonl", "samples.jsonl"):
        (bare / name).write_bytes((tiny_dir / name).read_bytes())
    store = open_store(swept_db)
    import_dataset(store, bare, "bare")
    store.close()
    return swept_db


async def test_the_form_opens_on_the_highlighted_runs_dataset_and_a_dataset_that_cannot_run_says_why(
        runs_db, monkeypatch):
    no_model_runs(monkeypatch)
    app = WorkbenchApp(runs_db)
    async with app.run_test(size=SIZE) as pilot:
        table = await open_runs(pilot, rows=2)
        table.move_cursor(row=table.get_row_index("answered"))
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, RunForm))
        form = app.screen
        # Once the newest import (bare), where a run cannot even be planned.
        assert form.query_one("#dataset", Select).value == "metaqa"
        form.query_one("#dataset", Select).value = "bare"
        summary = form.query_one("#summary")
        await wait_for(pilot, lambda: "no retrieval results" in str(summary.render()), what="the reason, before Start")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: said(app, "Cannot start: dataset: bare: it has no retrieval results"))
        await pilot.pause(0.3)
        assert app.screen is form and "Cannot start" in str(summary.render())      # and it stays
        # A run that can start: the cursor goes to it, so p pauses the run just started (it said "nothing to pause").
        form.query_one("#dataset", Select).value = "metaqa"
        for field, value in (("k", "1"), ("budget", "64"), ("limit", "2"), ("name", "fresh")):
            form.query_one(f"#{field}").value = value
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "fresh" in table.rows and table.get_row_at(table.cursor_row)[0] == "fresh",
                       what="the cursor on the run started")


def test_a_refusal_from_planning_stays_when_the_form_reopens_on_it(shared):
    """The dataset list announces its value as it mounts: that hid the reason the form was reopened for."""
    async def look(pilot):
        app = pilot.app
        await open_runs(pilot)
        error = FormError("dataset", "dataset: metaqa has no retrieval results to sweep")
        app.push_screen(RunForm({"metaqa": 300}, {"dataset": "metaqa"}, error))
        await wait_for(pilot, lambda: isinstance(app.screen, RunForm))
        await pilot.pause(0.3)
        box = app.screen.query_one("#form-error")
        assert box.display and "Cannot start: dataset: metaqa has no retrieval results" in str(box.render())

    shared.walk(look, SIZE)


async def test_resume_on_a_finished_run_says_it_is_finished_and_starts_nothing(runs_db):
    app = WorkbenchApp(runs_db)
    async with app.run_test(size=SIZE) as pilot:
        table = await open_runs(pilot, rows=2)
        table.move_cursor(row=table.get_row_index("answered"))
        await pilot.press("u")
        await wait_for(pilot, lambda: said(app, "Nothing to resume: run answered is finished: every job is done"))
        assert not app.executions and "answered" not in str(app.screen.query_one("#status").render())


def test_the_wait_for_the_model_says_how_to_stop_waiting(shared):
    async def look(pilot):
        app = pilot.app
        await open_runs(pilot)
        app.screen.post_message(Loaded("model-wait", ("sweep", "waiting for the model: pid 4242 is using it")))
        await wait_for(pilot, lambda: "p stops waiting" in str(app.screen.query_one("#status").render()))

    shared.walk(look, SIZE)


def test_the_rate_and_eta_count_the_jobs_generated_not_the_cached_ones():
    # 4 cached jobs in a burst, then one generated in 10 s: 7 left at 0.1 jobs/s (it said "ETA 0s").
    line = rate_line(Progress(done=5, total=12, model_calls=1, cache_hits=4, errors=0, completion_tokens=20,
                              elapsed=10.0))
    assert line.startswith("0.1 jobs/s") and "ETA 1m10s" in line
    only_cached = rate_line(Progress(done=4, total=12, model_calls=0, cache_hits=4, errors=0, completion_tokens=0,
                                     elapsed=0.5))
    assert "ETA ? (no job generated yet)" in only_cached


async def test_export_with_nothing_tagged_says_so_and_writes_nothing(swept_db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "ledger" and app.screen.view is not None)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_mode == "samples" and app.screen.rows)
        await pilot.press("X")
        await wait_for(pilot, lambda: said(app, "No sample of this dataset is tagged: nothing to export"))
        assert type(app.screen).__name__ == "SamplesScreen"            # no path asked for
        await pilot.press("A", "X")                                    # one tagged: the path is asked for
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PromptDialog")
        assert "(1 tags)" in screen_text(app)
    assert not (tmp_path / "tagged.jsonl").exists()


def test_kappa_says_why_its_n_is_below_the_items_labelled():
    class Report:       # the fields report_lines reads, as the judge report holds them
        kind, labelled_items, uniform_items, ties = "claim", 40, 40, 1
        annotators = {"ana": 40, "you": 1}
        agreement, annotator_agreement, estimates = [], [], []

    wide = "\n".join(report_lines(Report(), wide=True))
    assert "40 labelled by all annotators" in wide and "1 split evenly between annotators: left out of κ (n)" in wide
    side = report_lines(Report(), wide=False)
    assert all(len(line.replace("[dim]", "").replace("[/dim]", "")) <= 36 for line in side)
