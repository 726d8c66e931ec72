"""Model outputs computed once per test session and shared by every worker: the workbench's own caches, pooled.

The workbench caches what a model wrote (``generations``, keyed by the model's sha256, the chat
template, the exact prompt and the sampling) and the vectors an embedding model gave
(``embeddings``, keyed by the model's sha256 and the text's). A test whose subject is not the model
(a ledger, a report, a resume, a screen) still needs realistic outputs; it takes them from this
pool instead of generating them again:

- :meth:`SharedOutputs.scenario` runs a named real pass (``build(db)``: real models, real prompts)
  the first time any worker of the session asks for it, under a file lock, and pools the outputs
  that pass left in its database; a worker asking meanwhile waits for it, then reuses it;
- :meth:`SharedOutputs.seed` copies every pooled output into a test's database, so the test's own
  pass finds each of its prompts (or texts) cached and the model writes nothing.

The pool lives in the session's root temporary directory, the one xdist's workers share, so it
is built once per ``just test`` (per ``just test-perturbed`` too: a perturbed model's outputs are
cached under another model id and never meet greedy ones). Cached rows are what the real model
wrote on this machine in this session, so a test reading them asserts nothing about a model's
text that the real pass would not have given it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

# The tables that hold model outputs, content-addressed: copying a row never changes what it means.
OUTPUT_TABLES = ("generations", "embeddings")


class SharedOutputs:
    """The session's pool of model outputs at ``root/model-outputs.db`` (see the module)."""

    def __init__(self, root: Path):
        self.root = root
        self.path = root / "model-outputs.db"
        self._lock = root / "model-outputs.lock"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self._lock, "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _done(self, con: sqlite3.Connection) -> set[str]:
        con.execute("CREATE TABLE IF NOT EXISTS scenarios (name TEXT PRIMARY KEY)")
        return {name for (name,) in con.execute("SELECT name FROM scenarios")}

    def scenario(self, name: str, build: Callable[[Path], None]) -> None:
        """Make sure the outputs of the real pass ``name`` are pooled: ``build(db)`` runs it on a scratch
        database the first time in the session (any worker), and its output rows join the pool."""
        with self._locked():
            con = sqlite3.connect(self.path)
            try:
                if name in self._done(con):
                    return
            finally:
                con.close()
            scratch = self.root / f"scenario-{name}"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
            db = scratch / "wb.db"
            build(db)
            self._pool(db)
            con = sqlite3.connect(self.path)
            try:
                with con:
                    con.execute("INSERT INTO scenarios VALUES (?)", (name,))
            finally:
                con.close()

    def _pool(self, db: Path) -> None:
        """Copy ``db``'s output rows into the pool (the pool's schema is the workbench's: made by its store)."""
        if not self._has_tables():
            from workbench.store import open_store

            open_store(self.path).close()
        _copy(db, self.path)

    def _has_tables(self) -> bool:
        con = sqlite3.connect(self.path)
        try:
            names = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
        return set(OUTPUT_TABLES) <= names

    def seed(self, db: Path) -> int:
        """Copy every pooled output into the workbench database ``db`` (made if missing); how many rows were new."""
        from workbench.store import open_store

        if not Path(db).exists():
            open_store(db).close()
        with self._locked():
            if not self.path.exists() or not self._has_tables():
                return 0
            return _copy(self.path, Path(db))


def _copy(source: Path, target: Path) -> int:
    """INSERT OR IGNORE every output row of ``source`` into ``target``; how many were new."""
    con = sqlite3.connect(target, timeout=60)
    try:
        con.execute("ATTACH DATABASE ? AS src", (os.fspath(source),))
        new = 0
        with con:
            for table in OUTPUT_TABLES:
                new += con.execute(f"INSERT OR IGNORE INTO main.{table} SELECT * FROM src.{table}").rowcount
        con.execute("DETACH DATABASE src")
        return new
    finally:
        con.close()


def shared_root(tmp_path_factory) -> Path:
    """The directory every worker of this session shares (xdist gives each worker a ``popen-gwN`` below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
