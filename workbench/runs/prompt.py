"""The RAG prompt: system text, evidence window, question and answer-format instruction."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SYSTEM = (
    "You answer questions using only the evidence given. Each evidence line is one fact "
    "tagged with an ID in square brackets."
)
DEFAULT_USER = (
    "Evidence:\n{evidence}\n"
    "Question: {question}\n"
    "Answer with the answer only. If there are several answers, separate them with |."
)


@dataclass(frozen=True)
class PromptTemplate:
    """A chat prompt with ``{evidence}`` and ``{question}`` slots in the user message."""

    system: str = DEFAULT_SYSTEM
    user: str = DEFAULT_USER

    def messages(self, evidence: str, question: str) -> list[dict[str, str]]:
        """The chat messages for one (sample, cell). ``evidence`` is the truncated window E_i."""
        # str.replace rather than str.format: evidence and questions may contain braces.
        user = self.user.replace("{evidence}", evidence.rstrip("\n")).replace("{question}", question)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def text(self, evidence: str, question: str) -> str:
        """The same prompt flattened to plain text, for completion-style generators."""
        return "\n\n".join(m["content"] for m in self.messages(evidence, question))
