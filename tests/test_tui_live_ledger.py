"""The Ledger live during a run another process executes: each job's commit shows, and each refresh reads
only the events that changed, never the whole run (the latency is bench/bench_live_ledger.py's).

The run is the CLI's (`workbench resume`), its model served by tests/tuikit.py's PacedServer: each job
commits when the test lets it, so every commit can be seen on its own however fast the machine. What the
model says is not the subject, only that the screen follows what the other process writes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import copy_db
from tuikit import PATIENCE, SIZE, PacedServer, plan_served_run, until_loaded, wait_for
from workbench.runs.aggregate import LedgerReader
from workbench.tui.app import WorkbenchApp


@pytest.fixture
def served_live(tmp_path, metaqa_template):
    """MetaQA and ``live``, 6 questions planned for a served model that answers when the test lets it."""
    server = PacedServer()
    db = copy_db(metaqa_template, tmp_path / "live.db")
    plan_served_run(db, "live", server)
    yield db, server
    server.close()


async def test_the_ledger_follows_a_run_written_elsewhere_reading_only_the_changed_events(served_live, monkeypatch):
    live_db, server = served_live
    refreshes = []  # (jobs done in the view it returned, what the refresh read)
    original = LedgerReader.refresh

    def observed(self, *args, **kwargs):
        view = original(self, *args, **kwargs)
        done = int(round(sum(s.sums[0] for k, s in view.sums.items() if k.startswith("cell:"))))
        refreshes.append((self, done, self.stats))
        return view

    monkeypatch.setattr(LedgerReader, "refresh", observed)
    app = WorkbenchApp(live_db, poll_seconds=0.2)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_loaded(pilot, "ledger")
        assert screen.view.report.jobs_done == 0
        proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "--db", str(live_db), "resume", "live"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        watcher = sqlite3.connect(live_db)
        committed: dict[int, float] = {}   # jobs done → when the test first saw that count in the database
        shown: dict[int, float] = {}       # jobs done → when the screen first showed it (n of the cell too)

        def follow():
            now = time.monotonic()
            done = watcher.execute("SELECT count(*) FROM events WHERE score IS NOT NULL").fetchone()[0]
            committed.setdefault(done, now)
            view = screen.view
            if view is not None:
                row = view.report.rows[0]
                if row["n"].value == view.report.jobs_done:  # the cell's n is its scored samples
                    shown.setdefault(view.report.jobs_done, now)
            return shown

        try:
            for done in range(1, 7):       # one job at a time: the screen shows each before the next commits
                server.allow()
                await wait_for(pilot, lambda: done in follow(), step=0.02, what=f"job {done} shown")
            await wait_for(pilot, lambda: proc.poll() is not None and 6 in follow(), what="all 6 jobs shown")
        finally:
            server.release()
            proc.wait(timeout=PATIENCE)
            watcher.close()
        assert proc.returncode == 0, proc.stderr.read()
    # Each job's commit shows up on its own (two may commit between two refreshes). How fast is
    # measured by bench/bench_live_ledger.py, not asserted here: a loaded machine only slows it.
    assert len(set(shown) & set(range(1, 7))) >= 5, (committed, shown)
    kept = screen.readers["live"]  # the screen's long-lived reader (a quick first preview has its own)
    first, *later = [(done, stats) for reader, done, stats in refreshes if reader is kept]
    assert first[1].rebuilt  # the run's first read builds its state
    assert later and not any(stats.rebuilt or stats.loaded for _, stats in later)  # never a full scan again
    previous = first[0]
    for done, stats in later:
        # One event per job, and nothing else: the rows read are the delta.
        assert stats.rows_read == stats.changed == done - previous, refreshes
        previous = done
    assert previous == 6
