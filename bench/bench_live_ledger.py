"""Benchmark: the TUI Ledger during a real run — how long after a job's commit the screen shows it.

Target: within 1 s of each job's commit. Run: ``python bench/bench_live_ledger.py [--jobs N] [--rounds R]``.
Each round imports sample_data/metaqa into a fresh database, plans a one-cell run of N questions
for the default model (SmolLM2, max 16 tokens), opens the real app on the Ledger (polling every
0.5 s, its default), and starts ``workbench resume`` in a subprocess. A watcher connection
notes when each new jobs-done count is committed; the test loop notes when the screen first
shows it (heading count and the cell's n). Also reported: the event rows each refresh read
(it must equal the jobs committed since the previous one). One JSON line per round, then a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workbench.data.importer import import_dataset  # noqa: E402
from workbench.runs.aggregate import LedgerReader  # noqa: E402
from workbench.runs.generation import GenerationConfig  # noqa: E402
from workbench.runs.sweep import SweepConfig, plan_sweep  # noqa: E402
from workbench.store import open_store  # noqa: E402
from workbench.tui.app import WorkbenchApp  # noqa: E402


async def one_round(db: Path, jobs: int) -> dict:
    refreshes = []
    original = LedgerReader.refresh

    def observed(self, *args, **kwargs):
        view = original(self, *args, **kwargs)
        if self.persist:  # the screen's long-lived reader, not the quick first preview
            refreshes.append((self.stats.rows_read, self.stats.changed, self.stats.rebuilt))
        return view

    LedgerReader.refresh = observed
    try:
        app = WorkbenchApp(db)
        async with app.run_test(size=(120, 40)) as pilot:
            while getattr(app.screen, "view", None) is None or not app.screen.loaded:
                await pilot.pause(0.05)
            screen = app.screen
            proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "--db", str(db), "resume", "live"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            watcher = sqlite3.connect(db)
            committed: dict[int, float] = {}
            shown: dict[int, float] = {}
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                await pilot.pause(0.02)
                now = time.monotonic()
                done = watcher.execute("SELECT count(*) FROM events WHERE score IS NOT NULL").fetchone()[0]
                committed.setdefault(done, now)
                report = screen.view.report if screen.view is not None else None
                if report is not None and report.rows and report.rows[0]["n"].value == report.jobs_done:
                    shown.setdefault(report.jobs_done, now)
                if proc.poll() is not None and jobs in shown:
                    break
            watcher.close()
    finally:
        LedgerReader.refresh = original
    lags = [shown[k] - committed[k] for k in range(1, jobs + 1) if k in shown and k in committed]
    later = refreshes[1:]
    return {"lags_s": [round(x, 3) for x in lags], "jobs_shown": len(lags),
            "rows_read_equal_changed": all(r == c for r, c, _ in later if not _),
            "rebuilt_after_first": any(b for _, _, b in later)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    lags: list[float] = []
    ok = True
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "live.db"
            store = open_store(db)
            import_dataset(store, REPO / "sample_data" / "metaqa", "metaqa")
            plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=args.jobs), name="live",
                       generation=GenerationConfig(max_tokens=16).as_dict())
            store.close()
            result = asyncio.run(one_round(db, args.jobs))
        print(json.dumps({"bench": "live_ledger", "round": r, **result}), flush=True)
        lags += result["lags_s"]
        ok = ok and result["rows_read_equal_changed"] and not result["rebuilt_after_first"]
    worst, median = max(lags), statistics.median(lags)
    ok = ok and worst < 1.0
    print(json.dumps({"bench": "live_ledger", "jobs_shown": len(lags), "median_lag_s": round(median, 3),
                      "max_lag_s": round(worst, 3), "target_s": 1.0, "pass": ok}))
    print(f"commit → shown on the Ledger: median {median:.3f} s, max {worst:.3f} s over {len(lags)} jobs "
          f"({'ok' if ok else 'MISS'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
