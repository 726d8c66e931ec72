"""Write the CLI reference (docs/cli.md) from the argparse parser itself, so it cannot drift.

    .venv/bin/python scripts/cli_reference.py            # rewrite docs/cli.md
    .venv/bin/python scripts/cli_reference.py --check    # exit 1 if docs/cli.md is stale

Every verb, at every depth, gets its usage line, its help, its arguments (flags, metavar,
help, default, choices) and its epilog, in the order ``workbench --help`` lists them.
tests/test_cli_reference.py checks that the file is current and lists every flag.

An epilog's prose becomes paragraphs the page wraps, its aligned "term   definition" lines a list;
only its commands and data (examples, JSON lines) stay in code blocks, where a line longer than the
page's width is broken as a terminal user would write it (:func:`code_lines`): no block holds prose
or scrolls sideways for it.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

from console_layout import PAGE_WIDTH
from generated_doc import write_or_check
from workbench.cli.main import build_parser

OUT = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
# The usage is formatted at a fixed width, so the file does not depend on the terminal, as --help shows it
# in an 80-column terminal. The epilogs' code lines are broken only where wider than a page's code block.
WIDTH = 80
# A command of an example and what it does, at least three spaces apart: "workbench ledger   the ledger".
_DESCRIBED = re.compile(r"^(\s*\S.*?\S)( {3,})(\S.*)$")
# A term and its definition, at least three spaces apart: "accuracy, κ      Cohen's kappa …".
_DEFINED = re.compile(r"^(\S.*?\S|\S) {3,}(\S.*)$")
COMMANDS = ("workbench", "duckdb", "python")


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, help, parser)`` of the parser's verbs, in the order ``--help`` lists them."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            out += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return out


def _argument(action: argparse.Action) -> str | None:
    if action.help == argparse.SUPPRESS or isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
        return None
    name = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.option_strings and action.nargs != 0:
        metavar = action.metavar or action.dest.upper()
        name += f" `{' '.join(metavar) if isinstance(metavar, tuple) else metavar}`"
    parts = [(action.help or "").replace("%(default)s", str(action.default)).replace("%%", "%")]
    if action.choices and not isinstance(action.choices, dict):
        parts.append("choices: " + ", ".join(f"`{c}`" for c in action.choices))
    if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
        default = ",".join(map(str, action.default)) if isinstance(action.default, (list, tuple)) else action.default
        default = f"{default:g}" if isinstance(default, float) else default  # 120.0 reads as the help's "120"
        if f"default {default}" not in parts[0] and f"default: {default}" not in parts[0]:
            parts.append(f"default `{default}`")
    return f"- {name}: " + "; ".join(p for p in parts if p)


def _section(path: list[str], help_text: str, parser: argparse.ArgumentParser, depth: int) -> list[str]:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    # Without argparse's "usage: " prefix, and its later lines moved left by as much: they stay aligned.
    first, *rest = parser.format_usage().strip().splitlines()
    usage = "\n".join([first.removeprefix("usage: "), *(line.removeprefix(" " * len("usage: ")) for line in rest)])
    lines = [f"{'#' * min(depth, 6)} {' '.join(path)}", ""]
    if help_text:
        help_text = help_text.replace("%%", "%")  # argparse's escape, not the text
        lines += [help_text[0].upper() + help_text[1:] + ("" if help_text.endswith(".") else "."), ""]
    lines += ["```", usage, "```", ""]
    # The arguments of argparse's own groups first, in the parser's order; then each group of the verb's
    # own, under its title and what its description says of it.
    groups = [g for g in parser._action_groups if g.title or g.description]
    named = [g for g in groups if g is not parser._positionals and g is not parser._optionals]
    grouped = {id(action) for group in named for action in group._group_actions}
    arguments = [a for a in map(_argument, (x for x in parser._actions if id(x) not in grouped)) if a]
    if arguments:
        lines += arguments + [""]
    for group in named:
        said = " ".join((group.description or "").split())
        lines += [f"**{group.title}**" + (f": {said}" if said else ""), ""]
        lines += [a for a in map(_argument, group._group_actions) if a] + [""]
    if parser.epilog:
        lines += epilog(parser.epilog)
    for name, sub_help, sub in subcommands(parser):
        lines += _section(path + [name], sub_help, sub, depth + 1)
    return lines


def code_lines(line: str) -> list[str]:
    """A line of an epilog's code block, broken into lines of at most :data:`console_layout.PAGE_WIDTH` where it can be.

    A described command ("command   what it does") puts its description on the next line, indented under
    the command; a long command is continued with a backslash, as a shell reads it; a long JSON object goes
    on after a comma between its fields, one space further in (as the epilogs write one). Other lines stay
    whole.
    """
    if len(line) <= PAGE_WIDTH:
        return [line]
    indent = line[:len(line) - len(line.lstrip())]
    described = _DESCRIBED.match(line)
    if described and described.group(1).lstrip().startswith(COMMANDS):
        return code_lines(described.group(1)) + [f"{indent}    {described.group(3)}"]
    if line.lstrip().startswith(COMMANDS):
        head, *rest = textwrap.wrap(line.strip(), PAGE_WIDTH - len(indent) - 6, break_long_words=False,
                                    break_on_hyphens=False)
        return [f"{indent}{head} \\"] + [f"{indent}    {part}" + (" \\" if i < len(rest) - 1 else "")
                                          for i, part in enumerate(rest)]
    if line.lstrip().startswith(("{", "[")):
        return _json_lines(line.lstrip(), indent)
    return [line]


# Between two fields of a JSON object: after a comma, before the next key (or the "…" of fields left out).
_FIELD = re.compile(r"(?<=,) (?=[\"…])")


def _json_lines(text: str, indent: str) -> list[str]:
    """A JSON object on the fewest lines of at most :data:`console_layout.PAGE_WIDTH`, of even widths,
    broken between its fields, the later lines one space further in."""
    fields = _FIELD.split(text)

    def broken(limit: int) -> list[str]:
        lines = [indent + fields[0]]
        for field in fields[1:]:
            if len(lines[-1]) + 1 + len(field) > limit:
                lines.append(f"{indent} {field}")
            else:
                lines[-1] += " " + field
        return lines

    widest = broken(PAGE_WIDTH)
    return next((lines for limit in range(len(indent) + len(text) // len(widest), PAGE_WIDTH)
                 if len(lines := broken(limit)) <= len(widest)), widest)


def _runs(lines: list[str]) -> list[tuple[bool, list[str]]]:
    """``lines`` cut into runs of unindented and of indented lines, ``(indented, lines)``; a blank line ends a run."""
    runs: list[tuple[bool, list[str]]] = []
    for line in lines:
        if not line.strip():
            runs.append((False, []))
            continue
        indented = line[:1].isspace()
        if runs and runs[-1][1] and (runs[-1][0] == indented or (runs[-1][0] and line[:1].isspace())):
            runs[-1][1].append(line)
        else:
            runs.append((indented, [line]))
    return [(indented, run) for indented, run in runs if run]


def _is_code(lines: list[str]) -> bool:
    """Whether indented lines are for a terminal (commands, JSON), not words to read."""
    return any(line.lstrip().startswith((*COMMANDS, "{", "[")) for line in lines)


def _markdown(lines: list[str]) -> list[str]:
    """Epilog lines (their least indented at column 0) as Markdown: paragraphs, definition lists, code."""
    out: list[str] = []
    for indented, run in _runs(lines):
        if not indented:
            out += [" ".join(line.strip() for line in run), ""]
            continue
        body = textwrap.dedent("\n".join(run)).splitlines()
        if _is_code(body):
            out += ["```", *[part for line in body for part in code_lines(line)], "```", ""]
        elif all(_DEFINED.match(line) or line[:1].isspace() for line in body) and _DEFINED.match(body[0]):
            items: list[str] = []
            for line in body:  # "term   what it is", a deeper line continuing the definition above
                term = _DEFINED.match(line)
                if term:
                    items.append(f"- `{term.group(1)}`: {term.group(2)}")
                else:
                    items[-1] += " " + line.strip()
            out += items + [""]
        else:
            out += _markdown(body)
    return out


def epilog(text: str) -> list[str]:
    """An epilog as Markdown: its prose as paragraphs, its aligned terms as lists, its examples as code."""
    return _markdown(text.strip("\n").splitlines())


def render() -> str:
    """The whole reference, as Markdown."""
    parser = build_parser()
    head = ["# CLI reference", "",
            "Generated from the argparse parser by `scripts/cli_reference.py`; do not edit by hand. "
            "`workbench VERB --help` prints the same.", ""]
    return "\n".join(head + _section(["workbench"], parser.description.split("\n")[0] if parser.description else "",
                                      parser, 2)).rstrip() + "\n"


def main(argv: list[str]) -> int:
    return write_or_check(OUT, render(), "cli_reference.py", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
