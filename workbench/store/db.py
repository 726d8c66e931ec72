"""Opening the workbench database: the schema applied once, and the refusals before any write.

A database file that cannot serve (not SQLite, truncated, a directory, read-only, written
by a newer workbench) is refused with an :class:`EnvironmentFault` naming the path before
anything is written to it (:mod:`workbench.store.faults`); a full disk during a transaction
becomes one too, after the rollback. The migrations and their record are
:mod:`workbench.store.schema`'s.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

from workbench import dbfiles
from workbench.dbfiles import open_database_paths
from workbench.errors import EnvironmentFault
from workbench.paths import user_path
from workbench.store.sqlitelib import sqlite_utils
from workbench.store.faults import (BUSY_TIMEOUT_MS, SQLITE_MAGIC, check_file, fault, rollback_open, sidecar,
                                    writable, write_blocker, write_fault)
from workbench.store.schema import MissingMigrations, SchemaStatus, apply_migrations, schema_status, utcnow

__all__ = ["Store", "open_store", "open_readonly", "default_db_path", "open_database_paths", "utcnow",
           "SQLITE_MAGIC", "BUSY_TIMEOUT_MS", "MissingMigrations"]



def default_db_path() -> Path:
    """``$WORKBENCH_DB`` if set, else ``workbench.db`` in the per-user data directory."""
    env = os.environ.get("WORKBENCH_DB")
    if env:
        return user_path(env, "WORKBENCH_DB")
    import platformdirs

    return Path(platformdirs.user_data_dir("dissipation-workbench")) / "workbench.db"


@dataclass
class Store:
    """An open workbench database: a sqlite-utils ``Database`` with the schema applied.

    ``readonly_reason`` says why it was opened read-only (empty when it is writable);
    ``newer_schema`` names the schema of a newer workbench that wrote it, when a verb that
    only reads opened it anyway.
    """

    db: sqlite_utils.Database
    path: Path
    readonly_reason: str = ""
    newer_schema: str = ""
    # Set by a mode=ro open that had to create PATH-wal and PATH-shm: close() removes them again.
    made_sidecars: bool = False
    # One transaction at a time on the shared connection: a pass with requests in flight caches
    # model calls from worker threads while the calling thread commits jobs.
    _tx_lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def __post_init__(self) -> None:
        dbfiles.opened(self.path)
        # From here on no Python open of this database's files can happen in this process: only SQLite's.
        dbfiles.guard_process()

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    @property
    def readonly(self) -> bool:
        """True when opened with SQLite's ``mode=ro``: every write would fail."""
        return bool(self.readonly_reason)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed whole or rolled back whole.

        A full disk, an I/O error or a read-only file becomes an :class:`EnvironmentFault`
        naming the database; the transaction has been rolled back by then. Threads sharing the
        store take turns: another thread's transaction waits for this one to end.
        """
        if self.readonly:
            raise EnvironmentFault(f"{self.path} is read-only: {self.readonly_reason}")
        with self._tx_lock:
            yield from self._transaction()

    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            rollback_open(conn, exc)
            fault = write_fault(self.path, exc)
            if fault is not None:
                raise fault from exc
            raise

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every SELECT inside sees the database as of its first read.

        WAL mode lets writers go on meanwhile; a reader that must see events and the event
        log at one instant (the incremental ledger) reads inside one snapshot. Nested use
        (already in a transaction) reads in the enclosing one.
        """
        with self._tx_lock:
            conn = self.conn
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def count(self, table: str) -> int:
        """Row count of a table (tests and stats use it)."""
        return self.conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0]

    def data_version(self) -> int:
        """Changes whenever another connection commits: cheap polling for live views."""
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def close(self) -> None:
        """Close the connection. A read-only open that created the WAL's files leaves none behind."""
        self.db.close()
        # A read-only close cleans up only when it is the last of this process's stores on the file.
        if dbfiles.closed(self.path) <= 0 and self.made_sidecars:
            _remove_sidecars(self.path)


def _remove_sidecars(path: Path) -> None:
    """Let SQLite remove the -wal and -shm a read-only connection had to create.

    A read-only connection cannot delete them; the last read-write connection to close does,
    after checkpointing the (here empty) WAL. So one is opened and closed, touching no page.
    If another process has the database open, SQLite keeps the files for it, as it should.
    """
    wal = sidecar(path, "-wal")
    if not wal.exists() or wal.stat().st_size > 0 or not writable(path):
        return
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()    # a read: the WAL is opened, then closed
        conn.close()
    except sqlite3.Error:
        pass    # left as SQLite keeps them: harmless, and the next writer removes them


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves so that an import or a job
    # result is exactly one transaction.
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _configure(conn: sqlite3.Connection) -> None:
    # Only once the file is known to be ours: journal_mode = WAL writes to the file header.
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")


def _newer_message(path: Path, status: SchemaStatus) -> str:
    return (f"{path} was written by a newer workbench (schema {status.newer}); this version knows up to "
            f"{status.known[-1]}: upgrade the workbench")


def _create_directory(path: Path) -> None:
    """Make sure a new database file can be created at ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentFault(f"cannot create {path.parent} for the database {path.name} ({exc.strerror})") from exc
    if not writable(path.parent):
        raise EnvironmentFault(f"{path.parent} is read-only: cannot create the database {path.name} there")


@contextmanager
def _closed_on_failure(conn: sqlite3.Connection, path: Path) -> Iterator[None]:
    """Close ``conn`` if opening it fails; an SQLite error becomes the one-line fault naming ``path``."""
    try:
        yield
    except sqlite3.Error as exc:
        conn.close()
        raise fault(path, exc) from exc
    except BaseException:
        conn.close()
        raise


def open_store(path: str | os.PathLike | None = None, *, readonly: bool = False) -> Store:
    """Open (creating if needed) the database at ``path`` or the default, migrated.

    ``readonly`` is for verbs that only read. They never create: a missing database, or a
    missing directory, is "no such database", and a 0-byte file is refused. A database this
    process cannot write (a read-only file, directory or filesystem) is then opened with
    SQLite's ``mode=ro`` instead of refused, and one written by a newer workbench is read
    instead of refused.
    A writable database opens read-write either way, so that pending migrations and the
    ledger's cache still land.

    Raises :class:`EnvironmentFault` naming the path, with nothing written, for a path that
    is not a workbench database (a directory, not SQLite, truncated, another program's
    database), a read-only one (unless ``readonly``), or one from a newer workbench.
    """
    path = Path(path) if path is not None else default_db_path()
    check_file(path, create=not readonly)
    if not path.exists():
        _create_directory(path)
    else:
        blocker = write_blocker(path)
        if blocker and not readonly:
            raise EnvironmentFault(f"{path} is read-only: {blocker}")
        if blocker:
            return _open_readonly(path, blocker)
    conn = _connect(path)
    with _closed_on_failure(conn, path):
        status = schema_status(conn)
        _refuse_foreign(path, status)
        if status.newer and readonly:
            conn.close()
            return _open_readonly(path, "it was written by a newer workbench")
        if status.newer:
            raise EnvironmentFault(_newer_message(path, status))
        _configure(conn)
        apply_migrations(conn)
    return Store(db=sqlite_utils.Database(conn), path=path)


def open_readonly(path: str | os.PathLike) -> Store:
    """Open the existing database at ``path`` with SQLite's ``mode=ro``, even one this process could write.

    For readers that must never write, such as the analysis API. :func:`open_store` with
    ``readonly=True`` still opens a writable file read-write, so that migrations and the
    ledger's saved state land. Here every write fails, and the ledger is computed in memory.
    In WAL mode a reader never blocks a writer, and a writer never blocks a reader. A
    database that still needs a migration is refused with one line: open it once with
    :func:`open_store` first. A missing file is an :class:`EnvironmentFault` too, because
    nothing is created.
    """
    path = Path(path)
    check_file(path, create=False)
    reason = write_blocker(path)
    if reason:
        return _open_readonly(path, reason)
    fresh = _no_sidecars(path)
    # Asked only of a file this process could write (a read-only one gets _open_readonly's advice).
    conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    with _closed_on_failure(conn, path):
        pending = schema_status(conn).pending
    conn.close()
    if pending:
        raise EnvironmentFault(f"{path} needs the schema upgrade {pending[0]} before it can be read with mode=ro: "
                               f"open it once with this workbench (e.g. `workbench --db {path} runs`)")
    return _open_readonly(path, "opened with mode=ro: this reader never writes", fresh=fresh)


def _refuse_foreign(path: Path, status: SchemaStatus) -> None:
    if status.foreign:
        raise EnvironmentFault(f"{path}: not a workbench database (SQLite, but without the workbench's "
                               "_migrations table: another program's database)")


def _no_sidecars(path: Path) -> bool:
    return not sidecar(path, "-shm").exists() and not sidecar(path, "-wal").exists()


def _open_readonly(path: Path, reason: str, *, fresh: bool | None = None) -> Store:
    """Open ``path`` with ``mode=ro``, for a verb that only reads it.

    A WAL database needs ``PATH-shm``; in a directory we cannot write, SQLite cannot
    create it and refuses to open. ``immutable=1`` then reads the file without it (and
    without locks). That is sound here: nobody can add a -wal beside the file either, and
    a -wal left with content is refused rather than ignored. ``fresh``: there were no -wal
    and -shm before this open began (default: looked at now); the store then removes the ones
    SQLite makes when it closes.
    """
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    shm, wal = sidecar(path, "-shm"), sidecar(path, "-wal")
    made_sidecars = _no_sidecars(path) if fresh is None else fresh
    if not shm.exists() and not writable(path.parent):
        if wal.exists() and wal.stat().st_size > 0:
            raise EnvironmentFault(f"{path} is read-only ({reason}) and its latest changes are still in {wal.name}, "
                                   f"which cannot be read without creating {shm.name} in {path.parent}: "
                                   "open it once where it can be written")
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise fault(path, exc) from exc
    with _closed_on_failure(conn, path):
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        status = schema_status(conn)
        _refuse_foreign(path, status)
        if not status.applied:
            raise EnvironmentFault(f"{path} is read-only ({reason}) and empty: there is nothing to read yet")
        if status.pending and not status.newer:
            raise EnvironmentFault(f"{path} is read-only ({reason}) and lacks the schema upgrade "
                                   f"{status.pending[0]}: open it once where it can be written")
    return Store(db=sqlite_utils.Database(conn), path=path, readonly_reason=reason, newer_schema=status.newer,
                 made_sidecars=made_sidecars and "immutable=1" not in uri)
