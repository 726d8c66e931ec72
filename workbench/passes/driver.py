"""The driver of a resumable pass: runs, claims, SearChain and dedup go through this one loop.

A pass (a :class:`PassWork`) says which jobs are pending and how one job is done; each job
is committed by the pass in its own transaction, with everything it produced, so a kill -9
loses at most the job in progress and a resume selects exactly the jobs not committed.
A pass whose model is served prepares up to ``width`` jobs at once on worker threads
(:mod:`workbench.passes.inflight`) and still commits each whole on the calling thread.
The driver owns the rest:

- one writer: the jobs are selected and processed under the run's lease;
- retry: ``retry_errors`` selects the failed jobs with the pending ones;
- stop (Ctrl-C, the TUI's pause): no job starts once ``stop`` is set; the report says so;
- load before write: once the jobs are selected, and before any is touched, each model they
  will use is loaded once (or its server asked) by :meth:`PassWork.check_models`; one that
  cannot serve raises out of the pass in one line (nothing written, every job still pending);
- a model that cannot be used (:class:`ModelError`) later: when it fails to open, no job is
  touched (they stay pending) and ``report.fatal`` says why; when it fails on a job, that job
  records it and the pass ends;
- any other failure of one job: recorded on that job, its first few in
  ``report.error_samples``, and the pass goes on;
- the counters (done, errors, model calls, cache hits) and the time worked, true at every
  progress tick, and the report's closing numbers. The time worked leaves out the waits for
  the machine-wide model slot (another process using the model): every rate and ETA shown
  is computed from it, and counting a wait in it made the rate near 0 and the ETA hours
  long for a pass that then ended in seconds.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from typing import Callable, Generic, Sequence, TypeVar

from workbench.models.base import ModelError
from workbench.models.slot import WaitTally, counting_waits
from workbench.passes.inflight import in_flight
from workbench.passes.report import CallTally, PassReport
from workbench.store.db import Store
from workbench.store.lease import LeaseWaitStopped, hold, this_command

MAX_ERROR_SAMPLES = 5

Job = TypeVar("Job")
Report = TypeVar("Report", bound=PassReport)
Progress = Callable[[int, int, PassReport], None]   # (jobs processed, jobs selected, the report so far)


def job_statuses(retry_errors: bool) -> tuple[str, ...]:
    """The statuses a pass selects: pending jobs, and failed ones too with ``retry_errors``."""
    return ("pending", "error") if retry_errors else ("pending",)


class PassWork(ABC, Generic[Job]):
    """What one pass does: select its jobs and do one; the :class:`Driver` does everything around that."""

    #: A ``CachedLLM`` whose calls the counters show (set by ``setup`` at the latest); None when
    #: the work counts its calls itself (``Driver.count_call``).
    llm = None

    @abstractmethod
    def load(self, statuses: tuple[str, ...]) -> Sequence[Job]:
        """The jobs with one of ``statuses``, in processing order (read under the lease)."""

    def check_models(self) -> None:
        """Load each model the selected jobs will use, once, or ask its server (nothing is written).

        One that cannot serve raises :class:`~workbench.errors.BadInput` (a bad file: exit 2)
        or :class:`~workbench.errors.EnvironmentFault` (a server that does not answer: exit 1),
        naming it. By default the work's ``llm`` checks itself (:meth:`CachedLLM.check`); a
        stand-in without a ``check`` needs none.
        """
        check = getattr(self.llm, "check", None)
        if check is not None:
            check()

    def setup(self) -> None:
        """Set up what processing needs (a model, indexes); a ``ModelError`` here ends the pass, no job touched."""

    def close(self) -> None:
        """Release what ``setup`` set up (called whenever ``setup`` was)."""

    def width(self) -> int:
        """How many jobs may be prepared at once: 1, or the requests in flight a served model takes."""
        return 1

    def prepare(self, job: Job) -> object:
        """Everything one job needs before its commit: reads and model calls, no write of the job's own.

        With a :meth:`width` above 1 this runs on a worker thread, beside other jobs' preparations;
        a model call is committed to the cache as it returns (a kill loses no answered call).
        """
        raise NotImplementedError(f"{type(self).__name__} schedules its own jobs (process_all)")

    def commit(self, job: Job, prepared: object) -> None:
        """Write one job, with everything :meth:`prepare` produced for it, in one transaction."""
        raise NotImplementedError(f"{type(self).__name__} schedules its own jobs (process_all)")

    @abstractmethod
    def fail(self, job: Job, message: str) -> None:
        """Record ``message`` on the job (status ``error``), in one transaction."""

    @abstractmethod
    def describe(self, job: Job) -> str:
        """The job as the error samples name it, e.g. ``q12 / k5-b128-linear``."""

    def process_all(self, jobs: Sequence[Job], driver: Driver) -> None:
        """Process ``jobs``; by default :meth:`width` at a time (:meth:`Driver.each`)."""
        driver.each(jobs)


class Driver(Generic[Job]):
    """The bookkeeping of one pass over its selected jobs (see the module docstring)."""

    def __init__(self, work: PassWork[Job], report: PassReport, stop: threading.Event,
                 progress: Progress | None = None):
        self.work, self.report, self.stop, self.progress = work, report, stop, progress
        self.tally = CallTally(None)
        self.start = time.perf_counter()
        self.waits = WaitTally()     # replaced by the one counting this pass's waits while it runs

    def run(self, retry_errors: bool) -> None:
        """Select the jobs, open the work, process them, and close the report's numbers."""
        work, report = self.work, self.report
        jobs = work.load(job_statuses(retry_errors))
        report.jobs = len(jobs)
        if not jobs:
            return
        work.check_models()   # before setup() and any write: a model that cannot serve leaves every job pending
        self.start = time.perf_counter()
        # The model loads in setup() (a run) or on its first call (the other passes): either may wait for the slot.
        with counting_waits() as self.waits:
            try:
                try:
                    work.setup()
                except ModelError as exc:   # loaded in the check, yet not now (memory, a file replaced meanwhile)
                    report.fatal = str(exc)
                    return
                self.tally = CallTally(work.llm)
                work.process_all(jobs, self)
            finally:
                self.tally.update(report)
                work.close()
            report.seconds = self.worked()

    def each(self, jobs: Sequence[Job]) -> None:
        """Prepare ``jobs`` (up to the work's width at once) and commit each, until done, stopped, or the model fails.

        Each job is committed whole on this thread as its preparation finishes. After a
        :class:`ModelError` no further job starts; the ones already in flight are still committed.
        """
        work, failed = self.work, []

        def halted() -> bool:
            return bool(failed) or self.stopping()

        for job, prepared in in_flight(jobs, work.prepare, work.width(), halted):
            if isinstance(prepared, ModelError):   # the model cannot be used: no later job would get further
                if not failed:
                    self.fatal(prepared)
                failed.append(job)
                self.fail(job, f"model error: {prepared}")
                continue
            try:
                if isinstance(prepared, Exception):
                    raise prepared
                work.commit(job, prepared)
            except Exception as exc:  # one job's failure is recorded on it; the pass goes on
                self.fail(job, f"{type(exc).__name__}: {exc}", shown=str(exc))
            else:
                self.done()

    # -- what a pass that schedules its own jobs (``PassWork.process_all``) reports through --------------
    def stopping(self) -> bool:
        """True once a stop was asked for (and the report says it stopped): start no further job."""
        if self.stop.is_set():
            self.report.stopped = True
            return True
        return False

    def done(self) -> None:
        """One job committed."""
        self.report.done += 1
        self.tick()

    def fail(self, job: Job, message: str, *, shown: str | None = None) -> None:
        """Record ``message`` on ``job``; ``shown`` (if given) goes to the error samples after the job's name.

        A fatal model error is shown once, as ``report.fatal``, not as a sample.
        """
        self.work.fail(job, message)
        self.report.errors += 1
        if shown is not None and len(self.report.error_samples) < MAX_ERROR_SAMPLES:
            self.report.error_samples.append(f"{self.work.describe(job)}: {shown}")
        self.tick()

    def fatal(self, exc: ModelError) -> None:
        """The model cannot be used: the pass ends (its jobs stay resumable with ``--retry-errors``)."""
        self.report.fatal = str(exc)

    def count_call(self, *, cached: bool) -> None:
        """One model call made (or served from the cache), for works that count their own calls."""
        if cached:
            self.report.cache_hits += 1
        else:
            self.report.model_calls += 1

    def worked(self) -> float:
        """The seconds since the jobs were selected, less those spent waiting for the model slot."""
        return max(time.perf_counter() - self.start - self.waits.seconds(), 0.0)

    def tick(self) -> None:
        """Bring the counters and the time worked up to date and tell the progress callback."""
        report = self.report
        self.tally.update(report)
        report.seconds = self.worked()
        if self.progress is not None:
            self.progress(report.done + report.errors, report.jobs, report)


def drive(store: Store, resource: str, work: PassWork, report: Report, *, retry_errors: bool = False,
          stop: threading.Event | None = None, progress: Progress | None = None, wait: bool = False,
          on_wait: Callable[[str], None] | None = None) -> Report:
    """Run ``work``'s pending jobs (and failed ones with ``retry_errors``) under the lease ``resource``.

    Another process holding the lease raises :class:`~workbench.store.lease.LeaseHeld`, or
    with ``wait`` is waited for (``on_wait`` hears why); ``stop`` set during that wait ends
    it with nothing done (``report.stopped``). Returns ``report``, filled in.
    """
    stop = stop or threading.Event()
    try:
        # The jobs are selected under the lease: a writer that waited sees what the other finished.
        with hold(store, resource, what=this_command(), wait=wait, on_wait=on_wait, stop=stop):
            Driver(work, report, stop, progress).run(retry_errors)
    except LeaseWaitStopped:
        report.stopped = True
    return report
