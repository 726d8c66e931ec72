"""The tree is lint-clean: `ruff check .` finds nothing (its rules are pyproject.toml's [tool.ruff]).

`just test` runs ruff before pytest; this test makes `pytest` alone fail on an unused import, an unused
variable or an f-string without a placeholder too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

RUFF = Path(sys.executable).with_name("ruff")


def test_ruff_finds_nothing_in_the_tree():
    done = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", "."], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"ruff check . found:\n{done.stdout}{done.stderr}"


def test_the_projects_rules_catch_unused_names_f_strings_without_placeholders_and_trailing_spaces():
    # Linted as a file of the package, under pyproject.toml's rules: a config ruff did not pick up, or one
    # that dropped these rules, would pass the tree above while letting these back in. Trailing spaces (W291)
    # are past ruff's defaults: they show that the project's selection is the one in force.
    leftovers = "import os\n\n\ndef f():\n    unused = 1  \n    return f\"no placeholder\"\n"
    done = subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise",
                           "--stdin-filename", "workbench/leftovers.py", "-"], cwd=REPO, input=leftovers,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    for rule in ("F401", "F841", "F541", "W291"):
        assert f" {rule} " in done.stdout, done.stdout
