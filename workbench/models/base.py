"""The one interface every generation backend implements.

A backend turns chat messages (or, for a base model, plain text) into a rendered prompt
(its exact text is part of the cache key) and generates a completion for it. The
executor owns caching, ordering and persistence; a backend only generates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence


class ModelError(RuntimeError):
    """The model cannot be used at all (missing or corrupt file, unreachable server)."""


class PromptError(ValueError):
    """This one prompt cannot be generated (e.g. longer than the context window)."""


@dataclass(frozen=True)
class Sampling:
    """Generation parameters. Greedy (temperature 0) by default, always seeded."""

    max_tokens: int = 48
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 40
    repeat_penalty: float = 1.0
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "top_k": self.top_k, "repeat_penalty": self.repeat_penalty, "seed": self.seed}


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: the exact text the model sees (or, over HTTP, the exact messages)."""

    messages: tuple[tuple[str, str], ...]     # (role, content) pairs; one ("user", text) for a completion prompt
    text: str                                  # the chat template applied; for HTTP, canonical JSON of messages
    tokens: int | None = None                  # prompt length in the model's tokens, when known
    # A plain-completion prompt (no chat template, BOS added when tokenized): how a base
    # model is prompted. Its cache key uses COMPLETION_TEMPLATE in place of a chat template.
    completion: bool = False


# What a completion prompt puts in the cache key's "template" slot: never a GGUF's chat
# template, and not "" (what an HTTP backend, whose server applies its own, puts there).
COMPLETION_TEMPLATE = "<plain completion: no chat template>"


@dataclass
class Generation:
    """One completion and what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    eval_tokens: int            # prompt tokens actually evaluated (after KV prefix reuse); = prompt_tokens over HTTP
    seconds: float
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Choice:
    """Which of some options a model would write next (:meth:`LlamaCppBackend.choose`), from one forward pass."""

    index: int                      # the chosen option
    scores: tuple[float, ...]       # each option's first-token logit (or log-probability: the same up to a constant)
    prompt_tokens: int = 0
    eval_tokens: int = 0            # what was evaluated: the prompt less the prefix the KV cache held
    seconds: float = 0.0

    @property
    def probabilities(self) -> tuple[float, ...]:
        """Each option's probability among the options: a softmax of the scores (an option no token
        begins, score −inf, gets 0)."""
        top = max(self.scores)
        if top == float("-inf"):
            return tuple(1.0 if i == self.index else 0.0 for i in range(len(self.scores)))
        weights = [math.exp(s - top) for s in self.scores]
        total = sum(weights)
        return tuple(w / total for w in weights)


class Backend(Protocol):
    """What the executor needs from a generator."""

    name: str                   # "llamacpp" | "openai"
    model_id: str               # sha256 of the GGUF file, or "endpoint-url#model-name" over HTTP
    chat_template: str          # the template text (GGUF metadata), or "" when the server applies its own
    concurrency: int            # how many generate() calls may run at once

    def render(self, messages: Sequence[dict[str, str]]) -> Prompt:
        """Apply the chat template. Raises :class:`PromptError` if it cannot fit the context."""
        ...

    def render_text(self, text: str) -> Prompt:
        """A plain-completion prompt of ``text`` (no chat template), for base models.

        Raises :class:`ModelError` when the backend cannot complete plain text.
        """
        ...

    def generate(self, prompt: Prompt, sampling: Sampling, json_schema: dict | None = None,
                 grammar: str | None = None) -> Generation:
        """Generate one completion, constrained by ``json_schema`` or a GBNF ``grammar`` when given."""
        ...

    def close(self) -> None:
        """Release the model or connections."""
        ...
