"""The schema: numbered migrations applied once, what a database holds against them, and
the timestamp format of its ``created_at`` columns.

The migrations are package data, ``workbench/migrations/NNNN_name.sql``, read through
``importlib.resources`` so that a wheel (pip, pipx) finds them as well as a checkout does.
The applied ones are recorded in ``_migrations``, as simonw's ``llm`` does, and the
highest one's number in ``PRAGMA user_version``.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from workbench.dbfiles import read_regular
from workbench.store.faults import rollback_open

MIGRATIONS_DIR: Traversable = files("workbench") / "migrations"
_MIGRATION_NAME = re.compile(r"^[0-9]{4}_.+\.sql$")


class MissingMigrations(RuntimeError):
    """No migration files where the package should have them: a broken install, never an empty schema."""


def utcnow() -> str:
    """An ISO-8601 UTC timestamp for ``created_at`` columns."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
        sql = read_regular(path).decode("utf-8")
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
            rollback_open(conn, exc)
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
