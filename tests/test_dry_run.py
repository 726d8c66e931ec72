"""``workbench run --dry-run``: the jobs, unique prompts, exact prompt tokens, cache hits and
an ETA, before anything is generated or written.

Real parts only: a real SQLite database, the real SmolLM2 GGUF (its vocabulary for the
token counts; the whole model for the speed probe and for the real run compared against).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.runs.dry_run import MIN_HISTORY, fit_speed
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep

# 3 questions × 2 cells (K=1, K=2): q3 has one retrieved triple, so its two cells show the
# same evidence and render the same prompt: 6 jobs, 5 unique prompts.
GRID = ["tiny", "--k", "1,2", "--budget", "256", "--format", "score", "--max-tokens", "8", "--threads", "2"]


def _run(db: Path, *extra: str) -> list[str]:
    return ["--db", str(db), "run", *GRID, *extra]


def _dry(db: Path, capsys, *extra: str) -> dict:
    capsys.readouterr()
    assert main([*_run(db, *extra), "--dry-run", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["dry_run"]
    return result


def _fingerprint(db: Path) -> tuple[str, list[str]]:
    """The database file's bytes (with its -wal) and its logical content."""
    digest = hashlib.sha256()
    for suffix in ("", "-wal"):
        if Path(f"{db}{suffix}").exists():
            digest.update(Path(f"{db}{suffix}").read_bytes())
    conn = sqlite3.connect(db)
    try:
        return digest.hexdigest(), list(conn.iterdump())
    finally:
        conn.close()


@pytest.fixture
def db(tiny_store) -> Path:
    """The tiny dataset in a closed database (so its bytes are settled: the WAL checkpointed)."""
    tiny_store.close()
    return tiny_store.path


@pytest.mark.real_model
def test_a_dry_run_writes_nothing(db, capsys):
    before = _fingerprint(db)
    result = _dry(db, capsys, "--name", "small")
    assert _fingerprint(db) == before   # not the plan, not the model's sha256 in model_files, not a migration
    assert (result["exists"], result["jobs"], result["unique_prompts"]) == (False, 6, 5)
    # The database holds no generations of the model: its speed was probed.
    assert result["speed"]["source"] == "probe" and result["eta_seconds"] > 0
    # The text form says the same, and still writes nothing.
    assert main([*_run(db, "--name", "small"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dry run of run small (not planned yet); nothing was generated or written")
    assert "unique prompts  5 after dedup" in out and "measured just now by a probe" in out
    assert _fingerprint(db) == before


@pytest.mark.real_model
@pytest.mark.budget(15)
def test_dry_run_token_counts_equal_the_prompt_tokens_of_the_real_run_then_its_cache_hits_and_history(db, capsys):
    """The dry run's token counts against what the real run records on its jobs (events).

    The executor records on every job ``prompt_tokens``, the rendered prompt's length in the
    model's tokens, whether the model ran or the cache answered; and ``eval_tokens``, the
    prompt tokens llama.cpp really evaluated: after the KV prefix reuse on the job that ran
    the model (``source = 'model'``, one per unique prompt), 0 on a cache hit. So:

    - the dry run's ``prompt_tokens`` (every job) is the sum of ``prompt_tokens``;
    - its ``unique_prompt_tokens`` is that sum over the jobs that ran the model;
    - its ``eval_tokens`` (the prefix reuse worked out in the executor's prompt order) is the
      sum of ``eval_tokens``: the prompt-eval tokens of the real run.

    Then, on that run's generations (one real run serves both halves): cache hits, the history an
    ETA is fitted to, and a planned run's pending jobs.
    """
    dry = _dry(db, capsys, "--name", "small")
    capsys.readouterr()
    assert main([*_run(db, "--name", "small"), "--json"]) == 0
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT e.source, e.prompt_tokens, e.eval_tokens FROM events e JOIN runs r"
                        " ON r.id = e.run_id WHERE r.name = 'small' AND e.status = 'done'").fetchall()
    conn.close()
    model = [r for r in rows if r[0] == "model"]
    assert dry["jobs"] == len(rows) == 6
    assert dry["unique_prompts"] == dry["to_generate"] == len(model) == 5 and dry["cache_hits"] == 0
    assert dry["prompt_tokens"] == sum(r[1] for r in rows)
    assert dry["unique_prompt_tokens"] == sum(r[1] for r in model)
    assert dry["eval_tokens"] == sum(r[2] for r in rows)
    assert dry["eval_tokens"] < dry["unique_prompt_tokens"]   # consecutive prompts do share a prefix
    # The same prompts under another name (the real run above recorded 5 generations): every one is in the cache, nothing to generate.
    again = _dry(db, capsys, "--name", "again")
    assert (again["unique_prompts"], again["cache_hits"], again["to_generate"]) == (5, 5, 0)
    assert again["eval_tokens"] == 0 and again["eta_seconds"] == 0
    # Other prompts (a tighter budget cuts the evidence): the ETA comes from the generations recorded.
    other = _dry(db, capsys, "--name", "tight", "--budget", "12")
    assert other["speed"]["source"] == "history" and other["speed"]["samples"] == 5
    assert other["to_generate"] > 0 and other["eta_seconds"] > 0
    # The finished run itself has no job left; a run planned but not executed counts its pending jobs.
    done = _dry(db, capsys, "--name", "small")
    assert (done["exists"], done["jobs"], done["run_jobs"]) == (True, 0, 6)
    from workbench.store import open_store

    store = open_store(db)
    plan_sweep(store, SweepConfig(ks=(1, 2), budgets=(256,), formats=("score",)), name="planned",
               generation=GenerationConfig(max_tokens=8).as_dict())
    store.close()
    planned = _dry(db, capsys, "--name", "planned")
    assert (planned["exists"], planned["jobs"], planned["cache_hits"], planned["to_generate"]) == (True, 6, 5, 0)


def test_a_changed_config_under_a_planned_name_is_refused_as_the_run_refuses_it(db, capsys):
    assert main(["--db", str(db), "sweep", "tiny", "--k", "1", "--budget", "64", "--format", "score",
                 "--name", "taken"]) == 0
    capsys.readouterr()
    assert main([*_run(db, "--name", "taken"), "--dry-run"]) == 2
    assert "exists with a different config" in capsys.readouterr().err


def test_the_speed_fit_recovers_known_rates():
    # seconds = eval/900 + generated/30 + 0.02, over varied prompts and answers
    rows = [(e, c, e / 900 + c / 30 + 0.02) for e, c in [(300, 8), (40, 12), (120, 3), (500, 20), (10, 8)]]
    speed = fit_speed(rows, max_tokens=16)
    assert speed.prompt_tokens_per_s == pytest.approx(900) and speed.generated_tokens_per_s == pytest.approx(30)
    assert speed.overhead_s == pytest.approx(0.02)
    assert speed.mean_generated == pytest.approx((8 + 12 + 3 + 16 + 8) / 5)   # capped at max_tokens
    assert speed.seconds(1800, 2, 15) == pytest.approx(2 + 1 + 0.04)
    assert fit_speed(rows[: MIN_HISTORY - 1], max_tokens=16) is None
    # Noise that would make a term negative drops it rather than predicting negative time.
    flat = fit_speed([(100, 5, 1.0), (200, 5, 0.9), (300, 5, 1.1), (400, 5, 1.0)], max_tokens=8)
    assert flat.seconds(1000, 1, 5) > 0


def test_a_missing_model_file_is_a_bad_option_and_nothing_is_written(db, tmp_path, capsys):
    # As for a real run: the model is checked first, and a bad value of --model is exit 2 naming it.
    before = _fingerprint(db)
    absent = tmp_path / "absent.gguf"
    assert main([*_run(db, "--name", "absent", "--model", str(absent)), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: --model: {absent}: model file not found\n"
    assert _fingerprint(db) == before


def test_a_write_inside_a_dry_run_fails_instead_of_landing(store):
    from workbench.store.manifests import writes_refused

    with writes_refused(store):
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.conn.execute("INSERT INTO evidence (sha256, text) VALUES ('x', 'y')")
    store.conn.execute("INSERT INTO evidence (sha256, text) VALUES ('x', 'y')")   # and only inside it
    assert store.count("evidence") == 1


def test_a_server_model_is_counted_without_the_network(db, capsys):
    # Nothing listens on port 9 (discard): a dry run must not need the server.
    result = _dry(db, capsys, "--name", "served", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                  "--model", "smol")
    assert (result["jobs"], result["unique_prompts"], result["to_generate"]) == (6, 5, 5)
    assert result["prompt_tokens"] is None and result["eta_seconds"] is None and result["speed"] is None
    assert any("no ETA" in note for note in result["notes"])
