"""Every reader of a run shows its model axis: the ledger (text and JSON), `runs show`, `plot`, the
replay of a stopping rule and the difference of two (model, cell).

One run of three served models (a stand-in server: the right answer when the gold answer is in the
prompt, for the first one; for the others, only on every second or third question), 12 questions,
K 1,5 × B 32,128: 4 cells per model, 12 in all.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import SAMPLE_METAQA, copy_db
from llama_server import Canned
from workbench.cli import main

MODELS = ("good", "mid", "weak")
ANSWERS = {row["question"]: row["answers"] for row in map(json.loads, (SAMPLE_METAQA / "samples.jsonl").open())}
QUESTIONS = list(ANSWERS)


def answer(request: dict) -> dict:
    """The gold answer when it is in the prompt, for ``good`` always, ``mid`` every 2nd question, ``weak`` every 3rd."""
    user = request["messages"][-1]["content"]
    evidence, question = re.match(r"Evidence:\n(.*)\nQuestion: (.*?)\n", user, re.S).groups()
    gold = ANSWERS[question]
    every = MODELS.index(request["model"]) + 1
    right = any(a.lower() in evidence.lower() for a in gold) and QUESTIONS.index(question) % every == 0
    return {"choices": [{"message": {"role": "assistant", "content": gold[0] if right else "I do not know"},
                         "finish_reason": "stop"}], "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": 4}}


@pytest.fixture(scope="module")
def three(tmp_path_factory, metaqa_template):
    """A database holding run ``m3``: the three models over the grid, run in full."""
    db = copy_db(metaqa_template, tmp_path_factory.mktemp("three") / "wb.db")
    server = Canned(answer=answer, models=MODELS)
    try:
        assert main(["--db", str(db), "run", "metaqa", "--backend", "openai", "--base-url", server.url,
                     "--model", ",".join(MODELS), "--k", "1,5", "--budget", "32,128", "--format", "linear",
                     "--answer-format", "text", "--limit", "12", "--name", "m3"]) == 0
    finally:
        server.close()
    return db


def printed(capsys, db, *argv) -> str:
    capsys.readouterr()
    assert main(["--db", str(db), *argv]) == 0
    return capsys.readouterr().out


def test_the_ledger_shows_each_window_once_and_each_models_reasoning_in_a_row_of_its_own(three, capsys):
    text = printed(capsys, three, "ledger", "m3", "--resamples", "50")
    interface, reasoning = text.split("Reasoning, dissipation and leakage\n")
    assert "Retrieval and interface (shared by every model" in interface
    windows = [line for line in interface.splitlines() if re.match(r"\d+ +\d+ +linear ", line)]
    assert len(windows) == 4                                    # K 1,5 × B 32,128, once each
    rows = [line.split() for line in reasoning.splitlines() if line.split()[:1] and line.split()[0] in MODELS]
    assert len(rows) == 12 and {row[0] for row in rows} == set(MODELS)
    assert reasoning.splitlines()[0].split()[:2] == ["model", "K"]


def test_the_ledger_json_names_each_cells_model(three, capsys):
    cells = json.loads(printed(capsys, three, "ledger", "m3", "--json", "--resamples", "50"))
    assert sorted({c["model"] for c in cells}) == sorted(MODELS) and len(cells) == 12
    assert all(c["cell_id"].startswith(c["model"] + "/") for c in cells)
    best = {m: max(c["S_llm"]["value"] for c in cells if c["model"] == m) for m in MODELS}
    assert best["good"] > best["mid"] > best["weak"]             # the stand-in's three qualities, as stored


def test_runs_show_describes_every_model_and_each_ones_execution(three, capsys):
    text = printed(capsys, three, "runs", "show", "m3")
    assert "models      3, each with its own prompt, settings and file: good, mid, weak" in text
    for model in MODELS:
        assert f"  [{model}]" in text and f"model       {model} (served by http://127.0.0.1:" in text
        assert re.search(rf"execution \d+ \S+: \[{model}\] concurrency 4 on the same host", text), text


def test_the_k_sweep_plot_draws_one_s_llm_curve_per_model_named_in_the_legend(three, capsys):
    text = printed(capsys, three, "plot", "m3", "--budget", "128", "--width", "100", "--height", "24")
    assert "3 models" in text
    for model in MODELS:
        assert f"S_llm {model}" in text


def test_the_difference_of_two_models_cells_is_a_paired_interval(three, capsys):
    text = printed(capsys, three, "ledger", "m3", "--diff", "good/k5-b128-linear", "weak/k5-b128-linear",
                   "--term", "S_llm", "--resamples", "200")
    found = re.match(r"S_llm\(good/k5-b128-linear\) − S_llm\(weak/k5-b128-linear\) = \+?(-?[\d.]+) "
                     r"\[\+?(-?[\d.]+),\+?(-?[\d.]+)\]", text)
    assert found, text
    value, lo, hi = map(float, found.groups())
    assert 0 < value and lo <= value <= hi                       # the better model's cell, above the weaker's


def test_a_stopping_rule_replays_over_every_model_and_cell_of_a_complete_run(three, capsys):
    text = printed(capsys, three, "ledger", "m3", "--replay", "best", "--replays", "20")
    assert "30 samples" not in text and "12 samples × 12 cells" in text
    per_cell = text.split("per cell (mean answered, how it stopped):\n")[1].splitlines()
    assert sorted(line.split()[0].split("/")[0] for line in per_cell) == sorted(MODELS * 4)
    assert "differences held   20 of 20" in text and "intervals covered  " in text


def test_the_html_report_names_the_models_and_draws_each_ones_curve(three, capsys, tmp_path):
    out = tmp_path / "m3.html"
    printed(capsys, three, "report", "m3", "--out", str(out))
    html = out.read_text(encoding="utf-8")
    assert ">models<" in html
    for model in MODELS:
        assert f"{model} ({model})" in html                       # the label, then the model it names
        assert f"S_llm {model}" in html                           # its curve, in the figure's legend
    assert html.count('<th class="l">model</th><th class="l">K</th>') >= 2   # the ledger's tables, a row per model


def test_exported_prompts_name_each_cells_model_in_its_cell_id(three, capsys, tmp_path):
    out = tmp_path / "prompts.jsonl"
    printed(capsys, three, "prompts", "export", "m3", "--out", str(out))
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 12 * 12 and {r["cell_id"].split("/")[0] for r in rows} == set(MODELS)


def test_the_sample_detail_shows_every_models_answer_to_the_question_side_by_side(three):
    from workbench.browse import sample_detail
    from workbench.store import open_store
    from workbench.store.queries import get_run, load_samples

    store = open_store(three)
    try:
        run = get_run(store, "m3")
        first = load_samples(store, run.dataset_id)[0]
        detail = sample_detail(store, run, first.sid, "mid/k5-b128-linear")
        assert [a.model for a in detail.by_model] == list(MODELS)
        assert [a.cell_id for a in detail.by_model] == [f"{m}/k5-b128-linear" for m in MODELS]
        assert all(a.status == "done" and a.prediction is not None for a in detail.by_model)
    finally:
        store.close()


def test_the_runs_list_gives_the_run_once_with_its_models_prompt_style(three, capsys):
    runs = json.loads(printed(capsys, three, "runs", "--json"))
    [run] = [r for r in runs if r["name"] == "m3"]
    assert run["prompt_style"] == "chat"


def test_the_progress_line_names_the_model_answering(metaqa_template, tmp_path, capsys):
    db = copy_db(metaqa_template, tmp_path / "wb.db")
    server = Canned(answer=answer, models=MODELS)
    try:
        capsys.readouterr()
        assert main(["--db", str(db), "run", "metaqa", "--backend", "openai", "--base-url", server.url,
                     "--model", ",".join(MODELS), "--k", "1", "--budget", "32", "--format", "linear",
                     "--answer-format", "text", "--limit", "3"]) == 0
    finally:
        server.close()
    progress = capsys.readouterr().err
    for model in MODELS:
        assert f"· {model} answering ·" in progress


def test_compare_takes_two_models_of_one_run_as_two_runs_and_names_their_difference(three, capsys):
    text = printed(capsys, three, "compare", "m3/good", "m3/weak", "--terms", "S_vis,S_llm", "--resamples", "200")
    assert text.startswith("compare A = m3/good with B = m3/weak · dataset metaqa · 12 samples in both")
    assert "generation.model" in text and '"good" → "weak"' in text      # the one axis that differs: the model
    s_vis = text.split("\nS_vis\n")[1].split("\n\n")[0]
    assert [line.split()[0] for line in s_vis.splitlines()[2:]] == ["k1-b32-linear", "k5-b32-linear",
                                                                    "k1-b128-linear", "k5-b128-linear"]
    assert all("+0.000 [+0.000,+0.000]" in line for line in s_vis.splitlines()[2:])   # the same evidence
    s_llm = text.split("\nS_llm\n")[1].split("\n\n")[0]
    assert all(" -0." in line or " +0.000" in line for line in s_llm.splitlines()[2:])  # weak never better


def test_compare_refuses_a_model_the_run_does_not_have(three, capsys):
    assert main(["--db", str(three), "compare", "m3/good", "m3/huge"]) == 2
    assert "run 'm3' has no model 'huge' (its models: good, mid, weak)" in capsys.readouterr().err


def test_a_dry_run_of_several_models_counts_each_models_part_of_the_one_run(three, capsys):
    manifest = json.loads(printed(capsys, three, "runs", "show", "m3", "--json"))
    url = manifest["manifest"]["models"]["good"]["generation"]["base_url"]     # the stand-in's (a dry run asks no server)
    served = ["--backend", "openai", "--base-url", url, "--model", ",".join(MODELS),
              "--answer-format", "text", "--k", "1,5", "--budget", "32,128", "--format", "linear", "--limit", "12"]
    parts = json.loads(printed(capsys, three, "run", "metaqa", *served, "--name", "m3", "--dry-run", "--json"))
    assert [p["model_label"] for p in parts["dry_run"]] == list(MODELS)
    assert all(p["run"] == "m3" and p["exists"] and p["run_jobs"] == 4 * 12 and p["jobs"] == 0
               for p in parts["dry_run"])
    text = printed(capsys, three, "run", "metaqa", *served, "--name", "fresh", "--dry-run")
    for model in MODELS:
        assert f"dry run of run fresh, the part model {model} answers (not planned yet)" in text
    assert text.count("  jobs            48") == 3
