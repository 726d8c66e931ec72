"""Argument types of the CLI: a bad value is refused while parsing (exit 2), before the
database is opened, so nothing is written.

argparse reports an ``ArgumentTypeError`` as one line naming the flag
(``argument --budget: ...``); any other exception from a type would lose the message. The
range each numeric option gets is :mod:`workbench.cli.ranges`'s table, not the option's.
"""

from __future__ import annotations

import argparse
from typing import Callable

from workbench.data.fields import check_name
from workbench.errors import BadInput
from workbench.paths import user_path

INT64_MAX = 2**63 - 1      # SQLite's INTEGER: a larger number cannot be stored
MAX_K = 1_000_000
MAX_BUDGET = 10_000_000    # evidence tokens; far beyond any model's context
MAX_SHUFFLES = 1_000       # every shuffle is a cell per budget
MAX_SEED = 2**32 - 1       # llama.cpp seeds are 32-bit
MAX_RESAMPLES = 1_000_000
MAX_THREADS = 1_024
MAX_GPU_LAYERS = 100_000    # more than any model has; llama.cpp takes -1 for all
MAX_TOKENS = 1_048_576     # context window and generated tokens
MAX_CHARS = 10_000_000     # characters of a chunk
MAX_TIMEOUT = 86400.0      # seconds: a day


def chosen_name(text: str) -> str:
    """A user-chosen name (dataset, run, KG, retriever): printable and not blank."""
    try:
        return check_name(text)
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def name_or_path(name: str | None, path: str, what: str, *, stem: bool = False) -> str:
    """``--name``, else the directory's name (the file's stem with ``stem``), checked as ``--name`` is.

    A name taken from a path obeys the same rules as one typed: a directory named with a
    newline or an escape sequence is refused, with the way out (``--name``).
    """
    if name is not None:
        return name
    p = user_path(path)
    derived = p.stem if stem else p.resolve().name
    source = "file name" if stem else "directory name"
    try:
        return check_name(derived, f"the {source}, taken as the {what} name,")
    except BadInput as exc:
        raise BadInput(f"{exc}; choose a name with --name") from None


def comma_separated(text: str) -> tuple[str, ...]:
    """Comma-separated words, blanks dropped (``score,linear``)."""
    return tuple(x.strip() for x in text.split(",") if x.strip())


def integers(text: str) -> tuple[int, ...]:
    """Comma-separated integers (``1,5,20``): how an option declares a list of numbers.

    ``build_parser`` replaces it with :func:`counts` of the option's range (:mod:`workbench.cli.ranges`).
    """
    return _integers(text, -INT64_MAX - 1, INT64_MAX)


def count(low: int, high: int) -> Callable[[str], int]:
    """One integer in ``[low, high]`` (its ``range``)."""

    def parse(text: str) -> int:
        value = _integer(text)
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low:,} to {high:,}, got {_shown(text)}")
        return value

    parse.__name__, parse.range = "integer", (low, high)
    return parse


def counts(low: int, high: int) -> Callable[[str], tuple[int, ...]]:
    """Comma-separated integers, each in ``[low, high]`` (its ``range``)."""

    def parse(text: str) -> tuple[int, ...]:
        return _integers(text, low, high)

    parse.__name__, parse.range = "integers", (low, high)
    return parse


def number(low: float, high: float) -> Callable[[str], float]:
    """One finite number in ``[low, high]``, its ``range`` (``nan`` and ``inf`` are refused: no comparison holds them)."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip()) if len(text) <= 40 else None
        except ValueError:
            value = None
        if value is None or not low <= value <= high:   # False for nan as well
            raise argparse.ArgumentTypeError(f"expected a number from {low:g} to {high:g}, got {_shown(text)}")
        return value

    parse.__name__, parse.range = "number", (low, high)
    return parse


def _integers(text: str, low: int, high: int) -> tuple[int, ...]:
    values = []
    for part in (p for p in text.split(",") if p.strip()):
        value = _integer(part)
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers from {low:,} to {high:,}, "
                                             f"got {_shown(part.strip())}"
                                             + (f" in {_shown(text)}" if part.strip() != text.strip() else ""))
        values.append(value)
    return tuple(values)


def _integer(text: str) -> int | None:
    # int() takes any length of digits (and "1_000"); a float such as 1e23 is not an integer.
    text = text.strip()
    if not text or len(text) > 40:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _shown(text: str) -> str:
    """The value as typed, escaped and cut short: it is echoed to a terminal."""
    return repr(text if len(text) <= 40 else text[:40] + "…")
