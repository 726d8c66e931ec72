"""Opening the workbench database and applying numbered migrations once.

The migrations are package data, ``workbench/migrations/NNNN_name.sql``, read through
``importlib.resources`` so that a wheel (pip, pipx) finds them as well as a checkout does.
The applied ones are recorded in ``_migrations``, as simonw's ``llm`` does.
"""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Iterator

import sqlite_utils

BUSY_TIMEOUT_MS = 10_000
MIGRATIONS_DIR: Traversable = files("workbench") / "migrations"
_MIGRATION_NAME = re.compile(r"^[0-9]{4}_.+\.sql$")


class MissingMigrations(RuntimeError):
    """No migration files where the package should have them: a broken install, never an empty schema."""


def default_db_path() -> Path:
    """``$WORKBENCH_DB`` if set, else ``workbench.db`` in the per-user data directory."""
    env = os.environ.get("WORKBENCH_DB")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("dissipation-workbench")) / "workbench.db"


def utcnow() -> str:
    """An ISO-8601 UTC timestamp for ``created_at`` columns."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Store:
    """An open workbench database: a sqlite-utils ``Database`` with the schema applied."""

    db: sqlite_utils.Database
    path: Path

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed whole or rolled back whole."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    def count(self, table: str) -> int:
        """Row count of a table (tests and stats use it)."""
        return self.conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0]

    def data_version(self) -> int:
        """Changes whenever another connection commits: cheap polling for live views."""
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def close(self) -> None:
        self.db.close()


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves so that an import or a job
    # result is exactly one transaction.
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


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
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
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


def open_store(path: str | os.PathLike | None = None) -> Store:
    """Open (creating if needed) the database at ``path`` or the default, migrated."""
    path = Path(path) if path is not None else default_db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = _connect(path)
    apply_migrations(conn)
    return Store(db=sqlite_utils.Database(conn), path=path)
