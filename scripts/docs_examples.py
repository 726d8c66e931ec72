"""The console examples of the README and the docs, run on the demo data: checked, or rewritten.

A ```` ```console ```` block is an example: each ``$ workbench …`` line is a command, and the
lines under it are what it prints (stdout and stderr, as a terminal shows them). Every such
block is run, in a fresh copy of the *docs database* per page (the model-free steps of
``just demo``, built by :func:`build_db`), with the page's blocks in order on that copy, and
its output compared:

- exactly, by default: the figures on the page are the program's, on any machine;
- ``<!-- check: masked -->`` on the line before the block: every number (and hex digest) is
  masked and runs of spaces are one, so the labels, the row order and the words are checked
  but not figures that depend on the machine (cosines of an embedding model);
- a line ``…`` in the expected output stands for any number of lines (an elided part);
- ``<!-- check: masked; ignore REGEX -->``: lines matching REGEX (on either side) are left out
  of the comparison: a host name, a path, a git commit;
- ``<!-- check: needs VAR -->``: the block reads a file that cannot be committed (RAGChecker's
  own example, say); the command's last path argument is taken from ``$VAR`` and the block is
  skipped where ``VAR`` is unset.

A long command is continued on the next lines as a shell reads it: a ``$`` line ending in a backslash
goes on with the next line. Output wider than a page's code block (:data:`console_layout.PAGE_WIDTH`
columns) is laid out as a narrow terminal user would read it, every word and figure kept
(scripts/console_layout.py): a long sentence folded at spaces, a wide table shown in groups of
columns that each repeat its row labels. The page shows the layout of the output of the machine
that wrote it; the check compares both unfolded, so a figure of another width (a timing, a masked
number) that moves a line break is no difference, and an ignored line's folded continuation is
ignored with it.

Commands in other code blocks (plain, ``sh``) are not run: ``tests/test_docs_examples.py``
parses each ``workbench …`` line with the real argument parser instead.

    python scripts/docs_examples.py            # check every example (exit 1 on a difference)
    python scripts/docs_examples.py --write    # rewrite every output that has no elision
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from console_layout import ELISION, continuation_indent, layout, unfold

REPO = Path(__file__).resolve().parents[1]
# The pages whose examples are checked: the README and every docs page but the generated CLI
# reference and the design (which quotes the seeds, not the program).
SKIPPED_PAGES = {"cli.md", "design.md"}
WORKBENCH = Path(sys.executable).with_name("workbench")

# The docs database: what `just demo` makes without generating (so the same on every CPU), and the
# two retriever sweeps the comparison example reads.
SETUP = [
    "import sample_data/metaqa --name metaqa",
    "sweep metaqa --limit 3 --k 1,2,5,10,20 --budget 32,64,128 --format linear --oracle --shuffles 2 --name recorded",
    "predictions import sample_data/labels/demo-answers.jsonl recorded",
    "claims run recorded --decomposer rule --verifiers lexical,embedding",
    "judge labels import sample_data/labels/demo-claims.jsonl",
    "retrieve metaqa --k 20",
    "sweep metaqa --limit 20 --k 1,5,20 --budget 64,128 --format linear --retriever bm25-2hop --name imported",
    "sweep metaqa --limit 20 --k 1,5,20 --budget 64,128 --format linear --retriever bm25 --name builtin",
    "corpus import sample_data/howtocook --name howtocook",
    "questions generate howtocook",
    "retrieve howtocook --retriever bm25",
    "retrieve howtocook --retriever dense",
    "retrieve howtocook --retriever hybrid",
    "import --from ragchecker-meta sample_data/ragchecker-meta/human_labeled_data.json"
    " --baselines sample_data/ragchecker-meta/baseline_ragchecker.json --name prefs",
]

CONTINUED = " \\"
_DIRECTIVE = re.compile(r"<!--\s*check:\s*(.*?)\s*-->")
# Notices about what else the machine is doing (another process holding the model): never compared.
_TRANSIENT = re.compile(r"waiting for the model: ")
_PROGRESS = re.compile(r"^[\w-]+ \[[#-]+\] \d+/\d+ ")
# Durations and rates depend on the machine on every page: compared as a placeholder, like a masked figure.
_TIMING = re.compile(r"\b\d+(?:\.\d+)?(?:/s\b|\s?(?:ms|s)\b)|\b(?:\d+h)?(?:\d+m)?\d+s\b")
_NUMBER = re.compile(r"[0-9a-f]{12,}|[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass
class Command:
    """One ``$`` line of an example and the output the page shows for it."""

    line: int  # 1-based line of the ``$`` in the page
    text: str
    expected: list[str] = field(default_factory=list)
    continued: int = 0  # the lines after the ``$`` line that continue the command (each after a `` \``)

    @property
    def output_at(self) -> int:
        """The 0-based index, in the page's lines, of the first line of the output shown."""
        return self.line + self.continued


@dataclass
class Example:
    """A ``console`` block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    masked: bool = False
    needs: str | None = None
    ignore: re.Pattern[str] | None = None
    commands: list[Command] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


@dataclass
class Difference:
    """A command whose output is not what its page shows."""

    example: Example
    command: Command
    actual: list[str]

    def __str__(self) -> str:
        diff = difflib.unified_diff(self.command.expected, self.actual, "the page", "the program", lineterm="")
        return (f"{self.example.page.relative_to(REPO)}:{self.command.line}: `{self.command.text}` prints "
                "something else than the page shows:\n" + "\n".join(diff))


def pages(root: Path = REPO) -> list[Path]:
    """The README and the docs pages whose examples are checked."""
    docs = sorted(p for p in (root / "docs").glob("*.md") if p.name not in SKIPPED_PAGES)
    return [root / "README.md", *docs]


def examples(page: Path) -> list[Example]:
    """The ``console`` blocks of ``page``, with their directives."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            fence_line = i
            info = lines[i][3:].strip()
            i += 1
            body_start = i
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            if info == "console":
                found.append(_example(page, fence_line, lines[fence_line - 1] if fence_line else "",
                                      lines[body_start:i], body_start))
        i += 1
    return found


def _example(page: Path, fence: int, before: str, body: list[str], first: int) -> Example:
    example = Example(page, fence + 1)
    directives = [d.strip() for found in _DIRECTIVE.findall(before) for d in found.split(";")]
    for directive in directives:
        if directive.startswith("ignore "):
            example.ignore = re.compile(directive.removeprefix("ignore ").strip())
        elif directive == "masked":
            example.masked = True
        elif directive.startswith("needs "):
            example.needs = directive.split()[1]
        else:
            raise ValueError(f"{page}:{fence}: unknown check directive {directive!r}")
    for offset, text in enumerate(body):
        last = example.commands[-1] if example.commands else None
        if last is not None and not last.expected and last.text.endswith(CONTINUED):
            last.text = last.text[:-1] + text  # as the shell reads it: the backslash and the newline go
            last.continued += 1
        elif text.startswith("$ "):
            example.commands.append(Command(first + offset + 1, text[2:]))
        elif example.commands:
            example.commands[-1].expected.append(text)
        else:
            raise ValueError(f"{page}:{first + offset + 1}: a console block starts with its `$ ` command")
    return example


PROGRAMS = {"workbench": WORKBENCH, "python": Path(sys.executable)}


def argv_of(command: str) -> list[str]:
    """The words of a ``$`` line (a trailing ``# comment`` dropped), its program made this venv's."""
    words = shlex.split(command, comments=True)
    if not words or words[0] not in PROGRAMS:
        raise ValueError(f"`{command}`: an example runs `workbench …` or `python …`, nothing else")
    return [str(PROGRAMS[words[0]]), *words[1:]]


def _environment(db: Path) -> dict[str, str]:
    # A fixed terminal width, no colour and unbuffered streams: stdout and stderr interleave as in
    # a terminal, and the output does not depend on the terminal the check runs in.
    env = dict(os.environ, WORKBENCH_DB=str(db), COLUMNS="120", LINES="40", NO_COLOR="1", PYTHONUNBUFFERED="1",
               PYTHONWARNINGS="ignore")
    env.pop("FORCE_COLOR", None)
    return env


def scratch(workdir: Path) -> Path:
    """A working directory where the pages' relative paths resolve and their output files land.

    ``sample_data`` and ``docs`` are links to the repository's, so ``sample_data/metaqa`` and
    ``docs/examples/…`` read as on the page, and a ``--out`` file is written here, never in the checkout.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    for name in ("sample_data", "docs"):
        link = workdir / name
        if not link.exists():
            link.symlink_to(REPO / name, target_is_directory=True)
    return workdir


def _execute(argv: Sequence[str], db: Path, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``argv`` run on ``db`` in ``cwd``: its exit status, and stdout and stderr as one text."""
    return subprocess.run(list(argv), cwd=cwd, env=_environment(db), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def run(argv: Sequence[str], db: Path, cwd: Path) -> list[str]:
    """What ``ARGV`` prints on ``db``, run in ``cwd``, as lines."""
    done = _execute(argv, db, cwd, timeout=600)
    # A progress bar's lines depend on the machine's speed (how many redraws it made): not shown.
    return [line.rstrip() for line in done.stdout.rstrip("\n").splitlines() if not _PROGRESS.match(line)]


# Every setup command in one process, through the CLI's own entry point: a process per command spent a
# second each importing the workbench, and their output is not compared.
_SETUP_SCRIPT = """
import shlex, sys
from workbench.cli import main
for command in sys.argv[1:]:
    code = main(shlex.split(command))
    if code:
        print(f"`workbench {command}` failed ({code})")
        sys.exit(code)
"""


def build_db(db: Path) -> None:
    """Make the docs database at ``db``: the demo's sample data, recorded answers and labels, no generation."""
    done = _execute([sys.executable, "-c", _SETUP_SCRIPT, *SETUP], db, REPO, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"the docs database's setup failed:\n{done.stdout}")


def _masked(lines: Iterable[str]) -> list[str]:
    return [" ".join(_NUMBER.sub("#", line).split()) for line in lines]


def _untimed(lines: Iterable[str]) -> list[str]:
    return [_TIMING.sub("<time>", line) for line in lines if not _TRANSIENT.match(line)]


def matches(expected: Sequence[str], actual: Sequence[str], *, masked: bool = False) -> bool:
    """Whether ``actual`` is what ``expected`` shows: equal line by line, ``…`` lines standing for any lines.

    Both are compared unfolded (:func:`console_layout.unfold`): where a timing or a masked figure of
    another width moved a line break, the text is still the same.
    """
    expected, actual = _untimed(unfold(expected)), _untimed(unfold(actual))
    if masked:
        expected, actual = _masked(expected), _masked(actual)
    segments, current = [], []
    for line in expected:
        if line.strip() == ELISION:
            segments.append(current)
            current = []
        else:
            current.append(line)
    segments.append(current)
    if len(segments) == 1:
        return list(expected) == list(actual)
    head, *middle, tail = segments
    if list(actual[:len(head)]) != head or (tail and list(actual[len(actual) - len(tail):]) != tail):
        return False
    if len(head) + len(tail) > len(actual):
        return False
    at, end = len(head), len(actual) - len(tail)
    for segment in middle:
        found = next((i for i in range(at, end - len(segment) + 1) if list(actual[i:i + len(segment)]) == segment),
                     None)
        if found is None:
            return False
        at = found + len(segment)
    return True


def _argv(example: Example, command: Command) -> list[str]:
    argv = argv_of(command.text)
    if example.needs:
        # The file the block reads comes from the environment: a command's last .json(l) argument.
        files = [i for i, word in enumerate(argv) if word.endswith((".json", ".jsonl"))]
        if files:
            argv[files[-1]] = os.environ[example.needs]
    return argv


def _failed(lines: Sequence[str]) -> bool:
    return any(line.startswith(("error:", "Traceback")) for line in lines)


def kept(example: Example, lines: Sequence[str]) -> list[str]:
    """``lines`` without those the example ignores, nor the lines an ignored line was folded onto."""
    if example.ignore is None:
        return list(lines)
    shown, continued = [], None
    for line in lines:
        if example.ignore.search(line):
            continued = continuation_indent(line)
        elif not (continued is not None and line.strip() and len(line) - len(line.lstrip(" ")) == continued):
            shown.append(line)
            continued = None
    return shown


def check_page(page: Path, db: Path, workdir: Path) -> tuple[list[Difference], list[Example], dict]:
    """Run ``page``'s examples on a copy of ``db``: the differences, the examples skipped, and each output."""
    cwd = scratch(workdir / page.stem)
    copy = cwd / "workbench.db"
    shutil.copyfile(db, copy)
    differences, skipped, outputs = [], [], {}
    for example in examples(page):
        if example.needs and not os.environ.get(example.needs):
            skipped.append(example)
            continue
        # An opt-in example writes to a copy of its own, so the page's other examples print the same
        # whether it ran or not.
        target = copy
        if example.needs:
            target = cwd / f"{example.needs.lower()}.db"
            shutil.copyfile(db, target)
        for command in example.commands:
            actual = layout(run(_argv(example, command), target, cwd))  # as the page shows it
            outputs[(example.line, command.line)] = actual
            if not matches(kept(example, command.expected), kept(example, actual), masked=example.masked):
                differences.append(Difference(example, command, actual))
    return differences, skipped, outputs


def rewrite(page: Path, outputs: dict) -> int:
    """Write each command's new output into ``page`` (not where the page elides): the lines changed."""
    lines = page.read_text(encoding="utf-8").splitlines()
    changed = 0
    for example in reversed(examples(page)):
        for command in reversed(example.commands):
            actual = outputs.get((example.line, command.line))
            if actual is None or ELISION in (line.strip() for line in command.expected):
                continue
            if _failed(actual) and not _failed(command.expected):
                continue  # a command that now fails is a difference to read, not an output to keep
            if not matches(kept(example, command.expected), kept(example, actual), masked=example.masked):
                lines[command.output_at:command.output_at + len(command.expected)] = actual
                changed += 1
    page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true",
                        help="rewrite the outputs that differ (not those with an elided part)")
    parser.add_argument("--db", type=Path, help="a docs database built before (default: build one in a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="docs-examples-") as tmp:
        workdir = Path(tmp)
        db = args.db
        if db is None:
            db = workdir / "docs.db"
            print("building the docs database (the demo's model-free steps) …", flush=True)
            build_db(db)
        failed = 0
        for page in pages():
            differences, skipped, outputs = check_page(page, db, workdir)
            for example in skipped:
                print(f"{example.where}: skipped, ${example.needs} is not set")
            if args.write:
                changed = rewrite(page, outputs)
                if changed:
                    print(f"{page.relative_to(REPO)}: rewrote {changed} output(s)")
                differences = [d for d in differences if any(line.strip() == ELISION for line in d.command.expected)]
            for difference in differences:
                print(difference, file=sys.stderr)
            failed += len(differences)
        print(f"{failed} example(s) differ" if failed else "every example prints what its page shows")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
