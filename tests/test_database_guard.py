"""Only SQLite opens the database: the run-time guard and the files the workbench opens of its own accord.

Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
included; a Python open of the database (or its -wal or -shm) while a connection is open lets
another process checkpoint and delete the -wal under that connection, and a commit is lost. The
guard is the product's, not the tests': once a store opens a database, an audit hook refuses any
Python-level open of that database's files in the process, whichever module asks. The files the
workbench opens without a user naming them (the BM25 index cache, the model slot) go through the
one guarded open and are refused or rebuilt beside, never read or written through.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import every_row
from dbtemplate import copy_of
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.dbfiles import DatabaseFileRefused, guarded_open, read_regular, write_new
from workbench.errors import BadInput
from workbench.store import open_store

STRAY_OPENS = r"""
import io, os, sys
from pathlib import Path
import numpy as np
from workbench.dbfiles import DatabaseFileRefused
from workbench.store import open_store

db = Path(sys.argv[1])
store = open_store(db)
os.link(db, db.with_name("hard-link"))
store.conn.execute("CREATE TABLE IF NOT EXISTS t (x)")      # the -wal exists now
attempts = {
    "open(db)": lambda: open(db, "rb"),
    "io.open(db-wal)": lambda: io.open(f"{db}-wal", "rb"),
    "os.open(db-shm)": lambda: os.open(f"{db}-shm", os.O_RDONLY),
    "Path(hard link).read_bytes()": lambda: db.with_name("hard-link").read_bytes(),
    "numpy.fromfile(db)": lambda: np.fromfile(db, dtype=np.uint8),
    "open(db-journal, 'w')": lambda: open(f"{db}-journal", "w"),
}
for name, attempt in attempts.items():
    try:
        attempt()
    except DatabaseFileRefused as exc:
        print(name, "refused:", str(exc).split(";")[0])
    else:
        print(name, "OPENED")
store.close()
print("after close:", len(open(db, "rb").read(16)), "bytes read")
"""


def test_a_stray_python_open_of_an_open_database_is_refused_in_any_module(tmp_path):
    """In a product process (no test hook in it), every way Python opens a file is refused on the database's
    files while the store has it open, by name or by hard link; once the store closed, the file is the user's."""
    db = tmp_path / "wb.db"
    done = subprocess.run([sys.executable, "-c", STRAY_OPENS, str(db)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        f"open(db) refused: {db}: is the database {db}",
        f"io.open(db-wal) refused: {db}-wal: is the wal file of the database {db}",
        f"os.open(db-shm) refused: {db}-shm: is the shm file of the database {db}",
        f"Path(hard link).read_bytes() refused: {tmp_path / 'hard-link'}: is the database {db}",
        f"numpy.fromfile(db) refused: {db}: is the database {db}",
        f"open(db-journal, 'w') refused: {db}-journal: is the journal file of the database {db}",
        "after close: 16 bytes read",
    ]
    assert not Path(f"{db}-journal").exists()


def test_the_one_guarded_open_refuses_a_database_file_by_any_name_before_opening_it(tmp_path):
    store = open_store(tmp_path / "wb.db")
    try:
        link = tmp_path / "notes.txt"
        os.link(store.path, link)
        for path in (store.path, link, Path(f"{store.path}-wal"), tmp_path / "sub" / ".." / "wb.db"):
            with pytest.raises(DatabaseFileRefused, match="only SQLite opens a database's files"):
                guarded_open(path)
        with pytest.raises(DatabaseFileRefused):
            write_new(Path(f"{store.path}-journal"), b"x")
        assert not Path(f"{store.path}-journal").exists()
        # A refusal is a user's error (exit 2) and an OSError (a cache read that meets it rebuilds the cache).
        assert issubclass(DatabaseFileRefused, BadInput) and issubclass(DatabaseFileRefused, OSError)
    finally:
        store.close()


def test_the_guarded_open_never_waits_on_a_fifo_and_creates_only_new_files(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="is a FIFO, not a regular file"):
        read_regular(fifo)                      # would block for ever without O_NONBLOCK and the stat
    write_new(tmp_path / "new", b"made")
    assert read_regular(tmp_path / "new") == b"made"
    with pytest.raises(FileExistsError):
        write_new(tmp_path / "new", b"over")    # O_EXCL: never written through what is there
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="is a symbolic link"):
        write_new(tmp_path / "link", b"x")      # nor through a dangling link
    assert not (tmp_path / "elsewhere").exists()


# -- the BM25 index cache ------------------------------------------------------------------------------------

@pytest.fixture
def retrieved(request, tmp_path) -> tuple[Path, Path]:
    """A copy of the tiny dataset with a BM25 retrieval stored, and its cached index directory."""
    db = copy_of(request, "tiny_swept_db", tmp_path / "wb.db")
    assert main(["--db", str(db), "retrieve", "tiny", "--retriever", "bm25", "--name", "b1"]) == 0
    [index] = Path(f"{db}.indexes").iterdir()
    return db, index


@pytest.mark.parametrize("name", ["vocab.json", "workbench_bm25.json", "data.bin"])
def test_a_cache_file_that_is_a_hard_link_to_the_database_is_never_opened_the_index_is_rebuilt_beside_it(
        name, retrieved, capsys):
    """The reproduction of a lost write: bm25s used to read its cache with Python's open(), so a cache file
    hard-linked to the database was opened and closed under the open connection (the suite's lock guard
    fails any such open). Now the guarded open refuses it unopened, the index is rebuilt in a new directory
    renamed into place, and the retrieval is stored."""
    db, index = retrieved
    (index / name).unlink()
    os.link(db, index / name)
    capsys.readouterr()

    assert main(["--db", str(db), "retrieve", "tiny", "--retriever", "bm25", "--name", "b2"]) == 0

    err = capsys.readouterr().err
    assert err == (f"note: the BM25 index {index} is damaged ({index / name}: is the database {db}; only SQLite "
                   "opens a database's files (closing any other descriptor of them drops SQLite's locks)); "
                   "rebuilding it\n")
    assert os.stat(db).st_nlink == 1                      # the link was removed, not written through
    assert not os.path.samestat(os.stat(index / name), os.stat(db))
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("SELECT count(*) FROM retrievals WHERE retriever = 'b2'").fetchone()[0] == 3
    finally:
        con.close()
    assert main(["--db", str(db), "retrieve", "tiny", "--retriever", "bm25", "--name", "b3"]) == 0
    assert capsys.readouterr().err == ""                  # the rebuilt index loads


def test_a_cache_file_of_another_size_than_its_metadata_records_is_not_read(retrieved, capsys):
    """A 2 GiB sparse file in place of an index array used to be read whole (60 s, 10 GB) before it was
    found damaged; its size alone now says so, and it is never read."""
    db, index = retrieved
    with open(index / "data.bin", "r+b") as fh:
        fh.truncate(2 << 30)
    capsys.readouterr()

    assert main(["--db", str(db), "retrieve", "tiny", "--retriever", "bm25", "--name", "b2"]) == 0

    err = capsys.readouterr().err
    assert err.startswith(f"note: the BM25 index {index} is damaged ({index / 'data.bin'}: 2,147,483,648 bytes, "
                          "its metadata says ")
    assert (index / "data.bin").stat().st_size < 1 << 20


# -- the model slot ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("slot", ["the database", "its -wal", "a hard link to it"])
def test_a_model_slot_that_names_the_database_is_refused_before_anything_is_written(slot, tmp_path, request,
                                                                                    monkeypatch, capsys):
    """WORKBENCH_MODEL_SLOT naming the database used to truncate it to 0 bytes (and its -wal to leave "not a
    database"); the slot now goes through the guarded open, and is checked before the run is planned."""
    db = copy_of(request, "tiny_swept_db", tmp_path / "wb.db")
    path = {"the database": db, "its -wal": Path(f"{db}-wal"), "a hard link to it": tmp_path / "slot.lock"}[slot]
    if slot == "a hard link to it":
        os.link(db, path)
    monkeypatch.setenv("WORKBENCH_MODEL_SLOT", str(path))
    before, digest = every_row(db), hashlib.sha256(db.read_bytes()).hexdigest()

    code = main(["--db", str(db), "run", "tiny", "--k", "1", "--budget", "32", "--format", "linear",
                 "--max-tokens", "4", "--name", "slotted"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: WORKBENCH_MODEL_SLOT={path}: is ")
    assert err.endswith("set WORKBENCH_MODEL_SLOT to another file, or to off\n") and err.count("\n") == 1
    assert every_row(db) == before
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_a_verb_that_ends_before_opening_its_database_leaves_no_announcement(tmp_path, capsys):
    """`--db` is announced before the verb runs (an input naming it is refused before the store opens); once the
    verb ends, opened or not, the announcement goes: a process calling the CLI many times (a script, a test worker)
    would otherwise check the inode of every database it ever named at each guarded open."""
    from workbench import dbfiles

    db = tmp_path / "never-opened.db"
    assert main(["--db", str(db), "export", "events", "r", "--out", str(tmp_path / "no" / "x.csv")]) == 2
    assert not db.exists()                                               # refused before any store opened
    capsys.readouterr()
    assert os.path.realpath(db) not in dbfiles.announced()
    assert os.path.realpath(db) in dbfiles.open_database_paths()        # its name stays refused
