"""The range of every number the command line takes: one table, given to the parser as it is built.

An option declares only what kind of number it takes: ``type=int`` (one integer),
``type=integers`` (comma-separated, ``--k 1,5,20``) or ``type=float`` (a finite number).
:func:`apply_ranges`, run by ``build_parser``, replaces that type with the one that checks the
range :data:`RANGES` gives the option (:func:`~workbench.cli.types.count`,
:func:`~workbench.cli.types.counts`, :func:`~workbench.cli.types.number`), so a value out of
range is refused while parsing: one line naming the flag, exit 2, nothing opened or written.

A parser cannot be built (:class:`UnrangedOption`) with a numeric option that has no row, with
a range written on the option itself instead of here, with a numeric default and no type (its
value would arrive as text), or with a row no option uses: the next option added cannot skip
the table, and the table holds no row for an option that is gone.

A range is what the code can use, not what looks plausible: a window of 0 tokens means "the
model's own" to llama.cpp and ``max_tokens`` ≤ 0 means "until the context is full", so both
start at their smallest working value. The TUI's forms check their fields through the core's
configs (``validate``), which hold the same lower bounds.
"""

from __future__ import annotations

import argparse
from typing import Callable, Iterator

from workbench.cli.types import (INT64_MAX, MAX_BUDGET, MAX_CHARS, MAX_GPU_LAYERS, MAX_K, MAX_RESAMPLES, MAX_SEED,
                                 MAX_SHUFFLES, MAX_THREADS, MAX_TIMEOUT, MAX_TOKENS, count, counts, integers, number)

# ``--option``: its range in every verb that takes it; ``VERB --option``: that verb's own, looked up first.
RANGES: dict[str, tuple[float, float]] = {
    "--alpha": (0.0001, 0.5),           # a chance of error: 0 would need infinitely many samples
    "--baseline-k": (0, MAX_K),         # 0: no plain-RAG baseline
    "--budget": (1, MAX_BUDGET),
    "--cases": (0, 1_000),
    "--category-depth": (1, 1_000),
    "--chunk-max-chars": (1, MAX_CHARS),
    "--claim-run": (1, INT64_MAX),      # a claim run's id: they start at 1
    "--concurrency": (1, MAX_THREADS),
    "--embedding-threshold": (0, 1),    # a cosine threshold
    "--fuzzy-threshold": (0, 1),
    "--height": (8, 500),
    "--hops": (1, 1_000),
    "--k": (1, MAX_K),
    "--lexical-threshold": (0, 1),
    "--limit": (1, INT64_MAX),
    "--long-clause": (1, MAX_CHARS),    # characters; a claim shorter than 4 is dropped anyway
    "corpus import --max-chars": (20, MAX_CHARS),
    "retrieval judge --max-chars": (1, MAX_CHARS),
    "--max-relations": (0, MAX_K),      # 0: the judge sees names only
    "--max-rounds": (0, 1_000),         # 0: the first chain is final
    "--max-text-chunks": (0, MAX_K),
    "--max-tokens": (1, MAX_TOKENS),    # ≤ 0 would generate until the context is full
    "questions generate --max-tokens": (16, MAX_TOKENS),   # a JSON list of questions
    "searchain run --max-tokens": (16, MAX_TOKENS),        # a chain of queries (SearChainConfig)
    "--misses": (0, 1_000_000),
    "--n": (1, 1_000),
    "--n-ctx": (16, MAX_TOKENS),        # 0 would be the model's own window, not the run's
    "--n-gpu-layers": (-1, MAX_GPU_LAYERS),   # -1: all
    "--overlap": (0, MAX_CHARS),
    "--precision": (0.001, 0.5),
    "--reject-below": (0, 1),
    "--replays": (1, 1_000_000),
    "--resamples": (1, MAX_RESAMPLES),
    "--seed": (0, MAX_SEED),            # llama.cpp's seeds are 32-bit
    "judge queue --seed": (0, INT64_MAX),   # seeds Python's shuffle only
    "--show-samples": (0, 1_000_000),
    "--shuffles": (1, MAX_SHUFFLES),
    "--temperature": (0, 100),
    "--threads": (1, MAX_THREADS),
    "--threshold": (0, 1),
    "--timeout": (0.1, MAX_TIMEOUT),
    "--tolerance": (0, 0.5),
    "--width": (30, 1_000),
}

# What an option declares, and the type that checks the range.
_KINDS: dict[Callable, Callable[[float, float], Callable]] = {int: count, integers: counts, float: number}


class UnrangedOption(TypeError):
    """A numeric option the table does not range as this module says: a bug, found as the parser is built."""


def apply_ranges(parser: argparse.ArgumentParser) -> None:
    """Give every numeric option of ``parser``'s tree its range from :data:`RANGES` (see the module).

    An action shared by several verbs (a parent parser's) gets one range, which must be the
    range of every verb that has it.
    """
    given: dict[int, tuple[str, tuple[float, float]]] = {}
    used: set[str] = set()
    for verb, action in _actions(parser):
        where = f"{verb} {action.option_strings[0] if action.option_strings else action.dest}".strip()
        kind = _declared(action)
        if getattr(kind, "range", None) is not None:
            raise UnrangedOption(f"{where}: its range belongs in workbench.cli.ranges.RANGES, not on the option")
        if kind not in _KINDS:
            if kind is None and _numeric_default(action):
                raise UnrangedOption(f"{where}: a numeric default without a type (int, integers or float)")
            continue
        key = _row(verb, action)
        if key is None:
            raise UnrangedOption(f"{where}: a numeric option without a row in workbench.cli.ranges.RANGES")
        used.add(key)
        if id(action) in given:
            if given[id(action)][1] != RANGES[key]:
                raise UnrangedOption(f"{where}: shared with {given[id(action)][0]}, whose range differs; "
                                     "declare it per verb")
            continue
        given[id(action)] = (where, RANGES[key])
        action.type = _KINDS[kind](*RANGES[key])
        action.type.declared = kind
    unused = sorted(set(RANGES) - used)
    if unused:
        raise UnrangedOption(f"rows of workbench.cli.ranges.RANGES that no option uses: {', '.join(unused)}")


def ranged_actions(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    """``(verb, action)`` of every option of the built tree that takes a number, once per verb that has it."""
    for verb, action in _actions(parser):
        if getattr(action.type, "range", None) is not None:
            yield verb, action


def _actions(parser: argparse.ArgumentParser, verb: str = "") -> Iterator[tuple[str, argparse.Action]]:
    """``(verb, action)`` of ``parser`` and every sub-verb's parser; ``verb`` is ``claims run`` (``""`` at the top)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{verb} {name}".strip())
        else:
            yield verb, action


def _declared(action: argparse.Action) -> Callable | None:
    """What the option declared, also once ranged (an action shared by several verbs is met again)."""
    return getattr(action.type, "declared", action.type)


def _row(verb: str, action: argparse.Action) -> str | None:
    for flag in action.option_strings or [action.dest]:    # a positional is its dest: "claims show answer"
        for key in (f"{verb} {flag}", flag):
            if key in RANGES:
                return key
    return None


def _numeric_default(action: argparse.Action) -> bool:
    default = action.default
    return (isinstance(action, argparse._StoreAction) and isinstance(default, (int, float))
            and not isinstance(default, bool))
