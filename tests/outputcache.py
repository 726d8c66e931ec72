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

A scenario's build is the pool's model use, not the calling test's: it runs under its own model
slot path (``WORKBENCH_MODEL_SLOT`` in the scratch directory, inherited by any CLI process it
starts) and the decodes it makes in this process are taken back off tests/modeluse.py's count,
so a test whose subject is not the model need not be marked ``real_model`` for having built it.

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
import urllib.parse
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import modeluse
from workbench.store import open_store

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

    def _is_done(self, name: str) -> bool:
        """Whether ``name`` (a scenario, an adopted database) is pooled already; makes the pool if missing.
        Called under the lock."""
        if not self.path.exists():   # the store makes the pool's schema; it refuses a file made otherwise
            open_store(self.path).close()
        con = sqlite3.connect(self.path)
        try:
            con.execute("CREATE TABLE IF NOT EXISTS scenarios (name TEXT PRIMARY KEY)")
            return con.execute("SELECT 1 FROM scenarios WHERE name = ?", (name,)).fetchone() is not None
        finally:
            con.close()

    def _mark_done(self, name: str) -> None:
        """Record that ``name`` is pooled (under the lock)."""
        con = sqlite3.connect(self.path)
        try:
            with con:
                con.execute("INSERT INTO scenarios VALUES (?)", (name,))
        finally:
            con.close()

    def scenario(self, name: str, build: Callable[[Path], None]) -> None:
        """Make sure the outputs of the real pass ``name`` are pooled: ``build(db)`` runs it on a scratch
        database the first time in the session (any worker), and its output rows join the pool."""
        with self._locked():
            if self._is_done(name):
                return
            scratch = self.root / f"scenario-{name}"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
            db = scratch / "wb.db"
            with _not_the_tests_model_use(scratch / "model.lock"):
                build(db)
            self._pool(db)
            self._mark_done(name)

    def adopt(self, source: Path, tables: tuple[str, ...] = ("embeddings",)) -> int:
        """Pool the outputs ``tables`` of an existing workbench database (once per session; how many rows were
        new): the demo's database, when ``just demo`` ran first, holds the vectors of every HowToCook chunk and
        question with the default embedding model, which the docs database and others would compute again.
        Read-only; a database whose tables differ from this code's (an older schema) is left alone."""
        name = f"adopted:{os.path.realpath(source)}"
        with self._locked():
            if self._is_done(name):
                return 0
            new = _copy(source, self.path, tables, read_only=True) if Path(source).is_file() else 0
            self._mark_done(name)
            return new

    def _pool(self, db: Path) -> None:
        """Copy ``db``'s output rows into the pool (the pool's schema is the workbench's: made by its store)."""
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
        if not Path(db).exists():
            open_store(db).close()
        with self._locked():
            if not self.path.exists() or not self._has_tables():
                return 0
            return _copy(self.path, Path(db))


@contextmanager
def _not_the_tests_model_use(slot: Path) -> Iterator[None]:
    """Run a scenario's build with its own model slot at ``slot`` and leave tests/modeluse.py's count of
    decodes as it was: the watcher then sees neither as the calling test's use of a model."""
    env, calls = os.environ.get("WORKBENCH_MODEL_SLOT"), modeluse.CALLS[0]
    os.environ["WORKBENCH_MODEL_SLOT"] = os.fspath(slot)
    try:
        yield
    finally:
        modeluse.CALLS[0] = calls
        if env is None:
            os.environ.pop("WORKBENCH_MODEL_SLOT", None)
        else:
            os.environ["WORKBENCH_MODEL_SLOT"] = env


def _copy(source: Path, target: Path, tables: tuple[str, ...] = OUTPUT_TABLES, *, read_only: bool = False) -> int:
    """INSERT OR IGNORE every row of ``tables`` of ``source`` into ``target``; how many were new. ``read_only``
    attaches ``source`` read-only; a table whose columns differ between the two (another schema) is skipped."""
    con = sqlite3.connect(_uri(target), uri=True, timeout=60)
    try:
        con.execute("ATTACH DATABASE ? AS src", (_uri(source, "ro" if read_only else None),))
        new = 0
        with con:
            for table in tables:
                ours = [row[1] for row in con.execute(f"PRAGMA main.table_info({table})")]
                theirs = [row[1] for row in con.execute(f"PRAGMA src.table_info({table})")]
                if ours and ours == theirs:
                    new += con.execute(f"INSERT OR IGNORE INTO main.{table} SELECT * FROM src.{table}").rowcount
        con.execute("DETACH DATABASE src")
        return new
    finally:
        con.close()


def _uri(path: Path, mode: str | None = None) -> str:
    """``path`` as an SQLite URI (``mode=ro``: read-only)."""
    uri = "file:" + urllib.parse.quote(Path(path).resolve().as_posix())
    return uri + (f"?mode={mode}" if mode else "")


def shared_root(tmp_path_factory) -> Path:
    """The directory every worker of this session shares (xdist gives each worker a ``popen-gwN`` below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
