"""Built-in retrieval runs: BM25, dense or hybrid over a dataset's units, stored like imported retrieval.jsonl.

The BM25 index is persisted under ``<db>.indexes/`` keyed by the corpus fingerprint, so it
is rebuilt only when the dataset's units change (or when the saved one cannot be read: it is
a cache, rebuilt with a note that names it); dense vectors live in the store's
``embeddings`` table, so only changed units are embedded again. Every sample's question is a query;
the ranked units land in ``retrievals`` under the retriever's name, in one transaction.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO

from workbench.data.importer import count_noun
from workbench.errors import BadInput
from workbench.filekinds import file_kind
from workbench.evidence.stored import load_units
from workbench.models.embedder import CachedEmbedder
from workbench.models.embedders import PASSAGE, QUERY
from workbench.models.openai_http import DEFAULT_TIMEOUT
from workbench.retrieval.bm25 import META_NAME, BM25Index, OtherFormat, fingerprint, triple_text
from workbench.retrieval.dense import cosine_top_k, reciprocal_rank_fusion
from workbench.store.caches import index_cache
from workbench.store.db import Store
from workbench.store.queries import get_dataset, load_samples


RETRIEVERS = ("bm25", "dense", "hybrid")
#: How deep each side of ``hybrid`` ranks before the fusion keeps the top k.
HYBRID_DEPTH = 100


@dataclass
class RetrievalRunReport:
    dataset: str
    retriever: str                           # the name the results are stored under
    queries: int
    index_built: bool                        # the BM25 index (bm25, hybrid) was built, not loaded
    index_dir: str | None
    mode: str | None                         # BM25's tokenizer (bm25, hybrid)
    method: str = "bm25"                     # bm25 | dense | hybrid
    embedding_model: str | None = None       # dense, hybrid: the GGUF
    embedded: int | None = None              # dense, hybrid: texts embedded now (units and questions)
    cached: int | None = None                # ... and read from the cache
    unchanged: bool = False
    replaced: dict[str, int] | None = None   # the old results replaced: rows, and runs planned on them


def _docs(store: Store, dataset_id: int) -> list[tuple[int, str]]:
    units = load_units(store, dataset_id)
    return [(uid, triple_text(u.head, u.relation, u.tail) if u.kind == "triple" else u.text)
            for uid, u in sorted(units.items())]


def open_index(store: Store, dataset_id: int, mode: str = "auto",
               docs: list[tuple[int, str]] | None = None) -> tuple[BM25Index, bool, Path]:
    """The dataset's BM25 index: loaded when its fingerprint matches, else built and saved.

    ``docs`` are the dataset's ``(uid, text)`` when the caller has read them already. A saved
    index that cannot be read is rebuilt, and one that cannot be saved is used unsaved: each
    with a one-line note on stderr naming the index.
    """
    docs = _docs(store, dataset_id) if docs is None else docs
    fp = fingerprint(docs)
    directory = index_cache(store.path) / f"bm25-{dataset_id}-{mode}-{fp[:16]}"
    problem = _not_plain(directory)
    if problem is not None:
        _note(f"note: the BM25 index {directory} is damaged ({problem}); rebuilding it")
        _discard(directory)
    elif (directory / META_NAME).is_file():
        try:
            return BM25Index.load(directory), False, directory
        except OtherFormat:
            _discard(directory)         # an older workbench's index: built again, nothing is wrong
        # What json and numpy raise on a damaged or truncated file, and the guarded open's refusal of a
        # file that is a link to the database: the cache is rebuilt beside it from the store, never read through.
        except (OSError, EOFError, ValueError, KeyError, TypeError, MemoryError) as exc:
            _note(f"note: the BM25 index {directory} is damaged ({_reason(exc)}); rebuilding it")
            _discard(directory)
    index = BM25Index(docs, mode=mode)
    try:
        index.save(directory)
    except OSError as exc:
        _note(f"note: cannot save the BM25 index to {directory} ({_reason(exc)}); it will be built again next time")
    return index, True, directory


def _not_plain(directory: Path) -> str | None:
    """What in the index directory is not as the workbench writes it (a directory of regular files), or None.

    Looked at with ``lstat``, nothing opened: a FIFO put in place of a file would block the
    read (and the rewrite) for ever, and a link to ``/dev/zero`` would be read until memory ran out.
    """
    try:
        st = directory.lstat()
    except (FileNotFoundError, NotADirectoryError):   # not built yet (or no cache can be: said when saving)
        return None
    except OSError as exc:
        return _reason(exc)
    if not stat.S_ISDIR(st.st_mode):
        return f"it is {file_kind(st.st_mode)}, not a directory"
    try:
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            mode = entry.stat(follow_symlinks=False).st_mode
            if not stat.S_ISREG(mode):
                return f"{entry.name} is {file_kind(mode)}, not a regular file"
    except OSError as exc:
        return _reason(exc)
    return None


def _discard(directory: Path) -> None:
    """Remove a damaged index before it is rebuilt (links and FIFOs are unlinked, never opened or followed)."""
    try:
        if directory.is_symlink() or not directory.is_dir():
            directory.unlink()
        else:
            shutil.rmtree(directory)
    except FileNotFoundError:
        pass
    except OSError as exc:
        _note(f"note: cannot remove the damaged BM25 index {directory} ({_reason(exc)})")


def _reason(exc: BaseException) -> str:
    """An exception's message on one line."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(text.split())


def _note(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def dense_search(store: Store, docs: Sequence[tuple[int, str]], questions: Sequence[str], k: int,
                 model: str | None, *, n_threads: int | None = None, on_wait=None,
                 timeout: float = DEFAULT_TIMEOUT) -> tuple[list, CachedEmbedder]:
    """Cosine top ``k`` of every question over ``docs`` (a dataset's ``(uid, text)``), vectors from the store's cache.

    Returns the rankings and the embedder, whose ``embedded`` / ``cached`` say what was computed.
    """
    embedder = CachedEmbedder(store, model, n_threads=n_threads, on_wait=on_wait, timeout=timeout)
    try:
        vectors = embedder.vectors([text for _, text in docs], role=PASSAGE)
        queries = embedder.vectors(list(questions), role=QUERY)
    finally:
        embedder.close()
    return cosine_top_k(queries, vectors, [uid for uid, _ in docs], k), embedder


def retrieve(store: Store, dataset: str | None = None, *, name: str | None = None, k: int = 50, mode: str = "auto",
             retriever: str = "bm25", embedding_model: str | None = None, replace: bool = False,
             n_threads: int | None = None, on_wait=None, timeout: float = DEFAULT_TIMEOUT) -> RetrievalRunReport:
    """Run a built-in retriever for every question; store the top ``k`` as retriever ``name``.

    ``retriever``: ``bm25``; ``dense`` (cosine over ``embedding_model``'s vectors, default
    multilingual-e5-small); ``hybrid`` (reciprocal rank fusion of the two, each ranked to
    ``max(k, HYBRID_DEPTH)``). ``name`` defaults to the retriever's.
    """
    if k < 1:
        raise ValueError("--k must be at least 1")
    if retriever not in RETRIEVERS:
        raise ValueError(f"--retriever: {retriever!r} is not one of {', '.join(RETRIEVERS)}")
    name = name or retriever
    ds = get_dataset(store, dataset)
    samples = load_samples(store, ds.id)
    if not samples:
        raise ValueError(f"dataset {ds.name!r} has no questions to retrieve for")
    questions = [s.question for s in samples]
    # Each side of a fusion ranks deeper than k: a unit ranked 30th by both may belong in the fused top 10.
    depth = max(k, HYBRID_DEPTH) if retriever == "hybrid" else k
    built, directory, embedder = False, None, None
    docs = _docs(store, ds.id)
    if retriever in ("bm25", "hybrid"):
        index, built, directory = open_index(store, ds.id, mode, docs)
        mode = index.mode
        lexical = index.search_many(questions, depth)
    if retriever in ("dense", "hybrid"):
        dense, embedder = dense_search(store, docs, questions, depth, embedding_model, n_threads=n_threads,
                                       on_wait=on_wait, timeout=timeout)
    if retriever == "bm25":
        results = lexical
    elif retriever == "dense":
        results, mode = dense, None
    else:
        results = [reciprocal_rank_fusion([[u for u, _ in a], [u for u, _ in b]], k) for a, b in zip(lexical, dense)]
    report = RetrievalRunReport(ds.name, name, len(samples), built, str(directory) if directory else None, mode,
                                method=retriever)
    if embedder is not None:
        report.embedding_model = str(embedder.path)
        report.embedded, report.cached = embedder.embedded, embedder.cached
    rows = [(ds.id, name, s.sid, json.dumps([int(u) for u, _ in ranked]), json.dumps([float(x) for _, x in ranked]))
            for s, ranked in zip(samples, results)]
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
