"""Every named thing is found one way: by name, or the newest when none is named; a miss is NotFound, exit 2."""

from __future__ import annotations

import sqlite3

import pytest

from conftest import write_jsonl
from workbench.cli import main
from workbench.kg.importer import import_kg
from workbench.kg.runner import DedupConfig, entity_id, get_dedup_run, get_kg, plan_dedup
from workbench.pipelines.runner import get_pipeline_run
from workbench.store.lookup import NotFound, named_or_latest
from workbench.store.queries import get_dataset, get_run


@pytest.fixture
def things():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT UNIQUE, colour TEXT)")
    conn.executemany("INSERT INTO things (name, colour) VALUES (?, ?)", [("a", "red"), ("b", "blue")])
    return conn


def find(conn, name):
    return named_or_latest(conn, "things", "name, colour", name, what="thing", none_yet="no things yet",
                           hint="`make thing`")


def test_a_name_finds_its_row_and_no_name_finds_the_newest(things):
    assert find(things, "a") == ("a", "red")
    assert find(things, None) == ("b", "blue")


def test_a_missing_name_lists_the_known_names_and_the_hint(things):
    with pytest.raises(NotFound, match=r"^no thing named 'z' \(known: a, b; `make thing`\)$"):
        find(things, "z")


def test_no_name_on_an_empty_table_says_none_yet(things):
    things.execute("DELETE FROM things")
    with pytest.raises(NotFound, match="^no things yet$"):
        find(things, None)


def test_every_entity_lookup_raises_not_found(store):
    for lookup in (get_dataset, get_run, get_kg, get_dedup_run, get_pipeline_run):
        with pytest.raises(NotFound, match="known: none"):
            lookup(store, "nope")
        with pytest.raises(NotFound, match="yet"):
            lookup(store, None)


@pytest.mark.parametrize("argv, message", [
    (["ledger", "nope"], "error: no run named 'nope' (known: none)"),
    (["ledger"], "error: no run yet: plan one with `workbench sweep`"),
    (["searchain", "report", "nope"], "error: no SearChain run named 'nope' (known: none)"),
    (["searchain", "report"], "error: no SearChain runs yet (`workbench searchain run DATASET`)"),
    (["dedup", "eval", "nope"], "error: no dedup run named 'nope' (known: none)"),
    (["dedup", "review"], "error: no dedup runs yet (`workbench dedup run KG`)"),
    (["dedup", "run", "nope"], "error: no KG named 'nope' (known: none; `workbench dedup import DIR`)"),
    (["retrieval", "eval", "nope"], "error: no dataset named 'nope' (known: none)"),
])
def test_a_missing_name_on_the_command_line_exits_2_naming_what_exists(store, capsys, argv, message):
    assert main(["--db", str(store.path), *argv]) == 2
    assert capsys.readouterr().err.strip() == message


def test_deciding_on_an_entity_the_kg_lacks_exits_2_and_writes_nothing(store, tmp_path, capsys):
    kg = tmp_path / "kg"
    kg.mkdir()
    write_jsonl(kg / "kb.jsonl", [{"triple": ["Kismet", "directed_by", "W. Dieterle"]},
                                  {"triple": ["Juarez", "directed_by", "William Dieterle"]}])
    import_kg(store, kg, "tiny")
    name, _, _ = plan_dedup(store, "tiny", DedupConfig(modes=("graph",)))
    assert entity_id(store, get_kg(store, "tiny").id, "Kismet") >= 0
    code = main(["--db", str(store.path), "dedup", "accept", name, "Kismet", "Nobody", "--mode", "graph"])
    assert code == 2
    assert capsys.readouterr().err.strip() == "error: 'Nobody' is not an entity of the run's KG"
    assert store.conn.execute("SELECT count(*) FROM dedup_decisions").fetchone()[0] == 0
