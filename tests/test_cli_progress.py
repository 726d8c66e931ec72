"""The CLI progress bar places a resumed run in the whole run, as the TUI and `workbench runs` do."""

from __future__ import annotations

import io
import subprocess
import sys
import threading

from workbench.data.importer import import_dataset
from workbench.models.registry import ExecOptions
from workbench.runs.generation import GenerationConfig
from workbench.progress import ProgressBar
from workbench.runs.executor import execute
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run

from conftest import SAMPLE_METAQA
from genkit import ServedModel


def test_the_bar_counts_the_run_overall_but_rates_only_this_execution():
    out = io.StringIO()
    bar = ProgressBar("run", stream=out)
    bar(2, 2, already=16, overall=18)
    line = out.getvalue().strip()
    assert "] 18/18 " in line and "#" * 30 in line
    out.truncate(0), out.seek(0)
    ProgressBar("run", stream=out)(2, 2)
    assert "] 2/2 " in out.getvalue()  # a fresh run: this execution is the run


def test_a_resumed_run_reports_its_overall_progress_on_the_command_line(tmp_path):
    """The answers come from a served stand-in (tests/genkit.py): the bar's subject is the run's jobs, not the text."""
    db = tmp_path / "wb.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    with ServedModel() as served:
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(128,), formats=("score",), limit=3), name="r",
                   generation=GenerationConfig(max_tokens=8, backend="openai", base_url=served.url,
                                               model="m").as_dict())
        stop = threading.Event()
        # Interrupt after the first job, as Ctrl-C would: 1 of 3 done (one request at a time, as a local model).
        first = execute(store, get_run(store, "r"), opts=ExecOptions(concurrency=1), stop=stop,
                        progress=lambda p: stop.set())
        assert first.stopped and first.done == 1
        store.close()
        proc = subprocess.run([sys.executable, "-m", "workbench.cli", "--db", str(db), "resume", "r"],
                              capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    bars = [line for line in proc.stderr.replace("\r", "\n").splitlines() if line.startswith("run [")]
    assert bars and "] 3/3 " in bars[-1], proc.stderr   # not "2/2": the run has 3 jobs, 1 done before
    assert "2 of 2 jobs done" in proc.stderr            # while the summary says what this execution did
