"""A sequential run (``run --stop-when best|precision``) asks the model only until the sweep's question is answered.

The answers come from :class:`seqkit.Reader`, which reads them off the evidence shown (the
executor's rounds do not depend on the model); the sample data is MetaQA's first 150 questions over
a grid whose cells differ as their windows do. What is checked: the order is stored and kept,
stopped cells' jobs are skipped and never asked, the live run reaches exactly the decisions
and the call count a replay of the same order predicts, an interrupted run (Ctrl-C, kill -9)
resumes to the same decision asking nothing twice, and every reader (ledger, runs, compare,
report) says the run was sequential.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLE_METAQA, new_template, wait_for_rows
from genkit import ServedModel
from seqkit import Reader
from workbench.cli import main
from workbench.data.importer import import_dataset
from workbench.runs.executor import execute
from workbench.runs.generation import GenerationConfig
from workbench.runs.sequential import SequentialConfig, complete_answers, read_order, sequential_status
from workbench.runs.replay import simulate
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.lease import LeaseRecovered
from workbench.store.queries import get_run

GRID = SweepConfig(ks=(1, 5, 20), budgets=(32, 256), formats=("linear",), limit=150)
GEN = GenerationConfig(answer_format="text", max_tokens=8).as_dict()
BEST = SequentialConfig("best", alpha=0.05, tolerance=0.02, seed=0)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """MetaQA's first 150 questions with a complete run ``full`` of the grid (every job answered by the reader) and the sequential
    run ``seq`` planned over the same grid."""
    with new_template(tmp_path_factory, "seq.db") as store:
        plan_sweep(store, GRID, name="full", generation=GEN)
        # Its answers are cached under another model id: the sequential runs below ask their own.
        assert execute(store, get_run(store, "full"), backend=Reader(model_id="full-reader")).done == 900
        plan_sweep(store, GRID, name="seq", generation=GEN, sequential=BEST)
    return store.path


@pytest.fixture
def db(template, tmp_path) -> Path:
    return Path(shutil.copyfile(template, tmp_path / "seq.db"))


def statuses(store, run: str) -> dict[str, int]:
    return dict(store.conn.execute("SELECT e.status, count(*) FROM events e JOIN runs r ON r.id = e.run_id"
                                   " WHERE r.name = ? GROUP BY e.status", (run,)).fetchall())


def test_a_sequential_run_stores_one_seeded_order_of_its_samples(db):
    store = open_store(db)
    try:
        order = read_order(store, get_run(store, "seq"))
        sids = [sid for (sid,) in store.conn.execute("SELECT DISTINCT sid FROM events e JOIN runs r"
                                                     " ON r.id = e.run_id WHERE r.name = 'seq' ORDER BY sid")]
        assert len(sids) == 150 and sorted(order) == sids and order != sids     # every sample once, shuffled
        plan_sweep(store, GRID, name="again", generation=GEN, sequential=BEST)
        assert read_order(store, get_run(store, "again")) == order   # the seed decides it
    finally:
        store.close()


def test_the_live_run_makes_exactly_the_decisions_and_calls_a_replay_of_its_order_predicts(db):
    store = open_store(db)
    try:
        reader = Reader()
        report = execute(store, get_run(store, "seq"), backend=reader)
        status = sequential_status(store, get_run(store, "seq"))
        cells, scores, groups = complete_answers(store, get_run(store, "full"))
        sids = sorted(read_order(store, get_run(store, "seq")))    # the matrix's rows: the run's samples in sid order
        order = [sids.index(sid) for sid in read_order(store, get_run(store, "seq"))]
        predicted = simulate(scores, groups, np.array(order), BEST.settings)
        assert status.done and status.winner == cells[predicted.winner]
        assert [status.states[c] for c in cells] == list(predicted.cells)
        assert status.calls_used == predicted.calls == len(set(reader.generated)) == len(reader.generated)
        assert report.model_calls == predicted.calls     # a cell sharing a round's prompt is served from the cache
        assert status.calls_full == predicted.full_calls and status.calls_used < status.calls_full
        # Every job of a stopped cell past its stop is skipped, never asked.
        counts = statuses(store, "seq")
        assert counts["done"] == report.done == sum(s.answered for s in predicted.cells)
        assert counts["skipped"] == report.skipped == 900 - counts["done"] and "pending" not in counts
    finally:
        store.close()


def test_a_stopped_run_resumes_in_the_same_order_to_the_same_decision_asking_nothing_twice(db):
    store = open_store(db)
    try:
        run = get_run(store, "seq")
        first, stop = Reader(), threading.Event()
        original = first.generate

        def generate(*args, **kwargs):
            if len(first.generated) >= 40:
                stop.set()                      # Ctrl-C, the TUI's pause: the round in progress is finished
            return original(*args, **kwargs)

        first.generate = generate
        execute(store, run, backend=first, stop=stop)
        assert 40 <= len(first.generated) < 150 and "pending" in statuses(store, "seq")
        second = Reader()
        execute(store, run, backend=second)
        asked = first.generated + second.generated
        assert len(asked) == len(set(asked))                       # no prompt asked twice
        resumed = sequential_status(store, run)
        plan_sweep(store, GRID, name="whole", generation=GEN, sequential=BEST)
        execute(store, get_run(store, "whole"), backend=Reader())
        whole = sequential_status(store, get_run(store, "whole"))
        assert (resumed.winner, resumed.states, resumed.calls_used) == (whole.winner, whole.states, whole.calls_used)
    finally:
        store.close()


def test_kill_9_mid_run_then_resume_reaches_the_same_decision_and_repeats_no_answer(db, tmp_path):
    seqkit = Path(__file__).with_name("seqkit.py")
    proc = subprocess.Popen([sys.executable, str(seqkit), str(db), "seq", "0.01"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(seqkit.parent)})
    try:
        wait_for_rows(db, "SELECT count(*) FROM events e JOIN runs r ON r.id = e.run_id"
                          " WHERE r.name = 'seq' AND e.status = 'done'", 60, proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    store = open_store(db)
    try:
        run = get_run(store, "seq")
        done_before = statuses(store, "seq")["done"]
        before = {row for row in store.conn.execute("SELECT cell_id, sid, prediction FROM events"
                                                    " WHERE run_id = ? AND status = 'done'", (run.id,))}
        generations_before = store.conn.execute("SELECT count(*) FROM generations").fetchone()[0]
        resumed = Reader()
        with pytest.warns(LeaseRecovered, match=f"recovered the lease of pid {proc.pid}, which died"):
            execute(store, run, backend=resumed)
        after = {row for row in store.conn.execute("SELECT cell_id, sid, prediction FROM events"
                                                   " WHERE run_id = ? AND status = 'done'", (run.id,))}
        assert len(before) == done_before and before <= after      # nothing answered before was redone
        # Every prompt the resume generated is a new one: none generated before the kill, none twice.
        generations_after = store.conn.execute("SELECT count(*) FROM generations").fetchone()[0]
        assert resumed.generated and generations_after - generations_before == len(resumed.generated)
        status = sequential_status(store, run)
        plan_sweep(store, GRID, name="whole", generation=GEN, sequential=BEST)
        execute(store, get_run(store, "whole"), backend=Reader())
        assert status.winner == sequential_status(store, get_run(store, "whole")).winner
        assert store.conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        store.close()


def test_precision_asks_each_cell_until_its_interval_is_that_narrow(db):
    store = open_store(db)
    try:
        plan_sweep(store, GRID, name="precise", generation=GEN,
                   sequential=SequentialConfig("precision", alpha=0.05, tolerance=0.1, seed=3))
        execute(store, get_run(store, "precise"), backend=Reader())
        status = sequential_status(store, get_run(store, "precise"))
    finally:
        store.close()
    assert status.done and status.winner is None
    for state in status.states.values():
        # Every cell ends by its precision: a cell asked of every sample knows its mean exactly (width 0).
        assert state.stopped == "precision" and (state.hi - state.lo) / 2 <= 0.1


def test_every_reader_says_the_run_was_sequential_and_how_it_ended(db, capsys, tmp_path):
    store = open_store(db)
    try:
        execute(store, get_run(store, "seq"), backend=Reader())
    finally:
        store.close()
    assert main(["--db", str(db), "ledger", "seq", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    block = {r["cell_id"]: r["sequential"] for r in records if r["kind"] == "retrieval"}
    assert set(block) == {"k1-b32-linear", "k1-b256-linear", "k5-b32-linear", "k5-b256-linear",
                          "k20-b32-linear", "k20-b256-linear"}
    for cell in block.values():
        assert set(cell) == {"answered", "of", "lo", "hi", "stopped", "stopped_at_round", "versus", "same_as"}
        assert cell["of"] == 150 and cell["lo"] <= cell["hi"] and cell["stopped"] in ("best", "worse", "tied")
    # One winner: the cells called best are one arm (cells whose prompts were identical on every sample).
    assert len({cell["same_as"] or cid for cid, cell in block.items() if cell["stopped"] == "best"}) == 1
    assert main(["--db", str(db), "ledger", "seq"]) == 0
    text = capsys.readouterr().out
    assert "sequential run (best, α 0.05, tolerance 0.02, seed 0)" in text and "do not hold under stopping" in text
    assert "Sequential: decided at round" in text and "full-run S_llm" in text
    assert main(["--db", str(db), "runs"]) == 0
    assert "skipped (stopped when decided)" in capsys.readouterr().out
    assert main(["--db", str(db), "compare", "full", "seq", "--terms", "S_llm"]) == 0
    assert "B = seq is a sequential (best, α 0.05, tolerance 0.02, seed 0): decided at round" in capsys.readouterr().out
    assert main(["--db", str(db), "report", "seq", "--out", str(tmp_path / "r.html"), "--resamples", "50"]) == 0
    assert "Sequential (best, α 0.05, tolerance 0.02, seed 0)" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_ledger_replay_says_what_the_rule_would_have_used_named_and_covered(db, capsys):
    assert main(["--db", str(db), "ledger", "full", "--replay", "best", "--replays", "20", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["rule"], summary["replays"], summary["population"], summary["cells"]) == ("best", 20, 150, 6)
    assert 0 < summary["call_share_mean"] < 1 and summary["named_best"] == 20 and summary["covered"] == 20
    assert main(["--db", str(db), "ledger", "full", "--replay", "precision", "--precision", "0.1",
                 "--replays", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("replay of --stop-when precision (α 0.05, half-width 0.1) over 5 random orders (seed 0)")
    assert "intervals covered" in out and "named the best" not in out


def test_a_replay_needs_a_complete_run(db, capsys):
    assert main(["--db", str(db), "ledger", "seq", "--replay", "best"]) == 2
    assert capsys.readouterr().err == ("error: --replay needs a complete run: run 'seq' has 0 of its 900 grid jobs "
                                       "answered (a sequential run stops asking once decided: replay a run made without "
                                       "--stop-when)\n")


@pytest.mark.parametrize(("failed", "pending", "said"), [
    (3, 0, "`workbench resume full --retry-errors` asks the 3 failed jobs again"),
    (0, 2, "`workbench resume full` answers the 2 pending jobs"),
    (3, 2, "`workbench resume full --retry-errors` asks the 3 failed jobs again and answers the 2 pending"),
])
def test_a_replay_of_an_incomplete_run_names_the_command_that_completes_it(failed, pending, said, db, capsys):
    """Failed jobs are asked again only with --retry-errors: a plain `resume` would leave the run incomplete."""
    store = open_store(db)
    try:
        with store.transaction() as conn:
            ids = [r[0] for r in conn.execute("SELECT e.rowid FROM events e JOIN runs r ON r.id = e.run_id"
                                              " WHERE r.name = 'full' ORDER BY e.rowid LIMIT ?", (failed + pending,))]
            conn.executemany("UPDATE events SET status = ?, score = NULL WHERE rowid = ?",
                             [("error" if k < failed else "pending", i) for k, i in enumerate(ids)])
    finally:
        store.close()
    assert main(["--db", str(db), "ledger", "full", "--replay", "best"]) == 2
    assert capsys.readouterr().err == (f"error: --replay needs a complete run: run 'full' has {900 - failed - pending} "
                                       f"of its 900 grid jobs answered ({said})\n")


def test_a_replay_of_a_sweep_says_its_answers_are_imported_not_resumed(db, capsys):
    store = open_store(db)
    try:
        plan_sweep(store, GRID, name="sw")         # no model: its answers come from `predictions import`
    finally:
        store.close()
    assert main(["--db", str(db), "ledger", "sw", "--replay", "best"]) == 2
    assert capsys.readouterr().err == ("error: --replay needs a complete run: run 'sw' has 0 of its 900 grid jobs "
                                       "answered (a sweep has no model: import its answers with "
                                       "`workbench predictions import FILE sw`)\n")


@pytest.mark.parametrize(("argv", "said"), [
    (["--stop-when", "best", "--oracle"], "--stop-when: a sequential run weighs its grid cells; the oracle controls"),
    (["--precision", "0.1"], "--precision: only with --stop-when precision"),
    (["--stop-when", "precision", "--tolerance", "0.1"], "--tolerance: only with --stop-when best"),
    (["--alpha", "0.1"], "--alpha: only with --stop-when best or precision"),
])
def test_stopping_options_are_checked_before_anything_is_written(argv, said, db, capsys):
    assert main(["--db", str(db), "run", "metaqa", "--k", "1", "--budget", "32", "--format", "linear", *argv]) == 2
    assert capsys.readouterr().err.startswith(f"error: {said}")


def test_a_served_sequential_run_killed_and_resumed_ends_with_the_rerun_decision_asking_nothing_twice(tmp_path):
    """Through the CLI, as a user runs it, against a served model (tests/genkit.py: the Reader's answers, each
    when the test allows it): the killed-and-resumed run must reach the decision the same rule reaches on the
    same answers (a second run served from the cache), and each distinct prompt is generated once."""
    db = tmp_path / "wb.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    store.close()
    with ServedModel(paced=True) as model:
        argv = ["run", "metaqa", "--limit", "16", "--k", "1,20", "--budget", "64", "--format", "linear",
                "--max-tokens", "12", "--n-ctx", "1024", "--stop-when", "best", "--tolerance", "0.3", *model.options]
        cli = [sys.executable, "-m", "workbench.cli", "--db", str(db)]
        proc = subprocess.Popen([*cli, *argv, "--name", "seq"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            model.allow(3)                # three answers, then the kill with the round's other jobs in flight
            wait_for_rows(db, "SELECT count(*) FROM events WHERE status = 'done'", 3, proc)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait()
            model.release()
        assert main(["--db", str(db), "resume", "seq"]) == 0
        assert main(["--db", str(db), *argv, "--name", "again"]) == 0      # every answer from the cache
    store = open_store(db)
    try:
        seq, again = (sequential_status(store, get_run(store, name)) for name in ("seq", "again"))
        assert seq.done and (seq.winner, seq.states, seq.calls_used) == (again.winner, again.states, again.calls_used)
        generated = store.conn.execute("SELECT count(*) FROM generations").fetchone()[0]
        asked = store.conn.execute("SELECT count(DISTINCT gen_key) FROM events WHERE status = 'done'").fetchone()[0]
        assert generated == asked == seq.calls_used                      # no prompt generated twice
        assert store.conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        store.close()
