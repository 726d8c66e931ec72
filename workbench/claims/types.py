"""The shared vocabulary of claim verification: claims, verdicts and the LLM they may use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Claim:
    """One atomic claim of an answer.

    ``start``/``end`` is the claim's source span in the answer (``answer[start:end]``),
    the clause it was derived from. A rule claim rebuilt from a shared subject or a shared
    list prefix keeps the span of the clause or list item it came from; an LLM claim that
    cannot be located in the answer has no span (``None``).
    """

    text: str
    start: int | None
    end: int | None
    source: str = "rule"        # "rule" | "llm" | "item" (an item of a list answer)


#: The three-way labels of a check (RAGChecker's Entailment, Neutral, Contradiction); only E supports.
LABELS = ("E", "N", "C")
LABEL_NAMES = {"E": "Entailment", "N": "Neutral", "C": "Contradiction"}


@dataclass(frozen=True)
class Verdict:
    """One verifier's judgement of one (claim, premise) pair: a context unit, the reference or the response.

    ``label`` is three-way (:data:`LABELS`). A two-way verifier says E or N: it cannot tell a
    contradiction from a claim the premise does not address.
    """

    verifier: str               # "lexical" | "embedding" | "llm_judge" | "nli" | "vote" | ...
    supported: bool
    score: float                # in [0, 1]; higher means better support
    label: str = ""             # E | N | C; left empty, E when supported, else N

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", "E" if self.supported else "N")
        elif self.label not in LABELS or (self.label == "E") != self.supported:
            raise ValueError(f"Verdict label {self.label!r} with supported={self.supported}")


class LLM(Protocol):
    """What the decomposer and the judge need: ``workbench.models.cached.CachedLLM``."""

    def ask(self, messages: Sequence[dict[str, str]], *, max_tokens: int, schema: dict | None = None,
            temperature: float = 0.0):
        """Return an object with ``.text`` (the completion), generated or replayed from the cache."""
        ...
