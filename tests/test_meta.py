"""`meta run` and `meta report`: how far each checker agrees with people, as RAGChecker's meta-evaluation measures it.

The shared half of RAGChecker's human preference data (sample_data/ragchecker-meta) is the
fixture: 140 instances, two annotators each. The report's annotator and RAGChecker rows are
recomputed here straight from the files with scipy, the way RAGChecker's meta_eval.py does.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading

import numpy as np
import pytest
from scipy import stats

from conftest import SAMPLE_META, wait_for_rows
from workbench.claims.runner import ClaimsConfig
from workbench.cli import main
from workbench.data.meta_import import import_meta
from workbench.meta.report import meta_report, preference_rows, rows_json
from workbench.meta.run import run_meta
from workbench.meta.sets import LABELS, get_meta_set
from workbench.models.embedders import E5
from workbench.store import open_store

HUMAN = json.loads((SAMPLE_META / "human_labeled_data.json").read_text(encoding="utf-8"))
BASELINE = json.loads((SAMPLE_META / "baseline_ragchecker.json").read_text(encoding="utf-8"))
#: The README of sample_data/ragchecker-meta: Pearson ×100 on this half.
README = {"annotators": (68.21, 72.11, 74.64), "ragchecker": (38.86, 64.95, 63.76)}


def _scipy_figures(label: str) -> dict[str, tuple[float, float]]:
    """meta_eval.py's arithmetic, by hand: each instance's delta repeated for its two labels; annotator 2i vs 2i+1."""
    human = np.array([e[f"{label}_label"] for e in HUMAN], dtype=float)
    delta = np.array([b["model2"]["ragchecker"][f"{label}_label"] - b["model1"]["ragchecker"][f"{label}_label"]
                      for b in BASELINE])
    x = np.repeat(delta, 2)
    return {"annotators": (100 * stats.pearsonr(human[0::2], human[1::2])[0],
                           100 * stats.spearmanr(human[0::2], human[1::2])[0]),
            "ragchecker": (100 * stats.pearsonr(x, human)[0], 100 * stats.spearmanr(x, human)[0])}


def test_the_annotator_and_ragchecker_rows_are_the_readmes_figures_computed_from_the_files(meta_db):
    store = open_store(meta_db)
    rows = meta_report(store, get_meta_set(store, "rc"), resamples=200)
    for i, label in enumerate(LABELS):
        mine = {r.kind: r for r in rows if r.label == label and r.kind in ("annotators", "baseline")}
        by_hand = _scipy_figures(label)
        for kind, scorer in (("annotators", "annotators"), ("baseline", "ragchecker")):
            row = mine[kind]
            assert row.pearson.value == pytest.approx(by_hand[scorer][0], abs=1e-9)
            assert row.spearman.value == pytest.approx(by_hand[scorer][1], abs=1e-9)
            assert round(row.pearson.value, 2) == README[scorer][i]
            assert row.pearson.lo <= row.pearson.value <= row.pearson.hi
        assert (mine["annotators"].n, mine["baseline"].n) == (140, 280)


def test_every_label_has_the_annotators_the_baseline_the_claim_run_and_the_length(meta_db):
    store = open_store(meta_db)
    rows = meta_report(store, get_meta_set(store, "rc"), resamples=100)
    for label in LABELS:
        kinds = [r.kind for r in rows if r.label == label]
        assert kinds == ["annotators", "baseline", "claims", "length"]
    claim_rows = [r for r in rows if r.kind == "claims"]
    assert [r.scorer.rsplit(" · ", 1)[1] for r in claim_rows] == ["precision", "recall", "f1"]
    # A response with no claim has no precision: its instance leaves the correctness row, and n says so.
    assert all(r.n <= 280 for r in claim_rows) and claim_rows[1].n == 280


def test_report_json_is_a_list_of_rows_with_the_fields_a_script_reads(meta_db, capsys):
    assert main(["--db", str(meta_db), "meta", "report", "rc", "--json", "--resamples", "100"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and len(rows) == 12
    for row in rows:
        assert {"label", "scorer", "pearson", "spearman", "low", "high", "n"} <= set(row)
        assert row["label"] in LABELS
        assert row["low"] <= row["pearson"] <= row["high"]
    annotators = next(r for r in rows if r["scorer"] == "annotators" and r["label"] == "overall")
    assert round(annotators["pearson"], 2) == 74.64


def test_the_text_report_groups_the_scorers_by_label(meta_db, capsys):
    assert main(["--db", str(meta_db), "meta", "report", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert out.index("\ncorrectness\n") < out.index("\ncompleteness\n") < out.index("\noverall\n")
    assert "annotators" in out and "ragchecker.overall_label" in out and "63.76 [" in out
    assert "length (words)" in out


def test_a_stopped_meta_run_resumes_without_checking_anything_twice_and_is_listed_beside_the_first(meta_db):
    """A second configuration (another lexical threshold than the template's run), stopped and resumed: no response
    is checked twice, and the report then lists its claim rows beside the first configuration's."""
    store = open_store(meta_db)
    meta = get_meta_set(store, "rc")
    config = ClaimsConfig(decomposer="rule", verifiers=("lexical",), lexical_threshold=0.4)
    stop = threading.Event()
    first = run_meta(store, meta, config, similarity=False, stop=stop,
                     progress=lambda done, total, r: stop.set() if done >= 150 else None)
    assert first.stopped and 150 <= first.done < 280
    second = run_meta(store, meta, config, similarity=False)
    assert second.done == 280 - first.done and not second.stopped
    assert run_meta(store, meta, config, similarity=False).jobs == 0
    overall = [r for r in meta_report(store, meta, resamples=50) if r.label == "overall" and r.kind == "claims"]
    assert len(overall) == 2 and overall[0].config["lexical_threshold"] != overall[1].config["lexical_threshold"]


def test_judge_report_claims_shows_the_preferences_beside_kappa(meta_db, capsys):
    assert main(["--db", str(meta_db), "judge", "report", "claims", "rc.model1", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "agreement with people's preferences" in out and "rc" in out and "74.64" in out
    assert main(["--db", str(meta_db), "judge", "report", "claims", "rc.model1", "--json", "--resamples", "100"]) == 0
    preferences = json.loads(capsys.readouterr().out)["preferences"]
    assert {p["meta_set"] for p in preferences} == {"rc"} and {p["label"] for p in preferences} == {"overall"}


def test_the_html_report_lists_the_checkers_against_peoples_preferences(meta_db, tmp_path):
    out = tmp_path / "report.html"
    assert main(["--db", str(meta_db), "report", "rc.model1", "--out", str(out), "--resamples", "100"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "Checkers against people" in html and "ragchecker.overall_label" in html


def test_without_a_meta_set_nothing_is_added_to_the_judge_reports(tiny_swept_db):
    store = open_store(tiny_swept_db)
    assert preference_rows(store) == []


@pytest.mark.real_model
@pytest.mark.budget(30)
def test_the_default_offline_checker_and_the_similarity_run_then_a_second_run_does_no_model_work(tmp_path, capsys):
    """One instance (its two responses, two annotators) of the shared half, through the CLI with its defaults:
    rule + lexical, embedding, then the whole-answer similarity. The figures are not asserted (one instance):
    the subject is what runs and what a second run asks, which one instance shows as well as many."""
    human = tmp_path / "human.json"
    human.write_text(json.dumps(HUMAN[:2], indent=1), encoding="utf-8")
    db = str(tmp_path / "wb.db")
    store = open_store(db)
    import_meta(store, human, "one")
    store.close()
    assert main(["--db", db, "meta", "run", "one"]) == 0
    err = capsys.readouterr().err
    assert "meta run over one" in err and "similarity with" in err
    store = open_store(db)
    meta = get_meta_set(store, "one")
    assert store.conn.execute("SELECT count(*) FROM meta_scores WHERE set_id = ? AND scorer = 'similarity'",
                              (meta.id,)).fetchone()[0] == 2
    config = json.loads(store.conn.execute("SELECT config FROM claim_runs LIMIT 1").fetchone()[0])
    assert (config["decomposer"], config["verifiers"], config["ties"]) == ("rule", ["lexical", "embedding"], "supported")
    # The default embedder, and its own threshold for a long answer's claims, are what the run records.
    assert (config["embedding_model"], config["embedding_threshold"]) == ("multilingual-e5-small", E5.long_answers)
    store.close()
    assert main(["--db", db, "meta", "run", "one", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["jobs"], again["model_calls"], again["embedded"]) == (0, 0, 0)
    rows = rows_json(meta_report(open_store(db), get_meta_set(open_store(db), "one"), resamples=50))
    assert {r["kind"] for r in rows} == {"annotators", "claims", "similarity", "length"}
    assert {r["scorer"] for r in rows if r["kind"] == "similarity"} == {"similarity (multilingual-e5-small)"}


def test_a_meta_run_killed_with_9_resumes_and_finishes_with_every_response_checked_once(meta_db):
    """The claim passes commit each response whole: a `kill -9` loses at most the one in progress."""
    argv = [sys.executable, "-m", "workbench.cli", "--db", str(meta_db), "meta", "run", "rc", "--verifiers", "lexical",
            "--lexical-threshold", "0.45", "--no-similarity"]
    jobs = ("SELECT count(*) FROM claim_jobs j JOIN claim_runs c ON c.id = j.claim_run_id"
            " WHERE j.status = 'done' AND json_extract(c.config, '$.lexical_threshold') = 0.45")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_rows(meta_db, jobs, 30, proc)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    con = sqlite3.connect(meta_db)
    done_at_kill = con.execute(jobs).fetchone()[0]
    con.close()
    assert 30 <= done_at_kill < 280
    # The rerun in this process, as the command line runs it (a second CLI process proves nothing more).
    assert main(argv[3:]) == 0
    con = sqlite3.connect(meta_db)
    assert con.execute(jobs).fetchone()[0] == 280
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
