"""``searchain run``: SearChain over a dataset's samples, resumable, with a plain-RAG baseline.

Each sample is a job committed whole in one transaction: its tree (nodes, branches and
feedback), its final content and scores, and the plain-RAG answer to the same question
from the top-K units (the baseline the report pairs against). Every model call goes
through the generation cache as soon as it returns, so after Ctrl-C or ``kill -9`` a
resume skips finished samples and replays the interrupted one's calls from the cache.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable

from workbench.evidence.stored import load_units
from workbench.evidence.units import render_line
from workbench.metrics.scoring import score_acc, score_cover
from workbench.models.cached import default_llm
from workbench.models.check import GENERATOR, check_model_options
from workbench.passes import (PIPELINE_NAME_DIGITS, PassReport, PassWork, default_name, drive, plan_or_find,
                              refuse_changed)
from workbench.pipelines.coq import CHAIN_GRAMMAR, CHAIN_MAX_TOKENS
from workbench.pipelines.reader import READERS, make_reader
from workbench.pipelines.searchain import LoopConfig, Trace, run_searchain
from workbench.runs.prompt import PromptTemplate
from workbench.store.db import Store, utcnow
from workbench.store.lookup import named_or_latest
from workbench.store.queries import Sample, get_dataset, load_retrieval, load_samples, retrievers


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


def select_samples(samples: list[Sample], config: SearChainConfig) -> list[Sample]:
    """The samples a config runs on: those with ``meta.hops`` (if set), then the first ``limit``."""
    chosen = [s for s in samples if config.hops is None or s.meta.get("hops") == config.hops]
    return chosen[: config.limit] if config.limit is not None else chosen


def plan_searchain(store: Store, dataset: str | None, config: SearChainConfig, name: str | None = None) -> tuple[str, bool]:
    """Create (or find, with the same config) the run and its per-sample jobs; returns (name, created)."""
    config.validate()
    ds = get_dataset(store, dataset)
    name = name or default_name(f"searchain-{ds.name}", asdict(config), PIPELINE_NAME_DIGITS)

    def find(conn):
        return conn.execute("SELECT r.config, d.name FROM pipeline_runs r LEFT JOIN datasets d ON d.id = r.dataset_id"
                            " WHERE r.name = ?", (name,)).fetchone()

    def prepare() -> list[Sample]:
        chosen = select_samples(load_samples(store, ds.id), config)
        if not chosen:
            raise ValueError(f"no samples of {ds.name!r} match" + (f" --hops {config.hops}" if config.hops else ""))
        return chosen

    def write(conn, chosen: list[Sample]) -> None:
        cur = conn.execute("INSERT INTO pipeline_runs (name, kind, dataset_id, config, created_at)"
                           " VALUES (?, 'searchain', ?, ?, ?)", (name, ds.id, json.dumps(asdict(config)), utcnow()))
        conn.executemany("INSERT INTO pipeline_samples (prun_id, sid) VALUES (?, ?)",
                         [(cur.lastrowid, s.sid) for s in chosen])

    found, _ = plan_or_find(store, find, write, prepare)
    if found is not None:
        refuse_changed("run", name, {"dataset": found[1], **json.loads(found[0])},
                       {"dataset": ds.name, **asdict(config)}, resume=f"workbench searchain resume {name}")
    return name, found is None


@dataclass(frozen=True)
class PipelineRun:
    """A planned SearChain run: its dataset and the config its results were produced under."""

    id: int
    name: str
    dataset_id: int
    config: SearChainConfig


def get_pipeline_run(store: Store, name: str | None = None) -> PipelineRun:
    """A SearChain run by name; the latest when ``name`` is None (NotFound lists the known ones)."""
    run_id, run_name, dataset_id, config = named_or_latest(
        store.conn, "pipeline_runs", "id, name, dataset_id, config", name, what="SearChain run",
        none_yet="no SearChain runs yet (`workbench searchain run DATASET`)")
    return PipelineRun(run_id, run_name, dataset_id, SearChainConfig(**json.loads(config)))


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
    prun = get_pipeline_run(store, name)
    return drive(store, f"searchain:{prun.name}", _SearChainWork(store, prun.id, prun.dataset_id, prun.config, llm),
                 PassReport(run=prun.name), retry_errors=retry_errors, stop=stop, progress=progress, wait=wait,
                 on_wait=on_wait)


class _SearChainWork(PassWork):
    """A SearChain run's jobs (its samples): SearChain and the plain-RAG baseline on each."""

    def __init__(self, store: Store, prun_id: int, dataset_id: int, config: SearChainConfig, llm):
        self.store, self.prun_id, self.dataset_id, self.config, self.llm = store, prun_id, dataset_id, config, llm
        self.own_llm = False

    def load(self, statuses: tuple[str, ...]) -> list[int]:
        return [sid for (sid,) in self.store.conn.execute(
            f"SELECT sid FROM pipeline_samples WHERE prun_id = ? AND status IN ({','.join('?' * len(statuses))})"
            " ORDER BY sid", (self.prun_id, *statuses))]

    def check_models(self) -> None:
        if self.llm is None:
            check_model_options(("the run's model", self.config.model, GENERATOR))
        super().check_models()

    def setup(self) -> None:
        if self.llm is None:
            self.own_llm = True
            self.llm = default_llm(self.store, self.config.model, n_ctx=self.config.n_ctx, seed=self.config.seed)
        self.samples = {s.sid: s for s in load_samples(self.store, self.dataset_id)}
        self.parts = _Parts(self.store, self.dataset_id, self.config, self.llm)
        self.loop = LoopConfig(threshold=self.config.threshold, max_rounds=self.config.max_rounds)

    def close(self) -> None:
        if self.own_llm:
            self.llm.close()

    def describe(self, sid: int) -> str:
        return self.samples[sid].id

    def width(self) -> int:
        return self.llm.width

    def prepare(self, sid: int):
        sample, parts, t0 = self.samples[sid], self.parts, time.perf_counter()
        trace = run_searchain(sample.question, generate=parts.generate, retrieve=parts.retrieve,
                              reader=parts.reader, config=self.loop)
        return trace, parts.baseline(sample), time.perf_counter() - t0

    def commit(self, sid: int, prepared) -> None:
        trace, baseline, seconds = prepared
        _persist(self.store, self.prun_id, self.samples[sid], trace, baseline, seconds)

    def fail(self, sid: int, message: str) -> None:
        with self.store.transaction() as conn:
            conn.execute("UPDATE pipeline_samples SET status = 'error', error = ?, finished_at = ?"
                         " WHERE prun_id = ? AND sid = ?", (message, utcnow(), self.prun_id, sid))
