"""The benchmarks and scripts name only what the package has: a moved or renamed name fails here,
not an hour into `just bench`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*REPO.glob("bench/*.py"), *REPO.glob("scripts/*.py")])


def workbench_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every ``from workbench... import name`` in the file, nested ones too."""
    return [(node.lineno, node.module, alias.name)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "workbench"
            for alias in node.names]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_name_a_benchmark_or_script_imports_exists(path):
    missing = []
    for line, module, name in workbench_imports(path):
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{path.name}:{line}: {module}.{name}")
    assert missing == []


def test_the_checker_sees_a_missing_name(tmp_path):
    script = tmp_path / "gone.py"
    script.write_text("def f():\n    from workbench.store.queries import no_such_name\n")
    assert workbench_imports(script) == [(2, "workbench.store.queries", "no_such_name")]
    assert not hasattr(importlib.import_module("workbench.store.queries"), "no_such_name")
