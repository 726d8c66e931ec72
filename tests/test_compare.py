"""Comparing two runs: paired deltas with tests, flips attributed to the stage that changed, refusals, gates."""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLE_METAQA, write_jsonl
from workbench.cli import main
from workbench.compare import compare_runs, parse_gate, regressions
from workbench.data.importer import import_dataset
from workbench.data.predictions import export_prompts, import_predictions
from workbench.metrics.stats import paired_mean_difference
from workbench.retrieval.runs import retrieve
from workbench.runs.report import load_run_arrays
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run, load_samples

LONG = " ".join(["a long plot summary that fills the window"] * 12)
KB = [["Kismet", "directed_by", "William Dieterle"], ["Rosetta", "in_language", "French"],
      ["Juarez", "release_year", "1939"], ["Rosetta", "plot_summary", LONG], ["Alex Proyas", "directed", "Dark City"]]
# Retriever "good" ranks each gold triple first. "bad" misses q_ret's gold, puts a long distractor
# before q_int's gold (in the window's budget it pushes the gold out), and agrees on q_rea.
RANKED = {"good": {"q_ret": [0, 4], "q_int": [1, 3], "q_rea": [2, 4]},
          "bad": {"q_ret": [4, 3], "q_int": [3, 1], "q_rea": [2, 4]}}
CELL = "k2-b40-score"


@pytest.fixture
def stage_pair(tmp_path, store):
    """Runs A (retriever good) and B (retriever bad) over three questions, one cell, scored by hand:
    A answers q_ret and q_int right and q_rea wrong; B the reverse."""
    d = tmp_path / "stages"
    d.mkdir()
    write_jsonl(d / "kb.jsonl", [{"triple": t} for t in KB])
    write_jsonl(d / "samples.jsonl", [
        {"id": "q_ret", "question": "who directed Kismet", "answers": ["William Dieterle"], "gold_paths": [[KB[0]]]},
        {"id": "q_int", "question": "what language is Rosetta in", "answers": ["French"], "gold_paths": [[KB[1]]]},
        {"id": "q_rea", "question": "when was Juarez released", "answers": ["1939"], "gold_paths": [[KB[2]]]}])
    write_jsonl(d / "retrieval.jsonl", [
        {"sample_id": q, "retriever": r, "results": [{"triple": KB[u], "score": 2.0 - i} for i, u in enumerate(units)]}
        for r, by_q in RANKED.items() for q, units in by_q.items()])
    import_dataset(store, d, "stages")
    answers = {"A": {"q_ret": "William Dieterle", "q_int": "French", "q_rea": "1920"},
               "B": {"q_ret": "I don't know", "q_int": "English", "q_rea": "1939"}}
    for name, retriever in (("A", "good"), ("B", "bad")):
        plan_sweep(store, SweepConfig(ks=(2,), budgets=(40,), formats=("score",), retriever=retriever), name=name)
        path = write_jsonl(tmp_path / f"{name}.jsonl", [{"sample_id": q, "cell_id": CELL, "prediction": p}
                                                         for q, p in answers[name].items()])
        import_predictions(store, get_run(store, name), path)
    return store


def test_each_flip_is_attributed_to_the_first_stage_that_changed(stage_pair):
    cell = compare_runs(stage_pair, "A", "B", resamples=200).cells[0]
    assert (cell.cell_a, cell.cell_b, cell.n) == (CELL, CELL, 3)
    assert cell.flips == {"retrieval": {"fail_to_pass": [], "pass_to_fail": ["q_ret"]},
                          "interface": {"fail_to_pass": [], "pass_to_fail": ["q_int"]},
                          "reasoning": {"fail_to_pass": ["q_rea"], "pass_to_fail": []}}


def test_deltas_are_b_minus_a_with_exact_mcnemar_for_hit_terms(stage_pair):
    c = compare_runs(stage_pair, "A", "B", resamples=200)
    terms = c.cells[0].terms
    assert (terms["S_set"].a, terms["S_set"].b) == (1.0, pytest.approx(2 / 3))
    assert terms["S_set"].delta.value == pytest.approx(-1 / 3)
    # One discordant sample: p = 2·P(Bin(1, 1/2) ≤ 0) = 1.
    assert (terms["S_set"].test, terms["S_set"].p) == ("mcnemar", 1.0)
    assert terms["S_vis"].delta.value == pytest.approx(-2 / 3) and terms["S_vis"].test == "mcnemar"
    assert terms["Acc_hit"].test == "bootstrap"
    assert [(d.axis, d.key, d.a, d.b) for d in c.differences] == [("retriever", "retriever", "good", "bad")]
    assert c.axes == ["retriever"] and c.adjustment == "holm"


def test_the_json_gives_every_term_and_the_flips_by_stage_and_direction(stage_pair, capsys):
    assert main(["--db", str(stage_pair.path), "compare", "A", "B", "--json", "--resamples", "100"]) == 0
    out = json.loads(capsys.readouterr().out)
    cell = out["cells"][0]
    assert set(cell["terms"]) == {"S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "Acc_miss", "D_rate"}
    assert set(cell["terms"]["S_vis"]) >= {"a", "b", "delta", "p", "p_holm", "test", "significant"}
    assert set(cell["terms"]["S_vis"]["delta"]) == {"value", "lo", "hi"}
    assert cell["flips"]["interface"]["pass_to_fail"] == ["q_int"]
    assert out["regressions"] == [] and out["run_a"] == "A" and out["run_b"] == "B"


def test_the_text_names_what_differs_and_lists_the_flipped_samples(stage_pair, capsys):
    assert main(["--db", str(stage_pair.path), "compare", "A", "B", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "The runs differ in 1 axis: retriever" in out
    assert '  retriever: retriever: "good" → "bad"' in out
    assert f"  {CELL} retrieval pass→fail: q_ret" in out
    assert f"  {CELL} reasoning fail→pass: q_rea" in out
    assert "Holm" in out


def test_claim_metrics_join_when_both_runs_have_a_claim_run(stage_pair, capsys):
    for run in ("A", "B"):
        assert main(["--db", str(stage_pair.path), "claims", "run", run, "--decomposer", "rule",
                     "--verifiers", "lexical"]) == 0
    cell = compare_runs(stage_pair, "A", "B", resamples=100).cells[0]
    assert cell.claim_samples == 3
    assert {"support_ratio", "faithfulness", "hallucination"} <= set(cell.claims)
    assert cell.claims["faithfulness"].test in ("bootstrap", None)


@pytest.mark.parametrize(("argv", "message"), [
    (["compare", "A", "B", "--cells", "k9-b40-score"], "--cells: run 'A' has no cell 'k9-b40-score' (it has k2-b40-score)"),
    (["compare", "A", "B", "--map", "k2-b40-score"], "--map: expected A_CELL=B_CELL, got 'k2-b40-score'"),
    (["compare", "A", "B", "--map", "k2-b40-score=k1-b1-score"],
     "--map: run 'B' has no cell 'k1-b1-score' (it has k2-b40-score)"),
    (["compare", "A", "B", "--terms", "S_vis,nope"], "--terms: 'nope' is not a ledger term"),
    (["compare", "A", "B", "--fail-on-regression", "K_eff:0.1"], "--fail-on-regression: 'K_eff' has no better direction"),
    (["compare", "A", "B", "--fail-on-regression", "S_llm"], "--fail-on-regression: expected TERM:DELTA"),
    (["compare", "A", "nope"], "no run named 'nope' (known: A, B)"),
])
def test_what_cannot_be_paired_is_refused_with_exit_2(stage_pair, capsys, argv, message):
    assert main(["--db", str(stage_pair.path), *argv]) == 2
    assert message in capsys.readouterr().err


def test_runs_over_different_datasets_are_refused(stage_pair, tiny_dir, capsys):
    import_dataset(stage_pair, tiny_dir, "tiny")
    plan_sweep(stage_pair, SweepConfig(ks=(2,), budgets=(40,), formats=("score",)), dataset="tiny", name="T")
    assert main(["--db", str(stage_pair.path), "compare", "A", "T"]) == 2
    assert "run 'A' is over dataset 'stages' and run 'T' over 'tiny'" in capsys.readouterr().err


def test_no_cell_in_common_is_refused_with_what_each_run_has(stage_pair, capsys):
    plan_sweep(stage_pair, SweepConfig(ks=(1,), budgets=(40,), formats=("score",), retriever="bad"), name="C")
    assert main(["--db", str(stage_pair.path), "compare", "A", "C"]) == 2
    assert ("runs 'A' and 'C' have no cell id in common: map cells with --map A_CELL=B_CELL ('A' has k2-b40-score; "
            "'C' has k1-b40-score)") in capsys.readouterr().err


def test_fail_on_regression_exits_1_only_for_a_drop_beyond_delta_whose_interval_excludes_0(swept_db, capsys):
    # K=1 against K=5 over 300 MetaQA questions: S_set drops by far more than 0.05, reliably.
    base = ["--db", str(swept_db), "compare", "sweep", "sweep", "--cells", "k5-b64-score",
            "--map", "k5-b64-score=k1-b64-score", "--resamples", "300"]
    assert main([*base, "--fail-on-regression", "S_set:0.05"]) == 1
    assert "regression: k5-b64-score: S_set" in capsys.readouterr().err
    assert main([*base, "--fail-on-regression", "S_set:0.9"]) == 0        # the drop is within 0.9
    assert main([*base, "--fail-on-regression", "L_iface:0.05"]) == 0     # lower L_iface is not worse
    capsys.readouterr()


def test_a_gate_on_a_small_sample_does_not_fire_when_the_interval_reaches_0(stage_pair):
    # One sample of three lost its gold: −1/3, but a resample without it shows no drop.
    c = compare_runs(stage_pair, "A", "B", resamples=500)
    assert c.cells[0].terms["S_set"].delta.hi == 0.0
    assert regressions(c, [parse_gate("S_set:0.1")]) == []


def _read_extractively(store, run_name: str, tmp_path) -> None:
    """Score a run without a model: an answer counts when a gold answer is in the prompt's evidence."""
    run = get_run(store, run_name)
    prompts = tmp_path / f"{run_name}.prompts.jsonl"
    with prompts.open("w", encoding="utf-8") as out:
        export_prompts(store, run, out)
    answers = {s.id: s.answers for s in load_samples(store, run.dataset_id)}
    rows = []
    for line in prompts.open(encoding="utf-8"):
        record = json.loads(line)
        evidence = record["messages"][1]["content"].split("Question:")[0]
        hits = [a for a in answers[record["sample_id"]] if a in evidence]
        rows.append({"sample_id": record["sample_id"], "cell_id": record["cell_id"],
                     "prediction": hits[0] if hits else "I don't know"})
    import_predictions(store, run, write_jsonl(tmp_path / f"{run_name}.pred.jsonl", rows))


def test_the_imported_retriever_against_built_in_bm25_shows_retrieval_flips(tmp_path):
    store = open_store(tmp_path / "wb.db")
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    retrieve(store, "metaqa", k=20)
    for name, retriever in (("imported", "bm25-2hop"), ("builtin", "bm25")):
        plan_sweep(store, SweepConfig(ks=(1, 5), budgets=(128,), formats=("score",), retriever=retriever, limit=60),
                   name=name)
        _read_extractively(store, name, tmp_path)
    c = compare_runs(store, "imported", "builtin", resamples=200)
    assert [d.axis for d in c.differences] == ["retriever"]
    retrieval = sum(len(ids) for cell in c.cells for ids in cell.flips["retrieval"].values())
    assert retrieval > 0
    # Every retrieval flip is a sample whose gold path was retrieved on one side only.
    cell = next(cell for cell in c.cells if any(cell.flips["retrieval"].values()))
    assert cell.terms["S_set"].delta.value != 0
    store.close()


def test_a_mean_terms_interval_is_the_paired_bootstrap_of_the_per_sample_differences(swept_db):
    # S_set is a plain mean of H_set: its delta must be paired_mean_difference on the same
    # samples with the same resamples (each sample's weights, keyed by its sid), K=1 against K=5 over 300 questions.
    store = open_store(swept_db)
    c = compare_runs(store, "sweep", "sweep", cells=["k5-b64-score"], cell_map={"k5-b64-score": "k1-b64-score"},
                     terms=["S_set"], resamples=500, seed=3)
    arrays = load_run_arrays(store, get_run(store, "sweep"))
    expected = paired_mean_difference(arrays.arrays["k1-b64-score"].h_set, arrays.arrays["k5-b64-score"].h_set,
                                      resamples=500, seed=3, keys=arrays.sids)  # the samples' own weights
    got = c.cells[0].terms["S_set"].delta
    assert got.value == pytest.approx(expected.value)
    assert (got.lo, got.hi) == (pytest.approx(expected.lo, abs=1e-6), pytest.approx(expected.hi, abs=1e-6))
    store.close()
