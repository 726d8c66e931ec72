"""Evidence units (KG triples and text chunks) and their one-line rendering.

Every unit renders to exactly one line, prefixed with its label, so that
``parse()`` can recover which units a (possibly truncated) window shows.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Unit", "normalize_text", "triple_key", "render_line", "KINDS"]

KINDS = ("triple", "chunk")
_LABEL_PREFIX = {"triple": "T", "chunk": "C"}


@dataclass(frozen=True, slots=True)
class Unit:
    """One piece of evidence: a KG triple or a text chunk, with a dataset-local id."""

    uid: int
    kind: str
    head: str | None = None
    relation: str | None = None
    tail: str | None = None
    doc_id: str | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        # A bad kind or a negative uid would render a label parse() cannot read back.
        if self.kind not in _LABEL_PREFIX:
            raise ValueError(f"Unit.kind must be 'triple' or 'chunk', got {self.kind!r}")
        if not isinstance(self.uid, int) or isinstance(self.uid, bool) or self.uid < 0:
            raise ValueError(f"Unit.uid must be a non-negative int, got {self.uid!r}")

    @property
    def label(self) -> str:
        """The in-prompt id: ``T17`` for triple 17, ``C17`` for chunk 17."""
        return f"{_LABEL_PREFIX[self.kind]}{self.uid}"


def _collapse_ws(s: str) -> str:
    # str.split() with no argument splits on every Unicode whitespace run,
    # including \r, \x85, \u2028 and \u2029, so no line break can survive.
    return " ".join(s.split())


def normalize_text(s: str) -> str:
    """Unicode NFKC, then collapse every whitespace run to one space and strip."""
    return _collapse_ws(unicodedata.normalize("NFKC", s))


def triple_key(h: str, r: str, t: str) -> str:
    """Comparison key for a triple: each field normalized, joined by a tab."""
    return "\t".join((normalize_text(h), normalize_text(r), normalize_text(t)))


@lru_cache(maxsize=1 << 16)
def render_line(unit: Unit) -> str:
    """Render a unit as one line without the trailing newline.

    Triple: ``[T17] Kismet | directed_by | William Dieterle``.
    Chunk: ``[C3] <text>``.

    Every whitespace run in a field (newlines included) becomes one space and
    fields are stripped, so a field ``"William\\nDieterle"`` renders as
    ``William Dieterle`` and the one-unit-per-line rule always holds. No NFKC
    here: the prompt shows the stored text (importers normalize triples). Cached: a sweep
    renders each unit once per cell it appears in.
    """
    if unit.kind == "triple":
        return (
            f"[{unit.label}] {_collapse_ws(unit.head or '')} | "
            f"{_collapse_ws(unit.relation or '')} | {_collapse_ws(unit.tail or '')}"
        )
    return f"[{unit.label}] {_collapse_ws(unit.text or '')}"
