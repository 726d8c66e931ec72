"""Benchmark: the TUI on a ~1 GB store (docs/design.md §10): open, ledger with CIs, samples filter/page.

Run: ``python bench/bench_tui.py [--db PATH] [--reps N] [--quick]``.

1. Generates (seeded) a workbench DB of about 1 GB: one triple dataset (200k units,
   100k samples with 1-2 gold paths of 1-2 uids, a 20-uid retrieval row per sample) and
   ONE run "bench" shaped like a real generating sweep (SweepConfig + "generation") with
   50 retrieval cells (K 1,2,5,10,20 x B 32..512 x format score,linear) -> 5,000,000 done
   events. The schema comes from ``open_store`` (migrations); rows are bulk-inserted.
   With ``--db PATH`` an existing file is reused (generated there otherwise).
2. Measures (each several times; median and every value):
   a. TUI open (until the ledger screen and its heading are mounted), ledger filled
      (``screen.view is not None``), and ``run_ledger`` for R = 500/1000/2000 split into
      the reader's refresh vs building the report -- cold (no saved ledger state: built from
      scratch) and warm (the state loaded).
   b. Samples view: ``list_samples`` per quadrant/search/offset, and end to end in the app
      (key press -> heading shows the new quadrant / page).
   One JSON line per measurement group, then a summary table. Generation time is reported
   but excluded from the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.store import open_store  # noqa: E402

KS = (1, 2, 5, 10, 20)
BUDGETS = (32, 64, 128, 256, 512)
FORMATS = ("score", "linear")
RELATIONS = ("directed_by", "written_by", "starred_actors", "has_genre", "release_year", "in_language",
             "has_tags", "has_imdb_rating", "has_imdb_votes")
QTEMPLATES = ("what films were directed by {e}", "who directed {e}", "what was {e} the director of",
              "what is a movie written by {e}", "who starred in {e}", "what genre is {e} in",
              "when was {e} released", "what language is {e} in")
SYL = ("ka", "lo", "mi", "ren", "to", "sa", "vi", "dor", "ell", "an", "bre", "quo", "zu", "pha", "nik", "ter",
       "os", "ul", "gri", "mae", "fen", "ja", "wol", "cy")
N_EVIDENCE = 1000
TARGETS = {"tui_open": 1.5, "ledger_render": 1.0, "samples": 0.150}


def name_of(j: int) -> str:
    """A deterministic pseudo-name for entity j."""
    parts = []
    for _ in range(2):
        a, j = j % len(SYL), j // len(SYL)
        b, j = j % len(SYL), j // len(SYL)
        parts.append((SYL[a] + SYL[b]).capitalize())
    if j:
        parts.append(str(j))
    return " ".join(parts)


# -- generation ---------------------------------------------------------------------------
def generate(path: Path, *, n_units=200_000, n_samples=100_000, seed=0, layout="sample", log=print) -> dict:
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.sweep import SweepConfig
    from workbench.store.db import utcnow

    t0 = time.perf_counter()
    store = open_store(path)  # schema via the migrations
    store.close()
    import sqlite3

    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -400000")
    rng = np.random.default_rng(seed)
    gc.disable()
    conn.execute("BEGIN")
    ds = conn.execute("INSERT INTO datasets (name, unit_kind, source, content_sha256, created_at)"
                      " VALUES ('bench-metaqa', 'triple', '/bench/synthetic', ?, ?)",
                      (hashlib.sha256(b"bench").hexdigest(), utcnow())).lastrowid
    n_ent = n_units // len(RELATIONS) + 1
    ents = [name_of(j) for j in range(n_ent * 2)]
    tails = rng.integers(0, len(ents), n_units)
    unit_rows = []
    for uid in range(n_units):
        h, r, t = ents[uid // len(RELATIONS)], RELATIONS[uid % len(RELATIONS)], ents[tails[uid]]
        unit_rows.append((ds, uid, f"{h}\t{r}\t{t}", h, r, t, 1))
    conn.executemany("INSERT INTO units (dataset_id, uid, key, head, relation, tail, in_kb) VALUES (?,?,?,?,?,?,?)",
                     unit_rows)
    del unit_rows
    log(f"  units {n_units:,} {time.perf_counter() - t0:.1f}s")

    # Samples, gold paths and retrieval; minrank[sid] = smallest rank by which a whole gold path is retrieved.
    minrank = np.full(n_samples, 99, dtype=np.int64)
    vis_prefix: list[str] = []          # "[u0, u1, ..." ; visible JSON = prefix[:pos[sid, k]] + "]"
    pos = np.zeros((n_samples, 21), dtype=np.int64)
    answers_of: list[str] = []
    sample_rows, retr_rows = [], []
    n_paths = rng.integers(1, 3, n_samples)
    path_len = rng.integers(1, 3, (n_samples, 2))
    gold_uids = rng.integers(0, n_units, (n_samples, 4))
    found = rng.random(n_samples)
    ranks = rng.integers(0, 20, (n_samples, 4))
    noise = rng.integers(0, n_units, (n_samples, 20))
    for sid in range(n_samples):
        paths, g = [], 0
        for p in range(n_paths[sid]):
            paths.append([int(u) for u in gold_uids[sid, g:g + path_len[sid, p]]])
            g += path_len[sid, p]
        top = [int(u) for u in noise[sid]]
        if found[sid] < 0.75:  # 75 % of samples have at least one gold path in the top 20
            best = 99
            for p_i, path in enumerate(paths):
                if p_i and found[sid] < 0.4:
                    continue
                slots = sorted(set(int(r) for r in ranks[sid, 2 * p_i:2 * p_i + len(path)]))
                while len(slots) < len(path):
                    slots.append(len(slots))
                for u, r in zip(path, slots):
                    top[r] = u
                best = min(best, max(slots))
            minrank[sid] = best
        head = unit_rows_head = ents[paths[0][0] // len(RELATIONS)]
        answer = ents[tails[paths[0][-1]]]
        answers_of.append(answer)
        sample_rows.append((ds, sid, f"mqa-{sid:06d}", QTEMPLATES[sid % len(QTEMPLATES)].format(e=unit_rows_head),
                            json.dumps([answer]), "{}", json.dumps(paths),
                            json.dumps({"hops": len(paths[0]), "topic": head})))
        strs = [str(u) for u in top]
        prefix = "[" + ", ".join(strs)
        vis_prefix.append(prefix)
        acc = 1
        for k in range(1, 21):
            acc += len(strs[k - 1]) + (2 if k > 1 else 0)
            pos[sid, k] = acc
        scores = np.round(np.sort(rng.random(20))[::-1] * 30, 4).tolist()
        retr_rows.append((ds, "bm25", sid, "[" + ", ".join(strs) + "]", json.dumps(scores)))
    conn.executemany("INSERT INTO samples (dataset_id, sid, id, question, answers, aliases, gold_paths, meta)"
                     " VALUES (?,?,?,?,?,?,?,?)", sample_rows)
    conn.executemany("INSERT INTO retrievals (dataset_id, retriever, sid, uids, scores) VALUES (?,?,?,?,?)",
                     retr_rows)
    del sample_rows, retr_rows
    log(f"  samples+retrievals {n_samples:,} {time.perf_counter() - t0:.1f}s")

    config = SweepConfig(ks=KS, budgets=BUDGETS, formats=FORMATS, retriever="bm25")
    gen = GenerationConfig(max_tokens=32)
    config_json = json.dumps({**asdict(config), "generation": gen.as_dict()}, sort_keys=True)
    run_id = conn.execute("INSERT INTO runs (name, dataset_id, retriever, config, model, created_at)"
                          " VALUES ('bench', ?, 'bm25', ?, 'default', ?)", (ds, config_json, utcnow())).lastrowid
    cells = sorted(((f"k{k}-b{b}-{f}", k, b, f) for f in FORMATS for b in BUDGETS for k in KS))
    conn.executemany("INSERT INTO cells (run_id, cell_id, kind, k, budget, format, shuffle)"
                     " VALUES (?, ?, 'retrieval', ?, ?, ?, NULL)", [(run_id, c, k, b, f) for c, k, b, f in cells])
    ev_texts = []
    for i in range(N_EVIDENCE):
        lines = [f"{j + 1}. ({ents[(i * 37 + j) % len(ents)]}, {RELATIONS[(i + j) % 9]}, "
                 f"{ents[(i * 91 + j * 7) % len(ents)]})" for j in range(1 + i % 20)]
        ev_texts.append("\n".join(lines))
    shas = [hashlib.sha256(t.encode()).hexdigest() for t in ev_texts]
    conn.executemany("INSERT INTO evidence (sha256, text) VALUES (?, ?)", zip(shas, ev_texts))
    stamps = [f"2026-11-2{1 + i // 600}T{(i // 60) % 10:02d}:{i % 60:02d}:00+00:00" for i in range(1200)]
    tpu = rng.integers(9, 17, n_samples)               # tokens per triple line, per sample
    difficulty = rng.random(n_samples)
    sids = np.arange(n_samples)
    wrong = [ents[int(j)] for j in rng.integers(0, len(ents), 5000)]
    # Per-cell columns first (vectorized), then rows in the order plan_sweep writes them:
    # sample-major (for sample: for K: for format: for B), so a cell's rows are spread over
    # the whole table as in a real run (layout="cell" writes them cell by cell instead).
    sweep_order = [(f"k{k}-b{b}-{f}", k, b, f) for k in KS for f in FORMATS for b in BUDGETS]
    cols = []
    for c_i, (cid, k, b, fmt) in enumerate(sweep_order):
        per = tpu + (2 if fmt == "linear" else 0)
        full = k * per
        k_eff = np.minimum(k, b // per)
        h_set = (minrank < k).astype(np.int64)
        h_vis = (minrank < k_eff).astype(np.int64)
        p = np.where(h_vis == 1, 0.85 - 0.3 * difficulty, np.where(h_set == 1, 0.3, 0.15))
        score = (rng.random(n_samples) < p).astype(np.float64)
        cols.append((cid, c_i, h_set.tolist(), h_vis.tolist(), k_eff.tolist(), np.minimum(full, b).tolist(),
                     (full > b).astype(np.int64).tolist(), ((sids * 31 + c_i * 7) % N_EVIDENCE).tolist(),
                     score.tolist(), rng.integers(4, 32, n_samples).tolist()))
    insert = ("INSERT INTO events (run_id, cell_id, sid, h_set, h_vis, k_eff, evidence_tokens, truncated,"
              " evidence_sha256, visible, prediction, score, status, source, prompt_tokens, eval_tokens,"
              " completion_tokens, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'done','model',?,?,?,?)")

    def row(col, sid):
        cid, c_i, hs, hv, ke, tk, tr, ev, sc, cp = col
        k = ke[sid]
        return (run_id, cid, sid, hs[sid], hv[sid], k, tk[sid], tr[sid], shas[ev[sid]],
                (vis_prefix[sid][:pos[sid, k]] + "]") if k else "[]",
                answers_of[sid] if sc[sid] else wrong[(sid + c_i) % 5000], sc[sid], tk[sid] + 96, tk[sid] + 96,
                cp[sid], stamps[(sid + c_i * 13) % 1200])

    if layout == "cell":
        for i, col in enumerate(sorted(cols)):
            conn.executemany(insert, [row(col, sid) for sid in range(n_samples)])
            if i % 10 == 9:
                log(f"  events: {i + 1}/{len(cols)} cells {time.perf_counter() - t0:.1f}s")
    else:
        chunk = 2000
        for start in range(0, n_samples, chunk):
            conn.executemany(insert, [row(col, sid) for sid in range(start, min(n_samples, start + chunk))
                                      for col in cols])
            if (start // chunk) % 10 == 9:
                log(f"  events: {start + chunk:,}/{n_samples:,} samples {time.perf_counter() - t0:.1f}s")
    conn.execute("COMMIT")
    gc.enable()
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    return {"seconds": round(time.perf_counter() - t0, 1), "layout": layout, "units": n_units, "samples": n_samples,
            "cells": len(cells), "events": n_samples * len(cells)}


# -- helpers ------------------------------------------------------------------------------
def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 4) if values else None,
            "values": [round(v, 4) for v in values]}


def emit(group: str, target: float | None, values: list[float], **extra) -> dict:
    rec = {"group": group, **summary(values), "target_s": target,
           "pass": (None if target is None or not values else statistics.median(values) < target), **extra}
    print(json.dumps(rec), flush=True)
    RESULTS.append(rec)
    return rec


RESULTS: list[dict] = []
RESAMPLES: list = []


def drop_ledger_state(path: Path) -> bool:
    """Forget the run's saved ledger state (and its log): the next read builds it from scratch.

    That is the first read of a run ever (or after an upgrade); every later read loads the
    state and applies only the events changed since. False for a code version without
    ledger states (every read is then "cold").
    """
    import sqlite3

    conn = sqlite3.connect(str(path), isolation_level=None, timeout=30)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger_states'").fetchone():
            return False
        conn.execute("DELETE FROM ledger_states")
        conn.execute("DELETE FROM event_log")
        return True
    finally:
        conn.close()


# -- a. run_ledger directly ---------------------------------------------------------------
def bench_run_ledger(path: Path, resamples: tuple[int, ...], reps: int, budget_s: float) -> None:
    """run_ledger from a fresh connection: cold (no saved state: built from scratch) and warm (state loaded)."""
    from workbench.runs import report as rep
    from workbench.store.queries import get_run

    for cold in (True, False):
        for r in resamples:
            totals, refreshes = [], []
            start = time.perf_counter()
            for i in range(reps if not cold else 1):
                if cold:
                    drop_ledger_state(path)
                store = open_store(path)
                run = get_run(store, "bench")
                reader = rep.ledger_reader(store, run, resamples=r)
                t = time.perf_counter()
                rep.run_ledger(store, run, resamples=r, reader=reader)
                totals.append(time.perf_counter() - t)
                refreshes.append(reader.stats.seconds)
                store.close()
                if time.perf_counter() - start > budget_s:
                    break
            emit(f"run_ledger R={r} {'cold (no ledger state: built)' if cold else 'warm (state loaded)'}",
                 TARGETS["ledger_render"], totals, refresh=summary(refreshes),
                 report=round(statistics.median(totals) - statistics.median(refreshes), 4))
            if cold:
                break  # one cold figure (R=first) is enough; the state is saved afterwards


# -- b. list_samples directly -------------------------------------------------------------
def bench_list_samples(path: Path, reps: int) -> None:
    from workbench.browse import list_samples
    from workbench.runs.report import first_cell
    from workbench.store.queries import get_run

    store = open_store(path)
    run = get_run(store, "bench")
    cells = [first_cell(store, run), "k10-b128-score"]
    for cell in cells:
        for quadrant in ("all", "dissipation", "leakage", "interface"):
            for search in ("", "directed", "Zzqx"):
                for offset in (0, 50_000):
                    values, total = [], None
                    for _ in range(reps):
                        t = time.perf_counter()
                        page = list_samples(store, run, cell, quadrant=quadrant, search=search, offset=offset)
                        values.append(time.perf_counter() - t)
                        total = page.total
                    emit(f"list_samples {cell} {quadrant} search={search!r} offset={offset}", TARGETS["samples"],
                         values, total=total)
    store.close()


# -- TUI ----------------------------------------------------------------------------------
async def wait_for(pilot, condition, timeout=120.0, step=0.002):
    """Poll with a plain asyncio.sleep: Pilot.pause/press add their own idle waits (>= 40 ms)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if condition():
            return True
        await asyncio.sleep(step)
    return condition()


def send_key(app, key: str) -> None:
    """Deliver a key the way the terminal driver does (Pilot.press minus its idle waits)."""
    from textual import events

    char = key if len(key) == 1 else None
    event = events.Key(key, char)
    event.set_sender(app)
    app._driver.send_message(event)


class Calls:
    """Counts and times calls of a module-level function the screens run in workers."""

    def __init__(self, module, name):
        self.module, self.name, self.times = module, name, []
        self.orig = getattr(module, name, None)

    def __enter__(self):
        if self.orig is not None:
            orig, times = self.orig, self.times

            def wrapper(*a, **kw):
                t = time.perf_counter()
                try:
                    return orig(*a, **kw)
                finally:
                    times.append(time.perf_counter() - t)
            setattr(self.module, self.name, wrapper)
        return self

    def __exit__(self, *exc):
        if self.orig is not None:
            setattr(self.module, self.name, self.orig)


def heading(app) -> str:
    try:
        return str(app.screen.query_one("#heading").render())
    except Exception:
        return ""


async def tui_open_once(path: Path) -> tuple[float, float, float, list[float]]:
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.screens import ledger as ledger_mod
    from workbench.tui.screens.ledger import LedgerScreen

    with Calls(ledger_mod, "_ledger") as calls:
        out = await _tui_open_once(path, WorkbenchApp, LedgerScreen)
        await asyncio.sleep(0)
    return (*out, calls.times)


async def _tui_open_once(path, WorkbenchApp, LedgerScreen):

    def mounted():
        s = app.screen
        return isinstance(s, LedgerScreen) and s.is_mounted and bool(s.query("#heading"))

    t0 = time.perf_counter()
    app = WorkbenchApp(path)
    async with app.run_test(size=(120, 40)) as pilot:
        t_enter = time.perf_counter() - t0
        await wait_for(pilot, mounted)
        t_open = time.perf_counter() - t0
        ok = await wait_for(pilot, lambda: getattr(app.screen, "view", None) is not None, timeout=180)
        t_ledger = time.perf_counter() - t0 if ok else float("nan")
        RESAMPLES.append(getattr(app.screen, "resamples", None))
        # let every ledger worker still running finish, so the next measurement starts quiet
        await wait_for(pilot, lambda: not [w for w in app.workers if w.is_running], timeout=180, step=0.05)
    return t_enter, t_open, t_ledger


async def tui_samples(path: Path, rounds: int) -> tuple[dict[str, list[float]], list[float]]:
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.screens import samples as samples_mod

    out: dict[str, list[float]] = {}
    app = WorkbenchApp(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: getattr(app.screen, "view", None) is not None, timeout=180)
        await wait_for(pilot, lambda: not [w for w in app.workers if w.is_running], timeout=180, step=0.05)
        with Calls(samples_mod, "_page") as calls:
            t = time.perf_counter()
            send_key(app, "s")
            await wait_for(pilot, lambda: app.current_mode == "samples" and " samples · page 1/" in heading(app))
            out.setdefault("key s -> samples screen page 1 shown", []).append(time.perf_counter() - t)
            steps = (("2", "dissipation", "page 1/"), ("pagedown", "dissipation", "page 2/"),
                     ("3", "leakage", "page 1/"), ("4", "interface", "page 1/"),
                     ("1", "all", "page 1/"), ("pagedown", "all", "page 2/"))
            for via_pilot in (False, True):
                for _ in range(rounds):
                    for key, quadrant, want in steps:
                        label = (f"{'pilot.press' if via_pilot else 'key'} {key} -> {quadrant} "
                                 f"{want.rstrip('/')} shown")
                        await wait_for(pilot, lambda: not [w for w in app.workers if w.is_running], step=0.01)
                        t = time.perf_counter()
                        if via_pilot:
                            await pilot.press(key)
                        else:
                            send_key(app, key)
                        ok = await wait_for(
                            pilot, lambda: f"quadrant {quadrant} (" in heading(app) and want in heading(app), 30)
                        out.setdefault(label, []).append(time.perf_counter() - t if ok else float("nan"))
    return out, calls.times


# -- main -----------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, help="reuse this DB if it exists, else generate it there")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--layout", choices=("sample", "cell"), default="sample",
                    help="event insert order when generating: sample-major like plan_sweep (default) or cell-major")
    args = ap.parse_args()
    reps = 2 if args.quick else args.reps
    t_all = time.perf_counter()
    print(json.dumps({"group": "machine", "loadavg": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)

    tmp = None
    path = args.db
    if path is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_tui_")
        path = Path(tmp.name) / "bench.db"
    if path.exists():
        gen = {"reused": str(path)}
    else:
        print(f"generating {path} ...", file=sys.stderr, flush=True)
        gen = generate(path, layout=args.layout, log=lambda m: print(m, file=sys.stderr, flush=True))
    store = open_store(path)  # applies any newer migration to a reused DB
    store.close()
    gen["db_bytes"] = path.stat().st_size
    gen["db_gb"] = round(path.stat().st_size / 1e9, 3)
    print(json.dumps({"group": "generation", **gen}), flush=True)

    # a. TUI open + ledger (first rep: no ledger state = the run's first read ever, built from scratch)
    enters, opens, ledgers, cold = [], [], [], None
    had_state = drop_ledger_state(path)
    workers: list[list[float]] = []
    for i in range(reps + (1 if had_state else 0)):
        t_enter, t_open, t_ledger, ledger_calls = asyncio.run(tui_open_once(path))
        if had_state and i == 0:
            cold = (t_open, t_ledger, ledger_calls)
            continue
        enters.append(t_enter), opens.append(t_open), ledgers.append(t_ledger), workers.append(ledger_calls)
    emit("tui_open (ledger screen + heading mounted)", TARGETS["tui_open"], opens,
         run_test_entered=summary(enters), cold_cache=None if cold is None else round(cold[0], 4))
    default_r = RESAMPLES[-1] if RESAMPLES else None
    emit(f"tui_ledger_render (view filled, from app start, R={default_r})", TARGETS["ledger_render"], ledgers,
         cold_cache=None if cold is None else round(cold[1], 4),
         ledger_workers_per_open=[len(w) for w in workers],
         ledger_worker_seconds=[[round(x, 3) for x in w] for w in workers],
         cold_ledger_worker_seconds=None if cold is None else [round(x, 3) for x in cold[2]])
    emit(f"tui_ledger_render (view filled, from screen mounted, R={default_r})", TARGETS["ledger_render"],
         [b - a for a, b in zip(opens, ledgers)])

    bench_run_ledger(path, (500, 1000, 2000), reps, budget_s=40)

    # b. samples
    bench_list_samples(path, reps)
    e2e, page_calls = asyncio.run(tui_samples(path, reps))
    for label, values in e2e.items():
        emit(f"tui {label}", TARGETS["samples"], values,
             **({"note": "includes Pilot's 2x wait_for_idle (>=40 ms, waits while any thread burns CPU)"}
                if label.startswith("pilot") else {}))
    emit("samples _page worker (list_samples in the app's worker thread)", TARGETS["samples"], page_calls)

    # summary table
    print()
    print(f"{'measurement':<72} {'median s':>9} {'target':>7} {'pass':>5}  values")
    for r in RESULTS:
        if r["median"] is None:
            continue
        flag = "" if r["pass"] is None else ("ok" if r["pass"] else "MISS")
        tgt = "" if r["target_s"] is None else f"{r['target_s']:g}"
        print(f"{r['group'][:72]:<72} {r['median']:>9.4f} {tgt:>7} {flag:>5}  {r['values']}")
    print(f"\ngeneration {gen.get('seconds', 'reused')} s (excluded); benchmark "
          f"{time.perf_counter() - t_all - (gen.get('seconds') or 0):.1f} s; load now {os.getloadavg()}")
    if tmp is not None and not os.environ.get("BENCH_KEEP"):
        tmp.cleanup()


if __name__ == "__main__":
    main()
