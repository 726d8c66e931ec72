"""Every progress rate and ETA leaves out the time spent waiting for the model (issue 54, case 2).

A pass started while another process holds the machine-wide model slot waits, then works.
The TUI used to count the wait as work: "0.0 jobs/s" and "ETA 17h15m" at 1/80 for a run
that ended 20 s later. The class, generated over every place that shows a rate or an ETA:

- each pass (a run, claims, SearChain, dedup, relevance judging, meta) reports at every
  progress tick a time worked no longer than the time since it started less its wait;
- the command line's bar of each pass, and the TUI's Runs line, show a rate at least, and an
  ETA at most, what that time worked gives;
- no other place in ``workbench/`` shows a rate or an ETA (a new one joins this class).

The model is a scripted backend (tests/test_pass_progress.py, tests/relevancekit.py) that
loads as a local model does: it first takes the real model slot, waiting while another holder
keeps it. The other holder is a lock of its own on the slot's file, with its holder line, as
another process's is (``flock`` locks of two opens conflict within one process too).
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import io
import json
import os
import re
import sys
import threading
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest

from conftest import SAMPLE_META, import_films_kg
from relevancekit import DATASET, ScriptedChooser, build_tiny
from test_pass_progress import ScriptedBackend
from tuikit import SIZE, open_runs, wait_for
from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.cli import runs as cli_runs
from workbench.cli.shared import run_pass
from workbench.data.importer import import_dataset
from workbench.data.meta_import import import_meta
from workbench.kg.runner import DedupConfig, execute_dedup, plan_dedup
from workbench.meta.run import run_meta
from workbench.meta.sets import get_meta_set
from workbench.models import slot
from workbench.models.cached import CachedLLM
from workbench.pipelines.runner import SearChainConfig, execute_searchain, plan_searchain
from workbench.retrieval.relevance import judge_relevance
from workbench.runs import executor
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store.queries import get_run
from workbench.tui.app import WorkbenchApp

WORKBENCH = Path(__file__).resolve().parents[1] / "workbench"
#: How long the other holder keeps the model once a pass waits for it: far longer than a scripted pass's work.
HELD = 0.8
#: Two clocks' difference (the driver's perf_counter, the test's monotonic) and a tick's own bookkeeping, in seconds.
SLACK = 0.02


@pytest.fixture(autouse=True)
def slot_elsewhere(tmp_path, monkeypatch):
    """The test's own slot, away from the path tests/modeluse.py watches: the slot is taken here, yet no model runs."""
    monkeypatch.setenv(slot.SLOT_ENV, str(tmp_path / "slot" / "model.lock"))


class Elsewhere:
    """Another holder of the model slot: a lock of its own on the slot's file, with its holder line, kept until
    ``HELD`` seconds after a pass began to wait for it (however long the pass took to get there)."""

    def __init__(self):
        path = slot.slot_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps({"pid": os.getpid(), "what": "workbench dedup run elsewhere",
                                       "since": time.time()}).encode(), 0)
        self.letting_go = threading.Timer(HELD, fcntl.flock, (self.fd, fcntl.LOCK_UN))
        self.waited_on = False

    def waited_for(self) -> None:
        """A pass waits for it: let go ``HELD`` seconds from now (from the first wait)."""
        if not self.waited_on:
            self.waited_on = True
            self.letting_go.start()

    def close(self) -> None:
        self.letting_go.cancel()
        os.close(self.fd)


@contextmanager
def model_held_elsewhere(loads: "Loads"):
    """The model slot held by another holder until ``HELD`` seconds after ``loads``'s model began to wait for it."""
    loads.elsewhere = Elsewhere()
    try:
        yield
    finally:
        loads.elsewhere.close()


class LoadsLikeALocalModel:
    """A scripted backend that, as a GGUF load does, first takes the model slot (waiting for it) and keeps it until
    ``close()``; ``waited`` is how long it waited. ``gate``, if given, holds every generation after the first until
    it is set (the test reads the progress shown in between)."""

    def __init__(self, inner, on_wait=None, stop=None, gate: threading.Event | None = None, heard=None):
        def waiting(message: str) -> None:
            if heard is not None:
                heard()
            if on_wait is not None:
                on_wait(message)

        self.hold = slot.acquire("scripted", on_wait=waiting, stop=stop)
        self.inner, self.waited, self.gate, self.calls = inner, self.hold.waited, gate, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, *args, **kwargs):
        self.calls += 1
        if self.gate is not None and self.calls > 1:
            assert self.gate.wait(60), "the test never let the second generation go"
        return self.inner.generate(*args, **kwargs)

    def close(self) -> None:
        self.hold.release()
        self.inner.close()


class Loads:
    """The factory of a pass's model: a :class:`LoadsLikeALocalModel` over ``make()``, remembered as ``backend``."""

    def __init__(self, make=ScriptedBackend, gate: threading.Event | None = None):
        self.make, self.gate, self.backend, self.elsewhere = make, gate, None, None

    def __call__(self, on_wait=None, stop=None) -> LoadsLikeALocalModel:
        heard = self.elsewhere.waited_for if self.elsewhere is not None else None
        self.backend = LoadsLikeALocalModel(self.make(), on_wait, stop, self.gate, heard)
        return self.backend


class Terminal(io.StringIO):
    """A stderr that is a terminal: the bar draws each tick in place (at most 10 a second), not only the last."""

    def isatty(self) -> bool:
        return True


def eta_seconds(text: str) -> float:
    """An ETA as shown ("0s", "4m05s", "1h26m") in seconds; "?" is not known (infinite)."""
    if text.startswith("?"):
        return float("inf")
    h, m, s = (re.search(rf"(\d+){unit}", text) for unit in ("h", "m(?!s)", "s"))
    return sum(int(x.group(1)) * f for x, f in ((h, 3600), (m, 60), (s, 1)) if x)


def assert_paced(rate: float, eta: str, *, done: int, total: int, worked_at_most: float) -> None:
    """A rate no slower, and an ETA no longer, than ``done`` jobs (none from the cache) of ``total`` in
    ``worked_at_most`` seconds give (to the 0.1 and the second shown): a wait counted as work makes the rate slower
    and the ETA longer."""
    generated, left = done, total - done
    assert generated > 0 and worked_at_most > 0, (generated, worked_at_most)
    assert rate + 0.05 >= generated / (worked_at_most + SLACK), (rate, generated, worked_at_most)
    assert eta_seconds(eta) <= left * (worked_at_most + SLACK) / generated + 1, (eta, left, worked_at_most)


# -- the passes ------------------------------------------------------------------------------------------------------

def _answered_run(store, tiny_dir):
    """Run ``gen`` of the tiny dataset, its 6 answers given (what claims check)."""
    import_dataset(store, tiny_dir, "tiny")
    plan_sweep(store, SweepConfig(ks=(1, 2), budgets=(256,), formats=("score",)), name="gen",
               generation=GenerationConfig(answer_format="text").as_dict())
    run = get_run(store, "gen")
    assert executor.execute(store, run, backend=ScriptedBackend()).done == 6
    return run


def claims_pass(store, tmp_path, tiny_dir, loads):
    run = _answered_run(store, tiny_dir)
    return partial(run_claims, store, run, ClaimsConfig(decomposer="llm", verifiers=("llm_judge",)))


def searchain_pass(store, tmp_path, tiny_dir, loads):
    import_dataset(store, tiny_dir, "tiny")
    name, _ = plan_searchain(store, "tiny", SearChainConfig(baseline_k=2), "sc")
    return partial(execute_searchain, store, name)


def dedup_pass(store, tmp_path, tiny_dir, loads):
    import_films_kg(store, tmp_path)
    name, _, _ = plan_dedup(store, "films", DedupConfig(), "dd")
    return partial(execute_dedup, store, name)


def relevance_pass(store, tmp_path, tiny_dir, loads):
    import_dataset(store, build_tiny(tmp_path / "chunks"), DATASET)
    loads.make = ScriptedChooser
    return partial(judge_relevance, store, DATASET, "bm25", k=3)


#: Each pass the command line runs through ``run_pass`` (its bar, labelled by the key): how to set it up.
PASSES = {"claims": claims_pass, "searchain": searchain_pass, "dedup": dedup_pass, "relevance": relevance_pass}


def _bars(text: str, label: str) -> list[tuple[int, int, float, str]]:
    """The bars drawn on a terminal: (shown done, shown total, rate, ETA) each."""
    found = re.findall(rf"{label} \[[#-]+\] (\d+)/(\d+) ([\d,.]+)/s(?: [\d,.]+ tok/s)? ETA (\S+)",
                       text.replace("\x1b[K", ""))
    return [(int(d), int(t), float(r.replace(",", "")), eta) for d, t, r, eta in found]


def _drive(loads: Loads, execute, run, monkeypatch):
    """Run ``execute(progress=…)`` through ``run`` (the command line's code) on a terminal, while the model is held
    elsewhere: (what stderr showed, each tick's (done, total, seconds reported, seconds since the start))."""
    ticks = []
    began = time.monotonic()

    def observed(**kwargs):
        shown = kwargs["progress"]

        def progress(*tick):
            done, total, seconds = (tick[0].done, tick[0].total, tick[0].elapsed) if len(tick) == 1 else \
                (tick[0], tick[1], tick[2].seconds)
            ticks.append((done, total, seconds, time.monotonic() - began))
            if shown is not None:
                shown(*tick)

        return execute(**{**kwargs, "progress": progress})

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with model_held_elsewhere(loads):
        run(observed)
    return terminal.getvalue(), ticks


@pytest.mark.parametrize("name", sorted(PASSES))
def test_a_pass_that_waited_for_the_model_shows_the_pace_of_its_work_alone(name, store, tmp_path, tiny_dir,
                                                                          monkeypatch):
    loads = Loads()
    execute = PASSES[name](store, tmp_path, tiny_dir, loads)
    llm = CachedLLM(store, loads)

    def run(observed):
        run_pass(name, "items", lambda **kw: observed(llm=llm, **kw), as_json=False, resume_hint="x", llm=llm)

    shown, ticks = _drive(loads, execute, run, monkeypatch)
    waited = loads.backend.waited
    assert waited > HELD / 2 and "waiting for the model: pid" in shown    # the pass did wait, and said so
    for done, total, seconds, since in ticks:
        assert seconds <= since - waited + SLACK, (seconds, since, waited)
    done, total, seconds, since = ticks[0]
    bars = _bars(shown, name)
    assert bars and bars[0][:2] == (done, total), (bars, ticks)   # the first bar drawn is the first tick's
    assert_paced(bars[0][2], bars[0][3], done=done, total=total, worked_at_most=since - waited)


def test_a_meta_run_that_waited_shows_the_pace_of_its_work_alone(store, tmp_path, monkeypatch):
    """Meta's ticks count both responses' passes, the one in progress included (it said 0 s until it ended)."""
    human = json.loads((SAMPLE_META / "human_labeled_data.json").read_text(encoding="utf-8"))[:6]
    (tmp_path / "pairs.json").write_text(json.dumps(human), encoding="utf-8")
    import_meta(store, tmp_path / "pairs.json", "pairs")      # 3 instances: 3 responses to check on each side
    loads = Loads()
    llm = CachedLLM(store, loads)
    execute = partial(run_meta, store, get_meta_set(store, "pairs"),
                      ClaimsConfig(decomposer="rule", verifiers=("llm_judge",)), llm=llm, similarity=False)

    def run(observed):
        assert run_pass("meta", "responses", observed, as_json=False, resume_hint="x", llm=llm) == 0

    shown, ticks = _drive(loads, execute, run, monkeypatch)
    waited = loads.backend.waited
    assert waited > HELD / 2 and "waiting for the model: pid" in shown
    for done, total, seconds, since in ticks:
        assert 0 < seconds <= since - waited + SLACK, (seconds, since, waited)
    done, total, _, since = ticks[0]
    bars = _bars(shown, "meta")
    assert bars and bars[0][:2] == (done, total), (bars, ticks)
    assert_paced(bars[0][2], bars[0][3], done=done, total=total, worked_at_most=since - waited)


def test_a_run_that_waited_for_the_model_shows_the_pace_of_its_work_alone_on_the_command_line(
        store, tiny_dir, monkeypatch):
    import_dataset(store, tiny_dir, "tiny")
    plan_sweep(store, SweepConfig(ks=(1, 2), budgets=(256,), formats=("score",)), name="gen",
               generation=GenerationConfig(answer_format="text").as_dict())
    loads = Loads()
    # The run's model loads where a GGUF's does (the executor's setup, through make_backend); no file to check.
    monkeypatch.setattr(executor, "make_backend", lambda spec, opts, store: loads(opts.on_wait, opts.stop))
    monkeypatch.setattr(executor._RunWork, "check_models", lambda self: None)
    args = argparse.Namespace(threads=None, n_gpu_layers=0, concurrency=1, timeout=30.0, retry_errors=False,
                              json=False, wait=False)
    real_execute = executor.execute

    def run(observed):
        monkeypatch.setattr(executor, "execute", lambda store, run, **kw: observed(store=store, run=run, **kw))
        code, report, _ = cli_runs._generate(args, store, get_run(store, "gen"))
        assert code == 0 and report.done == 6

    shown, ticks = _drive(loads, real_execute, run, monkeypatch)
    waited = loads.backend.waited
    assert waited > HELD / 2 and "run: waiting for the model: pid" in shown
    for done, total, seconds, since in ticks:
        assert seconds <= since - waited + SLACK, (seconds, since, waited)
    done, total, _, since = ticks[0]
    bars = _bars(shown, "run")
    assert bars and bars[0][:2] == (done, total), (bars, ticks)
    assert_paced(bars[0][2], bars[0][3], done=done, total=total, worked_at_most=since - waited)


async def test_a_run_that_waited_for_the_model_shows_the_pace_of_its_work_alone_on_the_runs_screen(
        store, tiny_dir, monkeypatch):
    """The issue's case: the Runs line after the wait reads the pace of the jobs generated since, not 1 in the wait."""
    import_dataset(store, tiny_dir, "tiny")
    plan_sweep(store, SweepConfig(ks=(1, 2), budgets=(256,), formats=("score",)), name="gen",
               generation=GenerationConfig(answer_format="text").as_dict())
    gate = threading.Event()
    loads = Loads(gate=gate)
    monkeypatch.setattr(executor, "make_backend", lambda spec, opts, store: loads(opts.on_wait, opts.stop))
    monkeypatch.setattr(executor._RunWork, "check_models", lambda self: None)
    app = WorkbenchApp(store.path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_runs(pilot)
            status = app.screen.query_one("#status")
            with model_held_elsewhere(loads):
                began = time.monotonic()
                await pilot.press("u")      # resume: the run's 6 jobs, the model held elsewhere
                await wait_for(pilot, lambda: "gen: 1/6 jobs done" in str(status.render()),
                               what=lambda: f"the first job's line (status: {status.render()})")
                since = time.monotonic() - began
            line = str(status.render())
            waited = loads.backend.waited
            assert waited > HELD / 2, waited
            rate, eta = re.search(r"([\d.]+) jobs/s · [\d.]+ tok/s · ETA (\S+)", line).groups()
            assert_paced(float(rate), eta, done=1, total=6, worked_at_most=since - waited)
            gate.set()
            await wait_for(pilot, lambda: "gen finished" in str(status.render()))
    finally:
        gate.set()


# -- the class is every place -----------------------------------------------------------------------------------------

#: Each module of workbench/ whose text shows a rate or an ETA, and how it leaves the waits out.
SHOWN = {
    "progress.py": "pace(): the CLI's bar, over the seconds the pass's driver worked (tests above)",
    "tui/screens/runs.py": "rate_line(): pace() over the run's time worked (the Runs screen's test above)",
    "cli/runs.py": "the bar as progress.py; the dry run's ETA is runs/dry_run.py's",
    "runs/dry_run.py": "an estimate from each generation's own seconds, timed around the model call (after the "
                       "model slot is held), never around a wait",
}
RATE_OR_ETA = re.compile(r"\bETA\b|jobs/s|tok/s|tokens/s|^/s\b")


def _shown_text(tree: ast.AST) -> list[str]:
    """The string literals of a module (f-strings' literal parts included), its docstrings left out."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_every_place_that_shows_a_rate_or_an_eta_is_in_this_class():
    showing = set()
    for path in WORKBENCH.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        if re.search(r"ETA|/s", source) and any(RATE_OR_ETA.search(text) for text in _shown_text(ast.parse(source))):
            showing.add(path.relative_to(WORKBENCH).as_posix())
    assert showing == set(SHOWN), "a rate or an ETA shown elsewhere: test that it leaves out the waits, list it here"
