"""No file the workbench reads on a user's word is its own database.

A process that reads its database with Python's ``open()`` drops, when it closes that
descriptor, every POSIX lock it holds on the file, SQLite's included. Another process's next
close then deletes the -wal and -shm under the open connection, and a row that other process
commits afterwards is lost while ``integrity_check`` still says ok. So every input path, and
every file a corpus import walks, is compared with the open databases (by name, and by device
and inode: a hard link counts) before anything opens it, and refused in one line, exit 2,
nothing written.

The suite's audit hook (tests/lockguard.py, autouse in conftest) fails any test in which Python
opens a file SQLite holds open: remove one reader's guard and its test here fails there.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE_META, every_row, write_tiny_kg
from dbtemplate import copy_of
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.store import open_store
from workbench.store.caches import index_cache


def insert_from_another_process(db: Path, value: str) -> None:
    """Another process adds a row and closes: the close that, after a lock drop, deletes the -wal."""
    code = (f"import sqlite3; c = sqlite3.connect({str(db)!r}); c.execute('PRAGMA busy_timeout = 5000'); "
            f"c.execute('INSERT INTO probe VALUES (?)', ({value!r},)); c.commit(); c.close()")
    subprocess.run([sys.executable, "-c", code], check=True)


# Each reading verb, with the database in place of the file it reads: what it would have opened with Python.
FILE_VERBS = {
    "judge labels import": lambda path: ["judge", "labels", "import", str(path)],
    "import --from ragchecker": lambda path: ["import", "--from", "ragchecker", str(path), "--name", "rag"],
    "import --from ragchecker-meta": lambda path: ["import", "--from", "ragchecker-meta", str(path), "--name", "m"],
    "import --from ragchecker-meta --baselines": lambda path: [
        "import", "--from", "ragchecker-meta", str(SAMPLE_META / "human_labeled_data.json"), "--name", "m",
        "--baselines", str(path)],
    "predictions import": lambda path: ["predictions", "import", str(path), "s"],
    "run --prompt-file": lambda path: ["run", "tiny", "--k", "1", "--budget", "64", "--format", "linear",
                                       "--prompt-file", str(path)],
}
# A verb that reads a directory: the directory it reads, with the database hard-linked in under a name it reads.
DIRECTORY_VERBS = {
    "corpus import": ("notes.md", ["corpus", "import"]),
    "import": ("samples.jsonl", ["import"]),
    "dedup import": ("kb.jsonl", ["dedup", "import"]),
}


@pytest.fixture
def db(request, tmp_path) -> Path:
    """The tiny dataset imported as ``tiny`` and swept as run ``s`` (conftest's ``tiny_swept_db``, copied), and a
    table for the probe rows."""
    path = copy_of(request, "tiny_swept_db", tmp_path / "tiny-swept.db")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE probe (value TEXT)")
    conn.close()
    return path


def linked_in(directory: Path, db: Path, name: str) -> Path:
    """``directory`` with the database hard-linked into it as ``name``, in place of a file of that name."""
    directory.mkdir(exist_ok=True)
    (directory / "real.md").write_text("# Real\n\nA note.\n", encoding="utf-8")
    (directory / name).unlink(missing_ok=True)
    os.link(db, directory / name)
    return directory / name


def argv_reading(verb: str, db: Path, tmp_path: Path, tiny_dir: Path) -> list[str]:
    if verb in FILE_VERBS:
        return FILE_VERBS[verb](db)
    name, words = DIRECTORY_VERBS[verb]
    directory = {"import": lambda: shutil.copytree(tiny_dir, tmp_path / "in"),
                 "dedup import": lambda: write_tiny_kg(tmp_path / "in")}.get(verb, lambda: tmp_path / "in")()
    return [*words, str(linked_in(Path(directory), db, name).parent), "--name", "odd"]


@pytest.mark.parametrize("verb", [*FILE_VERBS, *DIRECTORY_VERBS])
def test_the_database_given_as_an_input_is_refused_and_no_write_of_either_process_is_lost(verb, db, tmp_path,
                                                                                         tiny_dir, capsys):
    # The minimal reproduction: a process holding the database open (the TUI, a script) reads
    # it as an input; then two other processes and this one take turns writing.
    holder = open_store(db)
    try:
        with holder.transaction() as conn:
            conn.execute("INSERT INTO probe VALUES ('a1')")
        before = every_row(db)
        assert main(["--db", str(db), *argv_reading(verb, db, tmp_path, tiny_dir)]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "is the database" in err and str(db) in err, err
        assert "never reads its database as an input" in err
        assert every_row(db) == before
        insert_from_another_process(db, "B")
        # The other process's close left them: it knew this one still held the database.
        assert Path(f"{db}-wal").exists() and Path(f"{db}-shm").exists()
        with holder.transaction() as conn:
            conn.execute("INSERT INTO probe VALUES ('a2')")
        insert_from_another_process(db, "C")
    finally:
        holder.close()
    with sqlite3.connect(db) as conn:
        assert sorted(v for (v,) in conn.execute("SELECT value FROM probe")) == ["B", "C", "a1", "a2"]
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize("which", ["-wal", "-shm", "a symbolic link", "the index cache"])
def test_every_file_of_the_database_is_refused_as_an_input_by_any_name(which, db, tmp_path, capsys):
    holder = open_store(db)
    try:
        if which == "a symbolic link":
            path = tmp_path / "labels.jsonl"
            path.symlink_to(db)
            said = f"is the database {db}"
        elif which == "the index cache":
            cache = index_cache(db)
            cache.mkdir(exist_ok=True)
            path = cache / "labels.jsonl"
            path.write_text("{}\n", encoding="utf-8")
            said = f"the BM25 index cache of the database {db}"
        else:
            path = Path(f"{db}{which}")
            assert path.exists()       # WAL mode: both are there while the store is open
            said = f"is the {which[1:]} file of the database {db}"
        assert main(["--db", str(db), "judge", "labels", "import", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path}: ") and said in err, err
    finally:
        holder.close()


def test_the_database_is_refused_before_the_store_is_opened(db, capsys):
    # --db is known as the database from the start: the guard does not depend on the verb's order of work.
    assert main(["--db", str(db), "import", "--from", "ragchecker", str(db), "--name", "rag"]) == 2
    assert f"{db}: is the database {db}" in capsys.readouterr().err


def test_a_corpus_that_holds_the_database_under_another_name_writes_nothing(db, tmp_path, capsys):
    # Not skipped with a warning as a FIFO is: the user pointed at a tree holding their database.
    link = linked_in(tmp_path / "notes", db, "notes.md")
    before = every_row(db)
    assert main(["--db", str(db), "corpus", "import", str(link.parent), "--name", "notes"]) == 2
    assert capsys.readouterr().err == (f"error: {link}: is the database {db}; the workbench never reads its "
                                       "database as an input (name the file to read)\n")
    assert every_row(db) == before
