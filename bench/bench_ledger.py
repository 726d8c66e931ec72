"""Benchmark: full ledger plus bootstrap CIs for 100k samples × 50 cells (docs/design.md §10).

Target: < 5 s. Run: ``python bench/bench_ledger.py [--samples N] [--cells C] [--resamples R]``.
Prints one JSON line; peak RSS (resource.getrusage) is included.

The synthetic data is seeded and shaped like a K × B sweep: h_set depends on K only
(shared by every B of that K, as in a real sweep), h_vis ≤ h_set, binary scores that are
more often right when the evidence is visible, and a mix of fully scored cells, cells still
being scored (NaN for part of the samples) and cells not scored yet.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.metrics.ledger import CellArrays, compute_ledger  # noqa: E402


def synthesize(n: int, n_cells: int, seed: int = 0) -> dict[str, CellArrays]:
    rng = np.random.default_rng(seed)
    ks = [1, 3, 5, 10, 20]
    budgets = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
    grid = [(k, b) for k in ks for b in budgets][:n_cells]
    while len(grid) < n_cells:  # more cells than the grid: repeat with other prompts
        grid.append(grid[len(grid) % len(ks * len(budgets))])
    difficulty = rng.random(n)
    h_set_by_k = {k: (difficulty < 0.2 + 0.6 * (1 - np.exp(-k / 5))).astype(np.float64) for k in ks}
    cells: dict[str, CellArrays] = {}
    for c, (k, b) in enumerate(grid):
        h_set = h_set_by_k[k]
        fits = rng.random(n) < min(1.0, b / (40.0 * k))
        h_vis = h_set * fits
        p_right = np.where(h_vis == 1, 0.7, 0.15)
        score = (rng.random(n) < p_right).astype(np.float64)
        if c % 10 == 8:  # still being scored
            score[rng.random(n) < 0.4] = np.nan
        elif c % 10 == 9:  # not scored yet
            score[:] = np.nan
        k_eff = np.minimum(k, rng.poisson(b / 40.0, n)).astype(np.float64)
        tokens = np.minimum(b, rng.poisson(30 * k, n)).astype(np.float64)
        truncated = (tokens >= b).astype(np.float64)
        cells[f"K={k},B={b},linear,#{c}"] = CellArrays(h_set, h_vis, score, k_eff, tokens, truncated)
    return cells


def size_arguments(description: str) -> argparse.ArgumentParser:
    """The size of a synthetic ledger benchmark: samples, cells, resamples, and its target (shared by bench_compare)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--cells", type=int, default=50)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--target-seconds", type=float, default=5.0)
    return ap


def main() -> None:
    args = size_arguments(__doc__.splitlines()[0]).parse_args()

    cells = synthesize(args.samples, args.cells)
    rss_inputs_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # the inputs alone
    t0 = time.perf_counter()
    ledger = compute_ledger(cells, resamples=args.resamples, seed=0)
    seconds = time.perf_counter() - t0
    assert len(ledger) == args.cells
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(
        json.dumps(
            {
                "bench": "ledger",
                "samples": args.samples,
                "cells": args.cells,
                "resamples": args.resamples,
                "seconds": round(seconds, 3),
                "target_seconds": args.target_seconds,
                "pass": seconds < args.target_seconds,
                "peak_rss_mib": round(peak_kib / 1024, 1),
                "peak_rss_before_ledger_mib": round(rss_inputs_kib / 1024, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
