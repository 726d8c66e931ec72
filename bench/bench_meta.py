"""Benchmark: a meta run with the default offline checker on the shared half of RAGChecker's preference data.

Target: ``workbench meta run`` with its defaults (rule decomposer; lexical +
embedding verifiers, then the whole-answer similarity) on ``sample_data/ragchecker-meta``
(140 instances, 280 responses) finishes in under 10 minutes on 2 cores cold, and in under 10
seconds warm (everything served from the store: claims, verdicts and vectors).

Each of ``--cold`` rounds: a fresh temporary database (``open_store``), the import (timed
apart), then ``run_meta`` cold: the seconds include hashing the embedding GGUF into the fresh
store and loading the model, every claim decomposed and checked, every text embedded. Then the
same call warm on that database (nothing may be embedded or checked again), and ``meta_report``
with 2,000 resamples. The converted embedding model goes to a temporary ``WORKBENCH_MODEL_CACHE``
(converted once before the first round, not timed). Prints one JSON line per measurement and
the figures of the overall label (Pearson ×100 with its 95% interval) of each scorer; exits 1
if a warm run checked or embedded anything.

Run: ``python bench/bench_meta.py [--cold 2]`` (about 2 minutes on 2 quiet cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
META = REPO / "sample_data" / "ragchecker-meta"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", type=int, default=2, help="cold runs, each on a fresh database (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("WORKBENCH_MODEL_CACHE", str(Path(tmp) / "models"))
        from workbench.cli.meta import OFFLINE_CHECKER
        from workbench.claims.runner import ClaimsConfig
        from workbench.data.meta_import import import_meta
        from workbench.meta.report import meta_report
        from workbench.meta.run import run_meta
        from workbench.meta.sets import get_meta_set
        from workbench.models.embedders import resolve_embedding_model
        from workbench.store import open_store

        resolve_embedding_model(None)   # converted once, not timed
        fields = {k: v for k, v in OFFLINE_CHECKER.items() if k != "threshold_use"}
        config = ClaimsConfig(**{**fields, "verifiers": tuple(OFFLINE_CHECKER["verifiers"].split(","))})
        colds, warms, failed = [], [], False
        for i in range(args.cold):
            store = open_store(Path(tmp) / f"meta{i}.db")
            t = time.perf_counter()
            import_meta(store, META / "human_labeled_data.json", "rc", baselines=[META / "baseline_ragchecker.json"])
            imported = time.perf_counter() - t
            meta = get_meta_set(store, "rc")
            t = time.perf_counter()
            cold = run_meta(store, meta, config)
            colds.append(time.perf_counter() - t)
            t = time.perf_counter()
            warm = run_meta(store, meta, config)
            warms.append(time.perf_counter() - t)
            failed |= bool(warm.jobs or warm.embedded)
            t = time.perf_counter()
            rows = meta_report(store, meta, resamples=2000)
            reported = time.perf_counter() - t
            print(json.dumps({"bench": "meta_run", "round": i, "import_s": round(imported, 2),
                              "cold_s": round(colds[-1], 2), "cold_jobs": cold.jobs, "claims": cold.claims,
                              "embedded": cold.embedded, "warm_s": round(warms[-1], 2), "warm_jobs": warm.jobs,
                              "warm_embedded": warm.embedded, "report_s": round(reported, 2),
                              "cpus": os.cpu_count(), "loadavg": os.getloadavg()}), flush=True)
            store.close()
        print(f"\nmeta run, default offline checker, 280 responses: cold median {statistics.median(colds):.1f} s "
              f"(target < 600 s); warm median {statistics.median(warms):.2f} s (target < 10 s)")
        for r in rows:
            if r.label == "overall":
                p = r.pearson
                print(f"  overall · {r.scorer}: Pearson {p.value:.2f} [{p.lo:.2f}, {p.hi:.2f}] · n {r.n}")
        if failed:
            print("a warm run checked or embedded something", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
