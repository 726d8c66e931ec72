"""Fault matrix, the slow half: kill -9 at random points during an import, a run and a claims run.

Each trial copies a prepared database, starts the real CLI in a subprocess, sends SIGKILL
after a random delay, then checks what survived and finishes the work:

- ``import``: the dataset is either absent or complete (the same counts as a clean import),
  never partial; ``PRAGMA integrity_check`` is ok; a second import then succeeds.
- ``run``: every job committed before the kill is untouched by the resume (same generation
  key and finish time), the resume does only the jobs left, and every distinct prompt was
  generated once (``generations`` rows == model calls over both processes).
- ``claims``: the rerun completes the claim run; the final claims and verdicts equal those of
  an uninterrupted claims run on the same answers (greedy decoding and the cache make it
  deterministic), so nothing was lost or duplicated.
- ``ledger``: a run generates while ``workbench ledger`` reads it in a loop (each read applies
  the changes since the saved ledger state and saves it); both are killed at once. Then
  ``ledger --verify`` must find the saved state, caught up from the event log, equal to a
  from-scratch computation — and again after the run is resumed to the end.

Run: ``python bench/bench_faults.py [--trials 10] [--only import,run,claims,ledger] [--seed 0]``.
It prints one JSON line per trial and a table; it exits 1 if any trial lost or duplicated
anything, or if a kind got fewer kills than ``--trials`` (a trial whose delay outlasted the
work is rerun, up to 3× the trials). The fast half of the matrix (disk full, read-only,
non-SQLite, newer schema, two writers) is ``tests/test_faults.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
METAQA = REPO / "sample_data" / "metaqa"
RUN_ARGS = ("--limit", "6", "--k", "1,5", "--budget", "64,128", "--format", "linear", "--max-tokens", "16")
CLAIMS_ARGS = ("--limit", "3", "--cell", "k5-b128-linear", "--decomposer", "hybrid", "--verifiers", "lexical,llm_judge")


def log(msg: str) -> None:
    print(f"[bench_faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cli(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "workbench.cli", "--db", str(db), *args]


def run_ok(db: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(cli(db, *args), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done


def new_database(db: Path) -> None:
    """A migrated, empty database, as the first writing verb makes it (a reading verb never creates one)."""
    subprocess.run([sys.executable, "-c", "import sys; from workbench.store import open_store; "
                    "open_store(sys.argv[1]).close()", str(db)], check=True)


def query(db: Path, sql: str, params=()) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def integrity(db: Path) -> str:
    return query(db, "PRAGMA integrity_check")[0][0]


def kill_after(cmd: list[str], delay: float) -> tuple[bool, float]:
    """Start ``cmd``, SIGKILL it after ``delay`` s; (killed before it finished, seconds it ran)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=delay)
        return False, time.perf_counter() - start
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return True, time.perf_counter() - start


def dataset_counts(db: Path, name: str) -> tuple[int, ...] | None:
    row = query(db, "SELECT id FROM datasets WHERE name = ?", (name,))
    if not row:
        return None
    ds = row[0][0]
    return tuple(query(db, f"SELECT count(*) FROM {table} WHERE dataset_id = ?", (ds,))[0][0]
                 for table in ("samples", "units", "retrievals"))


# -- the three kinds of trial ---------------------------------------------------------------
def trial_import(base: Path, work: Path, rng: random.Random, reference: tuple[int, ...], duration: float) -> dict:
    db = work / "import.db"
    shutil.copy(base, db)
    killed, ran = kill_after(cli(db, "import", str(METAQA), "--name", "m"), rng.uniform(0.05, duration * 1.1))
    after_kill = dataset_counts(db, "m")
    ok = integrity(db) == "ok" and after_kill in (None, reference)
    run_ok(db, "import", str(METAQA), "--name", "m")
    ok = ok and dataset_counts(db, "m") == reference
    return {"kind": "import", "killed": killed, "at_s": round(ran, 2),
            "state_after_kill": "absent" if after_kill is None else ("complete" if after_kill == reference
                                                                      else f"PARTIAL {after_kill}"),
            "ok": ok}


def trial_run(base: Path, work: Path, rng: random.Random, duration: float) -> dict:
    db = work / "run.db"
    shutil.copy(base, db)
    killed, ran = kill_after(cli(db, "run", "metaqa", *RUN_ARGS, "--name", "r"), rng.uniform(0.5, duration * 1.1))
    rows = query(db, "SELECT count(*) FROM runs WHERE name = 'r'")[0][0]
    before = {(c, s): (k, f) for c, s, k, f in query(
        db, "SELECT e.cell_id, e.sid, e.gen_key, e.finished_at FROM events e JOIN runs r ON r.id = e.run_id"
            " WHERE r.name = 'r' AND e.status = 'done'")}
    ok = integrity(db) == "ok"
    if rows == 0:       # killed while planning: the plan is one transaction, so nothing is there
        run_ok(db, "run", "metaqa", *RUN_ARGS, "--name", "r")
    else:
        run_ok(db, "resume", "r")
    after = {(c, s): (k, f) for c, s, k, f in query(
        db, "SELECT e.cell_id, e.sid, e.gen_key, e.finished_at FROM events e JOIN runs r ON r.id = e.run_id"
            " WHERE r.name = 'r'")}
    statuses = dict(query(db, "SELECT status, count(*) FROM events GROUP BY status"))
    model_calls = query(db, "SELECT count(*) FROM events WHERE source = 'model'")[0][0]
    generations = query(db, "SELECT count(*) FROM generations")[0][0]
    ok = (ok and all(after[job] == before[job] for job in before) and set(statuses) == {"done"}
          and generations == model_calls and integrity(db) == "ok")
    return {"kind": "run", "killed": killed, "at_s": round(ran, 2), "done_before_kill": len(before),
            "jobs": sum(statuses.values()), "generations": generations, "model_calls": model_calls, "ok": ok}


CLAIM_ROWS = "SELECT cell_id, sid, idx, text, supported, correct, best_uid FROM claims ORDER BY 1, 2, 3"
VERDICT_ROWS = "SELECT cell_id, sid, idx, uid, verifier, supported, score FROM claim_verdicts ORDER BY 1, 2, 3, 4, 5"


def claim_state(db: Path) -> tuple[list, list]:
    return query(db, CLAIM_ROWS), query(db, VERDICT_ROWS)


def trial_claims(base: Path, work: Path, rng: random.Random, reference, duration: float) -> dict:
    db = work / "claims.db"
    shutil.copy(base, db)
    killed, ran = kill_after(cli(db, "claims", "run", "r", *CLAIMS_ARGS), rng.uniform(0.5, duration * 1.1))
    ok = integrity(db) == "ok"
    partial = query(db, "SELECT count(*) FROM claims")[0][0]
    run_ok(db, "claims", "run", "r", *CLAIMS_ARGS)
    ok = ok and claim_state(db) == reference and integrity(db) == "ok"
    return {"kind": "claims", "killed": killed, "at_s": round(ran, 2), "claims_before_rerun": partial,
            "claims_after": len(reference[0]), "ok": ok}


def kill_group_after(cmds: list[list[str]], delay: float) -> tuple[bool, float]:
    """Start every command (each in its own process group), SIGKILL all their processes after ``delay`` s.

    (killed before the first command finished, seconds it ran).
    """
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
             for c in cmds]
    try:
        procs[0].wait(timeout=delay)
        killed = False
    except subprocess.TimeoutExpired:
        killed = True
    ran = time.perf_counter() - start
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    return killed, ran


def verify_ok(db: Path) -> tuple[bool, str]:
    """``workbench ledger r --verify``: (no difference, what it printed)."""
    out = subprocess.run(cli(db, "ledger", "r", "--verify"), capture_output=True, text=True)
    return out.returncode == 0 and "no difference" in out.stdout, (out.stdout + out.stderr).strip()


def trial_ledger(base: Path, work: Path, rng: random.Random, duration: float) -> dict:
    db = work / "ledger.db"
    shutil.copy(base, db)
    # A user re-reading the ledger every second or so (back to back, the readers would starve
    # llama.cpp's two threads on this 2-core machine and the run would not get to a job).
    readers = ("while :; do " + shlex.join(cli(db, "ledger", "r", "--resamples", "200"))
               + " >/dev/null 2>&1; sleep 0.5; done")
    killed, ran = kill_group_after([cli(db, "run", "metaqa", *RUN_ARGS, "--name", "r"), ["sh", "-c", readers]],
                                   # the readers slow the run down (2 cores): draw up to 2.5× its own time
                                   rng.uniform(0.5, duration * 2.5))
    ok = integrity(db) == "ok"
    planned = query(db, "SELECT count(*) FROM runs WHERE name = 'r'")[0][0]
    done = query(db, "SELECT count(*) FROM events WHERE score IS NOT NULL")[0][0]
    states = query(db, "SELECT count(*), count(watermark), max(watermark) FROM ledger_states")[0]
    after_kill, after_resume = "no run", "no run"
    if planned:
        good, after_kill = verify_ok(db)
        run_ok(db, "resume", "r")
        good2, after_resume = verify_ok(db)
        ok = ok and good and good2
    else:
        run_ok(db, "run", "metaqa", *RUN_ARGS, "--name", "r")
    return {"kind": "ledger", "killed": killed, "at_s": round(ran, 2), "done_before_kill": done,
            "states": {"headers": states[0], "saved": states[1], "watermark": states[2]}, "verify_after_kill": after_kill[-90:],
            "verify_after_resume": after_resume[-90:], "ok": ok and integrity(db) == "ok"}


# -- driver ---------------------------------------------------------------------------------
def until_killed(kills: int, trial) -> list[dict]:
    """Repeat ``trial`` until ``kills`` of its runs were killed before finishing (at most 3× as many trials).

    A delay drawn past the end of a short run finishes it unkilled: that trial is kept (its
    rerun is checked all the same) but does not count toward the kills asked for.
    """
    rows: list[dict] = []
    while sum(r["killed"] for r in rows) < kills and len(rows) < 3 * kills:
        rows.append(trial())
        log(json.dumps(rows[-1]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10, help="kills per kind (default 10)")
    ap.add_argument("--only", default="import,run,claims,ledger")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    kinds = args.only.split(",")
    rng = random.Random(args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="wb-faults-") as tmp:
        work = Path(tmp)
        empty = work / "empty.db"
        new_database(empty)
        if "import" in kinds:
            ref_db = work / "ref-import.db"
            shutil.copy(empty, ref_db)
            t0 = time.perf_counter()
            run_ok(ref_db, "import", str(METAQA), "--name", "m")
            duration = time.perf_counter() - t0
            reference = dataset_counts(ref_db, "m")
            log(f"import: a clean import takes {duration:.1f}s, {reference} (samples, units, retrievals)")
            results += until_killed(args.trials, lambda: trial_import(empty, work, rng, reference, duration))
        imported = work / "imported.db"
        shutil.copy(empty, imported)
        run_ok(imported, "import", str(METAQA), "--name", "metaqa")
        if {"run", "claims", "ledger"} & set(kinds):
            ran = work / "ran.db"
            shutil.copy(imported, ran)
            t0 = time.perf_counter()
            run_ok(ran, "run", "metaqa", *RUN_ARGS, "--name", "r")
            run_duration = time.perf_counter() - t0
            log(f"run: an uninterrupted run takes {run_duration:.1f}s")
        if "run" in kinds:
            # The generation cache would serve a copy of `ran`: start from the imported db.
            results += until_killed(args.trials, lambda: trial_run(imported, work, rng, run_duration))
        if "ledger" in kinds:
            results += until_killed(args.trials, lambda: trial_ledger(imported, work, rng, run_duration))
        if "claims" in kinds:
            ref_db = work / "ref-claims.db"
            shutil.copy(ran, ref_db)
            t0 = time.perf_counter()
            run_ok(ref_db, "claims", "run", "r", *CLAIMS_ARGS)
            claims_duration = time.perf_counter() - t0
            reference = claim_state(ref_db)
            log(f"claims: an uninterrupted claims run takes {claims_duration:.1f}s, {len(reference[0])} claims")
            results += until_killed(args.trials, lambda: trial_claims(ran, work, rng, reference, claims_duration))
    for r in results:
        print(json.dumps(r))
    print(f"\n{'kind':<8}{'trials':>7}{'killed':>8}{'ok':>5}")
    for kind in kinds:
        rows = [r for r in results if r["kind"] == kind]
        print(f"{kind:<8}{len(rows):>7}{sum(r['killed'] for r in rows):>8}{sum(r['ok'] for r in rows):>5}")
    short = [k for k in kinds if sum(r["killed"] for r in results if r["kind"] == k) < args.trials]
    if short:
        print(f"fewer than {args.trials} kills for: {', '.join(short)}")
    return 0 if all(r["ok"] for r in results) and not short else 1


if __name__ == "__main__":
    sys.exit(main())
