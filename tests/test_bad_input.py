"""Bad input is refused with exit 2, one message that names the place, and nothing written.

JSON that parses but cannot be kept (nesting deep enough to exhaust the stack, a lone
surrogate, a repeated key) is named as ``file:line: field: reason`` by every importer. A
flag whose number cannot work, or a name that is blank or would drive the terminal, is
refused while parsing the command line. A K past every retrieval list is allowed but said:
at sweep time and in the ledger header.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import REPO, every_row, write_jsonl
from dbtemplate import copy_of
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.data.fields import check_name
from workbench.data.jsonl import MAX_DEPTH, RecordRefused, decode_record
from workbench.errors import BadInput

DEEP = "[" * 5000 + "]" * 5000       # far past Python's recursion limit in json.loads
ESC_NAME = "\x1b[31mred"



@pytest.fixture
def db(request, tmp_path) -> Path:
    """The tiny dataset imported as ``tiny`` and swept as run ``s`` (conftest's ``tiny_swept_db``, copied)."""
    return copy_of(request, "tiny_swept_db", tmp_path / "tiny-swept.db")


def refused(argv: list[str], db: Path, capsys) -> str:
    """Run the CLI, check it exits 2 and leaves the database as it was; return its stderr."""
    before = every_row(db)
    assert main(["--db", str(db), *argv]) == 2
    assert every_row(db) == before
    return capsys.readouterr().err


def refused_by_parser(argv: list[str], db: Path, capsys) -> str:
    """As ``refused``, for a value argparse turns down (it exits 2 itself)."""
    before = every_row(db)
    with pytest.raises(SystemExit) as stop:
        main(["--db", str(db), *argv])
    assert stop.value.code == 2
    assert every_row(db) == before
    return capsys.readouterr().err


# -- JSON that parses but cannot be kept: every importer -------------------------------------
def dataset_dir(tmp_path, tiny_dir, bad_line: str) -> tuple[Path, str]:
    """The tiny dataset with ``bad_line`` as line 2 of samples.jsonl."""
    d = tmp_path / "bad-dataset"
    shutil.copytree(tiny_dir, d)
    lines = (d / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    lines[1] = bad_line
    (d / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d, "samples.jsonl"


def kg_dir(tmp_path, bad_line: str) -> tuple[Path, str]:
    """sample_data/dedup with ``bad_line`` as line 2 of kb.jsonl."""
    d = tmp_path / "bad-kg"
    shutil.copytree(REPO / "sample_data" / "dedup", d)
    lines = (d / "kb.jsonl").read_text(encoding="utf-8").splitlines()
    lines[1] = bad_line
    (d / "kb.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d, str(d / "kb.jsonl")


def predictions_file(tmp_path, bad_line: str) -> tuple[Path, str]:
    """Predictions for run ``s``: a good line 1, ``bad_line`` as line 2."""
    path = write_jsonl(tmp_path / "predictions.jsonl", [
        {"sample_id": "q1", "cell_id": "k1-b64-linear", "prediction": "William Dieterle"}, bad_line])
    return path, str(path)


def bad_record(kind: str, field: str, raw_value: str) -> str:
    """A record of ``kind`` that is good except for ``field``, whose JSON text is ``raw_value``."""
    good = {"samples": {"id": "q2", "question": "who directed Kismet", "answers": ["William Dieterle"],
                        "gold_paths": [[["Kismet", "directed_by", "William Dieterle"]]]},
            "kg": {"triple": ["Back to the Future Part III", "has_tags", "christopher lloyd"],
                   "source_chunks": ["c0006"]},
            "predictions": {"sample_id": "q2", "cell_id": "k1-b64-linear", "prediction": "Dieterle"}}[kind]
    text = json.dumps({k: v for k, v in good.items() if k != field})
    return text[:-1] + f', "{field}": {raw_value}}}'


# Per importer: a field, its JSON when good, its JSON holding a lone surrogate, and a key
# repeated (with a good value, so that only the repetition is wrong).
IMPORTERS = {
    "samples": ("meta", '{"hops": 2}', r'{"hops": 2, "note": "broken \ud800 text"}', ("id", '"q9"')),
    "kg": ("source_chunks", '["c0006"]', r'["c0006", "c\ud800"]', ("triple", '["A", "r", "B"]')),
    "predictions": ("prediction", '"Dieterle"', r'"broken \ud800 text"', ("sample_id", '"q3"')),
}
SURROGATE_PLACE = {"samples": "$.meta.note", "kg": "$.source_chunks[1]", "predictions": "$.prediction"}


def run_importer(kind: str, line: str, tmp_path, tiny_dir, db: Path, capsys) -> tuple[str, str]:
    """Import a file of ``kind`` whose line 2 is ``line``; return (stderr, the file as named)."""
    if kind == "samples":
        directory, shown = dataset_dir(tmp_path, tiny_dir, line)
        argv = ["import", str(directory), "--name", "other"]
    elif kind == "kg":
        directory, shown = kg_dir(tmp_path, line)
        argv = ["dedup", "import", str(directory), "--name", "kg"]
    else:
        path, shown = predictions_file(tmp_path, line)
        argv = ["predictions", "import", str(path), "s"]
    return refused(argv, db, capsys), shown


@pytest.mark.parametrize("kind", IMPORTERS)
def test_json_nested_5000_deep_is_refused_with_its_place_by_every_importer(kind, tmp_path, tiny_dir, db, capsys):
    field = IMPORTERS[kind][0]
    err, shown = run_importer(kind, bad_record(kind, field, DEEP), tmp_path, tiny_dir, db, capsys)
    assert f"{shown}:2: $.{field}: nested deeper than {MAX_DEPTH} levels" in err
    assert "Traceback" not in err and "RecursionError" not in err


@pytest.mark.parametrize("kind", IMPORTERS)
def test_a_lone_surrogate_is_refused_with_its_place_by_every_importer(kind, tmp_path, tiny_dir, db, capsys):
    field, _, broken, _ = IMPORTERS[kind]
    err, shown = run_importer(kind, bad_record(kind, field, broken), tmp_path, tiny_dir, db, capsys)
    assert f"{shown}:2: {SURROGATE_PLACE[kind]}: lone surrogate \\ud800 in a string (not a Unicode character)" in err


@pytest.mark.parametrize("kind", IMPORTERS)
def test_a_repeated_key_is_refused_with_its_place_by_every_importer(kind, tmp_path, tiny_dir, db, capsys):
    # Without the check the last value would win silently: each value alone is good.
    field, good, _, (repeated, value) = IMPORTERS[kind]
    line = bad_record(kind, field, good)[:-1] + f', "{repeated}": {value}}}'
    err, shown = run_importer(kind, line, tmp_path, tiny_dir, db, capsys)
    assert f"{shown}:2: $.{repeated}: duplicate key '{repeated}'" in err


def test_the_decoder_names_the_field_and_keeps_the_depth_limit_exact():
    at_limit = '{"meta": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    assert decode_record(at_limit)["meta"]                      # the record itself is level 1
    for text, field, reason in [
            ('{"meta": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}", "$.meta", f"nested deeper than {MAX_DEPTH} levels"),
            ('{"a b": ' + '{"x": ' * 3000 + "1" + "}" * 3001, '$["a b"]', f"nested deeper than {MAX_DEPTH} levels"),
            ('{"meta": {"k": 1, "k": 2}}', "$.meta.k", "duplicate key 'k'"),
            ('{"a": {"x": 1, "x": 2}, "a": 3}', "$.a", "duplicate key 'a'"),
            ('{"l": ["ok", {"k\\udc00": 1}]}', '$.l[1]["k\\udc00"]', "lone surrogate \\udc00 in a string"
                                                                     " (not a Unicode character)")]:
        with pytest.raises(RecordRefused) as refusal:
            decode_record(text)
        assert (refusal.value.field, refusal.value.reason) == (field, reason)
    # A surrogate pair is one character, and an escaped backslash is no escape.
    assert decode_record(r'{"q": "\ud83d\ude00", "r": "\\ud800"}') == {"q": "\U0001F600", "r": "\\ud800"}


def test_a_prompt_file_with_a_repeated_key_is_refused_with_its_field(tmp_path, db, capsys):
    prompt = tmp_path / "prompt.json"
    prompt.write_text('{"user": "{evidence} {question}", "user": "{question}"}', encoding="utf-8")
    err = refused(["run", "tiny", "--k", "1", "--budget", "64", "--format", "linear", "--name", "p",
                   "--prompt-file", str(prompt), "--model", str(tmp_path / "absent.gguf")], db, capsys)
    assert f"{prompt}:1: $.user: duplicate key 'user'" in err


# -- numbers that cannot work ----------------------------------------------------------------
@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--budget", str(10**23), "expected comma-separated integers from 1 to 10,000,000, got '100000000000000000000000'"),
    ("--k", str(10**23), "expected comma-separated integers from 1 to 1,000,000, got '100000000000000000000000'"),
    ("--k", "1,2.5", "expected comma-separated integers from 1 to 1,000,000, got '2.5' in '1,2.5'"),
])
@pytest.mark.parametrize("verb", ["sweep", "run"])
def test_a_number_out_of_range_is_refused_naming_its_flag(verb, flag, value, message, db, tmp_path, capsys):
    grid = {"--k": "1", "--budget": "64", flag: value}
    argv = [verb, "tiny", "--k", grid["--k"], "--budget", grid["--budget"], "--format", "linear", "--name", "n"]
    if verb == "run":
        argv += ["--model", str(tmp_path / "absent.gguf")]
    err = refused_by_parser(argv, db, capsys)
    assert err.splitlines()[-1] == f"workbench {verb}: error: argument {flag}: {message}"


def test_bootstrap_resamples_out_of_range_are_refused_naming_the_flag(db, capsys):
    err = refused_by_parser(["ledger", "s", "--resamples", str(10**23)], db, capsys)
    assert err.splitlines()[-1].endswith(
        "argument --resamples: expected an integer from 1 to 1,000,000, got '100000000000000000000000'")


@pytest.mark.parametrize(("argv", "message"), [
    (["claims", "run", "s", "--reject-below", "nan"], "argument --reject-below: expected a number from 0 to 1, got 'nan'"),
    (["claims", "run", "s", "--lexical-threshold", "0.6x"],
     "argument --lexical-threshold: expected a number from 0 to 1, got '0.6x'"),
    (["dedup", "run", "k", "--fuzzy-threshold", "inf"], "argument --fuzzy-threshold: expected a number from 0 to 1, got 'inf'"),
    (["dedup", "eval", "--threshold", "1.5"], "argument --threshold: expected a number from 0 to 1, got '1.5'"),
    (["searchain", "run", "tiny", "--hops", "0"], "argument --hops: expected an integer from 1 to 1,000, got '0'"),
    (["run", "tiny", "--k", "1", "--budget", "64", "--temperature", "-1"],
     "argument --temperature: expected a number from 0 to 100, got '-1'"),
    (["resume", "s", "--n-gpu-layers", "-2"], "argument --n-gpu-layers: expected an integer from -1 to 100,000, got '-2'"),
    (["corpus", "import", "d", "--max-chars", "5"],
     "argument --max-chars: expected an integer from 20 to 10,000,000, got '5'"),
    (["plot", "s", "--width", "10"], "argument --width: expected an integer from 30 to 1,000, got '10'"),
])
def test_a_threshold_or_size_that_cannot_work_is_refused_by_the_parser(argv, message, db, capsys):
    assert refused_by_parser(argv, db, capsys).splitlines()[-1].endswith(message)


# -- K past every retrieval list -------------------------------------------------------------
def test_k_past_the_longest_retrieval_list_is_warned_and_shown_in_the_ledger_header(db, capsys):
    # tiny's longest retrieval list holds 3 units (q2): K=3 is within it, K=5 and 500 are not.
    assert main(["--db", str(db), "sweep", "tiny", "--k", "1,3", "--budget", "64", "--format", "linear",
                 "--name", "within"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["--db", str(db), "sweep", "tiny", "--k", "1,5,500", "--budget", "64", "--format", "linear",
                 "--name", "wide"]) == 0
    warning = "K=5,500 exceed the longest retrieval list (3): cells with K ≥ 3 see the same evidence"
    assert f"warning: {warning}" in capsys.readouterr().err
    assert main(["--db", str(db), "ledger", "wide", "--resamples", "20"]) == 0
    header = capsys.readouterr().out.split("\n\n")[0]
    assert f"\nwarning: {warning}" in header
    assert main(["--db", str(db), "ledger", "within", "--resamples", "20"]) == 0
    assert "warning" not in capsys.readouterr().out
    # With --json the JSON stays one object per cell, and the warning is said on stderr (once it was lost).
    assert main(["--db", str(db), "ledger", "wide", "--resamples", "20", "--json"]) == 0
    out = capsys.readouterr()
    assert out.err == f"warning: {warning}\n" and len(json.loads(out.out)) == 3
    # The warning is kept with the run, not part of its identity: the same sweep is found again.
    assert main(["--db", str(db), "sweep", "tiny", "--k", "1,5,500", "--budget", "64", "--format", "linear",
                 "--name", "wide"]) == 0
    again = capsys.readouterr()
    assert "already planned" in again.out and f"warning: {warning}" in again.err


# -- names -----------------------------------------------------------------------------------
def naming_verbs(tmp_path, tiny_dir) -> dict[str, list[str]]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    absent = str(tmp_path / "absent.gguf")
    grid = ["tiny", "--k", "1", "--budget", "64", "--format", "linear"]
    return {"import": ["import", str(tiny_dir)],
            "corpus import": ["corpus", "import", str(corpus)],
            "sweep": ["sweep", *grid],
            "run": ["run", *grid, "--model", absent],
            "retrieve": ["retrieve", "tiny"],
            "dedup import": ["dedup", "import", str(REPO / "sample_data" / "dedup")],
            "dedup run": ["dedup", "run", "--model", absent],
            "searchain run": ["searchain", "run", "tiny", "--model", absent]}


VERBS = ["import", "corpus import", "sweep", "run", "retrieve", "dedup import", "dedup run", "searchain run"]


@pytest.mark.parametrize("verb", VERBS)
def test_a_name_with_an_escape_sequence_is_refused_and_shown_escaped(verb, tmp_path, tiny_dir, db, capsys):
    err = refused_by_parser([*naming_verbs(tmp_path, tiny_dir)[verb], "--name", ESC_NAME], db, capsys)
    assert "\x1b" not in err
    assert err.splitlines()[-1].endswith(
        r"argument --name: name must be printable, got '\x1b[31mred' (U+001B a control character at character 1)")


@pytest.mark.parametrize("verb", VERBS)
def test_a_blank_name_is_refused(verb, tmp_path, tiny_dir, db, capsys):
    err = refused_by_parser([*naming_verbs(tmp_path, tiny_dir)[verb], "--name", "   "], db, capsys)
    assert err.splitlines()[-1].endswith("argument --name: name must not be blank, got '   '")


def test_a_name_is_printable_text_in_any_script():
    assert check_name("红烧肉 set", "name") == "红烧肉 set"
    for bad, reason in [
            ("a\u202eb", "must be printable, got 'a\\u202eb' (U+202E RIGHT-TO-LEFT OVERRIDE at character 2)"),
            ("tab\there", "must be printable, got 'tab\\there' (U+0009 a control character at character 4)"),
            ("", "must not be blank, got ''")]:
        with pytest.raises(BadInput, match=re.escape(f"dataset name {reason}")):
            check_name(bad, "dataset name")


# -- numbers that cannot be stored: every importer -------------------------------------------
# A value that parses as JSON but could not be kept as it is: an integer past SQLite's 64 bits
# (from 2^63, to one too long for Python to even convert), a float too large for a double, and
# the non-JSON constants Python's parser accepts.
UNSTORABLE = {
    "2^63": ("9223372036854775808", "integer 9223372036854775808 is out of range"),
    "310 digits": ("1" * 310, "integer 111111111111… (310 digits) is out of range"),
    "5000 digits": ("7" * 5000, "integer 777777777777… (5,000 digits) is out of range"),
    "1e309": ("1e309", "number 1e309 is out of range (a finite 64-bit float)"),
    "NaN": ("NaN", "NaN is not a JSON number"),
    "-Infinity": ("-Infinity", "-Infinity is not a JSON number"),
}
NUMBER_FIELD = {"samples": "meta", "kg": "source_chunks", "predictions": "prediction"}


@pytest.mark.parametrize("value", UNSTORABLE)
@pytest.mark.parametrize("kind", IMPORTERS)
def test_a_number_that_cannot_be_stored_is_refused_with_its_place_by_every_importer(
        kind, value, tmp_path, tiny_dir, db, capsys):
    raw, reason = UNSTORABLE[value]
    field = NUMBER_FIELD[kind]
    nested = {"samples": f'{{"x": {raw}}}', "kg": f'["c0006", {raw}]', "predictions": raw}[kind]
    place = {"samples": "$.meta.x", "kg": "$.source_chunks[1]", "predictions": "$.prediction"}[kind]
    err, shown = run_importer(kind, bad_record(kind, field, nested), tmp_path, tiny_dir, db, capsys)
    assert f"{shown}:2: {place}: {reason}" in err
    assert "Traceback" not in err and "Exceeds the limit" not in err


def test_a_retrieval_score_of_310_digits_is_refused_with_its_place(tmp_path, tiny_dir, db, capsys):
    # Once a traceback: "OverflowError: int too large to convert to float".
    d = tmp_path / "big-score"
    shutil.copytree(tiny_dir, d)
    lines = (d / "retrieval.jsonl").read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace('"score": 3.0', '"score": ' + "9" * 310)
    (d / "retrieval.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = refused(["import", str(d), "--name", "big"], db, capsys)
    assert f"{d / 'retrieval.jsonl'}:1: $.results[0].score: integer 999999999999… (310 digits) is out of range" in err


def test_meta_holding_nan_or_infinity_is_refused_so_json_columns_stay_json(tmp_path, tiny_dir, db, capsys):
    # Once imported: the meta column then held NaN and Infinity, which no JSON reader accepts.
    for raw, where in [('{"x": NaN, "y": 1}', "$.meta.x"), ('{"x": 1, "y": 1e309}', "$.meta.y")]:
        err, shown = run_importer("samples", bad_record("samples", "meta", raw), tmp_path, tiny_dir, db, capsys)
        assert f"{shown}:2: {where}: " in err
        shutil.rmtree(tmp_path / "bad-dataset")
    con = sqlite3.connect(db)
    assert all(json.loads(meta) is not None for (meta,) in con.execute("SELECT meta FROM samples"))
    con.close()


def test_a_ragchecker_file_with_a_huge_integer_is_refused_at_its_entrys_line(tmp_path, db, capsys):
    path = tmp_path / "rc.json"
    path.write_text('{"results": [\n{"query_id": "a", "query": "q", "gt_answer": "x", "response": "x",\n'
                    ' "retrieved_context": [{"doc_id": "d", "text": "t"}]},\n'
                    '{"query_id": ' + "1" * 5000 + ', "query": "q", "gt_answer": "x", "response": "x",'
                    ' "retrieved_context": []}\n]}\n', encoding="utf-8")
    err = refused(["import", str(path), "--from", "ragchecker"], db, capsys)
    assert f"{path}:4: $.results[1].query_id: integer 111111111111… (5,000 digits) is out of range" in err


# -- names and strings from files -----------------------------------------------------------
def test_a_retriever_named_with_an_escape_sequence_is_refused_like_a_flag(tmp_path, tiny_dir, db, capsys):
    # Once accepted, then printed raw by `import` and `datasets`: a window title change and a screen clear.
    d = tmp_path / "esc-retriever"
    shutil.copytree(tiny_dir, d)
    text = (d / "retrieval.jsonl").read_text(encoding="utf-8")
    (d / "retrieval.jsonl").write_text(text.replace('"bm25"', json.dumps("bm\u001b]0;PWNED\u0007\u001b[2J"), 1),
                                       encoding="utf-8")
    err = refused(["import", str(d), "--name", "esc"], db, capsys)
    assert "\x1b" not in err and "\x07" not in err
    assert f"{d / 'retrieval.jsonl'}:1: $.retriever: name must be printable" in err


@pytest.mark.parametrize("verb", ["import", "corpus import", "dedup import", "import --from ragchecker"])
def test_a_name_taken_from_a_path_obeys_the_rules_of_name(verb, tmp_path, tiny_dir, db, capsys):
    # Once: a directory named "r5\nx" imported as a dataset of that name.
    if verb == "import":
        src = shutil.copytree(tiny_dir, tmp_path / "r5\nx")
        argv = ["import", str(src)]
    elif verb == "corpus import":
        src = tmp_path / "r5\nx"
        src.mkdir()
        (src / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
        argv = ["corpus", "import", str(src)]
    elif verb == "dedup import":
        src = shutil.copytree(REPO / "sample_data" / "dedup", tmp_path / "r5\nx")
        argv = ["dedup", "import", str(src)]
    else:
        src = tmp_path / "r5\nx.json"
        src.write_text('{"results": [{"query_id": "a", "query": "q", "gt_answer": "x", "response": "x", '
                       '"retrieved_context": [{"text": "t"}]}]}', encoding="utf-8")
        argv = ["import", str(src), "--from", "ragchecker"]
    err = refused(argv, db, capsys)
    source = "file name" if verb.endswith("ragchecker") else "directory name"
    assert re.search(rf"the {source}, taken as the (dataset|KG) name, must be printable, got 'r5\\nx'.*"
                     r"choose a name with --name", err)


def test_a_corpus_file_whose_name_is_not_utf8_is_skipped_and_named(tmp_path, db, capsys):
    # Once: "surrogates not allowed", naming no file.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "good.md").write_text("# Good\n\ntext\n", encoding="utf-8")
    with open(os.fsencode(corpus) + b"/bad-\xff.md", "wb") as fh:
        fh.write(b"# Bad\n\ntext\n")
    assert main(["--db", str(db), "corpus", "import", str(corpus), "--name", "c"]) == 0
    out = capsys.readouterr()
    assert "warning: unreadable, skipped: bad-\\udcff.md: its name is not UTF-8 (rename the file)" in out.err
    assert "c: imported: 1 document" in out.out


def test_corpus_category_depth_below_one_is_refused_by_the_parser(tmp_path, db, capsys):
    err = refused_by_parser(["corpus", "import", str(tmp_path), "--category-depth", "-1"], db, capsys)
    assert "argument --category-depth: expected an integer from 1 to 1,000, got '-1'" in err


def test_a_retrieval_result_naming_both_a_triple_and_a_chunk_is_refused(tmp_path, tiny_dir, db, capsys):
    d = tmp_path / "both"
    shutil.copytree(tiny_dir, d)
    text = (d / "retrieval.jsonl").read_text(encoding="utf-8")
    (d / "retrieval.jsonl").write_text(text.replace('"score": 3.0}', '"score": 3.0, "chunk_id": "c1"}', 1),
                                       encoding="utf-8")
    err = refused(["import", str(d), "--name", "both"], db, capsys)
    assert (f"{d / 'retrieval.jsonl'}:1: $.results[0]: both triple and chunk_id: a result names one unit "
            "(this dataset's units are triples: triple)") in err


def test_a_kb_link_leading_out_of_the_dataset_directory_is_refused_as_a_corpus_skips_it(tmp_path, tiny_dir, db,
                                                                                        capsys):
    d = tmp_path / "linked"
    d.mkdir()
    for name in ("samples.jsonl", "retrieval.jsonl"):
        shutil.copy(tiny_dir / name, d / name)
    (d / "kb.jsonl").symlink_to(tiny_dir / "kb.jsonl")
    err = refused(["import", str(d), "--name", "linked"], db, capsys)
    assert f"error: {d / 'kb.jsonl'}: is a symbolic link to {tiny_dir / 'kb.jsonl'}, outside {d}" in err


# -- what reaches the terminal ---------------------------------------------------------------
def test_control_characters_already_in_a_database_are_printed_escaped(db, capsys):
    # A database written before names were checked: its names still cannot drive the terminal.
    con = sqlite3.connect(db)
    con.execute("UPDATE datasets SET name = ? WHERE name = 'tiny'", ("ti\x1b]0;PWNED\x07ny",))
    con.execute("UPDATE retrievals SET retriever = ?", ("bm\x1b[2J\x9b25",))
    con.commit()
    con.close()
    assert main(["--db", str(db), "datasets"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "ti\\u001b]0;PWNED\\u0007ny: 5 triples" in out and "bm\\u001b[2J\\u009b25" in out


def test_the_terminal_escaping_keeps_json_valid(db, capsys):
    con = sqlite3.connect(db)
    con.execute("UPDATE retrievals SET retriever = ?", ("bm\x9b25",))     # C1: JSON itself does not escape it
    con.commit()
    con.close()
    assert main(["--db", str(db), "datasets", "--json"]) == 0
    out = capsys.readouterr().out
    assert "\x9b" not in out and json.loads(out)[0]["retrievers"] == ["bm\x9b25"]
