"""Benchmark: the incremental ledger on a 100k-sample × 50-cell run (5M events) against today's full rebuild.

Targets (docs/design.md §3 "Incremental", §10): a cold read of a run with a saved ledger
state (new connection, new reader, ``run_ledger`` with R = 2,000) < 0.5 s; a long-lived
reader's refresh after 100 changed events, report included, < 50 ms, reading only the delta
(``reader.stats.rows_read`` == 100).

Run: ``python bench/bench_incremental.py [--db PATH] [--reps N] [--changes C] [--verify]``.
The store is bench_tui's (:func:`bench_tui.generate`: one run "bench", 50 retrieval cells ×
100k samples, done events, about 1 GB); it is generated at ``--db`` (default
``/tmp/bench_incremental.db``) if that file does not exist, else reused -- generation takes
minutes and is excluded from the figures. The DB is a scratch file: the benchmark drops the
run's ledger state first and writes score changes into its events.

Measures, in one process (one JSON line each, then a summary):

a. first build: a reader's first refresh with no saved state (a from-scratch build over
   every event, then the state is saved) -- time and peak RSS (the process's, measured
   first, so it is the build's);
b. today's full rebuild, the path before the incremental ledger: ``load_run_arrays`` +
   ``compute_ledger(cells, resamples=2000, keys=sids)`` over the retrieval cells;
c. cold read: new Store connection, new reader, ``run_ledger(store, run, resamples=2000)``
   with the saved state present (it loads the sums and catches up with an empty log);
d. refresh after ``--changes`` (100) new scored events: a long-lived reader (the TUI's:
   ``persist_every=PERSIST_EVERY``) is caught up; another connection flips the score of 100
   random (cell, sid) events in one transaction (the state exists, so the triggers log
   them); then ``run_ledger(store, run, resamples=2000, reader=reader)`` -- which refreshes
   the reader (the delta) and builds the report -- is timed, and ``reader.stats`` checked;
e. the ratios b / c and b / d.
Then one more cold read, which finds the changes of (d) not yet saved by the long-lived
reader (it persists every PERSIST_EVERY changes): load + catch up + save. ``--verify``
finally compares the caught-up state with a from-scratch build (``ledger --verify``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tui import generate  # noqa: E402

from workbench.metrics.ledger import compute_ledger  # noqa: E402
from workbench.runs.aggregate import PERSIST_EVERY  # noqa: E402
from workbench.runs.report import ledger_reader, load_run_arrays, run_ledger  # noqa: E402
from workbench.store import open_store  # noqa: E402
from workbench.store.queries import get_run  # noqa: E402

RUN = "bench"
RESAMPLES = 2000
TARGETS = {"cold_read": 0.5, "refresh_100": 0.050}
RESULTS: list[dict] = []


def rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 4) if values else None,
            "values": [round(v, 4) for v in values]}


def emit(group: str, target: float | None, values: list[float], **extra) -> dict:
    rec = {"bench": "incremental", "group": group, **summary(values), "target_s": target,
           "pass": (None if target is None or not values else statistics.median(values) < target), **extra}
    print(json.dumps(rec), flush=True)
    RESULTS.append(rec)
    return rec


def stats_dict(reader) -> dict:
    s = reader.stats
    return {"changed": s.changed, "log_rows": s.log_rows, "rows_read": s.rows_read, "rebuilt": s.rebuilt,
            "loaded": s.loaded, "saved": s.saved, "refresh_s": round(s.seconds, 4)}


def ensure_db(path: Path, samples: int) -> dict:
    """The bench_tui store at ``path``: reused if present, else generated (to a .partial file, then renamed)."""
    if path.exists():
        gen = {"reused": str(path)}
    else:
        partial = path.with_name(path.name + ".partial")
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            leftover.unlink(missing_ok=True)
        print(f"generating {path} ...", file=sys.stderr, flush=True)
        gen = generate(partial, n_units=2 * samples, n_samples=samples, log=lambda m: print(m, file=sys.stderr, flush=True))
        os.replace(partial, path)
    open_store(path).close()  # applies any newer migration to a reused DB
    gen["db_gb"] = round(path.stat().st_size / 1e9, 3)
    return gen


def drop_state(path: Path) -> int:
    """Forget the run's ledger state and log (so the next reader builds from scratch); the events it has."""
    store = open_store(path)
    run = get_run(store, RUN)
    with store.transaction() as conn:
        conn.execute("DELETE FROM ledger_sums WHERE state_id IN (SELECT id FROM ledger_states WHERE run_id = ?)",
                     (run.id,))
        conn.execute("DELETE FROM ledger_states WHERE run_id = ?", (run.id,))
        conn.execute("DELETE FROM event_log WHERE run_id = ?", (run.id,))
        conn.execute("DELETE FROM event_log_floor WHERE run_id = ?", (run.id,))
    events = store.conn.execute("SELECT count(*) FROM events WHERE run_id = ?", (run.id,)).fetchone()[0]
    store.close()
    return events


# -- a. first build ------------------------------------------------------------------------
def first_build(path: Path) -> float:
    rss_before = rss_mib()
    store = open_store(path)
    run = get_run(store, RUN)
    reader = ledger_reader(store, run, resamples=RESAMPLES)
    t = time.perf_counter()
    state = reader.refresh()
    seconds = time.perf_counter() - t
    st = stats_dict(reader)
    assert st["rebuilt"] and st["saved"], st
    t = time.perf_counter()
    report = run_ledger(store, run, resamples=RESAMPLES, reader=reader)
    report_s = time.perf_counter() - t
    store.close()
    emit("a. first build (reader's first refresh: from scratch + save)", None, [seconds],
         peak_rss_mib=rss_mib(), rss_before_mib=rss_before, groups=len(state.groups), rows=len(report.rows),
         jobs_done=report.jobs_done, then_run_ledger_s=round(report_s, 4), **st)
    return seconds


# -- b. today's full rebuild -----------------------------------------------------------------
def full_rebuild(path: Path, reps: int) -> float:
    totals, loads, computes = [], [], []
    for _ in range(reps):
        store = open_store(path)
        run = get_run(store, RUN)
        t = time.perf_counter()
        ra = load_run_arrays(store, run)
        t_load = time.perf_counter() - t
        cells = {cid: ra.arrays[cid] for cid, c in ra.cells.items() if c.kind == "retrieval"}
        t2 = time.perf_counter()
        ledger = compute_ledger(cells, resamples=RESAMPLES, keys=ra.sids)
        t_compute = time.perf_counter() - t2
        totals.append(time.perf_counter() - t)
        loads.append(t_load)
        computes.append(t_compute)
        store.close()
    emit("b. today's full rebuild (load_run_arrays + compute_ledger)", None, totals,
         load_run_arrays=summary(loads), compute_ledger=summary(computes), cells=len(ledger),
         samples=len(ra.sids), peak_rss_mib_so_far=rss_mib())
    return statistics.median(totals)


# -- c. cold read ----------------------------------------------------------------------------
def cold_read(path: Path, reps: int, group: str = "c. cold read (new connection + reader, run_ledger R=2000)"):
    totals, opens, refreshes, stats = [], [], [], None
    for _ in range(reps):
        t = time.perf_counter()
        store = open_store(path)
        run = get_run(store, RUN)
        t_open = time.perf_counter() - t
        reader = ledger_reader(store, run, resamples=RESAMPLES)  # what run_ledger makes without one
        report = run_ledger(store, run, resamples=RESAMPLES, reader=reader)
        totals.append(time.perf_counter() - t)
        opens.append(t_open)
        refreshes.append(reader.stats.seconds)
        stats = stats_dict(reader)
        store.close()
        assert len(report.rows) == 50
    emit(group, TARGETS["cold_read"], totals, open_store_and_get_run=summary(opens),
         refresh=summary(refreshes),
         run_ledger_other=round(statistics.median(totals) - statistics.median(opens) - statistics.median(refreshes), 4),
         **stats)
    return statistics.median(totals)


# -- d. refresh after C changed events -------------------------------------------------------------
def refresh_after_changes(path: Path, reps: int, changes: int, seed: int) -> float:
    store = open_store(path)          # the long-lived reader's connection
    writer = open_store(path)         # another connection (another process in real life)
    run = get_run(store, RUN)
    reader = ledger_reader(store, run, resamples=RESAMPLES, persist_every=PERSIST_EVERY)
    t = time.perf_counter()
    run_ledger(store, run, resamples=RESAMPLES, reader=reader)  # catch up: loads the saved state
    first = time.perf_counter() - t
    first_stats = stats_dict(reader)
    cell_ids = sorted(reader.cells)
    n_samples = store.conn.execute("SELECT max(sid) + 1 FROM events WHERE run_id = ?", (run.id,)).fetchone()[0]
    logging = writer.conn.execute("SELECT count(*) FROM ledger_states WHERE run_id = ?", (run.id,)).fetchone()[0]
    assert logging, "no ledger state: the triggers would log nothing"
    rng = np.random.default_rng(seed)
    totals, refreshes, writes, per = [], [], [], []
    for _ in range(reps):
        pairs: set[tuple[str, int]] = set()
        while len(pairs) < changes:
            pairs.add((cell_ids[int(rng.integers(len(cell_ids)))], int(rng.integers(n_samples))))
        t = time.perf_counter()
        with writer.transaction() as conn:
            conn.executemany("UPDATE events SET score = 1 - score WHERE run_id = ? AND cell_id = ? AND sid = ?",
                             [(run.id, cid, sid) for cid, sid in sorted(pairs)])
        writes.append(time.perf_counter() - t)
        t = time.perf_counter()
        report = run_ledger(store, run, resamples=RESAMPLES, reader=reader)  # refreshes the reader, then the report
        totals.append(time.perf_counter() - t)
        refreshes.append(reader.stats.seconds)
        st = stats_dict(reader)
        st["rows_read_is_delta"] = st["rows_read"] == changes and st["changed"] == changes
        per.append(st)
        assert len(report.rows) == 50
    store.close()
    writer.close()
    emit(f"d. refresh after {changes} changed events + report (long-lived reader)", TARGETS["refresh_100"], totals,
         refresh=summary(refreshes),
         report_other=round(statistics.median(totals) - statistics.median(refreshes), 4),
         write_txn=summary(writes), persist_every=PERSIST_EVERY,
         first_catch_up_s=round(first, 4), first_catch_up=first_stats,
         rows_read=[s["rows_read"] for s in per], log_rows=[s["log_rows"] for s in per],
         changed=[s["changed"] for s in per], saved=[s["saved"] for s in per],
         rows_read_is_delta=all(s["rows_read_is_delta"] for s in per))
    return statistics.median(totals)


def verify_state(path: Path) -> None:
    from workbench.runs.report import verify_ledger

    store = open_store(path)
    run = get_run(store, RUN)
    t = time.perf_counter()
    v = verify_ledger(store, run)
    store.close()
    emit("verify (caught-up state vs from-scratch build)", None, [time.perf_counter() - t], ok=v.ok,
         groups=v.groups, max_point_diff=v.max_point_diff, max_replicate_diff=v.max_replicate_diff,
         differences=v.differences[:5])


# -- main -----------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path("/tmp/bench_incremental.db"),
                    help="reuse this DB if it exists, else generate it there (default %(default)s)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of c and d (median reported)")
    ap.add_argument("--full-reps", type=int, default=1, help="repetitions of b (the full rebuild)")
    ap.add_argument("--changes", type=int, default=100, help="events changed before each refresh in d")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=100_000, help="samples when generating (a smaller store: a smoke test)")
    ap.add_argument("--verify", action="store_true", help="finally compare the state with a from-scratch build")
    args = ap.parse_args()
    t_all = time.perf_counter()
    print(json.dumps({"bench": "incremental", "group": "machine", "loadavg": os.getloadavg(),
                      "cpus": os.cpu_count()}), flush=True)
    gen = ensure_db(args.db, args.samples)
    events = drop_state(args.db)
    print(json.dumps({"bench": "incremental", "group": "store", "events": events, **gen}), flush=True)

    a = first_build(args.db)
    b = full_rebuild(args.db, args.full_reps)
    c = cold_read(args.db, args.reps)
    d = refresh_after_changes(args.db, args.reps, args.changes, args.seed)
    ratios = {"bench": "incremental", "group": "e. ratios", "full_over_cold_read": round(b / c, 1),
              "full_over_refresh": round(b / d, 1), "first_build_over_full": round(a / b, 2)}
    print(json.dumps(ratios), flush=True)
    cold_read(args.db, 1, group=f"cold read after d (catches up {args.reps}×{args.changes} unsaved changes + saves)")
    if args.verify:
        verify_state(args.db)

    print()
    print(f"{'measurement':<78} {'median s':>9} {'target':>7} {'pass':>5}  values")
    for r in RESULTS:
        flag = "" if r["pass"] is None else ("ok" if r["pass"] else "MISS")
        tgt = "" if r["target_s"] is None else f"{r['target_s']:g}"
        print(f"{r['group'][:78]:<78} {r['median']:>9.4f} {tgt:>7} {flag:>5}  {r['values']}")
    print(f"\nfull rebuild / cold read = {ratios['full_over_cold_read']}×; "
          f"full rebuild / refresh after {args.changes} changes = {ratios['full_over_refresh']}×; "
          f"first build peak RSS {RESULTS[0]['peak_rss_mib']} MiB")
    d_rec = next(r for r in RESULTS if r["group"].startswith("d."))
    print(f"refresh read only the delta (rows_read == {args.changes}): {d_rec['rows_read_is_delta']} "
          f"(rows_read {d_rec['rows_read']})")
    print(f"benchmark {time.perf_counter() - t_all - (gen.get('seconds') or 0):.1f} s "
          f"(generation {gen.get('seconds', 'reused')} s excluded); load now {os.getloadavg()}")
    missed = [r["group"] for r in RESULTS if r["pass"] is False]
    return 1 if missed or not d_rec["rows_read_is_delta"] else 0


if __name__ == "__main__":
    sys.exit(main())
