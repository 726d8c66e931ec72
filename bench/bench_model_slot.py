"""Benchmark: two model passes on one machine at once vs one after the other.

Two ``workbench run`` processes, each on its own database (as a TUI on one database and a
CLI pass on another would be), each generate the same jobs with SmolLM2 on the CPU:

- ``sequential``: one process, then the other (the reference);
- ``at once, slot off``: both start together with ``WORKBENCH_MODEL_SLOT=off``: each
  llama.cpp takes every core and their threads thrash (the issue measured 12.7×);
- ``at once, slot on``: both start together with the model slot (a private lock file): the
  second waits for the first, says so, then runs.

Prints one JSON line per scenario and a table: the wall time from the first spawn to the
last exit, each process's own time, the jobs done per second by both together (counted
in the databases, so a scenario stopped at the cap still has a rate) and the wall time's
ratio to ``sequential``. A scenario still running after ``--cap`` seconds is stopped and
reported as longer than the cap. Run: ``python bench/bench_model_slot.py [--jobs 8]
[--cap 75]`` (under 3 minutes on an idle 2-core machine). The load average before each
scenario is recorded: other work on the machine slows every scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SAMPLE_METAQA = REPO / "sample_data" / "metaqa"

from workbench.data.importer import import_dataset  # noqa: E402
from workbench.runs.generation import GenerationConfig  # noqa: E402
from workbench.runs.sweep import SweepConfig, plan_sweep  # noqa: E402
from workbench.store import open_store  # noqa: E402


def log(msg: str) -> None:
    print(f"[bench_model_slot {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def prepare(base: Path, jobs: int, max_tokens: int) -> None:
    """A database with MetaQA and a planned run ``pass`` of ``jobs`` generations."""
    store = open_store(base)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("linear",), limit=jobs), name="pass",
               generation=GenerationConfig(max_tokens=max_tokens).as_dict())
    store.close()


def spawn(db: Path, env: dict, log_path: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "workbench.cli", "--db", str(db), "resume", "pass"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))


def finish(procs: dict[str, subprocess.Popen], started: dict[str, float], deadline: float) -> dict[str, float | None]:
    """Each process's seconds from its spawn to its exit (None: stopped at the cap)."""
    ended: dict[str, float | None] = {}
    while len(ended) < len(procs):
        for name, proc in procs.items():
            if name not in ended and proc.poll() is not None:
                if proc.returncode != 0:
                    raise SystemExit(f"error: process {name} exited {proc.returncode}")
                ended[name] = time.monotonic() - started[name]
        if time.monotonic() > deadline:
            for name, proc in procs.items():
                if name not in ended:
                    proc.kill()
                    proc.wait()
                    ended[name] = None
        time.sleep(0.05)
    return ended


def scenario(name: str, work: Path, base: Path, *, concurrent: bool, slot: str, cap: float) -> dict:
    env = {**os.environ, "WORKBENCH_MODEL_SLOT": slot}
    dbs = {}
    for p in ("a", "b"):
        dbs[p] = work / f"{name.replace(' ', '_').replace(',', '')}-{p}.db"
        shutil.copy(base, dbs[p])    # a fresh cache: both processes generate every job
    logs = {p: dbs[p].with_suffix(".log") for p in dbs}
    load = os.getloadavg()[0]
    log(f"{name} (load {load:.2f})")
    t0 = time.monotonic()
    deadline = t0 + cap
    times: dict[str, float | None] = {}
    if concurrent:
        procs, started = {}, {}
        for p in dbs:
            started[p] = time.monotonic()
            procs[p] = spawn(dbs[p], env, logs[p])
        times = finish(procs, started, deadline)
    else:
        for p in dbs:
            started = {p: time.monotonic()}
            times.update(finish({p: spawn(dbs[p], env, logs[p])}, started, deadline))
    wall = time.monotonic() - t0
    waited = [p for p in dbs if "waiting for the model" in logs[p].read_text()]
    stopped = any(v is None for v in times.values())
    done = sum(_done(dbs[p]) for p in dbs)
    return {"scenario": name, "wall_s": round(wall, 2), "stopped_at_cap": stopped,
            "process_s": {p: None if times[p] is None else round(times[p], 2) for p in sorted(times)},
            "jobs_done": done, "jobs_per_s": round(done / wall, 3),
            "said_waiting": waited, "load_before": round(load, 2)}


def _done(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM events WHERE status = 'done'").fetchone()[0]
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=8, help="generations per process (8)")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--cap", type=float, default=75.0, help="seconds before a scenario is stopped (75)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-slot-") as tmp:
        work = Path(tmp)
        base = work / "base.db"
        prepare(base, args.jobs, args.max_tokens)
        private_slot = str(work / "model.lock")   # not the machine's: other users' runs do not interfere
        results = [
            scenario("sequential", work, base, concurrent=False, slot=private_slot, cap=args.cap),
            scenario("at once, slot on", work, base, concurrent=True, slot=private_slot, cap=args.cap),
            scenario("at once, slot off", work, base, concurrent=True, slot="off", cap=args.cap),
        ]
    reference = results[0]["wall_s"]
    for r in results:
        r["vs_sequential"] = round(r["wall_s"] / reference, 2)
        r["jobs_per_process"] = args.jobs
        print(json.dumps(r))
    print(f"\ntwo `workbench run` processes of {args.jobs} jobs each (SmolLM2, {os.cpu_count()} cores)")
    print(f"{'scenario':<20} {'wall s':>8} {'a s':>8} {'b s':>8} {'jobs/s':>7} {'× seq':>6}  said waiting")
    for r in results:
        wall = f"{'>' if r['stopped_at_cap'] else ''}{r['wall_s']:.1f}"
        a, b = (("stopped" if v is None else f"{v:.1f}") for v in r["process_s"].values())
        print(f"{r['scenario']:<20} {wall:>8} {a:>8} {b:>8} {r['jobs_per_s']:>7.2f} {r['vs_sequential']:>6.2f}  "
              f"{', '.join(r['said_waiting']) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
