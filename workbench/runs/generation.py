"""The generation settings of a run: its model, sampling, prompt template and prompt style."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from workbench.models.base import Backend, ModelError, Prompt, Sampling
from workbench.models.registry import BACKENDS, BackendSpec
from workbench.runs.answers import ANSWER_FORMATS
from workbench.runs.prompt import DEFAULT_SYSTEM, DEFAULT_USER, PromptTemplate

# How the prompt reaches the model: "chat" through the GGUF's chat template (an instruct
# model), "completion" as plain text with an answer cue (a base model). "auto" is a request,
# resolved when the run is planned (:meth:`GenerationConfig.resolved`); it is never stored.
PROMPT_STYLES = ("auto", "chat", "completion")


@dataclass(frozen=True)
class GenerationConfig:
    """What determines a run's outputs; stored in the run config (a change is refused).

    Execution-only settings (threads, GPU layers, concurrency) are not part of it: they
    change speed, not answers, and may differ between a run and its resume.
    """

    backend: str = "llamacpp"
    model: str = "default"          # GGUF path, "default" or "gemma3-270m" (llamacpp); the served model (openai)
    base_url: str | None = None     # openai only, e.g. http://127.0.0.1:8080/v1
    n_ctx: int = 2048
    max_tokens: int = 48
    temperature: float = 0.0
    seed: int = 0
    answer_format: str = "json"
    system: str = DEFAULT_SYSTEM
    user: str = DEFAULT_USER
    prompt_style: str = "auto"      # see PROMPT_STYLES; a stored config without it is "chat"

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
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"--prompt-style: {self.prompt_style!r} is not one of {', '.join(PROMPT_STYLES)}")
        if self.backend == "openai" and self.prompt_style == "completion":
            raise ValueError("--prompt-style: completion needs --backend llamacpp (an OpenAI-compatible server "
                             "is sent chat messages and applies its own template)")

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> GenerationConfig:
        """The config of a planned run (its ``generation`` dict): no ``prompt_style`` means chat.

        Runs planned before prompt styles existed were all chat runs, and a chat run's stored
        config still leaves the field out (:meth:`as_dict`), so its hash and name never changed.
        """
        return cls(**{"prompt_style": "chat", **stored})

    def resolved(self) -> GenerationConfig:
        """This config with ``auto`` decided: ``completion`` for a base model, else ``chat``.

        A known model decides by its name (``gemma3-270m`` is a base model); a GGUF path by
        its metadata (no ``tokenizer.chat_template``: a base model). A file that cannot be
        read yet resolves to chat, as before prompt styles: the run is planned and the
        executor records the missing or corrupt file on its jobs.
        """
        if self.prompt_style != "auto":
            return self
        return replace(self, prompt_style=_auto_style(self.backend, self.model))

    @property
    def model_ref(self) -> str:
        """The model as every model option names it: a GGUF path or known name, or ``<base-url>#<model>``."""
        if self.backend == "openai":
            return f"{(self.base_url or '').strip().rstrip('/')}#{self.model}"
        return self.model

    @property
    def backend_spec(self) -> BackendSpec:
        """The model this config runs, as :func:`~workbench.models.registry.make_backend` builds it."""
        return BackendSpec(backend=self.backend, model=self.model, base_url=self.base_url, n_ctx=self.n_ctx,
                           seed=self.seed, chat=self.prompt_style != "completion")

    @property
    def sampling(self) -> Sampling:
        return Sampling(max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed)

    @property
    def template(self) -> PromptTemplate:
        return PromptTemplate(system=self.system, user=self.user, answer_format=self.answer_format)

    def render(self, backend: Backend, evidence: str, question: str) -> Prompt:
        """The prompt of one (sample, cell) as ``backend`` evaluates it: the one place chat vs completion is decided.

        ``chat`` applies the model's chat template to the system and user messages;
        ``completion`` gives the same text, flattened, with an answer cue and no template.
        """
        if self.prompt_style == "completion":
            return backend.render_text(self.template.completion(evidence, question))
        return backend.render(self.template.messages(evidence, question))

    def as_dict(self) -> dict[str, Any]:
        """The config as stored with the run; ``prompt_style`` is left out when it is ``chat``.

        Leaving it out keeps a chat run's stored config, hash and default name exactly what
        they were before prompt styles existed, so re-running its command finds it again.
        """
        config = asdict(self)
        if config["prompt_style"] == "chat":
            del config["prompt_style"]
        return config


def resolve_generation(generation: Mapping[str, Any]) -> dict[str, Any]:
    """A ``generation`` dict to plan (from :meth:`GenerationConfig.as_dict`) with ``auto`` resolved, as stored.

    Read as stored (:meth:`GenerationConfig.from_stored`): ``as_dict`` leaves a chosen ``chat`` out, and read
    as a new config that absence was ``auto``, which made a base model's chat run a completion run.
    """
    return GenerationConfig.from_stored(generation).resolved().as_dict()


def stored_generations(config: Mapping[str, Any]) -> dict[str | None, dict[str, Any]]:
    """A run's stored generation settings by the model label its cells name: ``{None: settings}`` for a run of
    one model, ``{label: settings}`` for a run of several, ``{}`` for a sweep planned without a model."""
    several = config.get("generations")
    if several:
        return dict(several)
    return {None: config["generation"]} if config.get("generation") else {}


def _auto_style(backend: str, model: str) -> str:
    """What ``auto`` means for ``model`` (see :meth:`GenerationConfig.resolved`)."""
    if backend != "llamacpp":
        return "chat"   # a server is sent chat messages; it applies its own template
    from workbench.models.locate import known_prompt_style, resolve_model

    known = known_prompt_style(model)
    if known is not None:
        return known
    from workbench.models.llamacpp import gguf_chat_template

    try:
        return "chat" if gguf_chat_template(resolve_model(model)) else "completion"
    except ModelError:
        return "chat"
