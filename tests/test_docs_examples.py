"""The README and the docs show what the program prints: their examples are run and compared.

Every ``console`` block of README.md and docs/*.md runs on the docs database (the demo's
sample data, recorded answers and human labels: what `just demo` makes without generating)
and must print what the page shows (`scripts/docs_examples.py` holds the rules; `python
scripts/docs_examples.py --write` regenerates the outputs). Every `workbench …` line of the
other code blocks must parse with the real argument parser, and every relative link of the
README and the pages must lead to a file.
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from types import SimpleNamespace

import pytest

from conftest import REPO, load_script
from test_demo_labels import DEMO_CLAIMS, run_demo_claims
from workbench.cli.main import build_parser
from workbench.tables import fmt_estimate, table


docs_examples = load_script("docs_examples")
console_layout = load_script("console_layout")
PAGES = docs_examples.pages()


@pytest.fixture(scope="module")
def docs_db(tmp_path_factory, model_cache, shared_outputs):
    """The docs database, built once for the module by the script's own setup commands.

    Built before any test's own fixtures run, so the session's model cache and a model slot of its
    own are set here too: the embedding model is converted in the session's cache, never in the
    user's data dir, and the build never waits for a model another process of the machine holds.
    The demo's claim run finds its vectors in the session's pool (scenario ``demo-claims``, shared
    with tests/test_demo_labels.py); only vectors are taken from it, no generation: the pages' dry
    run tells a database that has generations from one that has none.
    """
    folder = tmp_path_factory.mktemp("docs")
    db = folder / "docs.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKBENCH_MODEL_CACHE", str(model_cache))
        patch.setenv("WORKBENCH_MODEL_SLOT", str(folder / "model.lock"))
        shared_outputs.scenario(DEMO_CLAIMS, run_demo_claims)
        shared_outputs.seed(db)
        con = sqlite3.connect(db)
        try:
            with con:
                con.execute("DELETE FROM generations")
        finally:
            con.close()
        docs_examples.build_db(db)
    return db


def test_the_pages_have_console_examples():
    counted = {page.name: len(docs_examples.examples(page)) for page in PAGES}
    assert counted["README.md"] >= 1
    assert sum(counted.values()) >= 15, counted


# The pages whose examples run a real model: sweeps.md's dry run measures the speed with a probe (one prompt
# generated twice). The others read the docs database only (tests/modeluse.py fails one that ran a model unmarked).
RUN_A_MODEL = {"sweeps.md"}


@pytest.mark.parametrize("page", [pytest.param(page, marks=pytest.mark.real_model) if page.name in RUN_A_MODEL
                                  else page for page in PAGES], ids=lambda p: p.name)
def test_every_console_example_prints_what_its_page_shows(page, docs_db, tmp_path):
    differences, _skipped, _outputs = docs_examples.check_page(page, docs_db, tmp_path)
    assert not differences, ("\n\n".join(map(str, differences))
                             + "\n\nRun `python scripts/docs_examples.py --write` if the program is right.")


def test_a_changed_label_in_a_report_fails_the_check(docs_db, tmp_path):
    """What the check is for: a report whose label changed no longer matches its page."""
    page = REPO / "docs" / "ledger.md"
    text = page.read_text(encoding="utf-8")
    assert "Reasoning, dissipation and leakage" in text
    edited = tmp_path / "docs" / "ledger.md"
    edited.parent.mkdir()
    edited.write_text(text.replace("Reasoning, dissipation and leakage", "Reasoning, dissipation, leakage"),
                      encoding="utf-8")
    differences, _, _ = docs_examples.check_page(edited, docs_db, tmp_path / "run")
    assert [d.command.text for d in differences] == ["workbench ledger recorded"]


def test_masking_keeps_labels_and_layout_but_not_figures():
    shown = ["judge       n  accuracy", "lexical    40     0.875"]
    assert docs_examples.matches(shown, ["judge       n  accuracy", "lexical    40     0.800"], masked=True)
    assert not docs_examples.matches(shown, ["judge       n  agreement", "lexical    40     0.875"], masked=True)
    assert not docs_examples.matches(shown, ["judge       n  accuracy", "lexical    40     0.800"])


def test_an_elision_stands_for_any_lines_but_keeps_the_order():
    actual = ["head", "a", "b", "middle", "c", "tail"]
    assert docs_examples.matches(["head", "…", "middle", "…", "tail"], actual)
    assert docs_examples.matches(["head", "…"], actual)
    assert not docs_examples.matches(["head", "…", "tail", "…", "middle"], actual)
    assert not docs_examples.matches(["head", "…", "missing", "…"], actual)


def test_durations_and_rates_are_not_compared():
    assert docs_examples.matches(["run x: 3 of 3 jobs done in 0.7s, 1.4/s"], ["run x: 3 of 3 jobs done in 12.1s, 0.2/s"])
    assert not docs_examples.matches(["run x: 3 of 3 jobs done in 0.7s"], ["run x: 2 of 3 jobs done in 0.7s"])


def test_a_long_command_goes_on_after_a_backslash_as_the_shell_reads_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```console\n$ workbench sweep metaqa --limit 3 \\\n    --name mine   # a comment\nrun mine: planned\n"
                    "```\n", encoding="utf-8")
    [example] = docs_examples.examples(page)
    [command] = example.commands
    assert docs_examples.argv_of(command.text)[1:] == ["sweep", "metaqa", "--limit", "3", "--name", "mine"]
    assert command.expected == ["run mine: planned"]
    assert page.read_text(encoding="utf-8").splitlines()[command.output_at] == "run mine: planned"


SENTENCE = ("B − A with a 95% paired bootstrap CI (2,000 resamples, seed 0; each sample weighs the same in both runs). "
            "p: exact McNemar for 0/1 terms, the paired bootstrap otherwise.")


def test_a_long_sentence_of_output_is_folded_and_a_table_row_is_not():
    folded = console_layout.fold(SENTENCE)
    fewest = -(-len(SENTENCE) // console_layout.WRAP)     # as few lines as WRAP columns allow, of even width
    assert len(folded) == fewest and all(len(line) <= console_layout.WRAP + 2 for line in folded)
    assert max(map(len, folded)) - min(map(len, folded)) < 20
    assert folded[1].startswith("  ") and " ".join(line.strip() for line in folded) == SENTENCE   # no word lost
    row = "k1-b64-linear    20  0.800  0.700  -0.100 [-0.250,+0.000]  0.500    1.000" * 2
    assert console_layout.fold(row) == [row]                       # columns, not words: folded as a table
    assert console_layout.fold(SENTENCE[:95]) == [SENTENCE[:95]]   # short enough to read whole


def test_a_labelled_value_goes_on_under_the_value():
    digest = "02c245df39371988ef5c55d1a96d9349d4cffac2009ff4271fa73ca09f695309"
    line = f"  dataset     metaqa (import sha256 {digest})"
    assert console_layout.fold(line) == ["  dataset     metaqa (import sha256", f"              {digest})"]


def test_chinese_text_is_folded_by_the_columns_it_takes():
    answer = "filtered answer: 准备两锅水；A 锅维持 100°C 沸水；B 锅维持 30°C 温水；每 2 分钟将鸡蛋转移至另一锅水；中火 3 分钟"
    assert len(answer) < console_layout.PAGE_WIDTH < console_layout.columns(answer)
    folded = console_layout.fold(answer)
    assert len(folded) == 2 and all(console_layout.columns(line) <= console_layout.PAGE_WIDTH for line in folded)


TERMS = ("S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak")


def test_a_wide_table_is_shown_in_groups_of_columns_each_named_by_its_row_labels():
    """The ledger's reasoning table (144 columns): two groups of three terms, each after K, B, format and n."""
    rows = [[str(k), str(b), "linear", "3"] + [fmt_estimate(SimpleNamespace(value=(k * b + i) % 7 / 7, lo=0.0, hi=1.0))
                                               for i, _ in enumerate(TERMS)] for b in (32, 128) for k in (1, 10)]
    printed = table(["K", "B", "format", "n", *TERMS], rows).splitlines()
    assert max(map(len, printed)) > console_layout.PAGE_WIDTH
    shown = console_layout.layout(["Reasoning, dissipation and leakage", *printed, "", "next table"])
    assert max(map(console_layout.columns, shown)) <= console_layout.PAGE_WIDTH
    first, second = "\n".join(shown[1:]).split("\n\n")[:2]
    assert first.split()[:7] == ["K", "B", "format", "n", "S_llm", "Acc_hit", "Acc_miss"]
    assert second.split()[:7] == ["K", "B", "format", "n", "D_rate", "D_mass", "L_leak"]
    for row in rows:                                 # each row in both groups, its labels and its figures
        assert " ".join(row[:7]) in " ".join(first.split()) and " ".join(row[:4] + row[7:]) in " ".join(second.split())
    assert shown[0] == "Reasoning, dissipation and leakage" and shown[-2:] == ["", "next table"]
    narrow = table(["K", "n", "S_llm"], [["1", "3", "0.500"]]).splitlines()
    assert console_layout.layout(narrow) == narrow


def test_a_figure_that_moves_a_line_break_is_no_difference():
    """A timing, or a masked figure, of another width on another machine folds the same words elsewhere."""
    other_machine = SENTENCE.replace("2,000", "2,000,000,000").replace("0/1", "10/12")
    here, there = console_layout.layout([SENTENCE]), console_layout.layout([other_machine])
    assert [len(line) for line in here] != [len(line) for line in there]        # the breaks moved
    assert docs_examples.matches(here, there, masked=True) and not docs_examples.matches(here, there)
    timed = "run x: 72 of 72 jobs done in 0.7s, 1.4/s: 0 model calls, 25 from the cache, 0 errors; " * 2
    slower = timed.replace("0.7s", "1h12m7s")
    assert docs_examples.matches(console_layout.layout([timed]), console_layout.layout([slower]))


def test_an_ignored_line_is_ignored_with_the_lines_it_was_folded_onto():
    example = docs_examples.Example(REPO / "page.md", 1, ignore=re.compile(r"^\s+planned on\s"))
    here = console_layout.layout(["  scorer      acc", "  planned on  vm: AMD EPYC, 2 logical CPUs, "
                                  "Linux-6.18.44-fc-v595-x86_64-with-glibc2.36, Python 3.11.7", "  model  none"])
    assert len(here) == 4 and here[2].startswith("              ")
    assert docs_examples.kept(example, here) == ["  scorer      acc", "  model  none"]


SHOWN_COMMAND = re.compile(r"^(?:\.venv/bin/)?workbench(?:\s|$)")


def _command_blocks():
    """Every `workbench …` command of the non-console code blocks: (page, line, command)."""
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        fence, info = None, ""
        for number, line in enumerate(lines, 1):
            if line.startswith("```"):
                fence, info = (None, "") if fence else (number, line[3:].strip())
                continue
            if fence and info not in ("console", "python", "json") and SHOWN_COMMAND.match(line):
                command = line
                at = number
                while command.endswith("\\"):
                    command = command[:-1] + lines[at]
                    at += 1
                yield page, number, command


COMMANDS = list(_command_blocks())


def test_the_pages_show_commands():
    assert len(COMMANDS) >= 40


@pytest.mark.parametrize(("page", "line", "command"), COMMANDS,
                         ids=[f"{p.name}:{n}" for p, n, _ in COMMANDS])
def test_every_command_shown_parses(page, line, command):
    """A renamed verb or flag fails here, with the page and line that still show the old one."""
    words = shlex.split(command, comments=True)[1:]
    # A placeholder in capitals (RUN, CELL_A) or an optional part in brackets is a name for the
    # reader to fill in: the parser sees a plain value.
    words = [w for w in words if not (w.startswith("[") or w.endswith("]"))]
    words = ["1" if w == "…" or re.fullmatch(r"[A-Z][A-Z_0-9.]*(\.\w+)?", w) else w for w in words]
    parser = build_parser()
    try:
        parser.parse_args(words)
    except SystemExit as exit_:
        pytest.fail(f"{page.relative_to(REPO)}:{line}: `{command}` does not parse (exit {exit_.code})")


LINK = re.compile(r"\]\(([^)\s]+)\)")
# The pictures of the app are not in the checkout: every docs build takes them (scripts/docs_shots.py), and
# tests/test_docs_site.py checks that a page shows only pictures the build takes.
TAKEN_BY_THE_BUILD = re.compile(r"shots/[a-z-]+\.(?:png|svg)")


@pytest.mark.parametrize("page", [*PAGES, REPO / "docs" / "design.md", REPO / "docs" / "cli.md"],
                         ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file(page):
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if page.parent.name == "docs" and TAKEN_BY_THE_BUILD.fullmatch(target):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)} links to missing files: {broken}"


def test_the_readme_is_a_landing_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for command in ("pip install rust-just && just demo", "just test"):
        assert command in readme
