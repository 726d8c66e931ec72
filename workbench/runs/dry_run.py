"""``workbench run --dry-run``: what a run would do, worked out without generating or writing anything.

The plan is computed in memory (:func:`~workbench.runs.sweep.preview_sweep`), or read from
the database when the run is planned already. Every prompt is rendered and tokenized as
the executor renders it, by the model's own tokenizer loaded in llama.cpp's vocab-only
mode (no weights, no model slot), and grouped with the executor's own grouping
(:func:`~workbench.runs.executor.group_prompts`). So the dry run reports exactly:

- the jobs the run would process, and the unique prompts they need after dedup;
- the prompt tokens of every job (what the run records as ``prompt_tokens``), of each
  unique prompt once, and of the uncached prompts after llama.cpp's KV prefix reuse in the
  executor's order (what the run records as ``eval_tokens``);
- the unique prompts the generation cache already answers;
- an ETA from this model file's measured speed: a fit over earlier generations recorded
  in this database, or, with none, a short probe (the model loaded, one prompt generated).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.models.base import Backend, ModelError, Prompt, Sampling
from workbench.models.llamacpp import LlamaCppBackend, _load_llama, model_id_of
from workbench.models.locate import file_sha256, resolve_model
from workbench.models.registry import ExecOptions
from workbench.passes import job_statuses
from workbench.runs.answers import schema_for
from workbench.runs.executor import _Job, group_prompts, load_jobs, run_stats
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, preview_sweep
from workbench.store.db import Store
from workbench.store.manifests import cached_keys, known_file_sha256, model_timings, writes_refused
from workbench.store.queries import get_run, load_samples
from workbench.cores import usable_cores

MIN_HISTORY = 3   # earlier generations needed to fit a speed instead of probing


@dataclass
class Speed:
    """The model's measured speed: seconds per generation = eval/prompt rate + generated/gen rate + overhead."""

    source: str                           # "history" (earlier generations in this database) or "probe"
    samples: int                          # generations measured
    prompt_tokens_per_s: float | None     # None: too fast to measure apart from the rest
    generated_tokens_per_s: float | None
    overhead_s: float                     # per generation (grammar, sampling set-up)
    mean_generated: float                 # tokens per answer, as measured (capped at max_tokens)

    def seconds(self, eval_tokens: int, generations: int, generated_each: float) -> float:
        """Predicted seconds for ``generations`` calls evaluating ``eval_tokens`` prompt tokens in all."""
        per_prompt = 1 / self.prompt_tokens_per_s if self.prompt_tokens_per_s else 0.0
        per_generated = 1 / self.generated_tokens_per_s if self.generated_tokens_per_s else 0.0
        return eval_tokens * per_prompt + generations * (generated_each * per_generated + self.overhead_s)


@dataclass
class DryRun:
    """What ``workbench run`` would do now (see the module docstring); nothing was written."""

    run: str
    exists: bool                          # planned already: the counts are its pending jobs
    model: str
    model_sha256: str | None
    tokenizer: str | None                 # the GGUF whose own tokens the counts are in; None when not counted
    run_jobs: int                         # every job of the run
    jobs: int                             # the jobs this `run` would process
    unique_prompts: int
    cache_hits: int                       # unique prompts the generation cache already answers
    to_generate: int                      # unique prompts the model would generate
    too_long: int                         # unique prompts over --n-ctx with --max-tokens: they fail
    prompt_tokens: int | None             # over every job (the run's naive sum)
    unique_prompt_tokens: int | None      # each unique prompt once
    eval_tokens: int | None               # the prompts to generate, after KV prefix reuse
    eta_seconds: float | None
    eta_max_seconds: float | None         # every answer running to max_tokens
    speed: Speed | None
    notes: list[str] = field(default_factory=list)
    error: str | None = None              # why the prompts could not be rendered (e.g. a missing model file)
    model_label: str | None = None        # in a run of several models, whose part of the run this is


class VocabOnlyBackend(LlamaCppBackend):
    """:class:`LlamaCppBackend`'s rendering and tokenization over the vocabulary alone.

    llama.cpp's ``vocab_only`` loads no weights, so this takes no model slot and cannot
    generate. ``render``/``render_text`` and the token counts are the parent's own code.
    """

    def __init__(self, path: str | Path, model_id: str, *, n_ctx: int, chat: bool = True):
        self.path, self.model_id, self.n_ctx = Path(path), model_id_of(model_id), n_ctx
        self._slot = None
        self.llm = _load_llama(self.path, vocab_only=True)
        self._set_up_template(chat)   # the parent's own: the counts are a real run's
        self._grammars = {}

    def tokens(self, prompt: Prompt) -> list[int]:
        """The prompt's tokens as the model evaluates them."""
        return self._tokens(prompt)

    def generate(self, prompt, sampling, json_schema=None, grammar=None):
        raise ModelError("a vocab-only model cannot generate")

    def close(self) -> None:
        self.llm.close()


def dry_run(store: Store, config: SweepConfig, gen: GenerationConfig, *, dataset: str | None = None,
            name: str | None = None, opts: ExecOptions | None = None, retry_errors: bool = False,
            probe: bool = True, model_label: str | None = None,
            run_models: dict[str, dict] | None = None) -> DryRun:
    """What ``workbench run`` with these settings would do now; nothing is generated or written.

    ``probe`` allows measuring the model's speed (loading it) when the database holds no
    earlier generations of this model file; without it the ETA is then unknown. In a run of
    several models (``run_models``: label → settings), the part model ``gen``, labelled
    ``model_label``, answers: its cells only.
    """
    with writes_refused(store):
        return _dry_run(store, config, gen.resolved(), dataset, name, opts or ExecOptions(), retry_errors, probe,
                        model_label, run_models)


def _dry_run(store: Store, config: SweepConfig, gen: GenerationConfig, dataset, name, opts: ExecOptions,
             retry_errors: bool, probe: bool, model_label: str | None = None,
             run_models: dict[str, dict] | None = None) -> DryRun:
    preview = preview_sweep(store, config, dataset=dataset, name=name,
                            **({"generations": run_models} if run_models else {"generation": gen.as_dict()}))
    notes = [*preview.notes, *(f"warning: {w}" for w in preview.warnings)]
    if preview.exists:
        run = get_run(store, preview.run)
        jobs = load_jobs(store, run, job_statuses(retry_errors))
        run_jobs = run_stats(store, run)["jobs"]
        if model_label is not None:     # this model's cells of the run
            mine = lambda cell_id: cell_id.startswith(f"{model_label}/")  # noqa: E731
            jobs = [job for job in jobs if mine(job[0].cell_id)]
            run_jobs = store.conn.execute("SELECT count(*) FROM events WHERE run_id = ? AND cell_id LIKE ?",
                                          (run.id, f"{model_label}/%")).fetchone()[0]
        notes.append(f"run {preview.run} is planned already: counting the jobs it has left")
    else:
        prefix = "T" if preview.dataset.unit_kind == "triple" else "C"
        jobs = [(_Job(cid, sid, [f"{prefix}{u}" for u in visible]), preview.texts[sha])
                for cid, sid, visible, sha in preview.jobs]
        run_jobs = len(jobs)
    blank = DryRun(preview.run, preview.exists, gen.model, model_sha256=None, tokenizer=None, run_jobs=run_jobs,
                   jobs=len(jobs), unique_prompts=0, cache_hits=0, to_generate=0, too_long=0, prompt_tokens=None,
                   unique_prompt_tokens=None, eval_tokens=None, eta_seconds=None, eta_max_seconds=None, speed=None,
                   notes=notes)
    blank.model_label = model_label
    if not jobs:
        blank.eta_seconds = blank.eta_max_seconds = 0.0
        return blank
    try:
        backend, path = _renderer(store, gen)
    except ModelError as exc:
        blank.error = f"prompts not rendered: {exc}"
        return blank
    try:
        samples = {s.sid: s for s in load_samples(store, preview.dataset.id)}
        failed: list[str] = []
        groups = group_prompts(gen, backend, samples, jobs, on_error=lambda job, exc: failed.append(str(exc)))
        result = _count(store, preview, gen, opts, backend, path, groups, run_jobs, len(jobs), failed, notes, probe)
        result.model_label = model_label
        return result
    finally:
        backend.close()


def _renderer(store: Store, gen: GenerationConfig) -> tuple[Backend, Path | None]:
    """The backend that renders prompts as the run's would, without weights or network: ``(backend, GGUF path)``."""
    if gen.backend == "openai":
        from workbench.models.openai_http import OpenAIBackend

        return OpenAIBackend(gen.base_url, gen.model), None
    path = resolve_model(gen.model)
    # The run's backend keys the cache on the file's sha256; remembered in model_files, or hashed
    # here without remembering it (a dry run writes nothing).
    try:
        sha = known_file_sha256(store, path) or file_sha256(path)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the model file ({exc})") from exc
    return VocabOnlyBackend(path, sha, n_ctx=gen.n_ctx, chat=gen.prompt_style != "completion"), path


def _count(store, preview, gen, opts, backend, path, groups, run_jobs, n_jobs, failed, notes, probe) -> DryRun:
    counted = isinstance(backend, VocabOnlyBackend)
    members = [job for _, group in groups.values() for job in group]
    hits = cached_keys(store, groups)
    pending = [(key, prompt) for key, (prompt, _) in groups.items() if key not in hits]
    fits = [(key, prompt) for key, prompt in pending
            if not counted or prompt.tokens + gen.max_tokens <= gen.n_ctx]   # as LlamaCppBackend.generate checks
    too_long = len(pending) - len(fits)
    if failed:
        notes.append(f"{len(failed)} jobs cannot be rendered (e.g. {failed[0]})")
    if too_long:
        notes.append(f"{too_long} unique prompts are longer than --n-ctx {gen.n_ctx} allows with --max-tokens "
                     f"{gen.max_tokens}: their jobs would fail")
    result = DryRun(
        preview.run, preview.exists, gen.model, model_sha256=backend.model_id if counted else None,
        tokenizer=path.name if counted else None, run_jobs=run_jobs, jobs=n_jobs,
        unique_prompts=len(groups), cache_hits=len(hits), to_generate=len(fits), too_long=too_long,
        prompt_tokens=sum(job.prompt_tokens for job in members) if counted else None,
        unique_prompt_tokens=sum(prompt.tokens for prompt, _ in groups.values()) if counted else None,
        eval_tokens=_eval_tokens(backend, [prompt for _, prompt in fits]) if counted else None,
        eta_seconds=None, eta_max_seconds=None, speed=None, notes=notes)
    if not fits:
        result.eta_seconds = result.eta_max_seconds = 0.0
        return result
    speed = _history_speed(store, backend.model_id, gen.max_tokens, with_prompt=counted)
    if speed is None and probe and counted:
        speed = _probe_speed(path, backend.model_id, gen, opts, fits[0][1])
    if speed is None:
        notes.append("no ETA: no earlier generations of this model in this database"
                     + ("" if counted else " (a server model is not probed)"))
        return result
    eval_tokens = result.eval_tokens or 0   # a server model's are unknown: its fit has no prompt term
    result.speed = speed
    result.eta_seconds = speed.seconds(eval_tokens, len(fits), speed.mean_generated)
    result.eta_max_seconds = speed.seconds(eval_tokens, len(fits), gen.max_tokens)
    return result


def _eval_tokens(backend: VocabOnlyBackend, prompts: list[Prompt]) -> int:
    """Prompt tokens llama.cpp evaluates for ``prompts`` generated in this order by one fresh model.

    Each prompt reuses the KV cache's longest common token prefix with the one before, as
    :meth:`LlamaCppBackend._reusable_prefix` counts it (the last token is always evaluated
    again). Tokens are made again here one prompt at a time: keeping every token list of a
    large sweep would take far more memory than tokenizing twice takes time.
    """
    total, held = 0, []
    for prompt in prompts:
        tokens = backend.tokens(prompt)
        common = sum(1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], zip(held, tokens)))
        reused = common - 1 if common == len(tokens) and common > 0 else common
        total += len(tokens) - reused
        held = tokens
    return total


def fit_speed(rows: list[tuple[int, int, float]], max_tokens: int, source: str = "history") -> Speed | None:
    """The speed that best explains ``(eval tokens, generated tokens, seconds)`` rows, or None with too few.

    Least squares of ``seconds = a·eval + b·generated + c`` with a, b, c ≥ 0: every subset
    of the three terms is fitted and the best non-negative one kept (exact for three terms).
    """
    import numpy as np

    if len(rows) < MIN_HISTORY:
        return None
    data = np.asarray(rows, dtype=float)
    columns = np.column_stack([data[:, 0], data[:, 1], np.ones(len(data))])
    best: tuple[float, np.ndarray] | None = None
    for mask in itertools.product((True, False), repeat=3):
        if not any(mask):
            continue
        chosen = columns[:, list(mask)]
        coef, *_ = np.linalg.lstsq(chosen, data[:, 2], rcond=None)
        if (coef < 0).any():
            continue
        residual = float(np.sum((chosen @ coef - data[:, 2]) ** 2))
        if best is None or residual < best[0] - 1e-12:
            full = np.zeros(3)
            full[list(mask)] = coef
            best = (residual, full)
    if best is None:
        return None
    a, b, c = best[1]
    mean_generated = float(np.mean(np.minimum(data[:, 1], max_tokens)))
    return Speed(source, len(rows), float(1 / a) if a > 0 else None, float(1 / b) if b > 0 else None, float(c),
                 mean_generated)


def _history_speed(store: Store, model_id: str, max_tokens: int, *, with_prompt: bool) -> Speed | None:
    """The fit over earlier generations; without ``with_prompt`` (prompt tokens not counted) the
    prompt's share of the time is left to the per-call term, where the ETA can still count it."""
    rows = model_timings(store, model_id)
    return fit_speed(rows if with_prompt else [(0, c, s) for _, c, s in rows], max_tokens)


def _probe_speed(path: Path, model_id: str, gen: GenerationConfig, opts: ExecOptions, prompt: Prompt) -> Speed:
    """Measure the model on the first prompt to generate: one token (the prompt's evaluation), then a full answer.

    The second call reuses the first's KV cache, so it times generation alone. The model
    takes the machine-wide slot while it is loaded, as a run's does.
    """
    backend = LlamaCppBackend(path, model_id, n_ctx=gen.n_ctx, n_threads=opts.n_threads or usable_cores(),
                              n_gpu_layers=opts.n_gpu_layers, seed=gen.seed, on_wait=opts.on_wait, stop=opts.stop,
                              chat=gen.prompt_style != "completion")
    try:
        schema = schema_for(gen.answer_format)
        first = backend.generate(prompt, Sampling(max_tokens=1, temperature=gen.temperature, seed=gen.seed), schema)
        second = backend.generate(prompt, gen.sampling, schema)
    finally:
        backend.close()
    # first: e1 prompt tokens + 1 generated in s1; second: e2 (≈1) + c2 generated in s2. Two equations, two rates.
    e1, s1 = first.eval_tokens, first.seconds
    e2, c2, s2 = second.eval_tokens, max(second.completion_tokens, 1), second.seconds
    det = e1 * c2 - e2
    a = (s1 * c2 - s2) / det if det else 0.0
    b = (e1 * s2 - e2 * s1) / det if det else s2 / c2
    if a <= 0 or b <= 0:   # too fast to tell apart: split by the calls' own shares
        a, b = s1 / max(e1, 1), s2 / c2
    return Speed("probe", 2, 1 / a, 1 / b, 0.0, float(min(c2, gen.max_tokens)))


def as_dict(result: DryRun) -> dict[str, Any]:
    """The dry run as JSON-ready data."""
    return asdict(result)
