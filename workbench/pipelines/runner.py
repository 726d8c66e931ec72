"""``searchain run``: SearChain over a dataset's samples, resumable, with a plain-RAG baseline.

Each sample is a job committed whole in one transaction: its tree (nodes, branches and
feedback), its final content and scores, and the plain-RAG answer to the same question
from the top-K units (the baseline the report pairs against). Every model call goes
through the generation cache as soon as it returns, so after Ctrl-C or ``kill -9`` a
resume skips finished samples and replays the interrupted one's calls from the cache.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable

from workbench.evidence.units import render_line
from workbench.metrics.scoring import score_acc, score_cover
from workbench.models.base import ModelError
from workbench.passes import CallTally, PassReport
from workbench.pipelines.coq import CHAIN_GRAMMAR, CHAIN_MAX_TOKENS
from workbench.pipelines.reader import READERS, make_reader
from workbench.pipelines.searchain import LoopConfig, Trace, run_searchain
from workbench.runs.prompt import PromptTemplate
from workbench.store.db import Store, utcnow
from workbench.store.lease import LeaseWaitStopped, hold, this_command
from workbench.store.queries import Sample, get_dataset, load_retrieval, load_samples, load_units, retrievers


@dataclass(frozen=True)
class SearChainConfig:
    """What determines a SearChain run's results (a changed config under one name is refused)."""

    model: str = "default"
    n_ctx: int = 4096               # the multi-turn chat grows by a chain and a feedback per round
    max_tokens: int = CHAIN_MAX_TOKENS
    grammar: bool = True            # hold chains to the CoQ format with a GBNF grammar (llama.cpp)
    # Extractive confidence is 0.5 for naming the entity plus up to 0.5 for the relation:
    # 0.75 asks for both before a step the model answered is overruled.
    threshold: float = 0.75
    max_rounds: int = 5
    reader: str = "extractive"
    baseline_k: int = 10            # plain RAG over the top-K units; 0 disables the baseline
    baseline_retriever: str | None = None   # a stored retriever of the dataset; None → its first, else BM25
    baseline_max_tokens: int = 48
    hops: int | None = None         # only samples with meta.hops == N
    limit: int | None = None        # only the first N (selected) samples
    seed: int = 0

    def validate(self) -> None:
        """Reject settings that cannot work, naming the option."""
        if self.reader not in READERS:
            raise ValueError(f"--reader: {self.reader!r} is not one of {', '.join(READERS)}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError("--threshold must be within [0, 1]")
        if self.max_rounds < 0 or self.baseline_k < 0 or self.max_tokens < 16:
            raise ValueError("--max-rounds and --baseline-k must be ≥ 0, --max-tokens ≥ 16")
        if self.limit is not None and self.limit < 1:
            raise ValueError("--limit must be ≥ 1")

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


def select_samples(samples: list[Sample], config: SearChainConfig) -> list[Sample]:
    """The samples a config runs on: those with ``meta.hops`` (if set), then the first ``limit``."""
    chosen = [s for s in samples if config.hops is None or s.meta.get("hops") == config.hops]
    return chosen[: config.limit] if config.limit is not None else chosen


def plan_searchain(store: Store, dataset: str | None, config: SearChainConfig, name: str | None = None) -> tuple[str, bool]:
    """Create (or find, with the same config) the run and its per-sample jobs; returns (name, created)."""
    config.validate()
    ds = get_dataset(store, dataset)
    name = name or f"searchain-{ds.name}-{config.key()}"
    row = store.conn.execute("SELECT id, dataset_id, config FROM pipeline_runs WHERE name = ?", (name,)).fetchone()
    if row is not None:
        _same_plan(row, ds, config, name)
        return name, False
    chosen = select_samples(load_samples(store, ds.id), config)
    if not chosen:
        raise ValueError(f"no samples of {ds.name!r} match" + (f" --hops {config.hops}" if config.hops else ""))
    with store.transaction() as conn:
        # Read again under the write lock: another process may have planned this name since.
        row = conn.execute("SELECT id, dataset_id, config FROM pipeline_runs WHERE name = ?", (name,)).fetchone()
        if row is None:
            cur = conn.execute("INSERT INTO pipeline_runs (name, kind, dataset_id, config, created_at)"
                               " VALUES (?, 'searchain', ?, ?, ?)",
                               (name, ds.id, json.dumps(asdict(config)), utcnow()))
            conn.executemany("INSERT INTO pipeline_samples (prun_id, sid) VALUES (?, ?)",
                             [(cur.lastrowid, s.sid) for s in chosen])
    if row is not None:
        _same_plan(row, ds, config, name)
        return name, False
    return name, True


def _same_plan(row, ds, config: SearChainConfig, name: str) -> None:
    """Refuse a stored run of that name planned with another config or dataset."""
    old = json.loads(row[2])
    if row[1] != ds.id or old != asdict(config):
        diff = ", ".join(f"{k}: {old.get(k)!r} → {v!r}" for k, v in asdict(config).items() if old.get(k) != v)
        raise ValueError(f"run {name!r} exists with another config ({diff or 'another dataset'}); "
                         "pick another --name")


def get_pipeline_run(store: Store, name: str | None = None) -> tuple[int, str, int, SearChainConfig]:
    """(id, name, dataset_id, config) of a SearChain run; the latest when ``name`` is None."""
    if name is None:
        row = store.conn.execute("SELECT id, name, dataset_id, config FROM pipeline_runs ORDER BY id DESC"
                                 " LIMIT 1").fetchone()
        if row is None:
            raise ValueError("no SearChain runs yet (`workbench searchain run DATASET`)")
    else:
        row = store.conn.execute("SELECT id, name, dataset_id, config FROM pipeline_runs WHERE name = ?",
                                 (name,)).fetchone()
        if row is None:
            known = [n for (n,) in store.conn.execute("SELECT name FROM pipeline_runs ORDER BY id")]
            raise ValueError(f"no SearChain run named {name!r} (known: {', '.join(known) or 'none'})")
    return row[0], row[1], row[2], SearChainConfig(**json.loads(row[3]))


class _Parts:
    """The real model, retriever and reader a run wires into the loop."""

    def __init__(self, store: Store, dataset_id: int, config: SearChainConfig, llm):
        from workbench.retrieval.runs import open_index

        self.store, self.config, self.llm = store, config, llm
        self.units = load_units(store, dataset_id)
        self.index = open_index(store, dataset_id)[0]
        self.reader = make_reader(config.reader, llm)
        names = retrievers(store, dataset_id)
        self.baseline_retriever = config.baseline_retriever or (names[0] if names else None)
        if self.baseline_retriever is not None and self.baseline_retriever not in names:
            raise ValueError(f"--baseline-retriever: {self.baseline_retriever!r} is not a retriever of this dataset "
                             f"({', '.join(names) or 'none'})")
        self.ranked = load_retrieval(store, dataset_id, self.baseline_retriever) if self.baseline_retriever else {}

    def generate(self, messages) -> str:
        return self.llm.ask(messages, max_tokens=self.config.max_tokens,
                            grammar=CHAIN_GRAMMAR if self.config.grammar else None).text

    def retrieve(self, query: str):
        hits = self.index.search(query, k=1)
        return self.units.get(hits[0][0]) if hits else None

    def baseline(self, sample: Sample) -> str | None:
        """Plain RAG: the top-K units as evidence lines, one generation (free-text answer)."""
        if not self.config.baseline_k:
            return None
        uids = self.ranked.get(sample.sid)
        if uids is None:
            uids = [u for u, _ in self.index.search(sample.question, k=self.config.baseline_k)]
        evidence = "\n".join(render_line(self.units[u]) for u in uids[: self.config.baseline_k] if u in self.units)
        messages = PromptTemplate(answer_format="text").messages(evidence, sample.question)
        return self.llm.ask(messages, max_tokens=self.config.baseline_max_tokens).text


def _persist(store: Store, prun_id: int, sample: Sample, trace: Trace, baseline: str | None, seconds: float) -> None:
    final = trace.final_content
    text = final if final is not None else (trace.branches[-1].output if trace.branches else "")
    prediction = trace.prediction
    sources = trace.sources()
    final_set = set(trace.final_nodes)
    with store.transaction() as conn:
        conn.execute("DELETE FROM chain_nodes WHERE prun_id = ? AND sid = ?", (prun_id, sample.sid))
        conn.execute("DELETE FROM chain_branches WHERE prun_id = ? AND sid = ?", (prun_id, sample.sid))
        conn.executemany(
            "INSERT INTO chain_nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(prun_id, sample.sid, n.node, n.parent, n.branch, n.query, n.answer, int(n.unsolved), n.status,
              n.evidence.uid if n.evidence is not None else None, n.reader_answer, n.confidence, n.feedback,
              int(n.node in final_set)) for n in trace.nodes])
        conn.executemany("INSERT INTO chain_branches VALUES (?, ?, ?, ?, ?, ?)",
                         [(prun_id, sample.sid, b.branch, b.from_node, b.output, b.parse_error)
                          for b in trace.branches])
        conn.execute(
            "UPDATE pipeline_samples SET status = 'done', error = NULL, outcome = ?, rounds = ?, steps = ?,"
            " final_content = ?, prediction = ?, cover = ?, acc = ?, n_model = ?, n_corrected = ?, n_completed = ?,"
            " n_unchecked = ?, n_cited = ?, baseline_prediction = ?, baseline_cover = ?, baseline_acc = ?,"
            " seconds = ?, finished_at = ? WHERE prun_id = ? AND sid = ?",
            (trace.outcome, trace.rounds, len(trace.final_nodes), final, prediction,
             score_cover(text, sample.answers, sample.aliases), score_acc(prediction, sample.answers, sample.aliases),
             sources["model"], sources["corrected"], sources["completed"], sources["unchecked"],
             trace.cited_with_reference(), baseline,
             None if baseline is None else score_cover(baseline, sample.answers, sample.aliases),
             None if baseline is None else score_acc(baseline, sample.answers, sample.aliases),
             seconds, utcnow(), prun_id, sample.sid))


def execute_searchain(store: Store, name: str | None = None, *, llm=None, retry_errors: bool = False,
                      stop: threading.Event | None = None,
                      progress: Callable[[int, int, PassReport], None] | None = None, wait: bool = False,
                      on_wait: Callable[[str], None] | None = None) -> PassReport:
    """Run every pending sample of a SearChain run (and failed ones with ``retry_errors``).

    One process at a time runs it: another holding it raises
    :class:`~workbench.store.lease.LeaseHeld`, or with ``wait`` is waited for.
    """
    prun_id, name, dataset_id, config = get_pipeline_run(store, name)
    stop = stop or threading.Event()
    report = PassReport(run=name)
    try:
        with hold(store, f"searchain:{name}", what=this_command(), wait=wait, on_wait=on_wait, stop=stop):
            _searchain_pass(store, prun_id, dataset_id, config, llm, retry_errors, stop, progress, report)
    except LeaseWaitStopped:
        report.stopped = True
    return report


def _searchain_pass(store: Store, prun_id: int, dataset_id: int, config: SearChainConfig, llm, retry_errors: bool,
                    stop: threading.Event, progress, report: PassReport) -> None:
    """Select the pending samples (under the run's lease) and run SearChain on each."""
    statuses = ("pending", "error") if retry_errors else ("pending",)
    sids = [sid for (sid,) in store.conn.execute(
        f"SELECT sid FROM pipeline_samples WHERE prun_id = ? AND status IN ({','.join('?' * len(statuses))})"
        " ORDER BY sid", (prun_id, *statuses))]
    report.jobs = len(sids)
    if not sids:
        return
    own = llm is None
    if own:
        from workbench.models.cached import default_llm

        llm = default_llm(store, config.model, n_ctx=config.n_ctx, seed=config.seed)
    tally = CallTally(llm)
    samples = {s.sid: s for s in load_samples(store, dataset_id)}
    start = time.perf_counter()
    try:
        parts = _Parts(store, dataset_id, config, llm)
        loop = LoopConfig(threshold=config.threshold, max_rounds=config.max_rounds)
        for sid in sids:
            if stop.is_set():
                report.stopped = True
                break
            sample, t0 = samples[sid], time.perf_counter()
            try:
                trace = run_searchain(sample.question, generate=parts.generate, retrieve=parts.retrieve,
                                      reader=parts.reader, config=loop)
                baseline = parts.baseline(sample)
                _persist(store, prun_id, sample, trace, baseline, time.perf_counter() - t0)
                report.done += 1
            except ModelError as exc:
                report.fatal = str(exc)
                _fail(store, prun_id, sid, f"model error: {exc}")
                report.errors += 1
                break
            except Exception as exc:  # one sample's failure is recorded on it; the run goes on
                _fail(store, prun_id, sid, f"{type(exc).__name__}: {exc}")
                report.errors += 1
                if len(report.error_samples) < 5:
                    report.error_samples.append(f"{sample.id}: {exc}")
            if progress:
                progress(report.done + report.errors, report.jobs, tally.update(report))
    finally:
        tally.update(report)
        if own:
            llm.close()
    report.seconds = time.perf_counter() - start


def _fail(store: Store, prun_id: int, sid: int, message: str) -> None:
    with store.transaction() as conn:
        conn.execute("UPDATE pipeline_samples SET status = 'error', error = ?, finished_at = ?"
                     " WHERE prun_id = ? AND sid = ?", (message, utcnow(), prun_id, sid))
