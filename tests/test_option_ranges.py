"""Every number the command line takes has a range, from one table, checked while parsing.

The cases are generated from the parser itself (workbench.cli.ranges.RANGES, applied by
build_parser): a value just past either end of an option's range is refused naming the flag,
exit 2, before the database is opened, so nothing is written. A parser whose numeric option
has no row cannot be built. Once, ``dedup run --max-tokens 0`` (llama.cpp: generate until the
context is full), ``searchain run --n-ctx 0`` (the model's own window), ``questions generate
--n 0`` and ``claims run --long-clause -5`` were taken and written into runs.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from conftest import REPO, every_row
from dbtemplate import copy_of
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import build_parser, main
from workbench.cli import ranges
from workbench.cli.ranges import RANGES, UnrangedOption, apply_ranges, ranged_actions
from workbench.cli.types import count, integers

PARSER = build_parser()
RANGED = {f"{verb} {action.option_strings[0]}": action for verb, action in ranged_actions(PARSER)}


@pytest.fixture
def db(request, tmp_path) -> Path:
    """The tiny dataset imported as ``tiny`` and swept as run ``s`` (conftest's ``tiny_swept_db``, copied)."""
    return copy_of(request, "tiny_swept_db", tmp_path / "tiny-swept.db")


@pytest.fixture(scope="module")
def kg_db(tmp_path_factory) -> Path:
    """A database holding sample_data/dedup's KG, shared by the generated cases: none may write to it."""
    path = tmp_path_factory.mktemp("ranges") / "kg.db"
    assert main(["--db", str(path), "dedup", "import", str(REPO / "sample_data" / "dedup"), "--name", "kg"]) == 0
    return path


def refused_by_parser(argv: list[str], db: Path, capsys) -> str:
    """Run the CLI; check argparse exits 2 and the database keeps every row; return stderr's last line."""
    before = every_row(db)
    with pytest.raises(SystemExit) as stop:
        main(["--db", str(db), *argv])
    assert stop.value.code == 2
    assert every_row(db) == before
    return capsys.readouterr().err.strip().splitlines()[-1]


def _beyond(action: argparse.Action) -> tuple[str, str]:
    """A value just below the option's range and one just above it, as typed."""
    low, high = action.type.range
    if action.type.__name__ == "number":
        return f"{low - (abs(low) / 2 or 0.001):g}", f"{high + (abs(high) / 2 or 0.001):g}"
    return str(low - 1), str(high + 1)


def _expected(action: argparse.Action, value: str) -> str:
    low, high = action.type.range
    what = {"integer": f"an integer from {low:,} to {high:,}", "integers": f"comma-separated integers from {low:,} to "
            f"{high:,}", "number": f"a number from {low:g} to {high:g}"}[action.type.__name__]
    return f"expected {what}, got {value!r}"


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield action


def test_every_option_that_parses_a_number_has_a_range():
    """No option of the tree is left with a bare int or float, and a numeric default always has a ranged type."""
    for action in _actions(PARSER):
        assert action.type not in (int, float, integers), action.option_strings
        default = action.default
        if isinstance(default, (int, float)) and not isinstance(default, bool) and action.nargs != 0:
            assert getattr(action.type, "range", None) is not None, action.option_strings
    assert len(RANGED) > 100


@pytest.mark.parametrize("option", sorted(RANGED))
def test_a_value_past_either_end_of_an_options_range_is_refused_before_anything_is_written(option, kg_db, capsys):
    verb, flag = option.rsplit(" ", 1)
    action = RANGED[option]
    low, high = action.type.range
    below, above = _beyond(action)
    line = refused_by_parser([*verb.split(), f"{flag}={below}"], kg_db, capsys)
    assert line == f"workbench {verb}: error: argument {flag}: {_expected(action, below)}"
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{re.escape(_expected(action, above))}$"):
        action.type(above)
    assert action.type(str(low)) in (low, (low,)) and action.type(str(high)) in (high, (high,))   # the ends are taken


@pytest.mark.parametrize("argv, message", [
    (["dedup", "run", "kg", "--max-tokens", "0"], "argument --max-tokens: expected an integer from 1 to 1,048,576, got '0'"),
    (["dedup", "run", "kg", "--max-tokens", "-1"], "argument --max-tokens: expected an integer from 1 to 1,048,576, got '-1'"),
    (["searchain", "run", "tiny", "--n-ctx", "0"], "argument --n-ctx: expected an integer from 16 to 1,048,576, got '0'"),
    (["questions", "generate", "tiny", "--strategy", "llm", "--n", "0"],
     "argument --n: expected an integer from 1 to 1,000, got '0'"),
    (["claims", "run", "s", "--long-clause", "-5"], "argument --long-clause: expected an integer from 1 to 10,000,000, "
                                                    "got '-5'"),
])
def test_the_numbers_that_once_wrote_runs_are_refused_by_the_parser(argv, message, db, capsys):
    assert refused_by_parser(argv, db, capsys).endswith(f"error: {message}")


def test_the_message_shape_of_a_range_is_kept(db, capsys):
    line = refused_by_parser(["run", "tiny", "--k", "1", "--budget", "0"], db, capsys)
    assert line.endswith("error: argument --budget: expected comma-separated integers from 1 to 10,000,000, got '0'")


def _tiny_parser(**option) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench")
    verbs = parser.add_subparsers(dest="verb")
    verbs.add_parser("grow").add_argument("--size", **option)
    return parser


def test_a_numeric_option_without_a_row_cannot_be_built(monkeypatch):
    monkeypatch.setattr(ranges, "RANGES", {"--size": (1, 9)})
    apply_ranges(_tiny_parser(type=int))       # with its row it is built, and ranged
    monkeypatch.setattr(ranges, "RANGES", {})
    with pytest.raises(UnrangedOption, match=r"^grow --size: a numeric option without a row"):
        apply_ranges(_tiny_parser(type=int))
    with pytest.raises(UnrangedOption, match=r"^grow --size: a numeric default without a type"):
        apply_ranges(_tiny_parser(default=3))


def test_a_range_written_on_the_option_or_a_row_no_option_uses_cannot_be_built(monkeypatch):
    monkeypatch.setattr(ranges, "RANGES", {"--size": (1, 9)})
    with pytest.raises(UnrangedOption, match=r"^grow --size: its range belongs in workbench.cli.ranges.RANGES"):
        apply_ranges(_tiny_parser(type=count(1, 9)))
    monkeypatch.setattr(ranges, "RANGES", {"--size": (1, 9), "--gone": (0, 1)})
    with pytest.raises(UnrangedOption, match=r"rows of workbench.cli.ranges.RANGES that no option uses: --gone$"):
        apply_ranges(_tiny_parser(type=int))


def test_a_verbs_own_row_comes_before_the_options_row():
    assert RANGES["--max-tokens"][0] == 1 and RANGED["dedup run --max-tokens"].type.range[0] == 1
    assert RANGED["questions generate --max-tokens"].type.range[0] == 16
    assert RANGED["judge queue --seed"].type.range != RANGED["ledger --seed"].type.range


def test_an_option_shared_by_verbs_whose_rows_differ_cannot_be_built(monkeypatch):
    """A parent parser's option is one object in every verb that has it: it can hold one range only."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--size", type=int)
    parser = argparse.ArgumentParser(prog="workbench")
    verbs = parser.add_subparsers(dest="verb")
    verbs.add_parser("grow", parents=[parent])
    verbs.add_parser("shrink", parents=[parent])
    monkeypatch.setattr(ranges, "RANGES", {"grow --size": (1, 9), "shrink --size": (2, 9)})
    with pytest.raises(UnrangedOption, match=r"^shrink --size: shared with grow --size, whose range differs"):
        apply_ranges(parser)
    monkeypatch.setattr(ranges, "RANGES", {"--size": (1, 9)})
    apply_ranges(parser)
    assert parser.parse_args(["shrink", "--size", "9"]).size == 9
