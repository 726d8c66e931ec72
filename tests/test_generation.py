"""Runs with the real default model (SmolLM2-135M through the installed llama.cpp build).

The first tests generate real tokens: a broken llama.cpp build (e.g. the AMX segfault of
docs/design.md §12) fails here, not in a user's hands. A test whose subject is what a run keeps
(the cache, the ledger, a resume) finds SmolLM2's answers to the tiny dataset cached
(tests/model_shared.py: generated once per session), or is answered by a stand-in reader.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.errors import BadInput
from workbench.models.base import ModelError, Sampling
from workbench.models.llamacpp import LlamaCppBackend
from workbench.models.locate import default_model_path, resolve_model
from workbench.runs.generation import GenerationConfig
from workbench.runs.executor import execute, run_stats
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store.queries import get_run

from conftest import copy_db, wait_for_rows
from genkit import ServedModel, Stderr
import hashed_tiny
from model_shared import TINY_GENERATION, TINY_GRID, tiny_answered
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from seqkit import Reader

# The tiny dataset with the default model's sha256 already remembered (tests/hashed_tiny.py).
tiny_template, tiny_store = hashed_tiny.tiny_template, hashed_tiny.tiny_store


def _plan(store, name, *, ks=TINY_GRID.ks, budgets=TINY_GRID.budgets, formats=TINY_GRID.formats, limit=None, **gen):
    cfg = SweepConfig(ks=ks, budgets=budgets, formats=formats, limit=limit)
    plan_sweep(store, cfg, name=name, generation=GenerationConfig(**{**TINY_GENERATION, **gen}).as_dict())
    return get_run(store, name)


@pytest.fixture
def answered_store(tiny_store, shared_outputs):
    """The tiny dataset, with SmolLM2's answers to ``_plan``'s prompts in its cache (generated once per session)."""
    tiny_answered(shared_outputs)
    assert shared_outputs.seed(tiny_store.path) >= 6
    return tiny_store


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """SmolLM2 loaded once for the tests that generate with the backend itself, on one thread (what a worker of
    `just test` has, tests/workercore.py; and not every CPU, which llama-cpp-python would give its batches), in a
    model slot of its own (a module's fixture starts before a test's private slot is set)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_MODEL_SLOT", str(tmp_path_factory.mktemp("slot") / "model.lock"))
        backend = LlamaCppBackend(default_model_path(), "sha", n_ctx=512, n_threads=1)
    yield backend
    backend.close()


@pytest.mark.real_model
def test_the_default_model_really_generates_tokens(smollm2):
    backend = smollm2
    # Prompt evaluation too runs on the threads asked for, not on every CPU of the machine.
    assert (backend.llm.context_params.n_threads, backend.llm.context_params.n_threads_batch) == (1, 1)
    prompt = backend.render([{"role": "user", "content": "Name a colour."}])
    # A grammar that needs three letters at least: tokens are really generated on every CPU (which
    # ones is the CPU's: an unconstrained answer could even be an immediate end of text).
    backend.llm.reset()
    out = backend.generate(prompt, Sampling(max_tokens=8), grammar='root ::= [a-z] [a-z] [a-z]+')
    assert prompt.text.startswith("<|im_start|>")  # the GGUF's own chat template
    assert out.completion_tokens >= 3 and len(out.text) >= 3 and out.text.isalpha()
    assert out.eval_tokens == prompt.tokens == out.prompt_tokens


@pytest.mark.real_model
def test_greedy_generation_is_reproducible_and_json_answers_parse(smollm2):
    from workbench.runs.answers import SCHEMAS, parse_output

    backend = smollm2
    prompt = backend.render([{"role": "user", "content": "Evidence:\n[T1] Kismet | directed_by | William Dieterle\n"
                              "Question: who directed Kismet\nReply with JSON {\"answers\": [...]}."}])
    # Each from the same (empty) KV cache: a call that reused an earlier one's prefix would evaluate the
    # prompt in other batches, whose float sums may differ in the last bits and flip a near-tie.
    backend.llm.reset()
    a = backend.generate(prompt, Sampling(max_tokens=24), SCHEMAS["json"])
    backend.llm.reset()
    b = backend.generate(prompt, Sampling(max_tokens=24), SCHEMAS["json"])
    assert a.text == b.text
    assert isinstance(json.loads(parse_output(a.text, "json").prediction), list)


@pytest.mark.real_model
def test_a_run_fills_the_ledger_and_a_second_run_is_served_from_the_cache(answered_store):
    """SmolLM2's answers are cached (the model loads for its tokens and writes nothing): the ledger, not them."""
    tiny_store = answered_store
    first = execute(tiny_store, _plan(tiny_store, "a"))
    assert (first.done, first.errors) == (6, 0)
    assert first.model_calls + first.cache_hits == first.jobs
    # Same prompts under another run name: every job is a cache hit, the model never runs.
    second = execute(tiny_store, _plan(tiny_store, "b"))
    assert (second.model_calls, second.cache_hits) == (0, 6)
    outputs = lambda run: tiny_store.conn.execute(  # noqa: E731
        "SELECT cell_id, sid, prediction, score FROM events e JOIN runs r ON r.id = e.run_id"
        " WHERE r.name = ? ORDER BY 1, 2", (run,)).fetchall()
    assert outputs("a") == outputs("b")
    stats = run_stats(tiny_store, get_run(tiny_store, "b"))
    assert stats["prompt_tokens_evaluated"] == 0 and stats["prompt_tokens_naive"] > 0


def test_cells_with_identical_truncated_evidence_cost_one_call(tiny_store):
    # q3 has a single retrieved triple: K=1 and K=2 show the same window, so the same prompt. What is
    # counted is the calls, not what answers them: a stand-in reader (tests/seqkit.py) answers.
    run = _plan(tiny_store, "d", ks=(1, 2), budgets=(256, 512))
    report = execute(tiny_store, run, backend=Reader())
    distinct = tiny_store.conn.execute(
        "SELECT count(DISTINCT gen_key) FROM events WHERE run_id = ?", (run.id,)).fetchone()[0]
    assert report.jobs == 12 and report.model_calls == distinct < 12
    assert report.model_calls + report.cache_hits == 12


def test_a_changed_config_under_the_same_name_is_refused(tiny_store):
    _plan(tiny_store, "r")
    with pytest.raises(ValueError, match=r"different config.*max_tokens: 12 → 20"):
        _plan(tiny_store, "r", max_tokens=20)


def test_grounded_mode_scores_zero_without_a_visible_citation():
    from workbench.metrics.scoring import score_acc
    from workbench.runs.answers import parse_output, score_answer

    cited = parse_output('{"answers": ["William Dieterle"], "citations": ["T1"]}', "grounded")
    uncited = parse_output('{"answers": ["William Dieterle"], "citations": []}', "grounded")
    outside = parse_output('{"answers": ["William Dieterle"], "citations": ["T1", "T9"]}', "grounded")
    answers = ["William Dieterle"]
    assert score_answer(cited, answers, {}, ["T1", "T3"], score_acc) == 1.0
    assert score_answer(uncited, answers, {}, ["T1", "T3"], score_acc) == 0.0
    assert score_answer(outside, answers, {}, ["T1", "T3"], score_acc) == 0.0


@pytest.mark.real_model
def test_grounded_runs_record_citations(tiny_store):
    run = _plan(tiny_store, "g", ks=(2,), answer_format="grounded", max_tokens=40)
    execute(tiny_store, run)
    from workbench.metrics.scoring import score_acc

    rows = tiny_store.conn.execute(
        "SELECT e.citations, e.score, e.visible, e.prediction, s.answers, s.aliases FROM events e"
        " JOIN samples s ON s.dataset_id = ? AND s.sid = e.sid WHERE e.run_id = ?",
        (run.dataset_id, run.id)).fetchall()
    assert len(rows) == 3
    for citations, score, visible, prediction, answers, aliases in rows:
        cited = json.loads(citations)
        assert isinstance(cited, list)
        if not cited or not {int(c[1:]) for c in cited} <= set(json.loads(visible)):
            assert score == 0.0  # missing or invisible citation
        else:
            assert score == score_acc(prediction, json.loads(answers), json.loads(aliases))


@pytest.mark.real_model
def test_a_missing_model_is_refused_before_any_job_and_the_run_stays_resumable(answered_store, tmp_path):
    tiny_store = answered_store   # the resumed jobs find SmolLM2's answers cached: the model loads, writes nothing
    run = _plan(tiny_store, "m", model=str(tmp_path / "nope.gguf"))
    with pytest.raises(BadInput, match=r"^the run's model: .*nope.gguf: model file not found$"):
        execute(tiny_store, run)
    statuses = tiny_store.conn.execute("SELECT status, error FROM events WHERE run_id = ?", (run.id,)).fetchall()
    assert statuses == [("pending", None)] * 6          # nothing marked failed, nothing written
    # Put a model at that path: the run continues with every job, no --retry-errors needed.
    (tmp_path / "nope.gguf").symlink_to(default_model_path())
    resumed = execute(tiny_store, run)
    assert (resumed.jobs, resumed.done, resumed.errors) == (6, 6, 0)


@pytest.mark.real_model
def test_a_corrupt_gguf_gives_a_clear_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ModelError, match="not a GGUF file"):
        resolve_model(str(bad))
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(default_model_path().read_bytes()[:4096])
    with pytest.raises(ModelError, match="could not load the model"):
        LlamaCppBackend(truncated, "sha", n_ctx=256)


@pytest.mark.real_model
def test_a_prompt_longer_than_the_context_is_recorded_and_the_run_goes_on(tiny_store):
    run = _plan(tiny_store, "c", ks=(1, 3), n_ctx=100, max_tokens=8)
    report = execute(tiny_store, run)
    rows = tiny_store.conn.execute("SELECT status, error FROM events WHERE run_id = ?", (run.id,)).fetchall()
    failed = [e for s, e in rows if s == "error"]
    assert report.errors == len(failed) > 0 and report.done == 6 - len(failed) > 0
    assert all("exceeds n_ctx 100" in e for e in failed)


def test_the_models_own_tokenizer_can_set_the_budget(tiny_store):
    from workbench.evidence import get_tokenizer

    tok = get_tokenizer("llama:default")
    text = "[T1] Kismet | directed_by | William Dieterle\n"
    ids = tok.encode(text)
    assert 5 < len(ids) < 40 and tok.decode_prefix(ids, len(ids)) == text
    plan_sweep(tiny_store, SweepConfig(ks=(2,), budgets=(8,), formats=("score",), tokenizer="llama:default"),
               name="t")
    tokens = {r[0] for r in tiny_store.conn.execute("SELECT evidence_tokens FROM events")}
    assert max(tokens) <= 8


# -- faults: kill -9 and Ctrl-C in a real subprocess ---------------------------------------
# The CLI runs against a served stand-in (tests/genkit.py) whose answers go only when the test allows them:
# what is checked is what the run keeps and redoes, not what a model wrote, and "killed with more jobs in
# flight" holds however fast or loaded the machine is.
def _cli(db, *args):
    return [sys.executable, "-m", "workbench.cli", "--db", str(db), *args]


RUN_ARGS = ("run", "metaqa", "--limit", "8", "--k", "1,5", "--budget", "256", "--format", "score",
            "--max-tokens", "16", "--n-ctx", "1024", "--name", "long")


def _wait_for_done(db: Path, at_least: int, proc, timeout: float = 120) -> int:
    return wait_for_rows(db, "SELECT count(*) FROM events WHERE status = 'done'", at_least, proc, timeout)


@pytest.fixture
def metaqa_file_db(tmp_path, metaqa_template):
    return copy_db(metaqa_template, tmp_path / "wb.db")


def test_kill_9_mid_run_then_resume_loses_and_recomputes_nothing(metaqa_file_db, capsys):
    db = metaqa_file_db
    with ServedModel(paced=True) as model:
        proc = subprocess.Popen(_cli(db, *RUN_ARGS, *model.options), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        model.allow(3)                    # three answers; the jobs in flight after them wait for the kill
        _wait_for_done(db, 3, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        model.release()
        con = sqlite3.connect(db)
        before = dict(((c, s), (k, f)) for c, s, k, f in con.execute(
            "SELECT cell_id, sid, gen_key, finished_at FROM events WHERE status = 'done'"))
        con.close()
        assert 0 < len(before) < 16
        # The resume runs in this process (the CLI's main, as `workbench resume` runs it): the second process.
        capsys.readouterr()
        assert main(["--db", str(db), "resume", "long", "--json"]) == 0
        resumed = capsys.readouterr().out
    result = json.loads(resumed)
    assert result["execution"]["jobs"] == 16 - len(before)  # only what was not committed
    stats = result["run"]
    assert stats["done"] == 16 and stats["pending"] == 0
    assert stats["model_calls"] + stats["cache_hits"] == stats["jobs"] == 16
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    after = dict(((c, s), (k, f)) for c, s, k, f in con.execute(
        "SELECT cell_id, sid, gen_key, finished_at FROM events"))
    assert all(after[job] == before[job] for job in before)  # finished jobs untouched
    # Each distinct prompt was generated exactly once across both processes.
    generated = con.execute("SELECT count(*) FROM generations").fetchone()[0]
    assert generated == stats["model_calls"]
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] == 16


def test_ctrl_c_stops_cleanly_after_the_current_job(metaqa_file_db):
    db = metaqa_file_db
    with ServedModel(paced=True) as model:
        proc = subprocess.Popen(_cli(db, *RUN_ARGS, *model.options), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        stderr = Stderr(proc)
        model.allow(2)
        _wait_for_done(db, 2, proc)
        proc.send_signal(signal.SIGINT)
        stderr.wait_for("stopping after the job in progress")
        model.release()                   # the jobs in flight are answered: the run stops after them
        proc.wait(timeout=60)
    err = stderr.text()
    assert proc.returncode == 130, err
    assert "stopping after the job in progress" in err
    con = sqlite3.connect(db)
    counts = dict(con.execute("SELECT status, count(*) FROM events GROUP BY status"))
    assert counts.get("done", 0) >= 2 and counts.get("pending", 0) > 0 and "error" not in counts
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_the_ledger_of_an_unfinished_run_shows_partial_numbers_with_n(metaqa_file_db, capsys):
    db = metaqa_file_db
    with ServedModel(paced=True) as model:
        proc = subprocess.Popen(_cli(db, *RUN_ARGS, *model.options), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            model.allow(3)
            _wait_for_done(db, 3, proc)
            # Read while the run is still writing (WAL): no "database is locked". The reader is this process (the
            # CLI's main, as `workbench ledger` runs it), the writer the run's.
            capsys.readouterr()
            assert main(["--db", str(db), "ledger", "long", "--json", "--resamples", "100"]) == 0
            out = capsys.readouterr().out
            assert main(["--db", str(db), "ledger", "long", "--resamples", "100"]) == 0
            table = capsys.readouterr().out
        finally:
            proc.kill()
            proc.wait()
    cells = json.loads(out)
    scored = [c for c in cells if c["S_llm"]["value"] is not None]
    assert scored and all(0 < c["n"]["value"] <= 8 for c in scored)
    assert any(c["n"]["value"] < 8 for c in scored) or len(scored) < len(cells)
    assert "partial:" in table
