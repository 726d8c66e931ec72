"""Input problems reported as ``file:line: field: reason``.

Fields are JSONPath-like (``$.results[3].score``); ``$`` names the whole record.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_REPORTED = 20


@dataclass(frozen=True)
class Problem:
    """One bad-input finding, located to a file, a 1-based line and a field."""

    file: str
    line: int
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.reason}"


class InputRejected(Exception):
    """Raised when an input file is rejected; nothing has been written."""

    def __init__(self, problems: list[Problem], truncated: bool = False):
        self.problems = problems
        self.truncated = truncated
        lines = [str(p) for p in problems]
        if truncated:
            lines.append(f"(stopped after {len(problems)} problems)")
        super().__init__("\n".join(lines))


class ProblemLog:
    """Collects problems up to ``MAX_REPORTED``, then stops the reader."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.truncated = False

    def add(self, file: str, line: int, field: str, reason: str) -> None:
        if len(self.problems) >= MAX_REPORTED:
            self.truncated = True
            raise InputRejected(self.problems, truncated=True)
        self.problems.append(Problem(file, line, field, reason))

    def __bool__(self) -> bool:
        return bool(self.problems)

    def raise_if_any(self) -> None:
        if self.problems:
            raise InputRejected(self.problems, self.truncated)
