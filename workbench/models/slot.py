"""The machine-wide model slot: one process at a time runs the local model.

llama.cpp gives a model every core it may use (``n_threads = usable_cores()``). Two processes doing
so on one machine do not share the cores, they thrash: a 3-sample SearChain pass took
37 s alone and 470 s beside a dedup pass in another process. So a process that loads a
llama.cpp model first takes this slot, and a second one waits, says once whom it waits
for, and starts when the first closes its model.

The slot is a lock file (``flock``), not a row in the database: the processes that
compete for the cores may each use a different database (a demo database in the TUI, a
scratch one on the command line), and what they share is the machine. A lock file in the
user's temporary directory is per machine and per user, and the kernel releases a
``flock`` when its holder exits for any reason, ``kill -9`` included, so no stale lease
ever needs recovering. The holder writes its pid, what it runs and since when into the
lock file, for the waiter's message.

``WORKBENCH_MODEL_SLOT`` overrides the place (a path), or ``off`` disables the slot (each
process then takes every core as before; for a machine with cores to spare, and for the
benchmark that measures the thrash).

Within one process, model holders share the slot (a reference count): the TUI running two
things, or a test opening two backends, never waits on itself.

The time a pass spends waiting here is not its work: a pass counts its waits in a
:class:`WaitTally` (:func:`counting_waits`), and its rate and ETA leave them out.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator

from workbench.dbfiles import DatabaseFileRefused, guarded_open, held_file_of, read_regular
from workbench.errors import BadInput
from workbench.models.base import ModelError
from workbench.paths import user_path
from workbench.store.lease import program_name

SLOT_ENV = "WORKBENCH_MODEL_SLOT"
POLL_SECONDS = 0.25
# The holder writes its line right after taking the lock; a waiter that finds none yet
# gives it this long before saying it waits for an unnamed process.
_NAME_GRACE_SECONDS = 1.0
# The holder's JSON line (pid, a command line cut to 80 characters, a time) fits well within this.
_LINE_LIMIT = 4096


class ModelSlotStopped(BaseException):
    """The wait for the model slot was ended by a stop request (Ctrl-C, a pause).

    A ``BaseException``, as ``KeyboardInterrupt`` is: it is a cancellation, not a failure,
    and must pass through a pass's per-item ``except Exception`` (which would record it on
    an item as an error) up to whoever asked to stop.
    """


@dataclass(frozen=True)
class Holder:
    """Who holds the slot, as written into the lock file."""

    pid: int
    what: str
    since: float    # epoch seconds

    def describe(self) -> str:
        clock = datetime.fromtimestamp(self.since).strftime("%H:%M:%S")
        return f"pid {self.pid} (`{self.what}`) has used the cores since {clock}"


def slot_path() -> Path | None:
    """The lock file of this machine and user, ``WORKBENCH_MODEL_SLOT`` if set, or None when it is ``off``."""
    value = os.environ.get(SLOT_ENV, "").strip()
    if value.lower() == "off":
        return None
    if value:
        return user_path(value, SLOT_ENV)
    return Path(tempfile.gettempdir()) / f"dissipation-workbench-{os.getuid()}" / "model.lock"


def command_line() -> str:
    """This process's command line, short: what a waiter is told the holder runs."""
    argv = [program_name(sys.argv[0]), *sys.argv[1:]] if sys.argv else ["python"]
    text = " ".join(argv)
    return text if len(text) <= 80 else text[:79] + "…"


def read_holder(path: Path) -> Holder | None:
    """The holder named in the lock file at ``path``, or None (no line, or its process is gone)."""
    try:
        # The holder's line is short: a lock file grown past that is not one the workbench wrote.
        data = json.loads(read_regular(path, _LINE_LIMIT).decode("utf-8") or "null")
        holder = Holder(int(data["pid"]), str(data["what"]), float(data["since"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return holder if _alive(holder.pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _ProcessSlot:
    """This process's share of the slot: one open lock file, held while the count is above 0."""

    def __init__(self):
        self.guard = threading.Lock()
        self.count = 0
        self.fd: int | None = None
        self.taken_at: float | None = None     # time.monotonic() when this process took the lock

    def try_take(self, path: Path, what: str) -> bool:
        """Join the process's hold, or take the file lock without blocking; False if another process has it."""
        with self.guard:
            if self.count:
                self.count += 1
                return True
            fd = _open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            except OSError as exc:
                os.close(fd)
                raise ModelError(f"{path}: cannot lock the model slot ({exc.strerror}); "
                                 f"set {SLOT_ENV} to another file, or to off") from exc
            line = json.dumps({"pid": os.getpid(), "what": what[:200], "since": time.time()}).encode("utf-8")
            os.ftruncate(fd, 0)
            os.pwrite(fd, line, 0)
            self.fd, self.count, self.taken_at = fd, 1, time.monotonic()
            return True

    def release(self) -> None:
        with self.guard:
            if not self.count:
                return
            self.count -= 1
            if self.count == 0 and self.fd is not None:
                # Clear the line first: a waiter must not name a holder that has left.
                os.ftruncate(self.fd, 0)
                fcntl.flock(self.fd, fcntl.LOCK_UN)
                os.close(self.fd)
                self.fd = None


def _open(path: Path) -> int:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Through the one guarded open: a slot path that names the database (or a link to it) is refused,
        # not truncated, and a FIFO put there is not waited on.
        fd, _ = guarded_open(path, os.O_RDWR | os.O_CREAT, 0o600)
        return fd
    except DatabaseFileRefused as exc:
        raise BadInput(f"{SLOT_ENV}={path}: {str(exc).split(': ', 1)[1]}; set {SLOT_ENV} to another file, "
                       "or to off") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot open the model slot ({exc.strerror}); "
                         f"set {SLOT_ENV} to a writable file, or to off") from exc


_PROCESS = _ProcessSlot()


def check_slot() -> None:
    """Refuse, before a verb writes anything, a model slot that cannot be used: ``WORKBENCH_MODEL_SLOT``
    naming a database's file (:class:`~workbench.errors.BadInput`), or a place where no lock file can be
    made (:class:`ModelError`). The file is opened and closed through the guard; nothing is locked."""
    path = slot_path()
    if path is None or _PROCESS.count:
        return
    if os.path.lexists(path):
        os.close(_open(path))
        return
    # Not there yet: it is made when a model first loads (a check leaves no file behind); a name that is a
    # database's file is refused all the same (its -wal may come and go).
    held = held_file_of(path)
    if held is not None:
        raise BadInput(f"{SLOT_ENV}={path}: is {held}; set {SLOT_ENV} to another file, or to off")


class SlotHold:
    """A share of the slot; ``release()`` (idempotent) gives it back. Also a context manager."""

    def __init__(self, held: bool, waited: float = 0.0):
        self._held = held
        self.waited = waited    # seconds spent waiting for another process

    def release(self) -> None:
        if self._held:
            self._held = False
            _PROCESS.release()

    def __enter__(self) -> "SlotHold":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def held_in_process() -> int:
    """How many holders in this process share the slot now (0: not held here)."""
    return _PROCESS.count


def taken_at() -> float | None:
    """When (``time.monotonic()``) this process last took the slot: the end of any wait for it."""
    return _PROCESS.taken_at


def acquire(what: str | None = None, *, on_wait: Callable[[str], None] | None = None,
            stop: threading.Event | None = None, poll: float = POLL_SECONDS) -> SlotHold:
    """Take the model slot, waiting while another process holds it.

    ``what`` describes this process's work to waiters (default: its command line).
    ``on_wait(message)`` is called once if the slot is busy, e.g. "waiting for the model:
    pid 4242 (`workbench claims run demo`) has used the cores since 14:03:11". The wait
    polls every ``poll`` seconds, so ``stop`` being set ends it with
    :class:`ModelSlotStopped`, and Ctrl-C (``KeyboardInterrupt``) lands within one poll.
    Raises :class:`ModelError` if the lock file cannot be opened.
    """
    path = slot_path()
    if path is None:
        return SlotHold(False)
    what = what or command_line()
    start = time.monotonic()
    if _PROCESS.try_take(path, what):
        return SlotHold(True)
    tally = _TALLY.get()
    if tally is not None:
        tally.begin()
    try:
        told = False
        while True:
            if stop is not None and stop.is_set():
                raise ModelSlotStopped(f"stopped while waiting for the model slot {path}")
            if not told and on_wait is not None:
                holder = read_holder(path)
                if holder is not None or time.monotonic() - start >= _NAME_GRACE_SECONDS:
                    on_wait("waiting for the model: " + (holder.describe() if holder is not None
                                                         else f"another process holds {path}"))
                    told = True
            if stop is not None:
                stop.wait(poll)
            else:
                time.sleep(poll)
            if _PROCESS.try_take(path, what):
                return SlotHold(True, time.monotonic() - start)
    finally:
        if tally is not None:
            tally.end()


class WaitTally:
    """The seconds one piece of work (a pass) has spent waiting for the slot, its threads' overlapping waits once.

    A wait in progress counts up to now: a pass whose other threads go on meanwhile shows the
    time its work was held up, not only the waits that ended.
    """

    def __init__(self):
        self._guard = threading.Lock()
        self._waiting = 0           # threads of the work waiting now
        self._since = 0.0           # time.monotonic() when the first of them began
        self._ended = 0.0           # the seconds of the waits that ended

    def begin(self) -> None:
        """A thread of the work starts waiting."""
        with self._guard:
            if self._waiting == 0:
                self._since = time.monotonic()
            self._waiting += 1

    def end(self) -> None:
        """A thread of the work stops waiting (it took the slot, or was stopped)."""
        with self._guard:
            self._waiting -= 1
            if self._waiting == 0:
                self._ended += time.monotonic() - self._since

    def seconds(self) -> float:
        """The seconds waited so far, a wait in progress included."""
        with self._guard:
            return self._ended + (time.monotonic() - self._since if self._waiting else 0.0)


# The tally of the work running in this context: a pass's thread, and the worker threads it starts with a copy of
# its context (workbench.passes.inflight). A context variable, not a process-wide count: the TUI may execute a run
# on a served model while another of its runs waits for the slot, and the first was not held up.
_TALLY: ContextVar[WaitTally | None] = ContextVar("workbench_model_slot_waits", default=None)


@contextmanager
def counting_waits() -> Iterator[WaitTally]:
    """Count in the tally yielded every wait for the slot made in this context until the block ends."""
    tally = WaitTally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)
