"""Benchmark: importing a large dataset directory (docs/design.md §2, §10).

Synthetic, seeded data: 1,000,000 unique triples in ``kb.jsonl``, 100,000 samples (each
with 1-3 gold paths of 1-2 KB triples) and 100,000 retrieval rows of 20 KB triples each.
The import runs in a child process (``python -m workbench.cli import``); its wall time and
peak RSS (psutil, polled every 50 ms, cross-checked with ``getrusage(RUSAGE_CHILDREN)``)
are measured. Generating the data is not part of the figure.

Targets: < 60 s and < 2 GiB peak RSS. Run: ``python bench/bench_import.py [--triples N]
[--samples N] [--keep DIR]``. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 60
TARGET_RSS_MIB = 2048
RELATIONS = ("directed_by", "written_by", "starred_actors", "release_year", "in_language",
             "has_tags", "has_genre", "has_imdb_rating", "has_imdb_votes", "sequel_of")


def triple(i: int) -> list[str]:
    """The i-th KB triple: unique by construction, with realistic-looking lengths."""
    return [f"Movie {i // 10:06d} ({1900 + i % 120})", RELATIONS[i % 10], f"Entity {(i * 7919) % 400_000} of kind {i % 13}"]


def generate(directory: Path, n_triples: int, n_samples: int, n_results: int, seed: int) -> None:
    rng = random.Random(seed)
    dumps = json.dumps
    with open(directory / "kb.jsonl", "w", encoding="utf-8") as fh:
        for start in range(0, n_triples, 10_000):
            fh.write("".join(dumps({"triple": triple(i)}) + "\n" for i in range(start, min(start + 10_000, n_triples))))
    with open(directory / "samples.jsonl", "w", encoding="utf-8") as fh:
        lines = []
        for s in range(n_samples):
            paths = [[triple(rng.randrange(n_triples)) for _ in range(rng.randint(1, 2))] for _ in range(rng.randint(1, 3))]
            answers = sorted({p[-1][2] for p in paths})
            lines.append(dumps({"id": f"s{s:07d}", "question": f"what is linked to {paths[0][0][0]}?",
                                "answers": answers, "gold_paths": paths, "meta": {"hops": len(paths[0])}}) + "\n")
            if len(lines) >= 10_000:
                fh.write("".join(lines))
                lines = []
        fh.write("".join(lines))
    with open(directory / "retrieval.jsonl", "w", encoding="utf-8") as fh:
        lines = []
        for s in range(n_samples):
            picks = rng.sample(range(n_triples), n_results)
            results = [{"triple": triple(i), "score": round(10.0 - r * 0.37, 4)} for r, i in enumerate(picks)]
            lines.append(dumps({"sample_id": f"s{s:07d}", "retriever": "bm25", "results": results}) + "\n")
            if len(lines) >= 10_000:
                fh.write("".join(lines))
                lines = []
        fh.write("".join(lines))


def run_child(cmd: list[str]) -> tuple[float, float, int, str, str]:
    """Run ``cmd``; return (seconds, peak RSS MiB, exit code, stdout, stderr)."""
    try:
        import psutil
    except ImportError:  # getrusage alone still gives the peak
        psutil = None
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err)
    peak = 0
    if psutil is not None:
        try:
            ps = psutil.Process(proc.pid)
            while proc.poll() is None:
                try:
                    peak = max(peak, ps.memory_info().rss)
                except psutil.Error:
                    break
                time.sleep(0.05)
        except psutil.Error:
            pass
    code = proc.wait()
    seconds = time.perf_counter() - t0
    # ru_maxrss is in KiB on Linux: the child's true high-water mark, missed by no poll.
    peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
    out.seek(0)
    err.seek(0)
    return seconds, peak / 2**20, code, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--triples", type=int, default=1_000_000)
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--results", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="generate into (or reuse) this directory and keep it")
    args = ap.parse_args(argv)

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_import_"))
    data = work / "data"
    try:
        data.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        if not all((data / f).is_file() for f in ("kb.jsonl", "samples.jsonl", "retrieval.jsonl")):
            generate(data, args.triples, args.samples, args.results, args.seed)
        gen_seconds = time.perf_counter() - t0
        db = work / "bench.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "workbench.cli", "--db", str(db), "import", str(data), "--name", "bench", "--json"]
        seconds, rss, code, out, err = run_child(cmd)
        if code != 0:
            print(err, file=sys.stderr)
            return 1
        report = json.loads(out)
        ok = seconds < TARGET_SECONDS and rss < TARGET_RSS_MIB
        print(json.dumps({
            "bench": "import", "triples": args.triples, "samples": report["samples"],
            "retrieval_rows": report["retrievals"], "units": report["units"],
            "unknown_units": report["unknown_units"], "seconds": round(seconds, 2),
            "peak_rss_mib": round(rss, 1), "generate_seconds": round(gen_seconds, 2),
            "input_mib": round(sum((data / f).stat().st_size for f in os.listdir(data)) / 2**20, 1),
            "target_seconds": TARGET_SECONDS, "target_rss_mib": TARGET_RSS_MIB, "pass": ok,
        }))
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
