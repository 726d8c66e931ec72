"""SearChain end to end on MetaQA 2-hop samples.

A stored tree and metrics that compute come from SmolLM2-135M really generating through llama.cpp
(the smoke test of the pipeline). A resume (also after ``kill -9``), a refused config change, the
CLI's show and report are not about what the model writes: they take SmolLM2's recorded calls
(tests/replay.py), in process or served by tests/genkit.py's stand-in, and load no model.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import shutil
import threading
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.pipelines.report import chain_tree, searchain_report
from workbench.pipelines.runner import SearChainConfig, execute_searchain, plan_searchain
from workbench.retrieval.runs import open_index
from workbench.store import open_store
from workbench.store.caches import index_cache

from conftest import copy_db, wait_for_rows
from genkit import ServedModel, replay_text
from replay import replay_llm


@pytest.fixture(scope="module")
def indexed_template(tmp_path_factory, metaqa_template) -> Path:
    """MetaQA (a copy of the session's import) with its BM25 index built and saved beside it, once for the module."""
    store = open_store(copy_db(metaqa_template, tmp_path_factory.mktemp("sc") / "sc.db"))
    try:
        open_index(store, store.conn.execute("SELECT id FROM datasets WHERE name = 'metaqa'").fetchone()[0])
    finally:
        store.close()
    return store.path


@pytest.fixture
def metaqa(tmp_path, indexed_template):
    """This test's copy of MetaQA, with the saved BM25 index beside it (building it costs seconds a test)."""
    db = copy_db(indexed_template, tmp_path / "sc.db")
    shutil.copytree(index_cache(indexed_template), index_cache(db))
    store = open_store(db)
    yield store
    store.close()


@pytest.mark.real_model
@pytest.mark.budget(30)
def test_searchain_stores_a_tree_and_its_metrics_compute(metaqa):
    """The smoke test of SearChain's generation: SmolLM2 really writes the chain, whatever it says."""
    name, created = plan_searchain(metaqa, "metaqa", SearChainConfig(hops=2, limit=1, max_rounds=2), "sc")
    assert created
    report = execute_searchain(metaqa, name)
    assert (report.jobs, report.done, report.errors) == (1, 1, 0) and report.model_calls >= 2
    for (sid,) in metaqa.conn.execute("SELECT sid FROM pipeline_samples WHERE prun_id = 1"):
        tree = chain_tree(metaqa, name, sid)
        assert tree["status"] == "done" and tree["branches"] and tree["branches"][0]["output"]
        assert tree["outcome"] in ("verified", "max_rounds", "unparseable", "context_full")
        if tree["outcome"] != "unparseable":
            assert tree["nodes"] and all(n["status"] in ("model", "verified", "corrected", "completed")
                                         for n in tree["nodes"])
            assert sum(n["in_final"] for n in tree["nodes"]) == tree["steps"]
            # The tree is rooted: every parent is the question (0) or an earlier node.
            assert all(n["parent"] < n["node"] for n in tree["nodes"])
        assert tree["baseline_prediction"] is not None
    r = searchain_report(metaqa, name, resamples=200)
    assert r["n"] == 1 and r["cover_em"].value is not None and r["rounds"].value is not None
    shares = [r["sources"][k].value for k in ("model", "corrected", "completed", "unchecked")]
    if r["steps"].value:
        assert sum(shares) == pytest.approx(1.0)
    diff = r["baseline"]["cover_em_difference"].value
    assert diff == pytest.approx(r["cover_em"].value - r["baseline"]["cover_em"].value)


def test_an_interrupted_searchain_run_resumes_without_recomputing(metaqa):
    """Resume logic, whatever the model writes: SmolLM2's recorded calls replayed (tests/replay.py)."""
    name, _ = plan_searchain(metaqa, "metaqa", SearChainConfig(hops=2, limit=2), "resumable")
    stop = threading.Event()
    first = execute_searchain(metaqa, name, llm=replay_llm(metaqa, "chains"), stop=stop,
                              progress=lambda done, total, r: stop.set())
    assert first.stopped and first.done == 1
    finished = metaqa.conn.execute("SELECT sid, finished_at FROM pipeline_samples WHERE status = 'done'").fetchall()
    generations = metaqa.conn.execute("SELECT count(*) FROM generations").fetchone()[0]
    assert generations == first.model_calls
    second = execute_searchain(metaqa, name, llm=replay_llm(metaqa, "chains"))
    assert (second.jobs, second.done) == (1, 1)
    assert metaqa.conn.execute("SELECT count(*) FROM generations").fetchone()[0] == generations + second.model_calls
    sid, at = finished[0]
    assert metaqa.conn.execute("SELECT finished_at FROM pipeline_samples WHERE sid = ?", (sid,)).fetchone()[0] == at
    assert execute_searchain(metaqa, name, llm=replay_llm(metaqa, "chains")).jobs == 0


def test_kill_9_mid_sample_then_resume_replays_the_cached_calls(tmp_path, metaqa, capsys):
    """Killed after the sample's first model call: the resume serves that call from the cache. SmolLM2's
    recorded calls, served one at a time, so the kill lands mid-sample on any machine."""
    db = metaqa.path
    with ServedModel(replay_text("chains"), paced=True) as model:
        cmd = [sys.executable, "-m", "workbench.cli", "--db", str(db), "searchain", "run", "metaqa", "--hops", "2",
               "--limit", "1", "--name", "killed", "--model", model.ref]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        model.allow(1)
        wait_for_rows(db, "SELECT count(*) FROM generations", 1, proc)   # the first model call is committed
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        model.release()
        con = sqlite3.connect(db)
        before = con.execute("SELECT count(*) FROM generations").fetchone()[0]
        done_before = con.execute("SELECT count(*) FROM pipeline_samples WHERE status = 'done'").fetchone()[0]
        con.close()
        capsys.readouterr()
        # The resume in this process, as the command line runs it (the killed run was the other process).
        assert main(["--db", str(db), "searchain", "resume", "killed", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["jobs"] == 1 - done_before and result["done"] == result["jobs"]
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Calls made before the kill were served from the cache: the model never ran them twice.
    assert con.execute("SELECT count(*) FROM generations").fetchone()[0] == before + result["model_calls"]
    assert result["cache_hits"] >= 1 or done_before == 1


def test_the_cli_refuses_a_changed_config_under_the_same_name_and_shows_a_tree(metaqa, capsys):
    """SmolLM2's recorded calls, served: the CLI's config check, show and report, not the model, are the subject."""
    db = str(metaqa.path)
    with ServedModel(replay_text("chains")) as model:
        run = ["--db", db, "searchain", "run", "metaqa", "--hops", "2", "--limit", "1", "--name", "one",
               "--model", model.ref]
        assert main(run) == 0
        assert main(run) == 0
        assert "nothing to do" in capsys.readouterr().err
        assert main([*run, "--max-rounds", "2"]) == 2
    assert "max_rounds: 5 → 2" in capsys.readouterr().err
    sample = metaqa.conn.execute("SELECT s.id FROM pipeline_samples p JOIN samples s ON s.sid = p.sid").fetchone()[0]
    assert main(["--db", db, "searchain", "show", "one", sample]) == 0
    out = capsys.readouterr().out
    assert out.startswith(sample) and "final content:" in out and "plain RAG" in out
    assert main(["--db", db, "searchain", "report", "one", "--resamples", "100"]) == 0
    report = capsys.readouterr().out
    assert "cover-EM" in report and "SearChain − RAG" in report and "knowledge sources" in report
