"""Benchmark: would stopping when decided have paid, and did its intervals hold? (``run --stop-when``)

For each recorded complete run in ``sample_data/recorded/`` (fixed answers, the same on every
CPU; see its README), the benchmark plans the run's grid over ``sample_data/metaqa`` in a
temporary database, imports the answers (``predictions import``, as a user brings theirs) and
replays the stopping rules over them in R seeded random orders (``ledger --replay``'s engine,
:func:`workbench.runs.replay.replay`):

- ``best`` at α = 0.05, tolerance 0.02: the share of the full run's model calls it would have
  used (goal: at most 0.40), how often it named the full run's best cell (within the tolerance),
  and how often every cell's interval at its stop covered the full run's S_llm (at least 1 − α),
  with that figure's own 95 % Wilson interval;
- ``precision`` at α = 0.05, half-width 0.05: the same shares and coverage.

``--live`` also runs one live sequential run (``run --stop-when best``) of the first recording's
grid on its first ``--live-limit`` questions (default 60) with the default local model, through
the CLI, and sets the calls it used beside the replay's prediction for its order (the recorded
answers of the same questions and cells): on this CPU the model gives the
recorded answers, so the replay of the live run's own order predicts it exactly; on another
CPU the answers (and the calls) may differ a little, as any two orders' do.

Run: ``python bench/bench_sequential.py [--replays 1000] [--live]`` (a few minutes; ``--live``
adds the model's time). Prints one JSON line per (recording, rule), then a summary table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.data.importer import import_dataset  # noqa: E402
from workbench.data.predictions import import_predictions  # noqa: E402
from workbench.runs.generation import GenerationConfig  # noqa: E402
from workbench.runs.replay import replay  # noqa: E402
from workbench.runs.sequential import complete_answers, read_order, sequential_status  # noqa: E402
from workbench.runs.stopping import StopSettings, simulate  # noqa: E402
from workbench.runs.sweep import SweepConfig, plan_sweep  # noqa: E402
from workbench.store import open_store  # noqa: E402
from workbench.store.queries import get_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "sample_data"
RECORDED = DATA / "recorded"
WB = Path(sys.executable).with_name("workbench")
WB = WB if WB.exists() else REPO / ".venv" / "bin" / "workbench"
#: Each recording: its answers file and the grid it answered (as its README says).
RECORDINGS = {
    "demo-grid": {"file": "demo-grid-answers.jsonl", "ks": (1, 2, 5, 10, 20), "budgets": (32, 64, 128),
                  "max_tokens": 32},
    "served-wide": {"file": "served-wide-answers.jsonl", "ks": (1, 5, 20), "budgets": (16, 64, 256),
                    "max_tokens": 32},
}
RULES = {"best": 0.02, "precision": 0.05}
ALPHA = 0.05


def load(store, name: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Plan recording ``name``'s grid and import its answers: its cells, scores and prompt groups."""
    spec = RECORDINGS[name]
    plan_sweep(store, SweepConfig(ks=spec["ks"], budgets=spec["budgets"], formats=("linear",)), dataset="metaqa",
               name=name, generation=GenerationConfig(max_tokens=spec["max_tokens"]).as_dict())
    import_predictions(store, get_run(store, name), RECORDED / spec["file"])
    return complete_answers(store, get_run(store, name))


def live(db: Path, name: str, cells: list[str], scores: np.ndarray, groups: np.ndarray, limit: int) -> dict:
    """One live ``run --stop-when best`` of recording ``name``'s grid on its first ``limit`` questions with the
    default model; its calls beside the replay's prediction for its own order (the recorded answers of the same
    questions and cells)."""
    spec = RECORDINGS[name]
    argv = [str(WB), "--db", str(db), "run", "metaqa", "--k", ",".join(map(str, spec["ks"])),
            "--budget", ",".join(map(str, spec["budgets"])), "--format", "linear", "--max-tokens",
            str(spec["max_tokens"]), "--limit", str(limit), "--stop-when", "best", "--name", f"{name}-live"]
    start = time.perf_counter()
    subprocess.run(argv, check=True)
    seconds = time.perf_counter() - start
    store = open_store(db)
    try:
        run = get_run(store, f"{name}-live")
        status = sequential_status(store, run)
        recorded = [sid for (sid,) in store.conn.execute(
            "SELECT DISTINCT e.sid FROM events e JOIN runs r ON r.id = e.run_id WHERE r.name = ? ORDER BY e.sid",
            (name,))]
        sids = sorted(read_order(store, run))
        rows = [recorded.index(sid) for sid in sids]
        columns = [cells.index(cell) for cell in status.cells]
        order = np.array([sids.index(sid) for sid in read_order(store, run)])
        predicted = simulate(scores[np.ix_(rows, columns)], groups[np.ix_(rows, columns)], order,
                             StopSettings("best", ALPHA, RULES["best"]))
        generated = store.conn.execute("SELECT count(*) FROM events WHERE run_id = ? AND source = 'model'",
                                       (run.id,)).fetchone()[0]
    finally:
        store.close()
    return {"questions": limit, "live_calls": status.calls_used, "live_model_generations": generated,
            "replay_of_its_order_calls": predicted.calls, "full_calls": status.calls_full,
            "live_winner": status.winner,
            "replay_winner": status.cells[predicted.winner] if predicted.winner is not None else None,
            "seconds": round(seconds, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--live", action="store_true", help="also one live run with the default model")
    parser.add_argument("--live-limit", type=int, default=60, help="the live run's questions (default 60)")
    parser.add_argument("--replay", dest="replaying", action=argparse.BooleanOptionalAction, default=True,
                        help="--no-replay: only the live run")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        store = open_store(db)
        import_dataset(store, DATA / "metaqa", "metaqa")
        loaded = {name: load(store, name) for name in RECORDINGS if (RECORDED / RECORDINGS[name]["file"]).exists()}
        store.close()
        for name, (cells, scores, groups) in loaded.items():
            for rule, width in RULES.items() if args.replaying else ():
                start = time.perf_counter()
                s = replay(scores, groups, rule, ALPHA, width, args.seed, args.replays)
                row = {"bench": "sequential", "recording": name, "rule": rule, "alpha": ALPHA, "width": width,
                       "replays": s.replays, "samples": s.population, "cells": s.cells,
                       "full_run_means": [round(float(m), 3) for m in scores.mean(axis=0)],
                       "call_share": round(s.call_share_mean, 4), "call_share_5_95": [round(q, 4) for q in
                                                                                      s.call_share_quantiles[::2]],
                       "named_best": s.named_best_share, "coverage": s.coverage,
                       "coverage_wilson_95": [round(x, 4) for x in s.coverage_interval],
                       "seconds": round(time.perf_counter() - start, 1)}
                if rule == "best":
                    row["goal_call_share"] = 0.40
                    row["pass"] = s.call_share_mean <= 0.40 and s.coverage_interval[1] >= 1 - ALPHA
                print(json.dumps(row), flush=True)
                rows.append(row)
        if args.live and loaded:
            name = next(iter(loaded))
            print(json.dumps({"bench": "sequential", "recording": name,
                              "live": live(db, name, *loaded[name], args.live_limit)}), flush=True)
    print("\nrecording      rule       calls used  named best  coverage [Wilson 95%]")
    for r in rows:
        named = "—" if r["named_best"] is None else f"{r['named_best']:.3f}"
        lo, hi = r["coverage_wilson_95"]
        print(f"{r['recording']:<14} {r['rule']:<10} {r['call_share']:>10.3f}  {named:>10}  "
              f"{r['coverage']:.3f} [{lo:.3f}, {hi:.3f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
