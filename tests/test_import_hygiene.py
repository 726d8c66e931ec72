"""The core never imports Textual: only workbench.tui may (docs/design.md §1)."""

import pkgutil
import subprocess
import sys

import workbench

# Every module outside workbench.tui, found by walking the package: a new one is checked too.
CORE_MODULES = sorted(
    m.name for m in pkgutil.walk_packages(workbench.__path__, "workbench.")
    if not (m.name == "workbench.tui" or m.name.startswith("workbench.tui.")))


def test_core_modules_load_without_textual():
    code = (
        "import importlib, sys\n"
        f"for m in {CORE_MODULES!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core imported textual modules: {out.stdout.strip()}"


def test_cli_run_end_to_end_does_not_load_textual(tmp_path):
    code = (
        "import sys\n"
        "from workbench.cli import main\n"
        f"main(['--db', {str(tmp_path / 'x.db')!r}, 'datasets'])\n"
        "assert not any(m.startswith('textual') for m in sys.modules), 'textual loaded'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_a_cli_verb_starts_without_pandas_and_the_analysis_api_still_has_it(tmp_path):
    """pandas was most of every verb's start-up, loaded only by sqlite_utils (workbench/store/sqlitelib.py):
    a verb that needs no DataFrame starts without it, and the analysis API, imported after, gets it whole."""
    code = (
        "import sys\n"
        "from workbench.cli import main\n"
        f"main(['--db', {str(tmp_path / 'x.db')!r}, 'datasets'])\n"
        "print('pandas' in sys.modules)\n"
        "import workbench.analysis as analysis\n"
        "import pandas\n"
        "print(pandas.DataFrame({'a': [1]}).shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-3:-1] == ["False", "(1, 1)"], out.stdout
