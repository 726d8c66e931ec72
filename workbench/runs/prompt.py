"""The RAG prompt: system text, evidence window, question and answer-format instruction.

The user message template has ``{evidence}``, ``{question}`` and optionally
``{instruction}`` (the answer-format instruction) slots. A template file overrides the
defaults: JSON ``{"system": ..., "user": ...}``, or plain text used as the user template.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from workbench.data.infile import check_input, read_input
from workbench.data.jsonl import RecordRefused, decode_record
from workbench.runs.answers import INSTRUCTIONS

DEFAULT_SYSTEM = (
    "You answer questions using only the evidence given. Each evidence line is one fact "
    "tagged with an ID in square brackets."
)
DEFAULT_USER = "Evidence:\n{evidence}\nQuestion: {question}\n{instruction}"
ANSWER_CUE = "\n\nAnswer:"
# A template is a few hundred bytes; a file past this is not one (and is not read whole).
MAX_TEMPLATE_BYTES = 1 << 20


@dataclass(frozen=True)
class PromptTemplate:
    """A chat prompt template and the answer format whose instruction it carries."""

    system: str = DEFAULT_SYSTEM
    user: str = DEFAULT_USER
    answer_format: str = "text"

    def messages(self, evidence: str, question: str) -> list[dict[str, str]]:
        """The chat messages for one (sample, cell). ``evidence`` is the truncated window E_i."""
        # str.replace rather than str.format: evidence and questions may contain braces.
        user = (self.user.replace("{instruction}", INSTRUCTIONS[self.answer_format])
                .replace("{evidence}", evidence.rstrip("\n")).replace("{question}", question))
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def text(self, evidence: str, question: str) -> str:
        """The same prompt flattened to plain text, for completion-style generators."""
        return "\n\n".join(m["content"] for m in self.messages(evidence, question))

    def completion(self, evidence: str, question: str) -> str:
        """The plain-completion prompt of a base model: :meth:`text` and an answer cue.

        A base model continues text rather than replies to a turn, so the prompt ends where
        the answer starts.
        """
        return self.text(evidence, question) + ANSWER_CUE


def load_template(path: str | Path, answer_format: str = "text") -> PromptTemplate:
    """Read a template file; the user template must contain ``{evidence}`` and ``{question}``."""
    path = check_input(path, hint="expected a prompt template: JSON {system, user} or text")
    try:
        raw = read_input(path, limit=MAX_TEMPLATE_BYTES, what="prompt template").decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the prompt template ({exc})") from None
    system, user = DEFAULT_SYSTEM, raw
    if path.suffix.lower() == ".json":
        try:
            obj = decode_record(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: $: malformed JSON: {exc.msg}") from None
        except RecordRefused as exc:
            raise ValueError(f"{path}:1: {exc.field}: {exc.reason}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("user"), str):
            raise ValueError(f"{path}:1: $.user: missing (expected {{\"system\": str, \"user\": str}})")
        if not isinstance(obj.get("system", system), str):
            raise ValueError(f"{path}:1: $.system: expected a string")
        system, user = obj.get("system", system), obj["user"]
    for slot in ("{evidence}", "{question}"):
        if slot not in user:
            raise ValueError(f"{path}: the user template has no {slot} slot")
    return PromptTemplate(system=system, user=user, answer_format=answer_format)
