"""``workbench import --from ragchecker-meta``: RAGChecker's human preference labels become a meta set.

A meta set (issue 36: how far each checker agrees with people) is, per instance, a query, its
reference answer and two systems' responses, each pair compared by annotators on correctness,
completeness and overall from -2 (model1's response much better) to 2 (model2's much better).
The import makes of it a dataset of the queries, two runs ``NAME.model1`` and ``NAME.model2``
holding the responses as imported answers, and the labels (and any baseline's scores of the
responses) in the meta tables; ``workbench meta run`` and ``meta report`` take it from there.

The small file below has three instances of two annotators each. Its instance 2 is written once
as ``"2"`` and once as ``2``: an id is compared as a string, so they are one instance. Files are
written with ``json.dumps(indent=1)``, where an entry of the top-level array starts on the
line its first character is, indented by one space: that is the line a problem names.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from conftest import REPO, copy_db, every_row
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.data.meta_import import MetaBaseline, import_meta
from workbench.store import open_store

SAMPLE = REPO / "sample_data" / "ragchecker-meta"
SAMPLE_HUMAN = SAMPLE / "human_labeled_data.json"
SAMPLE_BASELINE = SAMPLE / "baseline_ragchecker.json"

# instance id -> (query, reference, (system, response) of model1, (system, response) of model2)
INSTANCES = {
    "0": ("Who wrote Hamlet?", "William Shakespeare wrote Hamlet.",
          ("bm25_llama3_8b", "Hamlet was written by William Shakespeare."), ("e5_mistral_gpt_4", "Marlowe wrote it.")),
    "1": ("At what temperature does water boil?", "100 degrees Celsius at sea level.",
          ("bm25_gpt_4", "It boils at 100 degrees Celsius."), ("bm25_llama3_70b", "")),   # an empty response is an answer
    "2": ("What is the capital of Japan?", "Tokyo",
          ("e5_mistral_llama3_8b", "Kyoto."), ("bm25_gpt_4", "Tokyo is the capital of Japan.")),
}


def entry(iid, correctness: int, completeness: int, overall: int) -> dict:
    """One annotator's entry for instance ``iid``, as RAGChecker's human_labeled_data.json holds it."""
    query, reference, (name1, response1), (name2, response2) = INSTANCES[str(iid)]
    return {"instance_id": iid, "dataset": "kiwi", "query_id": f"q{iid}", "query": query, "gt_answer": reference,
            "model1": {"model_name": name1, "response": response1},
            "model2": {"model_name": name2, "response": response2},
            "correctness_label": correctness, "completeness_label": completeness, "overall_label": overall}


HUMAN = [entry(0, -2, -1, -2), entry(0, -1, -1, -2),
         entry(1, -1, -2, -2), entry(1, -2, -2, -1),
         entry("2", 2, 0, 1), entry(2, 1, 0, 0)]


def scored(iid, model1: dict, model2: dict) -> dict:
    """A baseline's entry: RAGChecker's scores (``ragchecker``) of each response of instance ``iid``."""
    _, _, (name1, response1), (name2, response2) = INSTANCES[str(iid)]
    return {"instance_id": iid,
            "model1": {"model_name": name1, "response": response1, "critiques": "...", "ragchecker": model1},
            "model2": {"model_name": name2, "response": response2, "critiques": "...", "ragchecker": model2}}


def rc(correctness, completeness, overall) -> dict:
    return {"correctness_label": correctness, "completeness_label": completeness, "overall_label": overall}


# The ids as another type than the human file's ("0" for 0), and undefined scores: NaN and null.
BASELINE = [scored("0", rc(0.9, 0.8, 0.85), rc(0.1, 0.2, 0.15)),
            scored(1, rc(1.0, 0.5, 0.6667), rc(float("nan"), 0.0, None)),
            scored(2, rc(0.0, 0.0, 0.0), rc(1, 1, 1))]


def write(path: Path, entries) -> Path:
    """``entries`` as JSON with indent=1 (``NaN`` where a float is not a number, as Python writes it)."""
    path.write_text(entries if isinstance(entries, str) else json.dumps(entries, indent=1), encoding="utf-8")
    return path


def entry_lines(path: Path) -> list[int]:
    """The line where each entry of a file written by :func:`write` starts: indented by one space
    (an entry's fields are indented by two), and not the closing brace of an entry."""
    return [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
            if line[:1] == " " and line[1:2] not in ("", " ", "}", "]")]


@pytest.fixture
def db(tmp_path, empty_template) -> Path:
    return copy_db(empty_template, tmp_path / "wb.db")


@pytest.fixture
def human(tmp_path) -> Path:
    return write(tmp_path / "human.json", HUMAN)


@pytest.fixture
def baseline(tmp_path) -> Path:
    return write(tmp_path / "baseline.json", BASELINE)


def cli(db: Path, *argv) -> int:
    return main(["--db", str(db), *argv])


def import_cli(db: Path, human: Path, name: str, *baselines: Path, extra=()) -> int:
    more = ["--baselines", *map(str, baselines)] if baselines else []
    return cli(db, "import", "--from", "ragchecker-meta", str(human), *more, "--name", name, *extra)


def rows(db: Path, sql: str, *args) -> list[tuple]:
    store = open_store(db)
    try:
        return store.conn.execute(sql, args).fetchall()
    finally:
        store.close()


# -- what the import writes ---------------------------------------------------------------------
def test_the_sample_data_becomes_a_meta_set_of_140_instances(db, capsys):
    assert import_cli(db, SAMPLE_HUMAN, "rcm", SAMPLE_BASELINE) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "rcm: imported: 140 instances (queries with a reference answer and two responses), 2 annotators per "
        "instance, 840 labels (280 annotations × correctness, completeness, overall), 8 systems",
        "runs rcm.model1 and rcm.model2: the responses of each side, 140 events each, 280 of 280 scored (cover) "
        "against the reference answer",
        f"baseline {SAMPLE_BASELINE}: ragchecker (correctness_label, completeness_label, overall_label): "
        "140 instances scored",
        "next: workbench meta run rcm; workbench meta report rcm",
    ]
    labelled = json.loads(SAMPLE_HUMAN.read_text(encoding="utf-8"))
    baseline = json.loads(SAMPLE_BASELINE.read_text(encoding="utf-8"))
    first = {}                      # instance id -> its first entry, in order of first appearance
    for e in labelled:
        first.setdefault(str(e["instance_id"]), e)
    ids = list(first)

    # The samples: the instances in order, the query as question, the reference as the one answer.
    samples = rows(db, "SELECT s.sid, s.id, s.question, s.answers, s.meta FROM samples s"
                       " JOIN datasets d ON d.id = s.dataset_id WHERE d.name = 'rcm' ORDER BY s.sid")
    assert [(sid, i) for sid, i, *_ in samples] == list(enumerate(ids, start=1))
    for (sid, i, question, answers, meta), e in zip(samples, first.values()):
        assert (question, json.loads(answers)) == (e["query"], [e["gt_answer"]])
        assert json.loads(meta) == {"source": "ragchecker-meta", "dataset": e["dataset"], "query_id": e["query_id"]}

    # Two runs, one cell each, every event done: its prediction the response of that side.
    for side in ("model1", "model2"):
        events = rows(db, "SELECT e.sid, e.prediction, e.status, e.source, e.score FROM events e"
                          " JOIN runs r ON r.id = e.run_id WHERE r.name = ? ORDER BY e.sid", f"rcm.{side}")
        assert [(sid, prediction) for sid, prediction, *_ in events] == \
            [(sid, first[i][side]["response"]) for sid, i in enumerate(ids, start=1)]
        assert {(status, source) for _, _, status, source, _ in events} == {("done", "import")}
        assert all(score in (0.0, 1.0) for *_, score in events)
        assert rows(db, "SELECT count(*) FROM cells c JOIN runs r ON r.id = c.run_id WHERE r.name = ?",
                    f"rcm.{side}") == [(1,)]

    # The meta set ties the dataset and the runs together.
    ((set_id, run1, run2, source),) = rows(db, "SELECT m.id, r1.name, r2.name, m.source FROM meta_sets m JOIN runs r1"
                                               " ON r1.id = m.run1_id JOIN runs r2 ON r2.id = m.run2_id WHERE m.name = 'rcm'")
    assert (run1, run2, source) == ("rcm.model1", "rcm.model2", str(SAMPLE_HUMAN))

    # Every annotator's three labels, annotators numbered by their order within the instance.
    sid_of = {i: sid for sid, i in enumerate(ids, start=1)}
    seen: dict[str, int] = {}
    expected = set()
    for e, line in zip(labelled, entry_lines(SAMPLE_HUMAN)):
        i = str(e["instance_id"])
        annotator = seen[i] = seen.get(i, -1) + 1
        expected |= {(sid_of[i], annotator, label, e[f"{label}_label"], line)
                     for label in ("correctness", "completeness", "overall")}
    labels = rows(db, "SELECT sid, annotator, label, value, line FROM meta_labels WHERE set_id = ?", set_id)
    assert len(labels) == 140 * 2 * 3 and set(labels) == expected

    # Which system wrote each response.
    assert set(rows(db, "SELECT sid, side, system FROM meta_systems WHERE set_id = ?", set_id)) == \
        {(sid_of[i], side, first[i][f"model{side}"]["model_name"]) for i in ids for side in (1, 2)}

    # RAGChecker's own scores of each response, scorer = the evaluator, metric = its metric.
    scores = rows(db, "SELECT scorer, metric, sid, side, value FROM meta_scores WHERE set_id = ?", set_id)
    assert len(scores) == 140 * 2 * 3
    assert set(scores) == {("ragchecker", metric, sid_of[str(b["instance_id"])], side, value)
                           for b in baseline for side in (1, 2)
                           for metric, value in b[f"model{side}"]["ragchecker"].items()}


def test_the_api_report_and_undefined_baseline_scores(db, human, baseline):
    store = open_store(db)
    try:
        report = import_meta(store, human, "small", baselines=[baseline])
    finally:
        store.close()
    assert (report.dataset, report.samples, report.runs) == ("small", 3, ["small.model1", "small.model2"])
    assert (report.events, report.scored, report.score) == (6, 6, "cover")
    assert (report.annotators, report.annotations, report.labels) == ([2], 6, 18)
    assert report.systems == ["bm25_gpt_4", "bm25_llama3_70b", "bm25_llama3_8b", "e5_mistral_gpt_4",
                               "e5_mistral_llama3_8b"]
    # NaN and null are undefined scores: stored as NULL, counted, not refused.
    assert report.baselines == [MetaBaseline(str(baseline), 3, {"ragchecker": ["correctness_label",
                                                                                "completeness_label",
                                                                                "overall_label"]}, 2)]
    assert report.scores == 18 and not report.warnings and not report.unchanged
    assert rows(db, "SELECT metric, value FROM meta_scores WHERE sid = 2 AND side = 2 ORDER BY metric") == [
        ("completeness_label", 0.0), ("correctness_label", None), ("overall_label", None)]
    # "2" and 2 are one instance of two annotators; the samples keep the ids as strings.
    assert rows(db, "SELECT id FROM samples ORDER BY sid") == [("0",), ("1",), ("2",)]
    assert rows(db, "SELECT annotator, value FROM meta_labels WHERE sid = 3 AND label = 'correctness'"
                    " ORDER BY annotator") == [(0, 2), (1, 1)]
    # The scorer (cover): the reference contained in the response.
    assert rows(db, "SELECT r.name, e.sid, e.score FROM events e JOIN runs r ON r.id = e.run_id"
                    " WHERE e.score = 1") == [("small.model2", 3, 1.0)]


def test_a_baseline_that_scores_some_instances_leaves_the_others_undefined(db, human, tmp_path, capsys):
    partial = write(tmp_path / "partial.json", BASELINE[:2])
    assert import_cli(db, human, "small", partial) == 0
    captured = capsys.readouterr()
    assert f"warning: {partial} scores 2 of the 3 instances: the others' scores are undefined" in captured.err
    assert f"baseline {partial}: ragchecker (correctness_label, completeness_label, overall_label): " \
           "2 instances scored, 8 undefined" in captured.out
    assert rows(db, "SELECT count(*), count(value) FROM meta_scores WHERE sid = 3") == [(6, 0)]


def test_without_baselines_only_the_labels_are_kept(db, human, capsys):
    assert import_cli(db, human, "small") == 0
    assert "no baselines (--baselines FILE ...: RAGChecker's baseline_*.json, to compare with)" in \
        capsys.readouterr().out
    assert rows(db, "SELECT count(*) FROM meta_labels") == [(18,)]
    assert rows(db, "SELECT count(*) FROM meta_scores") == [(0,)]


def test_the_json_summary(db, human, baseline, capsys):
    assert import_cli(db, human, "small", baseline, extra=["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == ["small.model1", "small.model2"] and report["labels"] == 18
    assert report["baselines"][0]["scorers"] == {"ragchecker": ["correctness_label", "completeness_label",
                                                                "overall_label"]}


# -- importing again ----------------------------------------------------------------------------
def test_reimporting_the_same_files_is_a_no_op(db, human, baseline, capsys):
    assert import_cli(db, human, "small", baseline) == 0
    first = capsys.readouterr().out
    before = every_row(db)
    assert import_cli(db, human, "small", baseline) == 0
    again = capsys.readouterr().out
    assert again == first.replace("small: imported:", "small: unchanged (already imported):")
    assert every_row(db) == before


def test_other_content_under_the_name_needs_replace(db, human, baseline, tmp_path, capsys):
    assert import_cli(db, human, "small", baseline) == 0
    before = every_row(db)
    changed = copy.deepcopy(HUMAN)
    changed[0]["overall_label"] = 2
    write(human, changed)
    capsys.readouterr()
    assert import_cli(db, human, "small", baseline) == 2
    refusal = capsys.readouterr().err
    assert "dataset 'small' already exists with different content; pass --replace" in refusal
    assert "18 human preference labels" in refusal      # what --replace would delete is said, the labels too
    assert every_row(db) == before

    assert import_cli(db, human, "small", baseline, extra=["--replace"]) == 0
    replaced = capsys.readouterr().err
    assert "replaced dataset small: deleted 3 samples, 0 units, 2 runs (6 events, 6 answered)" in replaced
    assert "18 human preference labels" in replaced
    assert rows(db, "SELECT annotator, value FROM meta_labels WHERE sid = 1 AND label = 'overall'"
                    " ORDER BY annotator") == [(0, 2), (1, -2)]
    assert rows(db, "SELECT count(*) FROM meta_sets") == [(1,)]
    # The same files with fewer baselines are other content too.
    assert import_cli(db, human, "small") == 2


def test_runs_named_like_the_set_over_another_dataset_are_refused(db, human, tmp_path, capsys):
    results = write(tmp_path / "rc.json", {"results": [{"query_id": "q", "query": "Who wrote Hamlet?",
                                                        "gt_answer": "Shakespeare", "response": "Shakespeare"}]})
    assert cli(db, "import", "--from", "ragchecker", str(results), "--name", "small.model2") == 0
    before = every_row(db)
    capsys.readouterr()
    assert import_cli(db, human, "small") == 2
    assert capsys.readouterr().err.strip() == (
        "error: run 'small.model2' already exists (over dataset 'small.model2'); a meta set's runs are "
        "NAME.model1 and NAME.model2: choose another --name")
    assert every_row(db) == before


# -- bad input: one line naming the place, nothing written ------------------------------------
def _set(i: int, path: str, value):
    """A change to entry ``i``: the field at the dotted ``path`` set to ``value`` (deleted if ``value`` is DELETE)."""
    def change(entries):
        *parents, last = path.split(".")
        target = entries[i]
        for key in parents:
            target = target[key]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value
        return entries
    return change


DELETE = object()


def _rename_evaluator(i: int, side: str, name: str):
    """A change to baseline entry ``i``: its ``side``'s ragchecker scores moved under the evaluator ``name``."""
    def change(entries):
        entries[i][side][name] = entries[i][side].pop("ragchecker")
        return entries
    return change

# (what is wrong, the human file's change, the baseline's change, the file, the entry, the field, the reason)
BAD = [
    ("label out of range", _set(3, "overall_label", 3), None,
     "human", 3, "overall_label", "expected an integer from -2 to 2, got 3"),
    ("label not an integer", _set(3, "correctness_label", 1.5), None,
     "human", 3, "correctness_label", "expected an integer from -2 to 2, got 1.5"),
    ("label a boolean", _set(0, "overall_label", True), None,
     "human", 0, "overall_label", "expected an integer from -2 to 2, got boolean"),
    ("label a string", _set(0, "overall_label", "1"), None,
     "human", 0, "overall_label", "expected an integer from -2 to 2, got string"),
    ("label missing", _set(1, "completeness_label", DELETE), None,
     "human", 1, "completeness_label", "missing"),
    ("label NaN", lambda e: json.dumps(_set(2, "overall_label", float("nan"))(e), indent=1), None,
     "human", 2, "overall_label", "NaN is not a JSON number (a finite number or null)"),
    ("an odd number of annotators", lambda e: e + [entry(1, 0, 0, 0)], None,
     "human", 6, "instance_id", "instance 1 has 3 entries ($[2], $[3], $[6]): annotators come in pairs"),
    ("response not a string", _set(2, "model2.response", ["It", "boils"]), None,
     "human", 2, "model2.response", "expected a string, got array"),
    ("response missing", _set(5, "model1.response", DELETE), None,
     "human", 5, "model1.response", "missing"),
    ("query not a string", _set(0, "query", 42), None,
     "human", 0, "query", "expected a string, got number"),
    ("reference not a string", _set(4, "gt_answer", None), None,
     "human", 4, "gt_answer", "expected a string, got null"),
    ("annotators disagree on the query", _set(1, "query", "Who wrote Macbeth?"), None,
     "human", 1, "query", "differs from instance 0's first entry ($[0], line 2)"),
    ("annotators disagree on the reference", _set(3, "gt_answer", "212 degrees Fahrenheit."), None,
     "human", 3, "gt_answer", "differs from instance 1's first entry ($[2], line 38)"),
    ("annotators disagree on a response", _set(5, "model1.response", "Osaka."), None,
     "human", 5, "model1.response", "differs from instance 2's first entry ($[4], line 74)"),
    ("annotators disagree on a system", _set(5, "model2.model_name", "bm25_gpt_3"), None,
     "human", 5, "model2.model_name", "differs from instance 2's first entry"),
    ("instance id a boolean", _set(4, "instance_id", False), None,
     "human", 4, "instance_id", "expected an integer or a non-blank string, got boolean"),
    ("entry not an object", lambda e: e[:5] + ["annotator 2"], None,
     "human", 5, "", "expected an object, got string"),
    ("human file not a list", lambda e: {"entries": e}, None,
     "human", None, "", "expected RAGChecker's human_labeled_data.json: [{instance_id, query, gt_answer, "
                        "model1, model2, correctness_label, completeness_label, overall_label}, ...], got object"),
    ("human file empty list", lambda e: [], None, "human", None, "", "must not be empty"),
    ("malformed JSON", lambda e: json.dumps(e, indent=1)[:-3], None, "human", "end", "", "malformed JSON"),
    ("baseline instance without labels", None, lambda b: b + [scored(1, rc(1, 1, 1), rc(0, 0, 0)) | {"instance_id": 7}],
     "baseline", 3, "instance_id", "instance 7 is not in {human} (no human labels for it)"),
    ("baseline instance twice", None, lambda b: b + [scored(0, rc(1, 1, 1), rc(0, 0, 0))],
     "baseline", 3, "instance_id", "duplicate instance 0 (first at $[0], line 2)"),
    ("baseline score not a number", None, _set(1, "model2.ragchecker.overall_label", "0.5"),
     "baseline", 1, "model2.ragchecker.overall_label", "expected a number or null (undefined), got string"),
    ("baseline score a boolean", None, _set(2, "model1.ragchecker.correctness_label", True),
     "baseline", 2, "model1.ragchecker.correctness_label", "expected a number or null (undefined), got boolean"),
    ("baseline score missing", None, _set(2, "model1.ragchecker.correctness_label", DELETE),
     "baseline", 2, "model1.ragchecker.correctness_label", "missing (this file scores it elsewhere, first at "
                                                            "$[0].model1.ragchecker.correctness_label, line 2)"),
    ("baseline of another response", None, _set(0, "model2.response", "Christopher Marlowe wrote it."),
     "baseline", 0, "model2.response", "differs from instance 0's in {human} (line 2): these scores would be of "
                                       "another response"),
    ("baseline evaluator named like meta run's similarity", None, _rename_evaluator(1, "model1", "similarity"),
     "baseline", 1, "model1['similarity']", "a name `meta run` keeps for its whole-answer similarity"),
    ("baseline not a list", None, lambda b: {"0": b[0]},
     "baseline", None, "", "expected a baseline's scores: [{instance_id, model1: {EVALUATOR: {METRIC: score}}, "
                           "model2: ...}, ...], got object"),
]


@pytest.fixture(scope="module")
def holding_good(tmp_path_factory, empty_template) -> Path:
    """A closed database where the small files were imported as ``good``: built once, copied by each test."""
    work = tmp_path_factory.mktemp("holding-good")
    db = copy_db(empty_template, work / "wb.db")
    assert import_cli(db, write(work / "human.json", HUMAN), "good", write(work / "baseline.json", BASELINE)) == 0
    return db


@pytest.mark.parametrize("change_human,change_baseline,which,index,fld,reason", [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_bad_input_is_refused_in_one_line_naming_its_place(holding_good, human, baseline, tmp_path, capsys,
                                                            change_human, change_baseline, which, index, fld, reason):
    db = copy_db(holding_good, tmp_path / "wb.db")
    before = every_row(db)
    bad_human = write(tmp_path / "bad_human.json", change_human(copy.deepcopy(HUMAN))) if change_human else human
    bad_baseline = write(tmp_path / "bad_baseline.json", change_baseline(copy.deepcopy(BASELINE))) \
        if change_baseline else baseline
    bad = bad_human if which == "human" else bad_baseline
    if index is None:               # the whole file
        line, field = 1, "$"
    elif index == "end":            # where the JSON breaks off: its last line
        line, field = bad.read_text(encoding="utf-8").count("\n") + 1, "$"
    else:
        line, field = entry_lines(bad)[index], f"$[{index}]" + (f".{fld}" if fld else "")
    capsys.readouterr()

    assert import_cli(db, bad_human, "bad", bad_baseline) == 2
    header, *problems = capsys.readouterr().err.strip().splitlines()
    assert header == "error: input rejected, nothing was written:"
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{bad}:{line}: {field}: {reason.replace('{human}', str(bad_human))}"), \
        problems[0]
    assert every_row(db) == before


def test_every_problem_of_a_file_is_reported_at_once(db, tmp_path, capsys):
    entries = copy.deepcopy(HUMAN)
    entries[0]["overall_label"] = -3
    entries[3]["model1"]["response"] = None
    entries[5]["query"] = "What is the capital of France?"
    bad = write(tmp_path / "bad.json", entries)
    lines = entry_lines(bad)
    assert import_cli(db, bad, "bad") == 2
    assert capsys.readouterr().err.strip().splitlines()[1:] == [
        f"{bad}:{lines[0]}: $[0].overall_label: expected an integer from -2 to 2, got -3",
        f"{bad}:{lines[3]}: $[3].model1.response: expected a string, got null",
        f"{bad}:{lines[5]}: $[5].query: differs from instance 2's first entry ($[4], line {lines[4]})",
    ]


def test_one_baseline_file_given_twice_is_refused(db, human, baseline, capsys):
    assert import_cli(db, human, "small", baseline, baseline) == 2
    problems = capsys.readouterr().err.strip().splitlines()[1:]
    assert problems[0] == (f"{baseline}:2: $[0].model1.ragchecker.correctness_label: also scored by {baseline} "
                           "(an evaluator's metric comes from one baseline file)")
    assert rows(db, "SELECT count(*) FROM datasets") == [(0,)]


# -- the command line ---------------------------------------------------------------------------
@pytest.mark.parametrize("argv,message", [
    (["--from", "ragchecker-meta", "{human}"], "--from ragchecker-meta needs --name NAME"),
    (["--from", "ragchecker-meta", "{human}", "--name", "m", "--score", "acc"],
     "--score does not go with --from ragchecker-meta"),
    (["--from", "ragchecker", "{human}", "--baselines", "{human}"], "--baselines goes with --from ragchecker-meta"),
    (["{tmp}", "--baselines", "{human}"], "--baselines goes with --from ragchecker-meta"),
    (["--from", "ragchecker-meta", "{tmp}/nothing.json", "--name", "m"], "nothing.json: not found (expected "
                                                                          "RAGChecker's human_labeled_data.json"),
    (["--from", "ragchecker-meta", "{human}", "--name", "m", "--baselines", "{tmp}"], ": is a directory, not a "
                                                                                      "regular file (expected a "
                                                                                      "RAGChecker baseline file"),
])
def test_usage_mistakes_are_one_line(db, human, tmp_path, capsys, argv, message):
    before = every_row(db)
    assert cli(db, "import", *(a.format(human=human, tmp=tmp_path) for a in argv)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert every_row(db) == before


def test_the_help_names_the_source_and_its_baselines(capsys):
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert "{dataset,ragchecker,ragchecker-meta}" in text
    assert "--baselines FILE [FILE ...]" in text
    assert "runs NAME.model1 and NAME.model2" in text


def test_only_a_value_nan_is_undefined_a_response_saying_nan_is_text(db, tmp_path):
    said = 'The answer is NaN, or maybe "Infinity".'
    entries = copy.deepcopy(HUMAN)
    for e in entries[2:4]:
        e["model2"]["response"] = said
    scores = copy.deepcopy(BASELINE)
    scores[1]["model2"]["response"] = said      # the baseline scores the same response
    text = json.dumps(scores, indent=1)
    assert "NaN," in text                      # Python writes the undefined score as a bare NaN
    assert import_cli(db, write(tmp_path / "h.json", entries), "small", write(tmp_path / "b.json", text)) == 0
    assert rows(db, "SELECT prediction FROM events e JOIN runs r ON r.id = e.run_id WHERE r.name = 'small.model2'"
                    " AND e.sid = 2") == [(said,)]
    assert rows(db, "SELECT value FROM meta_scores WHERE sid = 2 AND side = 2 AND metric = 'correctness_label'") \
        == [(None,)]
