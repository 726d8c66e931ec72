"""Two processes, one database: the TUI open while the CLI writes, and nothing corrupts the file.

On POSIX, closing any descriptor of a file drops every lock the process holds on it, SQLite's
included. The workbench once read the database header with Python's ``open()`` on every open:
a second open in a process that held a connection (the TUI's workers do) stripped the first
connection's locks, and the next process to close the database took it for the last user,
checkpointed and deleted the -wal and -shm under the open connection. These tests hold a
connection, open the store again the workbench's ways, let another process write and close,
and check that the -shm is still there and every later write of both sides lands.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import lockguard
from conftest import copy_db, write_jsonl, write_tiny_kg
from tuikit import SIZE, until_loaded, wait_for
from workbench.data.predictions import import_predictions
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run, load_samples
from workbench.tui.app import WorkbenchApp

pytestmark = pytest.mark.skipif(not lockguard.supported(), reason="reads /proc/self/fd (Linux)")

# Another process: open the database, write one row, close. The last connection to close
# checkpoints and deletes -wal and -shm, unless it sees another connection's lock.
OTHER_WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=10)
conn.execute("CREATE TABLE IF NOT EXISTS other_writes (who TEXT)")
conn.execute("INSERT INTO other_writes VALUES ('other')")
conn.commit()
conn.close()
"""


def _other_process_writes(db: Path) -> None:
    subprocess.run([sys.executable, "-c", OTHER_WRITER, str(db)], check=True, timeout=60)


# The CLI's main run for several verbs in one process, each as `workbench --db DB VERB...` runs it; the last line
# printed is their exit codes.
CLI_CALLS = """
import json, sys
from workbench.cli import main
print(json.dumps([main(argv) for argv in json.loads(sys.argv[1])]))
"""


def _workbench_calls(db: Path, commands: list[tuple]) -> subprocess.CompletedProcess:
    argvs = [["--db", str(db), *map(str, command)] for command in commands]
    return subprocess.run([sys.executable, "-c", CLI_CALLS, json.dumps(argvs)], capture_output=True, text=True,
                          timeout=300)


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def _count(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0]
    finally:
        conn.close()


def _sidecars(db: Path) -> tuple[bool, bool]:
    return Path(f"{db}-wal").exists(), Path(f"{db}-shm").exists()


@pytest.fixture
def answered_db(tmp_path, metaqa_template) -> Path:
    """MetaQA with one run, ``talk``, of 6 questions answered through the predictions import (no model)."""
    db = copy_db(metaqa_template, tmp_path / "wb.db")       # MetaQA imported as ``metaqa``
    store = open_store(db)
    try:
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=6), name="talk")
        run = get_run(store, "talk")
        sids = [r[0] for r in store.conn.execute("SELECT DISTINCT sid FROM events WHERE run_id = ?", (run.id,))]
        samples = {s.sid: s for s in load_samples(store, run.dataset_id)}
        rows = [{"sample_id": samples[sid].id, "cell_id": "k5-b256-score",
                 "prediction": f"{samples[sid].answers[0]}. It won an Oscar in 1999"} for sid in sids]
        import_predictions(store, run, write_jsonl(tmp_path / "answers.jsonl", rows))
    finally:
        store.close()
    return db


def test_the_guard_catches_a_python_open_of_a_file_sqlite_holds(tmp_path):
    db = tmp_path / "held.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    try:
        with pytest.raises(lockguard.LockDropHazard, match="held.db"):
            db.read_bytes()
        lockguard.hazards.clear()      # this test's hazard was on purpose
    finally:
        conn.close()
    assert db.read_bytes().startswith(b"SQLite format 3\x00")    # closed: reading it drops nothing


def test_a_second_open_store_keeps_the_first_connections_locks(answered_db):
    """The reproduction: hold a connection, open the store again in this process, let another process
    write and close. The -shm stays, and the first connection's later writes land."""
    first = sqlite3.connect(answered_db, isolation_level=None)
    first.execute("SELECT count(*) FROM runs").fetchone()       # a read: the WAL and its -shm are in use
    second = open_store(answered_db)
    second.close()
    _other_process_writes(answered_db)
    assert _sidecars(answered_db) == (True, True)
    first.execute("INSERT INTO other_writes VALUES ('first')")
    first.close()
    assert _integrity(answered_db) == "ok"
    conn = sqlite3.connect(answered_db)
    assert sorted(r[0] for r in conn.execute("SELECT who FROM other_writes")) == ["first", "other"]
    conn.close()


def test_the_tuis_worker_connections_keep_the_apps_locks(answered_db):
    """The TUI's own way: the app's connection stays open while each worker opens one of its own."""
    app = WorkbenchApp(answered_db)
    try:
        worker = app.open_store()
        worker.close()
        _other_process_writes(answered_db)
        assert _sidecars(answered_db) == (True, True)
        with app.store.transaction() as conn:
            conn.execute("INSERT INTO other_writes VALUES ('app')")
    finally:
        app.store.close()
    assert _integrity(answered_db) == "ok"
    conn = sqlite3.connect(answered_db)
    assert sorted(r[0] for r in conn.execute("SELECT who FROM other_writes")) == ["app", "other"]
    conn.close()


def test_a_reader_never_creates_a_database(tmp_path, capsys):
    from workbench.cli.main import main

    missing = tmp_path / "new-dir" / "x.db"
    assert main(["--db", str(missing), "datasets"]) == 1
    assert capsys.readouterr().err == f"error: {missing}: no such database\n"
    assert not missing.parent.exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    assert main(["--db", str(empty), "runs"]) == 1
    assert capsys.readouterr().err == f"error: {empty}: an empty file, not a workbench database (nothing to read)\n"
    assert empty.stat().st_size == 0 and _sidecars(empty) == (False, False)


async def test_the_tui_and_the_cli_write_one_database_and_both_sides_land(answered_db, tiny_dir, tmp_path,
                                                                          monkeypatch):
    """The TUI open, the CLI imports a KG and a dataset and verifies the run's claims, the TUI shows them
    live, then tags a sample and labels two claims: the file passes integrity_check and holds every write."""
    monkeypatch.setenv("WORKBENCH_ANNOTATOR", "ana")
    kg = write_tiny_kg(tmp_path / "kg")
    app = WorkbenchApp(answered_db, poll_seconds=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await until_loaded(pilot, "ledger")
        # One CLI process runs the three verbs one after the other (one interpreter start, not three).
        written = await asyncio.to_thread(_workbench_calls, answered_db, [
            ("dedup", "import", kg, "--name", "films"), ("import", tiny_dir, "--name", "tiny"),
            ("claims", "run", "talk", "--decomposer", "rule", "--verifiers", "lexical")])
        assert written.returncode == 0 and json.loads(written.stdout.splitlines()[-1]) == [0, 0, 0], written.stderr
        assert _sidecars(answered_db) == (True, True)      # the app's connection is still open: SQLite keeps them

        await pilot.press("d")                             # the CLI's import, live
        datasets = await until_loaded(pilot, "datasets")
        table = datasets.query_one("DataTable")
        await wait_for(pilot, lambda: any("tiny" in str(table.get_row_at(i)[0]) for i in range(table.row_count)),
                       what="the imported dataset in the Datasets table")

        await pilot.press("l")                             # back to the ledger, into its samples: tag one
        await until_loaded(pilot, "ledger")
        await pilot.press("enter")
        samples = await until_loaded(pilot, "samples")
        await pilot.press("A")
        await wait_for(pilot, lambda: len(samples.rows[0].tags) == 1, what="the tag stored")

        await pilot.press("T")                             # the CLI's claims, live: label two
        labels = await until_loaded(pilot, "labels")
        await wait_for(pilot, lambda: len(labels.items) > 1, what="the claims in the Labels queue")
        await pilot.press("y", "y")
        await wait_for(pilot, lambda: _count(answered_db, "claim_labels") == 2, what="two labels stored")
        await pilot.press("q")

    assert _integrity(answered_db) == "ok"
    conn = sqlite3.connect(answered_db)
    try:
        assert conn.execute("SELECT count(*) FROM kgs WHERE name = 'films'").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM datasets WHERE name = 'tiny'").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM claim_runs").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM tags WHERE tag = 'annotation-error'").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM claim_labels WHERE annotator = 'ana'").fetchone()[0] == 2
    finally:
        conn.close()
