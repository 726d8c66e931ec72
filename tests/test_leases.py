"""One writer at a time: a lease per run, claims, SearChain or dedup pass.

The lease is a row in the real database naming its holder's pid, host and the pid's start
time. Holders here are real processes: a ``sleep`` child stands for a live holder, a child
killed with -9 for a dead one, and two ``workbench resume`` processes race for one run of
a served model (tests/genkit.py: a stand-in whose answers the test paces).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, copy_db, wait_for_rows
from genkit import ServedModel, Stderr
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from tuikit import SIZE, open_runs, plan_served_run, wait_for
from workbench.cli import main
from workbench.errors import EnvironmentFault
from workbench.kg.importer import import_kg
from workbench.store import open_store
from workbench.store.queries import delete_run, get_run
from workbench.store.lease import (HOST, LeaseHeld, LeaseRecovered, LeaseWaitStopped, current_holder, hold,
                                   process_start)

SINCE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def _cli(db, *args):
    return [sys.executable, "-m", "workbench.cli", "--db", str(db), *args]


@pytest.fixture
def sleeper():
    """A live process of this host to stand for a lease's holder."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


def _plant(store, resource: str, pid: int, started: int | None, *, host: str = HOST,
           command: str = "workbench resume demo") -> None:
    """The row a holder with this pid (started at ``started``) would have written."""
    with store.transaction() as conn:
        conn.execute("INSERT INTO leases (resource, pid, host, token, pid_started, started_at, command)"
                     " VALUES (?, ?, ?, 'their-token', ?, '2026-01-02T03:04:05Z', ?)",
                     (resource, pid, host, started, command))


def _started(proc) -> int:
    return process_start(proc.pid)[1]


def _holder_row(db: Path, resource: str):
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT pid, command FROM leases WHERE resource = ?", (resource,)).fetchone()
    finally:
        con.close()


# -- the lease itself -------------------------------------------------------------------------
def test_a_free_lease_is_taken_for_the_block_and_released_after_it(store):
    with hold(store, "run:demo", what="workbench resume demo") as mine:
        row = current_holder(store, "run:demo")
        assert (row.pid, row.host, row.command, row.token) == (os.getpid(), HOST, "workbench resume demo",
                                                               mine.token)
        assert re.fullmatch(SINCE, row.started_at)
    assert current_holder(store, "run:demo") is None
    with hold(store, "run:demo", what="again"):   # and it can be taken again
        pass


def test_a_live_holder_refuses_a_second_writer_saying_who_since_when_and_what_to_do(store, sleeper):
    _plant(store, "run:demo", sleeper.pid, _started(sleeper))
    with pytest.raises(LeaseHeld) as err:
        with hold(store, "run:demo", what="workbench resume demo"):
            pytest.fail("the block must not run while another process holds the lease")
    assert str(err.value) == (f"run demo is being written by pid {sleeper.pid} on {HOST} since "
                              "2026-01-02T03:04:05Z (`workbench resume demo`); use --wait or stop it")
    assert isinstance(err.value, EnvironmentFault)           # exit 1: the machine's state, not bad input
    assert current_holder(store, "run:demo").token == "their-token"   # untouched


def test_the_lease_of_a_holder_killed_with_9_is_recovered(store):
    victim = subprocess.Popen(["sleep", "120"])
    _plant(store, "run:demo", victim.pid, _started(victim))
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    notes = []
    with hold(store, "run:demo", what="workbench resume demo", on_wait=notes.append) as mine:
        assert current_holder(store, "run:demo").token == mine.token
    assert notes == [f"recovered the lease of pid {victim.pid}, which died: it was writing run demo since "
                     "2026-01-02T03:04:05Z (`workbench resume demo`)"]


def test_without_a_callback_a_recovered_lease_is_a_warning(store):
    victim = subprocess.Popen(["true"])
    victim.wait()
    _plant(store, "dedup:d", victim.pid, None)
    with pytest.warns(LeaseRecovered, match=f"recovered the lease of pid {victim.pid}, which died"):
        with hold(store, "dedup:d", what="x"):
            pass


def test_a_reused_pid_is_not_taken_for_the_holder(store, sleeper):
    # The pid runs, but it is a process started after the holder's (pid reuse): the holder died.
    _plant(store, "run:demo", sleeper.pid, _started(sleeper) - 1)
    notes = []
    with hold(store, "run:demo", what="me", on_wait=notes.append):
        assert current_holder(store, "run:demo").pid == os.getpid()
    assert notes and notes[0].startswith(f"recovered the lease of pid {sleeper.pid}, which died")


def test_release_deletes_only_the_holders_own_row(store):
    with hold(store, "searchain:s", what="me"):
        # Meanwhile another writer took the lease over (it judged this one dead): its row stays.
        store.conn.execute("UPDATE leases SET token = 'theirs' WHERE resource = 'searchain:s'")
    assert current_holder(store, "searchain:s").token == "theirs"


def test_another_thread_of_this_process_is_refused_too(tmp_path):
    db = tmp_path / "wb.db"
    first, second = open_store(db), open_store(db)
    held, done = threading.Event(), threading.Event()

    def holder():
        with hold(first, "claims:1", what="the TUI"):
            held.set()
            done.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    try:
        with pytest.raises(LeaseHeld, match=rf"^claim run 1 is being written by pid {os.getpid()} on "):
            with hold(second, "claims:1", what="a second thread"):
                pass
    finally:
        done.set()
        thread.join()
    with hold(second, "claims:1", what="a second thread"):
        pass
    first.close()
    second.close()


HOLD_A_WHILE = """
import sys, time
from workbench.store import open_store
from workbench.store.lease import hold

store = open_store(sys.argv[1])
with hold(store, "run:demo", what="workbench resume demo"):
    print("held", flush=True)
    time.sleep(0.6)
"""


def test_wait_polls_until_the_holder_releases_and_says_once_what_it_waits_for(tmp_path):
    db = tmp_path / "wb.db"
    store = open_store(db)
    child = subprocess.Popen([sys.executable, "-c", HOLD_A_WHILE, str(db)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    lines = []
    start = time.monotonic()
    with hold(store, "run:demo", what="me", wait=True, on_wait=lines.append) as mine:
        waited = time.monotonic() - start
        assert current_holder(store, "run:demo").token == mine.token
    assert child.wait(10) == 0
    assert 0.3 < waited < 10
    assert len(lines) == 1
    assert re.fullmatch(rf"waiting: run demo is being written by pid {child.pid} on {re.escape(HOST)} since {SINCE} "
                        r"\(`workbench resume demo`\)", lines[0])
    store.close()


def test_stop_while_waiting_gives_up_without_taking_the_lease(store, sleeper):
    _plant(store, "run:demo", sleeper.pid, _started(sleeper))
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(LeaseWaitStopped):
        with hold(store, "run:demo", what="me", wait=True, stop=stop):
            pytest.fail("stopped before the lease was free")
    assert current_holder(store, "run:demo").pid == sleeper.pid


def test_a_holder_on_another_host_counts_as_live_and_the_message_says_why(store):
    gone = subprocess.Popen(["true"])
    gone.wait()
    _plant(store, "run:demo", gone.pid, None, host="other-machine")
    with pytest.raises(LeaseHeld, match="other-machine is another machine, so whether that process still runs "
                                        "cannot be checked from here"):
        with hold(store, "run:demo", what="me"):
            pass


# -- every writer's single entry takes its lease ------------------------------------------------
@pytest.fixture
def answered(tiny_store, tmp_path):
    """``tiny`` with a run ``a`` whose 3 answers were imported (bring-your-own generator)."""
    from workbench.data.predictions import import_predictions
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.sweep import SweepConfig, plan_sweep
    from workbench.store.queries import get_run

    plan_sweep(tiny_store, SweepConfig(ks=(2,), budgets=(256,), formats=("score",)), name="a",
               generation=GenerationConfig().as_dict())
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"sample_id": s, "cell_id": "k2-b256-score", "prediction": "William Dieterle"})
                             + "\n" for s in ("q1", "q2", "q3")))
    import_predictions(tiny_store, get_run(tiny_store, "a"), preds)
    return tiny_store


def test_a_claims_pass_refuses_while_another_process_runs_that_claim_run(answered, sleeper):
    from workbench.claims.runner import ClaimsConfig, claim_run_id, run_claims
    from workbench.store.queries import get_run

    run = get_run(answered, "a")
    config = ClaimsConfig(decomposer="rule", verifiers=("lexical",))
    crid = claim_run_id(answered, run, config)
    _plant(answered, f"claims:{crid}", sleeper.pid, _started(sleeper), command="workbench claims run a")
    with pytest.raises(LeaseHeld, match=rf"^claim run {crid} is being written by pid {sleeper.pid} "):
        run_claims(answered, run, config)
    assert answered.count("claim_jobs") == 0          # not even planned: the holder does that
    os.kill(sleeper.pid, signal.SIGKILL)
    sleeper.wait()
    notes = []
    report = run_claims(answered, run, config, on_wait=notes.append)
    assert (report.jobs, report.done) == (3, 3)
    assert notes[0].startswith(f"recovered the lease of pid {sleeper.pid}, which died")


def test_searchain_and_dedup_passes_refuse_through_the_cli_with_exit_1(tmp_path, metaqa_template, sleeper, capsys):
    from workbench.kg.runner import DedupConfig, plan_dedup
    from workbench.pipelines.runner import SearChainConfig, plan_searchain

    db = copy_db(metaqa_template, tmp_path / "wb.db")     # MetaQA imported as ``metaqa``
    store = open_store(db)
    chain, _ = plan_searchain(store, "metaqa", SearChainConfig(limit=1), "chain")
    import_kg(store, REPO / "sample_data" / "dedup", "kg")
    dedup, _, _ = plan_dedup(store, "kg", DedupConfig(modes=("graph",)), "dd")
    _plant(store, "searchain:chain", sleeper.pid, _started(sleeper), command="workbench searchain resume chain")
    _plant(store, "dedup:dd", sleeper.pid, _started(sleeper), command="workbench dedup resume dd")
    store.close()
    for argv, subject in ((["searchain", "resume", "chain"], "SearChain run chain"),
                          (["dedup", "resume", "dd"], "dedup run dd")):
        assert main(["--db", str(db), *argv]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {subject} is being written by pid {sleeper.pid} on {HOST} since ")
        assert err.rstrip().endswith("; use --wait or stop it")
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM pipeline_samples WHERE status != 'pending'").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM dedup_verdicts WHERE status != 'pending'").fetchone()[0] == 0
    con.close()


@pytest.mark.parametrize("argv", [["run", "--k", "1", "--budget", "64"], ["resume"], ["claims", "run"],
                                  ["searchain", "run"], ["searchain", "resume"], ["dedup", "run"],
                                  ["dedup", "resume"]])
def test_every_verb_that_writes_a_run_takes_wait(argv, request):
    # The module's one parser tree (oneparser.py: checked unchanged at the module's end), not one built per verb.
    assert request.getfixturevalue("one_parser").parse_args([*argv, "--wait"]).wait is True


# -- two real processes on one run of a served model ---------------------------------------------
# The model is a served stand-in (tests/genkit.py) whose answers go when the test says: the first writer is
# still writing when the second arrives, however fast or loaded the machine is.
def _generations(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM generations").fetchone()[0]
    finally:
        con.close()


@pytest.fixture
def served():
    with ServedModel(paced=True) as model:
        yield model


@pytest.fixture
def served_live(tmp_path, metaqa_template, served) -> Path:
    """MetaQA with one planned one-cell run, ``live``, of 6 questions for the ``served`` model."""
    db = copy_db(metaqa_template, tmp_path / "live.db")
    plan_served_run(db, "live", served)
    return db


def test_two_resumes_at_once_one_writes_the_other_refuses_and_nothing_is_generated_twice(served_live, served):
    procs = [subprocess.Popen(_cli(served_live, "resume", "live", "--json"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    deadline = time.monotonic() + 120
    while all(p.poll() is None for p in procs):     # the writer waits for its first answer: the other ends first
        assert time.monotonic() < deadline, "neither resume ended"
        time.sleep(0.05)
    served.release()
    outs = [p.communicate(timeout=300) for p in procs]
    assert sorted(p.returncode for p in procs) == [0, 1], outs
    winner, loser = (0, 1) if procs[0].returncode == 0 else (1, 0)
    out, err = outs[loser]
    assert out == ""
    assert re.fullmatch(rf"error: run live is being written by pid {procs[winner].pid} on {re.escape(HOST)} since "
                        rf"{SINCE} \(`workbench resume live --json`\); use --wait or stop it\n", err), err
    result = json.loads(outs[winner][0])
    assert result["run"]["done"] == 6 and result["run"]["pending"] == 0
    # Every model call made (the loser made none) is a distinct generation: no duplicated work.
    assert result["execution"]["model_calls"] == result["run"]["model_calls"] == _generations(served_live) > 0
    assert _holder_row(served_live, "run:live") is None


def test_with_wait_the_second_resume_waits_for_the_first_then_has_nothing_to_do(served_live, served):
    procs = [subprocess.Popen(_cli(served_live, "resume", "live", "--wait"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    stderrs = [Stderr(p) for p in procs]
    deadline = time.monotonic() + 120
    while not any("waiting:" in line for s in stderrs for line in s.lines):   # the writer waits for its answers
        assert time.monotonic() < deadline, [s.lines for s in stderrs]
        time.sleep(0.05)
    served.release()
    for p in procs:
        p.wait(timeout=300)
    errs = [s.text() for s in stderrs]
    assert [p.returncode for p in procs] == [0, 0], errs
    waiter = 0 if "waiting:" in errs[0] else 1
    writer = 1 - waiter
    assert re.search(rf"^waiting: run live is being written by pid {procs[writer].pid} on {re.escape(HOST)} "
                     rf"since {SINCE} \(`workbench resume live --wait`\)$", errs[waiter], re.M), errs[waiter]
    assert "waiting:" not in errs[writer]
    assert "run live: nothing to do (6 jobs done)" in errs[waiter]
    generated = re.search(r"run live: 6 of 6 jobs done in [\d.]+s: (\d+) generated", errs[writer])
    assert generated and int(generated.group(1)) == _generations(served_live) > 0, errs[writer]


def test_a_run_whose_writer_was_killed_with_9_resumes_and_recovers_its_lease(served_live, served, capsys):
    proc = subprocess.Popen(_cli(served_live, "resume", "live"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    served.allow(1)                     # one answer; the jobs in flight after it wait for the kill
    wait_for_rows(served_live, "SELECT count(*) FROM events WHERE status = 'done'", 1, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    served.release()
    assert _holder_row(served_live, "run:live") == (proc.pid, "workbench resume live")   # left behind
    before = _generations(served_live)
    # The resume runs in this process (the CLI's main, as `workbench resume` runs it): another process than the
    # killed writer, which is what recovering its lease needs.
    capsys.readouterr()
    code = main(["--db", str(served_live), "resume", "live", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"recovered the lease of pid {proc.pid}, which died: it was writing run live since " in err
    result = json.loads(out)
    assert result["run"]["done"] == 6
    assert before + result["execution"]["model_calls"] == _generations(served_live)
    assert _holder_row(served_live, "run:live") is None


# -- the same name planned twice at once ---------------------------------------------------------
def _race(monkeypatch, module, name: str, plan_one):
    """Run ``plan_one(store)`` in two threads (two connections) whose first look both find the name free.

    ``name`` is a function of ``module`` called after that look and before the write: both
    threads meet there, so each believes it plans the run, as two processes started at once do.
    """
    real = getattr(module, name)
    barrier = threading.Barrier(2, timeout=30)

    def meet(*args, **kwargs):
        barrier.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, meet)
    results, errors = [], []

    def one(db):
        store = open_store(db)
        try:
            results.append(plan_one(store))
        except Exception as exc:
            errors.append(exc)
        finally:
            store.close()

    return one, results, errors


def _both(one, db):
    threads = [threading.Thread(target=one, args=(db,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


def test_the_same_sweep_planned_twice_at_once_is_planned_once_and_found_once(tiny_store, monkeypatch):
    import workbench.runs.sweep as sweep
    from workbench.runs.sweep import SweepConfig, plan_sweep

    db = tiny_store.path
    one, results, errors = _race(monkeypatch, sweep, "load_units", lambda s: plan_sweep(
        s, SweepConfig(ks=(1, 2), budgets=(64,), formats=("linear",)), dataset="tiny", name="same"))
    _both(one, db)
    assert errors == []
    assert sorted(r.created for r in results) == [False, True]
    assert {(r.cells, r.events) for r in results} == {(2, 6)}
    assert tiny_store.conn.execute("SELECT count(*) FROM events e JOIN runs r ON r.id = e.run_id"
                                   " WHERE r.name = 'same'").fetchone()[0] == 6


def test_a_different_sweep_under_the_same_name_at_once_is_refused_with_the_difference(tiny_store, monkeypatch):
    import workbench.runs.sweep as sweep
    from workbench.runs.sweep import SweepConfig, plan_sweep

    budgets = iter([(64,), (128,)])
    one, results, errors = _race(monkeypatch, sweep, "load_units", lambda s: plan_sweep(
        s, SweepConfig(ks=(1,), budgets=next(budgets), formats=("linear",)), dataset="tiny", name="same"))
    _both(one, tiny_store.path)
    assert len(results) == 1 and len(errors) == 1
    assert isinstance(errors[0], ValueError)        # exit 2 in the CLI
    assert "run 'same' exists with a different config" in str(errors[0]) and "budgets" in str(errors[0])


def test_searchain_and_dedup_runs_planned_twice_at_once_are_planned_once(tmp_path, metaqa_template, monkeypatch):
    import workbench.kg.runner as kg_runner
    import workbench.pipelines.runner as chain_runner
    from workbench.kg.runner import DedupConfig, plan_dedup
    from workbench.pipelines.runner import SearChainConfig, plan_searchain

    db = copy_db(metaqa_template, tmp_path / "wb.db")     # MetaQA imported as ``metaqa``
    store = open_store(db)
    import_kg(store, REPO / "sample_data" / "dedup", "kg")
    one, results, errors = _race(monkeypatch, chain_runner, "load_samples", lambda s: plan_searchain(
        s, "metaqa", SearChainConfig(limit=2), "chain"))
    _both(one, db)
    assert errors == [] and sorted(created for _, created in results) == [False, True]
    one, results, errors = _race(monkeypatch, kg_runner, "generate_candidates", lambda s: plan_dedup(
        s, "kg", DedupConfig(modes=("graph",)), "dd"))
    _both(one, db)
    assert errors == [] and sorted(created for _, created, _ in results) == [False, True]
    assert results[0][2] == results[1][2]           # the same candidate stats either way
    assert store.count("pipeline_samples") == 2
    store.close()


def test_a_claim_run_created_twice_at_once_is_created_once(answered, monkeypatch):
    from workbench.claims.runner import ClaimsConfig, claim_run_id
    from workbench.store.queries import get_run

    barrier = threading.Barrier(2, timeout=30)
    ids, errors = [], []

    def one():
        store = open_store(answered.path)
        real = store.transaction

        def meet():
            barrier.wait()            # both looked, found nothing, and now write
            return real()

        store.transaction = meet
        try:
            ids.append(claim_run_id(store, get_run(store, "a"), ClaimsConfig(verifiers=("lexical",))))
        except Exception as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and len(set(ids)) == 1 and answered.count("claim_runs") == 1


# -- the TUI says who is writing a run instead of starting it ------------------------------------
async def test_resuming_a_run_another_process_writes_says_so_in_the_runs_screen(live_db, sleeper):
    from workbench.tui.app import WorkbenchApp

    store = open_store(live_db)
    _plant(store, "run:live", sleeper.pid, _started(sleeper), command="workbench resume live")
    store.close()
    app = WorkbenchApp(live_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_runs(pilot)
        # The table already shows who writes it: u says so and starts nothing (no bar, no execution here).
        assert str(app.screen.query_one("#runs").get_cell("live", "state")) == f"pid {sleeper.pid}"
        await pilot.press("u")
        expected = f"Nothing to resume: run live is executing in another process (pid {sleeper.pid}): it goes on there"
        await wait_for(pilot, lambda: any(expected in n.message for n in app._notifications), what="the refusal")
        assert not app.screen.query_one("#progress").display and "live" not in app.executions
    con = sqlite3.connect(live_db)
    assert con.execute("SELECT count(*) FROM events WHERE status != 'pending'").fetchone()[0] == 0
    con.close()


def test_a_run_another_process_writes_is_not_deleted_under_it(live_db, sleeper):
    store = open_store(live_db)
    _plant(store, "run:live", sleeper.pid, _started(sleeper), command="workbench resume live")
    events = store.count("events")
    with pytest.raises(LeaseHeld, match="run live is being written by pid"):
        delete_run(store, "live")
    assert store.count("events") == events and get_run(store, "live").name == "live"
    store.conn.execute("DELETE FROM leases")            # the writer has finished
    assert delete_run(store, "live")["events"] == events
    store.close()
