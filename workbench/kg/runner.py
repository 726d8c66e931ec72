"""``dedup run``: candidates by blocking, then a judge per (pair, mode), resumable and cached.

Planning computes the candidate pairs once (exact names, then blocking: no all-pairs)
and stores one pending verdict per (pair, mode). Executing judges them one by one, each
committed with the two contexts exactly as shown (provenance). Judge calls go through
the generation cache, so a resume recomputes nothing.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable

from workbench.kg.candidates import CandidateConfig, gold_pairs_from_clusters, generate_candidates, pairs_completeness
from workbench.kg.context import ContextConfig, collect_context
from workbench.kg.judge import JUDGE_SCHEMA, MODES, EmbeddingJudge, judge_messages, parse_verdict
from workbench.models.base import ModelError
from workbench.passes import CallTally, PassReport
from workbench.store.db import Store, utcnow
from workbench.store.lease import LeaseWaitStopped, hold, this_command


@dataclass(frozen=True)
class DedupConfig:
    """What determines a dedup run's verdicts (a changed config under one name is refused)."""

    modes: tuple[str, ...] = ("graph", "graph+text")
    max_relations: int = 10
    max_text_chunks: int = 5          # seed 004's defaults: include_text_context true, 5 chunks, 200 chars
    chunk_max_chars: int = 200
    fuzzy_threshold: float = 0.85
    use_neighbours: bool = True
    model: str = "default"
    max_tokens: int = 64
    embedding_model: str | None = None
    embedding_threshold: float = 0.9

    def validate(self) -> None:
        for mode in self.modes:
            if mode not in MODES:
                raise ValueError(f"--modes: {mode!r} is not one of {', '.join(MODES)}")
        if not self.modes:
            raise ValueError("--modes: give at least one of " + ", ".join(MODES))
        if "embedding" in self.modes and not self.embedding_model:
            raise ValueError("--modes embedding needs --embedding-model PATH.gguf")
        if self.max_relations < 0 or self.max_text_chunks < 0 or self.chunk_max_chars < 1:
            raise ValueError("--max-relations and --max-text-chunks must be ≥ 0, --chunk-max-chars ≥ 1")

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


def get_kg_id(store: Store, name: str | None) -> tuple[int, str]:
    """(id, name) of a KG; the latest import when ``name`` is None."""
    row = (store.conn.execute("SELECT id, name FROM kgs ORDER BY id DESC LIMIT 1").fetchone() if name is None
           else store.conn.execute("SELECT id, name FROM kgs WHERE name = ?", (name,)).fetchone())
    if row is None:
        known = [n for (n,) in store.conn.execute("SELECT name FROM kgs ORDER BY id")]
        raise ValueError(f"no KG named {name!r} (known: {', '.join(known) or 'none'}; `workbench dedup import DIR`)"
                         if name else "no KG imported yet (`workbench dedup import DIR`)")
    return row


def get_dedup_run(store: Store, name: str | None = None) -> tuple[int, str, int, DedupConfig]:
    """(id, name, kg_id, config) of a dedup run; the latest when ``name`` is None."""
    row = (store.conn.execute("SELECT id, name, kg_id, config FROM dedup_runs ORDER BY id DESC LIMIT 1").fetchone()
           if name is None else
           store.conn.execute("SELECT id, name, kg_id, config FROM dedup_runs WHERE name = ?", (name,)).fetchone())
    if row is None:
        known = [n for (n,) in store.conn.execute("SELECT name FROM dedup_runs ORDER BY id")]
        raise ValueError(f"no dedup run named {name!r} (known: {', '.join(known) or 'none'})" if name
                         else "no dedup runs yet (`workbench dedup run KG`)")
    cfg = json.loads(row[3])
    cfg["modes"] = tuple(cfg["modes"])
    return row[0], row[1], row[2], DedupConfig(**cfg)


def plan_dedup(store: Store, kg: str | None, config: DedupConfig, name: str | None = None) -> tuple[str, bool, dict]:
    """Generate the candidate pairs and one pending verdict per (pair, mode); returns (name, created, stats)."""
    config.validate()
    kg_id, kg_name = get_kg_id(store, kg)
    key = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode()).hexdigest()[:10]
    name = name or f"dedup-{kg_name}-{key}"
    row = store.conn.execute("SELECT config, candidate_stats, kg_id FROM dedup_runs WHERE name = ?", (name,)).fetchone()
    if row is not None:
        return name, False, _same_plan(row, kg_id, config, name)
    graph = KG(store, kg_id)
    cands, stats = generate_candidates(graph.names, graph.neighbours if config.use_neighbours else None,
                                       config=CandidateConfig(fuzzy_threshold=config.fuzzy_threshold,
                                                              use_neighbours=config.use_neighbours))
    if any(g is not None for g in graph.gold):
        stats["pairs_completeness"] = pairs_completeness(cands, gold_pairs_from_clusters(graph.gold))
    with store.transaction() as conn:
        # Read again under the write lock: another process may have planned this name since.
        row = conn.execute("SELECT config, candidate_stats, kg_id FROM dedup_runs WHERE name = ?", (name,)).fetchone()
        if row is None:
            run_id = conn.execute("INSERT INTO dedup_runs (kg_id, name, config, candidate_stats, created_at)"
                                  " VALUES (?, ?, ?, ?, ?)", (kg_id, name, json.dumps(asdict(config)),
                                                              json.dumps(stats), utcnow())).lastrowid
            conn.executemany("INSERT INTO dedup_pairs VALUES (?, ?, ?, ?, ?)",
                             [(run_id, c.a, c.b, ",".join(c.reasons), c.score) for c in cands])
            conn.executemany("INSERT INTO dedup_verdicts (run_id, a, b, mode) VALUES (?, ?, ?, ?)",
                             [(run_id, c.a, c.b, m) for c in cands for m in config.modes])
    if row is not None:
        return name, False, _same_plan(row, kg_id, config, name)
    return name, True, stats


def _same_plan(row, kg_id: int, config: DedupConfig, name: str) -> dict:
    """The candidate stats of a stored run of that name; refused if planned with another config or KG."""
    old = json.loads(row[0])
    new = json.loads(json.dumps(asdict(config)))
    if old != new or row[2] != kg_id:
        diff = ", ".join(f"{k}: {old.get(k)!r} → {v!r}" for k, v in new.items() if old.get(k) != v)
        raise ValueError(f"dedup run {name!r} exists with another config ({diff or 'another KG'}); "
                         "pick another --name")
    return json.loads(row[1])


def execute_dedup(store: Store, name: str | None = None, *, llm=None, retry_errors: bool = False,
                  stop: threading.Event | None = None,
                  progress: Callable[[int, int, PassReport], None] | None = None, wait: bool = False,
                  on_wait: Callable[[str], None] | None = None) -> PassReport:
    """Judge every pending (pair, mode) of a dedup run, each committed with its contexts.

    One process at a time runs it: another holding it raises
    :class:`~workbench.store.lease.LeaseHeld`, or with ``wait`` is waited for.
    """
    run_id, name, kg_id, config = get_dedup_run(store, name)
    stop = stop or threading.Event()
    report = PassReport(run=name)
    try:
        with hold(store, f"dedup:{name}", what=this_command(), wait=wait, on_wait=on_wait, stop=stop):
            _dedup_pass(store, run_id, kg_id, config, llm, retry_errors, stop, progress, report)
    except LeaseWaitStopped:
        report.stopped = True
    return report


def _dedup_pass(store: Store, run_id: int, kg_id: int, config: DedupConfig, llm, retry_errors: bool,
                stop: threading.Event, progress, report: PassReport) -> None:
    """Select the pending verdicts (under the run's lease) and judge each."""
    statuses = ("pending", "error") if retry_errors else ("pending",)
    jobs = store.conn.execute(
        f"SELECT a, b, mode FROM dedup_verdicts WHERE run_id = ? AND status IN ({','.join('?' * len(statuses))})"
        " ORDER BY a, b, mode", (run_id, *statuses)).fetchall()
    report.jobs = len(jobs)
    if not jobs:
        return
    graph = KG(store, kg_id)
    own = llm is None and any(m != "embedding" for m in config.modes)
    if own:
        from workbench.models.cached import default_llm

        llm = default_llm(store, config.model)
    embedder = EmbeddingJudge(config.embedding_model, config.embedding_threshold) if config.embedding_model else None
    tally = CallTally(llm)
    start = time.perf_counter()
    try:
        for a, b, mode in jobs:
            if stop.is_set():
                report.stopped = True
                break
            ctx = config.context(mode)
            text_a, text_b = graph.context(a, ctx).render(), graph.context(b, ctx).render()
            try:
                if mode == "embedding":
                    verdict = embedder.judge(f"{graph.names[a]}\n{text_a}", f"{graph.names[b]}\n{text_b}")
                    key = None
                else:
                    call = llm.ask(judge_messages(graph.names[a], text_a, graph.names[b], text_b),
                                   max_tokens=config.max_tokens, schema=JUDGE_SCHEMA)
                    verdict, key = parse_verdict(call.text), call.key
                    if verdict is None:
                        raise ValueError(f"no verdict in the judge's output: {call.text[:120]!r}")
            except ModelError as exc:
                report.fatal = str(exc)
                _finish(store, run_id, a, b, mode, error=f"model error: {exc}")
                report.errors += 1
                break
            except Exception as exc:  # one unreadable verdict is recorded on its pair; the run goes on
                _finish(store, run_id, a, b, mode, error=f"{type(exc).__name__}: {exc}", contexts=(text_a, text_b))
                report.errors += 1
            else:
                _finish(store, run_id, a, b, mode, verdict=verdict, contexts=(text_a, text_b), key=key)
                report.done += 1
            if progress:
                progress(report.done + report.errors, report.jobs, tally.update(report))
    finally:
        tally.update(report)
        if own:
            llm.close()
    report.seconds = time.perf_counter() - start


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
