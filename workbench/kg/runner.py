"""``dedup run``: candidates by blocking, then a judge per (pair, mode), resumable and cached.

Planning computes the candidate pairs once (exact names, then blocking: no all-pairs)
and stores one pending verdict per (pair, mode). Executing judges them one by one, each
committed with the two contexts exactly as shown (provenance). Judge calls go through
the generation cache, so a resume recomputes nothing.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, replace
from typing import Callable

from workbench.kg.candidates import CandidateConfig, gold_pairs_from_clusters, generate_candidates, pairs_completeness
from workbench.kg.context import ContextConfig, collect_context
from workbench.kg.judge import JUDGE_SCHEMA, MODES, EmbeddingJudge, judge_messages, parse_verdict
from workbench.models.cached import default_llm
from workbench.models.check import EMBEDDING, GENERATOR, check_model_options
from workbench.models.embedder import CachedEmbedder
from workbench.models.embedders import DEDUP, embedding_choice
from workbench.models.openai_http import DEFAULT_TIMEOUT
from workbench.passes import (PIPELINE_NAME_DIGITS, PassReport, PassWork, default_name, drive, plan_or_find,
                              refuse_changed)
from workbench.store.db import Store, utcnow
from workbench.store.lookup import NotFound, named_or_latest


@dataclass(frozen=True)
class DedupConfig:
    """What determines a dedup run's verdicts (a changed config under one name is refused)."""

    modes: tuple[str, ...] = ("graph", "graph+text")
    max_relations: int = 10
    max_text_chunks: int = 5          # the defaults of docs/design.md §8: include_text_context true, 5 chunks, 200 chars
    chunk_max_chars: int = 200
    fuzzy_threshold: float = 0.85
    use_neighbours: bool = True
    model: str = "default"
    max_tokens: int = 64
    embedding_model: str | None = None     # None: multilingual-e5-small (shipped)
    embedding_threshold: float | None = None   # None: the embedding model's own for dedup (models.embedders)

    def validate(self) -> None:
        for mode in self.modes:
            if mode not in MODES:
                raise ValueError(f"--modes: {mode!r} is not one of {', '.join(MODES)}")
        if not self.modes:
            raise ValueError("--modes: give at least one of " + ", ".join(MODES))
        if self.max_relations < 0 or self.max_text_chunks < 0 or self.chunk_max_chars < 1:
            raise ValueError("--max-relations and --max-text-chunks must be ≥ 0, --chunk-max-chars ≥ 1")

    def resolved(self) -> DedupConfig:
        """This config with the embedding mode's defaults filled in (the model's name, its dedup threshold).

        Run before the config is stored or named, so a run records what it used; without the
        embedding mode the config is returned as it is.
        """
        if "embedding" not in self.modes:
            return self
        model, threshold = embedding_choice(self.embedding_model, self.embedding_threshold, DEDUP)
        return replace(self, embedding_model=model, embedding_threshold=threshold)

    def check_models(self, timeout: float | None = None) -> None:
        """Refuse (``BadInput`` naming the option) a model the modes need, or one named, that cannot serve.

        Nothing is written; each model is loaded once and freed, or its server asked within
        ``timeout`` (:mod:`workbench.models.check`).
        """
        options = []
        if any(m != "embedding" for m in self.modes) or self.model != "default":
            options.append(("--model", self.model, GENERATOR))
        if "embedding" in self.modes or self.embedding_model is not None:
            options.append(("--embedding-model", self.embedding_model, EMBEDDING))
        check_model_options(*options, timeout=timeout)

    def context(self, mode: str) -> ContextConfig:
        return ContextConfig(max_relations=self.max_relations, include_text_context=mode == "graph+text",
                             max_text_chunks=self.max_text_chunks, chunk_max_chars=self.chunk_max_chars)


class KG:
    """A KG in memory: names, degrees, edges with their source chunks, chunk texts, gold labels."""

    def __init__(self, store: Store, kg_id: int):
        q = store.conn.execute
        self.id = kg_id
        rows = q("SELECT eid, name, degree FROM kg_entities WHERE kg_id = ? ORDER BY eid", (kg_id,)).fetchall()
        self.names = [r[1] for r in rows]
        self.degree = [r[2] for r in rows]
        self.out_edges: list[list[tuple[str, str, tuple[str, ...]]]] = [[] for _ in rows]
        self.in_edges: list[list[tuple[str, str, tuple[str, ...]]]] = [[] for _ in rows]
        self.neighbours: list[set[int]] = [set() for _ in rows]
        for h, r, t, chunks in q("SELECT head, relation, tail, chunks FROM kg_triples WHERE kg_id = ? ORDER BY tid",
                                 (kg_id,)):
            c = tuple(json.loads(chunks))
            self.out_edges[h].append((r, self.names[t], c))
            self.in_edges[t].append((self.names[h], r, c))
            self.neighbours[h].add(t)
            self.neighbours[t].add(h)
        self.chunks = dict(q("SELECT chunk_id, text FROM kg_chunks WHERE kg_id = ?", (kg_id,)).fetchall())
        gold = dict(q("SELECT eid, cluster FROM kg_gold WHERE kg_id = ?", (kg_id,)).fetchall())
        self.gold: list[str | None] = [gold.get(i) for i in range(len(rows))]

    def context(self, eid: int, config: ContextConfig):
        return collect_context(self.names[eid], self.out_edges[eid], self.in_edges[eid], (), self.chunks, config)


@dataclass(frozen=True)
class KgRef:
    """An imported KG, by id and name."""

    id: int
    name: str


@dataclass(frozen=True)
class DedupRun:
    """A planned dedup run: its KG and the config its verdicts were judged under."""

    id: int
    name: str
    kg_id: int
    config: DedupConfig

    def require_mode(self, mode: str) -> None:
        """Refuse a judge mode this run did not judge (ValueError names the ones it did)."""
        if mode not in self.config.modes:
            raise ValueError(f"mode {mode!r} was not run (this run has {', '.join(self.config.modes)})")


def get_kg(store: Store, name: str | None) -> KgRef:
    """A KG by name; the latest import when ``name`` is None (NotFound lists the known ones)."""
    return KgRef(*named_or_latest(store.conn, "kgs", "id, name", name, what="KG",
                                  none_yet="no KG imported yet (`workbench dedup import DIR`)",
                                  hint="`workbench dedup import DIR`"))


def get_dedup_run(store: Store, name: str | None = None) -> DedupRun:
    """A dedup run by name; the latest when ``name`` is None (NotFound lists the known ones)."""
    return _dedup_run(*named_or_latest(store.conn, "dedup_runs", "id, name, kg_id, config", name, what="dedup run",
                                       none_yet="no dedup runs yet (`workbench dedup run KG`)"))


def dedup_run_by_id(store: Store, run_id: int) -> DedupRun:
    """The dedup run with this id (what pair labels refer to); NotFound when it is gone."""
    row = store.conn.execute("SELECT id, name, kg_id, config FROM dedup_runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFound(f"no dedup run with id {run_id} (deleted?)")
    return _dedup_run(*row)


def _dedup_run(run_id: int, run_name: str, kg_id: int, config: str) -> DedupRun:
    cfg = json.loads(config)
    cfg["modes"] = tuple(cfg["modes"])
    return DedupRun(run_id, run_name, kg_id, DedupConfig(**cfg))


def entity_id(store: Store, kg_id: int, name: str) -> int:
    """The eid of the entity called ``name`` in a KG (NotFound names it)."""
    row = store.conn.execute("SELECT eid FROM kg_entities WHERE kg_id = ? AND name = ?", (kg_id, name)).fetchone()
    if row is None:
        raise NotFound(f"{name!r} is not an entity of the run's KG")
    return row[0]


def plan_dedup(store: Store, kg: str | None, config: DedupConfig, name: str | None = None) -> tuple[str, bool, dict]:
    """Generate the candidate pairs and one pending verdict per (pair, mode); returns (name, created, stats)."""
    config.validate()
    config.check_models()
    config = config.resolved()
    kg_ref = get_kg(store, kg)
    kg_id, kg_name = kg_ref.id, kg_ref.name
    name = name or default_name(f"dedup-{kg_name}", asdict(config), PIPELINE_NAME_DIGITS)

    def find(conn):
        return conn.execute("SELECT r.config, r.candidate_stats, k.name FROM dedup_runs r LEFT JOIN kgs k"
                            " ON k.id = r.kg_id WHERE r.name = ?", (name,)).fetchone()

    def prepare():
        graph = KG(store, kg_id)
        cands, stats = generate_candidates(graph.names, graph.neighbours if config.use_neighbours else None,
                                           config=CandidateConfig(fuzzy_threshold=config.fuzzy_threshold,
                                                                  use_neighbours=config.use_neighbours))
        if any(g is not None for g in graph.gold):
            stats["pairs_completeness"] = pairs_completeness(cands, gold_pairs_from_clusters(graph.gold))
        return cands, stats

    def write(conn, prepared) -> dict:
        cands, stats = prepared
        run_id = conn.execute("INSERT INTO dedup_runs (kg_id, name, config, candidate_stats, created_at)"
                              " VALUES (?, ?, ?, ?, ?)", (kg_id, name, json.dumps(asdict(config)),
                                                          json.dumps(stats), utcnow())).lastrowid
        conn.executemany("INSERT INTO dedup_pairs VALUES (?, ?, ?, ?, ?)",
                         [(run_id, c.a, c.b, ",".join(c.reasons), c.score) for c in cands])
        conn.executemany("INSERT INTO dedup_verdicts (run_id, a, b, mode) VALUES (?, ?, ?, ?)",
                         [(run_id, c.a, c.b, m) for c in cands for m in config.modes])
        return stats

    found, stats = plan_or_find(store, find, write, prepare)
    if found is None:
        return name, True, stats
    refuse_changed("dedup run", name, {"kg": found[2], **json.loads(found[0])}, {"kg": kg_name, **asdict(config)},
                   resume=f"workbench dedup resume {name}")
    return name, False, json.loads(found[1])


def execute_dedup(store: Store, name: str | None = None, *, llm=None, retry_errors: bool = False,
                  stop: threading.Event | None = None,
                  progress: Callable[[int, int, PassReport], None] | None = None, wait: bool = False,
                  on_wait: Callable[[str], None] | None = None, timeout: float = DEFAULT_TIMEOUT) -> PassReport:
    """Judge every pending (pair, mode) of a dedup run, each committed with its contexts.

    ``timeout`` bounds each answer of a served embedding model (the judge's is ``llm``'s own).

    One process at a time runs it: another holding it raises
    :class:`~workbench.store.lease.LeaseHeld`, or with ``wait`` is waited for.
    """
    run = get_dedup_run(store, name)
    return drive(store, f"dedup:{run.name}", _DedupWork(store, run.id, run.kg_id, run.config, llm, timeout),
                 PassReport(run=run.name),
                 retry_errors=retry_errors, stop=stop, progress=progress, wait=wait, on_wait=on_wait)


class _DedupWork(PassWork):
    """A dedup run's jobs (its pending ``(a, b, mode)`` verdicts) and how one is judged."""

    def __init__(self, store: Store, run_id: int, kg_id: int, config: DedupConfig, llm,
                 timeout: float = DEFAULT_TIMEOUT):
        self.store, self.run_id, self.kg_id, self.config, self.llm = store, run_id, kg_id, config, llm
        self.timeout = timeout
        self.own_llm = False
        self.shown: dict[tuple, tuple[str, str]] = {}   # the contexts each job in flight was shown

    def load(self, statuses: tuple[str, ...]) -> list[tuple[int, int, str]]:
        return self.store.conn.execute(
            f"SELECT a, b, mode FROM dedup_verdicts WHERE run_id = ? AND status IN ({','.join('?' * len(statuses))})"
            " ORDER BY a, b, mode", (self.run_id, *statuses)).fetchall()

    def check_models(self) -> None:
        if self.llm is None and any(m != "embedding" for m in self.config.modes):
            check_model_options(("the run's model", self.config.model, GENERATOR), timeout=self.timeout)
        if "embedding" in self.config.modes:
            check_model_options(("the run's embedding model", self.config.embedding_model, EMBEDDING),
                                timeout=self.timeout)
        super().check_models()

    def setup(self) -> None:
        config = self.config
        self.graph = KG(self.store, self.kg_id)
        if self.llm is None and any(m != "embedding" for m in config.modes):
            self.own_llm = True
            self.llm = default_llm(self.store, config.model)
        self.embedder = (EmbeddingJudge(CachedEmbedder(self.store, config.embedding_model, timeout=self.timeout),
                                        config.embedding_threshold) if "embedding" in config.modes else None)

    def close(self) -> None:
        if self.own_llm:
            self.llm.close()
        if self.embedder is not None:
            self.embedder.close()

    def describe(self, job: tuple[int, int, str]) -> str:
        a, b, mode = job
        return f"{self.graph.names[a]} ~ {self.graph.names[b]} ({mode})"

    def width(self) -> int:
        return self.llm.width if self.llm is not None else 1

    def prepare(self, job: tuple[int, int, str]):
        a, b, mode = job
        graph, ctx = self.graph, self.config.context(mode)
        text_a, text_b = graph.context(a, ctx).render(), graph.context(b, ctx).render()
        self.shown[job] = (text_a, text_b)
        if mode == "embedding":
            verdict = self.embedder.judge(f"{graph.names[a]}\n{text_a}", f"{graph.names[b]}\n{text_b}")
            key = None
        else:
            call = self.llm.ask(judge_messages(graph.names[a], text_a, graph.names[b], text_b),
                                max_tokens=self.config.max_tokens, schema=JUDGE_SCHEMA)
            verdict, key = parse_verdict(call.text), call.key
            if verdict is None:
                raise ValueError(f"no verdict in the judge's output: {call.text[:120]!r}")
        return verdict, key

    def commit(self, job: tuple[int, int, str], prepared) -> None:
        verdict, key = prepared
        _finish(self.store, self.run_id, *job, verdict=verdict, contexts=self.shown.pop(job), key=key)

    def fail(self, job: tuple[int, int, str], message: str) -> None:
        # A failed verdict keeps the contexts the judge was shown, when it got that far.
        _finish(self.store, self.run_id, *job, error=message, contexts=self.shown.pop(job, (None, None)))


def _finish(store: Store, run_id: int, a: int, b: int, mode: str, *, verdict=None, contexts=(None, None),
            key: str | None = None, error: str | None = None) -> None:
    with store.transaction() as conn:
        if verdict is None:
            conn.execute("UPDATE dedup_verdicts SET status = 'error', error = ?, context_a = ?, context_b = ?,"
                         " finished_at = ? WHERE run_id = ? AND a = ? AND b = ? AND mode = ?",
                         (error, contexts[0], contexts[1], utcnow(), run_id, a, b, mode))
        else:
            conn.execute("UPDATE dedup_verdicts SET status = 'done', error = NULL, is_coreferent = ?, confidence = ?,"
                         " rationale = ?, context_a = ?, context_b = ?, gen_key = ?, finished_at = ?"
                         " WHERE run_id = ? AND a = ? AND b = ? AND mode = ?",
                         (int(verdict.is_coreferent), verdict.confidence, verdict.rationale, contexts[0], contexts[1],
                          key, utcnow(), run_id, a, b, mode))
