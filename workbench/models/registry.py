"""Generation settings of a run and the backend they build."""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable

from workbench.models.base import Backend, Sampling
from workbench.runs.answers import ANSWER_FORMATS
from workbench.runs.prompt import DEFAULT_SYSTEM, DEFAULT_USER, PromptTemplate

BACKENDS = ("llamacpp", "openai")


@dataclass(frozen=True)
class GenerationConfig:
    """What determines a run's outputs; stored in the run config (a change is refused).

    Execution-only settings (threads, GPU layers, concurrency) are not part of it: they
    change speed, not answers, and may differ between a run and its resume.
    """

    backend: str = "llamacpp"
    model: str = "default"          # GGUF path or "default" (llamacpp); the served model name (openai)
    base_url: str | None = None     # openai only, e.g. http://127.0.0.1:8080/v1
    n_ctx: int = 2048
    max_tokens: int = 48
    temperature: float = 0.0
    seed: int = 0
    answer_format: str = "json"
    system: str = DEFAULT_SYSTEM
    user: str = DEFAULT_USER

    def validate(self) -> None:
        """Reject settings that cannot work, naming the option."""
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend: {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.backend == "openai" and not self.base_url:
            raise ValueError("--base-url: required with --backend openai (e.g. http://127.0.0.1:8080/v1)")
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(f"--answer-format: {self.answer_format!r} is not one of {', '.join(ANSWER_FORMATS)}")
        if self.max_tokens < 1 or self.n_ctx < 16:
            raise ValueError("--max-tokens must be ≥ 1 and --n-ctx ≥ 16")

    @property
    def sampling(self) -> Sampling:
        return Sampling(max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed)

    @property
    def template(self) -> PromptTemplate:
        return PromptTemplate(system=self.system, user=self.user, answer_format=self.answer_format)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ExecOptions:
    """How to run (not what): may change between a run and its resume.

    ``on_wait`` and ``stop`` concern the machine-wide model slot of a local model
    (:mod:`workbench.models.slot`): ``on_wait(message)`` hears once that another process
    holds it, ``stop`` set ends that wait.
    """

    n_threads: int | None = None
    n_gpu_layers: int = 0
    concurrency: int = 4
    timeout: float = 120.0
    on_wait: Callable[[str], None] | None = None
    stop: threading.Event | None = None


def make_backend(gen: GenerationConfig, opts: ExecOptions, store) -> Backend:
    """Build the backend; raises ``ModelError`` with a clear message if the model is unusable.

    A llama.cpp backend first takes the machine-wide model slot, waiting while another
    process holds it. A server (``openai``) does not: it schedules its own requests.
    """
    if gen.backend == "openai":
        from workbench.models.openai_http import OpenAIBackend

        backend = OpenAIBackend(gen.base_url, gen.model, concurrency=opts.concurrency, timeout=opts.timeout)
        backend.check()
        return backend
    from workbench.models.llamacpp import LlamaCppBackend
    from workbench.models.locate import resolve_model
    from workbench.store.queries import cached_file_sha256

    path = resolve_model(gen.model)
    return LlamaCppBackend(path, cached_file_sha256(store, path), n_ctx=gen.n_ctx,
                           n_threads=opts.n_threads or os.cpu_count(), n_gpu_layers=opts.n_gpu_layers, seed=gen.seed,
                           on_wait=opts.on_wait, stop=opts.stop)
