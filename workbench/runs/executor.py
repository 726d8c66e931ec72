"""The resumable executor: pending jobs → cached or generated outputs → scored events.

Every job (a (sample, cell) event) is committed in its own transaction together with
the generation it used, so a kill at any moment loses at most the generations in flight
and never leaves a half-written job. Prompts are rendered up front and grouped by their
content-addressed cache key: identical prompts (cells whose truncated evidence is the
same) cost one model call. Groups run in prompt-text order, so consecutive prompts share
the longest token prefixes and llama.cpp's KV cache reuses them.

The pass engine's driver (``workbench.passes``) holds the run's lease and keeps the
counters, stop, errors and timing; this module loads a run's jobs and processes them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Union

from workbench.errors import BadInput
from workbench.metrics.scoring import get_scorer
from workbench.models.base import Backend, Generation, ModelError, Prompt, PromptError
from workbench.models.cached import prompt_key
from workbench.models.check import GENERATOR, check_model_options
from workbench.models.fit import check_fit, footprint
from workbench.models.locate import resolve_model
from workbench.models.registry import ExecOptions, make_backend
from workbench.runs.generation import GenerationConfig
from workbench.passes import Driver, PassReport, PassWork, drive
from workbench.passes.inflight import in_flight
from workbench.runs.answers import parse_output, schema_for, score_answer
from workbench.runs.cells import run_cells
from workbench.runs.manifest import record_execution
from workbench.runs.sequential import SKIPPED, run_rounds, sequential_config, sequential_status
from workbench.store.db import Store, utcnow
from workbench.store.queries import Run, Sample, load_samples


@dataclass
class Progress:
    """A snapshot for progress displays.

    ``done``/``total`` count this execution's jobs (processed, errors included); a resume
    selects only the pending ones, so ``already_done`` and ``run_jobs`` place it in the run.
    """

    done: int
    total: int
    model_calls: int
    cache_hits: int
    errors: int
    completion_tokens: int
    elapsed: float
    already_done: int = 0   # the run's jobs that were done before this execution started
    run_jobs: int = 0       # every job of the run
    model: str | None = None  # in a run of several models, the one answering now (its label)

    @property
    def run_done(self) -> int:
        """The run's done jobs now (as the runs table counts them: errors excluded)."""
        return self.already_done + self.done - self.errors

    @property
    def run_total(self) -> int:
        """Every job of the run (this execution's total when the run's size is unknown)."""
        return self.run_jobs or self.total


@dataclass
class ExecReport(PassReport):
    """What one execution did (``jobs``: pending ones, plus failed ones with retry_errors).

    A sequential run's ``jobs`` shrink as its cells stop: their jobs are ``skipped``, never asked.
    """

    completion_tokens: int = 0
    skipped: int = 0


@dataclass
class _Job:
    cell_id: str
    sid: int
    visible: list[str]
    key: str = ""
    prompt_tokens: int | None = None


class RunHasNoModel(BadInput):
    """The run was planned without a model (by ``sweep``): there is nothing to execute it with."""


def generation_of(run: Run) -> GenerationConfig:
    """The generation config ``run`` executes with; :class:`RunHasNoModel` when it was planned without one."""
    stored = run.config.get("generation")
    if not stored:
        raise RunHasNoModel(f"run {run.name!r} has no model (it was planned by `sweep`): "
                            "use `workbench run` or import predictions")
    return GenerationConfig.from_stored(stored)


def generations_of(run: Run) -> dict[str | None, GenerationConfig]:
    """The generation config of each model ``run`` executes with, by the label its cells name: ``{None: config}``
    for a run of one model; :class:`RunHasNoModel` when it was planned without one."""
    several = run.config.get("generations")
    if several:
        return {label: GenerationConfig.from_stored(stored) for label, stored in several.items()}
    return {None: generation_of(run)}


def check_models_fit(gens: Mapping[str | None, GenerationConfig]) -> None:
    """Refuse, before anything is written, local models of one run that do not fit in memory together (each one
    is kept loaded for the whole execution: :mod:`workbench.models.fit`)."""
    local = [(label, gen) for label, gen in gens.items() if gen.backend == "llamacpp"]
    if len(local) > 1:
        check_fit([footprint(str(label), resolve_model(gen.model), gen.n_ctx) for label, gen in local])


#: A backend for a run of one model, or one per model label (what tests and the TUI's workers pass in).
Backends = Union[Backend, Mapping[str, Backend], None]


def execute(store: Store, run: Run, *, opts: ExecOptions | None = None, retry_errors: bool = False,
            stop: threading.Event | None = None, progress: Callable[[Progress], None] | None = None,
            backend: Backends = None, wait: bool = False,
            on_wait: Callable[[str], None] | None = None) -> ExecReport:
    """Run every pending job of ``run`` (and failed ones with ``retry_errors``).

    ``stop`` set from another thread (e.g. a SIGINT handler) ends the run cleanly after
    the generations in flight are committed. The run's model is loaded (or its server
    asked) before any job is touched: one that cannot serve raises ``BadInput`` (a bad file) or
    ``EnvironmentFault`` (a server that does not answer), and every job stays pending.

    One process at a time executes a run: while another holds its lease this raises
    :class:`~workbench.store.lease.LeaseHeld`, or with ``wait`` waits for it (``on_wait``
    hears why) and then runs whatever the other left pending. A run planned without a model
    raises :class:`RunHasNoModel` before anything is touched.

    A run whose grid has a model axis loads every model before the first job and keeps them
    loaded; each step's jobs are answered model by model.
    """
    work = _RunWork(store, run, generations_of(run), opts or ExecOptions(), backend)
    return drive(store, f"run:{run.name}", work, ExecReport(run=run.name), retry_errors=retry_errors, stop=stop,
                 progress=work.progress_of(progress), wait=wait, on_wait=on_wait)


def load_jobs(store: Store, run: Run, statuses: tuple[str, ...]) -> list[tuple[_Job, str]]:
    """The run's jobs in ``statuses``, each with the evidence text its prompt shows."""
    marks = ",".join("?" * len(statuses))
    rows = store.conn.execute(
        "SELECT e.cell_id, e.sid, e.visible, v.text FROM events e JOIN evidence v ON v.sha256 = e.evidence_sha256"
        f" WHERE e.run_id = ? AND e.status IN ({marks})", (run.id, *statuses)).fetchall()
    kind = store.conn.execute("SELECT unit_kind FROM datasets WHERE id = ?", (run.dataset_id,)).fetchone()[0]
    prefix = "T" if kind == "triple" else "C"
    return [(_Job(cid, sid, [f"{prefix}{u}" for u in json.loads(vis)]), text) for cid, sid, vis, text in rows]


class _RunWork(PassWork):
    """A run's jobs (its events), grouped by prompt; all SQLite writes happen on the calling thread."""

    def __init__(self, store: Store, run: Run, gens: dict[str | None, GenerationConfig], opts: ExecOptions,
                 backend: Backends):
        self.store, self.run, self.gens, self.opts = store, run, gens, opts
        given = backend if isinstance(backend, Mapping) else {None: backend} if backend is not None else {}
        self.backends: dict[str | None, Backend] = dict(given)
        # The model each cell is answered by (None in a run of one model): a step's jobs go to their model.
        self.model_of = {cid: cell.model for cid, cell in run_cells(store, run.id).items()}
        self.label, self.gen, self.backend = next(iter(gens)), next(iter(gens.values())), None
        self.sequential = sequential_config(run)
        self.place = (0, 0)   # (the run's jobs done before this execution, all its jobs)
        self.driver: Driver | None = None

    def progress_of(self, progress: Callable[[Progress], None] | None):
        """The driver's progress ticks as :class:`Progress` snapshots placed in the whole run."""
        if progress is None:
            return None

        def tick(done: int, total: int, r: ExecReport) -> None:
            progress(Progress(done, total, r.model_calls, r.cache_hits, r.errors, r.completion_tokens, r.seconds,
                              *self.place, model=self.label))

        return tick

    def load(self, statuses: tuple[str, ...]) -> list[tuple[_Job, str]]:
        jobs = load_jobs(self.store, self.run, statuses)
        by_status = dict(self.store.conn.execute(
            "SELECT status, count(*) FROM events WHERE run_id = ? GROUP BY status", (self.run.id,)).fetchall())
        self.place = (by_status.get("done", 0), sum(by_status.values()))
        return jobs

    def check_models(self) -> None:
        """Every model of the run loads (or its server answers within ``--timeout``) before a job is touched."""
        checks = [(f"the run's model{'' if label is None else f' {label}'}", gen.model_ref, GENERATOR)
                  for label, gen in self.gens.items() if label not in self.backends]
        if checks:
            check_model_options(*checks, timeout=self.opts.timeout)
            check_models_fit({label: gen for label, gen in self.gens.items() if label not in self.backends})

    def setup(self) -> None:
        for label, gen in self.gens.items():
            if label not in self.backends:
                self.backends[label] = make_backend(gen.backend_spec, self.opts, self.store)
            # What this execution runs on (host, threads, builds, the model's sha256) joins the run's manifest.
            record_execution(self.store, self.run, gen, n_threads=self.opts.n_threads,
                             n_gpu_layers=self.opts.n_gpu_layers, concurrency=self.opts.concurrency,
                             model_id=self.backends[label].model_id, label=label)
        self.samples = {s.sid: s for s in load_samples(self.store, self.run.dataset_id)}
        self.scorer = get_scorer(self.run.config.get("score", "acc"))
        self._use(next(iter(self.gens)))

    def _use(self, label: str | None) -> None:
        """Answer with model ``label`` from now on: its settings, its backend, its answer schema."""
        self.label, self.gen, self.backend = label, self.gens[label], self.backends[label]
        self.schema, self.sampling = schema_for(self.gen.answer_format), self.gen.sampling

    def close(self) -> None:
        for backend in self.backends.values():
            backend.close()

    def describe(self, job: _Job) -> str:
        return f"{self.samples[job.sid].id} / {job.cell_id}"

    def fail(self, job: _Job, message: str) -> None:
        with self.store.transaction() as conn:
            conn.execute("UPDATE events SET status = 'error', error = ?, finished_at = ?"
                         " WHERE run_id = ? AND cell_id = ? AND sid = ?",
                         (message, utcnow(), self.run.id, job.cell_id, job.sid))

    def process_all(self, jobs, driver: Driver) -> None:
        """Commit the groups the cache already answers, then generate the others; a sequential run round by round."""
        self.driver = driver
        if self.sequential is None:
            self._process(jobs)
            return

        def skipped(n: int) -> None:
            driver.report.skipped += n
            driver.report.jobs -= n
            driver.tick()

        def halt(why: str) -> None:
            driver.report.fatal = why

        run_rounds(self.store, self.run, jobs, self._process, stopping=driver.stopping, on_skipped=skipped,
                   on_halt=halt)

    def _process(self, jobs) -> None:
        """Model by model (in the run's order), commit the groups the cache already answers, then generate the others."""
        by_model: dict[str | None, list] = {label: [] for label in self.gens}
        for item in jobs:
            by_model[self.model_of[item[0].cell_id]].append(item)
        for label, part in by_model.items():
            if part and not self.driver.stopping():
                self._use(label)
                self._process_model(part)

    def _process_model(self, jobs) -> None:
        """Commit the groups the cache already answers, then generate the others (all for the model in use)."""
        pending: list[tuple[str, list[_Job], object]] = []
        for key, (prompt, members) in self._group(jobs).items():
            cached = self._cached(key)
            if cached is not None:
                for job in members:
                    self._commit(job, cached, source="cache")
            else:
                pending.append((key, members, prompt))
        self._generate(pending)

    def _group(self, jobs) -> dict[str, tuple[Prompt, list[_Job]]]:
        return group_prompts(self.gen, self.backend, self.samples, jobs,
                             on_error=lambda job, exc: self.driver.fail(job, str(exc), shown=str(exc)))

    def _cached(self, key: str) -> Generation | None:
        row = self.store.conn.execute(
            "SELECT output, prompt_tokens, completion_tokens, seconds, finish_reason FROM generations WHERE key = ?",
            (key,)).fetchone()
        if row is None:
            return None
        return Generation(text=row[0], prompt_tokens=row[1], completion_tokens=row[2], eval_tokens=0,
                          seconds=row[3], finish_reason=row[4])

    def _generate(self, pending) -> None:
        """Generate each uncached group (up to ``backend.concurrency`` at once) and commit its jobs."""
        driver = self.driver
        for (key, members, _), outcome in self._outcomes(pending):
            if isinstance(outcome, ModelError):
                driver.fatal(outcome)
                for job in members:
                    driver.fail(job, f"model error: {outcome}")
                driver.stop.set()   # start no further generation; those in flight are still committed
                continue
            if isinstance(outcome, Exception):
                for job in members:
                    driver.fail(job, str(outcome), shown=str(outcome))
                continue
            driver.count_call(cached=False)
            driver.report.completion_tokens += outcome.completion_tokens
            first, rest = members[0], members[1:]
            self._commit(first, outcome, source="model", new_key=key)
            cached = Generation(outcome.text, outcome.prompt_tokens, outcome.completion_tokens, 0,
                                outcome.seconds, outcome.finish_reason)
            for job in rest:
                self._commit(job, cached, source="cache")

    def _outcomes(self, pending) -> Iterator[tuple[tuple, Generation | Exception]]:
        width = max(1, getattr(self.backend, "concurrency", 1))
        return in_flight(pending, lambda item: self.backend.generate(item[2], self.sampling, self.schema), width,
                         self.driver.stopping)

    def _commit(self, job: _Job, generation: Generation, *, source: str, new_key: str | None = None) -> None:
        sample = self.samples[job.sid]
        parsed = parse_output(generation.text, self.gen.answer_format)
        score = score_answer(parsed, sample.answers, sample.aliases, job.visible, self.scorer)
        with self.store.transaction() as conn:
            if new_key is not None:
                conn.execute(
                    "INSERT OR IGNORE INTO generations (key, model_id, output, prompt_tokens, completion_tokens,"
                    " seconds, finish_reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (new_key, self.backend.model_id, generation.text, generation.prompt_tokens,
                     generation.completion_tokens, generation.seconds, generation.finish_reason, utcnow()))
            conn.execute(
                "UPDATE events SET status = 'done', error = NULL, source = ?, gen_key = ?, prediction = ?, score = ?,"
                " citations = ?, prompt_tokens = ?, eval_tokens = ?, completion_tokens = ?, finished_at = ?"
                " WHERE run_id = ? AND cell_id = ? AND sid = ?",
                (source, job.key, parsed.prediction, score,
                 None if parsed.citations is None else json.dumps(parsed.citations),
                 job.prompt_tokens if job.prompt_tokens is not None else generation.prompt_tokens,
                 generation.eval_tokens if source == "model" else 0, generation.completion_tokens, utcnow(),
                 self.run.id, job.cell_id, job.sid))
        if source == "cache":
            self.driver.count_call(cached=True)
        self.driver.done()


def group_prompts(gen: GenerationConfig, backend: Backend, samples: Mapping[int, Sample], jobs,
                  on_error: Callable[[_Job, PromptError], None]) -> dict[str, tuple[Prompt, list[_Job]]]:
    """Render every job's prompt (chat or plain completion, as ``gen`` says), key it, and group
    identical ones: ``{cache key: (prompt, jobs)}``, ordered by prompt text (prefix sharing).

    Each job gets its ``key`` and ``prompt_tokens``. The executor and ``run --dry-run`` both
    group with this, so the dry run counts exactly the prompts the run will generate.
    """
    schema, sampling = schema_for(gen.answer_format), gen.sampling.as_dict()
    groups: dict[str, tuple[Prompt, list[_Job]]] = {}
    for job, evidence in jobs:
        try:
            prompt = gen.render(backend, evidence, samples[job.sid].question)
        except PromptError as exc:
            on_error(job, exc)
            continue
        job.prompt_tokens = prompt.tokens
        job.key = prompt_key(backend, prompt, sampling, schema)
        groups.setdefault(job.key, (prompt, []))[1].append(job)
    return dict(sorted(groups.items(), key=lambda kv: kv[1][0].text))


def run_stats(store: Store, run: Run) -> dict:
    """Job counts by status and source, and prompt tokens evaluated against the naive sum; a sequential run's
    standing (:func:`~workbench.runs.sequential.sequential_status`)."""
    q = store.conn.execute
    by_status = dict(q("SELECT status, count(*) FROM events WHERE run_id = ? GROUP BY status", (run.id,)).fetchall())
    by_source = dict(q("SELECT source, count(*) FROM events WHERE run_id = ? AND status = 'done' GROUP BY source",
                       (run.id,)).fetchall())
    naive, evaluated, completion = q(
        "SELECT coalesce(sum(prompt_tokens), 0), coalesce(sum(eval_tokens), 0),"
        " coalesce(sum(CASE WHEN source = 'model' THEN completion_tokens END), 0)"
        " FROM events WHERE run_id = ? AND status = 'done'", (run.id,)).fetchone()
    total = sum(by_status.values())
    status = sequential_status(store, run)
    return {"run": run.name, "jobs": total, "done": by_status.get("done", 0), "pending": by_status.get("pending", 0),
            "errors": by_status.get("error", 0), "skipped": by_status.get(SKIPPED, 0),
            "sequential": None if status is None else status.as_dict(), "model_calls": by_source.get("model", 0),
            "cache_hits": by_source.get("cache", 0), "imported": by_source.get("import", 0),
            "prompt_tokens_naive": naive, "prompt_tokens_evaluated": evaluated,
            "prompt_eval_ratio": (evaluated / naive) if naive else None, "completion_tokens": completion}
