"""The CLI reference (docs/cli.md) is generated from the parser and lists every verb and flag --help shows.

A changed flag, help text or verb without `python scripts/cli_reference.py` fails here.
"""

from __future__ import annotations

import re

import pytest

from workbench.cli import main
from workbench.cli.main import build_parser
from conftest import REPO, load_script

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _parsers(parser, path=("workbench",)):
    """Every (verb path, parser) of the tree, the top level included."""
    yield path, parser
    for name, _, sub in load_script("cli_reference").subcommands(parser):
        yield from _parsers(sub, path + (name,))


def test_the_reference_is_what_the_parser_generates_now():
    reference = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert reference == load_script("cli_reference").render(), "docs/cli.md is stale: run `python scripts/cli_reference.py`"


def test_every_verb_and_flag_of_every_help_is_in_the_reference():
    reference = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^#+ (workbench.*)$", reference, flags=re.M))
    seen_verbs = 0
    for path, parser in _parsers(build_parser()):
        assert " ".join(path) in headings, f"{' '.join(path)} has no section"
        section = reference.split(f"# {' '.join(path)}\n", 1)[1].split("\n#", 1)[0]
        for flag in set(FLAG.findall(parser.format_help())) - {"--help"}:
            assert f"`{flag}`" in section or flag in section, f"{' '.join(path)}: {flag} is not in its section"
        seen_verbs += 1
    assert seen_verbs > 40


def test_the_top_level_help_lists_no_verb_the_reference_lacks(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    listed = re.findall(r"^    (\w[\w-]*)(?:\s|$)", out, flags=re.M)
    assert "retrieve" in listed and "claims" in listed
    reference = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for verb in listed:
        assert f"## workbench {verb}\n" in reference.replace("### workbench", "## workbench"), verb


def test_an_epilogs_long_json_line_goes_on_between_its_fields():
    """As the epilogs write one: broken after a field's comma, never inside a value, the later lines one space in."""
    cli_reference = load_script("cli_reference")
    width = load_script("console_layout").PAGE_WIDTH
    line = ('{"kind": "relevance", "dataset": "hc", "sample_id": "filename:zh:…", "chunk_id": "…#2", '
            '"note": "a, b", "label": true, …}')
    assert len(line) > width
    broken = cli_reference.code_lines(line)
    assert len(broken) == 2 and all(len(part) <= width for part in broken)
    assert broken[1].startswith(' "') and " ".join(part.strip() for part in broken) == line
    assert any('"note": "a, b"' in part for part in broken)                               # no value cut
    assert all(part.count('"') % 2 == 0 for part in broken)
    assert cli_reference.code_lines('{"kind": "claim"}') == ['{"kind": "claim"}']
