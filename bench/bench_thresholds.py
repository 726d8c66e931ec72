"""Benchmark: choose multilingual-e5-small's three cosine thresholds on labelled data (models.embedders).

Each :class:`~workbench.models.embedders.EmbedderSpec` carries three default thresholds. This
script chooses e5's on the repository's labelled sets, through the CLI a user runs
(``.venv/bin/workbench``, each set in its own temporary database), and measures
all-MiniLM-L6-v2 at its own defaults on the same data, for comparison. A threshold is a
grid point (two decimals): the one whose figure, averaged with its two neighbours' (±0.01), is
highest, so a spike at one point of a few labelled items does not decide; a run of tied points
gives its middle.

- **claims** (``claims run``'s embedding verifier): the demo's 40 human claim labels
  (``sample_data/labels/demo-claims.jsonl``) over the recorded answers of the run ``recorded``,
  set up as ``just demo`` does (a rule + lexical claim run first, for the labels to attach to).
  For each T: ``claims run recorded --decomposer rule --verifiers embedding
  --embedding-threshold T --embedding-model M`` (a new claim run; vectors are cached), then
  ``judge report claims recorded --claim-run N``: the embedding verifier against the labels.
  Chosen on Cohen's κ. Grid 0.70–0.98, step 0.01.
- **long_answers** (``meta run``'s embedding verifier): the shared half of RAGChecker's human
  preferences (``sample_data/ragchecker-meta``, 140 instances × 2 annotators). For each T:
  ``meta run prefs --embedding-threshold T`` with meta run's other defaults (rule; lexical 0.5 +
  embedding; ties supported), then one ``meta report prefs``: the claim checker's Pearson ×100
  with the overall label (its F1), as docs/checkers.md's sweep chose MiniLM's 0.80. Chosen on the
  overall Pearson. Grid 0.80–0.96, step 0.01. The first run per model also scores the
  whole-answer similarity (reported beside it).
- **dedup** (dedup's embedding mode): ``sample_data/dedup``'s gold clusters. Candidates come from
  blocking alone, and the embedding mode stores the clipped cosine as each pair's confidence, so
  one ``dedup run --modes embedding --embedding-threshold 0`` and ``dedup eval --threshold T``
  (merge at confidence ≥ T) give a run at T for every T; the script checks this at the chosen T
  (a run at T, evaluated at eval's default 0.5, must give the same figures). Chosen on pairwise
  F1. Grid 0.85–0.99, step 0.01.

MiniLM is measured at its spec's thresholds only (``--models minilm``), not swept. Converted
models go to a temporary ``WORKBENCH_MODEL_CACHE``. Prints one JSON line per (set, model,
threshold), then per set the chosen e5 threshold with its grid neighbourhood and MiniLM's
figures; exits 1 if the dedup shortcut disagrees with a direct run.

Run: ``python bench/bench_thresholds.py [--sets claims,long_answers,dedup] [--models e5,minilm]``
(about 4 minutes on 2 quiet cores, most of it the first embedding of each set; longer while another
process holds the machine-wide model slot).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "sample_data"
WB = Path(sys.executable).with_name("workbench")
WB = WB if WB.exists() else REPO / ".venv" / "bin" / "workbench"
SETS = ("claims", "long_answers", "dedup")
MODELS = {"e5": "multilingual-e5-small", "minilm": "all-minilm-l6-v2"}   # as `--embedding-model` takes them
GRIDS = {"claims": (0.70, 0.98), "long_answers": (0.80, 0.96), "dedup": (0.85, 0.99)}
#: What each set maximizes, in order (then the lower threshold), and the figures its summary shows.
KEYS = {"claims": ("kappa", "accuracy"), "long_answers": ("overall",), "dedup": ("pairwise_f1", "bcubed_f1")}
SHOWN = {"claims": ("kappa", "kappa_lo", "kappa_hi", "accuracy", "judge_positive"),
         "long_answers": ("overall", "overall_lo", "overall_hi", "correctness", "completeness"),
         "dedup": ("pairwise_f1", "pairwise_precision", "pairwise_recall", "bcubed_f1")}


def wb(db: Path, *args: str, json_out: bool = True):
    """One CLI call on ``db``; its ``--json`` output parsed (or None). A failure ends the bench with its stderr."""
    cmd = [str(WB), "--db", str(db), *args, *(["--json"] if json_out else [])]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd[1:])}\n{done.stderr.strip()}")
    return json.loads(done.stdout) if json_out else None


def grid(use: str) -> list[float]:
    lo, hi = GRIDS[use]
    return [round(lo + i / 100, 2) for i in range(round((hi - lo) * 100) + 1)]


def best(rows: list[dict], keys: tuple[str, ...]) -> dict:
    """The row whose first key, averaged with its grid neighbours', is largest; ties: the middle of the tied run.

    The mean over a point and its neighbours (±0.01; one neighbour at an edge) keeps a single
    spike of a few labelled items from deciding: the choice sits where the figure holds around it.
    A run of tied points (a plateau of one confusion matrix) gives its middle, ties of two
    middles the lower. Only a swept grid is smoothed; a single row is itself.
    """
    key = keys[0]

    def value(r: dict) -> float:
        return float("-inf") if r.get(key) is None else round(r[key], 9)

    smooth = []
    for i in range(len(rows)):
        near = [value(r) for r in rows[max(0, i - 1): i + 2]]
        smooth.append(round(sum(near) / len(near), 9) if float("-inf") not in near else float("-inf"))
    top = max(smooth)
    tied = [i for i, v in enumerate(smooth) if v == top]
    runs: list[list[int]] = []
    for i in tied:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    longest = max(runs, key=len)
    chosen = rows[longest[(len(longest) - 1) // 2]]
    chosen["smoothed"] = top
    return chosen


def setup_claims(db: Path) -> None:
    labels = DATA / "labels"
    wb(db, "import", str(DATA / "metaqa"), "--name", "metaqa")
    wb(db, "sweep", "metaqa", "--limit", "3", "--k", "1,2,5,10,20", "--budget", "32,64,128", "--format", "linear",
       "--oracle", "--shuffles", "2", "--name", "recorded")
    wb(db, "predictions", "import", str(labels / "demo-answers.jsonl"), "recorded", json_out=False)
    wb(db, "claims", "run", "recorded", "--decomposer", "rule", "--verifiers", "lexical")
    wb(db, "judge", "labels", "import", str(labels / "demo-claims.jsonl"), json_out=False)


def measure_claims(db: Path, model: str, thresholds: list[float]) -> list[dict]:
    rows = []
    for t in thresholds:
        start = time.perf_counter()
        run = wb(db, "claims", "run", "recorded", "--decomposer", "rule", "--verifiers", "embedding",
                 "--embedding-threshold", f"{t:.2f}", "--embedding-model", model)
        report = wb(db, "judge", "report", "claims", "recorded", "--claim-run", str(run["claim_run"]))
        if report["labelled_items"] != 40 or report["stale"] or report["unmatched"]:
            sys.exit(f"claim run {run['claim_run']}: the 40 labels do not all match its claims: {report}")
        judge = report["judges"]["embedding"]
        kappa = judge["kappa"]
        rows.append({"threshold": t, "kappa": kappa["value"], "kappa_lo": kappa["lo"], "kappa_hi": kappa["hi"],
                     "accuracy": judge["accuracy"], "confusion": judge["confusion"],
                     "judge_positive": judge["judge_positive_rate"], "human_positive": judge["human_positive_rate"],
                     "claim_run": run["claim_run"], "embedded": run["embedded"],
                     "seconds": round(time.perf_counter() - start, 2)})
    return rows


def setup_long_answers(db: Path) -> None:
    meta = DATA / "ragchecker-meta"
    wb(db, "import", "--from", "ragchecker-meta", str(meta / "human_labeled_data.json"),
       "--baselines", str(meta / "baseline_ragchecker.json"), "--name", "prefs")


def measure_long_answers(db: Path, model: str, thresholds: list[float]) -> list[dict]:
    seconds = {}
    for i, t in enumerate(thresholds):
        start = time.perf_counter()
        wb(db, "meta", "run", "prefs", "--embedding-threshold", f"{t:.2f}", "--embedding-model", model,
           *(["--no-similarity"] if i else []))
        seconds[t] = round(time.perf_counter() - start, 2)
    report = wb(db, "meta", "report", "prefs")
    rows = []
    for t in thresholds:
        mine = {r["label"]: r for r in report if r["kind"] == "claims"
                and r["config"]["embedding_model"] == MODELS[model]
                and abs(r["config"]["embedding_threshold"] - t) < 1e-9}
        rows.append({"threshold": t, **{label: mine[label]["pearson"] for label in mine},
                     "overall_lo": mine["overall"]["low"], "overall_hi": mine["overall"]["high"],
                     "n": mine["overall"]["n"], "seconds": seconds[t]})
    stem = MODELS[model].replace("-", "").lower()
    similarity = [r for r in report if r["kind"] == "similarity" and r["label"] == "overall"
                  and stem in r["scorer"].replace("-", "").lower()]
    if similarity:
        rows[0]["similarity_overall"] = similarity[0]["pearson"]
    return rows


def setup_dedup(db: Path) -> None:
    wb(db, "dedup", "import", str(DATA / "dedup"), "--name", "dedup")


def dedup_figures(db: Path, run: str, threshold: float | None) -> dict:
    ev = wb(db, "dedup", "eval", run, *(["--threshold", f"{threshold:.2f}"] if threshold is not None else []))
    return {k: v["value"] for k, v in ev["modes"]["embedding"].items()}


def measure_dedup(db: Path, model: str, thresholds: list[float]) -> list[dict]:
    start = time.perf_counter()
    wb(db, "dedup", "run", "dedup", "--modes", "embedding", "--embedding-model", model,
       "--embedding-threshold", "0", "--name", f"{model}-all")
    seconds = round(time.perf_counter() - start, 2)
    return [{"threshold": t, **dedup_figures(db, f"{model}-all", t), "seconds": seconds if i == 0 else 0.0}
            for i, t in enumerate(thresholds)]


def check_dedup(db: Path, model: str, row: dict) -> bool:
    """A dedup run at the row's threshold, evaluated at eval's default, gives the row's figures (the shortcut holds)."""
    t = row["threshold"]
    name = f"{model}-at-{t:.2f}"
    wb(db, "dedup", "run", "dedup", "--modes", "embedding", "--embedding-model", model,
       "--embedding-threshold", f"{t:.2f}", "--name", name)
    direct = dedup_figures(db, name, None)
    same = all(direct[k] == row[k] for k in direct)
    print(json.dumps({"set": "dedup", "model": model, "threshold": t, "check": "direct run = shortcut",
                      "same": same, **({} if same else {"direct": direct})}), flush=True)
    return same


SETUP = {"claims": setup_claims, "long_answers": setup_long_answers, "dedup": setup_dedup}
MEASURE = {"claims": measure_claims, "long_answers": measure_long_answers, "dedup": measure_dedup}


def fmt(row: dict, use: str) -> str:
    return " · ".join(f"{k} {row[k]:.4g}" if isinstance(row.get(k), float) else f"{k} {row.get(k)}"
                      for k in SHOWN[use])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma list of {', '.join(SETS)} (default: all)")
    parser.add_argument("--models", default="e5,minilm", help="e5 (swept), minilm (at its own thresholds)")
    args = parser.parse_args()
    sets, models = args.sets.split(","), args.models.split(",")
    if not set(sets) <= set(SETS) or not set(models) <= set(MODELS):
        parser.error(f"--sets: of {', '.join(SETS)}; --models: of {', '.join(MODELS)}")
    failed, summary, notes, began = False, [], [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WORKBENCH_MODEL_CACHE"] = str(Path(tmp) / "models")
        from workbench.models.embedders import E5, MINILM

        for use in sets:
            db, start = Path(tmp) / f"{use}.db", time.perf_counter()
            SETUP[use](db)
            for model in models:
                spec = E5 if model == "e5" else MINILM
                thresholds = grid(use) if model == "e5" else [spec.threshold(use)]
                rows = MEASURE[use](db, model, thresholds)
                for r in rows:
                    print(json.dumps({"set": use, "model": model, **r}), flush=True)
                chosen = best(rows, KEYS[use])
                if use == "dedup":
                    failed |= not check_dedup(db, model, chosen)
                summary.append({"set": use, "model": model, "threshold": chosen["threshold"],
                                **{k: chosen[k] for k in SHOWN[use]}})
                if "similarity_overall" in rows[0]:
                    notes.append(f"{use}, {model}: whole-answer similarity, overall Pearson "
                                 f"{rows[0]['similarity_overall']:.2f}")
                if model != "e5":
                    continue
                i = rows.index(chosen)
                if i in (0, len(rows) - 1):
                    notes.append(f"{use}, e5: the optimum is at the grid's edge: widen the grid")
                near = ", ".join(f"{'*' if r is chosen else ''}{r['threshold']:.2f}: {r[KEYS[use][0]]:.4g}"
                                 for r in rows[max(0, i - 3): i + 4] if r[KEYS[use][0]] is not None)
                notes.append(f"{use}, e5 {KEYS[use][0]} near the optimum: {near}")
                current = [r for r in rows if abs(r["threshold"] - spec.threshold(use)) < 1e-9]
                if current:
                    notes.append(f"{use}, e5 at the current default {spec.threshold(use):.2f}: {fmt(current[0], use)}")
            notes.append(f"{use}: {time.perf_counter() - start:.0f} s")
    print(json.dumps({"bench": "thresholds", "chosen": summary, "seconds": round(time.perf_counter() - began, 1),
                      "cpus": os.cpu_count(), "loadavg": os.getloadavg()}))
    print("\nthresholds (e5: chosen on the grid; minilm: its own), with the figures at them:")
    for s in summary:
        print(f"  {s['set']:<13} {s['model']:<7} {s['threshold']:.2f}  {fmt(s, s['set'])}")
    print("\n".join(["", *notes, f"total {time.perf_counter() - began:.0f} s"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
