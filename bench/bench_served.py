"""Benchmark: nli verdicts through a served model against the same model in-process, side by side in one run.

The client's overhead (issue 38): the same (claim, premise) pairs (``bench_nli.make_pairs``: MetaQA
film facts from ``sample_data/dedup``) are checked by the ``nli`` verifier (``NLIVerifier.check``,
one choice per pair, claim-major) two ways, on the same GGUF (SmolLM2-135M) and threads:

a. ``local``: ``default_llm(store, "default")``, llama.cpp in this process (next-token logits);
b. ``served``: ``default_llm(store, "URL#smollm2")`` against ``python -m llama_cpp.server`` started
   here on a free loopback port with the same GGUF, ``--n_threads`` and ``--n_threads_batch`` equal
   to the local side's (one request per pair: the first token's ``top_logprobs``).

Each round runs both on fresh temporary stores (no verdict from the cache), the order alternating
from round to round; the model load, the server's start and one warm-up pair are not timed. While
one side runs, the other is idle (the server waits on its socket). Reported per side: seconds per
verdict (median over rounds), and the ratio served ÷ local per round and its median (target ≤ 1.25),
and whether both sides chose the same label on every pair.

``python -m llama_cpp.server`` answers one request at a time, so requests in flight would gain
nothing against it; with a batching server (vLLM, ``llama-server -np 4``) they would. The passes
send one request at a time for now (issue 38), so no ``--concurrency`` figure is taken here.

Run: ``python bench/bench_served.py [--premises 4] [--claims 6] [--rounds 3]`` (about 2 minutes on 2
quiet cores). Prints one JSON line, then a summary. Exits 1 if the labels differ.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_nli import make_pairs, warmup_pair  # noqa: E402  (the pair maker of the nli bench)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, threads: int, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port",
           str(port), "--n_ctx", "2048", "--n_threads", str(threads), "--n_threads_batch", str(threads),
           "--model_alias", "smollm2", "--verbose", "False"]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited: {log.read_text(errors='replace')[-1000:]}")
        try:
            with urllib.request.urlopen(base + "/models", timeout=2) as resp:
                if resp.status == 200:
                    return proc, base
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("llama_cpp.server did not answer within 90 s")
        time.sleep(0.3)


def run_side(model: str, pairs, warm, work: Path, threads: int) -> tuple[float, list[str]]:
    """Seconds of checking ``pairs`` (not the load or the warm-up) and the labels, on a fresh store."""
    from workbench.claims.verify import NLIVerifier
    from workbench.models.cached import default_llm
    from workbench.store import open_store

    with tempfile.TemporaryDirectory(dir=work) as tmp:
        store = open_store(Path(tmp) / "wb.db")
        llm = default_llm(store, model, n_threads=threads)
        try:
            nli = NLIVerifier(llm)
            nli.check(warm[1], warm[0])
            start = time.perf_counter()
            labels = [nli.check(premise, claim).label for claim, premise in pairs]
            return time.perf_counter() - start, labels
        finally:
            llm.close()
            store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--premises", type=int, default=4)
    ap.add_argument("--claims", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, help="threads of both sides (default: the usable cores)")
    args = ap.parse_args(argv)
    from workbench.cores import usable_cores
    from workbench.models.locate import default_model_path

    threads = args.threads or usable_cores()
    premises, pairs = make_pairs(args.premises, args.claims)
    warm = warmup_pair(premises, 60, 120)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ.setdefault("WORKBENCH_MODEL_SLOT", str(work / "model.lock"))
        proc, base = start_server(default_model_path(), threads, work / "server.log")
        served = f"{base}#smollm2"
        seconds = {"local": [], "served": []}
        ratios, same = [], True
        try:
            for r in range(args.rounds):
                order = ("local", "served") if r % 2 == 0 else ("served", "local")
                labels = {}
                for side in order:
                    s, labels[side] = run_side("default" if side == "local" else served, pairs, warm, work, threads)
                    seconds[side].append(s / len(pairs))
                same = same and labels["local"] == labels["served"]
                ratios.append(seconds["served"][-1] / seconds["local"][-1])
                print(f"round {r + 1}: local {seconds['local'][-1] * 1000:.1f} ms/verdict, served "
                      f"{seconds['served'][-1] * 1000:.1f} ms/verdict, ratio {ratios[-1]:.3f}", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    result = {"bench": "served_nli", "pairs": len(pairs), "threads": threads, "rounds": args.rounds,
              "local_s_per_verdict": statistics.median(seconds["local"]),
              "served_s_per_verdict": statistics.median(seconds["served"]),
              "ratio_rounds": [round(x, 3) for x in ratios], "ratio_median": round(statistics.median(ratios), 3),
              "same_labels": same, "loadavg": os.getloadavg()}
    print(json.dumps(result))
    print(f"\nnli through llama_cpp.server ÷ in-process, {len(pairs)} pairs, {threads} threads, median of "
          f"{args.rounds} rounds: {result['ratio_median']:.3f} (target <= 1.25; "
          f"{result['served_s_per_verdict'] * 1000:.1f} vs {result['local_s_per_verdict'] * 1000:.1f} ms per "
          f"verdict); same labels: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
