"""Benchmark: what stopping when decided saves, against what any valid rule can do (``run --stop-when``).

For each recorded complete run in ``sample_data/recorded/`` (fixed answers, the same on every
CPU; see its README; ``two-models`` is a grid with a model axis: two local models, one decision
across every (model, cell)), the benchmark plans the run's grid over ``sample_data/metaqa`` in a
temporary database, imports the answers (``predictions import``, as a user brings theirs) and
replays three rules over them in R seeded random orders, at α = 0.05 and each tolerance
E ∈ {0.02, 0.05, 0.1}:

- ``best``: the workbench's rule (LUCB-style: arms settled against the leader pause, and every
  word is proved by an interval; :mod:`workbench.runs.stopping`);
- ``before``: the rule the workbench had before (``bench/stopping_before.py``: a cell stopped
  against that round's leader, and called worse on its running mean);
- ``oracle``: a rule *told* the best arm in advance, which only has to settle each other arm
  against it (all of α on those differences, no interval of its own to report): no valid rule
  that must find the best arm can use fewer calls.

Per rule: the share of the full run's model calls it used (mean over R), how often its winner was
within E of the full run's best, how often every arm's interval covered its full-run S_llm
(``best``, ``before``), how often every versus interval covered its full-run difference and every
worse/tied word was true of the full run (``best``).
Goal for ``best``: calls ≤ 1.10 × the oracle's at every E, coverage ≥ 1 − α, the winner within E in
every replay. ``precision`` (half-width 0.05) is replayed too.

``--live`` also runs one live sequential run (``run --stop-when best``) of the first recording's
grid on its first ``--live-limit`` questions (default 60) with the default local model, through
the CLI, and sets the calls it used beside the replay's prediction for its order (the recorded
answers of the same questions and cells): on this CPU the model gives the recorded answers, so the
replay of the live run's own order predicts it exactly; on another CPU the answers (and the calls)
may differ a little, as any two orders' do.

Run: ``python bench/bench_sequential.py [--replays 1000] [--recording NAME] [--live]`` (about a quarter of
an hour on 2 cores for every recording; ``--live`` adds the model's time). Prints one JSON line per (recording, E, rule), then the
table the README and docs/sequential.md show.
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
from workbench.models.locate import model_label  # noqa: E402
from workbench.runs.generation import GenerationConfig  # noqa: E402
from workbench.runs.replay import replay, replay_outcomes  # noqa: E402
from workbench.runs.sequential import complete_answers, read_order, sequential_status  # noqa: E402
from workbench.runs.replay import simulate  # noqa: E402
from workbench.runs.stopping import StopSettings  # noqa: E402
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
    # The model as an axis: two local models, each over the same cells, one decision across every (model, cell).
    "two-models": {"file": "two-models-answers.jsonl", "ks": (1, 5, 20), "budgets": (64, 128), "max_tokens": 48,
                   "models": ("default", "gemma3-270m"), "limit": 100},
}
TOLERANCES = (0.02, 0.05, 0.1)
PRECISION = 0.05
ALPHA = 0.05
#: The goal: the rule's calls at most this many times the oracle's, at every tolerance.
GOAL_RATIO = 1.10


def load(store, name: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Plan recording ``name``'s grid and import its answers: its cells, scores and prompt groups."""
    spec = RECORDINGS[name]
    grid = SweepConfig(ks=spec["ks"], budgets=spec["budgets"], formats=("linear",), limit=spec.get("limit"))
    if "models" in spec:
        plan_sweep(store, grid, dataset="metaqa", name=name,
                   generations={model_label(m): GenerationConfig(model=m, max_tokens=spec["max_tokens"]).as_dict()
                                for m in spec["models"]})
    else:
        plan_sweep(store, grid, dataset="metaqa", name=name,
                   generation=GenerationConfig(max_tokens=spec["max_tokens"]).as_dict())
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
                             StopSettings("best", ALPHA, 0.02))
        generated = store.conn.execute("SELECT count(*) FROM events WHERE run_id = ? AND source = 'model'",
                                       (run.id,)).fetchone()[0]
    finally:
        store.close()
    return {"questions": limit, "live_calls": status.calls_used, "live_model_generations": generated,
            "replay_of_its_order_calls": predicted.calls, "full_calls": status.calls_full,
            "live_winner": status.winner,
            "replay_winner": status.cells[predicted.winner] if predicted.winner is not None else None,
            "seconds": round(seconds, 1)}


def before(scores: np.ndarray, groups: np.ndarray, tolerance: float, seed: int, replays: int) -> dict:
    """The rule the workbench had before, replayed the same way: calls, winner within E, cell coverage."""
    import stopping_before as old

    truth = scores.mean(axis=0)
    outs = []
    for start in range(0, replays, 100):
        orders = np.stack([old.sample_order(scores.shape[0], seed, r) for r in range(start, min(replays, start + 100))])
        outs.extend(old.simulate_many(scores, groups, orders, old.StopSettings("best", ALPHA, tolerance)))
    return {"call_share": float(np.mean([o.calls / o.full_calls for o in outs])),
            "within_e": int(sum(o.winner is not None and truth[o.winner] >= truth.max() - tolerance for o in outs)),
            "covered": int(sum(all(c.lo is None or c.lo - 1e-9 <= v <= c.hi + 1e-9 for c, v in zip(o.cells, truth))
                               for o in outs))}


def oracle(scores: np.ndarray, groups: np.ndarray, tolerance: float, seed: int, replays: int) -> dict:
    """The rule told the best cell in advance: calls and winner within E (it names the cell it was told)."""
    truth = scores.mean(axis=0)
    outs = replay_outcomes(scores, groups, StopSettings("best", ALPHA, tolerance), seed, replays,
                           told_best=int(truth.argmax()))
    return {"call_share": float(np.mean([o.calls / o.full_calls for o in outs])),
            "within_e": int(sum(truth[o.winner] >= truth.max() - tolerance for o in outs))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=1000)
    parser.add_argument("--recording", action="append", choices=sorted(RECORDINGS),
                        help="replay only this recording (repeatable; default: every one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--live", action="store_true", help="also one live run with the default model")
    parser.add_argument("--live-limit", type=int, default=60, help="the live run's questions (default 60)")
    parser.add_argument("--replay", dest="replaying", action=argparse.BooleanOptionalAction, default=True,
                        help="--no-replay: only the live run")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        store = open_store(db)
        import_dataset(store, DATA / "metaqa", "metaqa")
        loaded = {name: load(store, name) for name in args.recording or RECORDINGS
                  if (RECORDED / RECORDINGS[name]["file"]).exists()}
        store.close()
        for name, (cells, scores, groups) in loaded.items() if args.replaying else ():
            R = args.replays
            for tolerance in TOLERANCES:
                start = time.perf_counter()
                s = replay(scores, groups, "best", ALPHA, tolerance, args.seed, R)
                o = oracle(scores, groups, tolerance, args.seed, R)
                b = before(scores, groups, tolerance, args.seed, R)
                row = {"bench": "sequential", "recording": name, "tolerance": tolerance, "alpha": ALPHA, "replays": R,
                       "samples": s.population, "cells": s.cells,
                       "best": {"call_share": round(s.call_share_mean, 4), "within_e": s.named_best,
                                "covered": s.covered, "differences_covered": s.differences_covered,
                                "labels_right": s.labels_right},
                       "oracle": {"call_share": round(o["call_share"], 4), "within_e": o["within_e"]},
                       "before": {"call_share": round(b["call_share"], 4), "within_e": b["within_e"],
                                  "covered": b["covered"]},
                       "ratio_to_oracle": round(s.call_share_mean / o["call_share"], 3),
                       "seconds": round(time.perf_counter() - start, 1)}
                row["pass"] = (row["ratio_to_oracle"] <= GOAL_RATIO and s.named_best == R
                               and s.covered >= (1 - ALPHA) * R and s.differences_covered >= (1 - ALPHA) * R)
                print(json.dumps(row), flush=True)
                rows.append(row)
            p = replay(scores, groups, "precision", ALPHA, PRECISION, args.seed, R)
            print(json.dumps({"bench": "sequential", "recording": name, "rule": "precision", "half_width": PRECISION,
                              "call_share": round(p.call_share_mean, 4), "covered": p.covered, "replays": R}),
                  flush=True)
        if args.live and loaded:
            name = next(iter(loaded))
            print(json.dumps({"bench": "sequential", "recording": name,
                              "live": live(db, name, *loaded[name], args.live_limit)}), flush=True)
    if rows:
        R = rows[0]["replays"]
        print(f"\nrecording     E     calls: best  oracle  ratio  before   winner within E: best  before   "
              f"covered (of {R:,}): best  before   differences covered: best   words true: best")
        for r in rows:
            b, o, old = r["best"], r["oracle"], r["before"]
            print(f"{r['recording']:<12} {r['tolerance']:<5} {b['call_share']:>11.3f} {o['call_share']:>7.3f} "
                  f"{r['ratio_to_oracle']:>6.3f} {old['call_share']:>7.3f} {b['within_e']:>22,} {old['within_e']:>7,} "
                  f"{b['covered']:>18,} {old['covered']:>7,} {b['differences_covered']:>27,} "
                  f"{b['labels_right']:>17,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
