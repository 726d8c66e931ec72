"""Write the CLI reference (docs/cli.md) from the argparse parser itself, so it cannot drift.

    .venv/bin/python scripts/cli_reference.py            # rewrite docs/cli.md
    .venv/bin/python scripts/cli_reference.py --check    # exit 1 if docs/cli.md is stale

Every verb, at every depth, gets its usage line, its help, its arguments (flags, metavar,
help, default, choices) and its epilog, in the order ``workbench --help`` lists them.
tests/test_cli_reference.py checks that the file is current and lists every flag.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from generated_doc import write_or_check
from workbench.cli.main import build_parser

OUT = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
# The usage is formatted at a fixed width, so the file does not depend on the terminal.
WIDTH = 100


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
        name += f" `{action.metavar or action.dest.upper()}`"
    parts = [(action.help or "").replace("%(default)s", str(action.default)).replace("%%", "%")]
    if action.choices and not isinstance(action.choices, dict):
        parts.append("choices: " + ", ".join(f"`{c}`" for c in action.choices))
    if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
        default = ",".join(map(str, action.default)) if isinstance(action.default, (list, tuple)) else action.default
        if f"default {default}" not in parts[0] and f"default: {default}" not in parts[0]:
            parts.append(f"default `{default}`")
    return f"- {name}: " + "; ".join(p for p in parts if p)


def _section(path: list[str], help_text: str, parser: argparse.ArgumentParser, depth: int) -> list[str]:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    usage = parser.format_usage().strip().removeprefix("usage: ")
    lines = [f"{'#' * min(depth, 6)} {' '.join(path)}", ""]
    if help_text:
        lines += [help_text[0].upper() + help_text[1:] + ("" if help_text.endswith(".") else "."), ""]
    lines += ["```", usage, "```", ""]
    arguments = [a for a in map(_argument, parser._actions) if a]
    if arguments:
        lines += arguments + [""]
    if parser.epilog:
        lines += ["```", parser.epilog.strip(), "```", ""]
    for name, sub_help, sub in subcommands(parser):
        lines += _section(path + [name], sub_help, sub, depth + 1)
    return lines


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
