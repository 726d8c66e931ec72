"""Shared fixtures: real SQLite stores and small real datasets written as JSONL."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from workbench.data.corpus import import_corpus
from workbench.data.importer import import_dataset
from workbench.kg.importer import import_kg
from workbench.kg.runner import DedupConfig, execute_dedup, plan_dedup
from workbench.pipelines.runner import SearChainConfig, execute_searchain, plan_searchain
from workbench.retrieval.evaluate import filename_questions
from workbench.retrieval.runs import retrieve
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store

REPO = Path(__file__).resolve().parents[1]
SAMPLE_METAQA = REPO / "sample_data" / "metaqa"


def write_jsonl(path: Path, rows) -> Path:
    """Write rows (dicts, or raw strings for deliberately bad lines) as JSON Lines."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                            for r in rows), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def private_model_slot(tmp_path, monkeypatch):
    """Each test (and the CLI processes it starts) has its own model slot, not the machine's:
    a test never waits for a model held elsewhere on the machine or leaked by an earlier test."""
    monkeypatch.setenv("WORKBENCH_MODEL_SLOT", str(tmp_path / "model.lock"))


@pytest.fixture
def store(tmp_path):
    """An empty, migrated workbench database in a temp dir."""
    s = open_store(tmp_path / "wb.db")
    yield s
    s.close()


@pytest.fixture
def tiny_dir(tmp_path) -> Path:
    """Three questions over a five-triple movie KB, with hand-checkable retrieval.

    q1 (1-hop): gold = [Kismet directed_by Dieterle]; retrieved at rank 2.
    q2 (2-hop): gold = [Kismet starred_actors Dietrich] + [Kismet directed_by Dieterle];
                retrieved at ranks 1 and 3.
    q3 (1-hop): gold = [Rosetta in_language French]; never retrieved.
    """
    d = tmp_path / "tiny"
    d.mkdir()
    kb = [["Kismet", "directed_by", "William Dieterle"], ["Kismet", "starred_actors", "Marlene Dietrich"],
          ["Kismet", "release_year", "1944"], ["Rosetta", "in_language", "French"],
          ["Rosetta", "directed_by", "Jean-Pierre Dardenne"]]
    write_jsonl(d / "kb.jsonl", [{"triple": t} for t in kb])
    write_jsonl(d / "samples.jsonl", [
        {"id": "q1", "question": "who directed Kismet", "answers": ["William Dieterle"],
         "gold_paths": [[kb[0]]], "meta": {"hops": 1}},
        {"id": "q2", "question": "who directed the films starring Marlene Dietrich",
         "answers": ["William Dieterle"], "gold_paths": [[kb[1], kb[0]]], "meta": {"hops": 2}},
        {"id": "q3", "question": "what language is Rosetta in", "answers": ["French"],
         "aliases": {"French": ["Français"]}, "gold_paths": [[kb[3]]]},
    ])
    write_jsonl(d / "retrieval.jsonl", [
        {"sample_id": "q1", "retriever": "bm25", "results": [{"triple": kb[2], "score": 3.0},
                                                              {"triple": kb[0], "score": 2.0}]},
        {"sample_id": "q2", "retriever": "bm25", "results": [{"triple": kb[1], "score": 3.0},
                                                              {"triple": kb[2], "score": 2.0},
                                                              {"triple": kb[0], "score": 1.0}]},
        {"sample_id": "q3", "retriever": "bm25", "results": [{"triple": kb[4], "score": 1.0}]},
    ])
    return d


@pytest.fixture
def tiny_store(store, tiny_dir):
    """The tiny dataset imported as ``tiny``."""
    import_dataset(store, tiny_dir, "tiny")
    return store


@pytest.fixture(scope="session")
def metaqa_db(tmp_path_factory) -> Path:
    """sample_data/metaqa imported once per session and swept over K×B×format with oracle cells."""
    from workbench.runs.sweep import SweepConfig, plan_sweep

    path = tmp_path_factory.mktemp("metaqa") / "wb.db"
    s = open_store(path)
    import_dataset(s, SAMPLE_METAQA, "metaqa")
    plan_sweep(s, SweepConfig(ks=(1, 2, 5, 10, 20), budgets=(64, 128, 256), formats=("score", "linear", "struct"),
                              oracle=True, shuffles=3), name="sweep")
    s.close()
    return path


def copy_db(src: Path, dst: Path) -> Path:
    """A private copy of a closed workbench database: copying a small SQLite file costs
    milliseconds, building it (import, sweep, a model pass) costs seconds to minutes."""
    for suffix in ("", "-wal"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")
    return dst


@pytest.fixture(scope="session")
def private_slot_for_session(tmp_path_factory):
    """Session-built databases run the model in their own model slot, as each test does."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_MODEL_SLOT", str(tmp_path_factory.mktemp("slot") / "model.lock"))
        yield


@pytest.fixture(scope="session")
def swept_template(tmp_path_factory) -> Path:
    """sample_data/metaqa with a model-free sweep (300 samples, so paging has pages), built once."""
    db = tmp_path_factory.mktemp("swept") / "wb.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(1, 5, 20), budgets=(64,), formats=("score",), oracle=True, shuffles=2),
               name="sweep")
    store.close()
    return db


@pytest.fixture
def swept_db(tmp_path, swept_template):
    """sample_data/metaqa with a model-free sweep (300 samples, so paging has pages): this test's own copy."""
    return copy_db(swept_template, tmp_path / "wb.db")


@pytest.fixture(scope="session")
def live_template(tmp_path_factory) -> Path:
    """MetaQA with one planned one-cell run, ``live``, of 6 questions for the default model, built once."""
    from workbench.models.registry import GenerationConfig

    db = tmp_path_factory.mktemp("live") / "live.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=6), name="live",
               generation=GenerationConfig(max_tokens=16).as_dict())
    store.close()
    return db


@pytest.fixture
def live_db(tmp_path, live_template):
    """MetaQA with one planned one-cell run, ``live``, of 6 questions for the default model: this test's copy."""
    return copy_db(live_template, tmp_path / "live.db")


@pytest.fixture(scope="session")
def chained_template(tmp_path_factory, private_slot_for_session) -> Path:
    """Two MetaQA 2-hop questions through SearChain with SmolLM2, plus a model-free sweep, built once."""
    db = tmp_path_factory.mktemp("chains") / "chains.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(5,), budgets=(64,), formats=("score",)), name="sweep")
    name, _ = plan_searchain(store, "metaqa", SearChainConfig(hops=2, limit=2), "chains")
    assert execute_searchain(store, name).done == 2
    store.close()
    return db


@pytest.fixture
def chained_db(tmp_path, chained_template):
    """Two MetaQA 2-hop questions through SearChain with SmolLM2, plus a model-free sweep: this test's copy."""
    return copy_db(chained_template, tmp_path / "chains.db")


@pytest.fixture(scope="session")
def judged_template(tmp_path_factory, private_slot_for_session) -> Path:
    """The tiny KG of test_kg_dedup judged by SmolLM2 in both modes, built once."""
    from test_kg_dedup import CHUNKS, GOLD, TRIPLES  # here: that module imports this one

    root = tmp_path_factory.mktemp("dedup")
    kg = root / "kg"
    kg.mkdir()
    write_jsonl(kg / "kb.jsonl", [{"triple": t, "source_chunks": c} for t, c in TRIPLES])
    write_jsonl(kg / "chunks.jsonl", [{"chunk_id": k, "text": v} for k, v in CHUNKS.items()])
    write_jsonl(kg / "gold_clusters.jsonl", [{"entity": e, "cluster": c} for e, c in GOLD.items()])
    db = root / "dedup.db"
    store = open_store(db)
    import_kg(store, kg, "tiny")
    name, _, _ = plan_dedup(store, "tiny", DedupConfig(), "review")
    assert execute_dedup(store, name).errors == 0
    store.close()
    return db


@pytest.fixture
def judged_db(tmp_path, judged_template):
    """The tiny KG judged by SmolLM2 in both modes: this test's copy."""
    return copy_db(judged_template, tmp_path / "dedup.db")


@pytest.fixture(scope="session")
def corpus_template(tmp_path_factory) -> Path:
    """sample_data/howtocook with Chinese and English filename questions (some misses) and BM25 results, once."""
    db = tmp_path_factory.mktemp("corpus") / "hc.db"
    store = open_store(db)
    import_corpus(store, REPO / "sample_data" / "howtocook", "hc")
    filename_questions(store, "hc")
    filename_questions(store, "hc", lang="en")  # English questions over Chinese recipes: some misses
    retrieve(store, "hc", k=5)
    store.close()
    return db


@pytest.fixture
def corpus_db(tmp_path, corpus_template):
    """sample_data/howtocook with Chinese and English filename questions and BM25 results: this test's copy."""
    return copy_db(corpus_template, tmp_path / "hc.db")


class ScriptedLLM:
    """A test double of ``CachedLLM.ask`` for logic that does not depend on the model.

    Returns the scripted outputs in order (as objects with ``.text``) and records each call.
    """

    class Reply:
        def __init__(self, text: str):
            self.text = text

    def __init__(self, *outputs: str):
        self.outputs = list(outputs)
        self.calls: list[dict] = []

    def ask(self, messages, *, max_tokens, schema=None, grammar=None, temperature=0.0, repeat_penalty=1.0):
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "schema": schema})
        return self.Reply(self.outputs.pop(0))


def wait_for_rows(db: Path, sql: str, at_least: int, proc, timeout: float = 180) -> int:
    """Poll ``sql`` (a count) on ``db`` until it reaches ``at_least`` while ``proc`` runs; return the count.

    For kill -9 tests: a fresh connection each time, as another process is writing.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the process ended before it could be interrupted"
        try:
            con = sqlite3.connect(db, timeout=5)
            count = con.execute(sql).fetchone()[0]
            con.close()
        except sqlite3.OperationalError:
            count = 0
        if count >= at_least:
            return count
        time.sleep(0.05)
    raise AssertionError(f"no progress: {sql!r} stayed below {at_least}")
