"""The model as an axis of a run's grid (docs/design.md §4): one run, its cells once per model.

`run --model A,B,C` plans one run whose cells are (model, K, B, format): one sample order, one
progress, one resume and, sequentially, one decision across every (model, cell). These tests plan
such runs; nothing generates (the plan is the retrieval and interface half of every job).
"""

from __future__ import annotations

import pytest

from conftest import copy_db
from workbench.runs.cells import run_cells
from workbench.runs.generation import GenerationConfig
from workbench.runs.sequential import SequentialConfig, sequential_status
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run

GRID = SweepConfig(ks=(1, 5), budgets=(64,), formats=("linear",), limit=6)
TWO = {"smollm2-135m": GenerationConfig(model="default", max_tokens=8).as_dict(),
       "gemma3-270m": GenerationConfig(model="gemma3-270m", max_tokens=8, prompt_style="chat").as_dict()}


@pytest.fixture
def store(tmp_path, metaqa_template):
    opened = open_store(copy_db(metaqa_template, tmp_path / "wb.db"))
    yield opened
    opened.close()


def test_two_models_make_one_run_whose_cells_are_the_grid_once_per_model(store):
    result = plan_sweep(store, GRID, name="pair", generations=TWO)
    assert result.created and result.cells == 4 and result.events == 4 * 6
    cells = run_cells(store, get_run(store, "pair").id)
    assert sorted(cells) == ["gemma3-270m/k1-b64-linear", "gemma3-270m/k5-b64-linear",
                             "smollm2-135m/k1-b64-linear", "smollm2-135m/k5-b64-linear"]
    assert {c.model for c in cells.values()} == set(TWO)
    run = get_run(store, "pair")
    assert set(run.config["generations"]) == set(TWO) and "generation" not in run.config


def test_the_interface_half_of_a_job_is_the_same_for_every_model(store):
    plan_sweep(store, GRID, name="pair", generations=TWO)
    rows = store.conn.execute(
        "SELECT c.model, c.k, e.sid, e.h_set, e.h_vis, e.k_eff, e.evidence_tokens, e.truncated, e.evidence_sha256,"
        " e.visible FROM events e JOIN cells c ON c.run_id = e.run_id AND c.cell_id = e.cell_id").fetchall()
    by_model: dict[str, set] = {}
    for model, *rest in rows:
        by_model.setdefault(model, set()).add(tuple(rest))
    assert by_model["smollm2-135m"] == by_model["gemma3-270m"] and len(by_model["gemma3-270m"]) == 2 * 6


def test_the_same_command_finds_the_same_run_and_a_run_of_one_model_is_as_it_was(store):
    first = plan_sweep(store, GRID, generations=TWO)
    again = plan_sweep(store, GRID, generations=TWO)
    assert again.run == first.run and not again.created
    one = plan_sweep(store, GRID, name="one", generation=TWO["smollm2-135m"])
    assert sorted(run_cells(store, get_run(store, one.run).id)) == ["k1-b64-linear", "k5-b64-linear"]
    assert {c.model for c in run_cells(store, get_run(store, one.run).id).values()} == {None}


def test_one_model_in_generations_is_refused(store):
    with pytest.raises(ValueError, match="two or more"):
        plan_sweep(store, GRID, name="lonely", generations={"smollm2-135m": TWO["smollm2-135m"]})


def test_a_sequential_run_across_models_has_an_arm_per_model_even_where_their_windows_are_the_same(store):
    """Two models on one cell: the windows are the same, the prompts' answers are not. `best` has two arms
    to compare (one model alone on one cell would be refused: one configuration)."""
    one_cell = SweepConfig(ks=(5,), budgets=(64,), formats=("linear",), limit=6)
    plan_sweep(store, one_cell, name="duel", generations=TWO, sequential=SequentialConfig("best"))
    status = sequential_status(store, get_run(store, "duel"))
    assert status is not None and len(status.cells) == 2
    with pytest.raises(ValueError, match="compares two or more configurations"):
        plan_sweep(store, one_cell, name="alone", generation=TWO["smollm2-135m"], sequential=SequentialConfig("best"))


def test_a_run_of_two_models_answers_each_cell_with_its_own_model_and_both_are_loaded_once(store):
    """Each model answers only its own cells; two cells of one model on the same window cost that model one call,
    and the same window asked of the other model is a call of its own."""
    from seqkit import Reader
    from workbench.runs.executor import execute

    plan_sweep(store, GRID, name="pair", generations=TWO)
    readers = {"smollm2-135m": Reader(model_id="reader-a"), "gemma3-270m": Reader(model_id="reader-b")}
    report = execute(store, get_run(store, "pair"), backend=readers)
    assert report.done == 4 * 6 and report.errors == 0
    windows = dict(store.conn.execute(
        "SELECT c.model, count(DISTINCT e.sid || ':' || e.evidence_sha256) FROM events e JOIN cells c"
        " ON c.run_id = e.run_id AND c.cell_id = e.cell_id GROUP BY c.model").fetchall())
    assert len(readers["smollm2-135m"].generated) == windows["smollm2-135m"]
    assert len(readers["gemma3-270m"].generated) == windows["gemma3-270m"]
    assert report.model_calls == sum(windows.values())
    made_by = dict(store.conn.execute(
        "SELECT c.model, group_concat(DISTINCT g.model_id) FROM events e JOIN cells c ON c.run_id = e.run_id"
        " AND c.cell_id = e.cell_id JOIN generations g ON g.key = e.gen_key GROUP BY c.model").fetchall())
    assert made_by == {"smollm2-135m": "reader-a", "gemma3-270m": "reader-b"}
