"""What can go wrong with a database file, and the one line that says so.

A path that cannot hold a workbench database (a directory, a text file, a truncated copy) is
refused before SQLite opens it (:func:`check_file`); a database this process cannot write
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
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return f"{path}: not a usable workbench database ({exc}; SQLite {name})"
    if code == sqlite3.SQLITE_CANTOPEN:
        return f"{path}: cannot open the database ({exc}; SQLite {name})"
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (f"{path}: another process kept the database locked for more than "
                f"{BUSY_TIMEOUT_MS // 1000} s ({exc}); try again when it is done")
    return f"{path}: {exc} (SQLite {name})"


def check_file(path: Path) -> None:
    """Refuse, before SQLite opens it, a path that cannot hold a workbench database.

    SQLite would open a text file or a truncated copy without complaint and fail on the
    first query, far from the cause (and, for a truncated file, only on the pages cut off).
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise EnvironmentFault(f"{path}: cannot open the database ({exc.strerror})") from exc
    if stat.S_ISDIR(st.st_mode):
        raise EnvironmentFault(f"{path}: not a workbench database (it is a directory)")
    if not stat.S_ISREG(st.st_mode):
        raise EnvironmentFault(f"{path}: not a workbench database (not a regular file)")
    if st.st_size == 0:
        return  # a new, empty file: SQLite makes a database of it
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise EnvironmentFault(f"{path}: cannot read the database ({exc.strerror})") from exc
    if not header.startswith(SQLITE_MAGIC):
        raise EnvironmentFault(f"{path}: not a workbench database (file is not SQLite)")
    if len(header) < 100:
        raise EnvironmentFault(f"{path}: not a usable workbench database (truncated: {st.st_size} bytes, "
                               "shorter than SQLite's 100-byte header)")
    declared = _declared_size(header)
    # Pages that sit in a non-empty -wal may not have been copied into the file yet.
    wal = sidecar(path, "-wal")
    if declared > st.st_size and not (wal.exists() and wal.stat().st_size > 0):
        raise EnvironmentFault(f"{path}: not a usable workbench database (truncated: its SQLite header counts "
                               f"{declared:,} bytes, the file holds {st.st_size:,})")


def _declared_size(header: bytes) -> int:
    """The database size the header states, or 0 when SQLite itself would not trust it."""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The header's page count is valid only when the change counter matches
    # version-valid-for (https://www.sqlite.org/fileformat.html#in_header_database_size).
    return pages * page_size if header[24:28] == header[92:96] else 0


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
