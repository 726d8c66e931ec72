"""The sample detail of an imported run: the answer came from elsewhere, and the detail says so.

An answer brought in by ``workbench predictions import`` was generated outside the workbench: there
is no raw model output, only the answer itself. The detail shows that answer under its Output
heading instead of a bare "—".
"""

from __future__ import annotations

from workbench.data.predictions import import_predictions
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store.queries import get_run, load_samples
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.detail import SampleDetailScreen

from conftest import write_jsonl
from tuikit import SIZE, wait_for

ANSWER = "William Dieterle, I believe"


def imported_db(store, tmp_path):
    """The tiny dataset at K=1, its first sample answered by an imported prediction."""
    plan_sweep(store, SweepConfig(ks=(1,), budgets=(1000,), formats=("score",)), name="byo")
    run = get_run(store, "byo")
    sample = load_samples(store, run.dataset_id)[0]
    import_predictions(store, run, write_jsonl(tmp_path / "pred.jsonl", [
        {"sample_id": sample.id, "cell_id": "k1-b1000-score", "prediction": ANSWER}]))
    return store.path, sample.sid


async def test_an_imported_answer_is_shown_as_the_output_and_said_to_be_imported(tiny_store, tmp_path):
    db, sid = imported_db(tiny_store, tmp_path)
    app = WorkbenchApp(db)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(SampleDetailScreen("byo", sid, "k1-b1000-score", [sid]))
        await wait_for(pilot, lambda: isinstance(app.screen, SampleDetailScreen) and app.screen.detail is not None)
        lines = str(app.screen.query_one("#detail").render()).splitlines()
        output = next(i for i, line in enumerate(lines) if line.startswith("Output"))
        assert lines[output].startswith("Output (imported answer")
        assert "no raw model output" in lines[output]
        assert lines[output + 1] == ANSWER
