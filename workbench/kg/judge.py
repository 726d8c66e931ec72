"""The coreference judge: are two entities the same real-world object? (docs/design.md §8)

The LLM sees both entities' graph relations and, in ``graph+text`` mode, the source text
chunks where they appear, and answers under a JSON-schema grammar
``{"is_coreferent": bool, "confidence": number, "rationale": string}``. The embedding
mode needs no LLM: the cosine of the two contexts' embeddings, thresholded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

MODES = ("graph", "graph+text", "embedding")

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"is_coreferent": {"type": "boolean"}, "confidence": {"type": "number"},
                   "rationale": {"type": "string"}},
    "required": ["is_coreferent", "confidence", "rationale"],
}

_SYSTEM = (
    "You decide whether two entities of a knowledge graph about films are the SAME real-world object "
    "(one person, one film, one year), written two ways.\n"
    "For each entity you get its graph relations and, when available, text excerpts where it appears. "
    "Use both.\n"
    "Rules:\n"
    "- Name variants (initials, abbreviations, case, spelling, transliteration, word order) of one "
    "object are the same.\n"
    "- The same name for different objects is NOT the same: a film and a person, or two people whose "
    "films, years and roles differ.\n"
    "- Relations that agree (same films, same roles, same years) support the same object; ones that "
    "contradict it (a person who directs vs a film that is directed) rule it out.\n"
    "- If unsure, answer false.\n"
    # No literal example object: SmolLM2 copies one verbatim ("false, 0.0") whatever the pair.
    'Reply with a JSON object with three fields: "is_coreferent" (a boolean), "confidence" (how sure you '
    'are, from 0 to 1) and "rationale" (why, in a few words).'
)


def judge_messages(name_a: str, context_a: str, name_b: str, context_b: str) -> list[dict[str, str]]:
    """The chat for one pair: both entities with the contexts exactly as stored for provenance."""
    user = (f"Entity 1: \"{name_a}\"\n{context_a}\n\n"
            f"Entity 2: \"{name_b}\"\n{context_b}\n\n"
            "Are Entity 1 and Entity 2 the same real-world object?")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class Verdict:
    is_coreferent: bool
    confidence: float
    rationale: str


_BOOL = re.compile(r'"is_coreferent"\s*:\s*(true|false)', re.IGNORECASE)
_CONF = re.compile(r'"confidence"\s*:\s*(-?\d+(?:\.\d+)?)')
_WHY = re.compile(r'"rationale"\s*:\s*"((?:[^"\\]|\\.)*)')


def parse_verdict(text: str) -> Verdict | None:
    """The verdict in the model's output; fields cut off by max_tokens are recovered one by one.

    A missing confidence counts as 0.5 (the model said yes or no without a degree); a
    missing ``is_coreferent`` means no verdict (None).
    """
    try:
        obj = json.loads(text)
        if isinstance(obj, dict) and isinstance(obj.get("is_coreferent"), bool):
            conf = obj.get("confidence")
            conf = float(conf) if isinstance(conf, (int, float)) and not isinstance(conf, bool) else 0.5
            return Verdict(obj["is_coreferent"], _clip(conf), str(obj.get("rationale", "")))
    except (json.JSONDecodeError, ValueError):
        pass
    m = _BOOL.search(text)
    if not m:
        return None
    c = _CONF.search(text)
    w = _WHY.search(text)
    return Verdict(m.group(1).lower() == "true", _clip(float(c.group(1))) if c else 0.5,
                   w.group(1) if w else "")


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x)) if np.isfinite(x) else 0.0


class EmbeddingJudge:
    """Embedding-only mode: cosine of the two entities' contexts (name + relations), thresholded.

    ``embedder`` is a :class:`~workbench.models.embedder.CachedEmbedder` (vectors kept in the store).
    """

    def __init__(self, embedder, threshold: float = 0.9):
        self.embedder, self.threshold = embedder, threshold

    def _vector(self, text: str) -> np.ndarray:
        return self.embedder.vectors([text])[0].astype(np.float64)

    def close(self) -> None:
        """Free the embedding model."""
        self.embedder.close()

    def judge(self, text_a: str, text_b: str) -> Verdict:
        cos = float(self._vector(text_a) @ self._vector(text_b))
        return Verdict(cos >= self.threshold, _clip(cos), f"cosine {cos:.3f} vs threshold {self.threshold}")
