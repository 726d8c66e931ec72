"""Benchmark: the three generation targets of docs/design.md §10, side by side in one run.

1. ``throughput``: workbench ``execute()`` vs bare llama-cpp-python on the same prompts and
   model (goal: workbench tok/s ≥ 0.95 × bare). Both sides run in fresh subprocesses,
   interleaved bare, workbench, bare, workbench, …; the model load is EXCLUDED from both
   timings (reported separately). The bare side gets the executor's exact prompts (same
   template, ``backend.render``, dedup, prompt-text order) as token lists, the same grammar
   (``LlamaGrammar.from_json_schema``), stop, greedy sampling and max_tokens; outputs are
   compared prompt by prompt.
2. ``ksweep``: prompt tokens evaluated by a 5-point K sweep vs its largest point alone
   (goal: ≤ 2.0), from ``run_stats`` and cross-checked against llama.cpp's own
   ``n_p_eval`` counter; for the score format (the target) and the linear format (info).
3. ``resume``: ``workbench run`` in a subprocess, SIGKILL after ≥ 3 done jobs, then
   ``workbench resume``: wall time from spawning the resume until the DB shows a new done
   job (goal: median < 3 s); integrity_check and "no finished job recomputed" are checked.

Run: ``python bench/bench_generation.py [--only throughput,ksweep,resume] [--rounds 3] …``
(about 4-5 minutes with the defaults on 2 cores). Prints one JSON line per benchmark, then
a summary table. Nothing else heavy should run meanwhile: each JSON line records the load
average and the CPU busy share measured just before each measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SAMPLE_METAQA = REPO / "sample_data" / "metaqa"


def log(msg: str) -> None:
    print(f"[bench_generation {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- machine load ---------------------------------------------------------------------------
def _cpu_times() -> tuple[int, int, int]:
    """(total, idle, steal) jiffies over all CPUs."""
    with open("/proc/stat") as fh:
        parts = [int(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return sum(parts[:8]), idle, parts[7] if len(parts) > 7 else 0


def _proc_cpu() -> dict[int, tuple[str, int]]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    raw = fh.read()
                comm = raw[raw.index("(") + 1:raw.rindex(")")]
                fields = raw[raw.rindex(")") + 2:].split()
                out[int(d)] = (comm, int(fields[11]) + int(fields[12]))
            except (OSError, ValueError, IndexError):
                pass
    return out


def load_snapshot(window: float = 0.5) -> dict:
    """Load average, the share of all CPUs busy over ``window`` s and who used them (we are idle then)."""
    t0, i0, _ = _cpu_times()
    p0 = _proc_cpu()
    time.sleep(window)
    t1, i1, _ = _cpu_times()
    p1 = _proc_cpu()
    busy = 100.0 * (1 - (i1 - i0) / max(1, t1 - t0))
    hz = os.sysconf("SC_CLK_TCK")
    top = []
    for pid, (comm, ticks) in p1.items():
        if pid != os.getpid() and pid in p0:
            pct = 100.0 * (ticks - p0[pid][1]) / hz / window
            if pct >= 10:
                top.append(f"{comm}({pid}) {pct:.0f}%")
    la = os.getloadavg()
    return {"loadavg": [round(x, 2) for x in la], "cpu_busy_pct": round(busy, 1), "busy_procs": top}


class CpuDuring:
    """While a child measurement runs: CPU seconds used by OTHER processes (system busy minus the
    rusage of this process and its waited children) and the steal share. > ~1 s means the measurement
    was contaminated."""

    def __enter__(self):
        import resource

        self._r = resource
        self.t0, self.i0, self.s0 = _cpu_times()
        self.c0 = self._ours()
        self.w0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        t1, i1, s1 = _cpu_times()
        hz = os.sysconf("SC_CLK_TCK")
        busy_s = ((t1 - self.t0) - (i1 - self.i0)) / hz
        self.others_cpu_s = round(max(0.0, busy_s - (self._ours() - self.c0)), 2)
        self.steal = round(100.0 * (s1 - self.s0) / max(1, t1 - self.t0), 1)
        self.wall = time.perf_counter() - self.w0
        return False

    def _ours(self) -> float:
        r = self._r
        return sum(u.ru_utime + u.ru_stime for u in (r.getrusage(r.RUSAGE_SELF), r.getrusage(r.RUSAGE_CHILDREN)))


def load_str(snap: dict) -> str:
    s = f"load {snap['loadavg'][0]:.2f}/{snap['loadavg'][1]:.2f}/{snap['loadavg'][2]:.2f}, " \
        f"cpu busy {snap['cpu_busy_pct']:.0f}% (0.5 s before)"
    if snap["busy_procs"]:
        s += ", busy: " + "; ".join(snap["busy_procs"])
    return s


# -- shared setup ---------------------------------------------------------------------------
def make_dataset_db(path: Path) -> Path:
    """A DB with sample_data/metaqa imported, checkpointed so a plain file copy is a full copy."""
    from workbench.data.importer import import_dataset
    from workbench.store import open_store

    store = open_store(path)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    store.close()
    _checkpoint(path)
    return path


def _checkpoint(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def copy_db(src: Path, dst: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(dst) + suffix)
        if p.exists():
            p.unlink()
    shutil.copyfile(src, dst)
    return dst


def plan_run(db: Path, name: str, *, ks, budgets, formats, limit, **gen) -> None:
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.sweep import SweepConfig, plan_sweep
    from workbench.store import open_store

    store = open_store(db)
    plan_sweep(store, SweepConfig(ks=tuple(ks), budgets=tuple(budgets), formats=tuple(formats), limit=limit),
               dataset="metaqa", name=name, generation=GenerationConfig(**gen).as_dict())
    store.close()
    _checkpoint(db)


def executor_prompts(db: Path, name: str, n_threads: int) -> dict:
    """The distinct prompts execute() will generate, rendered as it does, in its order (prompt text)."""
    from workbench.models.llamacpp import LlamaCppBackend
    from workbench.models.locate import cached_file_sha256, resolve_model
    from workbench.runs.executor import load_jobs
    from workbench.runs.generation import GenerationConfig
    from workbench.store import open_store
    from workbench.store.queries import get_run, load_samples

    store = open_store(db)
    run = get_run(store, name)
    gen = GenerationConfig(**run.config["generation"])
    path = resolve_model(gen.model)
    model_id = cached_file_sha256(store, path)
    samples = {s.sid: s for s in load_samples(store, run.dataset_id)}
    jobs = load_jobs(store, run, ("pending",))
    backend = LlamaCppBackend(path, model_id, n_ctx=gen.n_ctx, n_threads=n_threads, seed=gen.seed)
    texts = set()
    for job, evidence in jobs:
        texts.add(backend.render(gen.template.messages(evidence, samples[job.sid].question)).text)
    backend.close()
    store.close()
    _checkpoint(db)  # cached_file_sha256 may have written model_files
    return {"model_path": str(path), "jobs": len(jobs), "prompts": sorted(texts), "gen": gen.as_dict()}


# -- 1. throughput: child processes ---------------------------------------------------------
def child_bare(spec_path: Path, n_threads: int) -> dict:
    from workbench.runs.answers import schema_for

    spec = json.loads(spec_path.read_text())
    gen = spec["gen"]
    t_import = time.perf_counter()
    from llama_cpp import Llama, LlamaGrammar

    t0 = time.perf_counter()
    llm = Llama(model_path=spec["model_path"], n_ctx=gen["n_ctx"], n_threads=n_threads, verbose=False,
                seed=gen["seed"])
    load_s = time.perf_counter() - t0
    eos = llm._model.token_get_text(llm.token_eos())
    schema = schema_for(gen["answer_format"])
    outputs, completion, prompt_tokens, prompt_seconds = [], 0, 0, []
    start = time.perf_counter()
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema, sort_keys=True), verbose=False) if schema else None
    for text in spec["prompts"]:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        t_call = time.perf_counter()
        out = llm.create_completion(prompt=tokens, max_tokens=gen["max_tokens"], temperature=gen["temperature"],
                                    top_p=1.0, top_k=40, repeat_penalty=1.0, seed=gen["seed"], grammar=grammar,
                                    stop=[eos] if eos else None)
        prompt_seconds.append(time.perf_counter() - t_call)
        outputs.append(out["choices"][0]["text"])
        completion += out["usage"]["completion_tokens"]
        prompt_tokens += out["usage"]["prompt_tokens"]
    wall = time.perf_counter() - start
    llm.close()
    return {"side": "bare", "wall_s": wall, "load_s": load_s, "import_s": t0 - t_import,
            "completion_tokens": completion, "prompt_tokens": prompt_tokens, "outputs": outputs,
            "prompt_seconds": prompt_seconds}


def child_workbench(spec_path: Path, db: Path, name: str, n_threads: int) -> dict:
    from workbench.models.registry import ExecOptions, make_backend
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.answers import schema_for
    from workbench.models.cached import cache_key
    from workbench.runs.executor import execute, run_stats
    from workbench.store import open_store
    from workbench.store.queries import get_run

    spec = json.loads(spec_path.read_text())
    store = open_store(db)
    run = get_run(store, name)
    gen = GenerationConfig(**run.config["generation"])
    opts = ExecOptions(n_threads=n_threads)
    t0 = time.perf_counter()
    backend = make_backend(gen.backend_spec, opts, store)  # model load (+ cached sha256), excluded like the bare load
    load_s = time.perf_counter() - t0
    model_id, template = backend.model_id, backend.chat_template
    start = time.perf_counter()
    report = execute(store, run, opts=opts, backend=backend)
    wall = time.perf_counter() - start
    stats = run_stats(store, run)
    schema, sampling = schema_for(gen.answer_format), gen.sampling.as_dict()
    keys = [cache_key(model_id, template, text, sampling, schema) for text in spec["prompts"]]
    rows = dict(store.conn.execute("SELECT key, output FROM generations").fetchall())
    secs = dict(store.conn.execute("SELECT key, seconds FROM generations").fetchall())
    order = [k for (k,) in store.conn.execute("SELECT key FROM generations ORDER BY rowid")]
    gen_seconds = store.conn.execute("SELECT coalesce(sum(seconds), 0) FROM generations").fetchone()[0]
    store.close()
    return {"side": "workbench", "wall_s": wall, "load_s": load_s, "completion_tokens": report.completion_tokens,
            "jobs": report.jobs, "done": report.done, "model_calls": report.model_calls,
            "cache_hits": report.cache_hits, "errors": report.errors, "error_samples": report.error_samples,
            "prompt_tokens_naive": stats["prompt_tokens_naive"],
            "prompt_tokens_evaluated": stats["prompt_tokens_evaluated"],
            "generate_seconds": gen_seconds, "order_matches": order == keys,
            "outputs": [rows.get(k) for k in keys], "prompt_seconds": [secs.get(k) for k in keys]}


def _spawn_child(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[:2]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_throughput(a, tmp: Path, dataset_db: Path) -> dict:
    base = copy_db(dataset_db, tmp / "tp_base.db")
    plan_run(base, "tp", ks=(a.tp_k,), budgets=(a.tp_budget,), formats=("score",), limit=a.tp_limit,
             max_tokens=a.tp_max_tokens, answer_format="json", n_ctx=2048)
    spec = executor_prompts(base, "tp", a.threads)
    spec_path = tmp / "tp_prompts.json"
    spec_path.write_text(json.dumps(spec))
    log(f"throughput: {spec['jobs']} jobs, {len(spec['prompts'])} distinct prompts, "
        f"max_tokens {a.tp_max_tokens}, {a.rounds} rounds")
    rounds, loads = [], []
    for r in range(a.rounds):
        snap = load_snapshot()
        loads.append(snap)
        log(f"throughput round {r + 1}: bare ({load_str(snap)})")
        with CpuDuring() as cpu_bare:
            bare = _spawn_child(["--child", "bare", "--spec", str(spec_path), "--threads", str(a.threads)])
        db = copy_db(base, tmp / f"tp_round{r}.db")  # fresh DB: empty generation cache
        snap2 = load_snapshot()
        loads.append(snap2)
        log(f"throughput round {r + 1}: workbench ({load_str(snap2)})")
        with CpuDuring() as cpu_wb:
            wb = _spawn_child(["--child", "workbench", "--spec", str(spec_path), "--db", str(db), "--run", "tp",
                               "--threads", str(a.threads)])
        per_prompt = [b / w for b, w in zip(bare["prompt_seconds"], wb["prompt_seconds"]) if b and w]
        same = sum(1 for x, y in zip(bare["outputs"], wb["outputs"]) if x == y)
        bare_tps = bare["completion_tokens"] / bare["wall_s"]
        wb_tps = wb["completion_tokens"] / wb["wall_s"]
        rounds.append({
            "round": r + 1, "bare_tok_s": round(bare_tps, 2), "workbench_tok_s": round(wb_tps, 2),
            "ratio": round(wb_tps / bare_tps, 4), "bare_wall_s": round(bare["wall_s"], 3),
            "workbench_wall_s": round(wb["wall_s"], 3), "wall_ratio": round(bare["wall_s"] / wb["wall_s"], 4),
            "bare_completion_tokens": bare["completion_tokens"], "workbench_completion_tokens": wb["completion_tokens"],
            "workbench_generate_s": round(wb["generate_seconds"], 3),
            "workbench_overhead_s": round(wb["wall_s"] - wb["generate_seconds"], 3),
            "bare_load_s": round(bare["load_s"], 3), "workbench_load_s": round(wb["load_s"], 3),
            "outputs_identical": f"{same}/{len(spec['prompts'])}", "executor_order_matches": wb["order_matches"],
            "workbench_jobs": wb["jobs"], "model_calls": wb["model_calls"], "cache_hits": wb["cache_hits"],
            "errors": wb["errors"], "per_prompt_median_time_ratio": round(statistics.median(per_prompt), 4),
            "others_cpu_s_during_bare": cpu_bare.others_cpu_s, "others_cpu_s_during_workbench": cpu_wb.others_cpu_s,
            "steal_pct_during_bare_workbench": [cpu_bare.steal, cpu_wb.steal],
            "load_before_bare": load_str(snap), "load_before_workbench": load_str(snap2)})
        log(f"  bare {bare_tps:.1f} tok/s ({bare['wall_s']:.2f} s), workbench {wb_tps:.1f} tok/s "
            f"({wb['wall_s']:.2f} s, {wb['generate_seconds']:.2f} s inside generate) → {wb_tps / bare_tps:.3f}; "
            f"identical {same}/{len(spec['prompts'])}")
        if wb["errors"]:
            log(f"  workbench errors: {wb['error_samples']}")
    ratios = [x["ratio"] for x in rounds]
    bare_tok = sum(x["bare_completion_tokens"] for x in rounds)
    wb_tok = sum(x["workbench_completion_tokens"] for x in rounds)
    bare_wall = sum(x["bare_wall_s"] for x in rounds)
    wb_wall = sum(x["workbench_wall_s"] for x in rounds)
    ratio = statistics.median(ratios)
    wb_gen = sum(x["workbench_generate_s"] for x in rounds)
    # The part of the gap the workbench itself causes: its time outside llama.cpp's create_completion
    # (rendering, grouping, cache lookups, tokenizing twice, prefix scan, scoring, SQLite commits).
    overhead_fraction = (wb_wall - wb_gen) / wb_wall
    identical = [x["outputs_identical"] for x in rounds]
    return {"bench": "throughput", "bare_tok_s": round(bare_tok / bare_wall, 2),
            "workbench_tok_s": round(wb_tok / wb_wall, 2), "ratio": round(ratio, 4),
            "ratio_pooled": round((wb_tok / wb_wall) / (bare_tok / bare_wall), 4),
            "wall_ratio": round(statistics.median(x["wall_ratio"] for x in rounds), 4),
            "workbench_overhead_fraction": round(overhead_fraction, 4),
            "ratio_from_overhead_only": round(1 - overhead_fraction, 4),
            "llama_time_ratio": round(bare_wall / wb_gen, 4),
            "per_prompt_median_time_ratio": round(statistics.median(x["per_prompt_median_time_ratio"]
                                                                    for x in rounds), 4),
            "goal": ">=0.95", "pass": ratio >= 0.95,
            "outputs_identical": identical[-1] if len(set(identical)) == 1 else ",".join(identical),
            "prompts": len(spec["prompts"]), "jobs": spec["jobs"], "max_tokens": a.tp_max_tokens,
            "model_load": "excluded from both sides (each side in a fresh subprocess; load reported per round)",
            "ratio_definition": "median over rounds of workbench_tok_s / bare_tok_s; wall_ratio = bare_wall / "
                                "workbench_wall (>1 means workbench faster)",
            "rounds": rounds, "load": f"first: {load_str(loads[0])}; last: {load_str(loads[-1])}"}


# -- 2. K sweep: prompt tokens evaluated -----------------------------------------------------
def _perf_backend_class():
    import llama_cpp

    from workbench.models.llamacpp import LlamaCppBackend

    class PerfBackend(LlamaCppBackend):
        """Records llama.cpp's own counters before execute() closes the model."""

        perf: dict | None = None

        def reset_perf(self) -> None:
            llama_cpp.llama_perf_context_reset(self.llm._ctx.ctx)

        def close(self) -> None:
            p = llama_cpp.llama_perf_context(self.llm._ctx.ctx)
            self.perf = {"n_p_eval": p.n_p_eval, "n_eval": p.n_eval, "n_reused": p.n_reused,
                         "t_p_eval_ms": round(p.t_p_eval_ms, 1), "t_eval_ms": round(p.t_eval_ms, 1)}
            super().close()

    return PerfBackend


def _ksweep_one(a, tmp: Path, dataset_db: Path, label: str, ks, fmt: str) -> dict:
    from workbench.models.locate import cached_file_sha256, resolve_model
    from workbench.runs.executor import execute, run_stats
    from workbench.runs.generation import GenerationConfig
    from workbench.store import open_store
    from workbench.store.queries import get_run

    db = copy_db(dataset_db, tmp / f"ks_{label}.db")
    plan_run(db, label, ks=ks, budgets=(a.ks_budget,), formats=(fmt,), limit=a.ks_limit,
             max_tokens=a.ks_max_tokens, n_ctx=2048)
    store = open_store(db)
    run = get_run(store, label)
    gen = GenerationConfig(**run.config["generation"])
    path = resolve_model(gen.model)
    backend = _perf_backend_class()(path, cached_file_sha256(store, path), n_ctx=gen.n_ctx, n_threads=a.threads,
                                    seed=gen.seed)
    backend.reset_perf()  # fresh model; llama.cpp reports max(1, n_p_eval) before any eval
    snap = load_snapshot()
    t0 = time.perf_counter()
    with CpuDuring() as cpu:
        execute(store, run, backend=backend)
    wall = time.perf_counter() - t0
    stats = run_stats(store, run)
    truncated = store.conn.execute("SELECT coalesce(sum(truncated), 0) FROM events WHERE run_id = ?",
                                   (run.id,)).fetchone()[0]
    # What llama.cpp counts in n_eval besides generated tokens: single-token prompt suffixes.
    store.close()
    perf = backend.perf
    out = {"label": label, "format": fmt, "ks": list(ks), "jobs": stats["jobs"], "done": stats["done"],
           "errors": stats["errors"], "model_calls": stats["model_calls"], "cache_hits": stats["cache_hits"],
           "truncated_events": truncated, "prompt_tokens_naive": stats["prompt_tokens_naive"],
           "prompt_tokens_evaluated": stats["prompt_tokens_evaluated"], "llama_n_p_eval": perf["n_p_eval"],
           "llama_n_eval": perf["n_eval"], "llama_n_reused": perf["n_reused"],
           "completion_tokens": stats["completion_tokens"], "wall_s": round(wall, 2), "load": load_str(snap),
           "others_cpu_s_during": cpu.others_cpu_s}
    # n_eval = generated tokens decoded one at a time (all but the last of each call) + 1-token prompt suffixes
    log(f"ksweep {label}: {stats['model_calls']} calls ({stats['cache_hits']} cached), evaluated "
        f"{stats['prompt_tokens_evaluated']} (llama.cpp n_p_eval {perf['n_p_eval']}) of naive "
        f"{stats['prompt_tokens_naive']} in {wall:.1f} s")
    return out


def bench_ksweep(a, tmp: Path, dataset_db: Path) -> dict:
    ks = tuple(a.ks)
    parts = {}
    for fmt in a.ks_formats:
        sweep = _ksweep_one(a, tmp, dataset_db, f"{fmt}_sweep", ks, fmt)
        alone = _ksweep_one(a, tmp, dataset_db, f"{fmt}_k{max(ks)}", (max(ks),), fmt)
        ratio = sweep["prompt_tokens_evaluated"] / alone["prompt_tokens_evaluated"]
        llama_ratio = sweep["llama_n_p_eval"] / alone["llama_n_p_eval"]
        parts[fmt] = {"sweep_evaluated": sweep["prompt_tokens_evaluated"],
                      "largest_alone_evaluated": alone["prompt_tokens_evaluated"],
                      "ratio": round(ratio, 4), "sweep_naive": sweep["prompt_tokens_naive"],
                      "naive_ratio": round(sweep["prompt_tokens_naive"] / alone["prompt_tokens_evaluated"], 4),
                      "sweep_llama_n_p_eval": sweep["llama_n_p_eval"],
                      "largest_alone_llama_n_p_eval": alone["llama_n_p_eval"], "llama_ratio": round(llama_ratio, 4),
                      "estimate_minus_llama": {"sweep": sweep["prompt_tokens_evaluated"] - sweep["llama_n_p_eval"],
                                               "largest_alone": alone["prompt_tokens_evaluated"]
                                               - alone["llama_n_p_eval"]},
                      "runs": [sweep, alone]}
    main = parts.get("score") or next(iter(parts.values()))
    res = {"bench": "ksweep", "ks": list(ks), "budget": a.ks_budget, "samples": a.ks_limit,
           "max_tokens": a.ks_max_tokens,
           "sweep_evaluated": main["sweep_evaluated"], "largest_alone_evaluated": main["largest_alone_evaluated"],
           "ratio": main["ratio"], "naive_sum": main["sweep_naive"], "naive_ratio": main["naive_ratio"],
           "llama_ratio": main["llama_ratio"], "goal": "<=2.0 (score format)", "pass": main["ratio"] <= 2.0,
           "by_format": parts}
    if "linear" in parts:
        res["linear_ratio"] = parts["linear"]["ratio"]
        res["linear_pass_info"] = parts["linear"]["ratio"] <= 2.0
    res["load"] = main["runs"][0]["load"]
    return res


# -- 3. resume after kill -9 ------------------------------------------------------------------
def _cli(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "workbench.cli", "--db", str(db), *args]


def _done_rows(con) -> dict:
    return {(c, s): (k, f) for c, s, k, f in con.execute(
        "SELECT cell_id, sid, gen_key, finished_at FROM events WHERE status = 'done'")}


def _ro(db: Path):
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)


def _count_done(db: Path) -> int:
    try:
        con = _ro(db)
        try:
            return con.execute("SELECT count(*) FROM events WHERE status = 'done'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


def bench_resume(a, tmp: Path, dataset_db: Path) -> dict:
    reps = []
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run_args = ("run", "metaqa", "--limit", str(a.rs_limit), "--k", "1,5", "--budget", "256", "--format", "score",
                "--max-tokens", "16", "--name", "r")
    for i in range(a.rs_reps):
        db = copy_db(dataset_db, tmp / f"resume{i}.db")  # fresh DB with metaqa imported
        proc = subprocess.Popen(_cli(db, *run_args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd=REPO, env=env)
        deadline = time.monotonic() + 180
        while _count_done(db) < a.rs_kill_after:
            if proc.poll() is not None:
                raise RuntimeError("the run ended before it could be killed")
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the run made no progress")
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        con = _ro(db)
        before = _done_rows(con)
        total = con.execute("SELECT count(*) FROM events").fetchone()[0]
        con.close()
        snap = load_snapshot()
        cpu = CpuDuring().__enter__()
        t0 = time.perf_counter()
        res = subprocess.Popen(_cli(db, "resume", "r", "--json"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               cwd=REPO, env=env, text=True)
        first_new = None
        con = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if con is None:
                    con = _ro(db)
                n = con.execute("SELECT count(*) FROM events WHERE status = 'done'").fetchone()[0]
            except sqlite3.OperationalError:
                n = 0
            if n > len(before):
                first_new = time.perf_counter() - t0
                break
            if res.poll() is not None:
                break
            time.sleep(0.01)
        if con is not None:
            con.close()
        out, _ = res.communicate(timeout=600)
        resume_wall = time.perf_counter() - t0
        cpu.__exit__(None, None, None)
        result = json.loads(out) if res.returncode == 0 else {}
        con = sqlite3.connect(db)
        integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
        after = {(c, s): (k, f) for c, s, k, f in con.execute(
            "SELECT cell_id, sid, gen_key, finished_at FROM events")}
        counts = dict(con.execute("SELECT status, count(*) FROM events GROUP BY status").fetchall())
        generations = con.execute("SELECT count(*) FROM generations").fetchone()[0]
        con.close()
        unchanged = sum(1 for j in before if after.get(j) == before[j])
        stats = result.get("run", {})
        rep = {"rep": i + 1, "first_new_done_s": None if first_new is None else round(first_new, 3),
               "done_at_kill": len(before), "jobs": total, "resume_jobs": result.get("execution", {}).get("jobs"),
               "resume_rc": res.returncode, "resume_total_s": round(resume_wall, 2), "integrity": integrity,
               "finished_unchanged": f"{unchanged}/{len(before)}", "done_after": counts.get("done", 0),
               "pending_after": counts.get("pending", 0), "errors_after": counts.get("error", 0),
               "generations": generations, "model_calls": stats.get("model_calls"),
               "no_recompute": unchanged == len(before) and generations == stats.get("model_calls")
               and result.get("execution", {}).get("jobs") == total - len(before),
               "load": load_str(snap), "others_cpu_s_during_resume": cpu.others_cpu_s}
        reps.append(rep)
        log(f"resume rep {i + 1}: killed at {len(before)} done; first new done job after {first_new} s; "
            f"resume finished in {resume_wall:.1f} s; integrity {integrity}; unchanged {unchanged}/{len(before)}")
    times = [r["first_new_done_s"] for r in reps if r["first_new_done_s"] is not None]
    median = statistics.median(times) if len(times) == len(reps) else None
    ok = all(r["integrity"] == "ok" and r["no_recompute"] and r["pending_after"] == 0 and r["errors_after"] == 0
             for r in reps)
    return {"bench": "resume", "first_new_done_s": [r["first_new_done_s"] for r in reps],
            "median_s": None if median is None else round(median, 3), "goal": "<3s", "pass": median is not None
            and median < 3.0 and ok, "integrity_ok": all(r["integrity"] == "ok" for r in reps),
            "no_finished_job_recomputed": all(r["no_recompute"] for r in reps),
            "measured_from": "spawning `workbench resume` to the first new done job in the DB (polled every 10 ms)",
            "reps": reps, "load": reps[0]["load"] if reps else ""}


# -- main ---------------------------------------------------------------------------------------
def summary_table(results: list[dict]) -> str:
    rows = [("bench", "measure", "value", "goal", "pass")]
    for r in results:
        if r["bench"] == "throughput":
            rows.append(("throughput", "workbench/bare tok/s (median of rounds)", f"{r['ratio']:.3f}", r["goal"],
                         str(r["pass"])))
            rows.append(("", "per-round ratios", ", ".join(f"{x['ratio']:.3f}" for x in r["rounds"]), "", ""))
            rows.append(("", "bare / workbench tok/s", f"{r['bare_tok_s']:.1f} / {r['workbench_tok_s']:.1f}", "",
                         ""))
            rows.append(("", "wall ratio bare/workbench", f"{r['wall_ratio']:.3f}", "", ""))
            rows.append(("", "median per-prompt create_completion bare/wb", f"{r['per_prompt_median_time_ratio']:.3f}",
                         "", ""))
            rows.append(("", "other procs' CPU s during bare / wb", "; ".join(
                f"{x['others_cpu_s_during_bare']:.1f} / {x['others_cpu_s_during_workbench']:.1f}"
                for x in r["rounds"]), "~0", ""))
            rows.append(("", "workbench overhead outside llama.cpp", f"{100 * r['workbench_overhead_fraction']:.2f}%",
                         "", ""))
            rows.append(("", "bare wall / workbench create_completion time", f"{r['llama_time_ratio']:.3f}", "",
                         ""))
            rows.append(("", "outputs identical", r["outputs_identical"], "all", ""))
        elif r["bench"] == "ksweep":
            rows.append(("ksweep", f"score: sweep/K={max(r['ks'])} evaluated", f"{r['ratio']:.3f}", r["goal"],
                         str(r["pass"])))
            rows.append(("", "score: evaluated sweep / alone / naive",
                         f"{r['sweep_evaluated']} / {r['largest_alone_evaluated']} / {r['naive_sum']}", "", ""))
            rows.append(("", "score: llama.cpp n_p_eval ratio", f"{r['llama_ratio']:.3f}", "", ""))
            if "linear_ratio" in r:
                lin = r["by_format"]["linear"]
                rows.append(("", "linear: sweep/alone evaluated (info)", f"{r['linear_ratio']:.3f}", "(<=2.0)",
                             str(r["linear_pass_info"])))
                rows.append(("", "linear: naive / alone", f"{lin['naive_ratio']:.3f}", "", ""))
        elif r["bench"] == "resume":
            rows.append(("resume", "spawn → first new done job, median s",
                         "n/a" if r["median_s"] is None else f"{r['median_s']:.2f}", r["goal"], str(r["pass"])))
            rows.append(("", "each (s)", ", ".join(str(x) for x in r["first_new_done_s"]), "", ""))
            rows.append(("", "integrity ok / nothing recomputed",
                         f"{r['integrity_ok']} / {r['no_finished_job_recomputed']}", "True / True", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="throughput,ksweep,resume", help="comma-separated benchmarks to run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="throughput: bare/workbench rounds")
    ap.add_argument("--tp-limit", type=int, default=20)
    ap.add_argument("--tp-k", type=int, default=5)
    ap.add_argument("--tp-budget", type=int, default=256)
    ap.add_argument("--tp-max-tokens", type=int, default=32)
    ap.add_argument("--ks", default="1,2,5,10,20", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--ks-budget", type=int, default=512)
    ap.add_argument("--ks-limit", type=int, default=30)
    ap.add_argument("--ks-max-tokens", type=int, default=4)
    ap.add_argument("--ks-formats", default="score,linear", type=lambda s: [x for x in s.split(",") if x])
    ap.add_argument("--rs-reps", type=int, default=3)
    ap.add_argument("--rs-limit", type=int, default=20)
    ap.add_argument("--rs-kill-after", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    # internal: child processes of the throughput benchmark
    ap.add_argument("--child", choices=("bare", "workbench"), help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.child == "bare":
        print(json.dumps(child_bare(Path(a.spec), a.threads)))
        return
    if a.child == "workbench":
        print(json.dumps(child_workbench(Path(a.spec), Path(a.db), a.run, a.threads)))
        return

    only = [x.strip() for x in a.only.split(",") if x.strip()]
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="bench_generation_"))
    log(f"temp dir {tmp}; initial {load_str(load_snapshot())}")
    results = []
    try:
        dataset_db = make_dataset_db(tmp / "dataset.db")
        for name, fn in (("throughput", bench_throughput), ("ksweep", bench_ksweep), ("resume", bench_resume)):
            if name in only:
                t0 = time.perf_counter()
                res = fn(a, tmp, dataset_db)
                res["bench_seconds"] = round(time.perf_counter() - t0, 1)
                results.append(res)
                print(json.dumps(res, ensure_ascii=False), flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(summary_table(results))
    print(f"total {time.perf_counter() - started:.0f} s; all pass: {all(r['pass'] for r in results)}")


if __name__ == "__main__":
    main()
