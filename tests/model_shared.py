"""Real model outputs the model tests share: generated once per test session, by whichever worker asks first.

The tiny dataset (conftest's ``tiny_dir``) answered by SmolLM2 is what several tests need without
generation being their subject: a claim run's ledger, a resume, a refusal, a run served from the
cache. :func:`tiny_answered` runs the real generation once (a scenario of the session's pool,
tests/outputcache.py, so its outputs are pooled and its model use is not the calling test's) and
keeps the whole database beside the pool: a test copies it, or seeds its own store from the pool
and finds every one of these prompts cached.
"""

from __future__ import annotations

from pathlib import Path

from conftest import copy_db, tiny_dir
from outputcache import SharedOutputs
from workbench.data.importer import import_dataset
from workbench.models.registry import ExecOptions
from workbench.runs.executor import execute
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run

#: The scenario's name: what it generates, so another build never takes it.
TINY_ANSWERED = "tiny-k1,2-b256-score-t12-ctx1024:gen,json-run,r"
#: The tiny dataset's plan every run of the scenario follows (tests/test_generation.py's ``_plan`` too).
TINY_GRID = SweepConfig(ks=(1, 2), budgets=(256,), formats=("score",))
TINY_GENERATION = dict(max_tokens=12, n_ctx=1024)


def plan_tiny(store, name: str, **generation) -> None:
    """Plan ``name`` over the tiny dataset on :data:`TINY_GRID` with :data:`TINY_GENERATION` (updated by ``generation``)."""
    plan_sweep(store, TINY_GRID, name=name, generation=GenerationConfig(**{**TINY_GENERATION, **generation}).as_dict())


def _answer_tiny(db: Path, keep: Path) -> None:
    """The tiny dataset imported as ``tiny`` and answered by SmolLM2 as ``gen`` (free text), ``json-run`` (JSON
    lists) and ``r`` (``gen``'s prompts again: replayed from the cache); the database is then kept at ``keep``."""
    store = open_store(db)
    try:
        import_dataset(store, tiny_dir.__wrapped__(db.parent), "tiny")
        for name, answer_format in (("gen", "text"), ("json-run", "json"), ("r", "text")):
            plan_tiny(store, name, answer_format=answer_format)
            # One thread: ggml's threads spin at barriers, and on a busy machine two of them crawl.
            assert execute(store, get_run(store, name), opts=ExecOptions(n_threads=1)).errors == 0
    finally:
        store.close()
    copy_db(db, keep)


def tiny_answered(pool: SharedOutputs) -> Path:
    """The closed database of the tiny dataset answered by SmolLM2 (runs ``gen``, ``json-run``, ``r``): generated
    once per session and pooled; copy it (``copy_db``), or ``pool.seed`` a store to find these answers cached."""
    keep = pool.root / "tiny-answered.db"
    pool.scenario(TINY_ANSWERED, lambda db: _answer_tiny(db, keep))
    return keep
