"""Benchmark: compare two 100k-sample × 50-cell runs with 2,000 resamples. Target: < 5 s.

Run: ``python bench/bench_compare.py [--samples N] [--cells C] [--resamples R]``. Prints one
JSON line.

Run A is bench_ledger's synthetic sweep. Two run Bs are compared with it, each timed:
- ``model``: the same sweep answered by another model: the same retrieval and windows
  (H_set, H_vis, K_eff, tokens shared), other scores. The common case, and the one
  :class:`~workbench.metrics.stats.ResampledColumns` saves most on (shared columns are
  resampled once).
- ``retriever``: every column differs (another retriever, other windows): the worst case.
The ledger of run A alone (its 50 cells, same resamples) is timed in the same process, so
the ratio compare ÷ ledger is measured side by side. The arrays are built beforehand: this
times the comparison itself, as ``workbench compare`` runs it after reading both runs (a
large run is read from its cached arrays).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ledger import size_arguments, synthesize  # noqa: E402
from workbench.compare.report import DEFAULT_TERMS, compare_cells  # noqa: E402
from workbench.metrics.ledger import CellArrays, compute_ledger  # noqa: E402


def other_model(cells: dict[str, CellArrays], seed: int = 1) -> dict[str, CellArrays]:
    """The same windows answered by another model: only the scores differ (scored where A is)."""
    rng = np.random.default_rng(seed)
    out = {}
    for cid, c in cells.items():
        p_right = np.where(c.h_vis == 1, 0.75, 0.12)
        score = np.where(np.isnan(c.score), np.nan, (rng.random(len(c)) < p_right).astype(np.float64))
        out[cid] = CellArrays(c.h_set, c.h_vis, score, c.k_eff, c.evidence_tokens, c.truncated)
    return out


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main() -> None:
    args = size_arguments(__doc__.splitlines()[0]).parse_args()

    a = synthesize(args.samples, args.cells, seed=0)
    variants = {"model": other_model(a), "retriever": synthesize(args.samples, args.cells, seed=7)}
    ids = [f"q{i}" for i in range(args.samples)]
    ledger_s, _ = timed(lambda: compute_ledger(a, resamples=args.resamples, seed=0))
    result = {"bench": "compare", "samples": args.samples, "cells": args.cells, "resamples": args.resamples,
              "terms": list(DEFAULT_TERMS), "ledger_of_a_seconds": round(ledger_s, 3)}
    for name, b in variants.items():
        pairs = {(cid, cid): (a[cid], b[cid]) for cid in a}
        seconds, cells = timed(lambda: compare_cells(pairs, ids, resamples=args.resamples, seed=0))
        assert len(cells) == args.cells
        flips = sum(len(v) for c in cells for stage in c.flips.values() for v in stage.values())
        result[name] = {"seconds": round(seconds, 3), "ratio_to_ledger": round(seconds / ledger_s, 2),
                        "significant_deltas": sum(d.significant for c in cells for d in c.terms.values()),
                        "flips": flips, "pass": seconds < args.target_seconds}
    result["target_seconds"] = args.target_seconds
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
