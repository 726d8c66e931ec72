"""Built-in retrieval runs: BM25 over a dataset's units, stored like imported retrieval.jsonl.

The index is persisted under ``<db>.indexes/`` keyed by the corpus fingerprint, so it
is rebuilt only when the dataset's units change. Every sample's question is a query;
the ranked units land in ``retrievals`` under the retriever's name, in one transaction.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from workbench.data.importer import count_noun
from workbench.errors import BadInput
from workbench.evidence.stored import load_units
from workbench.retrieval.bm25 import BM25Index, fingerprint, triple_text
from workbench.store.db import Store
from workbench.store.queries import get_dataset, load_samples


@dataclass
class RetrievalRunReport:
    dataset: str
    retriever: str
    queries: int
    index_built: bool
    index_dir: str
    mode: str
    unchanged: bool = False
    replaced: dict[str, int] | None = None   # the old results replaced: rows, and runs planned on them


def _docs(store: Store, dataset_id: int) -> list[tuple[int, str]]:
    units = load_units(store, dataset_id)
    return [(uid, triple_text(u.head, u.relation, u.tail) if u.kind == "triple" else u.text)
            for uid, u in sorted(units.items())]


def open_index(store: Store, dataset_id: int, mode: str = "auto") -> tuple[BM25Index, bool, Path]:
    """The dataset's BM25 index: loaded when its fingerprint matches, else built and saved."""
    docs = _docs(store, dataset_id)
    fp = fingerprint(docs)
    directory = Path(f"{store.path}.indexes") / f"bm25-{dataset_id}-{mode}-{fp[:16]}"
    if (directory / "workbench_bm25.json").is_file():
        return BM25Index.load(directory), False, directory
    index = BM25Index(docs, mode=mode)
    index.save(directory)
    return index, True, directory


def open_dense_index(store: Store, dataset_id: int, model: str):
    """The dataset's dense index for ``model`` (a GGUF path): loaded when the corpus is unchanged."""
    from workbench.models.locate import resolve_model
    from workbench.retrieval.dense import META_NAME, DenseIndex

    path = str(resolve_model(model))
    docs = _docs(store, dataset_id)
    fp = fingerprint(docs)
    tag = hashlib.sha256(path.encode()).hexdigest()[:8]
    directory = Path(f"{store.path}.indexes") / f"dense-{dataset_id}-{tag}-{fp[:16]}"
    if (directory / META_NAME).is_file():
        return DenseIndex.load(directory), False, directory
    index = DenseIndex.build(docs, path, fp)
    index.save(directory)
    return index, True, directory


def retrieve(store: Store, dataset: str | None = None, *, name: str | None = None, k: int = 50, mode: str = "auto",
             dense_model: str | None = None, replace: bool = False) -> RetrievalRunReport:
    """Run BM25 (or, with ``dense_model``, dense retrieval) for every question; store the top ``k``.

    The results are stored as retriever ``name`` (default ``bm25``, or ``dense``).
    """
    if k < 1:
        raise ValueError("--k must be at least 1")
    name = name or ("dense" if dense_model else "bm25")
    ds = get_dataset(store, dataset)
    samples = load_samples(store, ds.id)
    if not samples:
        raise ValueError(f"dataset {ds.name!r} has no questions to retrieve for")
    if dense_model:
        index, built, directory = open_dense_index(store, ds.id, dense_model)
        mode = "dense"
    else:
        index, built, directory = open_index(store, ds.id, mode)
        mode = index.mode
    results = index.search_many([s.question for s in samples], k)
    rows = [(ds.id, name, s.sid, json.dumps([int(u) for u, _ in ranked]), json.dumps([float(x) for _, x in ranked]))
            for s, ranked in zip(samples, results)]
    report = RetrievalRunReport(ds.name, name, len(samples), built, str(directory), mode)
    # Compared under the write lock: results another process stored meanwhile are never replaced unseen.
    with store.transaction() as conn:
        existing = conn.execute("SELECT sid, uids, scores FROM retrievals WHERE dataset_id = ? AND retriever = ?",
                                (ds.id, name)).fetchall()
        if existing:
            if sorted(existing) == sorted(r[2:] for r in rows):
                report.unchanged = True
                return report
            planned = conn.execute("SELECT count(*) FROM runs WHERE dataset_id = ? AND retriever = ?",
                                   (ds.id, name)).fetchone()[0]
            if not replace:
                raise BadInput(f"retriever {name!r} already has different results in {ds.name!r}; pass --replace "
                               f"to replace its {count_noun(len(existing), 'row')} ({count_noun(planned, 'run')} "
                               "planned on them keep their events) or choose another --name")
            report.replaced = {"retrieval_rows": len(existing), "runs_planned_on_them": planned}
            conn.execute("DELETE FROM retrievals WHERE dataset_id = ? AND retriever = ?", (ds.id, name))
        conn.executemany("INSERT INTO retrievals (dataset_id, retriever, sid, uids, scores) VALUES (?, ?, ?, ?, ?)",
                         rows)
    return report


def export_retrieval(store: Store, out: TextIO, dataset: str | None = None, retriever: str | None = None) -> int:
    """Write retrieval results as ``retrieval.jsonl`` lines (the import contract); return the count."""
    ds = get_dataset(store, dataset)
    units = load_units(store, ds.id)
    sample_ids = {s.sid: s.id for s in load_samples(store, ds.id)}
    where, params = "dataset_id = ?", [ds.id]
    if retriever:
        where += " AND retriever = ?"
        params.append(retriever)
    count = 0
    for name, sid, uids, scores in store.conn.execute(
            f"SELECT retriever, sid, uids, scores FROM retrievals WHERE {where} ORDER BY retriever, sid", params):
        results = []
        for uid, score in zip(json.loads(uids), json.loads(scores)):
            u = units[uid]
            ref = {"triple": [u.head, u.relation, u.tail]} if u.kind == "triple" else {"chunk_id": _chunk_id(store, ds.id, uid)}
            results.append({**ref, "score": score})
        out.write(json.dumps({"sample_id": sample_ids[sid], "retriever": name, "results": results},
                             ensure_ascii=False) + "\n")
        count += 1
    return count


def _chunk_id(store: Store, dataset_id: int, uid: int) -> str:
    return store.conn.execute("SELECT chunk_id FROM units WHERE dataset_id = ? AND uid = ?",
                              (dataset_id, uid)).fetchone()[0]
