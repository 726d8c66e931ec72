"""The report of one resumable pass over pending items (claims, SearChain samples, dedup pairs)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PassReport:
    """What one pass did; ``model_calls`` + ``cache_hits`` are the LLM calls it made or replayed."""

    run: str
    jobs: int = 0
    done: int = 0
    errors: int = 0
    model_calls: int = 0
    cache_hits: int = 0
    stopped: bool = False         # interrupted (Ctrl-C) before finishing
    fatal: str | None = None      # the model could not be used at all
    seconds: float = 0.0
    error_samples: list[str] = field(default_factory=list)
