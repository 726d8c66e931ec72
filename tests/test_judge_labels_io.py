"""Human labels as JSON Lines: ``judge labels export`` and ``judge labels import``.

Two small real databases, built once per module without a model: sample_data/metaqa with a
one-cell sweep ``sweep`` over its first 3 questions (imported answers, their claims decomposed by
rule and checked lexically: Q1's answer has claims 0 and 1, Q3's empty one none), and the tiny dedup KG ``tiny`` with a
candidate-only dedup run ``review``. The second database creates a decoy run, KG and dedup run
first, so every id differs from the first's while every name is the same: a label file
carries names, never ids.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import SAMPLE_METAQA, copy_db, import_films_kg, write_jsonl, write_tiny_kg
from workbench.data.errors import InputRejected
from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.data.importer import import_dataset
from workbench.data.predictions import import_predictions
from workbench.data.labels import FIELDS, LabelImport, export_labels, import_labels
from workbench.errors import BadInput
from workbench.kg.importer import import_kg
from workbench.kg.runner import DedupConfig, plan_dedup
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import Store, open_store
from workbench.store.labels import AnswerKey, ClaimKey, PairKey, put_label, stored_label
from workbench.store.lookup import NotFound
from workbench.store.queries import get_run

CELL = "k5-b128-linear"
Q1, Q2, Q3 = "metaqa-1hop-dev-01137", "metaqa-1hop-dev-09604", "metaqa-1hop-dev-04982"
TABLES = ("claim_labels", "pair_labels", "answer_labels")


def _build(path: Path, *, decoys: bool) -> Path:
    store = open_store(path)
    try:
        if decoys:      # shift every id: runs, KGs, dedup runs (entity ids are per KG, sids per dataset)
            import_dataset(store, SAMPLE_METAQA, "metaqa")
            plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",), limit=2), name="decoy")
            (path.parent / "films").mkdir()
            import_films_kg(store, path.parent / "films")
            plan_dedup(store, "films", DedupConfig(modes=("graph",)), "decoy-review")
        else:
            import_dataset(store, SAMPLE_METAQA, "metaqa")
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(128,), formats=("linear",), limit=3), name="sweep")
        answers = {Q1: "Otar Iosseliani directed it. He was born in Tbilisi.", Q2: "Anthony Minghella", Q3: ""}
        import_predictions(store, get_run(store, "sweep"), write_jsonl(path.parent / f"{path.stem}-answers.jsonl", [
            {"sample_id": q, "cell_id": CELL, "prediction": a} for q, a in answers.items()]))
        run_claims(store, get_run(store, "sweep"), ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
        import_kg(store, write_tiny_kg(path.parent / "kg"), "tiny")
        plan_dedup(store, "tiny", DedupConfig(modes=("graph",)), "review")
    finally:
        store.close()
    return path


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> tuple[Path, Path]:
    return (_build(tmp_path_factory.mktemp("labels") / "wb.db", decoys=False),
            _build(tmp_path_factory.mktemp("shifted") / "wb.db", decoys=True))


def _opened_copy(template: Path, directory: Path):
    directory.mkdir()
    store = open_store(copy_db(template, directory / "wb.db"))
    yield store
    store.close()


@pytest.fixture
def db(tmp_path, templates):
    """This test's copy of the first database, open."""
    yield from _opened_copy(templates[0], tmp_path / "one")


@pytest.fixture
def shifted(tmp_path, templates):
    """This test's copy of the second database (same names, other ids), open."""
    yield from _opened_copy(templates[1], tmp_path / "two")


# -- helpers ----------------------------------------------------------------------------------------

def run_id(store: Store, name: str = "sweep") -> int:
    return store.conn.execute("SELECT id FROM runs WHERE name = ?", (name,)).fetchone()[0]


def dedup_id(store: Store, name: str = "review") -> int:
    return store.conn.execute("SELECT id FROM dedup_runs WHERE name = ?", (name,)).fetchone()[0]


def sid(store: Store, sample_id: str) -> int:
    return store.conn.execute("SELECT sid FROM samples WHERE id = ?", (sample_id,)).fetchone()[0]


def eid(store: Store, name: str, kg: str = "tiny") -> int:
    return store.conn.execute("SELECT e.eid FROM kg_entities e JOIN kgs k ON k.id = e.kg_id"
                              " WHERE k.name = ? AND e.name = ?", (kg, name)).fetchone()[0]


def pair(store: Store, x: str, y: str) -> PairKey:
    a, b = sorted((eid(store, x), eid(store, y)))
    return PairKey(dedup_id(store), a, b)


def raw_rows(store: Store) -> dict[str, list[tuple]]:
    """Every label row exactly as stored, ids and times included."""
    return {t: store.conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4").fetchall() for t in TABLES}


def named_rows(store: Store) -> dict[str, list[tuple]]:
    """Every label row with its ids replaced by names: comparable across databases."""
    q = store.conn.execute
    return {
        "claim": sorted(q("SELECT r.name, l.cell_id, s.id, l.idx, l.annotator, l.label, l.claim, l.via, l.labelled_at"
                          " FROM claim_labels l JOIN runs r ON r.id = l.run_id"
                          " JOIN samples s ON s.dataset_id = r.dataset_id AND s.sid = l.sid").fetchall()),
        "dedup_pair": sorted(q("SELECT r.name, ea.name, eb.name, l.annotator, l.label, l.via, l.labelled_at"
                               " FROM pair_labels l JOIN dedup_runs r ON r.id = l.dedup_run_id"
                               " JOIN kg_entities ea ON ea.kg_id = r.kg_id AND ea.eid = l.a"
                               " JOIN kg_entities eb ON eb.kg_id = r.kg_id AND eb.eid = l.b").fetchall()),
        "answer": sorted(q("SELECT r.name, l.cell_id, s.id, l.annotator, l.label, l.via, l.labelled_at"
                           " FROM answer_labels l JOIN runs r ON r.id = l.run_id"
                           " JOIN samples s ON s.dataset_id = r.dataset_id AND s.sid = l.sid").fetchall()),
    }


def count(store: Store) -> int:
    return sum(store.count(t) for t in TABLES)


def label_some(store: Store) -> None:
    """Labels of all three kinds, two annotators, several ways of choosing, a non-ASCII claim."""
    r = run_id(store)
    put_label(store, ClaimKey(r, CELL, sid(store, Q1), 0), True, "ana", via="uniform",
              claim="Otar Iosseliani directed Farewell, Home Sweet Home")
    put_label(store, ClaimKey(r, CELL, sid(store, Q1), 1), False, "ana", via="uniform", claim="Il a réalisé « Kismet »")
    put_label(store, ClaimKey(r, CELL, sid(store, Q1), 0), False, "bo", via="disagreement",
              claim="Otar Iosseliani directed Farewell, Home Sweet Home")
    put_label(store, pair(store, "William Dieterle", "W. Dieterle"), True, "ana", via="browse")
    put_label(store, pair(store, "W. Dieterle", "william dieterle"), False, "bo", via="uniform")
    put_label(store, AnswerKey(r, CELL, sid(store, Q2)), True, "ana", via="uniform")
    put_label(store, AnswerKey(r, CELL, sid(store, Q3)), False, "bo", via="browse")


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def claim_line(**changes) -> dict:
    line = {"kind": "claim", "run": "sweep", "sample_id": Q1, "cell_id": CELL, "claim": 0,
            "text": "Otar Iosseliani directed Farewell, Home Sweet Home", "label": True, "annotator": "ana",
            "via": "uniform", "labelled_at": "2026-11-24T02:00:00+00:00"}
    line.update(changes)
    return {k: v for k, v in line.items() if v is not ...}     # ... drops a key


def pair_line(**changes) -> dict:
    line = {"kind": "dedup_pair", "run": "review", "a": "William Dieterle", "b": "W. Dieterle", "label": True,
            "annotator": "ana", "via": "browse", "labelled_at": "2026-11-24T02:00:00+00:00"}
    line.update(changes)
    return {k: v for k, v in line.items() if v is not ...}


def answer_line(**changes) -> dict:
    line = {"kind": "answer", "run": "sweep", "sample_id": Q2, "cell_id": CELL, "label": True, "annotator": "ana",
            "via": "uniform", "labelled_at": "2026-11-24T02:00:00+00:00"}
    line.update(changes)
    return {k: v for k, v in line.items() if v is not ...}


# -- export -----------------------------------------------------------------------------------------

def test_an_export_writes_one_line_per_label_with_names_not_ids_keys_in_a_fixed_order(db, tmp_path):
    """Each kind has its own keys, always in the same order; items are named by run name, sample id,
    cell id and entity names; labels come kind by kind (claims, pairs, answers)."""
    label_some(db)
    out = tmp_path / "labels.jsonl"
    assert export_labels(db, out) == 7
    lines = read_lines(out)
    assert [line["kind"] for line in lines] == ["claim"] * 3 + ["dedup_pair"] * 2 + ["answer"] * 2
    for line in lines:
        assert tuple(line) == FIELDS[line["kind"]]
    assert lines[0] == claim_line(labelled_at=lines[0]["labelled_at"])
    assert {(line["a"], line["b"]) for line in lines[3:5]} == {("William Dieterle", "W. Dieterle"),
                                                              ("W. Dieterle", "william dieterle")}
    assert "« Kismet »" in out.read_text(encoding="utf-8")     # text is written as UTF-8, not \\u escapes


def test_an_export_can_keep_one_kind_or_one_run_and_refuses_names_it_does_not_know(db, tmp_path):
    """``kinds`` keeps those kinds; ``run`` keeps the labels of the run or dedup run of that name."""
    label_some(db)
    out = tmp_path / "labels.jsonl"
    assert export_labels(db, out, kinds=["answer"]) == 2
    assert {line["kind"] for line in read_lines(out)} == {"answer"}
    assert export_labels(db, out, run="review", force=True) == 2
    assert {line["kind"] for line in read_lines(out)} == {"dedup_pair"}
    assert export_labels(db, out, run="sweep", kinds=["claim", "dedup_pair"], force=True) == 3
    assert {line["kind"] for line in read_lines(out)} == {"claim"}
    with pytest.raises(NotFound, match="no run, dedup run or dataset named 'nope' .*known: review, sweep; datasets: metaqa"):
        export_labels(db, out, run="nope")
    with pytest.raises(BadInput, match="'claims' is not one of claim, dedup_pair, answer, relevance"):
        export_labels(db, out, kinds=["claims"])


# -- round trip and re-import -----------------------------------------------------------------------

def test_labels_exported_from_one_database_import_into_another_with_other_ids_as_the_same_rows(db, shifted, tmp_path):
    """The round trip: every label of all three kinds arrives with its verdict, text, annotator, via
    and time, attached to the same named items although every run and KG id differs."""
    label_some(db)
    assert (run_id(db), dedup_id(db)) != (run_id(shifted), dedup_id(shifted))
    out = tmp_path / "labels.jsonl"
    export_labels(db, out)
    report = import_labels(shifted, out)
    assert report == LabelImport(added=7, changed=0, unchanged=0, lines=7)
    assert named_rows(shifted) == named_rows(db)
    again = tmp_path / "again.jsonl"
    export_labels(shifted, again)
    assert again.read_bytes() == out.read_bytes()


def test_importing_a_file_again_changes_nothing_not_even_the_times(db, shifted, tmp_path):
    """A second import of the same file finds every label already there: all unchanged, and the
    rows (labelled_at included) are byte-identical. Importing a database's own export is a no-op too."""
    label_some(db)
    out = tmp_path / "labels.jsonl"
    export_labels(db, out)
    assert import_labels(db, out) == LabelImport(added=0, changed=0, unchanged=7, lines=7)
    import_labels(shifted, out)
    before = raw_rows(shifted)
    assert import_labels(shifted, out) == LabelImport(added=0, changed=0, unchanged=7, lines=7)
    assert raw_rows(shifted) == before


def test_a_label_already_stored_with_the_same_verdict_but_another_time_is_unchanged(db, tmp_path):
    """The verdict is what counts: the same verdict from the same annotator at another time (or
    another via) leaves the stored row, and its time, alone."""
    label_some(db)
    before = raw_rows(db)
    path = write_jsonl(tmp_path / "labels.jsonl", [claim_line(labelled_at="2030-01-01T00:00:00+00:00", via="browse")])
    assert import_labels(db, path) == LabelImport(added=0, changed=0, unchanged=1, lines=1)
    assert raw_rows(db) == before


def test_via_and_labelled_at_may_be_left_out_via_is_then_import_and_the_time_now(db, tmp_path):
    path = write_jsonl(tmp_path / "labels.jsonl", [answer_line(via=..., labelled_at=...)])
    assert import_labels(db, path).added == 1
    label = stored_label(db.conn, AnswerKey(run_id(db), CELL, sid(db, Q2)), "ana")
    assert label.via == "import" and label.labelled_at.startswith("20") and label.labelled_at.endswith("+00:00")


def test_blank_lines_are_skipped_and_not_counted(db, tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text("\n" + json.dumps(claim_line()) + "\n\n   \n" + json.dumps(answer_line()) + "\n\n", encoding="utf-8")
    assert import_labels(db, path) == LabelImport(added=2, changed=0, unchanged=0, lines=2)


def test_a_claim_label_must_name_a_claim_the_answer_has(db, tmp_path):
    """A key that names nothing is refused, as every unknown key is: claim 7 of an answer with two
    claims, any claim of an answer not decomposed yet, or an index past SQLite's integers."""
    path = write_jsonl(tmp_path / "labels.jsonl", [
        claim_line(claim=7, text="a claim decomposed elsewhere"), claim_line(sample_id=Q3, claim=0),
        claim_line(claim=2 ** 63)])
    with pytest.raises(InputRejected) as refused:
        import_labels(db, path)
    assert str(refused.value).splitlines() == [
        f"{path}:1: $.claim: no claim 7: the answer to {Q1!r} in cell {CELL!r} of run 'sweep' has claims 0 to 1",
        f"{path}:2: $.claim: the answer to {Q3!r} in cell {CELL!r} of run 'sweep' has no verified claims "
        "(run `workbench claims run sweep` first)",
        f"{path}:3: $.claim: integer 9223372036854775808 is out of range (a 64-bit integer: -2^63 to 2^63-1)"]
    assert count(db) == 0


def test_a_pair_may_come_in_either_order_and_is_stored_as_a_below_b(db, tmp_path):
    """(a, b) and (b, a) name the same candidate pair: it is stored once, with the lower entity id as a,
    and exported in that order."""
    path = write_jsonl(tmp_path / "labels.jsonl", [pair_line(a="W. Dieterle", b="William Dieterle")])
    assert import_labels(db, path).added == 1
    key = pair(db, "William Dieterle", "W. Dieterle")
    assert key.a == eid(db, "William Dieterle") < eid(db, "W. Dieterle") == key.b
    assert stored_label(db.conn, key, "ana").label is True
    out = tmp_path / "out.jsonl"
    export_labels(db, out)
    assert (read_lines(out)[0]["a"], read_lines(out)[0]["b"]) == ("William Dieterle", "W. Dieterle")
    # The same pair the other way round, with the same verdict, is the same label.
    write_jsonl(path, [pair_line(a="William Dieterle", b="W. Dieterle")])
    assert import_labels(db, path).unchanged == 1


def test_the_same_label_twice_in_one_file_counts_once(db, tmp_path):
    path = write_jsonl(tmp_path / "labels.jsonl", [pair_line(), pair_line(a="W. Dieterle", b="William Dieterle")])
    assert import_labels(db, path) == LabelImport(added=1, changed=0, unchanged=1, lines=2)
    assert count(db) == 1


# -- conflicts with the store -----------------------------------------------------------------------

def test_a_different_verdict_already_stored_is_refused_without_replace_and_wins_with_it(db, tmp_path):
    """The store holds ana's ``true``; a file saying ``false`` is refused, naming the line and the
    field, and nothing is written. With ``replace`` the file's verdict and time win, counted as
    changed; how the item was first chosen (via) is kept, as when an annotator relabels."""
    label_some(db)
    before = raw_rows(db)
    path = write_jsonl(tmp_path / "labels.jsonl", [answer_line(sample_id=Q3, annotator="ana"),   # new: added
                                                   claim_line(label=False, via="browse")])         # conflict
    with pytest.raises(InputRejected) as err:
        import_labels(db, path)
    assert str(err.value).startswith(f"{path}:2: $.label: false here, but 'ana' already labelled this claim true")
    assert "pass --replace" in str(err.value)
    assert raw_rows(db) == before
    assert import_labels(db, path, replace=True) == LabelImport(added=1, changed=1, unchanged=0, lines=2)
    label = stored_label(db.conn, ClaimKey(run_id(db), CELL, sid(db, Q1), 0), "ana")
    assert (label.label, label.via, label.labelled_at) == (False, "uniform", "2026-11-24T02:00:00+00:00")


def test_a_claim_label_stored_with_other_text_is_a_conflict_on_the_text(db, tmp_path):
    """A claim label is bound to its text: the same verdict on a different text is a different label."""
    label_some(db)
    path = write_jsonl(tmp_path / "labels.jsonl", [claim_line(text="Otar Iosseliani wrote it")])
    with pytest.raises(InputRejected, match=r"labels.jsonl:1: \$.text: claim text 'Otar Iosseliani wrote it' here, "
                                            r"but 'ana' already labelled this claim with text 'Otar Iosseliani directed"):
        import_labels(db, path)
    assert import_labels(db, path, replace=True).changed == 1
    assert stored_label(db.conn, ClaimKey(run_id(db), CELL, sid(db, Q1), 0), "ana").claim == "Otar Iosseliani wrote it"


def test_another_annotator_on_the_same_item_is_not_a_conflict(db, tmp_path):
    label_some(db)
    path = write_jsonl(tmp_path / "labels.jsonl", [claim_line(label=False, annotator="cy")])
    assert import_labels(db, path).added == 1


# -- bad input: file:line, the field, and nothing written -------------------------------------------

GOOD = json.dumps(answer_line())


@pytest.mark.parametrize("bad, expected", [
    pytest.param(b'{"kind": "answer", "run": "sweep", "annotator": "\xff"}', "$: not valid UTF-8", id="not-utf8"),
    pytest.param(b'{"kind": "answer", "run": ', "$: malformed JSON", id="bad-json"),
    pytest.param(b'["answer", "sweep"]', "$: expected a JSON object, got array", id="not-an-object"),
    pytest.param(claim_line(kind=...), "$.kind: missing (one of claim, dedup_pair, answer, relevance)", id="no-kind"),
    pytest.param(claim_line(kind="claims"), "$.kind: 'claims' is not one of claim, dedup_pair, answer, relevance", id="bad-kind"),
    pytest.param(claim_line(lable=True), "$.lable: unknown key in a claim label (its keys: kind, run,", id="typo-key"),
    pytest.param(answer_line(text="x"), "$.text: unknown key in a answer label", id="key-of-another-kind"),
    pytest.param(claim_line(label=1), "$.label: expected true or false, got number", id="label-1"),
    pytest.param(claim_line(label="true"), "$.label: expected true or false, got string", id="label-string"),
    pytest.param(claim_line(label=...), "$.label: missing", id="no-label"),
    pytest.param(claim_line(annotator=" "), "$.annotator: must not be empty", id="blank-annotator"),
    pytest.param(claim_line(annotator="ana\x1b[31m"), "$.annotator: an annotator name must be printable",
                 id="escape-in-annotator"),
    pytest.param(claim_line(run=...), "$.run: missing", id="no-run"),
    pytest.param(claim_line(text=...), "$.text: missing", id="claim-without-text"),
    pytest.param(claim_line(claim=-1), "$.claim: expected a claim index (an integer ≥ 0), got -1", id="claim-negative"),
    pytest.param(claim_line(claim=True), "$.claim: expected a claim index (an integer ≥ 0), got boolean",
                 id="claim-bool"),
    pytest.param(claim_line(claim=1.0), "$.claim: expected a claim index (an integer ≥ 0), got number",
                 id="claim-float"),
    pytest.param(claim_line(via="random"), "$.via: 'random' is not one of uniform, disagreement, browse, import",
                 id="bad-via"),
    pytest.param(claim_line(labelled_at="yesterday"), "$.labelled_at: 'yesterday' is not an ISO-8601 time",
                 id="bad-time"),
    pytest.param(claim_line(labelled_at="2026-11-24T02:00:00"), "$.labelled_at: '2026-11-24T02:00:00' has no UTC offset",
                 id="time-without-offset"),
    pytest.param(claim_line(run="nope"), "$.run: unknown run 'nope'", id="unknown-run"),
    pytest.param(claim_line(run="review"), "$.run: unknown run 'review' (that is a dedup run", id="dedup-run-for-claim"),
    pytest.param(pair_line(run="sweep"), "$.run: unknown dedup run 'sweep' (that is a run", id="run-for-pair"),
    pytest.param(claim_line(sample_id="q404"), "$.sample_id: unknown sample id 'q404' in dataset 'metaqa'",
                 id="unknown-sample"),
    pytest.param(answer_line(cell_id="k9-b9-linear"), "$.cell_id: unknown cell 'k9-b9-linear' in run 'sweep'",
                 id="unknown-cell"),
    pytest.param(pair_line(a="Nobody"), "$.a: unknown entity 'Nobody' in KG 'tiny'", id="unknown-entity"),
    pytest.param(pair_line(b="W. Dieterle", a="W. Dieterle"), "$.b: the same entity as $.a ('W. Dieterle')",
                 id="a-equals-b"),
    pytest.param(pair_line(a="Kismet", b="1939"), "$: ('Kismet', '1939') is not a candidate pair of dedup run 'review'",
                 id="not-a-candidate-pair"),
])
def test_a_bad_line_is_refused_naming_file_line_and_field_and_nothing_is_written(db, tmp_path, bad, expected):
    """A good line, then the bad one: the error names line 2 and the field, and not even the good
    line is written (an import is one transaction, written only after every line passed)."""
    path = tmp_path / "labels.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + (bad if isinstance(bad, bytes) else json.dumps(bad).encode()) + b"\n")
    with pytest.raises(InputRejected) as err:
        import_labels(db, path)
    assert f"{path}:2: {expected}" in str(err.value)
    assert count(db) == 0


def test_line_numbers_count_blank_lines(db, tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(GOOD + "\n\n" + json.dumps(answer_line(label=None)) + "\n", encoding="utf-8")
    with pytest.raises(InputRejected, match=r"labels.jsonl:3: \$.label: expected true or false, got null"):
        import_labels(db, path)


@pytest.mark.parametrize("text", ["", "\n\n  \n"], ids=["empty", "only-blank-lines"])
def test_a_file_without_labels_is_an_error(db, tmp_path, text):
    path = tmp_path / "labels.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputRejected) as err:
        import_labels(db, path)
    assert str(err.value) == f"{path}:1: $: no labels: the file is empty"


def test_one_item_labelled_twice_differently_by_one_annotator_names_both_lines(db, tmp_path):
    """The file contradicts itself: neither line can win, so both are named and nothing is written."""
    path = write_jsonl(tmp_path / "labels.jsonl", [pair_line(), answer_line(),
                                                   pair_line(a="W. Dieterle", b="William Dieterle", label=False)])
    with pytest.raises(InputRejected) as err:
        import_labels(db, path)
    assert str(err.value) == (f"{path}:3: $.label: false here, but true on line 1 "
                              "(the same pair by 'ana')")
    assert count(db) == 0


def test_every_bad_line_is_reported_at_once(db, tmp_path):
    """Shape problems and names that do not resolve, line by line, in one error."""
    path = write_jsonl(tmp_path / "labels.jsonl", [claim_line(label=1), GOOD, answer_line(extra=1),
                                                   answer_line(run="nope"), pair_line(a="Nobody", b="Nemo")])
    with pytest.raises(InputRejected) as err:
        import_labels(db, path)
    assert [(p.line, p.field) for p in err.value.problems] == [(1, "$.label"), (3, "$.extra"), (4, "$.run"),
                                                               (5, "$.a"), (5, "$.b")]


def test_a_missing_file_is_bad_input(db, tmp_path):
    with pytest.raises(BadInput, match="nope.jsonl: not found"):
        import_labels(db, tmp_path / "nope.jsonl")


def test_a_label_changed_by_another_process_while_the_file_was_read_stops_the_import(db, tmp_path, monkeypatch):
    """Conflicts are checked when the file is read, and again inside the writing transaction: a label
    another process wrote in between is never overwritten unseen; nothing of the file is written."""
    path = write_jsonl(tmp_path / "labels.jsonl", [answer_line(sample_id=Q3), answer_line()])
    other = open_store(db.path)
    begin = db.transaction

    @contextmanager
    def transaction_after_another_write():
        put_label(other, AnswerKey(run_id(db), CELL, sid(db, Q2)), False, "ana", via="browse")
        with begin() as conn:
            yield conn

    monkeypatch.setattr(db, "transaction", transaction_after_another_write)
    try:
        with pytest.raises(BadInput, match=r"labels.jsonl:2: the label it names was changed by another process"):
            import_labels(db, path)
    finally:
        other.close()
    assert count(db) == 1 and stored_label(db.conn, AnswerKey(run_id(db), CELL, sid(db, Q2)), "ana").label is False



def test_a_file_that_changes_nothing_opens_no_write_transaction(db, tmp_path, monkeypatch):
    """Re-importing needs no write, so it takes no write lock (and works where writing would not)."""
    label_some(db)
    out = tmp_path / "labels.jsonl"
    export_labels(db, out)

    def no_writes():
        raise AssertionError("a no-op import opened a write transaction")

    monkeypatch.setattr(db, "transaction", no_writes)
    assert import_labels(db, out) == LabelImport(added=0, changed=0, unchanged=7, lines=7)
