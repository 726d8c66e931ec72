"""A path the user gives means what the shell would have made of it, wherever it is given.

``~`` and ``~user`` are expanded by one function (workbench.paths), for inputs, model files, a
tokenizer's ``llama:PATH``, ``--db`` and ``--out`` alike: ``--db=~/w.db`` reaches the workbench
with its tilde, since a shell expands only at a word's start. A ``~user`` naming no user, an empty
path or a NUL byte is refused in one line, exit 2, and nothing is written; pathlib would have
raised a bare ``RuntimeError`` and its traceback.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from conftest import every_row
from dbtemplate import copy_of
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.errors import BadInput
from workbench.models.base import ModelError
from workbench.paths import expand_home, user_path

NOBODY = "~nouser_xyz"
P = f"{NOBODY}/data"
GRID = ["tiny", "--k", "1", "--budget", "64", "--format", "linear"]

# Every option and verb that takes a path, with the path where the user would put it.
PATH_VALUES = {
    "run --model": ["run", *GRID, "--name", "m", "--model", P],
    "run --model A,B": ["run", *GRID, "--name", "m", "--model", f"{P},default"],
    "run --prompt-file": ["run", *GRID, "--name", "m", "--prompt-file", P],
    "run --tokenizer llama:": ["run", *GRID, "--name", "m", "--tokenizer", f"llama:{P}"],
    "sweep --tokenizer llama:": ["sweep", *GRID, "--name", "t", "--tokenizer", f"llama:{P}"],
    "judge labels import": ["judge", "labels", "import", P],
    "import": ["import", P, "--name", "x"],
    "import (its name from the path)": ["import", P],
    "import --from ragchecker": ["import", "--from", "ragchecker", P, "--name", "r"],
    "corpus import": ["corpus", "import", P, "--name", "c"],
    "dedup import": ["dedup", "import", P, "--name", "k"],
    "predictions import": ["predictions", "import", P, "s"],
    "claims run --embedding-model": ["claims", "run", "s", "--decomposer", "rule", "--verifiers", "embedding",
                                     "--embedding-model", P],
    "claims run --nli-model": ["claims", "run", "s", "--decomposer", "rule", "--verifiers", "nli", "--nli-model", P],
    "retrieve --embedding-model": ["retrieve", "tiny", "--retriever", "dense", "--name", "d", "--embedding-model", P],
    "dedup run --embedding-model": ["dedup", "run", "kg", "--modes", "embedding", "--embedding-model", P],
    "export --out": ["export", "events", "s", "--out", P],
}


@pytest.fixture
def db(request, tmp_path) -> Path:
    """The tiny dataset imported as ``tiny`` and swept as run ``s`` (conftest's ``tiny_swept_db``, copied)."""
    return copy_of(request, "tiny_swept_db", tmp_path / "tiny-swept.db")


def refused(argv: list[str], db: Path, capsys) -> str:
    """Run the CLI on ``db``; check it exits 2 with one line on stderr and writes nothing; return that line."""
    before = every_row(db)
    code = main(["--db", str(db), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert every_row(db) == before
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize("case", sorted(PATH_VALUES))
def test_a_tilde_naming_no_user_is_one_line_and_exit_2_for_every_path_value(case, db, capsys):
    line = refused(PATH_VALUES[case], db, capsys)
    given = f"{P},default" if case == "run --model A,B" else P    # the value is named as it was given
    assert f"{given}: cannot expand {NOBODY}: no user named 'nouser_xyz' on this system" in line


def test_a_db_under_a_tilde_naming_no_user_is_refused_and_nothing_is_created(tiny_dir, tmp_path, monkeypatch, capsys):
    # Once: the tilde was taken as a directory name, and `import` created ./~nouser_xyz/ to hold the database.
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main([f"--db={P}/w.db", "import", str(tiny_dir), "--name", "tiny"]) == 2
    assert capsys.readouterr().err.strip() == (f"error: --db: {P}/w.db: cannot expand {NOBODY}: "
                                               "no user named 'nouser_xyz' on this system")
    assert list(cwd.iterdir()) == []


def test_an_input_db_and_out_given_with_a_tilde_are_under_home(tiny_dir, tmp_path, monkeypatch, capsys):
    """``~/tiny``, ``--db=~/w.db`` and ``--out=~/events.csv`` (no shell expanded them) are the home directory's."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    (home / "tiny").symlink_to(tiny_dir, target_is_directory=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    assert main(["--db=~/w.db", "import", "~/tiny"]) == 0
    assert main(["--db=~/w.db", "sweep", *GRID, "--name", "s"]) == 0
    assert main(["--db=~/w.db", "export", "events", "s", "--out=~/events.csv"]) == 0, capsys.readouterr().err
    assert (home / "w.db").is_file() and (home / "events.csv").read_text(encoding="utf-8").startswith("sample_id,")
    assert list(cwd.iterdir()) == []


def test_an_empty_input_path_is_refused_not_read_as_the_current_directory(db, tiny_dir, monkeypatch, capsys):
    # Path("") is ".": run from a dataset directory, `import ""` imported it.
    monkeypatch.chdir(tiny_dir)
    assert refused(["import", "", "--name", "x"], db, capsys) == "error: the path is empty; name a file or a directory"


def test_the_tui_import_dialog_says_why_a_tilde_path_cannot_be_imported():
    from workbench.tui.screens.datasets import directory_problem

    assert directory_problem(P) == f"{P}: cannot expand {NOBODY}: no user named 'nouser_xyz' on this system"


# -- workbench.paths itself -------------------------------------------------------------------
def test_tilde_and_tilde_user_expand_as_a_shell_does(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    me = pwd.getpwuid(os.getuid())
    assert user_path("~/a/b.db") == tmp_path / "a" / "b.db"
    assert user_path("~") == tmp_path
    assert user_path(f"~{me.pw_name}/x") == Path(me.pw_dir) / "x"
    assert user_path(Path("~/x")) == tmp_path / "x"


def test_any_other_path_is_left_as_it_is():
    """Only the tilde is rewritten: ``./-`` still names a file called -, a tilde inside a path is a letter."""
    for text in ("./-", "-", "dir/", "a/~b", "rel/x.db", "/abs/x", ""):
        assert expand_home(text) == text
    assert user_path("a/~b") == Path("a/~b")


def test_a_home_that_cannot_be_found_is_one_line_naming_the_option():
    with pytest.raises(BadInput) as refused_:
        user_path(f"{NOBODY}/m.gguf", "--model")
    assert str(refused_.value) == f"--model: {NOBODY}/m.gguf: cannot expand {NOBODY}: no user named 'nouser_xyz' on this system"


def test_tilde_without_home_or_a_password_entry_is_refused(monkeypatch):
    monkeypatch.delenv("HOME", raising=False)

    def no_entry(uid):
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(BadInput, match=r"^~/x: cannot expand ~: HOME is not set and this user has no home directory$"):
        user_path("~/x")


def test_a_nul_byte_or_an_empty_path_is_refused_in_one_line():
    with pytest.raises(BadInput, match=r"^--db: a\\0b: a path cannot hold a NUL byte$"):
        user_path("a\0b", "--db")
    with pytest.raises(BadInput, match=r"^--db: the path is empty; name a file or a directory$"):
        user_path("", "--db")


def test_a_layer_with_its_own_error_gets_it():
    """The model layer reports a path it cannot use as a ModelError, which each model option names."""
    with pytest.raises(ModelError, match="cannot expand ~nouser_xyz"):
        user_path(P, error=ModelError)
