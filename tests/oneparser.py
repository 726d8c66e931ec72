"""One argparse tree for a module's in-process CLI calls, proved unchanged by them.

``workbench.cli.main`` builds its parser on every call: about 60 verbs and 400 options, 0.15 to
0.3 s of CPU, more than most verbs take on a small database. A process runs ``main`` once; a test
module runs it hundreds of times (each hypothesis example of the import properties, each option of
the range table), and rebuilding the same tree is most of its time. Inside :func:`shared_parser`,
``main`` parses with one tree built once. Parsing reads the tree and writes only the namespace it
returns, so every call sees what a fresh tree would give it; the block checks that on the way
out: the shared tree, after every call the module made, has the shape of a freshly built one
(every parser's defaults, every action's strings, destination, default, type and range, choices,
help). The CLI's own process, run by the subprocess tests, builds its tree as always.
"""

from __future__ import annotations

import argparse
import importlib
from contextlib import contextmanager
from typing import Iterator

import pytest

# `workbench.cli.main` as an attribute is the function (workbench/cli/__init__.py re-exports it).
CLI_MAIN = importlib.import_module("workbench.cli.main")


def _plain(value) -> object:
    """A value as comparable across two builds: a parser by its prog, a function or type by name and range."""
    if isinstance(value, argparse.ArgumentParser):
        return ("parser", value.prog)
    if isinstance(value, dict):
        return sorted((str(k), _plain(v)) for k, v in value.items())
    if callable(value):
        return ("callable", getattr(value, "__qualname__", type(value).__qualname__), getattr(value, "range", None))
    return repr(value)


def tree_shape(parser: argparse.ArgumentParser) -> list:
    """What parsing and its messages depend on, parser by parser and action by action."""
    shape: list = []

    def walk(node: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        shape.append((path, node.prog, node.usage, node.description, _plain(node._defaults)))
        for action in node._actions:
            choices = action.choices
            shape.append((path, type(action).__name__, tuple(action.option_strings), action.dest, action.nargs,
                          _plain(action.default), _plain(action.const), _plain(action.type), action.required,
                          action.help, action.metavar,
                          sorted(choices) if isinstance(choices, dict) else _plain(choices)))
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))

    walk(parser, ())
    return shape


@contextmanager
def shared_parser() -> Iterator[argparse.ArgumentParser]:
    """Within the block ``main`` parses with one tree; on leaving, that tree must equal a fresh one."""
    build = CLI_MAIN.build_parser
    parser = build()
    patch = pytest.MonkeyPatch()
    patch.setattr(CLI_MAIN, "build_parser", lambda: parser)
    try:
        yield parser
    finally:
        patch.undo()
    assert tree_shape(parser) == tree_shape(build()), "a CLI call changed the parser it was given"


@pytest.fixture(autouse=True, scope="module")
def one_parser() -> Iterator[argparse.ArgumentParser]:
    """Imported by a test module: its in-process CLI calls parse with one tree, checked at the module's end."""
    with shared_parser() as parser:
        yield parser
