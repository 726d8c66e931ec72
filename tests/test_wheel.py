"""A built wheel is a working install: it carries the migrations and the TUI's stylesheet.

The checkout is installed editable, so every other test would pass even if a wheel (pip,
pipx) shipped without its data files. This one builds the wheel, installs it into a fresh
venv that cannot see the checkout, and opens a database with it.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from workbench.store.schema import MissingMigrations, apply_migrations

from conftest import REPO

PACKAGE_MIGRATIONS = sorted(p.stem for p in (REPO / "workbench" / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql"))

PROBE = """
import json, sqlite3, sys
from importlib.resources import files
import workbench
from workbench.store import open_store
store = open_store(sys.argv[1])
tables = [r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
migrations = [r[0] for r in store.conn.execute("SELECT name FROM _migrations ORDER BY id")]
tcss = files("workbench") / "tui" / "workbench.tcss"
print(json.dumps({"file": workbench.__file__, "tables": tables, "migrations": migrations,
                  "tcss": tcss.is_file() and len(tcss.read_text(encoding="utf-8"))}))
"""


def _source_copy(dest: Path) -> Path:
    # Build from a copy: an in-tree build would leave build/ behind in the shared checkout.
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")
    shutil.copy(REPO / "README.md", dest / "README.md")
    shutil.copy(REPO / "LICENSE", dest / "LICENSE")
    shutil.copytree(REPO / "workbench", dest / "workbench", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = _source_copy(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    # No build isolation, so nothing is downloaded: the dev extras pin the setuptools that
    # pyproject.toml's build-system asks for.
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "--no-cache-dir", "-q", "-w", str(out), str(src)],
                           timeout=180, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    (found,) = out.glob("dissipation_workbench-*.whl")
    return found


def test_the_wheel_holds_the_migrations_and_the_stylesheet(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(Path(n).stem for n in names if n.startswith("workbench/migrations/")) == PACKAGE_MIGRATIONS
    assert "workbench/tui/workbench.tcss" in names


def test_the_wheel_carries_the_apache_license_it_declares(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        text = archive.read(license_file).decode("utf-8")
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        fields = archive.read(metadata).decode("utf-8")
    assert text == (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert "License-Expression: Apache-2.0" in fields and "License-File: LICENSE" in fields


def test_an_installed_wheel_opens_a_database_with_the_full_schema(wheel, tmp_path):
    # A venv with no pip and no view of the checkout; a .pth line lends it the dependencies
    # already installed in .venv (a .pth line adds a directory but runs none of its .pth
    # files, so the editable install of the checkout stays invisible).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q", "--target",
                    str(site), str(wheel)], check=True, timeout=120, capture_output=True)

    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "WORKBENCH_DB")}
    probe = subprocess.run([str(python), "-c", PROBE, str(tmp_path / "wheel.db")], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)

    assert Path(seen["file"]).is_relative_to(site), seen["file"]
    assert not Path(seen["file"]).resolve().is_relative_to(REPO)
    assert seen["migrations"] == PACKAGE_MIGRATIONS
    assert {"datasets", "runs", "events", "generations", "claim_runs", "pipeline_runs", "dedup_runs"} \
        <= set(seen["tables"])
    assert seen["tcss"], "workbench/tui/workbench.tcss is missing from the installed package"


def test_no_migrations_is_an_error_not_an_empty_database(tmp_path):
    empty = tmp_path / "migrations"
    empty.mkdir()
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    with pytest.raises(MissingMigrations, match="no NNNN_\\*.sql migrations"):
        apply_migrations(conn, empty)
    with pytest.raises(MissingMigrations):
        apply_migrations(conn, tmp_path / "does-not-exist")
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0  # nothing was created
