"""A run of several local models keeps each one loaded: they must fit in memory together, and a set
that does not is refused before anything is written (workbench/models/fit.py)."""

from __future__ import annotations

import pytest

from conftest import copy_db
from workbench.cli import main
from workbench.errors import BadInput
from workbench.models import fit
from workbench.models.locate import resolve_model
from workbench.runs.executor import check_models_fit
from workbench.runs.generation import GenerationConfig
from workbench.store import open_store

TWO = {"smollm2": GenerationConfig(model="default"), "gemma3-270m": GenerationConfig(model="gemma3-270m")}


def test_a_footprint_counts_the_file_its_kv_cache_at_the_runs_context_and_a_compute_buffer():
    path = resolve_model("default")
    small, large = fit.footprint("smollm2", path, 512), fit.footprint("smollm2", path, 4096)
    assert small.weights == large.weights == path.stat().st_size
    assert large.kv_cache == 8 * small.kv_cache > 0          # linear in n_ctx
    # SmolLM2-135M: 30 layers, 3 KV heads of 64, 16-bit keys and values.
    assert small.kv_cache == 2 * 30 * 512 * 3 * 64 * 2
    assert small.total == small.weights + small.kv_cache + small.compute


def test_two_models_that_fit_pass_and_the_same_two_on_a_small_machine_are_refused_naming_each_share(monkeypatch):
    monkeypatch.setattr(fit, "available_memory", lambda: 8 * fit.GIB)
    check_models_fit(TWO)
    monkeypatch.setattr(fit, "available_memory", lambda: 1 * fit.GIB)
    with pytest.raises(BadInput) as refused:
        check_models_fit(TWO)
    message = str(refused.value)
    assert message.startswith("--model: the 2 models are kept loaded together")
    assert "smollm2 0.2 GiB" in message and "gemma3-270m 0.4 GiB" in message and "1.0 GiB available" in message


def test_one_local_model_with_served_ones_is_never_measured(monkeypatch):
    monkeypatch.setattr(fit, "available_memory", lambda: 0)
    check_models_fit({"a": GenerationConfig(model="default"),
                      "b": GenerationConfig(backend="openai", model="m", base_url="http://127.0.0.1:9/v1")})


@pytest.mark.real_model
def test_run_refuses_models_that_do_not_fit_before_the_plan_is_written(metaqa_template, tmp_path, monkeypatch, capsys):
    db = copy_db(metaqa_template, tmp_path / "wb.db")
    monkeypatch.setattr(fit, "available_memory", lambda: 1 * fit.GIB)
    assert main(["--db", str(db), "run", "metaqa", "--model", "default,gemma3-270m", "--k", "1",
                 "--budget", "32", "--format", "linear", "--limit", "2"]) == 2
    assert "kept loaded together" in capsys.readouterr().err
    store = open_store(db)
    try:
        assert store.conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    finally:
        store.close()
