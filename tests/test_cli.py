"""The CLI verbs as a user meets them: help, ledger, plot and export."""

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import build_parser, main


def _verb_paths(parser, path=()):
    """Every verb and sub-verb of the parser tree, found by walking its subparsers (none is hand-listed)."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _verb_paths(child, (*path, name))


VERBS = list(_verb_paths(build_parser()))


def test_the_walk_finds_the_nested_verbs():
    # A guard on the walk itself: it must reach sub-verbs, not just the top level.
    assert {("claims", "report"), ("searchain", "run"), ("dedup", "run"), ("retrieval", "eval")} <= set(VERBS)


@pytest.mark.parametrize("verb", VERBS, ids=[" ".join(v) or "workbench" for v in VERBS])
def test_every_verb_has_help(verb, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*verb, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: workbench {' '.join(verb)}".rstrip())
    assert len(out.splitlines()) > 2  # the usage line and at least the option list


def test_the_top_level_help_shows_a_newcomer_the_first_steps(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "first steps:" in out and "workbench import sample_data/metaqa" in out and "? lists its keys" in out
    assert "``" not in out  # no docstring markup leaking into what a user reads
    assert max(len(line) for line in out.splitlines()) <= 100


def test_ledger_json_has_one_object_per_cell_with_intervals(metaqa_db, capsys):
    assert main(["--db", str(metaqa_db), "ledger", "sweep", "--json", "--resamples", "200"]) == 0
    cells = json.loads(capsys.readouterr().out)
    retrieval = [c for c in cells if c["kind"] == "retrieval"]
    assert len(retrieval) == 5 * 3 * 3
    for cell in retrieval:
        for term in ("S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak",
                     "K_eff", "evidence_tokens", "truncated"):
            assert set(cell[term]) == {"value", "lo", "hi"}, term
        assert cell["S_llm"]["value"] is None  # no generations yet: undefined, never 0
        assert cell["S_set"]["lo"] <= cell["S_set"]["value"] <= cell["S_set"]["hi"]
    assert {c["budget"] for c in cells if c["kind"] == "oracle"} == {64, 128, 256}


def test_ledger_table_shows_dashes_for_undefined_terms(metaqa_db, capsys):
    assert main(["--db", str(metaqa_db), "ledger", "sweep", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "S_set" in out and "L_iface" in out and "K_eff" in out
    assert "—" in out


def test_paired_difference_between_cells(metaqa_db, capsys):
    assert main(["--db", str(metaqa_db), "ledger", "sweep", "--diff", "k20-b64-score", "k20-b256-score",
                 "--term", "S_vis", "--json", "--resamples", "300"]) == 0
    diff = json.loads(capsys.readouterr().out)["difference"]
    # A tighter budget can only hide gold lines: the paired difference is ≤ 0 everywhere.
    assert diff["value"] < 0 and diff["hi"] <= 0


def test_plot_draws_the_main_and_oracle_figures(metaqa_db, tmp_path, capsys):
    assert main(["--db", str(metaqa_db), "plot", "sweep", "--budget", "64", "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert "S_set" in out and "S_vis" in out and "K (top-K retrieved)" in out
    assert main(["--db", str(metaqa_db), "plot", "sweep", "--oracle", "--out", str(tmp_path / "o.txt"),
                 "--resamples", "50"]) == 0
    assert "B (evidence token budget)" in (tmp_path / "o.txt").read_text(encoding="utf-8")
    assert main(["--db", str(metaqa_db), "plot", "sweep", "--out", str(tmp_path / "m.html"),
                 "--resamples", "50"]) == 0
    assert "<html" in (tmp_path / "m.html").read_text(encoding="utf-8").lower()


def test_export_events_has_the_documented_fields(metaqa_db, tmp_path):
    out = tmp_path / "events.csv"
    assert main(["--db", str(metaqa_db), "export", "events", "sweep", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    for field in ("sample_id", "cell_id", "k", "budget", "format", "h_set", "h_vis", "k_eff", "evidence_tokens",
                  "truncated", "score"):
        assert field in rows[0]
    retrieval = [r for r in rows if not r["cell_id"].startswith("oracle")]
    assert len(retrieval) == 300 * 45
    assert all(r["score"] == "" for r in rows)  # null until generated


def test_export_ledger_jsonl_and_csv(metaqa_db, tmp_path):
    assert main(["--db", str(metaqa_db), "export", "ledger", "sweep", "--out", str(tmp_path / "l.jsonl"),
                 "--resamples", "50"]) == 0
    first = json.loads((tmp_path / "l.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert set(first["S_vis"]) == {"value", "lo", "hi"}
    assert main(["--db", str(metaqa_db), "export", "ledger", "sweep", "--out", str(tmp_path / "l.csv"),
                 "--resamples", "50"]) == 0
    header = (tmp_path / "l.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert {"S_vis", "S_vis_lo", "S_vis_hi"} <= set(header)


def test_export_refuses_a_directory_and_a_missing_parent(metaqa_db, tmp_path, capsys):
    assert main(["--db", str(metaqa_db), "export", "events", "sweep", "--out", str(tmp_path)]) == 2
    assert main(["--db", str(metaqa_db), "export", "events", "sweep", "--out",
                 str(tmp_path / "no" / "such" / "e.csv")]) == 2
    assert "directory does not exist" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_unknown_run_and_empty_database_give_clear_messages(tmp_path, capsys):
    db = str(tmp_path / "empty.db")
    # The real binary's exit code and its one line; the next two are the same entry point, in process.
    r = subprocess.run([sys.executable, "-m", "workbench.cli", "--db", db, "ledger"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr == f"error: {db}: no such database\n"    # a reader creates nothing
    assert not Path(db).exists()
    assert main(["--db", db, "sweep", "--k", "1", "--budget", "8"]) == 2
    assert "no dataset imported yet" in capsys.readouterr().err
    assert main(["--db", db, "ledger"]) == 2
    assert "no run yet" in capsys.readouterr().err


def test_tags_exclude_samples_from_the_ledger_and_export(tmp_path, tiny_store, capsys):
    from workbench.runs.sweep import SweepConfig, plan_sweep

    plan_sweep(tiny_store, SweepConfig(ks=(1, 3), budgets=(256,), formats=("score",)), name="s")
    db = str(tiny_store.path)
    assert main(["--db", db, "tag", "q3", "annotation-error"]) == 0
    assert main(["--db", db, "ledger", "s", "--json", "--resamples", "50", "--exclude-tag", "annotation-error"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "ledger", "s", "--json", "--resamples", "50", "--exclude-tag", "annotation-error"]) == 0
    cells = {c["cell_id"]: c for c in json.loads(capsys.readouterr().out)}
    # q3 never retrieves its gold path; without it, K=3 finds every remaining gold path.
    assert cells["k3-b256-score"]["n"]["value"] == 2 and cells["k3-b256-score"]["S_set"]["value"] == 1.0
    out = tmp_path / "tagged.jsonl"
    assert main(["--db", db, "tags", "export", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows == [{"sample_id": "q3", "question": "what language is Rosetta in", "answers": ["French"],
                     "tags": ["annotation-error"], "note": ""}]
    assert main(["--db", db, "tag", "q3", "annotation-error", "--remove"]) == 0
    assert main(["--db", db, "tag", "nope", "x"]) == 2


def test_tag_names_the_dataset_it_tagged_in_and_refuses_an_id_two_datasets_hold(tmp_path, tiny_store, tiny_dir, capsys):
    from workbench.data.importer import import_dataset

    db = str(tiny_store.path)
    assert main(["--db", db, "tag", "q1", "alias-miss"]) == 0
    assert capsys.readouterr().out == "q1 (dataset tiny): alias-miss\n"
    import_dataset(tiny_store, tiny_dir, "tiny-again")         # the same ids, imported a second time
    # Once it tagged the newest import without a word; now it asks which.
    assert main(["--db", db, "tag", "q1", "format-fail"]) == 2
    assert "sample 'q1' is in 2 datasets (tiny, tiny-again): pass --dataset NAME" in capsys.readouterr().err
    assert main(["--db", db, "tag", "q1", "format-fail", "--dataset", "tiny-again"]) == 0
    assert capsys.readouterr().out == "q1 (dataset tiny-again): format-fail\n"
    assert main(["--db", db, "tag", "nope", "x"]) == 2
    assert "no dataset has a sample 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, verb", [
    (["compare", "a", "b", "--threads", "0"], "workbench compare"),
    (["claims", "report", "--bogus"], "workbench claims report"),
    (["retrieve", "x", "--shuffles", "2"], "workbench retrieve"),
    (["--bogus"], "workbench"),
])
def test_an_unknown_argument_is_named_by_the_verb_it_was_given_to(argv, verb, capsys):
    # Once every unknown argument read `workbench: error:`, whatever the verb.
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith(f"usage: {verb} ")
    assert f"{verb}: error: unrecognized arguments: " in err
