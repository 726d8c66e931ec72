"""Faults of the database file itself: each is one `error:` line and exit 1, and nothing is written.

A path that is not a workbench database (a text file, a truncated copy, a directory, another
program's SQLite file), a read-only file, directory or filesystem, a full disk, a database
written by a newer workbench, and an SQLite error deep inside a verb.

Read-only files are made read-only for real. Root ignores file modes, so as root the CLI runs
without CAP_DAC_OVERRIDE (``setpriv --bounding-set``), under which root obeys them like any
user; read-only filesystems are read-only bind mounts, and a full disk is a small tmpfs, each
in a private mount namespace (``unshare --mount``) that vanishes with the process. Those
tests are skipped, saying why, where the machine does not allow that.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.data.importer import import_dataset
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.schema import migration_files

from conftest import copy_db, tiny_dir, write_jsonl

REPO = Path(__file__).resolve().parents[1]
KNOWN_LAST = migration_files()[-1].name[: -len(".sql")]  # grows with every migration: never hard-coded

# Runs CLI calls (and plain SQL reads) in one fresh process and prints what each gave, so
# that a test pays for one interpreter start however many verbs it tries.
DRIVER = r"""
import contextlib, io, json, sqlite3, sys, traceback
import workbench.runs.report
from workbench.cli import main

results = []
for call in json.loads(sys.argv[1]):
    if "cache_min_events" in call:
        workbench.runs.report._CACHE_MIN_EVENTS = call["cache_min_events"]
        continue
    if "sql" in call:
        db, query = call["sql"]
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        results.append({"rows": conn.execute(query).fetchall()})
        conn.close()
        continue
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(call["argv"])
        except BaseException:
            code, err = "traceback", io.StringIO(traceback.format_exc())
    results.append({"argv": call["argv"], "code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(results))
"""


def drive(calls: list[dict], prefix: list[str] = ()) -> list[dict]:
    """Run ``calls`` through :data:`DRIVER` behind ``prefix`` (setpriv, unshare ...)."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORKBENCH_DB", "WORKBENCH_DEBUG")}
    proc = subprocess.run([*prefix, sys.executable, "-c", DRIVER, json.dumps(calls)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@functools.cache
def _works(*command: str) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def obeying_file_modes() -> list[str]:
    """A prefix under which this process cannot write a file its mode makes read-only."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    if not _works(*prefix, "true"):
        pytest.skip("running as root and `setpriv --bounding-set` is not available: root would ignore "
                    "the file modes this test relies on")
    return prefix


def private_mounts() -> list[str]:
    """``unshare --mount``: mounts made inside die with the process. Skips where it is not allowed."""
    prefix = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0 or not _works(*prefix, "mount", "-t", "tmpfs", "tmpfs", "/mnt"):
        pytest.skip("needs root with mount rights (unshare --mount, mount -t tmpfs) to make a read-only "
                    "or full filesystem")
    return prefix


def cli(capsys, *argv) -> tuple[int, str]:
    """Run the real CLI in-process: (exit code, stderr)."""
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def files_in(directory: Path) -> dict[str, bytes]:
    """Every file of ``directory`` with its bytes: "nothing was written" compares two of these."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def swept_once(tmp_path_factory) -> Path:
    """The tiny dataset with a model-free sweep ``s``, closed cleanly: built once (conftest's ``tiny_dir``)."""
    directory = tmp_path_factory.mktemp("swept")
    path = directory / "wb.db"
    store = open_store(path)
    import_dataset(store, tiny_dir.__wrapped__(directory), "tiny")
    plan_sweep(store, SweepConfig(ks=(1, 2), budgets=(64,), formats=("linear",)), name="s")
    store.close()
    return path


@pytest.fixture
def swept(tmp_path, swept_once) -> Path:
    """That database, this test's copy, in a directory of its own."""
    directory = tmp_path / "data"
    directory.mkdir()
    path = copy_db(swept_once, directory / "wb.db")
    assert sorted(p.name for p in directory.iterdir()) == ["wb.db"]  # no -wal or -shm left
    return path


# Every verb that only reads, as the user would type it (stdout for the exports).
READING = [["datasets"], ["runs"], ["ledger", "s"], ["plot", "s"], ["export", "events", "s", "--out", "-"],
           ["export", "ledger", "s", "--out", "-"], ["prompts", "export", "s", "--out", "-"],
           ["tags", "export", "--out", "-"], ["retrieval", "export", "tiny", "--out", "-"]]


def reading_calls(db: Path) -> list[dict]:
    # The ledger's cache is written only for large runs; lowering the bar makes this small
    # run take that path, which a read-only database must skip.
    return [{"cache_min_events": 0}] + [{"argv": ["--db", str(db), *verb]} for verb in READING]


def writing_calls(db: Path, tiny_dir: Path) -> list[dict]:
    return [{"argv": ["--db", str(db), "import", str(tiny_dir), "--name", "other"]},
            {"argv": ["--db", str(db), "tag", "q1", "alias-miss"]},
            {"argv": ["--db", str(db), "sweep", "tiny", "--k", "1", "--budget", "32", "--format", "score"]}]


def assert_reads_worked(results: list[dict]) -> None:
    for r in results:
        assert r["code"] == 0 and "error" not in r["err"] and "warning" not in r["err"], r
    assert results[0]["out"].startswith("tiny: ")           # datasets
    assert results[1]["out"].startswith("s: dataset tiny")  # runs
    assert results[2]["out"].startswith("run s · dataset tiny")  # ledger
    assert "S_vis" in results[2]["out"]


def assert_writes_refused(results: list[dict], message: str) -> None:
    for r in results:
        assert (r["code"], r["err"]) == (1, f"error: {message}\n"), r


# -- not a workbench database ---------------------------------------------------------------
@pytest.mark.parametrize("verb", [["datasets"], ["sweep", "--k", "1", "--budget", "8"]])
def test_a_text_file_given_as_the_database_is_refused_untouched(tmp_path, capsys, verb):
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping: eggs, flour\n" * 50)
    before = files_in(tmp_path)
    assert cli(capsys, "--db", notes, *verb) == (1, f"error: {notes}: not a workbench database (file is not SQLite)\n")
    assert files_in(tmp_path) == before


def test_a_truncated_database_is_refused_untouched(swept, capsys, tiny_dir):
    data = swept.read_bytes()
    swept.write_bytes(data[: len(data) // 2])
    before = files_in(swept.parent)
    message = (f"error: {swept}: not a usable workbench database (damaged or truncated: database disk image is "
               "malformed; SQLite SQLITE_CORRUPT)\n")
    assert cli(capsys, "--db", swept, "runs") == (1, message)
    assert cli(capsys, "--db", swept, "import", tiny_dir, "--name", "other") == (1, message)
    assert files_in(swept.parent) == before


def test_a_directory_given_as_the_database_is_refused(tmp_path, capsys):
    folder = tmp_path / "folder"
    folder.mkdir()
    assert cli(capsys, "--db", folder, "datasets") == (1, f"error: {folder}: not a workbench database (it is a directory)\n")
    assert list(folder.iterdir()) == []


def test_another_programs_sqlite_database_is_refused_not_migrated(tmp_path, capsys, tiny_dir):
    other = tmp_path / "photos.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    conn.execute("INSERT INTO photos (path) VALUES ('a.jpg')")
    conn.commit()
    conn.close()
    before = files_in(tmp_path)
    assert cli(capsys, "--db", other, "import", tiny_dir) == (
        1, f"error: {other}: not a workbench database (SQLite, but without the workbench's _migrations table: "
           "another program's database)\n")
    assert files_in(tmp_path) == before


# -- read-only ------------------------------------------------------------------------------
def test_a_read_only_file_is_read_by_reading_verbs_and_refused_by_the_others(swept, tiny_dir):
    swept.chmod(0o444)
    before = swept.read_bytes()
    results = drive(reading_calls(swept) + writing_calls(swept, tiny_dir), prefix=obeying_file_modes())
    assert_reads_worked(results[: len(READING)])
    assert_writes_refused(results[len(READING):],
                          f"{swept} is read-only: no write permission on the file (mode -r--r--r--, or an immutable flag)")
    assert swept.read_bytes() == before


def test_a_read_only_directory_is_read_without_creating_anything_in_it(swept, tiny_dir):
    # A WAL reader needs wb.db-shm beside the file; where it cannot be created the database
    # is opened immutable, so reading works and the directory stays exactly as it was.
    swept.parent.chmod(0o555)
    try:
        before = files_in(swept.parent)
        results = drive(reading_calls(swept) + writing_calls(swept, tiny_dir), prefix=obeying_file_modes())
        assert_reads_worked(results[: len(READING)])
        assert_writes_refused(results[len(READING):], f"{swept} is read-only: its directory {swept.parent} is not "
                                                      "writable (SQLite keeps wb.db-wal and -shm there)")
        assert files_in(swept.parent) == before
    finally:
        swept.parent.chmod(0o755)


def test_a_read_only_filesystem_is_read_and_refused_for_writes(swept, tiny_dir):
    mount_ro = ['sh', '-c', 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"', "sh",
                str(swept.parent)]
    before = files_in(swept.parent)
    results = drive(reading_calls(swept) + writing_calls(swept, tiny_dir), prefix=private_mounts() + mount_ro)
    assert_reads_worked(results[: len(READING)])
    assert_writes_refused(results[len(READING):], f"{swept} is read-only: it is on a read-only filesystem")
    assert files_in(swept.parent) == before


def test_a_writable_database_opens_read_write_even_for_a_reading_verb(swept):
    # So that pending migrations and the ledger's cache still land where they can.
    store = open_store(swept, readonly=True)
    assert not store.readonly
    store.close()


def test_a_read_only_open_leaves_no_wal_or_shm_behind_and_the_file_unchanged(swept):
    # Once: the analysis API's mode=ro open left wb.db-wal and wb.db-shm in the user's directory.
    from workbench import analysis

    before = swept.read_bytes()
    assert len(analysis.events(swept, "s")) == 6
    assert sorted(p.name for p in swept.parent.iterdir()) == ["wb.db"]
    assert swept.read_bytes() == before


def test_a_read_only_open_keeps_the_wal_files_another_connection_still_uses(swept):
    from workbench.store.db import open_readonly

    writer = sqlite3.connect(swept)             # e.g. a run in another process, its WAL open
    writer.execute("SELECT count(*) FROM runs").fetchone()
    reader = open_readonly(swept)
    reader.conn.execute("SELECT count(*) FROM events").fetchone()
    reader.close()
    assert {"wb.db-wal", "wb.db-shm"} <= {p.name for p in swept.parent.iterdir()}
    writer.execute("INSERT INTO tags (dataset_id, sid, tag, created_at) VALUES (1, 1, 'still-works', 'now')")
    writer.commit()
    writer.close()                               # the last one out removes them, as SQLite does
    assert sorted(p.name for p in swept.parent.iterdir()) == ["wb.db"]


# -- disk full ------------------------------------------------------------------------------
@pytest.fixture
def big_dir(tmp_path) -> Path:
    """A dataset of about a megabyte: more than the nearly full disk has left."""
    d = tmp_path / "big"
    d.mkdir()
    kb = [[f"Film number {i} " + "with a long title " * 8, "directed_by", f"Director {i}"] for i in range(3000)]
    write_jsonl(d / "kb.jsonl", [{"triple": t} for t in kb])
    write_jsonl(d / "samples.jsonl", [{"id": f"q{i}", "question": f"who directed film {i}", "answers": [f"Director {i}"],
                                       "gold_paths": [[kb[i]]]} for i in range(0, 3000, 10)])
    write_jsonl(d / "retrieval.jsonl", [{"sample_id": f"q{i}", "retriever": "bm25", "results": [{"triple": kb[i]}]}
                                        for i in range(0, 3000, 10)])
    return d


def test_a_full_disk_during_an_import_says_so_and_leaves_the_database_whole(swept, big_dir):
    disk = swept.parent.parent / "disk"
    disk.mkdir()
    # A tmpfs with room for the database, its -shm and a little more: the import cannot fit.
    size = swept.stat().st_size + 96 * 1024
    mount_small = ['sh', '-c', 'mount -t tmpfs -o size="$2" tmpfs "$1" && cp "$3" "$1/wb.db" && shift 3 && exec "$@"',
                   "sh", str(disk), str(size), str(swept)]
    db = disk / "wb.db"
    results = drive([{"argv": ["--db", str(db), "import", str(big_dir), "--name", "big"]},
                     {"sql": [str(db), "PRAGMA integrity_check"]},
                     {"sql": [str(db), "SELECT name FROM datasets ORDER BY id"]},
                     {"sql": [str(db), "SELECT count(*) FROM units"]}],
                    prefix=private_mounts() + mount_small)
    imported, integrity, names, units = results
    assert (imported["code"], imported["err"]) == (
        1, f"error: disk full while writing {db}: nothing was written (the last transaction was rolled back)\n")
    assert integrity["rows"] == [["ok"]]
    assert names["rows"] == [["tiny"]]
    assert units["rows"] == [[5]]  # the tiny KB alone: no unit of the big import survived


def test_a_transaction_sqlite_already_rolled_back_reports_the_real_error(tiny_store):
    # SQLite rolls a transaction back by itself on SQLITE_FULL; a second ROLLBACK used to
    # fail with "cannot rollback - no transaction is active" and hide the full disk.
    # max_page_count makes SQLite run out of room exactly as a full disk does.
    pages = tiny_store.conn.execute("PRAGMA page_count").fetchone()[0]
    tiny_store.conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    with pytest.raises(Exception) as caught:
        with tiny_store.transaction() as conn:
            for _ in range(50):
                conn.execute("INSERT INTO tags (dataset_id, sid, tag, created_at) VALUES (1, 1, hex(randomblob(2000)), '')")
    assert str(caught.value) == (f"disk full while writing {tiny_store.path}: nothing was written "
                                 "(the last transaction was rolled back)")
    assert not tiny_store.conn.in_transaction
    assert tiny_store.count("tags") == 0


# -- newer schema ---------------------------------------------------------------------------
def _from_the_future(path: Path, *, migration: str | None = "0099_future", user_version: int = 99) -> None:
    conn = sqlite3.connect(path)
    if migration:
        conn.execute("INSERT INTO _migrations (id, name, applied_at) VALUES (?, ?, '2031-01-01')",
                     (int(migration[:4]), migration))
    conn.execute(f"PRAGMA user_version = {user_version}")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(("migration", "schema"), [("0099_future", "0099_future"), (None, "0099")])
def test_a_database_from_a_newer_workbench_is_not_written(swept, capsys, tiny_dir, migration, schema):
    _from_the_future(swept, migration=migration)
    before = swept.read_bytes()
    message = (f"error: {swept} was written by a newer workbench (schema {schema}); this version knows up to "
               f"{KNOWN_LAST}: upgrade the workbench\n")
    assert cli(capsys, "--db", swept, "import", tiny_dir, "--name", "other") == (1, message)
    assert cli(capsys, "--db", swept, "tag", "q1", "alias-miss") == (1, message)
    assert swept.read_bytes() == before


def test_reading_verbs_still_read_a_newer_database_with_a_warning(swept, capsys):
    # Read-only, so nothing can be written whatever the newer schema means; the warning
    # says the figures come from a schema this version does not know.
    _from_the_future(swept)
    before = swept.read_bytes()
    assert main(["--db", str(swept), "runs"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("s: dataset tiny")
    assert err == f"warning: {swept} was written by a newer workbench (schema 0099_future); reading it read-only\n"
    assert swept.read_bytes() == before


def test_the_schema_number_is_also_kept_in_the_file_header(swept):
    # So that an older workbench can tell a newer database even without reading a table.
    conn = sqlite3.connect(swept)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == int(KNOWN_LAST[:4])
    conn.close()


# -- the last resort ------------------------------------------------------------------------
def _damage_the_units_table(path: Path) -> None:
    """Overwrite the units table's root page with garbage; the header and the schema stay sound."""
    conn = sqlite3.connect(path)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'units'").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(path, "r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xff" * page_size)


def test_an_sqlite_error_inside_a_verb_is_one_line_naming_the_database(swept, capsys, monkeypatch):
    _damage_the_units_table(swept)
    assert cli(capsys, "--db", swept, "datasets") == (
        1, f"error: {swept}: not a usable workbench database (damaged or truncated: database disk image is "
           "malformed; SQLite SQLITE_CORRUPT)\n")
    monkeypatch.setenv("WORKBENCH_DEBUG", "1")  # the traceback, for a bug report
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        main(["--db", str(swept), "datasets"])
