"""Every bootstrap's default resamples and seed are :mod:`workbench.metrics.stats`'s ``RESAMPLES`` and ``SEED``.

One figure is one statistic wherever it is read: the annotators' correlation once read [65.70, 81.79] on one
screen and [66.50, 81.76] on another, drawn from 1,000 and 2,000 resamples. A default written as a number
(``resamples: int = 2000``) is a second owner, free to drift from the first: the source holds none.
"""

from __future__ import annotations

import ast

from conftest import REPO

SOURCES = sorted((REPO / "workbench").rglob("*.py"))


def _literal_defaults(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each ``resamples`` default given as a number, and of each ``seed`` one beside a
    ``resamples`` (a bootstrap's seed, not a model's): in a signature or a dataclass's fields. A field
    ``resamples = 0`` records what a bootstrap used (none yet): not a default of one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        elif isinstance(node, ast.ClassDef):
            pairs = [(field.target, field.value) for field in node.body
                     if isinstance(field, ast.AnnAssign) and field.value is not None]
        else:
            continue
        named = {getattr(target, "arg", getattr(target, "id", None)): default for target, default in pairs}
        resamples = named.get("resamples")
        if resamples is None or isinstance(resamples, ast.Constant) and resamples.value == 0:
            continue    # no bootstrap here, or a record of one (0 until it has run)
        found += [(named[name].lineno, name) for name in ("resamples", "seed")
                  if isinstance(named.get(name), ast.Constant)]
    return found


def test_no_bootstrap_default_is_written_as_a_number():
    literal = [f"{path.relative_to(REPO)}:{line} {name}" for path in SOURCES
               for line, name in _literal_defaults(ast.parse(path.read_text(encoding="utf-8")))]
    assert not literal, "defaults to take from workbench.metrics.stats (RESAMPLES, SEED):\n" + "\n".join(literal)


def test_the_check_finds_a_literal_default_in_a_signature_and_in_a_dataclass():
    source = ("def f(x, *, resamples: int = 2000, seed: int = 0): ...\n"
              "def g(*, resamples: int = RESAMPLES, seed: int = SEED): ...\n"
              "def model(*, seed: int = 0): ...\n"
              "class Options:\n    resamples: int = 1000\n    seed: int = SEED\n"
              "class Report:\n    resamples: int = 0\n    seed: int = 0\n")
    assert sorted(_literal_defaults(ast.parse(source))) == [(1, "resamples"), (1, "seed"), (5, "resamples")]
