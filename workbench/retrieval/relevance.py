"""LLM-judged chunk relevance (docs/design.md §5): the local model says whether each chunk a retriever
ranked is relevant to its question; judged precision@k and nDCG@k sit beside the gold-based figures.

**The judging pass.** A relevance run is a retriever's top ``k`` over a dataset's questions under one
judge: the model file (its sha256), the prompt and the passage cut, which ``config_key`` names. Each
(question, chunk) pair is a job, judged by one forward pass of the model choosing between "Yes" and
"No" (:meth:`~workbench.models.cached.CachedLLM.choose`: the next-token logits of the two options'
first tokens, no generation), cached in the ``generations`` table like every model call and committed
on its own through the pass engine (:mod:`workbench.passes`): a kill -9 loses at most the pair being
judged, a rerun judges only what is left, and a pair already judged under the same prompt (for
another retriever, or at another k) replays from the cache. Jobs run question by question, so the
system prompt and the question are a prefix llama.cpp's KV cache keeps across the question's chunks.
``limit`` judges the first N questions (by sid); a later run without it adds the rest.

**Judged metrics.** The judge's verdicts are binary qrels, pooled over every relevance run of the
dataset under the same judge (TREC's pooling: a chunk judged relevant when another retriever ranked
it counts in nDCG's ideal ranking, so retrievers are measured against one set of judgements).
Precision@k and nDCG@k are the gold-based definitions (:mod:`workbench.metrics.ir`, trec_eval/ranx:
precision divides by k; nDCG is 0 for a question none of whose judged chunks is relevant), with 95 %
bootstrap intervals over questions (:func:`workbench.metrics.ir.aggregate`). At each k a question
whose top k is not wholly judged is left out, and counted: an unjudged chunk is never taken for an
irrelevant one (a question the retriever found nothing for has nothing to judge: it counts, with
precision 0). With no question judged at k the figures are undefined (``None``, shown as —), not 0.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

from workbench.metrics.ir import aggregate, evaluate, rank
from workbench.metrics.stats import RESAMPLES, SEED, Estimate
from workbench.models.base import ModelError
from workbench.models.cached import default_llm
from workbench.models.check import GENERATOR, check_model_options
from workbench.models.locate import model_label
from workbench.models.registry import model_identity
from workbench.passes import PassReport, PassWork, config_hash, drive, plan_or_find
from workbench.retrieval.evaluate import stored_retrievers
from workbench.store.db import Store, utcnow
from workbench.store.labels import RelevanceKey
from workbench.store.lookup import NotFound
from workbench.store.queries import Dataset, get_dataset

__all__ = ["OPTIONS", "SYSTEM", "ASK", "relevance_messages", "RelevanceConfig", "RelevanceRun", "RelevanceReport",
           "judge_relevance", "relevance_runs", "judge_names", "latest_relevance_dataset", "JudgedVerdict",
           "judged_verdicts",
           "JudgedAt", "JudgedMetrics", "judged_metrics", "JudgedPair", "judged_pair", "DEFAULT_MAX_CHARS"]

#: What the judge chooses between; their first characters differ, as a one-pass choice needs.
OPTIONS = ("Yes", "No")
SYSTEM = ("You judge search results. Given a question and a passage, decide whether the passage is relevant "
          "to answering the question: it states something that helps answer it. Judge from the passage "
          "alone. Reply with one word: Yes or No.")
ASK = "Is this passage relevant to answering the question?"
#: The passage is cut to this many characters (a chunk of a Markdown corpus is at most 500 by default).
DEFAULT_MAX_CHARS = 600
KEY_DIGITS = 16
#: Names the prompt in a judge's config: another wording is another judge, never pooled with this one.
PROMPT_SHA = hashlib.sha256(json.dumps([SYSTEM, ASK, OPTIONS], ensure_ascii=False).encode()).hexdigest()[:16]


def relevance_messages(question: str, passage: str) -> list[dict[str, str]]:
    """The chat messages of one verdict; the question comes before the passage, so that the verdicts of one
    question's chunks share a prefix."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {question}\n\nPassage: {passage}\n\n{ASK} Answer Yes or No."}]


@dataclass(frozen=True)
class RelevanceConfig:
    """The judge (``relevance_runs.config_key``): the same key over a dataset pools its verdicts."""

    model_id: str                       # the GGUF's sha256, or a served model's URL#NAME
    max_chars: int = DEFAULT_MAX_CHARS
    prompt: str = PROMPT_SHA

    def key(self) -> str:
        return config_hash(asdict(self))[:KEY_DIGITS]


@dataclass(frozen=True)
class RelevanceRun:
    """A relevance run: a retriever's top ``k`` over a dataset, under the judge ``config_key``."""

    id: int
    dataset_id: int
    dataset: str
    retriever: str
    k: int
    model: str
    config_key: str
    config: dict

    @property
    def label(self) -> str:
        """``hc:bm25@5``: the run as the progress line and the summary name it."""
        return f"{self.dataset}:{self.retriever}@{self.k}"


@dataclass
class RelevanceReport(PassReport):
    """What one ``retrieval judge`` pass did: the pass's counters, and how many of its verdicts said relevant."""

    relevance_run: int = 0
    relevant: int = 0


_RUN_COLUMNS = "r.id, r.dataset_id, d.name, r.retriever, r.k, r.model, r.config_key, r.config"


def _run(row) -> RelevanceRun:
    return RelevanceRun(*row[:7], json.loads(row[7]))


def judge_relevance(store: Store, dataset: str | None = None, retriever: str = "bm25", *, k: int = 5,
                    model: str = "default", limit: int | None = None, max_chars: int = DEFAULT_MAX_CHARS, llm=None,
                    retry_errors: bool = False, stop: threading.Event | None = None,
                    progress: Callable[[int, int, PassReport], None] | None = None, wait: bool = False,
                    on_wait: Callable[[str], None] | None = None) -> RelevanceReport:
    """Judge the relevance of ``retriever``'s top ``k`` chunks of each question (the first ``limit`` ones); resumable.

    ``llm`` is a :class:`~workbench.models.cached.CachedLLM` (default: one over ``model``, loaded on its
    first call, so a run with nothing left to judge loads nothing). Everything that can refuse the
    options (``ValueError``) does so before anything is written. One process at a time judges a run:
    another holding it raises :class:`~workbench.store.lease.LeaseHeld`, or with ``wait`` is waited for.
    """
    for option, value, least in (("--k", k, 1), ("--limit", limit, 1), ("--max-chars", max_chars, 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise ValueError(f"{option} must be an integer ≥ {least}, got {value!r}")
    ds = get_dataset(store, dataset)
    if ds.unit_kind != "chunk":
        raise ValueError(f"dataset {ds.name!r} holds triples: relevance is judged of retrieved chunks")
    _check_retriever(store, ds, retriever)
    try:
        model_id = model_identity(store, model)
    except ModelError as exc:
        raise ValueError(f"--model: {exc}") from None
    config = RelevanceConfig(model_id=model_id, max_chars=max_chars)
    run = _plan(store, ds, retriever, k, model, config)
    report = RelevanceReport(run=run.label, relevance_run=run.id)
    return drive(store, f"relevance:{run.id}", _RelevanceWork(store, run, config, llm, limit, report), report,
                 retry_errors=retry_errors, stop=stop, progress=progress, wait=wait, on_wait=on_wait)


def _check_retriever(store: Store, ds: Dataset, retriever: str) -> None:
    known = stored_retrievers(store, ds.name)
    if retriever not in known:
        raise ValueError(f"--retriever: no results of {retriever!r} in {ds.name!r} (known: {', '.join(known) or 'none'}"
                         f"; `workbench retrieve {ds.name}` stores some)")


def _plan(store: Store, ds: Dataset, retriever: str, k: int, model: str, config: RelevanceConfig) -> RelevanceRun:
    """The relevance run of (dataset, retriever, k, judge), written on first use (its jobs come with each pass)."""
    key = config.key()

    def find(conn):
        return conn.execute(f"SELECT {_RUN_COLUMNS} FROM relevance_runs r JOIN datasets d ON d.id = r.dataset_id"
                            " WHERE r.dataset_id = ? AND r.retriever = ? AND r.k = ? AND r.config_key = ?",
                            (ds.id, retriever, k, key)).fetchone()

    def write(conn, _) -> int:
        return conn.execute("INSERT INTO relevance_runs (dataset_id, retriever, k, model, model_id, config_key, config,"
                            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (ds.id, retriever, k, model, config.model_id, key, json.dumps(asdict(config)),
                             utcnow())).lastrowid

    found, created = plan_or_find(store, find, write)
    return _run(found) if found is not None else RelevanceRun(created, ds.id, ds.name, retriever, k, model, key,
                                                              asdict(config))


class _RelevanceWork(PassWork):
    """A relevance run's jobs (its (sid, uid) pairs in scope) and how one is judged; each committed alone."""

    def __init__(self, store: Store, run: RelevanceRun, config: RelevanceConfig, llm, limit: int | None,
                 report: RelevanceReport):
        self.store, self.run, self.config, self.llm, self.limit, self.report = store, run, config, llm, limit, report
        self.own_llm = False
        self._questions: dict[int, tuple[str, str]] = {}

    def load(self, statuses: tuple[str, ...]) -> list[tuple[int, int]]:
        """Add a pending job for every pair of the scope not planned yet, then the jobs with ``statuses``.

        The scope is the retriever's current top k of the first ``limit`` questions, in rank order
        question by question; a job planned earlier and no longer in it (results replaced) is left alone.
        """
        run, conn = self.run, self.store.conn
        rows = conn.execute("SELECT sid, uids, scores FROM retrievals WHERE dataset_id = ? AND retriever = ?"
                            " ORDER BY sid", (run.dataset_id, run.retriever)).fetchall()
        # The top k as the metrics rank it (score, then the stored order; a repeated chunk once).
        scope = [(sid, int(uid)) for sid, uids, scores in rows[:self.limit]
                 for uid in rank(list(zip(json.loads(uids), json.loads(scores))))[:run.k]]
        status = dict(((sid, uid), s) for sid, uid, s in conn.execute(
            "SELECT sid, uid, status FROM relevance_verdicts WHERE run_id = ?", (run.id,)))
        new = [(run.id, sid, uid) for sid, uid in scope if (sid, uid) not in status]
        if new:
            with self.store.transaction() as c:
                c.executemany("INSERT OR IGNORE INTO relevance_verdicts (run_id, sid, uid) VALUES (?, ?, ?)", new)
        return [pair for pair in scope if status.get(pair, "pending") in statuses]

    def check_models(self) -> None:
        if self.llm is None:
            check_model_options(("the judge's model", self.run.model, GENERATOR))
        super().check_models()

    def setup(self) -> None:
        if self.llm is None:
            self.own_llm = True
            self.llm = default_llm(self.store, self.run.model)

    def close(self) -> None:
        if self.own_llm:
            self.llm.close()

    def question(self, sid: int) -> tuple[str, str]:
        if sid not in self._questions:
            self._questions[sid] = self.store.conn.execute(
                "SELECT id, question FROM samples WHERE dataset_id = ? AND sid = ?",
                (self.run.dataset_id, sid)).fetchone()
        return self._questions[sid]

    def chunk(self, uid: int) -> tuple[str, str | None]:
        return self.store.conn.execute("SELECT chunk_id, text FROM units WHERE dataset_id = ? AND uid = ?",
                                       (self.run.dataset_id, uid)).fetchone()

    def describe(self, job: tuple[int, int]) -> str:
        sid, uid = job
        return f"{self.question(sid)[0]} / {self.chunk(uid)[0]}"

    def width(self) -> int:
        return self.llm.width

    def prepare(self, job: tuple[int, int]):
        sid, uid = job
        chunk_id, text = self.chunk(uid)
        if not text:
            raise ValueError(f"chunk {chunk_id} has no text (named by a retriever, absent from kb.jsonl)")
        return self.llm.choose(relevance_messages(self.question(sid)[1], text[:self.config.max_chars]), OPTIONS)

    def commit(self, job: tuple[int, int], call) -> None:
        sid, uid = job
        relevant = call.text == OPTIONS[0]
        with self.store.transaction() as conn:
            conn.execute("UPDATE relevance_verdicts SET status = 'done', relevant = ?, score = ?, gen_key = ?,"
                         " error = NULL, finished_at = ? WHERE run_id = ? AND sid = ? AND uid = ?",
                         (int(relevant), call.probabilities[0], call.key, utcnow(), self.run.id, sid, uid))
        self.report.relevant += relevant

    def fail(self, job: tuple[int, int], message: str) -> None:
        with self.store.transaction() as conn:
            conn.execute("UPDATE relevance_verdicts SET status = 'error', error = ?, finished_at = ?"
                         " WHERE run_id = ? AND sid = ? AND uid = ?", (message, utcnow(), self.run.id, *job))


# -- what was judged ------------------------------------------------------------------------------------

def relevance_runs(store: Store, dataset: str | None = None, retriever: str | None = None) -> list[RelevanceRun]:
    """The relevance runs of a dataset (the latest judged one when None), of ``retriever`` if given; newest first."""
    dataset_id = get_dataset(store, dataset).id if dataset is not None else _latest_judged(store)
    return [_run(row) for row in store.conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM relevance_runs r JOIN datasets d ON d.id = r.dataset_id WHERE r.dataset_id = ?"
        " AND (? IS NULL OR r.retriever = ?) ORDER BY r.id DESC", (dataset_id, retriever, retriever))]


def _latest_judged(store: Store) -> int:
    row = store.conn.execute("SELECT dataset_id FROM relevance_runs ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        raise NotFound("no relevance judged yet (`workbench retrieval judge DATASET --retriever bm25 --k 5`)")
    return row[0]


def judge_names(runs: Sequence[RelevanceRun]) -> dict[str, str]:
    """Each judge (config key) of ``runs`` by a short name: its model (``smollm2-135m``, a GGUF's file stem),
    with the key's first digits when two judges share a model (e.g. another ``--max-chars``)."""
    models: dict[str, str] = {}
    for run in sorted(runs, key=lambda r: r.id):
        models.setdefault(run.config_key, model_label(run.model))
    labels = list(models.values())
    return {key: label if labels.count(label) == 1 else f"{label}-{key[:6]}" for key, label in models.items()}


def latest_relevance_dataset(store: Store) -> str:
    """The name of the dataset whose relevance was judged last (NotFound when none was)."""
    return store.conn.execute("SELECT name FROM datasets WHERE id = ?", (_latest_judged(store),)).fetchone()[0]


@dataclass(frozen=True)
class JudgedVerdict:
    """One finished verdict: a (question, chunk) pair, the judge (config key) and what it said."""

    sid: int
    uid: int
    config_key: str
    relevant: bool
    score: float


def judged_verdicts(store: Store, runs: Sequence[RelevanceRun]) -> list[JudgedVerdict]:
    """The finished verdicts of ``runs``, oldest run first (a later run's verdict on a pair comes after)."""
    out: list[JudgedVerdict] = []
    for run in sorted(runs, key=lambda r: r.id):
        out += [JudgedVerdict(sid, uid, run.config_key, bool(relevant), float(score))
                for sid, uid, relevant, score in store.conn.execute(
                    "SELECT sid, uid, relevant, score FROM relevance_verdicts WHERE run_id = ? AND status = 'done'"
                    " ORDER BY sid, uid", (run.id,))]
    return out


# -- judged metrics --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JudgedAt:
    """The judged figures at one cut-off k, over the questions whose top k is wholly judged."""

    k: int
    judged: int                 # questions in the figures
    unjudged: int               # questions left out: some chunk of their top k has no verdict
    precision: Estimate
    ndcg: Estimate


@dataclass(frozen=True)
class JudgedMetrics:
    """Chunk-level precision@k and nDCG@k of a retriever with the judge's verdicts as (binary) qrels."""

    dataset: str
    retriever: str
    judge: str                  # the judge's model, e.g. smollm2-135m
    config_key: str
    questions: int              # questions with results of the retriever
    pairs: int                  # (question, chunk) pairs the judge judged in the dataset (the pool)
    relevant: int               # ... of them relevant
    at: tuple[JudgedAt, ...]
    resamples: int


def judged_metrics(store: Store, dataset: str | None, retriever: str, ks: Sequence[int] = (1, 3, 5, 10), *,
                   resamples: int = RESAMPLES, seed: int = SEED, config_key: str | None = None) -> JudgedMetrics | None:
    """Judged precision@k and nDCG@k of ``retriever`` in ``dataset``; None when its results were never judged.

    The judge is that of the retriever's newest relevance run (or ``config_key``); its verdicts are
    pooled over every relevance run of the dataset it judged (see the module docstring).
    """
    ds = get_dataset(store, dataset)
    runs = relevance_runs(store, ds.name)
    mine = [r for r in runs if r.retriever == retriever and (config_key is None or r.config_key == config_key)]
    if not mine:
        return None
    judge = mine[0]
    pool: dict[tuple[int, int], bool] = {}
    for v in judged_verdicts(store, [r for r in runs if r.config_key == judge.config_key]):
        pool[(v.sid, v.uid)] = v.relevant
    relevant: dict[int, dict[int, int]] = {}
    for (sid, uid), yes in pool.items():
        if yes:
            relevant.setdefault(sid, {})[uid] = 1
    ranked = {sid: list(zip(json.loads(uids), json.loads(scores))) for sid, uids, scores in store.conn.execute(
        "SELECT sid, uids, scores FROM retrievals WHERE dataset_id = ? AND retriever = ? ORDER BY sid",
        (ds.id, retriever))}
    order = {sid: rank(items) for sid, items in ranked.items()}
    at = []
    for k in ks:
        judged = [sid for sid, ids in order.items() if all((sid, uid) in pool for uid in ids[:k])]
        per_query = evaluate({str(sid): relevant.get(sid, {}) for sid in judged},
                             {str(sid): ranked[sid] for sid in judged}, [k], metrics=("precision", "ndcg"))
        overall = aggregate(per_query, resamples=resamples, seed=seed).overall
        at.append(JudgedAt(k, len(judged), len(order) - len(judged), overall[("precision", k)], overall[("ndcg", k)]))
    return JudgedMetrics(ds.name, retriever, judge_names(runs)[judge.config_key], judge.config_key, len(ranked),
                         len(pool), sum(pool.values()), tuple(at), resamples)


# -- one judged pair, as a human labelling it sees it -------------------------------------------------------

@dataclass(frozen=True)
class JudgedPair:
    """A (question, chunk) pair of a dataset: the question, the chunk, where the retrievers ranked it, the verdicts."""

    key: RelevanceKey
    dataset: str
    sample_id: str
    question: str
    chunk_id: str
    doc_id: str | None
    title: str | None           # the chunk's document's title (a Markdown corpus)
    text: str
    ranks: dict[str, int]       # retriever → the chunk's rank (from 1) in its results for the question
    verdicts: dict[str, bool]   # judge → relevant


def judged_pair(store: Store, key: RelevanceKey) -> JudgedPair:
    """The pair ``key`` names, with its ranks and every judge's verdict (NotFound when it is not in the dataset)."""
    q = store.conn.execute
    ds = q("SELECT name FROM datasets WHERE id = ?", (key.dataset_id,)).fetchone()
    sample = q("SELECT id, question FROM samples WHERE dataset_id = ? AND sid = ?",
               (key.dataset_id, key.sid)).fetchone()
    unit = q("SELECT chunk_id, doc_id, text FROM units WHERE dataset_id = ? AND uid = ?",
             (key.dataset_id, key.uid)).fetchone()
    if ds is None or sample is None or unit is None:
        raise NotFound(f"no question {key.sid} and chunk {key.uid} in dataset {key.dataset_id} (deleted?)")
    title = q("SELECT title FROM documents WHERE dataset_id = ? AND doc_id = ?", (key.dataset_id, unit[1])).fetchone()
    ranks = {}
    for retriever, uids in q("SELECT retriever, uids FROM retrievals WHERE dataset_id = ? AND sid = ?"
                             " ORDER BY retriever", (key.dataset_id, key.sid)):
        found = json.loads(uids)
        if key.uid in found:
            ranks[retriever] = found.index(key.uid) + 1
    runs = relevance_runs(store, ds[0])
    names, by_id = judge_names(runs), {r.id: r for r in runs}
    verdicts = {}
    for run_id, relevant in q("SELECT run_id, relevant FROM relevance_verdicts WHERE sid = ? AND uid = ?"
                              " AND status = 'done' AND run_id IN (SELECT id FROM relevance_runs WHERE dataset_id = ?)"
                              " ORDER BY run_id", (key.sid, key.uid, key.dataset_id)):
        verdicts[names[by_id[run_id].config_key]] = bool(relevant)
    return JudgedPair(key, ds[0], sample[0], sample[1], unit[0], unit[1], title[0] if title else None, unit[2] or "",
                      ranks, verdicts)
