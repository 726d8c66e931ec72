"""Importing a dataset directory, by example (docs/design.md §2 and §11).

A dataset directory holds three JSON Lines files:

- ``kb.jsonl``: ``{"triple": [h, r, t]}`` a line, or ``{"chunk_id", "doc_id", "text"}``
  for a passage corpus (one kind per dataset);
- ``samples.jsonl``: ``{"id", "question", "answers": [...], "gold_paths": [[unit, ...], ...],
  "aliases"?, "meta"?}``, where a unit is ``[h, r, t]`` or a chunk id;
- ``retrieval.jsonl``: ``{"sample_id", "retriever", "results": [{"triple" | "chunk_id", "score"}, ...]}``
  in rank order; several retrievers may share the file.

The contract these tests pin down:

- bad input raises :class:`InputRejected` whose message has one ``file:line: field: reason``
  line per problem, naming the file as given, the 1-based line and a JSONPath-like field;
- nothing is written when an import is rejected: the row counts of every table are the
  same as before (zero in an empty store, unchanged in a store that already holds a dataset);
- re-importing identical files is a no-op; other content under the same name needs
  ``replace=True``;
- triples are matched after Unicode NFKC and whitespace normalization.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Iterator

import pytest

from conftest import copy_db
from scratch import scratch_dir
from workbench.data.errors import InputRejected
from workbench.data.importer import DatasetExists, ImportReport, import_dataset
from workbench.data.jsonl import MAX_LINE_BYTES
from workbench.store import open_store

METAQA_DEV = Path("/work/shared/data/metaqa-dev")
TABLES = ("datasets", "units", "samples", "retrievals")

# -- a small, hand-checkable dataset ------------------------------------------------------
KB = [
    ["Kismet", "directed_by", "William Dieterle"],                       # kb line 1
    ["Kismet", "starred_actors", "Marlene Dietrich"],                    # kb line 2
    ["Kismet", "release_year", "1944"],                                  # kb line 3
    ["The Hunchback of Notre Dame", "directed_by", "William Dieterle"],  # kb line 4
    ["The Hunchback of Notre Dame", "release_year", "1939"],             # kb line 5
]
SAMPLES = [
    {"id": "q1", "question": "who directed Kismet", "answers": ["William Dieterle"],
     "gold_paths": [[KB[0]]], "meta": {"hops": 1}},
    {"id": "q2", "question": "when was Kismet released", "answers": ["1944"], "gold_paths": [[KB[2]]]},
    {"id": "q3", "question": "which films share a director with Kismet",
     "answers": ["The Hunchback of Notre Dame"], "aliases": {"The Hunchback of Notre Dame": ["Hunchback"]},
     "gold_paths": [[KB[0], KB[3]]], "meta": {"hops": 2}},
]
RETRIEVAL = [
    {"sample_id": "q1", "retriever": "bm25", "results": [{"triple": KB[2], "score": 3.5},
                                                          {"triple": KB[0], "score": 2.0}]},
    {"sample_id": "q2", "retriever": "bm25", "results": [{"triple": KB[2], "score": 4.0},
                                                          {"triple": KB[4], "score": 1.5},
                                                          {"triple": KB[1], "score": 0.5}]},
    {"sample_id": "q3", "retriever": "bm25", "results": [{"triple": KB[0], "score": 2.5},
                                                          {"triple": KB[3], "score": 2.25}]},
]


def kb_records(triples=KB) -> list[dict]:
    return [{"triple": list(t)} for t in triples]


def good(records: list[dict]) -> list[dict]:
    """A private deep copy of good records, for a test to break one of them."""
    return copy.deepcopy(records)


def make_dataset(directory: Path, *, kb=None, samples=None, retrieval=None) -> Path:
    """Write a dataset directory; each file defaults to the good one above.

    A file is given as a list of lines (a dict is written as JSON, a str or bytes as is)
    or as ``bytes`` for the exact file content. ``retrieval=False`` leaves the file out.
    """
    directory.mkdir(parents=True, exist_ok=True)
    files = {"kb.jsonl": kb_records() if kb is None else kb,
             "samples.jsonl": SAMPLES if samples is None else samples,
             "retrieval.jsonl": RETRIEVAL if retrieval is None else retrieval}
    for name, lines in files.items():
        if lines is False:
            continue
        if isinstance(lines, bytes):
            data = lines
        else:
            data = b"".join(
                (line if isinstance(line, bytes) else
                 line.encode() if isinstance(line, str) else
                 json.dumps(line, ensure_ascii=False).encode()) + b"\n"
                for line in lines)
        (directory / name).write_bytes(data)
    return directory


def row_counts(store) -> dict[str, int]:
    return {table: store.count(table) for table in TABLES}


def rejected(store, directory: Path, **kwargs) -> list[str]:
    """Import ``directory``, expect InputRejected, check nothing was written; return the problem lines."""
    before = row_counts(store)
    with pytest.raises(InputRejected) as caught:
        import_dataset(store, directory, "candidate", **kwargs)
    assert row_counts(store) == before, "a rejected import must write nothing"
    lines = str(caught.value).splitlines()
    assert lines == [str(p) for p in caught.value.problems]
    return lines


# -- fixtures ----------------------------------------------------------------------------

@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """This module's tests write files of 8 to 40 MB and whole databases they read once: on the RAM disk
    (tests/scratch.py), removed after the test."""
    yield from scratch_dir("test-import-")


@pytest.fixture(scope="module")
def holding_a_dataset(tmp_path_factory, empty_template) -> Path:
    """A closed database holding the good dataset as ``earlier``: built once, copied by each test."""
    work = tmp_path_factory.mktemp("holding")
    s = open_store(copy_db(empty_template, work / "wb.db"))
    try:
        import_dataset(s, make_dataset(work / "earlier"), "earlier")
    finally:
        s.close()
    return work / "wb.db"


@pytest.fixture(params=["empty store", "store holding a dataset"])
def any_store(request, tmp_path):
    """Each bad-input test runs twice: against an empty store (every count stays 0) and
    against a store that already holds a good dataset (every count stays unchanged)."""
    if request.param == "store holding a dataset":
        s = open_store(copy_db(request.getfixturevalue("holding_a_dataset"), tmp_path / "wb.db"))
        assert row_counts(s) == {"datasets": 1, "units": 5, "samples": 3, "retrievals": 3}
    else:
        s = open_store(copy_db(request.getfixturevalue("empty_template"), tmp_path / "wb.db"))
    yield s
    s.close()


@pytest.fixture
def good_dir(tmp_path) -> Path:
    return make_dataset(tmp_path / "good")


# -- the good path ---------------------------------------------------------------------------
def test_a_good_dataset_imports_with_its_counts(store, good_dir):
    report = import_dataset(store, good_dir, "movies")

    assert isinstance(report, ImportReport)
    assert (report.dataset, report.unit_kind, report.units, report.samples, report.retrievals) == \
        ("movies", "triple", 5, 3, 3)
    assert report.retrievers == ["bm25"]
    assert report.unknown_units == 0 and report.warnings == [] and not report.unchanged
    assert row_counts(store) == {"datasets": 1, "units": 5, "samples": 3, "retrievals": 3}
    # uids follow kb line order; gold paths and retrieval results are stored as uids
    q = store.conn.execute
    assert q("SELECT uid, head, relation, tail, in_kb FROM units ORDER BY uid LIMIT 1").fetchone() == \
        (1, "Kismet", "directed_by", "William Dieterle", 1)
    assert [json.loads(g) for (g,) in q("SELECT gold_paths FROM samples ORDER BY sid")] == [[[1]], [[3]], [[1, 4]]]
    assert [(json.loads(u), json.loads(s)) for u, s in q("SELECT uids, scores FROM retrievals ORDER BY sid")] == [
        ([3, 1], [3.5, 2.0]), ([3, 5, 2], [4.0, 1.5, 0.5]), ([1, 4], [2.5, 2.25])]
    assert json.loads(q("SELECT aliases FROM samples WHERE id = 'q3'").fetchone()[0]) == \
        {"The Hunchback of Notre Dame": ["Hunchback"]}


def test_several_retrievers_share_one_retrieval_file(store, tmp_path):
    dense = [{**row, "retriever": "dense", "results": list(reversed(row["results"]))} for row in good(RETRIEVAL)]
    d = make_dataset(tmp_path / "two", retrieval=RETRIEVAL + dense)

    report = import_dataset(store, d, "two")

    assert report.retrievers == ["bm25", "dense"]
    assert report.retrievals == 6
    per_retriever = dict(store.conn.execute("SELECT retriever, count(*) FROM retrievals GROUP BY 1"))
    assert per_retriever == {"bm25": 3, "dense": 3}
    assert json.loads(store.conn.execute(
        "SELECT uids FROM retrievals WHERE retriever = 'dense' AND sid = 1").fetchone()[0]) == [1, 3]


def test_triples_match_after_nfkc_and_whitespace_normalization(store, tmp_path):
    # full-width letters (NFKC folds them), a doubled space, a no-break space and padding
    fullwidth = ["Ｋｉｓｍｅｔ", "directed_by", "William  Dieterle"]
    padded = [" Kismet ", "release_year", "1944\u00a0"]
    samples = good(SAMPLES)
    samples[0]["gold_paths"] = [[fullwidth]]
    retrieval = good(RETRIEVAL)
    retrieval[1]["results"][0]["triple"] = padded
    d = make_dataset(tmp_path / "variants", samples=samples, retrieval=retrieval)

    report = import_dataset(store, d, "variants", strict=True)  # strict: a miss would be an error

    assert report.unknown_units == 0 and report.units == 5
    q = store.conn.execute
    assert json.loads(q("SELECT gold_paths FROM samples WHERE id = 'q1'").fetchone()[0]) == [[1]]
    assert json.loads(q("SELECT uids FROM retrievals WHERE sid = 2").fetchone()[0])[0] == 3
    # the stored unit keeps the KB's spelling; its key is the normalized form
    assert q("SELECT head, key FROM units WHERE uid = 1").fetchone() == \
        ("Kismet", "Kismet\tdirected_by\tWilliam Dieterle")


def test_a_chunk_corpus_imports_with_chunk_ids_as_units(store, tmp_path):
    chunks = [{"chunk_id": "c1", "doc_id": "kismet.md", "text": "Kismet (1944) was directed by William Dieterle."},
              {"chunk_id": "c2", "doc_id": "kismet.md", "text": "It stars Marlene Dietrich."},
              {"chunk_id": "c3", "doc_id": "hunchback.md", "text": "The Hunchback of Notre Dame (1939)."}]
    samples = [{"id": "q1", "question": "who directed Kismet", "answers": ["William Dieterle"],
                "gold_paths": [["c1"]]},
               {"id": "q2", "question": "which 1939 film shares Kismet's director",
                "answers": ["The Hunchback of Notre Dame"], "gold_paths": [["c1", "c3"]]}]
    retrieval = [{"sample_id": "q1", "retriever": "bm25", "results": [{"chunk_id": "c2", "score": 1.0},
                                                                      {"chunk_id": "c1", "score": 0.5}]},
                 {"sample_id": "q2", "retriever": "bm25", "results": [{"chunk_id": "c3", "score": 2.0}]}]
    d = make_dataset(tmp_path / "chunks", kb=chunks, samples=samples, retrieval=retrieval)

    report = import_dataset(store, d, "chunks")

    assert (report.unit_kind, report.units, report.samples, report.retrievals) == ("chunk", 3, 2, 2)
    q = store.conn.execute
    assert q("SELECT unit_kind FROM datasets").fetchone() == ("chunk",)
    assert q("SELECT uid, chunk_id, doc_id, head FROM units ORDER BY uid").fetchall() == [
        (1, "c1", "kismet.md", None), (2, "c2", "kismet.md", None), (3, "c3", "hunchback.md", None)]
    assert [json.loads(g) for (g,) in q("SELECT gold_paths FROM samples ORDER BY sid")] == [[[1]], [[1, 3]]]
    assert json.loads(q("SELECT uids FROM retrievals WHERE sid = 1").fetchone()[0]) == [2, 1]

    # a chunk id that is not in the corpus is always an error (there is no in_kb=0 for chunks)
    samples[1]["gold_paths"] = [["c1", "c9"]]
    bad = make_dataset(tmp_path / "chunks-bad", kb=chunks, samples=samples, retrieval=retrieval)
    assert rejected(store, bad) == [
        f"{bad / 'samples.jsonl'}:2: $.gold_paths[0][1]: chunk id 'c9' is not in kb.jsonl"]


def test_retrieval_file_is_optional(store, tmp_path):
    d = make_dataset(tmp_path / "noretrieval", retrieval=False)
    report = import_dataset(store, d, "noretrieval")
    assert (report.samples, report.retrievals, report.retrievers) == (3, 0, [])
    assert report.warnings == [f"{d / 'retrieval.jsonl'}: not present; the dataset has no retrieval runs yet"]


# -- triples outside the KB: a warning by default, an error under strict -------------------
def outside_kb_dataset(directory: Path) -> Path:
    samples = good(SAMPLES)
    samples[1]["gold_paths"] = [[["Kismet", "release_year", "1943"]]]           # samples line 2
    retrieval = good(RETRIEVAL)
    retrieval[2]["results"].append({"triple": ["Kismet", "in_language", "English"], "score": 0.1})  # line 3
    retrieval[0]["results"].append({"triple": ["Kismet", "release_year", "1943"], "score": 0.2})    # line 1
    make_dataset(directory, samples=samples, retrieval=retrieval)
    (directory.parent / "good-samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SAMPLES))
    return directory


def test_triples_outside_the_kb_are_added_with_a_warning_by_default(store, tmp_path):
    d = outside_kb_dataset(tmp_path / "outside")

    report = import_dataset(store, d, "outside")

    # the same missing triple in a gold path and a result list is one unit
    assert report.unknown_units == 2
    assert report.units == 7
    assert report.warnings == [
        f"2 gold or retrieved triples are not in {d / 'kb.jsonl'}; "
        "they were added as units outside the KB (use --strict to reject them)"]
    rows = store.conn.execute("SELECT uid, head, relation, tail FROM units WHERE in_kb = 0 ORDER BY uid").fetchall()
    assert rows == [(6, "Kismet", "release_year", "1943"), (7, "Kismet", "in_language", "English")]
    assert store.conn.execute("SELECT count(*) FROM units WHERE in_kb = 1").fetchone()[0] == 5


def test_triples_outside_the_kb_are_rejected_under_strict(any_store, tmp_path):
    d = outside_kb_dataset(tmp_path / "outside")

    # one problem per line; files are checked in order, and a file with problems stops
    # the import before the next file is read
    assert rejected(any_store, d, strict=True) == [
        f"{d / 'samples.jsonl'}:2: $.gold_paths[0][0]: triple ['Kismet', 'release_year', '1943'] "
        "is not in kb.jsonl (--strict)"]

    (d / "samples.jsonl").write_bytes((d.parent / "good-samples.jsonl").read_bytes())  # fix samples.jsonl:
    # now retrieval.jsonl's problems show
    assert rejected(any_store, d, strict=True) == [
        f"{d / 'retrieval.jsonl'}:1: $.results[2].triple: triple ['Kismet', 'release_year', '1943'] "
        "is not in kb.jsonl (--strict)",
        f"{d / 'retrieval.jsonl'}:3: $.results[2].triple: triple ['Kismet', 'in_language', 'English'] "
        "is not in kb.jsonl (--strict)",
    ]


# -- bad input: one test per class ------------------------------------------------------------
def test_malformed_json(any_store, tmp_path):
    d = make_dataset(tmp_path / "bad", samples=[SAMPLES[0], '{"id": "q2", "question": "when was Kismet released"',
                                                SAMPLES[2]])
    assert rejected(any_store, d) == [
        f"{d / 'samples.jsonl'}:2: $: malformed JSON: Expecting ',' delimiter (column 52)"]


@pytest.mark.parametrize(("filename", "line", "drop", "field"), [
    ("samples.jsonl", 2, ("answers",), "$.answers"),
    ("samples.jsonl", 3, ("id",), "$.id"),
    ("retrieval.jsonl", 2, ("results", 1, "score"), "$.results[1].score"),
    ("retrieval.jsonl", 1, ("retriever",), "$.retriever"),
], ids=["samples answers", "samples id", "result score", "retriever"])
def test_a_missing_field(any_store, tmp_path, filename, line, drop, field):
    files = {"samples.jsonl": good(SAMPLES), "retrieval.jsonl": good(RETRIEVAL)}
    record = files[filename][line - 1]
    *path, last = drop
    for step in path:
        record = record[step]
    del record[last]
    d = make_dataset(tmp_path / "bad", samples=files["samples.jsonl"], retrieval=files["retrieval.jsonl"])

    assert rejected(any_store, d) == [f"{d / filename}:{line}: {field}: missing"]


def _set(records, line, path, value):
    target = records[line - 1]
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return records


@pytest.mark.parametrize(("filename", "line", "path", "value", "expected"), [
    ("samples.jsonl", 3, ("answers",), "William Dieterle",
     "$.answers: expected an array of strings, got string"),
    ("samples.jsonl", 1, ("answers",), ["William Dieterle", 7],
     "$.answers[1]: expected a string, got number"),
    ("samples.jsonl", 2, ("question",), None, "$.question: expected a string, got null"),
    ("samples.jsonl", 1, ("gold_paths", 0, 0), ["Kismet", "directed_by"],
     "$.gold_paths[0][0]: expected 3 elements [head, relation, tail], got 2"),
    ("samples.jsonl", 3, ("meta",), ["hops", 2], "$.meta: expected an object, got array"),
    ("retrieval.jsonl", 2, ("results", 1, "score"), "1.5", "$.results[1].score: expected a number, got string"),
    ("retrieval.jsonl", 1, ("results", 0, "score"), True, "$.results[0].score: expected a number, got boolean"),
    ("retrieval.jsonl", 3, ("results",), {"triple": KB[0], "score": 1.0}, "$.results: expected an array, got object"),
    ("kb.jsonl", 2, ("triple",), ["Kismet", "starred_actors"],
     "$.triple: expected 3 elements [head, relation, tail], got 2"),
    ("kb.jsonl", 4, ("triple", 2), "  ", "$.triple[2]: must not be empty"),
], ids=["answers as string", "answer as number", "question as null", "gold triple of 2", "meta as array",
        "score as string", "score as bool", "results as object", "kb triple of 2", "blank tail"])
def test_a_mistyped_field(any_store, tmp_path, filename, line, path, value, expected):
    files = {"kb.jsonl": kb_records(), "samples.jsonl": good(SAMPLES), "retrieval.jsonl": good(RETRIEVAL)}
    _set(files[filename], line, path, value)
    d = make_dataset(tmp_path / "bad", kb=files["kb.jsonl"], samples=files["samples.jsonl"],
                     retrieval=files["retrieval.jsonl"])

    assert rejected(any_store, d) == [f"{d / filename}:{line}: {expected}"]


def test_a_json_array_line_instead_of_an_object(any_store, tmp_path):
    d = make_dataset(tmp_path / "bad", kb=kb_records()[:2] + [["Kismet", "release_year", "1944"]] + kb_records()[3:])
    assert rejected(any_store, d) == [f"{d / 'kb.jsonl'}:3: $: expected a JSON object, got array"]


def test_a_duplicate_sample_id(any_store, tmp_path):
    samples = good(SAMPLES)
    samples[2]["id"] = "q1"
    d = make_dataset(tmp_path / "bad", samples=samples)
    assert rejected(any_store, d) == [f"{d / 'samples.jsonl'}:3: $.id: duplicate id 'q1' (first on line 1)"]


@pytest.mark.parametrize("duplicate", [
    ["Kismet", "release_year", "1944"],                 # the same triple again
    ["Kismet ", "release_year", "１９４４"],               # the same after NFKC and whitespace normalization
], ids=["identical", "normalized"])
def test_a_duplicate_kb_triple(any_store, tmp_path, duplicate):
    d = make_dataset(tmp_path / "bad", kb=kb_records() + [{"triple": duplicate}])
    assert rejected(any_store, d) == [f"{d / 'kb.jsonl'}:6: $.triple: duplicate of line 3"]


def test_a_duplicate_chunk_id(any_store, tmp_path):
    chunks = [{"chunk_id": "c1", "doc_id": "a", "text": "one"}, {"chunk_id": "c1", "doc_id": "b", "text": "two"}]
    d = make_dataset(tmp_path / "bad", kb=chunks, samples=[{**SAMPLES[0], "gold_paths": [["c1"]]}], retrieval=False)
    assert rejected(any_store, d) == [f"{d / 'kb.jsonl'}:2: $.chunk_id: duplicate of line 1"]


def test_a_duplicate_sample_and_retriever_row(any_store, tmp_path):
    retrieval = good(RETRIEVAL) + [good(RETRIEVAL)[1]]
    d = make_dataset(tmp_path / "bad", retrieval=retrieval)
    assert rejected(any_store, d) == [
        f"{d / 'retrieval.jsonl'}:4: $.sample_id: duplicate results for ('q2', 'bm25') (first on line 2)"]


def test_a_duplicate_unit_inside_one_results_list(any_store, tmp_path):
    retrieval = good(RETRIEVAL)
    # the same triple at ranks 0 and 2, the second time with a leading space
    retrieval[1]["results"][2]["triple"] = ["Kismet", "release_year", " 1944"]
    d = make_dataset(tmp_path / "bad", retrieval=retrieval)
    assert rejected(any_store, d) == [f"{d / 'retrieval.jsonl'}:2: $.results[2].triple: duplicate of results[0]"]


def test_an_unknown_sample_id_in_retrieval(any_store, tmp_path):
    retrieval = good(RETRIEVAL)
    retrieval[2]["sample_id"] = "q7"
    d = make_dataset(tmp_path / "bad", retrieval=retrieval)
    assert rejected(any_store, d) == [
        f"{d / 'retrieval.jsonl'}:3: $.sample_id: unknown sample id 'q7' (not in samples.jsonl)"]


def test_a_rejected_sample_is_not_reported_again_as_unknown_in_retrieval(store, tmp_path):
    # q2 is in samples.jsonl but its line is rejected; retrieval.jsonl (which also has a
    # problem of its own) is not read, so q2's retrieval row cannot be misreported as
    # "unknown sample id 'q2'".
    samples = good(SAMPLES)
    samples[1]["answers"] = "1944"
    retrieval = good(RETRIEVAL)
    retrieval[2]["results"][0]["score"] = "high"
    d = make_dataset(tmp_path / "bad", samples=samples, retrieval=retrieval)
    assert rejected(store, d) == [f"{d / 'samples.jsonl'}:2: $.answers: expected an array of strings, got string"]


def test_a_mixed_triple_and_chunk_kb(any_store, tmp_path):
    kb = kb_records()[:3] + [{"chunk_id": "c1", "doc_id": "kismet.md", "text": "Kismet (1944)."}] + kb_records()[3:]
    d = make_dataset(tmp_path / "bad", kb=kb)
    assert rejected(any_store, d) == [
        f"{d / 'kb.jsonl'}:4: $: a chunk record in a KB of triples (a dataset holds one kind)"]


def test_non_utf8_bytes(any_store, tmp_path):
    latin1 = '{"id": "q2", "question": "when was Kismet released", "answers": ["1944"], ' \
             '"gold_paths": [[["Kismet", "release_year", "1944"]]], "meta": {"note": "Fran\xe7ais"}}'.encode("latin-1")
    d = make_dataset(tmp_path / "bad", samples=[SAMPLES[0], latin1, SAMPLES[2]])
    column = latin1.index(b"\xe7")
    assert rejected(any_store, d) == [
        f"{d / 'samples.jsonl'}:2: $: not valid UTF-8 (byte {column} of the line: b'\\xe7')"]


@pytest.mark.parametrize(("filename", "content"), [
    ("kb.jsonl", b""),
    ("samples.jsonl", b""),
    ("samples.jsonl", b"  \n\n\t\r\n"),
    ("retrieval.jsonl", b"\n\n"),
], ids=["kb 0 bytes", "samples 0 bytes", "samples whitespace only", "retrieval blank lines"])
def test_an_empty_file(any_store, tmp_path, filename, content):
    d = make_dataset(tmp_path / "bad", **{filename.removesuffix(".jsonl"): content})
    assert rejected(any_store, d) == [f"{d / filename}:1: $: file is empty (no JSON records)"]


@pytest.mark.parametrize("line_bytes", [10_000_000, 40_000_000], ids=["10 MB", "40 MB"])
def test_a_huge_line_is_rejected_in_bounded_memory(any_store, tmp_path, line_bytes):
    # kb line 4 is one triple whose tail is line_bytes long: over MAX_LINE_BYTES (8 MiB)
    prefix = b'{"triple": ["Kismet", "has_tags", "'
    huge = prefix + b"x" * (line_bytes - len(prefix) - 3) + b'"]}'
    assert len(huge) == line_bytes > MAX_LINE_BYTES
    d = make_dataset(tmp_path / "bad", kb=kb_records()[:3] + [huge] + kb_records()[3:])

    tracemalloc.start()
    try:
        lines = rejected(any_store, d)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert lines == [f"{d / 'kb.jsonl'}:4: $: line is {line_bytes + 1:,} bytes, over the 8,388,608-byte limit"]
    # The line is read in 1 MiB slices and measured before it is kept, so the peak is a
    # few slices, far below the line (and below the limit), and the same for 10 and 40 MB.
    assert peak < 6_000_000, f"peak traced memory {peak:,} bytes"


def test_a_line_just_under_the_limit_is_read(store, tmp_path):
    # the limit is on the line's bytes, not on its record: a long but legal line imports
    prefix = b'{"triple": ["Kismet", "has_plot", "'
    long_line = prefix + b"y" * (MAX_LINE_BYTES - len(prefix) - 3) + b'"]}'
    assert len(long_line) == MAX_LINE_BYTES
    d = make_dataset(tmp_path / "long", kb=kb_records() + [long_line])
    assert import_dataset(store, d, "long").units == 6


# -- one transaction ------------------------------------------------------------------------
def test_an_error_in_the_last_file_leaves_nothing_from_the_first_two(any_store, tmp_path):
    retrieval = good(RETRIEVAL)
    retrieval[2]["results"][1]["score"] = "NaN"
    d = make_dataset(tmp_path / "bad", retrieval=retrieval)
    before = row_counts(any_store)

    assert rejected(any_store, d) == [f"{d / 'retrieval.jsonl'}:3: $.results[1].score: expected a number, got string"]
    assert row_counts(any_store) == before
    assert any_store.conn.execute("SELECT count(*) FROM datasets WHERE name = 'candidate'").fetchone()[0] == 0


def test_many_problems_are_reported_up_to_a_cap(store, tmp_path):
    samples = [{**s, "id": f"s{i}", "answers": "oops"} for i, s in enumerate(good(SAMPLES) * 10)]
    d = make_dataset(tmp_path / "bad", samples=samples)
    with pytest.raises(InputRejected) as caught:
        import_dataset(store, d, "bad")
    lines = str(caught.value).splitlines()
    assert len(lines) == 21 and lines[-1] == "(stopped after 20 problems)"
    assert lines[0] == f"{d / 'samples.jsonl'}:1: $.answers: expected an array of strings, got string"
    assert row_counts(store) == dict.fromkeys(TABLES, 0)


# -- idempotence and replacement ------------------------------------------------------------
def test_importing_the_same_directory_twice_is_a_no_op(store, good_dir):
    first = import_dataset(store, good_dir, "movies")
    counts = row_counts(store)

    again = import_dataset(store, good_dir, "movies")

    assert again.unchanged and not first.unchanged
    assert (again.dataset_id, again.units, again.samples, again.retrievals, again.retrievers) == \
        (first.dataset_id, first.units, first.samples, first.retrievals, first.retrievers)
    assert row_counts(store) == counts


def test_other_content_under_the_same_name_raises_dataset_exists(store, good_dir, tmp_path):
    import_dataset(store, good_dir, "movies")
    counts = row_counts(store)
    samples = good(SAMPLES)
    samples[0]["question"] = "who was the director of Kismet"
    other = make_dataset(tmp_path / "other", samples=samples)

    with pytest.raises(DatasetExists, match="'movies' already exists with different content"):
        import_dataset(store, other, "movies")
    assert row_counts(store) == counts


def test_replace_swaps_the_dataset_and_deletes_the_old_rows(store, good_dir, tmp_path):
    old = import_dataset(store, good_dir, "movies")
    smaller = make_dataset(tmp_path / "smaller", kb=kb_records()[:3], samples=SAMPLES[:2], retrieval=[
        {"sample_id": "q1", "retriever": "dense", "results": [{"triple": KB[0], "score": 1.0}]}])

    new = import_dataset(store, smaller, "movies", replace=True)

    assert not new.unchanged and (old.units, new.units) == (5, 3)
    # the old rows are gone (SQLite may hand the freed dataset id out again)
    assert row_counts(store) == {"datasets": 1, "units": 3, "samples": 2, "retrievals": 1}
    assert store.conn.execute("SELECT DISTINCT retriever FROM retrievals").fetchall() == [("dense",)]
    assert store.conn.execute("SELECT max(uid), count(*) FROM units WHERE dataset_id = ?",
                              (new.dataset_id,)).fetchone() == (3, 3)


def test_a_rejected_replace_keeps_the_old_dataset(store, good_dir, tmp_path):
    old = import_dataset(store, good_dir, "movies")
    counts = row_counts(store)
    samples = good(SAMPLES)
    samples[1]["gold_paths"] = "Kismet"
    bad = make_dataset(tmp_path / "bad", samples=samples)

    with pytest.raises(InputRejected):
        import_dataset(store, bad, "movies", replace=True)

    assert row_counts(store) == counts
    assert store.conn.execute("SELECT id FROM datasets WHERE name = 'movies'").fetchone() == (old.dataset_id,)


# -- real data --------------------------------------------------------------------------------
@pytest.mark.skipif(not METAQA_DEV.is_dir(), reason="needs /work/shared/data/metaqa-dev")
def test_metaqa_dev_imports_whole(store):
    """The real MetaQA dev slice (35,597 triples): takes a second or two."""
    report = import_dataset(store, METAQA_DEV, "metaqa-dev", strict=True)

    assert (report.units, report.samples, report.retrievals, report.unknown_units) == (35_597, 1_000, 1_000, 0)
    assert report.retrievers == ["bm25-2hop"]
    assert row_counts(store) == {"datasets": 1, "units": 35_597, "samples": 1_000, "retrievals": 1_000}
    assert store.conn.execute("SELECT count(*) FROM units WHERE in_kb = 0").fetchone()[0] == 0


# -- the CLI ------------------------------------------------------------------------------------
def test_cli_import_of_a_bad_file_exits_2_and_writes_nothing(tmp_path):
    samples = good(SAMPLES)
    samples[2]["answers"] = "The Hunchback of Notre Dame"
    d = make_dataset(tmp_path / "bad", samples=samples)
    db = tmp_path / "cli.db"

    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "--db", str(db), "import", str(d), "--name", "x"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)

    assert proc.returncode == 2, proc.stderr
    assert f"{d / 'samples.jsonl'}:3: $.answers: expected an array of strings, got string" in proc.stderr.splitlines()
    assert "nothing was written" in proc.stderr
    s = open_store(db)
    try:
        assert row_counts(s) == dict.fromkeys(TABLES, 0)
    finally:
        s.close()
