"""Benchmark: the one-file HTML report of the 100k-sample × 50-cell run.

Target: < 10 s and a file < 20 MB. Run: ``python bench/bench_report.py [--db PATH] [--reps N]``.
Uses the 5M-event store of ``bench/bench_tui.py`` (generated there when ``--db`` does not exist;
the ledger state is built first if the store has none, and that build is reported apart: it
happens once per run, not per report). Prints one JSON line per measurement and a summary.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.report import build_report  # noqa: E402
from workbench.runs.report import ledger_reader, saved_state_exists  # noqa: E402
from workbench.store import open_store  # noqa: E402
from workbench.store.queries import get_run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path("/tmp/bench_incremental.db"))
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if not args.db.exists():
        from bench_tui import generate

        print(f"generating {args.db} ...", file=sys.stderr, flush=True)
        generate(args.db, log=lambda m: print(m, file=sys.stderr, flush=True))
    store = open_store(args.db)
    run = get_run(store, "bench")
    if not saved_state_exists(store, run):
        t = time.perf_counter()
        ledger_reader(store, run).refresh()
        print(json.dumps({"bench": "report", "group": "ledger state built first (once per run)",
                          "seconds": round(time.perf_counter() - t, 3)}), flush=True)
    times, sizes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):
            t = time.perf_counter()
            page = build_report(store, run)
            out = Path(tmp) / "report.html"
            out.write_text(page, encoding="utf-8")
            times.append(time.perf_counter() - t)
            sizes.append(out.stat().st_size)
    store.close()
    seconds, mb = statistics.median(times), max(sizes) / 1e6
    ok = seconds < 10 and mb < 20
    print(json.dumps({"bench": "report", "group": "report of the 5M-event run", "median_s": round(seconds, 3),
                      "values": [round(x, 3) for x in times], "mb": round(mb, 3), "target": "< 10 s, < 20 MB",
                      "pass": ok, "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
    print(f"report of 100k samples × 50 cells: {seconds:.2f} s median, {mb:.2f} MB  ({'ok' if ok else 'MISS'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
