"""Opening the workbench database and applying numbered migrations once.

The migrations are package data, ``workbench/migrations/NNNN_name.sql``, read through
``importlib.resources`` so that a wheel (pip, pipx) finds them as well as a checkout does.
The applied ones are recorded in ``_migrations``, as simonw's ``llm`` does, and the
highest one's number in ``PRAGMA user_version``.

A database file that cannot serve (not SQLite, truncated, a directory, read-only, written
by a newer workbench) is refused with an :class:`EnvironmentFault` naming the path before
anything is written to it; a full disk during a transaction becomes one too, after the
rollback.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import sqlite_utils

from workbench.errors import EnvironmentFault

BUSY_TIMEOUT_MS = 10_000
MIGRATIONS_DIR: Traversable = files("workbench") / "migrations"
_MIGRATION_NAME = re.compile(r"^[0-9]{4}_.+\.sql$")
SQLITE_MAGIC = b"SQLite format 3\x00"
# The real paths of every database this process opened: no output file may be written over one.
_OPENED: set[str] = set()


class MissingMigrations(RuntimeError):
    """No migration files where the package should have them: a broken install, never an empty schema."""


def default_db_path() -> Path:
    """``$WORKBENCH_DB`` if set, else ``workbench.db`` in the per-user data directory."""
    env = os.environ.get("WORKBENCH_DB")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("dissipation-workbench")) / "workbench.db"


def open_database_paths() -> frozenset[str]:
    """The real paths of the databases this process has opened (output files may not go there)."""
    return frozenset(_OPENED)


def utcnow() -> str:
    """An ISO-8601 UTC timestamp for ``created_at`` columns."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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

    def __post_init__(self) -> None:
        _OPENED.add(os.path.realpath(self.path))

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
        naming the database; the transaction has been rolled back by then.
        """
        if self.readonly:
            raise EnvironmentFault(f"{self.path} is read-only: {self.readonly_reason}")
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            _rollback(conn, exc)
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
        self.db.close()


def _rollback(conn: sqlite3.Connection, exc: BaseException) -> None:
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


def migration_files(directory: Traversable | Path | None = None) -> list[Traversable]:
    """The ``NNNN_*.sql`` files of ``directory`` (default: the package's), in order.

    Raises :class:`MissingMigrations` when there are none: opening a database without its
    schema would only fail later, far from the cause.
    """
    directory = directory if directory is not None else MIGRATIONS_DIR
    found = sorted((f for f in directory.iterdir() if _MIGRATION_NAME.match(f.name)), key=lambda f: f.name) \
        if directory.is_dir() else []
    if not found:
        raise MissingMigrations(f"no NNNN_*.sql migrations in {directory}: the workbench package is installed "
                                "without its data files (reinstall it; a wheel must include workbench/migrations)")
    return found


def apply_migrations(conn: sqlite3.Connection, directory: Traversable | Path | None = None) -> list[str]:
    """Apply every migration not yet recorded in ``_migrations``; return the names applied."""
    paths = migration_files(directory)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations ("
        " id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    applied = []
    for path in paths:
        stem = path.name[: -len(".sql")]
        if stem in done:
            continue
        sql = path.read_text(encoding="utf-8")
        conn.execute("BEGIN IMMEDIATE")
        try:
            # executescript would COMMIT on its own; run statements one by one instead
            # so the migration and its record land in one transaction.
            for statement in _split_sql(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO _migrations (id, name, applied_at) VALUES (?, ?, ?)",
                (int(stem[:4]), stem, utcnow()),
            )
            # The number in the file header too, so that an older workbench can tell a newer
            # database without trusting any table.
            conn.execute(f"PRAGMA user_version = {int(stem[:4])}")
            conn.execute("COMMIT")
        except BaseException as exc:
            _rollback(conn, exc)
            raise
        applied.append(stem)
    return applied


def _split_sql(sql: str) -> list[str]:
    statements, buf = [], []
    for line in sql.splitlines():
        if line.strip().startswith("--"):
            continue
        buf.append(line)
        joined = "\n".join(buf)
        if sqlite3.complete_statement(joined):
            if joined.strip():
                statements.append(joined)
            buf = []
    if "\n".join(buf).strip():
        statements.append("\n".join(buf))
    return statements


@dataclass(frozen=True)
class SchemaStatus:
    """What a database holds compared with the migrations this workbench knows."""

    known: tuple[str, ...]
    applied: frozenset[str]
    user_version: int
    foreign: bool  # tables, but no _migrations: another program's database

    @property
    def pending(self) -> list[str]:
        """Known migrations the database lacks, in order."""
        return [name for name in self.known if name not in self.applied]

    @property
    def newer(self) -> str:
        """The newest schema of a newer workbench found in the database, or "".

        By number rather than by name: a migration this version does not know but numbers
        below its own last one is not evidence of a newer workbench.
        """
        last = int(self.known[-1][:4])
        beyond = sorted((name for name in self.applied if name[:4].isdigit() and int(name[:4]) > last),
                        key=lambda name: (int(name[:4]), name))
        if beyond:
            return beyond[-1]
        return f"{self.user_version:04d}" if self.user_version > last else ""


def schema_status(conn: sqlite3.Connection) -> SchemaStatus:
    """Read (never write) what ``conn``'s database holds against this version's migrations."""
    known = tuple(f.name[: -len(".sql")] for f in migration_files())
    tables = {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    applied = frozenset(row[0] for row in conn.execute("SELECT name FROM _migrations")) \
        if "_migrations" in tables else frozenset()
    user_version = conn.execute("PRAGMA user_version").fetchone()[0]
    return SchemaStatus(known, applied, user_version, foreign=bool(tables) and "_migrations" not in tables)


def _newer_message(path: Path, status: SchemaStatus) -> str:
    return (f"{path} was written by a newer workbench (schema {status.newer}); this version knows up to "
            f"{status.known[-1]}: upgrade the workbench")


def _check_file(path: Path) -> None:
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
    wal = _sidecar(path, "-wal")
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


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def _write_blocker(path: Path) -> str:
    """Why this process cannot write the existing database at ``path``, or "" when it can."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "it is on a read-only filesystem"
    except OSError:
        pass
    if not _writable(path):
        return f"no write permission on the file (mode {stat.filemode(path.stat().st_mode)}, or an immutable flag)"
    directory = path.parent
    sidecars = [_sidecar(path, "-wal"), _sidecar(path, "-shm")]
    # WAL keeps PATH-wal and PATH-shm beside the file: they must exist already or be creatable.
    if not _writable(directory) and not all(s.exists() and _writable(s) for s in sidecars):
        return f"its directory {directory} is not writable (SQLite keeps {path.name}-wal and -shm there)"
    return ""


def _create_directory(path: Path) -> None:
    """Make sure a new database file can be created at ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentFault(f"cannot create {path.parent} for the database {path.name} ({exc.strerror})") from exc
    if not _writable(path.parent):
        raise EnvironmentFault(f"{path.parent} is read-only: cannot create the database {path.name} there")


def _fault(path: Path, exc: sqlite3.Error) -> EnvironmentFault:
    return write_fault(path, exc) or EnvironmentFault(sqlite_error_message(path, exc))


@contextmanager
def _closed_on_failure(conn: sqlite3.Connection, path: Path) -> Iterator[None]:
    """Close ``conn`` if opening it fails; an SQLite error becomes the one-line fault naming ``path``."""
    try:
        yield
    except sqlite3.Error as exc:
        conn.close()
        raise _fault(path, exc) from exc
    except BaseException:
        conn.close()
        raise


def open_store(path: str | os.PathLike | None = None, *, readonly: bool = False) -> Store:
    """Open (creating if needed) the database at ``path`` or the default, migrated.

    ``readonly`` is for verbs that only read. A database this process cannot write (a
    read-only file, directory or filesystem) is then opened with SQLite's ``mode=ro``
    instead of refused, and one written by a newer workbench is read instead of refused.
    A writable database opens read-write either way, so that pending migrations and the
    ledger's cache still land.

    Raises :class:`EnvironmentFault` naming the path, with nothing written, for a path that
    is not a workbench database (a directory, not SQLite, truncated, another program's
    database), a read-only one (unless ``readonly``), or one from a newer workbench.
    """
    path = Path(path) if path is not None else default_db_path()
    _check_file(path)
    if not path.exists():
        _create_directory(path)
    else:
        blocker = _write_blocker(path)
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
    _check_file(path)
    if not path.exists():
        raise EnvironmentFault(f"{path}: no such database")
    reason = _write_blocker(path)
    if reason:
        return _open_readonly(path, reason)
    # Asked only of a file this process could write (a read-only one gets _open_readonly's advice).
    conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    with _closed_on_failure(conn, path):
        pending = schema_status(conn).pending
    conn.close()
    if pending:
        raise EnvironmentFault(f"{path} needs the schema upgrade {pending[0]} before it can be read with mode=ro: "
                               f"open it once with this workbench (e.g. `workbench --db {path} runs`)")
    return _open_readonly(path, "opened with mode=ro: this reader never writes")


def _refuse_foreign(path: Path, status: SchemaStatus) -> None:
    if status.foreign:
        raise EnvironmentFault(f"{path}: not a workbench database (SQLite, but without the workbench's "
                               "_migrations table: another program's database)")


def _open_readonly(path: Path, reason: str) -> Store:
    """Open ``path`` with ``mode=ro``, for a verb that only reads it.

    A WAL database needs ``PATH-shm``; in a directory we cannot write, SQLite cannot
    create it and refuses to open. ``immutable=1`` then reads the file without it (and
    without locks). That is sound here: nobody can add a -wal beside the file either, and
    a -wal left with content is refused rather than ignored.
    """
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    shm, wal = _sidecar(path, "-shm"), _sidecar(path, "-wal")
    if not shm.exists() and not _writable(path.parent):
        if wal.exists() and wal.stat().st_size > 0:
            raise EnvironmentFault(f"{path} is read-only ({reason}) and its latest changes are still in {wal.name}, "
                                   f"which cannot be read without creating {shm.name} in {path.parent}: "
                                   "open it once where it can be written")
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise _fault(path, exc) from exc
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
    return Store(db=sqlite_utils.Database(conn), path=path, readonly_reason=reason, newer_schema=status.newer)
