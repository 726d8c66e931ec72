"""RAGChecker's output files in and out: its claims and checks kept, its figures reproduced exactly.

A RAGChecker *checking-outputs* file holds, per query, the claims of the response and of the
reference answer and four label matrices (Entailment / Neutral / Contradiction). Imported, they
become a claim run (decomposer ``import``, verifier ``ragchecker``), and ``claims report --json``
must give RAGChecker's figures: per query and overall, to 1e-9 before rounding. The expected
figures come from RAGChecker's own metric code (tests/ragchecker_oracle.py), never from the
workbench's. ``export claims --to ragchecker`` writes the file back, and RAGChecker's code reads it.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.store import open_store

from conftest import copy_db
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from ragchecker_oracle import ragchecker_figures

LABELS = ("Entailment", "Neutral", "Contradiction")

NILE = ("The Nile flows north through eleven countries of northeastern Africa and empties into the "
        "Mediterranean Sea. It is about 6,650 km long.")
AMAZON = "Some measurements make the Amazon River slightly longer than the Nile."
DELTA = "The Nile delta is one of the most fertile regions of Egypt."

#: A hand-written output file: three queries, one with no response claims and one with no contexts.
CHECKED = {
    "results": [
        {"query_id": "nile", "query": "What is the longest river?",
         "gt_answer": "The Nile is the longest river in Africa. It flows into the Mediterranean Sea. "
                      "Some measurements make the Amazon longer.",
         "response": "The Nile is the longest river in the world. It is 6,650 km long. It flows into the Red Sea.",
         "retrieved_context": [{"doc_id": "nile", "text": NILE}, {"doc_id": "amazon", "text": AMAZON},
                               {"doc_id": "delta", "text": DELTA}],
         "response_claims": [["Nile", "is", "longest river in the world"], ["Nile", "is", "6,650 km long"],
                             ["Nile", "flows into", "Red Sea"]],
         "gt_answer_claims": [["Nile", "is", "longest river in Africa"], ["Nile", "flows into", "Mediterranean Sea"],
                              ["Amazon", "may be", "longer than the Nile"]],
         "answer2response": ["Neutral", "Neutral", "Contradiction"],
         "response2answer": ["Entailment", "Neutral", "Neutral"],
         "retrieved2response": [["Neutral", "Contradiction", "Neutral"], ["Entailment", "Neutral", "Neutral"],
                                ["Contradiction", "Neutral", "Neutral"]],
         "retrieved2answer": [["Neutral", "Neutral", "Neutral"], ["Entailment", "Neutral", "Neutral"],
                              ["Neutral", "Entailment", "Neutral"]]},
        {"query_id": "silent", "query": "Which sea does the Nile reach?",
         "gt_answer": "The Nile empties into the Mediterranean Sea.", "response": "",
         "retrieved_context": [{"doc_id": "nile", "text": NILE}],
         "response_claims": [], "gt_answer_claims": [["Nile", "empties into", "Mediterranean Sea"]],
         "answer2response": [], "response2answer": ["Neutral"],
         "retrieved2response": [], "retrieved2answer": [["Entailment"]]},
        {"query_id": "blind", "query": "How long is the Nile?", "gt_answer": "About 6,650 km.",
         "response": "The Nile is about 6,650 km long.", "retrieved_context": [],
         "response_claims": ["The Nile is about 6,650 km long"], "gt_answer_claims": [["Nile", "length", "6,650 km"]],
         "answer2response": ["Entailment"], "response2answer": ["Entailment"],
         "retrieved2response": [[]], "retrieved2answer": [[]]},
    ],
}


@pytest.fixture
def new_db(empty_template, tmp_path):
    """A new workbench database for a test to import into (an empty, migrated one, copied): name -> its path."""
    return lambda name="wb.db": str(copy_db(empty_template, tmp_path / name))


def _write(path, document) -> str:
    path.write_text(json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8")
    return str(path)


def _report_json(db: str, run: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["--db", db, "claims", "report", run, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _assert_equal_figures(report: dict, document: dict) -> None:
    """Every per-query and overall figure of the report equals RAGChecker's, to 1e-9."""
    expected_per, expected_overall = ragchecker_figures(json.dumps(document))
    (cell,) = report["ragchecker"].values()
    assert [q["id"] for q in cell["per_query"]] == [str(r["query_id"]) for r in document["results"]]
    for got, want in zip(cell["per_query"], expected_per):
        for name, value in want.items():
            assert got[name] == pytest.approx(value, abs=1e-9), (got["id"], name)
    for group, names in expected_overall.items():
        for name, value in names.items():
            assert cell["overall"][group][name] == pytest.approx(value, abs=1e-9), (group, name)


def test_an_output_file_keeps_its_claims_and_checks_and_the_report_gives_ragcheckers_figures(tmp_path, new_db, capsys):
    db = new_db()
    assert main(["--db", db, "import", "--from", "ragchecker", _write(tmp_path / "checked.json", CHECKED),
                 "--name", "nile"]) == 0
    out = capsys.readouterr().out
    assert "RAGChecker's claims and checks of 3 responses kept" in out
    report = _report_json(db, "nile", capsys)
    assert report["config"]["decomposer"] == "import" and report["config"]["verifiers"] == ["ragchecker"]
    _assert_equal_figures(report, CHECKED)
    # Where an empty set makes a figure undefined the workbench says None; RAGChecker counts 0. Both are shown.
    cell = next(iter(report["cells"].values()))
    assert cell["precision"]["n"] == 2          # "silent" has no response claims: precision undefined there
    (rc,) = report["ragchecker"].values()
    assert rc["differs"] == 2                   # "silent" (no claims) and "blind" (no contexts)
    capsys.readouterr()
    assert main(["--db", db, "claims", "report", "nile"]) == 0
    text = capsys.readouterr().out
    assert "RAGChecker's convention" in text
    # Its tables, ×100 to one decimal: the cell, 3 answers, 2 of which differ, then precision 33.3.
    assert re.search(r"k3-b\d+-score\s+3\s+2\s+33\.3\s", text)


#: RAGChecker's own ``examples/checking_outputs.json`` (amazon-science/RAGChecker) is not shipped here;
#: point this variable at a copy to check it too: 33 of its 33 figures, and every per-query one.
RAGCHECKER_EXAMPLE = os.environ.get("RAGCHECKER_EXAMPLE")


@pytest.mark.skipif(not RAGCHECKER_EXAMPLE, reason="RAGCHECKER_EXAMPLE names no copy of RAGChecker's example file")
def test_ragcheckers_own_example_file_gives_its_figures(tmp_path, new_db, capsys):
    document = json.loads(Path(RAGCHECKER_EXAMPLE).read_text(encoding="utf-8"))
    db = new_db()
    assert main(["--db", db, "import", "--from", "ragchecker", RAGCHECKER_EXAMPLE, "--name", "rc"]) == 0
    assert "the file's own figures: 33 of 33 equal those its labels give" in capsys.readouterr().out
    _assert_equal_figures(_report_json(db, "rc", capsys), document)


def test_the_claims_and_labels_are_stored_as_the_file_has_them(tmp_path, new_db, capsys):
    db = new_db()
    assert main(["--db", db, "import", "--from", "ragchecker", _write(tmp_path / "checked.json", CHECKED),
                 "--name", "nile"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "claims", "show", "nile", "nile", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [c["text"] for c in shown["claims"]] == ["Nile is longest river in the world", "Nile is 6,650 km long",
                                                     "Nile flows into Red Sea"]
    assert [[u["vote"] for u in c["units"]] for c in shown["claims"]] == [["N", "C", "N"], ["E", "N", "N"],
                                                                          ["C", "N", "N"]]
    assert [c["correct_by"]["ragchecker"] for c in shown["claims"]] == ["N", "N", "C"]
    assert [c["kind"] for c in shown["claims"]] == ["hallucination", "faithful", "hallucination"]
    reference = shown["reference"]
    assert [g["in_response"] for g in reference] == ["E", "N", "N"]
    assert [g["entailing"] for g in reference] == [[], ["C1"], ["C2"]]
    assert [g["missed"] for g in reference] == [False, True, True]


def _random_document(rng: random.Random) -> dict:
    """Random labels over random shapes, empty claim and context sets included."""
    results = []
    for q in range(rng.randint(1, 6)):
        n_ctx, n_claims, n_ref = rng.choice([0, 1, 3]), rng.choice([0, 1, 2, 5]), rng.choice([0, 1, 4])
        label = lambda: rng.choice(LABELS)  # noqa: E731
        results.append({
            "query_id": f"q{q}", "query": f"question {q}?", "gt_answer": f"reference answer {q}",
            "response": f"response {q}",
            "retrieved_context": [{"doc_id": f"d{q}-{j}", "text": f"passage {j} of query {q}"} for j in range(n_ctx)],
            "response_claims": [[f"r{q}", "claim", str(i)] for i in range(n_claims)],
            "gt_answer_claims": [[f"g{q}", "claim", str(g)] for g in range(n_ref)],
            "answer2response": [label() for _ in range(n_claims)],
            "response2answer": [label() for _ in range(n_ref)],
            "retrieved2response": [[label() for _ in range(n_ctx)] for _ in range(n_claims)],
            "retrieved2answer": [[label() for _ in range(n_ctx)] for _ in range(n_ref)]})
    return {"results": results}


@pytest.mark.parametrize("seed", range(12))
def test_random_verdicts_and_empty_sets_give_ragcheckers_figures(tmp_path, new_db, capsys, seed):
    document = _random_document(random.Random(seed))
    db = new_db()
    assert main(["--db", db, "import", "--from", "ragchecker", _write(tmp_path / "r.json", document),
                 "--name", "r"]) == 0
    _assert_equal_figures(_report_json(db, "r", capsys), document)


def test_the_export_is_read_by_ragcheckers_code_with_the_same_figures(tmp_path, new_db, capsys):
    db = new_db()
    document = _random_document(random.Random(99))
    assert main(["--db", db, "import", "--from", "ragchecker", _write(tmp_path / "in.json", document),
                 "--name", "r"]) == 0
    out = tmp_path / "out.json"
    assert main(["--db", db, "export", "claims", "r", "--to", "ragchecker", "--out", str(out)]) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    per_result, overall = ragchecker_figures(out.read_text(encoding="utf-8"))
    expected_per, expected_overall = ragchecker_figures(json.dumps(document))
    assert per_result == pytest.approx(expected_per, abs=1e-12)
    assert written["metrics"] == {g: {k: round(v, 1) for k, v in names.items()} for g, names in overall.items()}
    for a, b in zip(written["results"], document["results"]):
        for field in ("answer2response", "response2answer", "retrieved2response", "retrieved2answer"):
            assert a[field] == b[field], field
        assert [c[0] for c in a["response_claims"]] == [" ".join(c) for c in b["response_claims"]]
    # Imported again, it is the same data: the report's figures do not move.
    db2 = new_db("wb2.db")
    assert main(["--db", db2, "import", "--from", "ragchecker", str(out), "--name", "again"]) == 0
    _assert_equal_figures(_report_json(db2, "again", capsys), document)


def test_the_files_own_figures_are_compared_with_its_labels(tmp_path, new_db, capsys):
    per_result, overall = ragchecker_figures(json.dumps(CHECKED))
    document = json.loads(json.dumps(CHECKED))
    for result, figures in zip(document["results"], per_result):
        result["metrics"] = figures
    document["metrics"] = {g: {k: round(v, 1) for k, v in names.items()} for g, names in overall.items()}
    document["results"][0]["metrics"]["precision"] = 0.5      # a file edited by hand
    db = new_db()
    assert main(["--db", db, "import", "--from", "ragchecker", _write(tmp_path / "f.json", document),
                 "--name", "f"]) == 0
    captured = capsys.readouterr()
    assert "the file's own figures: 43 of 44 equal those its labels give" in captured.out
    assert "results[0] precision: the file says 0.5, its labels give 0.0" in captured.err


@pytest.mark.parametrize("change, field, reason", [
    (lambda r: r["answer2response"].pop(), "$.results[0].answer2response",
     "expected an array of 3 labels (one label per claim of response_claims), got 2"),
    (lambda r: r["retrieved2answer"][1].append("Neutral"), "$.results[0].retrieved2answer[1]",
     "expected an array of 3 labels (one label per retrieved context), got 4"),
    (lambda r: r["response2answer"].__setitem__(0, "entailed"), "$.results[0].response2answer[0]",
     "expected one of Entailment, Neutral, Contradiction, got 'entailed'"),
    (lambda r: r.pop("retrieved2response"), "$.results[0].retrieved2response", "missing: RAGChecker's checks"),
    (lambda r: r["response_claims"].__setitem__(1, {"s": "Nile"}), "$.results[0].response_claims[1]",
     "expected a claim (a triplet of strings, or a string), got object"),
])
def test_checks_that_do_not_fit_their_claims_are_refused_and_nothing_is_written(tmp_path, new_db, capsys, change,
                                                                                field, reason):
    document = json.loads(json.dumps(CHECKED))
    change(document["results"][0])
    path = _write(tmp_path / "bad.json", document)
    db = new_db()
    assert main(["--db", db, "import", "--from", "ragchecker", path, "--name", "bad"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: {field}: {reason}" in err      # results[0] starts on line 3
    store = open_store(db)
    assert store.conn.execute("SELECT count(*) FROM datasets").fetchone()[0] == 0
    assert store.conn.execute("SELECT count(*) FROM claim_runs").fetchone()[0] == 0


def test_a_file_with_checks_on_some_results_only_is_refused(tmp_path, new_db, capsys):
    document = json.loads(json.dumps(CHECKED))
    for field in ("response_claims", "gt_answer_claims", "answer2response", "response2answer", "retrieved2response",
                  "retrieved2answer"):
        del document["results"][1][field]
    path = _write(tmp_path / "mixed.json", document)
    assert main(["--db", new_db(), "import", "--from", "ragchecker", path, "--name", "m"]) == 2
    assert "$.results[1].response_claims: missing: 2 other results hold RAGChecker's claims and checks" \
        in capsys.readouterr().err
