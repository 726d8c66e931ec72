"""Benchmark: retrieval evaluation on HowToCook, BM25 over 1M triples, query throughput.

Prints one JSON line per benchmark. Figures go into the README's Performance table.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workbench.data.corpus import import_corpus  # noqa: E402
from workbench.retrieval.bm25 import BM25Index, triple_text  # noqa: E402
from workbench.retrieval.evaluate import evaluate_retrieval, filename_questions  # noqa: E402
from workbench.retrieval.runs import retrieve  # noqa: E402
from workbench.store import open_store  # noqa: E402

HOWTOCOOK = REPO.parent / "shared" / "data" / "howtocook"


def corpus_pipeline() -> dict:
    """Import and index all of HowToCook, then evaluate its questions (zh and en filename questions)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "b.db")
        start = time.perf_counter()
        report = import_corpus(store, HOWTOCOOK, "hc")
        n = filename_questions(store, "hc", lang="zh") + filename_questions(store, "hc", lang="en")
        retrieve(store, "hc", k=10)
        result = evaluate_retrieval(store, "hc", ks=(1, 3, 5, 10))
        seconds = time.perf_counter() - start
        store.close()
    return {"bench": "retrieval_corpus", "documents": report.documents, "chunks": report.chunks, "questions": n,
            "seconds": round(seconds, 2), "recall@5_doc": result.levels["doc"]["overall"][("recall", 5)].value,
            "target": "1,000 questions < 15 s (here: every document × zh + en filename questions)"}


def triples_index(n: int = 1_000_000, queries: int = 1000) -> dict:
    """Build a BM25 index over ``n`` synthetic triples and time ``queries`` searches."""
    rng = random.Random(0)
    syll = ["ka", "lo", "mi", "ren", "to", "sa", "vin", "dor", "el", "qu", "bra", "zet"]
    rels = ["directed_by", "written_by", "starred_actors", "has_genre", "release_year", "in_language"]

    def name(words: int) -> str:
        return " ".join("".join(rng.choice(syll) for _ in range(rng.randint(2, 3))).title() for _ in range(words))

    docs = [(i, triple_text(name(rng.randint(1, 3)), rng.choice(rels), name(2))) for i in range(n)]
    start = time.perf_counter()
    index = BM25Index(docs, mode="en")
    build = time.perf_counter() - start
    qs = [f"who directed {docs[rng.randrange(n)][1].split(' directed')[0]}" for _ in range(queries)]
    start = time.perf_counter()
    index.search_many(qs, 10)
    search = time.perf_counter() - start
    return {"bench": "bm25_1m_triples", "triples": n, "build_seconds": round(build, 1), "target_build_s": 60,
            "pass": build < 60, "queries": queries, "queries_per_second": round(queries / search, 1)}


if __name__ == "__main__":
    print(json.dumps(corpus_pipeline(), ensure_ascii=False))
    print(json.dumps(triples_index()))
