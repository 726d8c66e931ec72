"""Benchmark: trusting the judges on a 100k-sample × 50-cell run (5M scored answers).

The populations are columns (numpy arrays), not item objects. The figures, one process:

a. ``judge report answers`` (the scorer against 1,000 uniform answer labels; κ with 2,000
   resamples; naive / human / PPI accuracy) -- time and peak RSS. Side by side, in the same
   run, the same report built over item objects (a list of ``JudgedItem`` made for every
   answer, which is how it was first written), for the ratio;
b. the Labels screen's next item: population + uniform queue + the next 50 items with their
   texts (what its worker does when the screen opens or switches kind);
c. one ledger cell's prediction-powered estimates (the Ledger side panel's extra lines);
d. a label written: one ``put_label`` transaction, median of 200.

Targets (ours; the issue sets none): a < 10 s and < 2 GiB; b < 5 s; c < 0.5 s; d < 50 ms.
Run: ``python bench/bench_judges.py [--db PATH] [--labels N]``. The store is bench_tui's
(:func:`bench_tui.generate`), reused from ``--db`` (default ``/tmp/bench_incremental.db``) if it
exists; the benchmark writes answer labels into it (annotator ``bench``) and removes them after.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_incremental import ensure_db  # noqa: E402

from workbench.judges.items import population  # noqa: E402
from workbench.judges.queue import label_queue  # noqa: E402
from workbench.judges.report import cell_estimates, judge_report  # noqa: E402
from workbench.metrics.agreement import agreement  # noqa: E402
from workbench.store import open_store  # noqa: E402
from workbench.store.db import utcnow  # noqa: E402
from workbench.store.labels import Label, labels_of, put_label, write_label  # noqa: E402

RUN = "bench"
ANNOTATOR = "bench"
TARGETS = {"report": 10.0, "next_item": 5.0, "cell_panel": 0.5, "label_write": 0.050}


def rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def emit(group: str, target: float | None, seconds: float, **extra) -> None:
    print(json.dumps({"bench": "judges", "group": group, "seconds": round(seconds, 4), "target_s": target,
                      "pass": None if target is None else seconds < target, **extra}), flush=True)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def object_report(store) -> float:
    """The first version's shape: one JudgedItem per answer, the report over the objects."""
    pop = population(store, "answers", RUN)
    items = list(pop.items)                                     # 5M objects
    index = {item.key: i for i, item in enumerate(items)}
    labels = labels_of(store.conn, "answer", pop.owner_id)
    judge = pop.judges[0]
    labelled = [(index[lab.key], lab.label) for lab in labels if lab.key in index]
    agreement([y for _, y in labelled], [items[i].verdicts[judge] for i, _ in labelled],
              keys=[i for i, _ in labelled], resamples=2000)
    return float(np.mean([item.scores[judge] for item in items]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/bench_incremental.db"))
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--labels", type=int, default=1000)
    args = parser.parse_args(argv)
    gen = ensure_db(args.db, args.samples)
    print(json.dumps({"bench": "judges", "store": gen}), flush=True)
    store = open_store(args.db)
    try:
        pop = population(store, "answers", RUN)
        queue = label_queue(store.conn, pop, ANNOTATOR)
        rng = np.random.default_rng(0)
        now = utcnow()
        with store.transaction() as conn:     # the labels, set up in one go (not measured)
            for item in queue.items[:args.labels]:
                truth = item.verdicts[pop.judges[0]] if rng.random() < 0.9 else not item.verdicts[pop.judges[0]]
                write_label(conn, Label(item.key, ANNOTATOR, bool(truth), "uniform", now))
        del pop, queue

        rss0 = rss_mib()
        report, seconds = timed(lambda: judge_report(store, "answers", RUN))
        est = report.estimates[0].estimates
        emit("a. judge report answers (columns)", TARGETS["report"], seconds, peak_rss_mib=rss_mib(),
             rss_before_mib=rss0, items=report.items, labels=report.labels,
             kappa=report.agreement[0].agreement.kappa.value, naive=est.naive.value, ppi=est.ppi.value)
        naive, objects_s = timed(lambda: object_report(store))
        assert abs(naive - est.naive.value) < 1e-12, (naive, est.naive.value)
        emit("a'. the same over item objects (the first version)", None, objects_s, peak_rss_mib=rss_mib(),
             ratio=round(objects_s / seconds, 2))

        def next_item():
            pop = population(store, "answers", RUN)
            q = label_queue(store.conn, pop, ANNOTATOR)
            return q.head(store, 50)
        head, seconds = timed(next_item)
        emit("b. Labels screen: population + queue + next 50 items", TARGETS["next_item"], seconds,
             first=str(head[0].key))

        cell = store.conn.execute("SELECT cell_id FROM cells WHERE run_id = (SELECT id FROM runs WHERE name = ?)"
                                  " ORDER BY cell_id LIMIT 1", (RUN,)).fetchone()[0]
        times = [timed(lambda: cell_estimates(store, RUN, cell))[1] for _ in range(5)]
        emit("c. Ledger side panel: one cell's PPI accuracy", TARGETS["cell_panel"], statistics.median(times),
             values=[round(t, 4) for t in times])

        pop = population(store, "answers", RUN)
        todo = label_queue(store.conn, pop, ANNOTATOR).items[:200]
        writes = [timed(lambda item=item: put_label(store, item.key, True, ANNOTATOR, via="uniform"))[1]
                  for item in todo]
        emit("d. one label written (its own transaction), median of 200", TARGETS["label_write"],
             statistics.median(writes), max_s=round(max(writes), 4))
    finally:
        with store.transaction() as conn:
            conn.execute("DELETE FROM answer_labels WHERE annotator = ?", (ANNOTATOR,))
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
