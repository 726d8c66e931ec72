"""The generation settings of a run: its model, sampling and prompt template."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from workbench.models.base import Sampling
from workbench.models.registry import BACKENDS, BackendSpec
from workbench.runs.answers import ANSWER_FORMATS
from workbench.runs.prompt import DEFAULT_SYSTEM, DEFAULT_USER, PromptTemplate


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
    def backend_spec(self) -> BackendSpec:
        """The model this config runs, as :func:`~workbench.models.registry.make_backend` builds it."""
        return BackendSpec(backend=self.backend, model=self.model, base_url=self.base_url, n_ctx=self.n_ctx,
                           seed=self.seed)

    @property
    def sampling(self) -> Sampling:
        return Sampling(max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed)

    @property
    def template(self) -> PromptTemplate:
        return PromptTemplate(system=self.system, user=self.user, answer_format=self.answer_format)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
