"""Token-budget truncation of a linearized evidence string (trunc_B, docs/design.md §3)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .linearize import linearize, parse
from .tokenizers import Tokenizer
from .units import Unit

__all__ = ["Window", "truncate", "truncate_many", "uncut", "select_oracle_path"]


@dataclass(frozen=True, slots=True)
class Window:
    """The evidence E_i exactly as the prompt contains it, and what it shows."""

    text: str
    tokens: int
    total_tokens: int
    truncated: bool
    visible: tuple[str, ...]

    @property
    def k_eff(self) -> int:
        """Number of units fully visible in the window."""
        return len(self.visible)


def uncut(text: str, total: int) -> Window:
    """The window of ``text`` (``total`` tokens) under a budget it fits: nothing cut, every unit visible."""
    return Window(text, total, total, False, tuple(parse(text)))


def truncate(text: str, budget: int, tokenizer: Tokenizer) -> Window:
    """Cut ``text`` at ``budget`` tokens; a unit whose line is cut is not visible."""
    return truncate_many(text, (budget,), tokenizer)[0]


def truncate_many(text: str, budgets: Sequence[int], tokenizer: Tokenizer) -> list[Window]:
    """One :class:`Window` per budget, encoding ``text`` only once (the sweep hot path)."""
    for b in budgets:
        if b < 0:
            raise ValueError(f"evidence budget must be >= 0, got {b}")
    tokens = tokenizer.encode(text)
    total = len(tokens)
    full: Window | None = None
    windows: list[Window] = []
    for b in budgets:
        if b >= total:
            if full is None:
                full = uncut(text, total)
            windows.append(full)
            continue
        cut = tokenizer.decode_prefix(tokens, b) if b else ""
        windows.append(Window(cut, b, total, True, tuple(parse(cut))))
    return windows


def select_oracle_path(paths: Sequence[Sequence[Unit]], tokenizer: Tokenizer) -> int:
    """Index of p*: fewest tokens under ``struct``, then fewest units, then smallest sorted uids."""
    if not paths:
        raise ValueError("select_oracle_path needs at least one gold path")

    def key(i: int) -> tuple[int, int, tuple[int, ...]]:
        p = paths[i]
        n_tokens = len(tokenizer.encode(linearize(p, "struct")))
        return (n_tokens, len(p), tuple(sorted(u.uid for u in p)))

    # min() keeps the first of equal keys, so full ties go to the earlier path.
    return min(range(len(paths)), key=key)
