"""``workbench import --from ragchecker``: RAGChecker's input JSON becomes a dataset and a run.

The test document has four queries. Each response is written so that the rule decomposer
cuts it into its sentences, and every sentence is either copied word for word from one of
its query's retrieved contexts or shares almost no word with any of them; the lexical
verdict (claim-token coverage ≥ 0.6) is then beyond doubt, and the test checks both facts
before it relies on them.

========  ==================================================  =================  =============
query     claims of the response (the rule decomposer)         supported by       faithfulness
========  ==================================================  =================  =============
q1        "The Eiffel Tower stands in Paris"                   wiki/eiffel        2/3
          "The tower was completed in 1889"                    wiki/eiffel
          "Its elevators run on solar energy"                  nothing (made up)
q2        "Tokyo is the capital of Japan"                      its one context    1
                                                               (it has no doc_id)
q3        "Mount Everest is the highest mountain on Earth"     wiki/everest       1/2
          "Climbers reach the summit by helicopter daily"      nothing (made up)
q4        "Water boils at 100 degrees Celsius"                 nothing: q4 has    0
                                                               no contexts
========  ==================================================  =================  =============

Faithfulness of the run = the mean over the answers = (2/3 + 1 + 1/2 + 0) / 4 = 13/24.

The answers are scored with ``cover`` (the gold answer contained in the response): q1 "Paris",
q2 "Tokyo" and q3 "Mount Everest" are in their responses, q4's "212 degrees Fahrenheit" is
not, so S_llm = 3/4. RAGChecker data has no gold paths, so the ledger's H_set/H_vis terms
cannot be computed: the ledger says so in a warning line.
"""

from __future__ import annotations

import json
import re
import sqlite3
from fractions import Fraction

import pytest

from conftest import copy_db
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_dataset, get_run, load_retrieval, load_samples

CONTEXTS = {
    "eiffel": {"doc_id": "wiki/eiffel", "text": "The Eiffel Tower stands in Paris. The tower was completed in 1889."},
    "louvre": {"doc_id": "wiki/louvre", "text": "The Louvre museum displays the Mona Lisa."},
    "tokyo": {"text": "Tokyo is the capital of Japan."},      # RAGChecker's doc_id is optional
    "everest": {"doc_id": "wiki/everest", "text": "Mount Everest is the highest mountain on Earth."},
}

RESULTS = [
    {"query_id": "q1", "query": "Where is the Eiffel Tower?", "gt_answer": "Paris",
     "response": "The Eiffel Tower stands in Paris. The tower was completed in 1889. Its elevators run on solar energy.",
     "retrieved_context": [CONTEXTS["eiffel"], CONTEXTS["louvre"]]},
    {"query_id": "q2", "query": "What is the capital of Japan?", "gt_answer": "Tokyo",
     "response": "Tokyo is the capital of Japan.",
     "retrieved_context": [CONTEXTS["tokyo"]]},
    {"query_id": "q3", "query": "What is the highest mountain?", "gt_answer": "Mount Everest",
     "response": "Mount Everest is the highest mountain on Earth. Climbers reach the summit by helicopter daily.",
     "retrieved_context": [CONTEXTS["everest"], CONTEXTS["louvre"]]},
    # No retrieved_context at all (optional in RAGChecker): nothing can support this answer.
    {"query_id": "q4", "query": "At what temperature does water boil?", "gt_answer": "212 degrees Fahrenheit",
     "response": "Water boils at 100 degrees Celsius."},
]

# The claims the rule decomposer must produce: the sentences of each response.
EXPECTED_CLAIMS = {r["query_id"]: [s.rstrip(".") for s in re.split(r"(?<=\.) ", r["response"])] for r in RESULTS}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _hand_support(claim: str, contexts: list[dict]) -> str | None:
    """The text of the context that holds every word of ``claim``, or None when no context holds
    even a third of its words. Anything in between would make the lexical verdict a matter of
    its tokenizer and threshold: the test data must not have it."""
    words = _words(claim)
    coverage = {c["text"]: len(words & _words(c["text"])) / len(words) for c in contexts}
    full = [text for text, cov in coverage.items() if cov == 1.0]
    if full:
        return full[0]
    assert all(cov < 1 / 3 for cov in coverage.values()), f"ambiguous test claim {claim!r}: {coverage}"
    return None


def _hand_faithfulness() -> Fraction:
    per_answer = []
    for r in RESULTS:
        claims = EXPECTED_CLAIMS[r["query_id"]]
        supported = [_hand_support(c, r.get("retrieved_context", [])) is not None for c in claims]
        per_answer.append(Fraction(sum(supported), len(claims)))
    return sum(per_answer) / len(per_answer)


def _document(results) -> str:
    """RAGChecker's JSON with result i on line i + 2, so that the expected line numbers are plain."""
    return '{"results": [\n' + ",\n".join(json.dumps(r, ensure_ascii=False) for r in results) + "\n]}\n"


@pytest.fixture
def db(tmp_path, empty_template):
    return copy_db(empty_template, tmp_path / "wb.db")


@pytest.fixture
def rc_file(tmp_path):
    path = tmp_path / "rag_results.json"
    path.write_text(_document(RESULTS), encoding="utf-8")
    return path


def _cli(db, *argv) -> int:
    return main(["--db", str(db), *argv])


def _counts(db) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("datasets", "units", "samples", "retrievals", "runs", "cells", "events", "evidence")}
    finally:
        conn.close()


def test_hand_computed_faithfulness_is_thirteen_twenty_fourths():
    # The table of the module docstring, recomputed from the words of the test data.
    assert _hand_faithfulness() == Fraction(13, 24)


def test_import_claims_run_and_report_give_the_hand_computed_faithfulness(db, rc_file, capsys):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    out = capsys.readouterr().out
    assert "rc: imported: 4 chunks" in out and "4 samples" in out and "4 of 4 responses scored (cover)" in out

    assert _cli(db, "claims", "run", "rc", "--decomposer", "rule", "--verifiers", "lexical") == 0
    capsys.readouterr()
    for r in RESULTS:
        assert _cli(db, "claims", "show", "rc", r["query_id"], "--json") == 0
        shown = json.loads(capsys.readouterr().out)
        claims = shown["claims"]
        assert [c["text"] for c in claims] == EXPECTED_CLAIMS[r["query_id"]]
        for c in claims:
            hand = _hand_support(c["text"], r.get("retrieved_context", []))
            assert c["supported"] is (hand is not None), c
            assert (c["best_unit"] or {}).get("text") == hand

    assert _cli(db, "claims", "report", "rc", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    (cell_id, cell), = report["cells"].items()
    assert re.fullmatch(r"k2-b\d+-score", cell_id)
    assert cell["jobs"] == 4
    assert cell["faithfulness"]["mean"] == pytest.approx(float(_hand_faithfulness()), abs=1e-12)
    # Faithfulness, hallucination and self-knowledge add up to 1 on every answer; no claim here
    # contains its gold answer except q1's first and q3's first, both supported.
    assert cell["hallucination"]["mean"] == pytest.approx(1 - float(_hand_faithfulness()), abs=1e-12)
    assert cell["self_knowledge"]["mean"] == 0.0


def test_what_the_import_writes(db, rc_file):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    store = open_store(db)
    try:
        ds = get_dataset(store, "rc")
        assert ds.unit_kind == "chunk"
        units = {row[0]: row[1:] for row in store.conn.execute(
            "SELECT uid, chunk_id, doc_id, text FROM units WHERE dataset_id = ? ORDER BY uid", (ds.id,))}
        # The distinct retrieved texts (wiki/louvre is retrieved twice, stored once), keyed by doc_id;
        # the context without doc_id is keyed by its text's hash and has no parent document.
        assert [u[0] for u in units.values()][:2] == ["wiki/eiffel", "wiki/louvre"]
        assert [u[2] for u in units.values()] == [CONTEXTS[k]["text"] for k in ("eiffel", "louvre", "tokyo", "everest")]
        assert units[3][0].startswith("text:") and units[3][1] is None
        samples = load_samples(store, ds.id)
        assert [(s.id, s.question, s.answers, s.gold_paths) for s in samples] == [
            (r["query_id"], r["query"], [r["gt_answer"]], []) for r in RESULTS]
        assert load_retrieval(store, ds.id, "ragchecker") == {1: [1, 2], 2: [3], 3: [4, 2], 4: []}

        run = get_run(store, "rc")
        assert run.retriever == "ragchecker" and run.config["formats"] == ["score"] and run.config["ks"] == [2]
        assert run.config["undefined_terms"] == ["S_set", "S_vis", "L_iface", "Acc_hit", "Acc_miss", "D_rate",
                                                 "D_mass", "L_leak"]
        events = store.conn.execute(
            "SELECT sid, prediction, score, status, source, h_set, h_vis, k_eff, truncated, visible FROM events"
            " WHERE run_id = ? ORDER BY sid", (run.id,)).fetchall()
        assert [(e[0], e[1]) for e in events] == [(i, r["response"]) for i, r in enumerate(RESULTS, start=1)]
        assert [e[2] for e in events] == [1.0, 1.0, 1.0, 0.0]
        assert {e[3:7] for e in events} == {("done", "import", 0, 0)}
        # B is the longest evidence: every window shows every context, none is cut.
        assert [(e[7], e[8], json.loads(e[9])) for e in events] == [
            (2, 0, [1, 2]), (1, 0, [3]), (2, 0, [4, 2]), (0, 0, [])]
    finally:
        store.close()


def test_optional_fields_and_repeated_doc_ids(db, tmp_path, capsys):
    """A null query_id (RAGChecker's LlamaIndex integration writes one) is named by position; a
    doc_id seen with two texts gives two chunks of one document; other fields (metrics, ...) are
    ignored. (An output file's claims and checks are kept: tests/test_ragchecker_checks.py.)"""
    results = [
        {"query_id": None, "query": "Q one?", "gt_answer": "A", "response": "A.",
         "retrieved_context": [{"doc_id": "doc", "text": "First passage."}],
         "metrics": {"faithfulness": 1.0}, "extra": [1, 2]},
        {"query_id": 7, "query": "Q two?", "gt_answer": "B", "response": "B.",
         "retrieved_context": [{"doc_id": "doc", "text": "Second passage."}, {"doc_id": None, "text": "Loose."}]},
    ]
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"results": results, "metrics": {"overall_metrics": {}}}), encoding="utf-8")
    assert _cli(db, "import", "--from", "ragchecker", str(path)) == 0
    captured = capsys.readouterr()
    assert "1 result of" in captured.err and "had no query_id" in captured.err
    store = open_store(db)
    try:
        ds = get_dataset(store, "out")                      # the file name without extension
        assert [s.id for s in load_samples(store, ds.id)] == ["0", "7"]
        chunks = store.conn.execute("SELECT chunk_id, doc_id FROM units WHERE dataset_id = ? ORDER BY uid",
                                    (ds.id,)).fetchall()
        assert chunks[:2] == [("doc#1", "doc"), ("doc#2", "doc")]
    finally:
        store.close()


def _bad(results_or_text):
    return results_or_text if isinstance(results_or_text, (str, bytes)) else _document(results_or_text)


def _with(i, **change):
    rows = [dict(r) for r in RESULTS]
    rows[i].update(change)
    return [{k: v for k, v in r.items() if v is not _DROP} for r in rows]


_DROP = object()

BAD = [
    ("missing response", _with(2, response=_DROP), r"bad\.json:4: \$\.results\[2\]\.response: missing"),
    ("gt_answer not a string", _with(0, gt_answer=["Paris"]),
     r"bad\.json:2: \$\.results\[0\]\.gt_answer: expected a string, got array"),
    ("context without text", _with(1, retrieved_context=[{"doc_id": "x"}]),
     r"bad\.json:3: \$\.results\[1\]\.retrieved_context\[0\]\.text: missing"),
    ("context not an object", _with(3, retrieved_context=["just text"]),
     r"bad\.json:5: \$\.results\[3\]\.retrieved_context\[0\]: expected an object"),
    ("duplicate query id", _with(3, query_id="q1"),
     r"bad\.json:5: \$\.results\[3\]\.query_id: duplicate query id 'q1' \(first at results\[0\], line 2\)"),
    ("the same context twice", _with(0, retrieved_context=[CONTEXTS["eiffel"], CONTEXTS["eiffel"]]),
     r"bad\.json:2: \$\.results\[0\]\.retrieved_context\[1\]: the same context as retrieved_context\[0\]"),
    ("a result that is not an object", RESULTS[:3] + ["q4"],
     r"bad\.json:5: \$\.results\[3\]: expected an object, got string"),
    ("repeated key", '{"results": [\n{"query_id": "a", "query_id": "b"}\n]}',
     r"bad\.json:2: \$\.results\[0\]\.query_id: duplicate key 'query_id'"),
    ("malformed JSON", '{"results": [\n{"query_id": "a",\n', r"bad\.json:3: \$: malformed JSON"),
    ("no results", '{"data": []}', r'bad\.json:1: \$\.results: missing'),
    ("empty results", '{"results": []}', r"bad\.json:1: \$\.results: must not be empty"),
    ("not an object", "[1, 2]", r"bad\.json:1: \$: expected an object"),
    ("not UTF-8", b'{"results": [\n{"query": "\xff"}]}', r"bad\.json:2: \$: not valid UTF-8"),
]


@pytest.mark.parametrize("content,expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_files_are_refused_with_their_place_and_nothing_is_written(db, rc_file, tmp_path, capsys, content,
                                                                        expected):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "good") == 0
    before = _counts(db)
    bad = tmp_path / "bad.json"
    text = _bad(content)
    bad.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    capsys.readouterr()
    assert _cli(db, "import", "--from", "ragchecker", str(bad), "--name", "bad") == 2
    err = capsys.readouterr().err
    assert "input rejected, nothing was written" in err
    assert re.search(expected, err), err
    assert _counts(db) == before


def test_reimport_is_a_no_op_and_other_content_needs_replace(db, rc_file, capsys):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    before = _counts(db)
    capsys.readouterr()
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    assert "unchanged (already imported)" in capsys.readouterr().out
    assert _counts(db) == before

    changed = [dict(r) for r in RESULTS]
    changed[3]["response"] = "Water boils at 212 degrees Fahrenheit."
    rc_file.write_text(_document(changed), encoding="utf-8")
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 2
    assert "already exists with different content; pass --replace" in capsys.readouterr().err
    assert _counts(db) == before
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc", "--replace") == 0
    assert "replaced dataset rc: deleted 4 samples, 4 units" in capsys.readouterr().err
    assert _counts(db) == before
    store = open_store(db)
    try:
        run = get_run(store, "rc")
        assert store.conn.execute("SELECT prediction, score FROM events WHERE run_id = ? AND sid = 4",
                                  (run.id,)).fetchone() == (changed[3]["response"], 1.0)
    finally:
        store.close()


def test_a_run_name_held_over_another_dataset_is_refused(db, rc_file, capsys):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    store = open_store(db)
    try:
        plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), dataset="rc", name="other")
    finally:
        store.close()
    before = _counts(db)
    capsys.readouterr()
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "other") == 2
    assert "run 'other' already exists (over dataset 'rc')" in capsys.readouterr().err
    assert _counts(db) == before


def test_score_needs_from_ragchecker(db, tmp_path, capsys):
    assert _cli(db, "import", str(tmp_path), "--score", "acc") == 2
    assert "--score goes with --from ragchecker" in capsys.readouterr().err


def test_ledger_warns_that_gold_path_terms_cannot_be_computed(db, rc_file, capsys):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    capsys.readouterr()
    assert _cli(db, "ledger", "rc", "--resamples", "200") == 0
    out = capsys.readouterr().out
    assert ("warning: no gold paths (RAGChecker data has none): S_set, S_vis, L_iface, Acc_hit, Acc_miss, "
            "D_rate, D_mass and L_leak cannot be computed for this run") in out
    assert _cli(db, "ledger", "rc", "--json", "--resamples", "200") == 0
    (cell,) = json.loads(capsys.readouterr().out)
    # What needs no gold path is computed: S_llm over the cover scores, K_eff, no truncation.
    assert cell["S_llm"]["value"] == pytest.approx(0.75)
    assert cell["K_eff"]["value"] == pytest.approx((2 + 1 + 2 + 0) / 4)
    assert cell["truncated"]["value"] == 0.0


def test_ledger_shows_gold_path_terms_as_undefined(db, rc_file, capsys):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    capsys.readouterr()
    assert _cli(db, "ledger", "rc", "--json", "--resamples", "200") == 0
    (cell,) = json.loads(capsys.readouterr().out)
    for term in ("S_set", "S_vis", "L_iface", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak"):
        assert cell[term]["value"] is None, term
    assert _cli(db, "ledger", "rc", "--resamples", "200") == 0
    table = capsys.readouterr().out.split("Retrieval and interface\n")[1]
    row = table.splitlines()[2].split()
    assert row[4:7] == ["—", "—", "—"]       # S_set, S_vis, L_iface: undefined, not 0


def test_an_imported_run_has_a_manifest_of_what_it_was_made_from(db, rc_file, capsys):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    capsys.readouterr()
    assert _cli(db, "runs", "show", "rc", "--json") == 0
    manifest = json.loads(capsys.readouterr().out)["manifest"]
    assert manifest["recorded"] == "when imported" and manifest["model"] is None
    assert manifest["dataset"]["samples"] == 4 and manifest["dataset"]["retriever"] == "ragchecker"


def test_a_difference_or_comparison_of_gold_path_terms_is_undefined_too(db, rc_file, capsys):
    assert _cli(db, "import", "--from", "ragchecker", str(rc_file), "--name", "rc") == 0
    capsys.readouterr()
    assert _cli(db, "ledger", "rc", "--json", "--resamples", "50") == 0
    (cell,) = [row["cell_id"] for row in json.loads(capsys.readouterr().out)]
    assert _cli(db, "ledger", "rc", "--diff", cell, cell, "--term", "S_vis", "--json") == 0
    assert json.loads(capsys.readouterr().out)["difference"]["value"] is None
    assert _cli(db, "compare", "rc", "rc", "--json", "--terms", "S_vis,S_llm") == 0
    (pair,) = json.loads(capsys.readouterr().out)["cells"]
    assert pair["terms"]["S_vis"]["delta"]["value"] is None   # not a 0 difference
    assert pair["terms"]["S_llm"]["delta"]["value"] == 0.0    # the run against itself


def _synthetic(n: int) -> str:
    """``n`` queries, 5 contexts each from a pool of ``n`` passages (so contexts recur across queries)."""
    import random

    rng = random.Random(n)
    return _document([{"query_id": f"q{i}", "query": f"question {i}", "gt_answer": f"answer {i % 7}",
                       "response": f"I think answer {i % 5}.",
                       "retrieved_context": [{"doc_id": f"d{j}", "text": f"passage {j} about answer {j % 7}"}
                                             for j in rng.sample(range(n), 5)]} for i in range(n)])


def test_the_import_does_linear_work_in_sqlite(tmp_path):
    """Four times the queries, about four times the SQLite work: counted in virtual-machine steps, which
    are exact where seconds are noise. (Each response was once written by an UPDATE that left out the
    key's cell_id, so it scanned the run's events: 500 → 2,000 queries cost 13× the steps.)"""
    from workbench.data.ragchecker import import_ragchecker

    def steps(n: int) -> int:
        path = tmp_path / f"rc{n}.json"
        path.write_text(_synthetic(n), encoding="utf-8")
        store = open_store(tmp_path / f"rc{n}.db")
        counted = [0]

        def tick() -> int:
            counted[0] += 1
            return 0
        store.conn.set_progress_handler(tick, 100)
        import_ragchecker(store, path, "r")
        store.close()
        return counted[0]

    small, large = steps(500), steps(2000)
    assert 3.5 < large / small < 4.5, (small, large)
