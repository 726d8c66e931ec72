"""One writer at a time: a lease per run (or claims, SearChain, dedup pass), kept in SQLite.

Two processes executing the same run would both select its pending jobs and generate each
of them twice. The lease makes the second one refuse (or wait) instead. It is a row of
``leases`` naming its holder's pid, host and the pid's start time; taking it is one
``BEGIN IMMEDIATE`` transaction, so two processes cannot both find it free. A holder
killed with -9 cannot delete its row: the next writer on the same host sees that the pid
is gone (or now belongs to a process started at another time) and takes the lease over.
A holder on another host cannot be checked from here and counts as live.
"""

from __future__ import annotations

import os
import secrets
import shlex
import socket
import sqlite3
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from workbench.dbfiles import read_regular
from workbench.errors import EnvironmentFault
from workbench.store.db import Store

POLL_SECONDS = 0.5
HOST = socket.gethostname()
_NOUNS = {"run": "run", "claims": "claim run", "searchain": "SearChain run", "dedup": "dedup run"}
_COLUMNS = "resource, pid, host, token, pid_started, started_at, command"


@dataclass(frozen=True)
class Holder:
    """A lease's row: who writes ``resource``, since when, running which command."""

    resource: str
    pid: int
    host: str
    token: str
    pid_started: int | None
    started_at: str
    command: str

    @property
    def subject(self) -> str:
        """``run demo`` for ``run:demo``: the resource as the user knows it."""
        kind, _, ident = self.resource.partition(":")
        return f"{_NOUNS.get(kind, kind)} {ident}"

    def describe(self) -> str:
        """``run R is being written by pid N on HOST since T (`command`)``."""
        return (f"{self.subject} is being written by pid {self.pid} on {self.host} since {self.started_at} "
                f"(`{self.command}`)")


class LeaseHeld(EnvironmentFault):
    """Another live process (or another thread of this one) holds the lease: nothing was done."""

    def __init__(self, holder: Holder):
        self.holder = holder
        message = f"{holder.describe()}; use --wait or stop it"
        if holder.host != HOST:
            message += (f" ({holder.host} is another machine, so whether that process still runs cannot be "
                        f"checked from here; if it is gone, delete its lease: "
                        f"DELETE FROM leases WHERE resource = '{holder.resource}')")
        super().__init__(message)


class LeaseWaitStopped(LeaseHeld):
    """``stop`` was set while waiting for the lease: the pass ends without having started."""


class LeaseRecovered(UserWarning):
    """A dead holder's lease was taken over (shown when no ``on_wait`` callback is given)."""


def process_start(pid: int) -> tuple[str, int] | None:
    """(state, starttime) of ``pid`` from ``/proc/PID/stat``; None without /proc or without such a process.

    starttime (clock ticks since boot) tells a pid's process from a later one reusing the pid.
    """
    try:
        stat = read_regular(f"/proc/{pid}/stat", 64 * 1024).decode("utf-8", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[19])


def _own_start() -> int | None:
    found = process_start(os.getpid())
    return found[1] if found else None


def pid_alive(pid: int, started: int | None) -> bool:
    """Whether process ``pid`` of this host still runs and is the one that started at ``started``."""
    found = process_start(pid)
    if found is not None:
        state, start = found
        # A zombie has ended; it only waits for its parent to read its exit status.
        return state not in ("Z", "X") and (started is None or start == started)
    if Path("/proc/self/stat").exists():
        return False  # Linux: no /proc/PID, no such process
    if os.name == "nt":
        return True  # os.kill(pid, 0) would terminate it there; assume it runs
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, under another user
    return True


def holder_alive(holder: Holder) -> bool:
    """Whether a lease's holder may still be writing (always True for another host: it cannot be checked)."""
    return holder.host != HOST or pid_alive(holder.pid, holder.pid_started)


def program_name(argv0: str) -> str:
    """The name a user knows this process by: ``workbench`` also for ``python -m workbench.cli``
    (which reports the package's ``__main__.py``)."""
    program = Path(argv0).name
    return "workbench" if program in ("cli.py", "__main__.py") else (program or "python")


def this_command() -> str:
    """This process's command line, short, for the lease's ``command`` (``workbench resume demo``)."""
    argv = list(sys.argv) or ["python"]
    argv[0] = program_name(argv[0])
    kept, skip = [], False
    for arg in argv:
        # The database is the one holding the lease: its path only makes the line longer.
        if skip:
            skip = False
        elif arg == "--db":
            skip = True
        elif not arg.startswith("--db="):
            kept.append(arg)
    text = shlex.join(kept)
    return text if len(text) <= 80 else text[:79] + "…"


def current_holder(store: Store, resource: str) -> Holder | None:
    """The lease row of ``resource``, live or not; None when nobody holds it."""
    row = store.conn.execute(f"SELECT {_COLUMNS} FROM leases WHERE resource = ?", (resource,)).fetchone()
    return Holder(*row) if row else None


def live_holders(store: Store, kind: str) -> dict[str, Holder]:
    """The live holders of every lease of ``kind`` (``run``, ``claims``, …), by the resource's name.

    A holder killed with -9 is not listed (its row stays until the next writer takes it over).
    """
    prefix = f"{kind}:"
    rows = store.conn.execute(f"SELECT {_COLUMNS} FROM leases WHERE substr(resource, 1, ?) = ?",
                              (len(prefix), prefix)).fetchall()
    holders = (Holder(*row) for row in rows)
    return {h.resource.partition(":")[2]: h for h in holders if holder_alive(h)}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _try_acquire(store: Store, mine: Holder) -> tuple[bool, Holder | None]:
    """Take the lease unless a live process holds it: (acquired, the holder found before, if any)."""
    with store.transaction() as conn:
        row = conn.execute(f"SELECT {_COLUMNS} FROM leases WHERE resource = ?", (mine.resource,)).fetchone()
        found = Holder(*row) if row else None
        if found is not None and holder_alive(found):
            return False, found
        conn.execute(f"INSERT OR REPLACE INTO leases ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (mine.resource, mine.pid, mine.host, mine.token, mine.pid_started, mine.started_at,
                      mine.command))
        return True, found


def _release(store: Store, mine: Holder) -> None:
    try:
        with store.transaction() as conn:
            conn.execute("DELETE FROM leases WHERE resource = ? AND token = ?", (mine.resource, mine.token))
    except sqlite3.Error as exc:
        # Never mask the pass's own outcome: the row names this process, and once it has
        # ended the next writer recovers the lease.
        warnings.warn(f"could not release the lease of {mine.subject}: {exc}", LeaseRecovered, stacklevel=3)


@contextmanager
def hold(store: Store, resource: str, *, what: str, wait: bool = False,
         on_wait: Callable[[str], None] | None = None, stop: threading.Event | None = None) -> Iterator[Holder]:
    """Hold the lease of ``resource`` (e.g. ``run:demo``) for the duration of the block.

    ``what`` is the command shown to whoever finds it held. A live holder makes it raise
    :class:`LeaseHeld` at once, or with ``wait`` poll every 0.5 s until the lease is free,
    calling ``on_wait("waiting: …")`` once; ``stop`` set meanwhile raises
    :class:`LeaseWaitStopped`. A dead holder's lease (this host; pid gone or reused) is taken
    over and reported through ``on_wait`` (else as a :class:`LeaseRecovered` warning).
    On exit the row is deleted only if it is still this holder's (its token).
    """
    mine = Holder(resource, os.getpid(), HOST, secrets.token_hex(16), _own_start(), _now(), what)
    announced = False
    while True:
        mine = replace(mine, started_at=_now())
        acquired, found = _try_acquire(store, mine)
        if acquired:
            break
        if not wait:
            raise LeaseHeld(found)
        if not announced:
            announced = True
            if on_wait is not None:
                on_wait(f"waiting: {found.describe()}")
        if stop is not None:
            if stop.wait(POLL_SECONDS):
                raise LeaseWaitStopped(found)
        else:
            time.sleep(POLL_SECONDS)
    if found is not None:
        note = (f"recovered the lease of pid {found.pid}, which died: it was writing {found.subject} "
                f"since {found.started_at} (`{found.command}`)")
        if on_wait is not None:
            on_wait(note)
        else:
            warnings.warn(note, LeaseRecovered, stacklevel=3)
    try:
        yield mine
    finally:
        _release(store, mine)
