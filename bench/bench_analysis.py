"""Benchmark: the analysis API's events frame, and the Parquet events export, on a 5M-event run.

Target: ``workbench.analysis.events(db, "bench")`` on the 100k-sample × 50-cell
store (5M events) in < 10 s, with < 2 GiB peak RSS.

Run: ``python bench/bench_analysis.py [--db PATH] [--reps N] [--out DIR]``. The store is
bench_tui's (:func:`bench_tui.generate`: one run "bench", about 1.5 GB). It is read at
``--db`` (default ``/tmp/bench_incremental.db``), and generated there first if missing,
which takes minutes and is not timed. Opening it once read-write applies any newer
migration. Everything measured after that opens it read-only (``mode=ro``).

Each measurement runs in a fresh process, so that its peak RSS (``ru_maxrss``) is its own.
The median of ``--reps`` is reported:

a. ``analysis.events(db, "bench")``: time, peak RSS, and the frame's own size
   (``memory_usage(deep=True)``);
b. ``workbench export events bench --out DIR/events.parquet``: the Parquet export,
   with its time, peak RSS and file size;
c. DuckDB over that file: ``SELECT cell_id, count(*), avg(score) ... GROUP BY cell_id``.

Prints one JSON line per measurement, then a summary table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

RUN = "bench"
TARGET_S = 10.0
TARGET_RSS_MIB = 2048.0


def peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def child(what: str, db: Path, out: Path) -> dict:
    """One measurement in this (fresh) process."""
    if what == "events":
        from workbench import analysis

        base = peak_mib()  # the interpreter and its imports
        t0 = time.perf_counter()
        frame = analysis.events(db, RUN)
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "peak_rss_mib": peak_mib(), "rss_after_imports_mib": base, "rows": len(frame),
                "frame_mib": round(frame.memory_usage(deep=True).sum() / 2**20, 1),
                "dtypes": {c: str(t) for c, t in frame.dtypes.items()}}
    if what == "export":
        from workbench.cli import main

        base = peak_mib()
        t0 = time.perf_counter()
        code = main(["--db", str(db), "export", "events", RUN, "--out", str(out / "events.parquet")])
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "peak_rss_mib": peak_mib(), "rss_after_imports_mib": base, "exit": code,
                "file_mib": round((out / "events.parquet").stat().st_size / 2**20, 1)}
    if what == "duckdb":
        import duckdb

        t0 = time.perf_counter()
        rows = duckdb.sql(f"SELECT cell_id, count(*), avg(score) FROM read_parquet('{out / 'events.parquet'}')"
                          " GROUP BY cell_id ORDER BY cell_id").fetchall()
        return {"seconds": time.perf_counter() - t0, "peak_rss_mib": peak_mib(), "cells": len(rows),
                "events": sum(r[1] for r in rows)}
    raise ValueError(what)


def measure(what: str, db: Path, out: Path, reps: int) -> list[dict]:
    runs = []
    for _ in range(reps):
        done = subprocess.run([sys.executable, __file__, "--child", what, "--db", str(db), "--out", str(out)],
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path("/tmp/bench_incremental.db"),
                    help="reuse this DB if it exists, else generate it there (default %(default)s)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each measurement (median reported)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_analysis"), help="where the Parquet file goes")
    ap.add_argument("--samples", type=int, default=100_000, help="samples when generating (a smaller store: a smoke test)")
    ap.add_argument("--child", choices=("events", "export", "duckdb"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.db, args.out)), flush=True)
        return 0

    from bench_incremental import ensure_db

    t_all = time.perf_counter()
    print(json.dumps({"bench": "analysis", "group": "machine", "loadavg": os.getloadavg(), "cpus": os.cpu_count()}),
          flush=True)
    gen = ensure_db(args.db, args.samples)
    print(json.dumps({"bench": "analysis", "group": "store", **gen}), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for group, what, target_s, target_mib in (("a. analysis.events(db, 'bench')", "events", TARGET_S, TARGET_RSS_MIB),
                                              ("b. export events --out events.parquet", "export", None, None),
                                              ("c. duckdb: per-cell count and avg(score) over the file", "duckdb",
                                               None, None)):
        runs = measure(what, args.db, args.out, args.reps)
        seconds = [r["seconds"] for r in runs]
        peak = max(r["peak_rss_mib"] for r in runs)
        rec = {"bench": "analysis", "group": group, "median_s": round(statistics.median(seconds), 3),
               "values_s": [round(s, 3) for s in seconds], "peak_rss_mib": peak, "target_s": target_s,
               "target_rss_mib": target_mib,
               "pass": None if target_s is None else statistics.median(seconds) < target_s and peak < target_mib,
               **{k: v for k, v in runs[-1].items() if k not in ("seconds", "peak_rss_mib")}}
        print(json.dumps(rec), flush=True)
        results.append(rec)

    print()
    print(f"{'measurement':<58} {'median s':>9} {'peak MiB':>9} {'target':>12} {'pass':>5}")
    for r in results:
        target = "" if r["target_s"] is None else f"<{r['target_s']:g}s <{r['target_rss_mib'] / 1024:g}GiB"
        flag = "" if r["pass"] is None else ("ok" if r["pass"] else "MISS")
        print(f"{r['group']:<58} {r['median_s']:>9.3f} {r['peak_rss_mib']:>9.1f} {target:>12} {flag:>5}")
    print(f"\nbenchmark {time.perf_counter() - t_all:.1f} s (generation excluded); load now {os.getloadavg()}")
    return 1 if any(r["pass"] is False for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
