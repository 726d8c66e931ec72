"""Benchmark: coverage of the ledger's 95 % Poisson-bootstrap intervals (docs/design.md §3).

Target: for S_llm, Acc_hit and D_mass, the 95 % intervals of ``compute_ledger`` cover the
true value in 93-97 % of the trials, at n = 50 and at n = 2,000 (1,000 trials each; the band
is about ±3 binomial standard errors around 0.95). Exit status 1 if any coverage is outside it.

Run: ``python bench/bench_coverage.py [--trials T] [--resamples R] [--n 50,2000] [--seed S]``.
Prints one JSON line per (n, term), then a summary table.

The cells are drawn from a known model, so the true values are known in closed form:
h_vis ~ Bernoulli(0.6); score | h_vis = 1 ~ Bernoulli(0.7), score | h_vis = 0 ~ Bernoulli(0.15);
h_set = max(h_vis, Bernoulli(0.5)) (so h_set ≥ h_vis); k_eff, evidence tokens and truncation
are drawn too but play no part in the three terms. Hence

    S_llm   = 0.6·0.7 + 0.4·0.15 = 0.48
    Acc_hit = 0.7
    D_mass  = 0.6·(1 − 0.7)      = 0.18

Trial t at size n draws a fresh cell with its own generator (seeded by (seed, n, t)) and
computes ``compute_ledger({"c": cell}, resamples=R, seed=t, keys=np.arange(n))`` -- the
weights of :func:`workbench.metrics.resample.poisson_weights`, keyed by (t, sid, r), so the
resamples of two trials are independent too. An interval covers if lo ≤ true ≤ hi; an
undefined interval (``None``) counts as a miss.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.metrics.ledger import CellArrays, compute_ledger  # noqa: E402

P_VIS, ACC_HIT, ACC_MISS = 0.6, 0.7, 0.15
TRUE = {
    "S_llm": P_VIS * ACC_HIT + (1 - P_VIS) * ACC_MISS,
    "Acc_hit": ACC_HIT,
    "D_mass": P_VIS * (1 - ACC_HIT),
}
BAND = (0.93, 0.97)


def draw_cell(n: int, rng: np.random.Generator) -> CellArrays:
    """One cell of n samples from the known model (module doc)."""
    h_vis = (rng.random(n) < P_VIS).astype(np.float64)
    h_set = np.maximum(h_vis, (rng.random(n) < 0.5).astype(np.float64))
    score = (rng.random(n) < np.where(h_vis == 1, ACC_HIT, ACC_MISS)).astype(np.float64)
    k_eff = rng.integers(0, 6, n).astype(np.float64) * h_set
    tokens = rng.integers(20, 512, n).astype(np.float64)
    truncated = (tokens >= 480).astype(np.float64)
    return CellArrays(h_set, h_vis, score, k_eff, tokens, truncated)


def coverage(n: int, trials: int, resamples: int, seed: int) -> tuple[list[dict], float]:
    """Run the trials at size n; one record per term of :data:`TRUE`, and the seconds taken."""
    hits = {t: 0 for t in TRUE}
    low = {t: 0 for t in TRUE}    # the interval lies below the true value
    high = {t: 0 for t in TRUE}   # ... above it
    undefined = {t: 0 for t in TRUE}
    widths: dict[str, list[float]] = {t: [] for t in TRUE}
    points: dict[str, list[float]] = {t: [] for t in TRUE}
    t0 = time.perf_counter()
    for trial in range(trials):
        rng = np.random.default_rng([seed, n, trial])
        cell = draw_cell(n, rng)
        est = compute_ledger({"c": cell}, resamples=resamples, seed=trial, keys=np.arange(n))["c"]
        for term, truth in TRUE.items():
            e = est[term]
            if e.value is None or e.lo is None or e.hi is None:
                undefined[term] += 1
                continue
            points[term].append(e.value)
            widths[term].append(e.hi - e.lo)
            if e.lo <= truth <= e.hi:
                hits[term] += 1
            elif e.hi < truth:
                low[term] += 1
            else:
                high[term] += 1
    seconds = time.perf_counter() - t0
    out = []
    for term, truth in TRUE.items():
        cov = hits[term] / trials
        se = math.sqrt(cov * (1 - cov) / trials)
        out.append({
            "bench": "coverage", "n": n, "term": term, "true": round(truth, 6), "trials": trials,
            "resamples": resamples, "coverage": round(cov, 4), "se": round(se, 4),
            "se_at_nominal": round(math.sqrt(0.95 * 0.05 / trials), 4),
            "miss_below": low[term], "miss_above": high[term], "undefined": undefined[term],
            "mean_width": round(float(np.mean(widths[term])), 5) if widths[term] else None,
            "mean_point": round(float(np.mean(points[term])), 5) if points[term] else None,
            "band": list(BAND), "pass": BAND[0] <= cov <= BAND[1],
        })
    return out, seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--n", default="50,2000", help="comma-separated sample sizes (default 50,2000)")
    ap.add_argument("--seed", type=int, default=0, help="base seed of the data generators")
    args = ap.parse_args()
    sizes = [int(x) for x in args.n.split(",") if x.strip()]
    print(json.dumps({"bench": "coverage_machine", "loadavg": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)

    records, timing = [], {}
    for n in sizes:
        recs, seconds = coverage(n, args.trials, args.resamples, args.seed)
        timing[n] = seconds
        for rec in recs:
            rec["seconds_for_n"] = round(seconds, 1)
            print(json.dumps(rec), flush=True)
        records += recs

    print()
    print(f"{'n':>6} {'term':<8} {'true':>6} {'coverage':>9} {'± se':>7} {'below':>6} {'above':>6} "
          f"{'mean width':>11} {'band':>11} {'pass':>5}")
    for r in records:
        print(f"{r['n']:>6} {r['term']:<8} {r['true']:>6.3f} {r['coverage']:>9.3f} {r['se']:>7.4f} "
              f"{r['miss_below']:>6} {r['miss_above']:>6} {r['mean_width'] or float('nan'):>11.4f} "
              f"{BAND[0]:.2f}-{BAND[1]:.2f} {'ok' if r['pass'] else 'MISS':>5}")
    print(f"\n{args.trials} trials × {args.resamples} resamples per n; seconds per n: "
          + ", ".join(f"n={n}: {s:.1f}" for n, s in timing.items()))
    failed = [r for r in records if not r["pass"]]
    if failed:
        print("outside the band: " + ", ".join(f"n={r['n']} {r['term']} {r['coverage']:.3f}" for r in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
