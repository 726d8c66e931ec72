"""Every import says what its input path is when it cannot read it: "not found" only where nothing
is, otherwise a directory, a FIFO, a link loop, a device, or ``-``, each named as such, in one line,
exit 2, nothing written. A FIFO or a device is looked at, never opened (a FIFO would block the
import until a writer came; /dev/zero would never end)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from conftest import every_row, write_tiny_kg
from dbtemplate import copy_of
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main

# What the path is made into, and what the refusal must call it.
ODD_PATHS = {
    "directory": "is a directory",
    "fifo": "is a FIFO",
    "loop": "is a symbolic link loop",
    "devzero": "is a character device",
    "dangling": "is a symbolic link to nothing",
}


def make(path: Path, how: str) -> Path:
    """Put something other than a readable file at ``path``."""
    if how == "directory":
        path.mkdir()
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "loop":
        path.symlink_to(path.name)
    elif how == "devzero":
        path.symlink_to("/dev/zero")
    elif how == "dangling":
        path.symlink_to("nowhere")
    return path


@pytest.fixture
def db(request, tmp_path) -> Path:
    """The tiny dataset imported as ``tiny`` and swept as run ``s`` (conftest's ``tiny_swept_db``, copied)."""
    return copy_of(request, "tiny_swept_db", tmp_path / "tiny-swept.db")


def refused(argv: list[str], db: Path, capsys, fifo: Path | None = None) -> str:
    """Run the CLI; check it exits 2 in one line and writes nothing; return that line.

    Run in a thread: an import that opened a FIFO would wait for a writer for ever. After a
    while one is supplied (opening the FIFO's other end releases the reader) and the test fails.
    """
    before = every_row(db)
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("code", main(["--db", str(db), *argv])))
    worker.start()
    worker.join(60)
    if worker.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join()
        pytest.fail(f"{argv}: the import opened {fifo} and waited on it")
    err = capsys.readouterr().err
    assert result["code"] == 2, err
    assert every_row(db) == before
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# A file a verb reads, given directly: each verb's argv around the path.
FILE_VERBS = {
    "predictions import": lambda path: ["predictions", "import", str(path), "s"],
    "judge labels import": lambda path: ["judge", "labels", "import", str(path)],
    "import --from ragchecker": lambda path: ["import", "--from", "ragchecker", str(path), "--name", "rag"],
}


@pytest.mark.parametrize("how", sorted(ODD_PATHS))
@pytest.mark.parametrize("verb", sorted(FILE_VERBS))
def test_an_input_file_that_is_not_a_file_is_named_as_what_it_is(verb, how, db, tmp_path, capsys):
    path = make(tmp_path / "input.jsonl", how)
    line = refused(FILE_VERBS[verb](path), db, capsys, fifo=path if how == "fifo" else None)
    assert f"{path}: {ODD_PATHS[how]}" in line and "not found" not in line
    missing = tmp_path / "absent.jsonl"
    assert f"{missing}: not found" in refused(FILE_VERBS[verb](missing), db, capsys)


# A directory a verb reads, and the file in it that is made odd.
DIRECTORY_VERBS = {
    "import": (["import"], "samples.jsonl"),
    "dedup import": (["dedup", "import"], "kb.jsonl"),
}


@pytest.mark.parametrize("how", sorted(ODD_PATHS))
@pytest.mark.parametrize("verb", sorted(DIRECTORY_VERBS))
def test_a_file_of_an_input_directory_that_is_not_a_file_is_named_as_what_it_is(verb, how, db, tiny_dir,
                                                                                 tmp_path, capsys):
    words, fname = DIRECTORY_VERBS[verb]
    directory = shutil.copytree(tiny_dir, tmp_path / "in") if verb == "import" else write_tiny_kg(tmp_path / "in")
    (directory / fname).unlink()
    path = make(directory / fname, how)
    line = refused([*words, str(directory), "--name", "odd"], db, capsys, fifo=path if how == "fifo" else None)
    assert f"{path}: {ODD_PATHS[how]}" in line and "not found" not in line
    (path.rmdir if how == "directory" else path.unlink)()
    assert f"{path}: not found" in refused([*words, str(directory), "--name", "odd"], db, capsys)


def test_an_optional_file_that_is_a_fifo_is_refused_not_passed_over(db, tiny_dir, tmp_path, capsys):
    # Once: retrieval.jsonl as a FIFO imported a dataset without its retrieval runs, unsaid.
    directory = shutil.copytree(tiny_dir, tmp_path / "in")
    (directory / "retrieval.jsonl").unlink()
    fifo = make(directory / "retrieval.jsonl", "fifo")
    line = refused(["import", str(directory), "--name", "odd"], db, capsys, fifo=fifo)
    assert f"{fifo}: is a FIFO" in line


DASH_VERBS = {
    "import": (["import", "-", "--name", "x"], "name a directory"),
    "corpus import": (["corpus", "import", "-", "--name", "x"], "name a directory"),
    "dedup import": (["dedup", "import", "-", "--name", "x"], "name a directory"),
    "predictions import": (["predictions", "import", "-", "s"], "name a file"),
    "judge labels import": (["judge", "labels", "import", "-"], "name a file"),
    "import --from ragchecker": (["import", "--from", "ragchecker", "-", "--name", "x"], "name a file"),
}


@pytest.mark.parametrize("verb", sorted(DASH_VERBS))
def test_a_dash_is_not_read_as_stdin_and_says_so(verb, db, capsys):
    argv, way_out = DASH_VERBS[verb]
    assert refused(argv, db, capsys) == f"error: `-` (stdin) is not accepted here: {way_out}"


@pytest.mark.parametrize("verb", ["import", "corpus import", "dedup import"])
def test_a_directory_verb_given_a_file_or_a_fifo_says_which(verb, db, tmp_path, capsys):
    words = verb.split()
    afile = tmp_path / "kb.jsonl"
    afile.write_text("{}\n", encoding="utf-8")
    assert f"{afile}: is a regular file, not a directory" in refused([*words, str(afile), "--name", "x"], db, capsys)
    fifo = make(tmp_path / "pipe", "fifo")
    assert f"{fifo}: is a FIFO, not a directory" in refused([*words, str(fifo), "--name", "x"], db, capsys, fifo=fifo)
    missing = tmp_path / "nowhere"
    assert f"{missing}: not found" in refused([*words, str(missing), "--name", "x"], db, capsys)
