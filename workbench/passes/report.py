"""The report of one resumable pass over pending jobs (run events, claims, SearChain samples, dedup pairs)."""

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


class CallTally:
    """The LLM calls a pass has made so far, copied into its report before each progress tick.

    A ``CachedLLM`` counts calls over its whole life; the report wants this pass's share,
    and wants it at every tick, not only in the final summary.
    """

    def __init__(self, llm):
        self.llm = llm
        self.calls0, self.hits0 = (llm.model_calls, llm.cache_hits) if llm is not None else (0, 0)

    def update(self, report: PassReport) -> PassReport:
        """Set ``report.model_calls`` and ``report.cache_hits``; returns the report."""
        if self.llm is not None:
            report.model_calls = self.llm.model_calls - self.calls0
            report.cache_hits = self.llm.cache_hits - self.hits0
        return report
