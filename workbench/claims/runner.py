"""``claims run``: decompose and verify every finished answer of a run, resumably.

A claim run is one verification config over one generation run. Each done event (an
answer of a sample in a cell) is a job, committed whole in its own transaction with its
claims, the claim × unit verdict table and its per-sample metrics. Every LLM call (the
decomposer's and the judge's) is committed to the generation cache the moment it
returns, so a kill at any point loses no model work: a resume skips finished jobs and
replays the calls of the interrupted one from the cache.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from workbench.claims.decompose import DECOMPOSERS, decompose
from workbench.claims.record import job_metrics, write_job
from workbench.claims.reference import check_reference, is_long, reference_claims
from workbench.claims.types import Claim
from workbench.claims.verify import VERIFIERS, make_verifiers
from workbench.claims.vote import TIES, judge_claim, summarize, vote_label
from workbench.models.cached import default_llm
from workbench.models.check import EMBEDDING, GENERATOR, check_model_options
from workbench.models.embedder import CachedEmbedder
from workbench.models.embedders import CLAIMS, embedding_choice
from workbench.passes import CLAIMS_KEY_DIGITS, PassReport, PassWork, config_hash, drive, plan_or_find
from workbench.store.db import Store, utcnow
from workbench.store.queries import Run, Sample, load_samples


@dataclass(frozen=True)
class ClaimsConfig:
    """What determines a claim run's results (its key); execution settings are not part of it."""

    decomposer: str = "hybrid"
    verifiers: tuple[str, ...] = ("lexical", "embedding", "llm_judge")
    ties: str = "unsupported"
    reject_below: float = 0.5
    lexical_threshold: float = 0.6
    embedding_threshold: float | None = None  # None: the embedding model's own (workbench.models.embedders)
    long_clause: int = 40
    model: str = "default"                  # the GGUF of the llm decomposer, the judge and (default) nli
    embedding_model: str | None = None     # None: multilingual-e5-small (shipped)
    nli_model: str | None = None            # another GGUF for nli (default: ``model``)

    def validate(self) -> None:
        """Reject a config that cannot work, naming the option."""
        if self.decomposer not in DECOMPOSERS:
            raise ValueError(f"--decomposer: {self.decomposer!r} is not one of {', '.join(DECOMPOSERS)}")
        if not self.verifiers:
            raise ValueError("--verifiers: give at least one of " + ", ".join(VERIFIERS))
        for name in self.verifiers:
            if name not in VERIFIERS:
                raise ValueError(f"--verifiers: {name!r} is not one of {', '.join(VERIFIERS)}")
        if self.ties not in TIES:
            raise ValueError(f"--ties: {self.ties!r} is not one of {', '.join(TIES)}")
        if not 0.0 <= self.reject_below <= 1.0:
            raise ValueError("--reject-below must be within [0, 1]")

    @property
    def needs_llm(self) -> bool:
        return (self.decomposer in ("llm", "hybrid") or "llm_judge" in self.verifiers
                or ("nli" in self.verifiers and self.nli_model is None))

    def check_models(self, timeout: float | None = None) -> None:
        """Refuse (``BadInput`` naming the option) a model the config needs or names that cannot serve.

        Nothing is written; each model is loaded once and freed, or its server asked within
        ``timeout`` (see :mod:`workbench.models.check`). A model named but not needed
        (``--nli-model`` without the nli verifier) is checked too: it is part of the key.
        """
        options = []
        if self.needs_llm or self.model != "default":
            options.append(("--model", self.model, GENERATOR))
        if self.nli_model is not None:
            options.append(("--nli-model", self.nli_model, GENERATOR))
        if "embedding" in self.verifiers or self.embedding_model is not None:
            options.append(("--embedding-model", self.embedding_model, EMBEDDING))
        check_model_options(*options, timeout=timeout)

    def resolved(self, use: str = CLAIMS) -> ClaimsConfig:
        """This config with the embedding verifier's defaults filled in: the model's name and its threshold for ``use``.

        Run before the key is taken, so a claim run records (and is keyed by) the model and the
        threshold it really used: runs of two embedders never share a claim run. ``use`` is
        :data:`~workbench.models.embedders.CLAIMS` (seed 003's short answers) or
        :data:`~workbench.models.embedders.LONG_ANSWERS` (``meta run``). Without the embedding
        verifier the config is returned as it is.
        """
        if "embedding" not in self.verifiers:
            return self
        model, threshold = embedding_choice(self.embedding_model, self.embedding_threshold, use)
        return replace(self, embedding_model=model, embedding_threshold=threshold)

    def key(self) -> str:
        """The claim run's identity among those over one run (``claim_runs.config_key``)."""
        return config_hash(asdict(self))[:CLAIMS_KEY_DIGITS]


@dataclass
class ClaimsReport(PassReport):
    """What one ``claims run`` did."""

    claim_run: int = 0
    claims: int = 0
    embedded: int | None = None             # the embedding verifier: texts embedded now ...
    embeddings_cached: int | None = None    # ... and read from the store


def open_verifiers(store: Store, config: ClaimsConfig, llm, *,
                   model_options: Mapping[str, Any] | None = None) -> tuple[list, list]:
    """The config's verifiers, and the models opened for them that the caller closes.

    ``nli`` checks with ``config.nli_model`` when it names another model (one of its own,
    loaded on first use), else with ``llm``, the decomposer's and the judge's. ``model_options``
    (:func:`~workbench.models.cached.default_llm`'s threads, GPU layers, concurrency, timeout)
    say how the models opened here run.
    """
    options = dict(model_options or {})
    opened = []
    nli_llm = embedder = None
    if "embedding" in config.verifiers:
        embedder = CachedEmbedder(store, config.embedding_model, n_threads=options.get("n_threads"),
                                  n_gpu_layers=options.get("n_gpu_layers", 0),
                                  **({"timeout": options["timeout"]} if "timeout" in options else {}))
        opened.append(embedder)
    if "nli" in config.verifiers and config.nli_model is not None:
        nli_llm = default_llm(store, config.nli_model, **options)
        opened.append(nli_llm)
    verifiers = make_verifiers(config.verifiers, llm=llm, embedder=embedder, nli_llm=nli_llm,
                               lexical_threshold=config.lexical_threshold,
                               embedding_threshold=config.embedding_threshold)
    return verifiers, opened


def claim_run_id(store: Store, run: Run, config: ClaimsConfig) -> int:
    """The id of ``config``'s claim run over ``run``, created on first use."""
    key = config.key()

    def find(conn):
        return conn.execute("SELECT id FROM claim_runs WHERE run_id = ? AND config_key = ?", (run.id, key)).fetchone()

    def write(conn, _) -> int:
        return conn.execute("INSERT INTO claim_runs (run_id, config_key, config, created_at) VALUES (?, ?, ?, ?)",
                            (run.id, key, json.dumps(asdict(config)), utcnow())).lastrowid

    found, created = plan_or_find(store, find, write)
    return found[0] if found is not None else created


def _check_cells(store: Store, run: Run, cells: Sequence[str] | None) -> None:
    unknown = set(cells or ()) - {c for (c,) in store.conn.execute("SELECT cell_id FROM cells WHERE run_id = ?",
                                                                    (run.id,))}
    if unknown:
        raise ValueError(f"--cell: {', '.join(sorted(unknown))} not in run {run.name!r}")


def plan_jobs(store: Store, run: Run, crid: int, *, cells: Sequence[str] | None = None,
              limit: int | None = None) -> int:
    """Add a job for every done event of ``run`` (in ``cells``, first ``limit`` samples); returns the new count."""
    where, params = ["run_id = ?", "status = 'done'"], [run.id]
    _check_cells(store, run, cells)
    if cells:
        where.append(f"cell_id IN ({','.join('?' * len(cells))})")
        params += list(cells)
    if limit is not None:
        where.append("sid IN (SELECT sid FROM samples WHERE dataset_id = ? ORDER BY sid LIMIT ?)")
        params += [run.dataset_id, limit]
    with store.transaction() as conn:
        before = conn.total_changes
        conn.execute("INSERT OR IGNORE INTO claim_jobs (claim_run_id, cell_id, sid)"
                     f" SELECT ?, cell_id, sid FROM events WHERE {' AND '.join(where)}", (crid, *params))
        return conn.total_changes - before


def unit_text(row) -> str:
    """The plain text a verifier reads for a unit: ``h | r | t`` for a triple, the chunk text otherwise."""
    head, relation, tail, text = row
    return text if text is not None else f"{head} | {relation} | {tail}"


def list_answer(prediction: str | None) -> tuple[str, list[Claim] | None]:
    """The answer text of a prediction, and its claims when it is a list answer.

    A ``json``-format run stores a JSON list of answer strings; each item is one claim (an
    entity answer has nothing to decompose), with its span in the ``"; "``-joined text.
    Any other prediction is free text for the decomposer: (text, None).
    """
    text = prediction or ""
    try:
        items = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text, None
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        return text, None
    claims, pos = [], 0
    for item in dict.fromkeys(x.strip() for x in items if x.strip()):
        claims.append(Claim(item, pos, pos + len(item), "item"))
        pos += len(item) + 2
    return "; ".join(c.text for c in claims), claims


class _ClaimsWork(PassWork):
    """A claim run's jobs (the answers of its run) and how one is verified; all writes on the calling thread."""

    def __init__(self, store: Store, run: Run, crid: int, config: ClaimsConfig, llm, verifiers,
                 report: ClaimsReport, cells: Sequence[str] | None, limit: int | None, models: Sequence = ()):
        self.store, self.run, self.crid, self.config, self.llm, self.report = store, run, crid, config, llm, report
        self.verifiers, self.cells, self.limit = verifiers, cells, limit
        self.models = [m for m in (llm, *models) if m is not None]   # each model the jobs call
        self._claims: dict[str, list[Claim]] = {}
        self._refs: dict[int, list[Claim]] = {}
        self._verdicts: dict[tuple[str, str, str], object] = {}
        self._units: dict[int, str] = {}

    def load(self, statuses: tuple[str, ...]) -> list[tuple]:
        """Plan the claim run's jobs (one per done answer in scope), then select those with ``statuses``.

        A job is ``(cell_id, sid, prediction, visible)``: an answer and the units it saw.
        """
        run, cells, limit = self.run, self.cells, self.limit
        plan_jobs(self.store, run, self.crid, cells=cells, limit=limit)
        scope, params = "", []
        if cells:
            scope += f" AND j.cell_id IN ({','.join('?' * len(cells))})"
            params += list(cells)
        if limit is not None:
            scope += " AND j.sid IN (SELECT sid FROM samples WHERE dataset_id = ? ORDER BY sid LIMIT ?)"
            params += [run.dataset_id, limit]
        return self.store.conn.execute(
            "SELECT j.cell_id, j.sid, e.prediction, e.visible FROM claim_jobs j JOIN events e"
            " ON e.run_id = ? AND e.cell_id = j.cell_id AND e.sid = j.sid"
            f" WHERE j.claim_run_id = ? AND j.status IN ({','.join('?' * len(statuses))}){scope}"
            " ORDER BY j.sid, j.cell_id", (run.id, self.crid, *statuses, *params)).fetchall()

    def check_models(self) -> None:
        for model in self.models:   # the judge, the nli model, the embedder: each loads (or answers) first
            check = getattr(model, "check", None)
            if check is not None:
                check()

    def setup(self) -> None:
        self.samples = {s.sid: s for s in load_samples(self.store, self.run.dataset_id)}

    def describe(self, job) -> str:
        cell_id, sid = job[:2]
        return f"{self.samples[sid].id} / {cell_id}"

    def unit_texts(self, uids: Sequence[int]) -> list[str]:
        missing = [u for u in uids if u not in self._units]
        for i in range(0, len(missing), 500):
            part = missing[i:i + 500]
            for uid, *row in self.store.conn.execute(
                    f"SELECT uid, head, relation, tail, text FROM units WHERE dataset_id = ? AND uid IN"
                    f" ({','.join('?' * len(part))})", (self.run.dataset_id, *part)):
                self._units[uid] = unit_text(row)
        return [self._units[u] for u in uids]

    def claims_of(self, answer: str) -> list[Claim]:
        # The same answer recurs across cells (and samples); decompose it once per pass.
        if answer not in self._claims:
            kw = {"long_clause": self.config.long_clause} if self.config.decomposer == "hybrid" else {}
            self._claims[answer] = decompose(answer, self.config.decomposer, self.llm, **kw)
        return self._claims[answer]

    def prefetch(self, pairs: Sequence[tuple[str, str]]) -> None:
        """The checks of every (claim, premise) pair of an answer at once, for verifiers that order them
        (premise first: each premise evaluated once)."""
        for verifier in self.verifiers:
            if not hasattr(verifier, "verify_pairs"):
                continue
            todo = list(dict.fromkeys(p for p in pairs if (verifier.name, *p) not in self._verdicts))
            for (claim, premise), verdict in zip(todo, verifier.verify_pairs(todo)):
                self._verdicts[(verifier.name, claim, premise)] = verdict

    def judge(self, question: str) -> Callable[[str, Sequence[str]], list[dict[str, str]]]:
        """The checker of a claim against premises: each verifier's label and the vote's, per premise."""
        def check(claim: str, premises: Sequence[str]) -> list[dict[str, str]]:
            per_verifier = self.verdicts(claim, question, premises)
            out = []
            for j in range(len(premises)):
                column = [vs[j] for vs in per_verifier.values()]
                out.append({**{name: vs[j].label for name, vs in per_verifier.items()},
                            "vote": vote_label(column, self.config.ties)})
            return out
        return check

    def reference(self, sample: Sample) -> list[Claim]:
        """The sample's reference claims (decomposed once per pass when long)."""
        if sample.sid not in self._refs:
            self._refs[sample.sid] = reference_claims(sample, self.claims_of)
        return self._refs[sample.sid]

    def verdicts(self, claim: str, question: str, units: Sequence[str]) -> dict[str, list]:
        out = {}
        for verifier in self.verifiers:
            todo = [u for u in units if (verifier.name, claim, u) not in self._verdicts]
            if todo:
                for unit, verdict in zip(todo, verifier.verify(claim, todo, question=question)):
                    self._verdicts[(verifier.name, claim, unit)] = verdict
            out[verifier.name] = [self._verdicts[(verifier.name, claim, u)] for u in units]
        return out

    def width(self) -> int:
        return max((getattr(m, "width", 1) for m in self.models), default=1)   # an embedder takes turns: 1

    def prepare(self, job):
        cell_id, sid, prediction, visible_json = job
        visible = json.loads(visible_json)
        sample = self.samples[sid]
        answer, items = list_answer(prediction)
        units = self.unit_texts(visible)
        claims = items if items is not None else self.claims_of(answer)
        reference = self.reference(sample)
        if is_long(sample):
            # Every model check of this answer at once, premise by premise (the KV prefix of each reused).
            ref_text = sample.answers[0]
            self.prefetch([(c.text, u) for c in claims for u in units] + [(c.text, ref_text) for c in claims]
                          + [(g.text, answer) for g in reference] + [(g.text, u) for g in reference for u in units])
        else:
            self.prefetch([(c.text, u) for c in claims for u in units])
        results = [judge_claim(c, self.verdicts(c.text, sample.question, units), self.config.ties) for c in claims]
        checks = check_reference(sample, reference, [c.text for c in claims], answer, units,
                                 self.judge(sample.question))
        summary = summarize(answer, results, reject_below=self.config.reject_below)
        gold_uids = {u for path in sample.gold_paths for u in path}
        relevant = np.array([u in gold_uids for u in visible], dtype=bool) if gold_uids else None
        metrics = job_metrics(results, checks, len(units), relevant)
        return visible, results, checks, reference, summary, metrics

    def commit(self, job, prepared) -> None:
        cell_id, sid = job[:2]
        visible, results, checks, reference, summary, metrics = prepared
        with self.store.transaction() as conn:
            write_job(conn, self.crid, cell_id, sid, visible, results, checks, reference, summary, metrics)
        self.report.claims += len(results)

    def fail(self, job, message: str) -> None:
        cell_id, sid = job[:2]
        with self.store.transaction() as conn:
            conn.execute("UPDATE claim_jobs SET status = 'error', error = ?, finished_at = ?"
                         " WHERE claim_run_id = ? AND cell_id = ? AND sid = ?",
                         (message, utcnow(), self.crid, cell_id, sid))


def run_claims(store: Store, run: Run, config: ClaimsConfig, *, cells: Sequence[str] | None = None,
               limit: int | None = None, llm=None, retry_errors: bool = False,
               stop: threading.Event | None = None,
               progress: Callable[[int, int, ClaimsReport], None] | None = None, wait: bool = False,
               on_wait: Callable[[str], None] | None = None,
               model_options: Mapping[str, Any] | None = None) -> ClaimsReport:
    """Verify the claims of every finished answer of ``run`` under ``config``; resumable.

    ``llm`` is a :class:`workbench.models.cached.CachedLLM`; by default one over
    ``config.model`` is built when the config needs it. ``model_options`` say how the models
    opened here run (:func:`open_verifiers`); served ones keep that many answers in flight. ``stop`` (set from another thread,
    e.g. a SIGINT handler) ends the pass after the job in progress. One process at a time
    runs a claim run: another holding it raises :class:`~workbench.store.lease.LeaseHeld`,
    or with ``wait`` is waited for (``on_wait`` hears why).
    """
    config.validate()
    config.check_models(timeout=(model_options or {}).get("timeout"))
    config = config.resolved()
    own_llm = llm is None and config.needs_llm
    if own_llm:
        llm = default_llm(store, config.model, **(model_options or {}))   # loads on its first call only
    opened: list = []
    try:
        # Everything that can refuse the options does so before anything is written.
        verifiers, opened = open_verifiers(store, config, llm, model_options=model_options)
        _check_cells(store, run, cells)
        crid = claim_run_id(store, run, config)
        report = ClaimsReport(run.name, claim_run=crid)
        work = _ClaimsWork(store, run, crid, config, llm, verifiers, report, cells, limit, models=opened)
        report = drive(store, f"claims:{crid}", work, report, retry_errors=retry_errors, stop=stop,
                       progress=progress, wait=wait, on_wait=on_wait)
        for other in opened:
            if isinstance(other, CachedEmbedder):
                report.embedded, report.embeddings_cached = other.embedded, other.cached
        return report
    finally:
        for other in opened:
            other.close()
        if own_llm:
            llm.close()
