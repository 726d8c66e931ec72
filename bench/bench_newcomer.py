"""Benchmark: what a newcomer waits for when opening the Retrieval screen.

Run: ``python bench/bench_newcomer.py [--reps N]``.

On the sample HowToCook corpus (65 documents) with Chinese and English filename questions
and BM25 results, it measures side by side, in one process:
1. ``evaluate_retrieval`` with the quick pass the screen paints first (100 resamples)
   against the full pass it refines to (1000), the cost the screen used to pay before
   showing anything;
2. in the real app (Textual's Pilot, 120×40): the time from pressing ``v`` to the first
   painted metrics, and to the refined ones.
Reports medians and the ratio full / quick.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workbench.data.corpus import import_corpus  # noqa: E402
from workbench.retrieval.evaluate import evaluate_retrieval, filename_questions  # noqa: E402
from workbench.retrieval.runs import retrieve  # noqa: E402
from workbench.store import open_store  # noqa: E402


def build(db: Path) -> None:
    store = open_store(db)
    import_corpus(store, REPO / "sample_data" / "howtocook", "hc")
    filename_questions(store, "hc")
    filename_questions(store, "hc", lang="en")
    retrieve(store, "hc", k=10)
    store.close()


def time_evaluation(db: Path, resamples: int, reps: int) -> list[float]:
    store = open_store(db)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        evaluate_retrieval(store, "hc", "bm25", (1, 3, 5, 10), resamples=resamples)
        times.append(time.perf_counter() - t0)
    store.close()
    return times


async def time_screen(db: Path) -> tuple[float, float]:
    """Seconds from switching to Retrieval to its first painted metrics, and to the refined ones.

    The switch is made directly (not by ``pilot.press``, which waits for the app to go idle
    and so would hide the difference between the two paints).
    """
    from workbench.tui.app import WorkbenchApp

    app = WorkbenchApp(db, poll_seconds=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        t0 = time.perf_counter()
        app.switch_mode("retrieval")
        first = refined = None
        while refined is None and time.perf_counter() - t0 < 60:
            await asyncio.sleep(0.005)
            report = getattr(app.screen, "report", None)
            if report is not None and first is None:
                first = time.perf_counter() - t0
            if report is not None and report.resamples >= app.screen.resamples:
                refined = time.perf_counter() - t0
    return first, refined


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "hc.db"
        build(db)
        quick, full = [], []
        for _ in range(args.reps):  # interleaved, so both see the same machine load
            quick += time_evaluation(db, 100, 1)
            full += time_evaluation(db, 1000, 1)
        screens = [asyncio.run(time_screen(db)) for _ in range(3)]  # each a fresh app: a first open
    q, f = statistics.median(quick), statistics.median(full)
    first = statistics.median(s[0] for s in screens)
    refined = statistics.median(s[1] for s in screens)
    print(json.dumps({"evaluate_quick_s": quick, "evaluate_full_s": full, "screen": screens}))
    print(f"retrieval eval, 130 questions: quick (100 resamples) {q:.3f}s · full (1000) {f:.3f}s · "
          f"full/quick {f / q:.1f}×")
    print(f"Retrieval screen (v → painted): first paint {first:.2f}s · refined {refined:.2f}s "
          f"(median of {len(screens)})")


if __name__ == "__main__":
    main()
