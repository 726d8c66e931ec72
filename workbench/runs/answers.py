"""Answer formats: what the model is asked to output, the grammar that enforces it, and parsing.

- ``text``: free text; the prediction is the raw output.
- ``json``: ``{"answers": [...]}`` under a JSON-schema grammar; the prediction is the list.
- ``grounded``: ``{"answers": [...], "citations": ["T12", ...]}``; the answer scores 0 when
  a citation is missing or names a unit not visible in the window V_i (docs/design.md §4).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Sequence

from workbench.models.structured import string_list_schema, strings_after

ANSWER_FORMATS = ("json", "grounded", "text")

INSTRUCTIONS = {
    "text": "Answer with the answer only. If there are several answers, separate them with |.",
    "json": 'Reply with JSON {"answers": [...]} listing every answer, each as short as possible.',
    "grounded": ('Reply with JSON {"answers": [...], "citations": [...]}: the answers, each as short as '
                 'possible, and the IDs (like T12) of the evidence lines that support them.'),
}

_LABEL = r"^[TC](0|[1-9][0-9]*)$"


SCHEMAS = {
    "json": string_list_schema("answers"),
    "grounded": {"type": "object",
                 "properties": {"answers": {"type": "array", "items": {"type": "string"}},
                                "citations": {"type": "array", "items": {"type": "string", "pattern": _LABEL}}},
                 "required": ["answers", "citations"]},
}


@dataclass(frozen=True)
class ParsedAnswer:
    """What the scorer sees (``prediction``) and, in grounded mode, what the model cited."""

    prediction: str
    citations: tuple[str, ...] | None = None


def schema_for(answer_format: str) -> dict | None:
    """The JSON schema that constrains generation for ``answer_format`` (None for text)."""
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"--answer-format: {answer_format!r} is not one of {', '.join(ANSWER_FORMATS)}")
    return SCHEMAS.get(answer_format)


def parse_output(output: str, answer_format: str) -> ParsedAnswer:
    """Turn raw model output into a prediction (a JSON list for json/grounded) and citations.

    Output cut off by ``max_tokens`` is not valid JSON; the complete quoted strings of the
    answers list are still recovered, so a truncated list scores on what it did say.
    """
    if answer_format == "text":
        return ParsedAnswer(output.strip())
    try:
        obj = json.loads(output)
        answers = [a for a in obj.get("answers", []) if isinstance(a, str)]
        citations = [c for c in obj.get("citations", []) if isinstance(c, str)]
    except (json.JSONDecodeError, AttributeError):
        answers = strings_after(output, "answers")
        citations = strings_after(output, "citations")
    prediction = json.dumps(answers, ensure_ascii=False)
    return ParsedAnswer(prediction, tuple(citations) if answer_format == "grounded" else None)


def score_answer(parsed: ParsedAnswer, answers: Sequence[str], aliases, visible: Sequence[str],
                 scorer: Callable[..., float]) -> float:
    """Score a parsed answer; in grounded mode a missing or invisible citation scores 0."""
    if parsed.citations is not None:
        if not parsed.citations or not set(parsed.citations) <= set(visible):
            return 0.0
    return scorer(parsed.prediction, answers, aliases)
