"""Retrieval evaluation over a corpus dataset: filename questions and metrics at k (docs/design.md §5).

Questions become ordinary samples of the corpus dataset: the answer is the document's
title, every chunk of the source document is a one-unit gold path, and ``meta`` records
the strategy, the document and its category. Metrics follow trec_eval/ranx
(``workbench.metrics.ir``) at document level (any chunk of the gold document counts)
and at chunk level (every chunk of the gold document is relevant, grade 1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Sequence

from workbench.metrics.ir import aggregate, doc_level, evaluate
from workbench.models.cached import default_llm
from workbench.models.structured import string_list_schema, strings_after
from workbench.passes.inflight import in_flight
from workbench.store.db import Store
from workbench.store.queries import get_dataset, load_samples
from workbench.metrics.stats import RESAMPLES, SEED

TEMPLATES = {"zh": "如何做{name}？", "en": "How do I make {name}?"}


def filename_questions(store: Store, dataset: str | None = None, *, lang: str = "zh") -> int:
    """One question per document from its title (``如何做{菜名}？``); returns how many were added."""
    if lang not in TEMPLATES:
        raise ValueError(f"--lang: {lang!r} is not one of {', '.join(TEMPLATES)}")
    ds = get_dataset(store, dataset)
    docs = store.conn.execute("SELECT doc_id, title, category FROM documents WHERE dataset_id = ? ORDER BY doc_id",
                              (ds.id,)).fetchall()
    if not docs:
        raise ValueError(f"dataset {ds.name!r} is not a Markdown corpus (import one with `workbench corpus import`)")
    chunks: dict[str, list[int]] = {}
    for uid, doc_id in store.conn.execute("SELECT uid, doc_id FROM units WHERE dataset_id = ? ORDER BY uid", (ds.id,)):
        chunks.setdefault(doc_id, []).append(uid)
    existing = {s.id for s in load_samples(store, ds.id)}
    next_sid = store.conn.execute("SELECT coalesce(max(sid), 0) FROM samples WHERE dataset_id = ?",
                                  (ds.id,)).fetchone()[0]
    rows = []
    for doc_id, title, category in docs:
        sample_id = f"filename:{lang}:{doc_id}"
        if sample_id in existing or doc_id not in chunks:
            continue
        next_sid += 1
        meta = {"strategy": "filename", "lang": lang, "doc_id": doc_id, "category": category}
        rows.append((ds.id, next_sid, sample_id, TEMPLATES[lang].format(name=title), json.dumps([title], ensure_ascii=False),
                     json.dumps([[u] for u in chunks[doc_id]]), json.dumps(meta, ensure_ascii=False)))
    with store.transaction() as conn:
        conn.executemany("INSERT INTO samples (dataset_id, sid, id, question, answers, gold_paths, meta)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return len(rows)


@dataclass
class RetrievalEval:
    """Per level ("doc", "chunk"): aggregates with CIs, overall and by strategy and category."""

    dataset: str
    retriever: str
    ks: tuple[int, ...]
    n: int
    levels: dict = field(default_factory=dict)
    misses: list[dict] = field(default_factory=list)
    per_query: dict = field(default_factory=dict)   # level -> PerQuery (one row per question)
    resamples: int = 0                               # bootstrap resamples behind the CIs


def evaluate_retrieval(store: Store, dataset: str | None = None, retriever: str = "bm25",
                       ks: Sequence[int] = (1, 3, 5, 10), *, resamples: int = RESAMPLES, seed: int = SEED) -> RetrievalEval:
    """Recall, Precision, Hit, MRR, F1 and nDCG at each k, doc- and chunk-level, with bootstrap CIs."""
    ds = get_dataset(store, dataset)
    samples = [s for s in load_samples(store, ds.id) if s.meta.get("doc_id")]
    if not samples:
        raise ValueError(f"dataset {ds.name!r} has no generated questions (`workbench questions generate`)")
    chunk_of = {uid: cid for uid, cid in store.conn.execute(
        "SELECT uid, chunk_id FROM units WHERE dataset_id = ?", (ds.id,))}
    parent = {cid: doc for cid, doc in store.conn.execute(
        "SELECT chunk_id, doc_id FROM units WHERE dataset_id = ?", (ds.id,))}
    ranked = {sid: list(zip(json.loads(u), json.loads(sc))) for sid, u, sc in store.conn.execute(
        "SELECT sid, uids, scores FROM retrievals WHERE dataset_id = ? AND retriever = ?", (ds.id, retriever))}
    if not ranked:
        raise ValueError(f"no results of retriever {retriever!r} in {ds.name!r} (`workbench retrieve {ds.name}`)")
    chunk_run = {s.id: [(chunk_of[u], x) for u, x in ranked.get(s.sid, [])] for s in samples}
    chunk_qrels = {s.id: {chunk_of[p[0]]: 1 for p in s.gold_paths} for s in samples}
    doc_qrels = {s.id: {s.meta["doc_id"]: 1} for s in samples}
    doc_run = doc_level(chunk_run, parent)
    groups = {"strategy": {s.id: s.meta.get("strategy", "?") for s in samples},
              "category": {s.id: s.meta.get("category", "?") for s in samples}}
    report = RetrievalEval(ds.name, retriever, tuple(ks), len(samples), resamples=resamples)
    for level, qrels, run in (("doc", doc_qrels, doc_run), ("chunk", chunk_qrels, chunk_run)):
        per_query = evaluate(qrels, run, ks)
        report.per_query[level] = per_query
        report.levels[level] = {
            "overall": aggregate(per_query, resamples=resamples, seed=seed).overall,
            **{f"by_{g}": aggregate(per_query, resamples=resamples, seed=seed, groups=labels).by_group
               for g, labels in groups.items()},
        }
        if level == "doc":
            hits = per_query[("hit_rate", max(ks))]
            report.misses = [{"sample_id": qid, "question": s.question, "gold": s.meta["doc_id"],
                              "retrieved": [d for d, _ in doc_run.get(qid, [])[:3]]}
                             for qid, h, s in zip(per_query.query_ids, hits, samples) if h == 0]
    return report


QUESTION_SCHEMA = string_list_schema("questions")
_LLM_PROMPT = (
    "Here is a recipe document.\n\n{text}\n\n"
    "Write {n} different questions a cook could ask that this document answers: about the ingredients, "
    "the difficulty and the steps. Reply with JSON {{\"questions\": [...]}}."
)


def llm_questions(store: Store, dataset: str | None = None, *, n: int = 3, limit: int | None = None,
                  llm=None, model: str = "default", max_chars: int = 1200, max_tokens: int = 160,
                  on_wait: Callable[[str], None] | None = None) -> int:
    """Strategy ``llm``: a model writes ``n`` questions per document (schema-constrained JSON list).

    Each question becomes a sample with ``meta.strategy = "llm"`` and the document as gold.
    ``llm`` (a :class:`~workbench.models.cached.CachedLLM`) defaults to one over ``model``: a
    local GGUF or a served model ``URL#NAME``. Its calls are cached, so a second run over the
    same documents asks nothing again. ``on_wait`` hears once, if another process holds the
    local model, who holds it (the wait is not silent). Returns how many were added.
    """
    ds = get_dataset(store, dataset)
    docs = store.conn.execute("SELECT doc_id, title, category FROM documents WHERE dataset_id = ? ORDER BY doc_id",
                              (ds.id,)).fetchall()[:limit]
    if not docs:
        raise ValueError(f"dataset {ds.name!r} is not a Markdown corpus (import one with `workbench corpus import`)")
    if llm is None:
        llm = default_llm(store, model, on_wait=on_wait)
    existing = {s.id for s in load_samples(store, ds.id)}
    next_sid = store.conn.execute("SELECT coalesce(max(sid), 0) FROM samples WHERE dataset_id = ?",
                                  (ds.id,)).fetchone()[0]
    todo = [doc for doc in docs if f"llm:{doc[0]}:0" not in existing]

    def ask(doc) -> tuple[list, list[str]]:
        chunks = store.conn.execute("SELECT uid, text FROM units WHERE dataset_id = ? AND doc_id = ? ORDER BY uid",
                                    (ds.id, doc[0])).fetchall()
        text = "\n".join(t for _, t in chunks)[:max_chars]
        output = llm.ask([{"role": "user", "content": _LLM_PROMPT.format(text=text, n=n)}], max_tokens=max_tokens,
                         schema=QUESTION_SCHEMA).text
        try:
            questions = [q for q in json.loads(output).get("questions", []) if isinstance(q, str)]
        except (json.JSONDecodeError, AttributeError):
            questions = strings_after(output, "questions")  # cut off by max_tokens: keep the complete ones
        return chunks, list(dict.fromkeys(q.strip() for q in questions if q.strip()))[:n]

    added = 0
    # A served model writes up to its --concurrency documents' questions at once; each document is kept as it ends.
    for (doc_id, title, category), outcome in in_flight(todo, ask, llm.width, lambda: False):
        if isinstance(outcome, Exception):
            raise outcome
        chunks, questions = outcome
        rows = []
        for i, question in enumerate(questions):
            next_sid += 1
            meta = {"strategy": "llm", "doc_id": doc_id, "category": category}
            rows.append((ds.id, next_sid, f"llm:{doc_id}:{i}", question, json.dumps([title], ensure_ascii=False),
                         json.dumps([[u] for u, _ in chunks]), json.dumps(meta, ensure_ascii=False)))
        with store.transaction() as conn:  # one document at a time: an interrupted run keeps what it made
            conn.executemany("INSERT INTO samples (dataset_id, sid, id, question, answers, gold_paths, meta)"
                             " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        added += len(rows)
    return added


def latest_corpus(store: Store) -> str | None:
    """The most recently imported dataset that is a Markdown corpus, or None."""
    row = store.conn.execute("SELECT d.name FROM datasets d WHERE EXISTS (SELECT 1 FROM documents x"
                             " WHERE x.dataset_id = d.id) ORDER BY d.id DESC LIMIT 1").fetchone()
    return row[0] if row else None


def stored_retrievers(store: Store, dataset: str) -> list[str]:
    """The retrievers with results stored for ``dataset``: ``bm25`` first when present, then by name."""
    ds = get_dataset(store, dataset)
    names = [r for (r,) in store.conn.execute("SELECT DISTINCT retriever FROM retrievals WHERE dataset_id = ?"
                                              " ORDER BY retriever", (ds.id,))]
    return sorted(names, key=lambda r: (r != "bm25", r))


def document_preview(store: Store, dataset: str, doc_id: str, chars: int = 400) -> str:
    """A document's title and the beginning of its text, for triaging a miss."""
    ds = get_dataset(store, dataset)
    row = store.conn.execute("SELECT title, category FROM documents WHERE dataset_id = ? AND doc_id = ?",
                             (ds.id, doc_id)).fetchone()
    if row is None:
        return f"{doc_id}: not in {dataset}"
    text = "\n".join(t for (t,) in store.conn.execute(
        "SELECT text FROM units WHERE dataset_id = ? AND doc_id = ? ORDER BY uid", (ds.id, doc_id)))
    return f"{row[0]} ({row[1]}) · {doc_id}\n{text[:chars]}"
