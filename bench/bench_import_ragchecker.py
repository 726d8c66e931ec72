"""Benchmark: importing RAGChecker's JSON against importing the same content as a dataset directory.

Synthetic, seeded: N queries (default 100,000), each with a question, a reference answer, a
response and 5 retrieved contexts drawn from a pool of N distinct passages. The same content is
written twice: as RAGChecker's ``{"results": [...]}`` file and as a dataset directory (a chunk
``kb.jsonl`` of the passages, ``samples.jsonl``, ``retrieval.jsonl``). Each import runs in a
child process (``python -m workbench.cli import``), the two side by side in one run, so their
ratio is what the machine's noise leaves alone. The RAGChecker import does more (it also writes
a run of one cell with N scored events), so a ratio near 1-2 is expected; the target is ≤ 3.
A smaller RAGChecker import (N/10) is timed too: a linear import takes ~1/10 of the time.

Run: ``python bench/bench_import_ragchecker.py [--queries N] [--keep DIR]``. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_import import run_child  # noqa: E402  (the child-process timer every import bench uses)

TARGET_RATIO = 3.0
CONTEXTS = 5
WORDS = ("film", "director", "actor", "year", "story", "city", "river", "music", "award", "novel", "war", "family")


def passage(i: int) -> str:
    rng = random.Random(i)
    return f"Passage {i}: " + " ".join(rng.choice(WORDS) for _ in range(40)) + "."


def generate(directory: Path, n: int, seed: int) -> tuple[Path, Path]:
    """The RAGChecker file and the dataset directory of the same ``n`` queries."""
    rng = random.Random(seed)
    results, samples, retrieval = [], [], []
    for q in range(n):
        ids = rng.sample(range(n), CONTEXTS)
        answer = f"answer {q % 977}"
        results.append({"query_id": f"q{q}", "query": f"what is asked in query {q}?", "gt_answer": answer,
                        "response": f"I think it is {answer if q % 3 else 'unknown'}.",
                        "retrieved_context": [{"doc_id": f"d{i}", "text": passage(i)} for i in ids]})
        samples.append({"id": f"q{q}", "question": f"what is asked in query {q}?", "answers": [answer],
                        "gold_paths": []})
        retrieval.append({"sample_id": f"q{q}", "retriever": "ragchecker",
                          "results": [{"chunk_id": f"d{i}", "score": float(CONTEXTS - r)} for r, i in enumerate(ids)]})
    used = sorted({c["doc_id"] for r in results for c in r["retrieved_context"]}, key=lambda d: int(d[1:]))
    rag = directory / "ragchecker.json"
    rag.write_text(json.dumps({"results": results}), encoding="utf-8")
    data = directory / "dataset"
    data.mkdir(exist_ok=True)
    lines = lambda rows: "".join(json.dumps(r) + "\n" for r in rows)  # noqa: E731
    (data / "kb.jsonl").write_text(lines({"chunk_id": d, "doc_id": d, "text": passage(int(d[1:]))} for d in used),
                                   encoding="utf-8")
    (data / "samples.jsonl").write_text(lines(samples), encoding="utf-8")
    (data / "retrieval.jsonl").write_text(lines(retrieval), encoding="utf-8")
    small = directory / "ragchecker-small.json"
    small.write_text(json.dumps({"results": results[: max(1, n // 10)]}), encoding="utf-8")
    return rag, data


def timed_import(work: Path, name: str, *args: str) -> float:
    db = work / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    seconds, _rss, code, _out, err = run_child([sys.executable, "-m", "workbench.cli", "--db", str(db), "import",
                                                *args, "--name", name, "--json"])
    if code != 0:
        raise SystemExit(f"import {name} failed:\n{err}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="generate into this directory and keep it")
    args = ap.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_ragchecker_"))
    try:
        work.mkdir(parents=True, exist_ok=True)
        rag, data = generate(work, args.queries, args.seed)
        dataset_s = timed_import(work, "dataset", str(data))
        rag_s = timed_import(work, "ragchecker", str(rag), "--from", "ragchecker")
        small_s = timed_import(work, "small", str(work / "ragchecker-small.json"), "--from", "ragchecker")
        ratio = rag_s / dataset_s
        print(json.dumps({"bench": "import_ragchecker", "queries": args.queries, "contexts_per_query": CONTEXTS,
                          "dataset_seconds": round(dataset_s, 2), "ragchecker_seconds": round(rag_s, 2),
                          "ratio": round(ratio, 2), "target_ratio": TARGET_RATIO,
                          "ragchecker_tenth_seconds": round(small_s, 2),
                          "scaling_10x": round(rag_s / small_s, 2), "pass": ratio <= TARGET_RATIO}))
        return 0 if ratio <= TARGET_RATIO else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
