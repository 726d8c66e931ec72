"""What can go wrong with a database file, and the one line that says so.

A path that cannot hold a workbench database (a directory, a device, a missing file for a
reader) is refused before SQLite opens it (:func:`check_file`), and a file SQLite cannot read
(a text file, a truncated copy) by SQLite's own first read; a database this process cannot write
says why (:func:`write_blocker`); an SQLite error the machine caused (a full disk, an I/O
error, a read-only file) becomes an :class:`~workbench.errors.EnvironmentFault` naming the
path (:func:`write_fault`), and any other one a single line (:func:`sqlite_error_message`).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from workbench.errors import EnvironmentFault

BUSY_TIMEOUT_MS = 10_000
SQLITE_MAGIC = b"SQLite format 3\x00"


def rollback_open(conn: sqlite3.Connection, exc: BaseException) -> None:
    """Roll back what is still open after ``exc`` (a failed ROLLBACK becomes a note on ``exc``)."""
    # After SQLITE_FULL or an I/O error SQLite has already rolled the transaction back
    # itself; a second ROLLBACK would fail with "no transaction is active" and hide the
    # real error, so roll back only what is still open, and never let it replace `exc`.
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as failed:
        exc.add_note(f"(the ROLLBACK that followed failed too: {failed})")


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def write_fault(path: str | os.PathLike, exc: BaseException) -> EnvironmentFault | None:
    """The one-line fault for an SQLite error that the machine caused while writing ``path``.

    None when ``exc`` is something else (a constraint, a bug, an interrupt): that is not
    the environment's, and keeps its own type.
    """
    if not isinstance(exc, sqlite3.Error):
        return None
    code = _primary_code(exc)
    if code == sqlite3.SQLITE_FULL:
        return EnvironmentFault(f"disk full while writing {path}: nothing was written "
                                "(the last transaction was rolled back)")
    if code == sqlite3.SQLITE_IOERR:
        return EnvironmentFault(f"disk I/O error while writing {path} ({exc.sqlite_errorname}): nothing was "
                                "written (the last transaction was rolled back)")
    if code == sqlite3.SQLITE_READONLY:
        return EnvironmentFault(f"{path} is read-only: {exc}")
    return None


def sqlite_error_message(path: str | os.PathLike, exc: sqlite3.Error) -> str:
    """One line for any SQLite error about the database at ``path`` (the CLI's last resort)."""
    fault = write_fault(path, exc)
    if fault is not None:
        return str(fault)
    code = _primary_code(exc)
    name = getattr(exc, "sqlite_errorname", type(exc).__name__)
    if code == sqlite3.SQLITE_NOTADB:
        return f"{path}: not a workbench database (file is not SQLite)"
    if code == sqlite3.SQLITE_CORRUPT:
        return f"{path}: not a usable workbench database (damaged or truncated: {exc}; SQLite {name})"
    if code == sqlite3.SQLITE_CANTOPEN:
        return f"{path}: cannot open the database ({exc}; SQLite {name})"
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (f"{path}: another process kept the database locked for more than "
                f"{BUSY_TIMEOUT_MS // 1000} s ({exc}); try again when it is done")
    return f"{path}: {exc} (SQLite {name})"


def check_file(path: Path, *, create: bool = True) -> None:
    """Refuse, before SQLite opens it, a path that cannot hold a workbench database.

    Only the path's metadata is looked at (``stat``): the file is never opened here.
    Closing any descriptor of a file drops every POSIX lock this process holds on it,
    SQLite's included, so a Python open of a database another connection of this
    process has open would let another process checkpoint and delete its -wal and -shm
    under that connection (SQLite's "How To Corrupt An SQLite Database File", 2.2). What
    the header says (not SQLite, truncated) is SQLite's to read: its first query fails
    with ``SQLITE_NOTADB`` or ``SQLITE_CORRUPT``, which :func:`sqlite_error_message` words.

    ``create=False`` is for verbs that only read: a missing file (or directory) is "no such
    database", and a 0-byte file is refused rather than made into a database.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        if not create:
            raise EnvironmentFault(f"{path}: no such database") from None
        return
    except OSError as exc:
        raise EnvironmentFault(f"{path}: cannot open the database ({exc.strerror})") from exc
    if stat.S_ISDIR(st.st_mode):
        raise EnvironmentFault(f"{path}: not a workbench database (it is a directory)")
    if not stat.S_ISREG(st.st_mode):
        raise EnvironmentFault(f"{path}: not a workbench database (not a regular file)")
    if st.st_size == 0 and not create:
        raise EnvironmentFault(f"{path}: an empty file, not a workbench database (nothing to read)")


def sidecar(path: Path, suffix: str) -> Path:
    """``PATH-wal``, ``PATH-shm``: the files SQLite keeps beside the database."""
    return path.with_name(path.name + suffix)


def writable(path: Path) -> bool:
    """Whether this process may write ``path``."""
    return os.access(path, os.W_OK)


def write_blocker(path: Path) -> str:
    """Why this process cannot write the existing database at ``path``, or "" when it can."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "it is on a read-only filesystem"
    except OSError:
        pass
    if not writable(path):
        return f"no write permission on the file (mode {stat.filemode(path.stat().st_mode)}, or an immutable flag)"
    directory = path.parent
    sidecars = [sidecar(path, "-wal"), sidecar(path, "-shm")]
    # WAL keeps PATH-wal and PATH-shm beside the file: they must exist already or be creatable.
    if not writable(directory) and not all(s.exists() and writable(s) for s in sidecars):
        return f"its directory {directory} is not writable (SQLite keeps {path.name}-wal and -shm there)"
    return ""


def fault(path: Path, exc: sqlite3.Error) -> EnvironmentFault:
    """The one-line fault for any SQLite error while opening or writing ``path``."""
    return write_fault(path, exc) or EnvironmentFault(sqlite_error_message(path, exc))
