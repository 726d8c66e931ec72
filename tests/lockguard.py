"""A watch on every Python-level ``open()`` of a file that SQLite has open in this process.

On POSIX, closing any descriptor of a file drops every advisory lock the process holds on
that file, SQLite's included (SQLite's "How To Corrupt An SQLite Database File", 2.2). A
workbench process that reads its database's header with ``open()`` while another of its
connections is open strips that connection's locks; another process then checkpoints and
deletes the -wal and -shm under it, and the next write corrupts the file.

:func:`install` adds an audit hook (``sys.addaudithook``) that sees every ``open`` event,
``io.open``, ``os.open`` and ``Path.read_bytes`` alike. When the file being opened is a file
SQLite has open in this process right now (the database, its -wal or its -shm, through any
link or hard link), the hook records a :class:`LockDropHazard` and raises it at the call
site. SQLite's own opens are made in C and never pass through the hook. Linux only: it
reads the process's open descriptors from ``/proc/self/fd``.
"""

from __future__ import annotations

import os
import stat
import sys
from urllib.parse import unquote

_PROC_FD = "/proc/self/fd"
_SUFFIXES = ("-wal", "-shm", "-journal")

# Real paths this process has given to sqlite3.connect: the databases whose files are watched.
_connected: set[str] = set()
# Every hazard seen, in order (the hook also raises each one where it happens).
hazards: list[str] = []
_installed = False


class LockDropHazard(RuntimeError):
    """A Python-level open of a file SQLite holds open in this process: closing it drops SQLite's locks."""


def supported() -> bool:
    """Whether this platform lists a process's descriptors where the hook can read them."""
    return os.path.isdir(_PROC_FD)


def install() -> None:
    """Add the audit hook, once per process (an audit hook cannot be removed)."""
    global _installed
    if not _installed and supported():
        sys.addaudithook(_hook)
        _installed = True


def _database_path(database) -> str | None:
    """The real path of a ``sqlite3.connect`` argument (a path or a ``file:`` URI); None in memory."""
    try:
        name = os.fsdecode(os.fspath(database))
    except TypeError:
        return None
    if name.startswith("file:"):
        name = unquote(name[len("file:"):].split("?", 1)[0])
        if name.startswith("//"):        # file:///abs/path
            name = name[2:]
    if name in ("", ":memory:"):
        return None
    return os.path.realpath(name)


def _database_of(real: str) -> str:
    """The database a file belongs to: itself, or the database of a -wal, -shm or -journal."""
    for suffix in _SUFFIXES:
        if real.endswith(suffix):
            return real[: -len(suffix)]
    return real


def _sqlite_descriptors() -> list[str]:
    """The paths of this process's open descriptors that belong to a connected database."""
    paths = []
    for fd in os.listdir(_PROC_FD):
        try:
            target = os.readlink(f"{_PROC_FD}/{fd}")
        except OSError:
            continue                      # closed meanwhile (the listing's own descriptor, another thread)
        if _database_of(target) in _connected:
            paths.append(target)
    return paths


def _check_open(path) -> None:
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return                            # nothing there: no lock on it to drop
    if not stat.S_ISREG(st.st_mode):
        return
    for held in _sqlite_descriptors():
        try:
            same = os.path.samestat(st, os.stat(held))
        except OSError:
            continue
        if same:
            message = (f"open({os.fsdecode(path)!r}) while SQLite holds {held} open in this process: "
                       "closing that descriptor would drop SQLite's locks on it")
            hazards.append(message)
            raise LockDropHazard(message)


def _hook(event: str, args) -> None:
    if event == "sqlite3.connect":
        real = _database_path(args[0])
        if real is not None:
            _connected.add(real)
    elif event == "open" and _connected:
        path = args[0]
        if path is None or isinstance(path, int):
            return                        # an existing descriptor (os.fdopen): no new one to close
        _check_open(path)
