"""The states of data the TUI's contract tests walk: an empty database, one like the demo's, and a run in progress.

Between the empty and the demo-like: the demo-like without its SearChain and dedup runs (what `just demo` leaves):
populated, with screens that have no run of their kind.

The demo-like database holds what `just demo` leaves (MetaQA, a run a model answered over K×B with oracle
cells, the recorded run with imported answers, their claims and the shipped labels, HowToCook with BM25
results, RAGChecker's preference set) plus a SearChain run and a dedup run, so that every screen has rows
to act on. No model runs: the answers are EchoBackend's, imported, or recorded (tests/replay.py), the same
on every CPU. It is built once per test session (every xdist worker copies the same file).

A run in progress is the demo-like database with a planned run ``live`` that the app executes through
:class:`GatedBackend`: the first jobs answer at once, the next waits until the test ends, so the run stays
executing (bar, status line, ``p`` pauses it) for as long as the walk takes, and writes nothing meanwhile.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

import pytest
from filelock import FileLock

from conftest import REPO, SAMPLE_META, SAMPLE_METAQA, copy_db, write_tiny_kg
from replay import replay_llm
from tuikit import EchoBackend, Turns

LABELS = REPO / "sample_data" / "labels"
# The demo's grid, thinned (K 1, 5, 20 of 1, 2, 5, 10, 20; B 32, 128 of 32, 64, 128): every screen has what the
# demo gives it (several K, B, oracle cells), with half the cells to draw after each key.
DEMO_GRID = dict(ks=(1, 5, 20), budgets=(32, 128), formats=("linear",), oracle=True, shuffles=2)
# The recorded run's grid is the demo's own: its answers and labels (sample_data/labels) name its cells.
RECORDED_GRID = dict(ks=(1, 2, 5, 10, 20), budgets=(32, 64, 128), formats=("linear",), oracle=True, shuffles=2)
LIVE = "live"


def build_demo_like(path: Path) -> Path:
    """Write the demo-like database at ``path`` (see the module's docstring) and close it."""
    from workbench.claims.runner import ClaimsConfig, run_claims
    from workbench.data.corpus import import_corpus
    from workbench.data.importer import import_dataset
    from workbench.data.labels import import_labels
    from workbench.data.meta_import import import_meta
    from workbench.data.predictions import import_predictions
    from workbench.kg.importer import import_kg
    from workbench.kg.runner import DedupConfig, execute_dedup, plan_dedup
    from workbench.pipelines.runner import SearChainConfig, execute_searchain, plan_searchain
    from workbench.retrieval.evaluate import filename_questions
    from workbench.retrieval.runs import retrieve
    from workbench.runs.executor import execute
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.sweep import SweepConfig, plan_sweep
    from workbench.store import open_store
    from workbench.store.queries import get_run

    store = open_store(path)
    try:
        import_dataset(store, SAMPLE_METAQA, "metaqa")
        # SearChain and dedup first: their recorded answers were recorded on a database holding only these.
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(64,), formats=("score",)), name="sweep")
        name, _ = plan_searchain(store, "metaqa", SearChainConfig(hops=2, limit=2), "chains")
        assert execute_searchain(store, name, llm=replay_llm(store, "chains")).done == 2
        import_kg(store, write_tiny_kg(path.parent / "kg"), "tiny")
        name, _, _ = plan_dedup(store, "tiny", DedupConfig(), "review")
        assert execute_dedup(store, name, llm=replay_llm(store, "judged")).errors == 0
        plan_sweep(store, SweepConfig(**DEMO_GRID, limit=12), name="demo",
                   generation=GenerationConfig(max_tokens=32).as_dict())
        execute(store, get_run(store, "demo"), backend=EchoBackend())
        plan_sweep(store, SweepConfig(**RECORDED_GRID, limit=3), name="recorded")
        import_predictions(store, get_run(store, "recorded"), LABELS / "demo-answers.jsonl")
        run_claims(store, get_run(store, "recorded"), ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
        import_labels(store, LABELS / "demo-claims.jsonl")
        import_corpus(store, REPO / "sample_data" / "howtocook", "howtocook")
        filename_questions(store, "howtocook")
        retrieve(store, "howtocook", k=5)
        import_meta(store, SAMPLE_META / "human_labeled_data.json", "prefs",
                    baselines=[SAMPLE_META / "baseline_ragchecker.json"])
    finally:
        store.close()
    return path


def build_like_just_demo(path: Path, demo_template: Path) -> Path:
    """Write at ``path`` the demo-like database without its SearChain and dedup runs: what `just demo` leaves, a
    populated database where SearChain and Dedup have no run of their kind (the KG stays, with no dedup run)."""
    from workbench.store import open_store

    copy_db(demo_template, path)
    store = open_store(path)
    try:
        with store.transaction() as conn:   # their nodes, samples, pairs and verdicts go by cascade
            conn.execute("DELETE FROM pipeline_runs")
            conn.execute("DELETE FROM dedup_runs")
    finally:
        store.close()
    return path


def build_metaqa(path: Path) -> Path:
    """Write a database at ``path`` holding sample_data/metaqa imported as ``metaqa``, and nothing else."""
    from workbench.data.importer import import_dataset
    from workbench.store import open_store

    store = open_store(path)
    try:
        import_dataset(store, SAMPLE_METAQA, "metaqa")
    finally:
        store.close()
    return path


def plan_live(path: Path) -> None:
    """Plan ``live``: one cell of 6 MetaQA questions for the default model (nothing executed)."""
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.sweep import SweepConfig, plan_sweep
    from workbench.store import open_store

    store = open_store(path)
    try:
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=6), dataset="metaqa",
                   name=LIVE, generation=GenerationConfig(max_tokens=16).as_dict())
    finally:
        store.close()


def shared_template(tmp_path_factory, name: str, build) -> Path:
    """``build(path)`` once per test session, whichever xdist worker asks first (the others wait and copy)."""
    root = tmp_path_factory.getbasetemp()
    if root.name.startswith("popen-gw"):       # under xdist: the workers' common parent
        root = root.parent
    path = root / "tui-states" / name
    path.parent.mkdir(exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            work = path.with_suffix(".building")
            work.mkdir(exist_ok=True)
            built = build(work / path.name)
            copy_db(built, path)
    return path


def restore(db: Path, template: Path) -> None:
    """Write ``template``'s content over the open database ``db`` (SQLite's backup: readers see a write)."""
    source, target = sqlite3.connect(template), sqlite3.connect(db, timeout=30)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


class GatedBackend(EchoBackend):
    """EchoBackend whose answers after the first ``free`` wait for the test (:class:`tuikit.Turns`: ``allow(n)``
    lets n more through, ``release()`` every one). ``calls``: the answers asked for so far, the one waiting
    included. A run it answers moves exactly as far as the test lets it, however fast or slow the machine:
    what a real model's seconds per answer only made likely."""

    def __init__(self, free: int = 2):
        self.calls = 0
        self.free = free
        self.turns = Turns(free)
        self.allow, self.release = self.turns.allow, self.turns.release

    def generate(self, prompt, sampling, json_schema=None, grammar=None):
        self.calls += 1
        self.turns.take()
        return super().generate(prompt, sampling, json_schema, grammar)


def no_model_runs(monkeypatch, gate: GatedBackend | None = None) -> None:
    """Runs the TUI starts answer through EchoBackend (``live`` through ``gate``): no model is loaded."""
    from workbench.runs import executor
    from workbench.tui.screens import runs

    def execute(store, run, **kwargs):
        kwargs["backend"] = gate if gate is not None and run.name == LIVE else EchoBackend()
        return executor.execute(store, run, **kwargs)

    monkeypatch.setattr(runs, "execute", functools.wraps(executor.execute)(execute))


def few_resamples(monkeypatch, quick: int = 20, full: int = 20) -> None:
    """Every screen bootstraps ``quick`` then ``full`` resamples (by default one pass of 20): the contracts are
    about keys, rows and panes, not about intervals, and a thousand resamples per screen and key cost minutes."""
    from workbench.tui import meta_view
    from workbench.tui.screens import compare, label_loads, ledger, meta, retrieval, searchain

    for module in (compare, ledger, meta, meta_view, retrieval):
        monkeypatch.setattr(module, "QUICK_RESAMPLES", quick)
        monkeypatch.setattr(module, "RESAMPLES", full)
    for module in (label_loads, searchain):
        monkeypatch.setattr(module, "RESAMPLES", full)


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory) -> Path:
    """The demo-like database (:func:`build_demo_like`), built once per test session; every test module has this
    fixture (tests/conftest.py loads this module as a plugin)."""
    return shared_template(tmp_path_factory, "demo.db", build_demo_like)
