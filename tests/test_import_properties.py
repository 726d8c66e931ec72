"""Every import format, fed any document (hypothesis): imported, or refused in the house form, never a traceback.

For each format the workbench reads (a dataset directory, RAGChecker's JSON, predictions,
human labels, a Markdown corpus, a dedup KG directory, a prompt template), documents are
generated that mix structurally valid records with adversarial values (integers past 64
bits, ``1e309``, raw ``NaN``/``Infinity``, lone surrogate escapes, terminal controls,
nesting past the depth limit, repeated and unknown keys, names equal only after NFKC or
whitespace folding, references to what is not there), byte soup, truncated and over-long
lines, empty and missing files, links (out of the directory, to themselves, to nothing) and
names that are not UTF-8. Each is imported through the real CLI entry point, in process, and:

- the exit code is 0 or 2; anything escaping ``main()`` (a traceback) fails the test, and so
  does exit 1, which is the environment's (or a database error's) code, never bad input's;
- on 2, stderr is ``error: input rejected, nothing was written:`` followed by lines
  ``FILE:LINE: FIELD: reason`` (FILE one of the inputs, LINE within it, FIELD a JSONPath-like
  place), or one ``error: ...`` line naming the input; and every row of the database is as it
  was before;
- on 0, what the import says it wrote is what the database holds, and the same import again
  changes nothing;
- either way the database passes SQLite's integrity and foreign-key checks.

Each example runs on its own copy of a template database in its own temp directory. The
``@example``s are the smallest inputs found to fail: defects of the importers, reported to
their owner and left failing until fixed.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from conftest import KG_GOLD, SAMPLE_METAQA, copy_db, every_row, write_jsonl, write_tiny_kg
from workbench.claims.runner import ClaimsConfig, run_claims
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
# Each example makes and removes a directory tree and a database: on the RAM disk (tests/scratch.py).
from scratch import SCRATCH
from workbench.cli import main
from workbench.data.corpus import ChunkConfig, chunk_document
from workbench.data.importer import import_dataset
from workbench.data.jsonl import MAX_LINE_BYTES
from workbench.data.predictions import import_predictions
from workbench.evidence.units import normalize_text, triple_key
from workbench.kg.importer import import_kg
from workbench.kg.runner import DedupConfig, plan_dedup
from workbench.runs.prompt import PromptTemplate, load_template
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.labels import AnswerKey, ClaimKey, put_label
from workbench.store.queries import get_run
from workbench.terminal import printable

# capsys is function-scoped, but each example drains it first; a directory of files is slow and big to draw.
PROPERTY = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])

CELL = "k5-b128-linear"
Q1, Q2, Q3 = "metaqa-1hop-dev-01137", "metaqa-1hop-dev-09604", "metaqa-1hop-dev-04982"
Q4 = "metaqa-1hop-dev-02071"     # MetaQA's 4th question: in the dataset, in no run (they stop at 3)


# -- the template databases -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_db(tmp_path_factory) -> Path:
    """A tiny dataset ``tiny`` and the tiny KG ``tiny``: imports must leave what is there alone."""
    path = tmp_path_factory.mktemp("base") / "wb.db"
    store = open_store(path)
    try:
        d = path.parent / "tiny"
        d.mkdir()
        write_jsonl(d / "kb.jsonl", [{"triple": ["Kismet", "directed_by", "William Dieterle"]}])
        write_jsonl(d / "samples.jsonl", [{"id": "q1", "question": "who directed Kismet",
                                           "answers": ["William Dieterle"],
                                           "gold_paths": [[["Kismet", "directed_by", "William Dieterle"]]]}])
        import_dataset(store, d, "tiny")
        import_kg(store, write_tiny_kg(path.parent / "kg"), "tiny")
    finally:
        store.close()
    return path


@pytest.fixture(scope="module")
def runs_db(tmp_path_factory) -> Path:
    """MetaQA with two runs and the tiny KG with a dedup run, built once without a model.

    ``sweep`` (one cell, CELL, over Q1..Q3) holds imported answers, Q1's decomposed by rule into
    claims 0 and 1 and checked lexically, and labels by ``ana``; ``open`` (two cells over the
    same questions) has no predictions yet. ``review`` is a candidate-only dedup run of ``tiny``.
    """
    path = tmp_path_factory.mktemp("runs") / "wb.db"
    store = open_store(path)
    try:
        import_dataset(store, SAMPLE_METAQA, "metaqa")
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(128,), formats=("linear",), limit=3), name="sweep")
        plan_sweep(store, SweepConfig(ks=(1, 2), budgets=(64,), formats=("score",), limit=3), name="open")
        answers = {Q1: "Otar Iosseliani directed it. He was born in Tbilisi.", Q2: "Anthony Minghella", Q3: ""}
        import_predictions(store, get_run(store, "sweep"), write_jsonl(path.parent / "answers.jsonl", [
            {"sample_id": q, "cell_id": CELL, "prediction": a} for q, a in answers.items()]))
        run = get_run(store, "sweep")
        run_claims(store, run, ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
        import_kg(store, write_tiny_kg(path.parent / "kg"), "tiny")
        plan_dedup(store, "tiny", DedupConfig(modes=("graph",)), "review")
        q1 = store.conn.execute("SELECT sid FROM samples WHERE id = ?", (Q1,)).fetchone()[0]
        q2 = store.conn.execute("SELECT sid FROM samples WHERE id = ?", (Q2,)).fetchone()[0]
        put_label(store, ClaimKey(run.id, CELL, q1, 0), True, "ana", via="uniform", claim="Otar Iosseliani directed it")
        put_label(store, AnswerKey(run.id, CELL, q2), False, "ana", via="browse")
        claims = store.conn.execute("SELECT count(*) FROM claims").fetchone()[0]
        assert claims >= 2, "the labels' template needs claims to label"
    finally:
        store.close()
    return path


# -- running an import and judging its outcome ----------------------------------------------------


def same_bytes(db: Path, reference: Path) -> bool:
    """Whether two databases are the same bytes, their -wal included (a database closed cleanly has none)."""
    for suffix in ("", "-wal"):
        mine, theirs = Path(f"{db}{suffix}"), Path(f"{reference}{suffix}")
        if mine.exists() != theirs.exists() or mine.exists() and mine.read_bytes() != theirs.read_bytes():
            return False
    return True


# Reading every row (conftest's every_row) and SQLite's integrity check cost an example on the MetaQA
# template more than its import does. Both are functions of the file's bytes: a database whose bytes are
# the template's (so far, every refused import) or a snapshot's (every import done again) has its rows,
# and the template's integrity, checked once; any other file is read row by row and checked whole.
_CONSISTENT: set[Path] = set()


def assert_same_rows(db: Path, reference: Path, said: str) -> None:
    """Every row of ``db`` is as in ``reference`` (the template it was copied from, or a snapshot taken before)."""
    if not same_bytes(db, reference):
        assert every_row(db) == every_row(reference), said


def assert_consistent(db: Path, template: Path) -> None:
    """``db`` passes SQLite's integrity and foreign-key checks (if it is ``template``'s bytes, as ``template`` did)."""
    if same_bytes(db, template):
        if template in _CONSISTENT:
            return
        db = template
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        con.close()
    if db == template:
        _CONSISTENT.add(template)


def rows(db: Path, sql: str, *params) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def one(db: Path, sql: str, *params):
    return rows(db, sql, *params)[0][0]


# A place in a record: $, then .key, [index] or ["any key"] (as json.dumps spells it).
_FIELD = r'\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*'
HEADER = "error: input rejected, nothing was written:"


def name_from_path(name: str, what: str = "dataset", source: str = "directory") -> str:
    """The one line refusing a name taken from a path, which shows the name, not the path, and the way out."""
    return (rf"error: the {source} name, taken as the {what} name, must .*{re.escape(printable(repr(name)))}.*"
            r"; choose a name with --name")


def line_count(data: bytes) -> int:
    """How many lines a file has, as a problem line may number them (an empty file has line 1)."""
    return max(1, data.count(b"\n") + (not data.endswith(b"\n")))


def imported(capsys, template: Path, workdir: Path, argv: list[str], inputs: dict[str, bytes | None],
             named: tuple[str, ...] = (), accepted: tuple[str, ...] = ()) -> tuple[int, str, str, Path]:
    """Run ``workbench --db COPY *argv`` on a copy of ``template``; check the outcome is 0 or a clean 2.

    ``inputs`` maps each input file's path as the importer shows it to its bytes (None: absent),
    for the line bound of a problem line; ``named`` are further paths (a directory) that a
    one-line error may name instead; ``accepted`` are patterns of further one-line refusals
    (a flag's, a name's). Returns the code, stdout, stderr and the database.
    """
    db = copy_db(template, workdir / "wb.db")
    capsys.readouterr()
    code = main(["--db", str(db), *argv])
    out, err = capsys.readouterr()
    event(f"exit {code}")
    said = f"workbench {' '.join(map(repr, argv))} exited {code}\nstdout:\n{out}\nstderr:\n{err}"
    assert code in (0, 2), said
    if code == 2:
        if not any(re.fullmatch(pattern, err.strip()) for pattern in accepted):
            assert_refusal_names_its_place(err, inputs, named, said)
        assert_same_rows(db, template, f"rows changed by a refused import\n{said}")
    assert_consistent(db, template)
    return code, out, err, db


def imported_again(capsys, db: Path, argv: list[str]) -> tuple[str, str]:
    """The same import a second time: a no-op (exit 0, every row as it was); returns stdout and stderr."""
    before = copy_db(db, db.with_name("before-again.db"))
    capsys.readouterr()
    code = main(["--db", str(db), *argv])
    out, err = capsys.readouterr()
    said = f"the same import again: exit {code}, or rows changed\n{out}{err}"
    assert code == 0, said
    assert_same_rows(db, before, said)
    return out, err


def count(text: str) -> int:
    return int(text.replace(",", ""))


def assert_refusal_names_its_place(err: str, inputs: dict[str, bytes | None], named: tuple[str, ...],
                                   said: str) -> None:
    # Only "\n" ends a line: a raw U+2028 in a quoted key is part of its line, not a break.
    lines = [line for line in err.split("\n") if line.strip()]
    assert lines, f"exit 2 without a message\n{said}"
    if lines[0] == HEADER:
        problems = lines[1:]
        if problems and re.fullmatch(r"\(stopped after \d+ problems\)", problems[-1]):
            problems = problems[:-1]
        assert problems, f"a rejection naming no problem\n{said}"
        shown = {printable(path): data for path, data in inputs.items()}
        for line in problems:
            place = next((m for path in shown
                          if (m := re.fullmatch(re.escape(path) + rf":(\d+): ({_FIELD}): (.+)", line))), None)
            assert place is not None, f"not FILE:LINE: FIELD: reason of an input file: {line!r}\n{said}"
            data = shown[place.string[:place.start(1) - 1]]
            assert data is not None, f"a problem in a file that is not there: {line!r}\n{said}"
            assert 1 <= int(place.group(1)) <= line_count(data), f"line out of the file: {line!r}\n{said}"
        return
    assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line\n{said}"
    places = [printable(p) for p in (*inputs, *named)]
    assert any(p in lines[0] for p in places), f"the error names no input\n{said}"


# How an input is there, other than as a file: absent, a link to a file beside it or outside
# the directory, a link to itself (a loop), a link to nothing, or a directory of that name.
ODD_PLACES = ["absent", "link in", "link out", "loop", "dangling", "dir"]


@st.composite
def placement(draw, odd: int) -> str:
    """"file", or ``odd`` percent of the time one of ``ODD_PLACES``."""
    return draw(st.sampled_from(ODD_PLACES)) if draw(st.integers(0, 99)) < odd else "file"


def place(path: str | bytes | Path, data: bytes | None, how: str, outside: str | bytes | Path) -> bytes | None:
    """Put ``data`` at ``path`` as ``how`` says (None: nothing); return what reading the path gives."""
    path = os.fsencode(path)
    folder, name = os.path.split(path)
    if how == "absent" or data is None and how in ("file", "link in", "link out"):
        return None
    if how in ("loop", "dangling"):
        os.symlink(name if how == "loop" else b"nowhere", path)
        return None
    if how == "dir":
        os.mkdir(path)
        return None
    target = path
    if how == "link in":
        os.symlink(name + b".target", path)     # not a name any importer reads by itself
        target = path + b".target"
    elif how == "link out":
        fd, target = tempfile.mkstemp(dir=os.fsencode(outside))
        os.close(fd)
        os.symlink(target, path)
    with open(target, "wb") as fh:
        fh.write(data)
    return data


# -- JSON text, built by hand ---------------------------------------------------------------------
# json.dumps cannot write a repeated key, a 400-digit integer or a lone surrogate escape, so
# records are assembled as text, from pieces that are themselves JSON text.

# Words whose mixes stress the checks: equal only after NFKC or whitespace folding, terminal
# controls (C0, C1, a CSI), line breaks a JSON string may hold, a tokenizer's special token.
WORDS = ["Kismet", "William Dieterle", "1944", "a", " ", "  ", "\t", "\n", "\x00", "\x1b[2J", "\x9b", "\x85",
         "\u2028", "ﬁ", "fi", "ｆi", "é", "e\u0301", "中文", "#", "/", '"', "\\", "<|endoftext|>", "\ufeff",
         "\u200b", "{evidence}", "{question}", "{instruction}"]
texts = st.one_of(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map("".join), st.text(max_size=6))


def jstr(value: str, ascii_only: bool = True) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


# Strings as a valid record holds them (not blank), and the blank ones a check refuses.
strings = st.builds(jstr, texts.filter(str.strip), st.booleans())
blanks = st.sampled_from(["", " ", "\t\n", "\u3000", "\u2028"]).map(jstr)

# Strings json.dumps would never write: surrogate escapes alone and paired, a raw control
# character (malformed JSON), NUL and terminal sequences escaped.
ODD_STRINGS = ['"\\ud800"', '"a\\udfffb"', '"\\udc00\\ud800"', '"\\ud83d\\ude00"', '"\x01"', '"\\u0000"',
               '"\\u009b2J"', '"\\u001b]0;pwned\\u0007"', '""', '"   "']
json_strings = st.one_of(strings, st.sampled_from(ODD_STRINGS))

# Numbers at and past every limit: the 64-bit ends, more digits than int() converts (4,300),
# doubles that overflow or underflow, the non-JSON literals, and malformed numbers.
NUMBERS = ["0", "-1", "7", "2.5", "-0.0", "1e2", "9223372036854775807", "-9223372036854775808",
           "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1" + "0" * 400, "9" * 5000,
           "1e309", "-1e309", "1e-400", "1.7976931348623157e308", "NaN", "Infinity", "-Infinity", "01", "1.",
           "+1", ".5"]
numbers = st.one_of(st.sampled_from(NUMBERS), st.integers(-10**20, 10**20).map(str),
                    st.floats(allow_nan=False, allow_infinity=False).map(repr))
finite_numbers = st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(["2.5", "-0.0", "1e2", "1e-400"]))

# Nesting on both sides of the depth limit (100), and far past Python's recursion limit.
DEEP = ["[" * n + "]" * n for n in (98, 99, 100, 101, 5000)] + ['{"a": ' * n + "0" + "}" * n for n in (99, 101, 3000)]

scalars = st.one_of(st.sampled_from(["null", "true", "false"]), numbers, json_strings)
keys = st.one_of(st.sampled_from(['"a"', '"id"', '"triple"', '"text"', '"a b"', '"\\u001b"', '"\\ud800"',
                                  '"x\\u2028y"']), json_strings)


def render_object(pairs) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"


def render_array(items) -> str:
    return "[" + ", ".join(items) + "]"


# Any JSON value, or what passes for one: every odd scalar, and containers with repeated keys.
any_json = st.one_of(
    st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=3).map(render_array),
                                                 st.lists(st.tuples(keys, kids), max_size=3).map(render_object)),
                 max_leaves=6),
    st.sampled_from(DEEP))
# An object a field such as "meta" may hold as it is: any storable JSON.
storable_objects = st.dictionaries(
    texts, st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                                  st.floats(allow_nan=False, allow_infinity=False), texts),
                        lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(texts, kids, max_size=3)),
                        max_leaves=5), max_size=3).map(lambda v: json.dumps(v, ensure_ascii=False))


PERCENT = st.integers(0, 99)


def spoiled(draw, spoil: int) -> bool:
    """Whether to spoil this piece: ``spoil`` percent of the time (drawn once per document).

    Called with the composite's ``draw``, not drawn as a strategy of its own: a document asks this some
    hundred times, and a new strategy object per question cost hypothesis more than the draw."""
    return spoil > 0 and draw(PERCENT) < spoil


spoil_levels = st.sampled_from([0, 0, 5, 15, 40])


@st.composite
def record(draw, fields: dict, spoil: int, *, optional: tuple[str, ...] = (), wrong: dict | None = None) -> str:
    """One JSON object as text, its fields in any order. Each is valid, or when spoiled missing,
    any JSON value, or a value of the right type that is wrong here (``wrong``); when spoiled,
    also an unknown key, or a key repeated."""
    wrong = wrong or {}
    pairs = []
    for name, valid in fields.items():
        if name in optional and draw(st.booleans()):
            continue
        if spoiled(draw, spoil):
            how = draw(st.sampled_from(["missing", "any", *(["wrong"] * 4 if name in wrong else [])]))
            if how == "missing":
                continue
            value = draw(any_json if how == "any" else wrong[name])
        else:
            value = draw(valid)
        pairs.append((jstr(name), value))
    if spoiled(draw, spoil):
        pairs.append((draw(keys), draw(any_json)))
    if pairs and spoiled(draw, spoil):
        pairs.append((draw(st.sampled_from(pairs))[0], draw(any_json)))
    return render_object(draw(st.permutations(pairs)))


# Lines that are not a record: JSON that is not an object, invalid UTF-8 in a string (a bad
# byte, an encoded surrogate, a cut sequence), a BOM past the first line, blanks, malformed JSON.
JUNK = [b"[1, 2]", b"1", b'"x"', b"null", b"   ", b"\t", b'{"a": "\xff"}', b'{"a": "\xed\xa0\x80"}', b'{"a": "\xc3"}',
        b"\xef\xbb\xbf{}", b"{", b"}", b'{"a" 1}', b"{'a': 1}", b"{} {}", b"NaN", b"{}"]


# Line lengths where the reader changes course: its first slice (1 MiB) and the 8 MiB limit.
LONG = [2**20 - 1, 2**20, 2**20 + 1, MAX_LINE_BYTES, MAX_LINE_BYTES + 1]


@st.composite
def jsonl_file(draw, lines: list[str], spoil: int, *, junk: tuple[str, ...] = ()) -> bytes | None:
    """A JSON Lines file of ``lines`` (None: the file is absent); when spoiled, lines turned into
    junk (``junk`` adds the format's own), byte soup (newlines included), cut short, nested too
    deep, repeated or padded with spaces to a length in ``LONG``; a missing last newline; a BOM;
    CRLF line ends."""
    if spoiled(draw, spoil) and draw(st.integers(0, 3)) == 0:
        return None
    out = []
    for text in lines:
        line = text.encode("utf-8", "surrogatepass")
        if spoiled(draw, spoil):
            how = draw(st.sampled_from(["junk", "soup", "cut", "deep", "twice", "long"]))
            if how == "twice":
                out.append(line)
            elif how == "long":
                line += b" " * max(0, draw(st.sampled_from(LONG)) - len(line))
            else:
                line = (draw(st.sampled_from([*JUNK, *(j.encode() for j in junk)])) if how == "junk"
                        else draw(st.binary(max_size=24)) if how == "soup"
                        else line[:draw(st.integers(0, max(0, len(line) - 1)))] if how == "cut"
                        else draw(st.sampled_from(DEEP)).encode())
        out.append(line)
    newline = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    data = b"".join(line + newline for line in out)
    if data and spoiled(draw, spoil):
        data = data.rstrip(b"\r\n")
    if spoiled(draw, spoil):
        data = b"\xef\xbb\xbf" + data
    return data


# -- 1. dataset directories: kb.jsonl, samples.jsonl, retrieval.jsonl -------------------------------

# Pools with names equal only after NFKC or whitespace folding (a duplicate to the importer).
ENTITIES = ["Kismet", "William Dieterle", "Kismet ", "ﬁlm", "film", "中文", "\x1b[31mred", "Marlene\u2028Dietrich"]
RELATIONS = ["directed_by", "release_year", "directed_by "]
CHUNK_IDS = ["c1", "c2", "ｃ1", " c1", "c 2", "c  2", "doc#1"]
triple_values = st.tuples(st.sampled_from(ENTITIES), st.sampled_from(RELATIONS), st.sampled_from(ENTITIES))
chunk_values = st.sampled_from(CHUNK_IDS)
# Directory (and file) names: odd but printable ones name a dataset; blank, control and non-UTF-8 ones do not.
DIR_NAMES = ["data", "data", "da ta", "中文", "ﬁ", " ", "\x1b[2J", os.fsdecode(b"d\xff")]
# A KB line naming both kinds, a chunk line short of fields, each kind where the other is.
KB_JUNK = ('{"triple": ["a", "r", "b"], "chunk_id": "c1"}', '{"doc_id": "d"}', '{"text": "t"}',
           '{"chunk_id": "c9", "doc_id": "d", "text": "t"}', '{"triple": ["x", "r", "y"]}')


def as_json(unit) -> str:
    return json.dumps(list(unit) if isinstance(unit, tuple) else unit, ensure_ascii=False)


def fold(unit) -> str:
    """A unit's identity to the importer: triples and chunk ids compare after NFKC and whitespace folding."""
    return triple_key(*unit) if isinstance(unit, tuple) else normalize_text(unit)


@st.composite
def dataset_directories(draw) -> dict:
    """A dataset directory whose valid form is coherent (every reference resolves, no duplicate),
    spoiled at a rate drawn per document."""
    spoil = draw(spoil_levels)
    kind = draw(st.sampled_from(["triple", "chunk"]))
    field = "triple" if kind == "triple" else "chunk_id"
    units = draw(st.lists(triple_values if kind == "triple" else chunk_values, min_size=1, max_size=4, unique_by=fold))
    known = st.sampled_from(units).map(as_json)
    # Of either kind, absent from the KB, or equal to a KB unit only after folding.
    other = st.one_of(triple_values, chunk_values).map(as_json)
    kb = [draw(record({"triple": st.just(as_json(u))}, spoil, wrong={"triple": other})) if kind == "triple" else
          draw(record({"chunk_id": st.just(as_json(u)), "doc_id": strings, "text": strings}, spoil,
                      wrong={"chunk_id": other, "doc_id": blanks, "text": blanks}))
          for u in units]

    ids = [f"q{i}" for i in range(draw(st.integers(1, 3)))]
    wrong_ids = st.one_of(st.sampled_from([*ids, "nope", "q0 ", "\x1b[2J"]).map(jstr), blanks)
    answers = st.lists(strings, min_size=1, max_size=2).map(render_array)
    samples = [draw(record(
        {"id": st.just(jstr(sample_id)), "question": strings, "answers": answers,
         "gold_paths": st.lists(st.lists(known, min_size=1, max_size=2).map(render_array),
                                max_size=2).map(render_array),
         "aliases": st.lists(st.tuples(strings, answers), max_size=2).map(render_object), "meta": storable_objects},
        spoil, optional=("aliases", "meta"),
        wrong={"id": wrong_ids, "question": blanks, "answers": st.sampled_from(["[]", '[""]', '"x"', "[null]"]),
               "gold_paths": st.one_of(st.sampled_from(["[[]]", "[1]", '"x"', "[[[]]]"]),
                                       st.lists(other, min_size=1, max_size=2).map(lambda us: f"[{render_array(us)}]")),
               "aliases": st.sampled_from(['{"a": []}', '{"a": "x"}', '{"a": [""]}', "[]"]),
               "meta": st.lists(st.tuples(keys, any_json), min_size=1, max_size=2).map(render_object)}))
        for sample_id in ids]

    retrieval = []
    retrievers = st.sampled_from(["bm25", "dense", "中文 bm25"])
    for sample_id, retriever in draw(st.lists(st.tuples(st.sampled_from(ids), retrievers), unique=True, max_size=4)):
        ranked = draw(st.lists(st.sampled_from(units), unique_by=fold, max_size=3))
        results = [draw(record({field: st.just(as_json(u)), "score": finite_numbers}, spoil,
                               wrong={field: other,
                                      "score": st.one_of(numbers, st.sampled_from(['"1"', "true", "null"]))}))
                   for u in ranked]
        retrieval.append(draw(record(
            {"sample_id": st.just(jstr(sample_id)), "retriever": st.just(jstr(retriever)),
             "results": st.just(render_array(results))}, spoil,
            wrong={"sample_id": wrong_ids,
                   "retriever": st.sampled_from(["", " ", "\x1b[2J", "a\nb", "\x9b", "bm25"]).map(jstr),
                   "results": st.sampled_from(["{}", "[1]", '[{"score": 1}]',
                                               '[{"triple": ["a", "r", "b"], "chunk_id": "c1", "score": 1}]'])})))

    return {"kb.jsonl": draw(jsonl_file(kb, spoil, junk=KB_JUNK)), "samples.jsonl": draw(jsonl_file(samples, spoil)),
            "retrieval.jsonl": draw(st.one_of(st.none(), jsonl_file(retrieval, spoil))),
            "strict": draw(st.booleans()), "dirname": draw(st.sampled_from(DIR_NAMES)), "named": draw(st.booleans()),
            "placed": draw(st.tuples(*[placement(spoil)] * 3))}


# The smallest documents that fail (defects, reported): a directory whose name is not UTF-8
# (imported under --name), and a retrieval.jsonl that is a link to itself.
SMALLEST = {"kb.jsonl": b'{"triple": ["a", "r", "b"]}\n', "retrieval.jsonl": None, "strict": False, "named": True,
            "samples.jsonl": b'{"id": "q0", "question": "q", "answers": ["b"], "gold_paths": []}\n'}


@settings(max_examples=80, **PROPERTY)
@given(doc=dataset_directories())
@example(doc={**SMALLEST, "dirname": os.fsdecode(b"d\xff"), "placed": ("file", "file", "file")})
@example(doc={**SMALLEST, "dirname": "data", "placed": ("file", "file", "loop")})
def test_any_dataset_directory_imports_or_is_refused_with_file_line_field_and_nothing_written(doc, capsys, base_db):
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        directory = Path(tmp) / doc["dirname"]
        directory.mkdir()
        inputs = {str(directory / fname): place(directory / fname, doc[fname], how, tmp)
                  for fname, how in zip(("kb.jsonl", "samples.jsonl", "retrieval.jsonl"), doc["placed"])}
        argv = ["import", str(directory), *(["--name", "fresh"] if doc["named"] else []),
                *(["--strict"] if doc["strict"] else [])]
        code, out, err, db = imported(capsys, base_db, Path(tmp), argv, inputs, named=(str(directory),),
                                      accepted=() if doc["named"] else (name_from_path(directory.name),))
        if code == 0:
            name = "fresh" if doc["named"] else directory.name
            said = re.fullmatch(rf"{re.escape(printable(name))}: imported: ([\d,]+) (?:triple|chunk)s, "
                                r"([\d,]+) samples, ([\d,]+) retrieval rows \(.*\)(?:, [\d,]+ units outside the KB)?\n",
                                out)
            assert said, out
            # What it says it imported is what the database holds.
            held = [one(db, f"SELECT count(*) FROM {table} t JOIN datasets d ON d.id = t.dataset_id"
                            " WHERE d.name = ?", name) for table in ("units", "samples", "retrievals")]
            assert [count(n) for n in said.groups()] == held, out
            out, _ = imported_again(capsys, db, argv)
            assert out.startswith(f"{printable(name)}: unchanged (already imported): "), out


# -- 2. RAGChecker's JSON ----------------------------------------------------------------------------

DOC_IDS = ["d1", "d2", "中文"]
# doc_ids that collide after folding, or with the ids the import makes up (d1#2, text:…).
ODD_DOC_IDS = ["ｄ1", " d1", "d1#2", "d1#1", "text:abc"]
CONTEXTS = ["Kismet was directed by William Dieterle.", "ﬁlm", "中文", "a <|endoftext|> b", "x\x1b[2J\x9b"]


@st.composite
def ragchecker_documents(draw) -> bytes:
    """RAGChecker's {"results": [...]}, one entry a line or spread over several; coherent when
    not spoiled (distinct query ids, each context once per query)."""
    spoil = draw(spoil_levels)
    entries = []
    for i in range(draw(st.integers(1, 4))):
        # A text may recur under the same doc_id (one unit) or another (doc_id#1, doc_id#2, ...).
        contexts = draw(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(DOC_IDS)), st.sampled_from(CONTEXTS)),
                                 unique=True, max_size=3))
        rendered = [draw(record(
            {**({} if doc is None and draw(st.booleans())
                else {"doc_id": st.just("null" if doc is None else jstr(doc))}),
             "text": st.just(jstr(text, ascii_only=False))},
            spoil, wrong={"doc_id": st.one_of(st.sampled_from(ODD_DOC_IDS).map(jstr), blanks,
                                              st.sampled_from(["3", "[]"])), "text": blanks}))
            for doc, text in contexts]
        entries.append(draw(record(
            {"query_id": st.sampled_from([jstr(f"q{i}"), "null", str(100 + i)]), "query": strings, "gt_answer": strings,
             "response": st.one_of(strings, st.just('""')), "retrieved_context": st.just(render_array(rendered)),
             # What a RAGChecker output file adds, which the import ignores.
             "metrics": st.just('{"overall_metrics": {"precision": 50.0}}')},
            spoil, optional=("query_id", "retrieved_context", "metrics"),
            wrong={"query_id": st.sampled_from(['"q0"', '"0"', '""', '" "', "1.5", "true", "[]"]),
                   "query": blanks, "gt_answer": blanks, "response": st.sampled_from(["null", "1", "[]"]),
                   "retrieved_context": st.one_of(st.sampled_from(["{}", '"x"', "[1]", '[{"doc_id": "d1"}]']),
                                                  st.just(render_array(rendered * 2)))})))
    # Entries on their own lines, some spread over several, so that line numbers mean something.
    entries = [e.replace(", ", ",\n  ") if draw(st.booleans()) else e for e in entries]
    results = "[\n" + ",\n".join(entries) + "\n]"
    if spoiled(draw, spoil):
        results = draw(st.one_of(any_json, st.just("[]")))
    pairs = [('"results"', results)]
    if draw(st.booleans()):
        pairs.append(('"tool"', '"ragchecker"'))
    if spoiled(draw, spoil):
        pairs.append(('"results"', draw(any_json)))
    data = (render_object(draw(st.permutations(pairs))) + "\n").encode("utf-8", "surrogatepass")
    if spoiled(draw, spoil):
        how = draw(st.sampled_from(["cut", "soup", "top", "bom", "byte", "blank"]))
        data = (data[:draw(st.integers(0, len(data)))] if how == "cut"
                else draw(st.binary(max_size=40)) if how == "soup"
                else draw(any_json).encode() if how == "top" else b"\xef\xbb\xbf" + data if how == "bom"
                else data.replace(b'"', b'"\xff', 1) if how == "byte" else b" \n")
    return data


@settings(max_examples=80, **PROPERTY)
@given(data=ragchecker_documents(), stem=st.sampled_from(["rag results", *DIR_NAMES]), named=st.booleans(),
       how=placement(15), score=st.sampled_from(["acc", "cover", "set_f1"]))
# The smallest document that fails (a defect, reported): a file whose name is not UTF-8, imported under --name.
@example(data=b'{"results": [{"query": "q", "gt_answer": "a", "response": "a"}]}\n', stem=os.fsdecode(b"d\xff"),
         named=True, how="file", score="cover")
def test_any_ragchecker_document_imports_or_is_refused_with_file_line_field_and_nothing_written(
        data, stem, named, how, score, capsys, base_db):
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        path = Path(tmp) / f"{stem}.json"
        data = place(path, data, how, tmp)
        argv = ["import", "--from", "ragchecker", str(path), "--score", score, *(["--name", "rag"] if named else [])]
        code, out, err, db = imported(capsys, base_db, Path(tmp), argv, {str(path): data},
                                      accepted=() if named else (name_from_path(stem, source="file"),))
        if code == 0:
            name = "rag" if named else stem
            # A dataset and the run of its responses, both under the name.
            assert one(db, "SELECT count(*) FROM datasets d JOIN runs r ON r.dataset_id = d.id"
                           " WHERE d.name = ? AND r.name = ?", name, name) == 1
            out, _ = imported_again(capsys, db, argv)
            assert out.startswith(f"{printable(name)}: unchanged (already imported): "), out


# -- 3. predictions for a planned run ------------------------------------------------------------------

CELLS = {"open": ["k1-b64-score", "k2-b64-score"], "sweep": [CELL]}


@st.composite
def prediction_files(draw) -> tuple[str, bool, bytes | None]:
    """A run, whether to --replace, and predictions for it: each (sample, cell) of the run once
    when not spoiled (``sweep`` already holds predictions: a different one needs --replace)."""
    spoil = draw(spoil_levels)
    run = draw(st.sampled_from(sorted(CELLS)))
    # Q4 looks as good (a sample of the run's dataset) but the run never asked it.
    jobs = draw(st.lists(st.tuples(st.sampled_from([Q1, Q2, Q3, Q4]), st.sampled_from(CELLS[run])), unique=True,
                         min_size=1, max_size=4))
    lines = [draw(record(
        {"sample_id": st.just(jstr(sample)), "cell_id": st.just(jstr(cell)),
         "prediction": st.one_of(strings, st.just('""'), st.just(jstr("Anthony Minghella")))}, spoil,
        wrong={"sample_id": st.sampled_from(["nope", Q1 + " ", Q1.upper(), ""]).map(jstr),
               "cell_id": st.sampled_from([CELL, "k1-b64-score", "k1-b64-linear", "nope", " "]).map(jstr),
               "prediction": st.sampled_from(["null", "1", "[]", '{"answers": ["x"]}'])}))
        for sample, cell in jobs]
    return run, draw(st.booleans()), draw(jsonl_file(lines, spoil)), draw(placement(15))


@settings(max_examples=70, **PROPERTY)
@given(doc=prediction_files())
# The smallest file that fails (a defect, reported): a prediction for a sample of the dataset the run never asked.
@example(doc=("open", False, f'{{"sample_id": "{Q4}", "cell_id": "k1-b64-score", "prediction": "x"}}\n'.encode(),
              "file"))
def test_any_predictions_file_imports_or_is_refused_with_file_line_field_and_nothing_written(doc, capsys, runs_db):
    run, replace, data, how = doc
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        path = Path(tmp) / "predictions.jsonl"
        data = place(path, data, how, tmp)
        argv = ["predictions", "import", str(path), run, *(["--replace"] if replace else [])]
        code, out, err, db = imported(capsys, runs_db, Path(tmp), argv, {str(path): data})
        if code == 0:
            assert re.fullmatch(rf"run {run}: [\d,]+ predictions read, [\d,]+ scored \(\w+\), [\d,]+ unchanged\n",
                                out), out
            out, _ = imported_again(capsys, db, argv)
            assert re.fullmatch(rf"run {run}: ([\d,]+) predictions read, 0 scored \(\w+\), \1 unchanged\n", out), out


# -- 4. human label files ----------------------------------------------------------------------------

# Candidate pairs of the dedup run `review` (the tiny KG's Dieterle spellings).
PAIRS = [("William Dieterle", "W. Dieterle"), ("W. Dieterle", "william dieterle")]
GOOD_TIMES = ["2026-11-24T02:00:00+00:00", "2026-11-24T02:00:00Z", "2026-11-24T02:00:00.123456-05:30"]
BAD_TIMES = ["2026-11-24T02:00:00", "2026-11-24", "tomorrow", "2026-11-24T02:00:00+25:00", "2026-13-01T00:00:00+00:00",
             "2026-11-24T02:00:00+00:00\x00", ""]


@st.composite
def label_files(draw) -> tuple[bool, bytes | None]:
    """Whether to --replace, and labels of every kind: each valid one names what the template
    holds (``ana`` already labelled Q1's claim 0 and Q2's answer, so some disagree)."""
    spoil = draw(spoil_levels)
    annotators = ["ana", "bo", "中文"]
    common = {"label": st.sampled_from(["true", "false"]), "annotator": st.sampled_from(annotators).map(jstr),
              "via": st.sampled_from(["uniform", "disagreement", "browse", "import"]).map(jstr),
              "labelled_at": st.sampled_from(GOOD_TIMES).map(jstr)}
    wrong = {"kind": st.sampled_from(["Claim", "pair", "", "1"]).map(jstr) | st.sampled_from(["1", "null"]),
             "run": st.sampled_from(["sweep", "open", "review", "nope"]).map(jstr),
             "sample_id": st.sampled_from([Q3, "nope", Q1 + " ", Q1.upper()]).map(jstr),
             "cell_id": st.sampled_from([CELL, "k1-b64-score", "nope"]).map(jstr),
             "claim": st.sampled_from(["0", "1", "2", "-1", "true", "1.0", "9223372036854775807"]),
             "text": blanks, "a": st.sampled_from([*KG_GOLD, "nope"]).map(jstr),
             "b": st.sampled_from([*KG_GOLD, "nope"]).map(jstr),
             "label": st.sampled_from(["1", "0", "null", '"true"']),
             "annotator": st.one_of(st.sampled_from([" ", "\x1b[2J", "a\nb", "\x9b"]).map(jstr), blanks),
             "via": st.sampled_from(["x", "Uniform", ""]).map(jstr),
             "labelled_at": st.sampled_from(BAD_TIMES).map(jstr)}
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["claim", "answer", "dedup_pair"]))
        if kind == "dedup_pair":
            a, b = draw(st.sampled_from(PAIRS).flatmap(lambda p: st.permutations(p)))
            item = {"run": st.just(jstr("review")), "a": st.just(jstr(a)), "b": st.just(jstr(b))}
        else:
            # Q4 looks as good (a sample of the run's dataset) but the run never asked it.
            sample = draw(st.sampled_from([Q1] if kind == "claim" else [Q1, Q2, Q3, Q4]))
            item = {"run": st.just(jstr("sweep")), "sample_id": st.just(jstr(sample)), "cell_id": st.just(jstr(CELL))}
            if kind == "claim":
                item |= {"claim": st.sampled_from(["0", "1"]),
                         "text": st.one_of(strings, st.just(jstr("Otar Iosseliani directed it")))}
        lines.append(draw(record({"kind": st.just(jstr(kind)), **item, **common}, spoil,
                                 optional=("via", "labelled_at"), wrong=wrong)))
    return draw(st.booleans()), draw(jsonl_file(lines, spoil)), draw(placement(15))


@settings(max_examples=70, **PROPERTY)
@given(doc=label_files())
# The smallest file that fails (a defect, reported): an answer label for a sample the run never asked is stored.
@example(doc=(False, f'{{"kind": "answer", "run": "sweep", "sample_id": "{Q4}", "cell_id": "{CELL}", "label": true, '
                     '"annotator": "ana"}\n'.encode(), "file"))
def test_any_label_file_imports_or_is_refused_with_file_line_field_and_nothing_written(doc, capsys, runs_db):
    replace, data, how = doc
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        path = Path(tmp) / "labels.jsonl"
        data = place(path, data, how, tmp)
        argv = ["judge", "labels", "import", str(path), *(["--replace"] if replace else [])]
        code, out, err, db = imported(capsys, runs_db, Path(tmp), argv, {str(path): data})
        if code == 0:
            assert re.fullmatch(rf"{re.escape(str(path))}: [\d,]+ labels · [\d,]+ added, [\d,]+ changed, "
                                r"[\d,]+ already stored\n", err), err
            _, err = imported_again(capsys, db, argv)
            assert re.fullmatch(rf"{re.escape(str(path))}: ([\d,]+) labels · 0 added, 0 changed, \1 already stored\n",
                                err), err
            # Every label stored names an item that is there: an answer the run has, a claim, a candidate pair.
            assert rows(db, "SELECT l.* FROM answer_labels l LEFT JOIN events e ON e.run_id = l.run_id"
                            " AND e.cell_id = l.cell_id AND e.sid = l.sid WHERE e.run_id IS NULL") == []
            assert rows(db, "SELECT l.* FROM claim_labels l WHERE NOT EXISTS (SELECT 1 FROM claims c JOIN claim_runs r"
                            " ON r.id = c.claim_run_id WHERE r.run_id = l.run_id AND c.cell_id = l.cell_id"
                            " AND c.sid = l.sid AND c.idx = l.idx)") == []
            assert rows(db, "SELECT l.* FROM pair_labels l LEFT JOIN dedup_pairs p ON p.run_id = l.dedup_run_id"
                            " AND p.a = l.a AND p.b = l.b WHERE p.run_id IS NULL") == []


# -- 5. Markdown corpus directories ---------------------------------------------------------------

# File and folder names as bytes: equal after NFKC or whitespace folding, a terminal escape,
# names a corpus skips (README, LICENSE), and bytes that are not UTF-8 (a bad byte, a cut
# sequence, an encoded surrogate).
NAME_PARTS = [b"a", b"b", b"a b", b"a  b", b" a", "ﬁ".encode(), b"fi", "é".encode(), "e\u0301".encode(),
              "中文".encode(), b"\x1b[2J", b"README", b"license", b"x.y", b"#0", b"",
              b"\xff", b"\xc3", b"\xed\xa0\x80"]
SUFFIXES = [b".md"] * 5 + [b".MD", b".txt", b""]
MARKDOWN = [b"# Title\n", b"## Section\n", b"Kismet was directed by William Dieterle. ", b"\n\n\n", b"![x](y.png)",
            b"\x00", b"\x1b[2J", "中文".encode(), b"\r\n", b"####### seven\n", b"\xff", b"\xed\xa0\x80", b"\xc3",
            b"\xef\xbb\xbf"]
ROOTS = [b"corpus", b"corpus", "中文".encode(), "ﬁ".encode(), b" ", b"\x1b[2J", b"c\xff"]


@st.composite
def corpus_trees(draw) -> dict:
    """A Markdown tree: files (bytes names, bytes contents, each placed as a file, a link...),
    maybe a folder that is a link, the root's own name, and the cutting flags."""
    files = {}
    for _ in range(draw(st.integers(0, 6))):
        # Folders are prefixed so that no folder has a file's name.
        folders = tuple(b"dir-" + p for p in draw(st.lists(st.sampled_from(NAME_PARTS), max_size=2)))
        name = draw(st.sampled_from(NAME_PARTS)) + draw(st.sampled_from(SUFFIXES))
        if name:
            files[(*folders, name)] = (b"".join(draw(st.lists(st.sampled_from(MARKDOWN), max_size=6))),
                                       draw(placement(25)))
    # Every way of cutting, down to the smallest chunks the flags allow.
    flags = ["--chunk-by", draw(st.sampled_from(["heading", "size"])),
             "--max-chars", str(draw(st.sampled_from([20, 64, 500]))),
             "--overlap", str(draw(st.sampled_from([0, 1, 19]))),
             "--category-depth", str(draw(st.integers(1, 3)))]
    return {"files": files, "root": draw(st.sampled_from(ROOTS)), "named": draw(st.booleans()), "flags": flags,
            "folder_link": draw(st.sampled_from([None, None, None, "in", "out", "loop"]))}


def readable(parts: tuple[bytes, ...], data: bytes) -> bool:
    """Whether a corpus file can be read: its path and its content are UTF-8."""
    try:
        b"/".join(parts).decode("utf-8")
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def one_file_and(parts: tuple[bytes, ...] = (b"b.md",), data: bytes = b"y", how: str = "file",
                  root: bytes = b"corpus") -> dict:
    return {"files": {(b"a.md",): (b"x", "file"), parts: (data, how)}, "root": root, "named": True, "folder_link": None,
            "flags": ["--chunk-by", "heading", "--max-chars", "500", "--overlap", "0", "--category-depth", "2"]}


@settings(max_examples=80, **PROPERTY)
@given(tree=corpus_trees())
# The smallest corpora that fail (defects, reported): file names equal after whitespace
# folding; a root whose name is not UTF-8 (imported under --name); a link to itself; a link to nothing.
@example(tree=one_file_and((b"a  b.md",)) | {"files": {(b"a b.md",): (b"x", "file"), (b"a  b.md",): (b"y", "file")}})
@example(tree=one_file_and(root=b"c\xff"))
@example(tree=one_file_and(how="loop"))
@example(tree=one_file_and(how="dangling"))
# A corpus whose only file is empty: refused, as it has no chunk.
@example(tree=one_file_and() | {"files": {(b"a.md",): (b"", "file")}})
def test_any_markdown_corpus_imports_its_readable_files_or_is_refused_in_one_line_and_nothing_written(
        tree, capsys, base_db):
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        root = os.path.join(os.fsencode(tmp), tree["root"])
        os.mkdir(root)
        for parts, (data, how) in tree["files"].items():
            os.makedirs(os.path.join(root, *parts[:-1]), exist_ok=True)
            place(os.path.join(root, *parts), data, how, tmp)
        if tree["folder_link"]:
            os.symlink({"in": b".", "out": os.fsencode(tmp), "loop": b"dir-link"}[tree["folder_link"]],
                       os.path.join(root, b"dir-link"))
        root_arg = os.fsdecode(root)        # a name that is not UTF-8, as Python passes it in sys.argv
        root_name = os.fsdecode(tree["root"])
        argv = ["corpus", "import", root_arg, *tree["flags"], *(["--name", "corpus"] if tree["named"] else [])]
        code, out, err, db = imported(capsys, base_db, Path(tmp), argv, {}, named=(root_arg,),
                                      accepted=() if tree["named"] else (name_from_path(root_name),))
        candidates = {parts: (data, how) for parts, (data, how) in tree["files"].items()
                      if parts[-1].endswith(b".md") and how not in ("absent", "dir")
                      and os.fsdecode(parts[-1]).lower() not in ("readme.md", "license.md")}
        wanted = {os.fsdecode(b"/".join(parts)) for parts, (data, how) in candidates.items()
                  if how in ("file", "link in") and readable(parts, data)}
        # Names equal after NFKC and whitespace folding would share their chunks' keys: one of them
        # may be refused (with a warning, or the whole corpus naming its root), but not lost unsaid.
        folded = len({normalize_text(rel) for rel in wanted}) < len(wanted)
        # Files that hold no text (empty, blank, images only) give no chunk: a corpus of only those is refused.
        textless = not any(chunk_document(data.decode("utf-8"), ChunkConfig())
                           for parts, (data, how) in candidates.items() if os.fsdecode(b"/".join(parts)) in wanted)
        if code == 2:
            assert (not wanted or folded or textless
                    or not tree["named"] and re.fullmatch(name_from_path(root_name), err.strip())
                    or not readable((tree["root"],), b"")), f"readable files refused\n{err}"
            return
        assert wanted, f"imported without a readable file\n{out}{err}"
        name = "corpus" if tree["named"] else root_name
        docs = {doc_id for (doc_id,) in rows(db, "SELECT doc_id FROM documents d JOIN datasets s ON s.id = d.dataset_id"
                                                 " WHERE s.name = ?", name)}
        assert docs == wanted or folded and docs < wanted, (docs, wanted)
        for doc_id, chunk_id, text in rows(db, "SELECT u.doc_id, u.chunk_id, u.text FROM units u JOIN datasets s"
                                               " ON s.id = u.dataset_id WHERE s.name = ?", name):
            assert doc_id in docs and chunk_id.startswith(f"{doc_id}#") and text.strip()
        # Every file passed over (unreadable, not UTF-8, a link out, in a loop or to nothing) is
        # named in a warning, and so is a folder that leads out; a file imported never is.
        warnings = [line for line in err.split("\n") if line.startswith("warning: ")]

        def warned(rel: str) -> bool:
            return any(re.search(rf"skipped: {re.escape(printable(rel))}(: | -> |$)", w) for w in warnings)

        passed_over = {os.fsdecode(b"/".join(parts)) for parts in candidates} - docs
        for how in {how for parts, (data, how) in candidates.items() if os.fsdecode(b"/".join(parts)) in passed_over}:
            event(f"imported beside a file passed over: {how}")
        for rel in passed_over | ({"dir-link"} if tree["folder_link"] == "out" else set()):
            assert warned(rel), (rel, err)
        for rel in docs:
            assert not warned(rel), (rel, err)
        out, _ = imported_again(capsys, db, argv)
        assert out.startswith(f"{printable(name)}: unchanged (already imported): "), out


# -- 6. dedup KG directories: kb.jsonl, chunks.jsonl, gold_clusters.jsonl ----------------------------

@st.composite
def kg_directories(draw) -> dict:
    """A KG directory, coherent when not spoiled: distinct triples, chunk ids and gold entities,
    each source chunk in chunks.jsonl, each gold entity a head or tail of kb.jsonl."""
    spoil = draw(spoil_levels)
    has_chunks = draw(st.booleans())
    chunk_ids = draw(st.lists(chunk_values, unique=True, min_size=1, max_size=3)) if has_chunks else []
    chunks = [draw(record({"chunk_id": st.just(jstr(c)), "text": strings}, spoil,
                          wrong={"chunk_id": st.one_of(chunk_values.map(jstr), blanks), "text": blanks}))
              for c in chunk_ids]
    triples = draw(st.lists(triple_values, min_size=1, max_size=4, unique=True))
    kb = [draw(record({"triple": st.just(as_json(t)),
                       "source_chunks": st.lists(st.sampled_from(chunk_ids), max_size=2).map(
                           lambda cs: render_array(map(jstr, cs))) if chunk_ids else st.just("[]")},
                      spoil, optional=("source_chunks",),
                      wrong={"triple": triple_values.map(as_json), "source_chunks": st.sampled_from(
                          ['["nope"]', '[""]', '"c1"', "[1]", "null"])}))
          for t in triples]
    entities = sorted({e for h, _, t in triples for e in (h, t)})
    gold = [draw(record({"entity": st.just(jstr(e)), "cluster": strings}, spoil,
                        wrong={"entity": st.one_of(st.sampled_from(ENTITIES).map(jstr), blanks), "cluster": blanks}))
            for e in draw(st.lists(st.sampled_from(entities), unique=True, max_size=3))]
    return {"kb.jsonl": draw(jsonl_file(kb, spoil)),
            "chunks.jsonl": draw(jsonl_file(chunks, spoil)) if has_chunks else None,
            "gold_clusters.jsonl": draw(jsonl_file(gold, spoil)) if gold else None,
            "dirname": draw(st.sampled_from(DIR_NAMES)), "named": draw(st.booleans()),
            "placed": draw(st.tuples(*[placement(spoil)] * 3))}


@settings(max_examples=80, **PROPERTY)
@given(doc=kg_directories())
# The smallest directory that fails (a defect, reported): its name is not UTF-8, imported under --name.
@example(doc={"kb.jsonl": b'{"triple": ["a", "r", "b"]}\n', "chunks.jsonl": None, "gold_clusters.jsonl": None,
              "dirname": os.fsdecode(b"d\xff"), "named": True, "placed": ("file", "file", "file")})
def test_any_kg_directory_imports_or_is_refused_with_file_line_field_and_nothing_written(doc, capsys, base_db):
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        directory = Path(tmp) / doc["dirname"]
        directory.mkdir()
        inputs = {str(directory / fname): place(directory / fname, doc[fname], how, tmp)
                  for fname, how in zip(("kb.jsonl", "chunks.jsonl", "gold_clusters.jsonl"), doc["placed"])}
        argv = ["dedup", "import", str(directory), *(["--name", "kg"] if doc["named"] else [])]
        code, out, err, db = imported(capsys, base_db, Path(tmp), argv, inputs, named=(str(directory),),
                                      accepted=() if doc["named"] else (name_from_path(directory.name, "KG"),))
        if code == 0:
            name = "kg" if doc["named"] else directory.name
            said = re.fullmatch(rf"{re.escape(printable(name))}: imported: ([\d,]+) triples, ([\d,]+) entities, "
                                r"([\d,]+) chunks, ([\d,]+) gold cluster lines\n", out)
            assert said, out
            held = [one(db, f"SELECT count(*) FROM {table} t JOIN kgs k ON k.id = t.kg_id WHERE k.name = ?", name)
                    for table in ("kg_triples", "kg_entities", "kg_chunks", "kg_gold")]
            assert [count(n) for n in said.groups()] == held, out
            out, _ = imported_again(capsys, db, argv)
            assert out.startswith(f"{printable(name)}: unchanged (already imported): "), out


# -- 7. prompt templates -----------------------------------------------------------------------------

# A base URL is left out on purpose: once the template is read, `run` stops at the missing
# --base-url (exit 2, one line) before any model, dataset or database is touched.
BASE_URL_MISSING = "error: --base-url: required with --backend openai (e.g. http://127.0.0.1:8080/v1)"


@st.composite
def user_templates(draw, slots: bool = True) -> str:
    words = draw(st.lists(st.sampled_from([*WORDS, "Question: ", "\n"]), max_size=4))
    for slot in ("{evidence}", "{question}") if slots else ():
        words.insert(draw(st.integers(0, len(words))), slot)
    return "".join(words)


@st.composite
def prompt_files(draw) -> tuple[str, bytes]:
    """A template file: JSON {"system", "user"} (by its .json suffix, any case) or a text user template."""
    spoil = draw(spoil_levels)
    suffix = draw(st.sampled_from([".json", ".json", ".JSON", ".txt", ""]))
    if suffix.lower() == ".json" or draw(st.integers(0, 3)) == 0:
        text = draw(record({"system": strings, "user": user_templates().map(jstr)}, spoil, optional=("system",),
                           wrong={"system": st.sampled_from(["null", "1", "[]"]),
                                  "user": user_templates(slots=False).map(jstr)}))
        if draw(st.booleans()):
            text = text.replace(", ", ",\n")
    else:
        text = draw(user_templates(slots=not spoiled(draw, spoil)))
    data = text.encode("utf-8", "surrogatepass")
    if spoiled(draw, spoil):
        how = draw(st.sampled_from(["cut", "soup", "top", "byte"]))
        data = (data[:draw(st.integers(0, len(data)))] if how == "cut"
                else draw(st.binary(max_size=40)) if how == "soup"
                else draw(any_json).encode() if how == "top" else data + b"\xff")
    return suffix, data


@settings(max_examples=70, **PROPERTY)
@given(doc=prompt_files(), how=placement(15))
def test_any_prompt_template_is_read_or_refused_naming_the_file_before_anything_runs(doc, how, capsys, base_db):
    suffix, data = doc
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        path = Path(tmp) / f"prompt{suffix}"
        data = place(path, data, how, tmp)
        try:
            template = load_template(path, "json")
        except ValueError as exc:       # the one documented refusal: anything else is a bug
            assert str(path) in str(exc), exc
            template = None
        if template is not None:
            assert isinstance(template, PromptTemplate) and isinstance(template.system, str)
            assert "{evidence}" in template.user and "{question}" in template.user
        argv = ["run", "tiny", "--k", "1", "--budget", "64", "--dry-run", "--backend", "openai", "--prompt-file",
                str(path)]
        code, out, err, db = imported(capsys, base_db, Path(tmp), argv, {str(path): data},
                                      accepted=(re.escape(BASE_URL_MISSING),))
        event("template read" if template is not None else "template refused")
        # The CLI reads the template as load_template does: refused there, refused here, naming the file.
        assert code == 2 and (err.strip() == BASE_URL_MISSING) == (template is not None), err
