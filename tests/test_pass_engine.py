"""The pass engine: plan-or-find by one config hash, one refusal, and one driver for every resumable pass.

The driver is exercised with a test double for the work (a list of jobs, no model): what
is under test is the bookkeeping around the jobs (stop, fatal model errors, per-job errors,
retry, counters at every tick, timing), which does not depend on how a job is done. The
plans are the real ones (run, SearChain, dedup, claim run) on a real store, without a model.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import asdict

import pytest

from workbench.claims.runner import ClaimsConfig, claim_run_id
from workbench.kg.runner import DedupConfig, plan_dedup
from workbench.models.base import ModelError
from workbench.passes import (CallTally, Driver, PassReport, PassWork, config_diff, config_hash, done_line, drive,
                              error_lines, exit_code, fatal_note, job_statuses, plan_or_find, refuse_changed)
from workbench.pipelines.runner import SearChainConfig, plan_searchain
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store.lease import LeaseHeld, hold
from workbench.store.queries import get_run

from conftest import import_films_kg


def legacy_hash(config: dict, digits: int) -> str:
    """The hash as the four passes computed it before the engine (their stored names and keys)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:digits]


# -- one config hash; what older databases store is still found ------------------------------
def test_the_hash_is_the_sha256_of_the_sorted_json():
    config = {"b": (1, 2), "a": {"y": 1.5, "x": None}}
    assert config_hash(config) == hashlib.sha256(b'{"a": {"x": null, "y": 1.5}, "b": [1, 2]}').hexdigest()


def test_default_names_and_claim_keys_are_the_ones_older_versions_stored(tiny_store, tmp_path):
    sweep = SweepConfig(ks=(2, 1), budgets=(64,), formats=("score",))
    run = plan_sweep(tiny_store, sweep, dataset="tiny")
    planned = SweepConfig(ks=(1, 2), budgets=(64,), formats=("score",), retriever="bm25")   # as normalized
    assert run.run == f"tiny-{legacy_hash({**asdict(planned), 'generation': None}, 8)}"
    chain = SearChainConfig(limit=1)
    name, created = plan_searchain(tiny_store, "tiny", chain)
    assert created and name == f"searchain-tiny-{legacy_hash(asdict(chain), 10)}"
    kg = import_films_kg(tiny_store, tmp_path)
    dedup = DedupConfig(modes=("graph",))
    name, created, _ = plan_dedup(tiny_store, kg, dedup)
    assert created and name == f"dedup-films-{legacy_hash(asdict(dedup), 10)}"
    claims = ClaimsConfig(verifiers=("lexical",))
    assert claims.key() == legacy_hash(asdict(claims), 16)


def test_plans_made_before_are_found_by_the_same_command(tiny_store, tmp_path):
    sweep = SweepConfig(ks=(1,), budgets=(64,), formats=("score",))
    first = plan_sweep(tiny_store, sweep, dataset="tiny")
    again = plan_sweep(tiny_store, sweep, dataset="tiny")
    assert (first.created, again.created) == (True, False) and again.run == first.run
    assert (again.cells, again.events) == (first.cells, first.events)
    assert plan_searchain(tiny_store, "tiny", SearChainConfig(limit=1))[1] is True
    assert plan_searchain(tiny_store, "tiny", SearChainConfig(limit=1))[1] is False
    kg = import_films_kg(tiny_store, tmp_path)
    made, found = plan_dedup(tiny_store, kg, DedupConfig()), plan_dedup(tiny_store, kg, DedupConfig())
    assert (made[1], found[1]) == (True, False) and made[2] == found[2]
    # A claim run row as an older version wrote it (its 16-digit key) is the one found.
    run = get_run(tiny_store, first.run)
    config = ClaimsConfig(verifiers=("lexical",))
    with tiny_store.transaction() as conn:
        old_id = conn.execute("INSERT INTO claim_runs (run_id, config_key, config, created_at) VALUES (?, ?, ?, ?)",
                              (run.id, legacy_hash(asdict(config), 16), json.dumps(asdict(config)),
                               "2024-01-01T00:00:00Z")).lastrowid
    assert claim_run_id(tiny_store, run, config) == old_id


# -- one refusal, naming every difference ----------------------------------------------------
def test_a_name_reused_with_another_config_is_refused_with_its_differences(tiny_store, tmp_path):
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), name="r")
    with pytest.raises(ValueError) as refused:
        plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(128,), formats=("score",)), name="r")
    assert str(refused.value) == ("run 'r' exists with a different config; it is not mixed in. Choose another --name, "
                                  "or resume it with `workbench resume r`. Differences: budgets: [64] → [128]")
    plan_searchain(tiny_store, "tiny", SearChainConfig(limit=1), "chain")
    with pytest.raises(ValueError, match=r"^run 'chain' exists with a different config; .* `workbench searchain "
                                         r"resume chain`\. Differences: limit: 1 → 2$"):
        plan_searchain(tiny_store, "tiny", SearChainConfig(limit=2), "chain")
    kg = import_films_kg(tiny_store, tmp_path)
    plan_dedup(tiny_store, kg, DedupConfig(), "dd")
    modes = r'modes: \["graph", "graph\+text"\] → \["graph"\]$'
    with pytest.raises(ValueError, match=r"^dedup run 'dd' exists with a different config; .* `workbench dedup "
                                         r"resume dd`\. Differences: " + modes):
        plan_dedup(tiny_store, kg, DedupConfig(modes=("graph",)), "dd")


def test_the_diff_names_nested_keys_and_what_the_plan_runs_over():
    assert config_diff({"generation": {"max_tokens": 12}, "k": 1}, {"generation": {"max_tokens": 20}, "k": 1}) \
        == "generation.max_tokens: 12 → 20"
    with pytest.raises(ValueError, match=r'Differences: dataset: "a" → "b"$'):
        refuse_changed("run", "x", {"dataset": "a", "k": [1]}, {"dataset": "b", "k": (1,)}, resume="workbench resume x")
    refuse_changed("run", "x", {"k": [1]}, {"k": (1,)}, resume="-")  # tuples are stored as lists: the same


def test_a_plan_written_meanwhile_is_found_under_the_write_lock_not_written_again(store):
    looks = iter([None, ("theirs",)])
    written = []
    found, created = plan_or_find(store, lambda conn: next(looks), lambda conn, prepared: written.append(prepared),
                                  lambda: "prepared")
    assert (found, created, written) == (("theirs",), None, [])
    found, created = plan_or_find(store, lambda conn: None, lambda conn, prepared: f"wrote {prepared}",
                                  lambda: "mine")
    assert (found, created) == (None, "wrote mine")


# -- the driver --------------------------------------------------------------------------------
class FakeLLM:
    """Counts calls as a CachedLLM does (over its whole life)."""

    def __init__(self, calls: int = 0, hits: int = 0):
        self.model_calls, self.cache_hits = calls, hits


class ListWork(PassWork):
    """Jobs are strings; ``boom`` raises, ``dead`` is a model that cannot be used, others are done.

    ``width`` jobs are prepared at once; ``committed_on`` records the thread of every commit.
    """

    def __init__(self, jobs, llm=None, on_process=None, open_error=None, width=1):
        self.jobs, self.llm, self.on_process, self.open_error = list(jobs), llm, on_process, open_error
        self.loaded_with, self.done, self.failed, self.closed, self.opened = None, [], {}, False, False
        self._width, self.committed_on = width, set()

    def load(self, statuses):
        self.loaded_with = statuses
        return self.jobs

    def setup(self):
        if self.open_error:
            raise self.open_error
        self.opened = True

    def close(self):
        self.closed = True

    def width(self):
        return self._width

    def prepare(self, job):
        if self.on_process:
            self.on_process(job)
        if self.llm is not None:
            self.llm.model_calls += 1
            self.llm.cache_hits += 2
        if job.startswith("boom"):
            raise ValueError(f"bad {job}")
        if job == "dead":
            raise ModelError("model file not found")
        return job.upper()

    def commit(self, job, prepared):
        assert prepared == job.upper()
        self.committed_on.add(threading.current_thread().name)
        self.done.append(job)

    def fail(self, job, message):
        self.failed[job] = message

    def describe(self, job):
        return f"job {job}"


def _run(work, *, retry_errors=False, stop=None, ticks=None):
    report = PassReport(run="r")
    progress = None if ticks is None else (lambda done, total, r: ticks.append(
        (done, total, r.done, r.errors, r.model_calls, r.cache_hits, r.seconds)))
    Driver(work, report, stop or threading.Event(), progress).run(retry_errors)
    return report


def test_every_job_is_done_or_recorded_and_counted_at_every_tick():
    llm = FakeLLM(calls=7, hits=3)   # calls made before this pass are not its own
    ticks = []
    work = ListWork(["a", "boom1", "b"], llm=llm)
    report = _run(work, ticks=ticks)
    assert (report.jobs, report.done, report.errors) == (3, 2, 1)
    assert work.failed == {"boom1": "ValueError: bad boom1"}
    assert report.error_samples == ["job boom1: bad boom1"]
    assert [t[:6] for t in ticks] == [(1, 3, 1, 0, 1, 2), (2, 3, 1, 1, 2, 4), (3, 3, 2, 1, 3, 6)]
    assert all(t[6] > 0 for t in ticks) and report.seconds >= ticks[-1][6]
    assert (report.model_calls, report.cache_hits) == (3, 6) and work.closed and report.fatal is None


def test_error_samples_keep_the_first_five():
    report = _run(ListWork([f"boom{i}" for i in range(8)]))
    assert report.errors == 8 and report.error_samples == [f"job boom{i}: bad boom{i}" for i in range(5)]


def test_a_fatal_model_error_ends_the_pass_and_is_reported_once():
    ticks = []
    work = ListWork(["a", "dead", "b"])
    report = _run(work, ticks=ticks)
    assert report.fatal == "model file not found" and (report.done, report.errors) == (1, 1)
    assert work.failed == {"dead": "model error: model file not found"} and work.done == ["a"]
    assert report.error_samples == [] and ticks[-1][:4] == (2, 3, 1, 1)


def test_a_model_that_cannot_open_ends_the_pass_with_every_job_still_pending():
    ticks = []
    work = ListWork(["a", "b"], open_error=ModelError("no such gguf"))
    report = _run(work, ticks=ticks)
    assert report.fatal == "no such gguf" and (report.done, report.errors) == (0, 0) and ticks == []
    assert work.failed == {} and work.done == []
    assert work.closed and report.seconds == 0.0


def test_the_models_are_checked_once_jobs_are_selected_and_before_the_work_opens():
    calls = []
    work = ListWork(["a"])
    work.check_models = lambda: calls.append(("check", work.opened))
    _run(work)
    assert calls == [("check", False)] and work.done == ["a"]
    nothing = ListWork([])
    nothing.check_models = lambda: calls.append("checked with nothing to do")
    _run(nothing)
    assert calls == [("check", False)]      # nothing pending: no model is loaded


def test_stop_ends_the_pass_before_the_next_job():
    stop = threading.Event()
    work = ListWork(["a", "b", "c"], on_process=lambda job: stop.set() if job == "b" else None)
    report = _run(work, stop=stop)
    assert report.stopped and work.done == ["a", "b"] and (report.jobs, report.done) == (3, 2)


class Gate:
    """Holds the preparations of the first ``width`` jobs until all of them run at once: proof they are in flight
    together (a job done one after another would wait 10 s and fail)."""

    def __init__(self, width):
        self.width, self.seen = width, []
        self.barrier = threading.Barrier(width, timeout=10)
        self.threads = set()

    def __call__(self, job):
        self.threads.add(threading.current_thread().name)
        self.seen.append(job)
        if len(self.seen) <= self.width:
            self.barrier.wait()


def test_a_served_model_prepares_width_jobs_at_once_and_each_is_committed_on_the_calling_thread():
    gate = Gate(3)
    work = ListWork(["a", "b", "c", "boom", "late"], on_process=gate, width=3)
    report = _run(work)
    assert (report.jobs, report.done, report.errors) == (5, 4, 1)
    assert sorted(work.done) == ["a", "b", "c", "late"] and work.failed == {"boom": "ValueError: bad boom"}
    assert len(gate.threads) == 3 and threading.current_thread().name not in gate.threads
    assert work.committed_on == {threading.current_thread().name}


def test_after_a_fatal_model_error_no_job_starts_and_those_in_flight_are_still_committed():
    gate = Gate(2)

    def prepare(job):
        gate(job)
        if job == "a":
            time.sleep(0.3)   # still in flight when the model fails

    work = ListWork(["dead", "a", "late1", "late2"], on_process=prepare, width=2)
    report = _run(work)
    assert report.fatal == "model file not found" and work.done == ["a"]
    assert work.failed == {"dead": "model error: model file not found"}
    assert (report.jobs, report.done, report.errors) == (4, 1, 1)   # late1, late2 never started: still pending


def test_stop_with_jobs_in_flight_starts_no_more_and_commits_those_running():
    stop = threading.Event()
    gate = Gate(2)

    def prepare(job):
        gate(job)
        stop.set()

    work = ListWork(["a", "b", "late1", "late2"], on_process=prepare, width=2)
    report = _run(work, stop=stop)
    assert report.stopped and sorted(work.done) == ["a", "b"] and report.done == 2


def test_nothing_pending_is_nothing_done_and_retry_selects_failed_jobs_too():
    work = ListWork([])
    report = _run(work, retry_errors=True)
    assert work.loaded_with == ("pending", "error") == job_statuses(True) and report.jobs == 0
    assert job_statuses(False) == ("pending",) and not work.closed   # nothing was opened


def test_a_slot_wait_ended_by_the_user_propagates_and_the_work_is_closed():
    class Cancelled(BaseException):   # as ModelSlotStopped: not a job's failure
        pass

    def cancel(job):
        raise Cancelled

    work = ListWork(["a"], on_process=cancel)
    with pytest.raises(Cancelled):
        _run(work)
    assert work.closed and work.failed == {}


def test_drive_holds_the_lease_while_the_jobs_run(store):
    seen = []
    work = ListWork(["a"], on_process=lambda job: seen.append(
        store.conn.execute("SELECT resource FROM leases").fetchall()))
    assert drive(store, "run:x", work, PassReport(run="x")).done == 1
    assert seen == [[("run:x",)]] and store.conn.execute("SELECT count(*) FROM leases").fetchone()[0] == 0


def test_a_wait_for_the_lease_ended_by_stop_is_a_stopped_pass_with_nothing_done(store):
    stop = threading.Event()
    stop.set()
    with hold(store, "run:x", what="the other writer"):
        with pytest.raises(LeaseHeld):
            drive(store, "run:x", ListWork(["a"]), PassReport(run="x"))
        report = drive(store, "run:x", ListWork(["a"]), PassReport(run="x"), wait=True, stop=stop)
    assert report.stopped and (report.jobs, report.done) == (0, 0)


def test_the_call_tally_counts_this_passs_share():
    llm = FakeLLM(calls=5, hits=1)
    tally = CallTally(llm)
    llm.model_calls, llm.cache_hits = 8, 4
    assert (tally.update(PassReport(run="r")).model_calls, tally.update(PassReport(run="r")).cache_hits) == (3, 3)


# -- the closing summary ---------------------------------------------------------------------
def test_the_closing_summary_reads_as_the_command_line_prints_it():
    report = PassReport(run="demo", jobs=1200, done=1100, errors=2, model_calls=1001, cache_hits=99, seconds=1234.56,
                        stopped=True, error_samples=["q1 / k1: boom"])
    assert done_line(report, "claims demo", "answers", continues="workbench claims run demo") == (
        "claims demo: 1,100 of 1,200 answers done in 1,234.6s: 1,001 model calls, 99 from the cache, 2 errors"
        " (stopped early; `workbench claims run demo` continues)")
    assert done_line(report, "run demo", "jobs", calls="generated", continues="workbench resume").startswith(
        "run demo: 1,100 of 1,200 jobs done in 1,234.6s: 1,001 generated, 99 from the cache")
    assert error_lines(report) == ["  error: q1 / k1: boom"] and exit_code(report) == 130
    report.fatal = "model file not found"
    assert exit_code(report) == 1 and fatal_note(report, "workbench resume demo", what="The run") == (
        "error: model file not found\nThe run stays resumable: fix the model, then "
        "`workbench resume demo --retry-errors`.")
    assert exit_code(PassReport(run="demo")) == 0
