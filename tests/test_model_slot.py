"""The machine-wide model slot: one process at a time runs the local model, the others wait and say for whom.

Each test has its own lock file (the ``private_model_slot`` fixture, or ``slot_elsewhere`` for a
test that never loads a model), shared with the processes it starts; the other processes are real
Python processes holding the slot. Only the tests that load the model once the wait ends carry
the ``real_model`` marker.
"""

from __future__ import annotations

import io
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SAMPLE_METAQA, copy_db
from slotkit import holder, let_go
from tuikit import SIZE, open_runs, wait_for
from workbench.data.corpus import import_corpus
from workbench.data.importer import import_dataset
from workbench.models import slot
from workbench.models.cached import default_llm
from workbench.models.llamacpp import LlamaCppBackend
from workbench.models.locate import default_model_path
from workbench.runs.generation import GenerationConfig
from workbench.models.slot import ModelSlotStopped
from workbench.progress import ProgressBar
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.tui.app import WorkbenchApp

WAITING = re.compile(r"waiting for the model: pid (\d+) \(`(.*)`\) has used the cores since \d\d:\d\d:\d\d")


@pytest.fixture
def slot_elsewhere(tmp_path, monkeypatch) -> Path:
    """The test's own slot, away from the path tests/modeluse.py watches: for a test that takes the slot (here or
    in a holder process) but never loads a model, which is then not a real-model test."""
    path = tmp_path / "slot" / "model.lock"
    path.parent.mkdir()
    monkeypatch.setenv(slot.SLOT_ENV, str(path))
    return path


# Another process that tries the slot on request, without waiting: started once for the module (a Python process
# importing the workbench costs a third of a second of CPU), told each time which lock file to try.
PROBER = """
import os, sys, threading
from workbench.models import slot
stop = threading.Event(); stop.set()
for path in sys.stdin:
    os.environ[slot.SLOT_ENV] = path.strip()
    try:
        slot.acquire("probe", stop=stop).release()
    except slot.ModelSlotStopped:
        print("busy", flush=True)
    else:
        print("free", flush=True)
"""


@pytest.fixture(scope="module")
def prober():
    """The module's probing process (see PROBER)."""
    child = subprocess.Popen([sys.executable, "-c", PROBER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield child
    child.stdin.close()
    child.wait(timeout=30)


def busy_elsewhere(prober) -> bool:
    """Whether another process holds the slot now: another process's attempt, which must not wait."""
    prober.stdin.write(f"{slot.slot_path()}\n")
    prober.stdin.flush()
    answer = prober.stdout.readline().strip()
    assert answer in ("busy", "free"), answer
    return answer == "busy"


def test_the_slot_is_a_lock_file_per_user_in_the_temporary_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(slot.SLOT_ENV)
    assert slot.slot_path().name == "model.lock"
    assert slot.slot_path().parent.name == f"dissipation-workbench-{os.getuid()}"
    monkeypatch.setenv(slot.SLOT_ENV, str(tmp_path / "elsewhere.lock"))
    assert slot.slot_path() == tmp_path / "elsewhere.lock"
    monkeypatch.setenv(slot.SLOT_ENV, "off")
    assert slot.slot_path() is None


@pytest.mark.usefixtures("slot_elsewhere")
def test_a_second_process_waits_and_is_told_once_which_pid_holds_the_model():
    with holder("workbench claims run demo") as child:
        messages = []

        def on_wait(message):
            messages.append(message)
            let_go(child, after=0.4)   # eight polls later: the message is not repeated

        hold = slot.acquire("the waiter", on_wait=on_wait, poll=0.05)
        assert child.stdout.readline().strip() == "released"
    try:
        assert len(messages) == 1
        pid, what = WAITING.fullmatch(messages[0]).groups()
        assert (int(pid), what) == (child.pid, "workbench claims run demo")
        assert hold.waited >= 0.4
        # The new holder names itself for the next waiter.
        named = slot.read_holder(slot.slot_path())
        assert (named.pid, named.what) == (os.getpid(), "the waiter")
    finally:
        hold.release()
    assert slot.read_holder(slot.slot_path()) is None   # released: nobody is named any more


@pytest.mark.usefixtures("slot_elsewhere")
def test_a_holder_killed_with_sigkill_frees_the_slot():
    with holder() as child:
        messages = []

        def on_wait(message):
            messages.append(message)
            os.kill(child.pid, signal.SIGKILL)

        with slot.acquire("after the kill", on_wait=on_wait) as hold:
            assert child.wait(timeout=5) == -signal.SIGKILL
            assert hold.waited > 0 and f"pid {child.pid} " in messages[0]
            assert slot.read_holder(slot.slot_path()).pid == os.getpid()


@pytest.mark.usefixtures("slot_elsewhere")
def test_a_stop_event_ends_the_wait_and_leaves_the_holder_alone():
    with holder() as child:
        stop = threading.Event()
        start = time.monotonic()
        with pytest.raises(ModelSlotStopped):
            slot.acquire("stopped", on_wait=lambda message: threading.Timer(0.3, stop.set).start(), stop=stop)
        assert time.monotonic() - start < 3
        assert slot.held_in_process() == 0
        assert slot.read_holder(slot.slot_path()).pid == child.pid


@pytest.mark.usefixtures("slot_elsewhere")
def test_holders_in_one_process_share_the_slot_until_the_last_releases(prober):
    never_wait = threading.Event()
    never_wait.set()   # a wait would raise ModelSlotStopped instead of deadlocking the test
    first = slot.acquire("first", stop=never_wait)
    second = slot.acquire("second", stop=never_wait)
    assert slot.held_in_process() == 2 and busy_elsewhere(prober)
    first.release()
    first.release()    # idempotent: still one holder
    assert slot.held_in_process() == 1 and busy_elsewhere(prober)
    second.release()
    assert slot.held_in_process() == 0 and not busy_elsewhere(prober)


@pytest.mark.usefixtures("slot_elsewhere")
def test_off_turns_the_coordination_off(monkeypatch):
    with holder():
        monkeypatch.setenv(slot.SLOT_ENV, "off")
        never_wait = threading.Event()
        never_wait.set()
        with slot.acquire("uncoordinated", stop=never_wait) as hold:
            assert hold.waited == 0 and slot.held_in_process() == 0


def test_an_unusable_lock_file_is_a_model_error_naming_it(monkeypatch, tmp_path):
    from workbench.models.base import ModelError

    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(slot.SLOT_ENV, str(tmp_path / "a-file" / "model.lock"))
    with pytest.raises(ModelError, match=r"a-file/model.lock: cannot open the model slot .*WORKBENCH_MODEL_SLOT"):
        slot.acquire("x")


@pytest.mark.usefixtures("slot_elsewhere")
def test_the_progress_bar_shows_the_wait_then_the_bar_at_the_rate_after_it():
    out = io.StringIO()
    bar = ProgressBar("claims", stream=out)
    bar.start -= 300          # five minutes spent waiting for the model …
    bar.waiting("waiting for the model: pid 42 (`workbench dedup run d`) has used the cores since 10:00:00")
    with slot.acquire("bar"):   # … which is taken now
        time.sleep(0.2)
        bar(1, 2)
    first, second = out.getvalue().splitlines()
    assert first == "claims: waiting for the model: pid 42 (`workbench dedup run d`) has used the cores since 10:00:00"
    assert second.startswith("claims [") and " 1/2 " in second
    # The rate counts from the end of the wait: ~5/s, not 1 in 300 s (ETA 5 minutes).
    assert float(re.search(r"([\d.]+)/s", second).group(1)) > 1 and "ETA 0s" in second


# -- with the real model ---------------------------------------------------------------------------------


@pytest.mark.real_model
def test_loading_the_model_waits_for_another_process_and_says_so(prober):
    with holder("workbench dedup run kg") as child:
        messages = []

        def on_wait(message):
            messages.append(message)
            let_go(child)

        backend = LlamaCppBackend(default_model_path(), "sha", n_ctx=256, n_threads=2, on_wait=on_wait)
        assert child.stdout.readline().strip() == "released"
    try:
        assert WAITING.fullmatch(messages[0]).groups() == (str(child.pid), "workbench dedup run kg")
        # A second backend in the same process (the TUI, a test) shares the slot: no wait.
        never_wait = threading.Event()
        never_wait.set()
        second = LlamaCppBackend(default_model_path(), "sha", n_ctx=256, n_threads=2, stop=never_wait)
        second.close()
        assert slot.held_in_process() == 1 and busy_elsewhere(prober)
    finally:
        backend.close()
    assert slot.held_in_process() == 0 and not busy_elsewhere(prober)


@pytest.mark.real_model
def test_a_pass_model_loads_on_its_first_call_after_the_wait(store):
    with holder("workbench searchain run s") as child:
        llm = default_llm(store, n_ctx=256)
        messages = []
        llm.on_wait = lambda message: (messages.append(message), let_go(child))
        call = llm.ask([{"role": "user", "content": "Say yes."}], max_tokens=2)
        llm.close()
    assert not call.cached and f"pid {child.pid} (`workbench searchain run s`)" in messages[0]
    assert slot.held_in_process() == 0


@pytest.fixture(scope="module")
def two_job_template(tmp_path_factory) -> Path:
    """MetaQA with a planned run, ``small``, of two short generations for the default model (built once)."""
    db = tmp_path_factory.mktemp("slot-runs") / "small.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",), limit=2), name="small",
               generation=GenerationConfig(max_tokens=4).as_dict())
    store.close()
    return db


@pytest.fixture
def two_job_db(tmp_path, two_job_template) -> Path:
    """A private copy of ``two_job_template``."""
    return copy_db(two_job_template, tmp_path / "small.db")


def _stderr_lines(proc) -> queue.Queue:
    """The process's stderr, a line at a time, then ``None`` when it closes (the process ended)."""
    lines: queue.Queue = queue.Queue()

    def read():
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _until(lines: queue.Queue, pattern: str, timeout: float = 120) -> str:
    """The first stderr line with ``pattern``; a process that ends without one fails the test at once, with what
    it said (a usage error once cost a 120 s wait here)."""
    deadline, seen = time.monotonic() + timeout, []
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        if line is None:
            pytest.fail(f"the process ended without {pattern!r}: {''.join(seen)[-2000:]}")
        if pattern in line:
            return line
        seen.append(line)


def _cli(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "workbench.cli", "--db", str(db), *args]


@pytest.mark.real_model
def test_workbench_resume_waits_for_the_model_then_runs(two_job_db):
    with holder("workbench tui") as child:
        proc = subprocess.Popen(_cli(two_job_db, "resume", "small"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        lines = _stderr_lines(proc)
        line = _until(lines, "waiting for the model")
        assert line.strip().startswith(f"run: waiting for the model: pid {child.pid} (`workbench tui`)")
        let_go(child)
        assert proc.wait(timeout=600) == 0
    con = sqlite3.connect(two_job_db)
    assert con.execute("SELECT status, count(*) FROM events GROUP BY status").fetchall() == [("done", 2)]


@pytest.fixture
def one_recipe_db(tmp_path) -> Path:
    """A Markdown corpus ``hc`` of one short recipe: the model's question job is a few tokens of prompt."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "番茄炒蛋.md").write_text("# 番茄炒蛋\n\n鸡蛋打散，番茄切块。先炒蛋，再炒番茄，加盐。\n", encoding="utf-8")
    db = tmp_path / "hc.db"
    store = open_store(db)
    import_corpus(store, recipes, "hc")
    store.close()
    return db


@pytest.mark.real_model
def test_llm_question_generation_says_whom_it_waits_for(one_recipe_db):
    # Once silent: `questions generate --strategy llm` waited for the model without a word.
    with holder("workbench dedup run kg") as child:
        proc = subprocess.Popen(_cli(one_recipe_db, "questions", "generate", "hc", "--strategy", "llm", "--limit",
                                     "1", "--n", "1", "--max-tokens", "16"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = _stderr_lines(proc)
        line = _until(lines, "waiting for the model")
        assert WAITING.search(line).groups() == (str(child.pid), "workbench dedup run kg")
        let_go(child)
        assert proc.wait(timeout=600) == 0
    assert proc.stdout.read().endswith("llm questions added\n")


@pytest.mark.usefixtures("slot_elsewhere")
def test_ctrl_c_while_waiting_for_the_model_stops_with_nothing_failed(two_job_db):
    with holder():
        proc = subprocess.Popen(_cli(two_job_db, "resume", "small"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        lines = _stderr_lines(proc)
        _until(lines, "waiting for the model")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert "stopped while waiting for the model" in _until(lines, "stopped while waiting")
    con = sqlite3.connect(two_job_db)
    assert con.execute("SELECT status, count(*) FROM events GROUP BY status").fetchall() == [("pending", 2)]


@pytest.mark.usefixtures("slot_elsewhere")
async def test_the_runs_screen_says_whom_a_run_waits_for_and_p_ends_the_wait(two_job_db):
    app = WorkbenchApp(two_job_db)
    with holder("workbench claims run demo") as child:
        async with app.run_test(size=SIZE) as pilot:
            await open_runs(pilot)
            await pilot.press("u")
            status = app.screen.query_one("#status")
            await wait_for(pilot, lambda: "waiting for the model" in str(status.render()), what="the wait shown")
            assert WAITING.search(str(status.render())).groups() == (str(child.pid), "workbench claims run demo")
            assert str(status.render()).startswith("small: waiting for the model: pid")
            await pilot.press("p")
            await wait_for(pilot, lambda: "small paused" in str(status.render()), what="the run paused")
            assert "small" not in app.executions
    con = sqlite3.connect(two_job_db)
    assert con.execute("SELECT status, count(*) FROM events GROUP BY status").fetchall() == [("pending", 2)]
