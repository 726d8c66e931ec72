"""A run of three models in the TUI: the Ledger's row per (model, cell) and its side panel, the Sample
detail's answers of every model side by side, Runs, and the New-run form's several models.

The run's answers come from :class:`seqkit.Reader` (what it answers is read off the evidence shown:
a real model's text depends on the CPU), one reader per model, each with its own model id.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input

from conftest import SAMPLE_METAQA
from llama_server import Canned
from seqkit import Reader
from tuistates import shared_template
from tuikit import SIZE, SMALL, WIDE, until_loaded, wait_for
from workbench.data.importer import import_dataset
from workbench.runs.executor import execute
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.detail import SampleDetailScreen
from workbench.tui.screens.run_form import RunForm

MODELS = ("good", "mid", "weak")


def _build_m3(path: Path) -> Path:
    store = open_store(path)
    try:
        import_dataset(store, SAMPLE_METAQA, "metaqa")
        served = {m: GenerationConfig(backend="openai", base_url="http://127.0.0.1:9/v1", model=m).as_dict()
                  for m in MODELS}
        plan_sweep(store, SweepConfig(ks=(1, 5), budgets=(32, 128), formats=("linear",), limit=6), name="m3",
                   generations=served)
        report = execute(store, get_run(store, "m3"), backend={m: Reader(model_id=f"reader-{m}") for m in MODELS})
        assert report.errors == 0 and report.done == 3 * 4 * 6
    finally:
        store.close()
    return path


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """sample_data/metaqa and run ``m3``: 3 models × K 1,5 × B 32,128, 6 questions, answered in full; built once
    per test session (tests/test_tui_models_contracts.py walks it too)."""
    return shared_template(tmp_path_factory, "tui-models.db", _build_m3)


@pytest.fixture
def db(template, tmp_path) -> Path:
    return Path(shutil.copyfile(template, tmp_path / "wb.db"))


def text(widget) -> str:
    return str(widget.render())


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "200x50"])
async def test_the_ledger_has_a_row_per_model_and_cell_with_the_model_first_and_kept_in_view(db, size):
    app = WorkbenchApp(db, poll_seconds=3600)
    async with app.run_test(size=size) as pilot:
        await until_loaded(pilot, "ledger")
        table = app.screen.query_one("#ledger", DataTable)
        assert [str(c.label) for c in table.columns.values()][:4] == ["model", "K", "B", "format"]
        assert table.fixed_columns == 4 and table.row_count == 3 * 4
        rows = [[str(v) for v in table.get_row_at(i)] for i in range(table.row_count)]
        assert [row[0] for row in rows[:3]] == list(MODELS)           # each window, then its models in run order
        assert {tuple(row[1:4]) for row in rows} == {(k, b, "linear") for k in ("1", "5") for b in ("32", "128")}
        # The side panel names the highlighted (model, cell).
        await pilot.press("down")
        await wait_for(pilot, lambda: "mid/k1-b32-linear" in text(app.screen.query_one("#side")),
                       what="the side panel of the second row")
        # Scrolled sideways, the model stays in view with K, B and format.
        if table.max_scroll_x:
            await pilot.press("right")
            await wait_for(pilot, lambda: table.scroll_x > 0, what="the table scrolled")
            assert table.fixed_columns == 4


async def test_the_sample_detail_shows_every_models_answer_and_marks_the_cell_shown(db):
    app = WorkbenchApp(db, poll_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        await until_loaded(pilot, "ledger")
        await pilot.press("s")
        await until_loaded(pilot, "samples")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SampleDetailScreen) and app.screen.detail is not None,
                       what="the sample detail")
        shown = text(app.screen.query_one("#detail"))
        assert "Every model's answer" in shown
        lines = [line for line in shown.splitlines() if line.strip().startswith(("▸", *MODELS))]
        cell = app.screen.cell_id
        assert sum(line.lstrip().startswith("▸") for line in lines) == 1
        marked = next(line for line in lines if line.lstrip().startswith("▸"))
        assert cell.split("/")[0] in marked
        assert [line.replace("▸", " ").split()[0] for line in lines] == list(MODELS)   # in the run's model order
        assert all("score " in line for line in lines)


async def test_runs_lists_the_run_once_and_the_form_plans_several_served_models(db):
    server = Canned("the answer", models=("alpha", "beta"))
    try:
        app = WorkbenchApp(db, poll_seconds=3600)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("r")
            await until_loaded(pilot, "runs")
            table = app.screen.query_one("#runs")
            assert list(table.rows) == ["m3"]
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, RunForm))
            form = app.screen
            summary = form.query_one("#summary")
            form.query_one("#model", Input).value = f"{server.url}#alpha,{server.url}#beta"
            await wait_for(pilot, lambda: "2 models" in text(summary), what="the summary of two models")
            assert "alpha, beta" in text(summary)
    finally:
        server.close()


def test_a_stopped_cells_line_folds_under_its_cell_at_80_columns():
    """Runs lists a sequential run's stopped cells; with a model in each cell id a line is wider than 80 columns,
    and its continuation hangs under the cell, not at the box's edge, so each stop still reads as one line."""
    from workbench.tui.widgets import hanging_lines

    lines = ["sequential (best, α 0.05, tolerance 0.02, seed 0): decided at round 103: best "
             "smollm2-135m/k20-b128-linear; 693 of the full run's 772 model calls (0.90), 79 saved",
             "stopped (round, cell, the difference it was settled on, this − that):",
             "  round  80  smollm2-135m/k5-b64-linear worse than smollm2-135m/k1-b128-linear by 0.003 to 0.266"]
    folded = hanging_lines(lines, 78).splitlines()
    assert all(len(line) <= 78 for line in folded)
    cell_at = folded.index("stopped (round, cell, the difference it was settled on, this − that):") + 1
    assert folded[cell_at].startswith("  round  80  smollm2-135m/k5-b64-linear")
    assert folded[cell_at + 1] == " " * len("  round  80  ") + "by 0.003 to 0.266"
    assert folded[1].startswith("  ") and not folded[1].startswith("   ")     # the summary's own continuation
