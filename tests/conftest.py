"""Shared fixtures: real SQLite stores and small real datasets written as JSONL."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from workbench.data.importer import import_dataset
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


@pytest.fixture
def swept_db(tmp_path):
    """sample_data/metaqa with a model-free sweep (300 samples, so paging has pages)."""
    db = tmp_path / "wb.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(1, 5, 20), budgets=(64,), formats=("score",), oracle=True, shuffles=2),
               name="sweep")
    store.close()
    return db


@pytest.fixture
def live_db(tmp_path):
    """MetaQA with one planned one-cell run, ``live``, of 6 questions for the default model."""
    from workbench.models.registry import GenerationConfig

    db = tmp_path / "live.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=6), name="live",
               generation=GenerationConfig(max_tokens=16).as_dict())
    store.close()
    return db


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
