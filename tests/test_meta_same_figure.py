"""A statistic shown in more than one place is one object: the same figure and interval everywhere (issue 54, case 7).

The annotators' correlation read 74.64 [65.70, 81.79] on Labels (T) and 74.64 [66.50, 81.76] on Meta (M): Labels
drew its bootstrap from 1000 resamples, Meta and the CLI from 2000. The class: every place that shows a statistic
is read as a user (or a script) reads it — the Meta and Labels screens, ``meta report`` and ``judge report`` as
text and as JSON, the HTML report — and every statistic shown in two places or more (each scorer's Pearson,
Spearman and n against each label, each judge's κ) must be the same there: the exact values of the JSON
reports equal, and every figure shown equal to them at the digits it is shown with.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import copy_db
from tui_shared_a import SharedApp
from tuikit import SIZE, until_loaded, wait_for
from workbench.cli import main
from workbench.metrics.stats import Estimate
from workbench.tables import fmt_estimate

pytestmark = pytest.mark.budget(40)     # seven places, each computing its figures as it does for a user

SET = "prefs"         # the demo's meta set (tests/tuistates.py), shown beside κ
RUN = "recorded"      # the demo's run with verified claims and the shipped labels: κ with an interval
FIGURE = r"(?:—|-?\d+\.\d+(?: \[-?\d+\.\d+, ?-?\d+\.\d+\])?)"
PARSED = re.compile(r"(-?\d+\.\d+)(?: \[(-?\d+\.\d+), ?(-?\d+\.\d+)\])?")


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_template) -> Path:
    """This module's copy: meta set ``prefs`` and run ``recorded``, its claims labelled (sample_data/labels)."""
    return copy_db(demo_template, tmp_path_factory.mktemp("same-figure") / "demo.db")


# -- reading each place: {statistic: the figure as shown} ------------------------------------------------------------


def correlation_keys(label: str, scorer: str) -> tuple[tuple, tuple, tuple]:
    return (("pearson", SET, label, scorer), ("spearman", SET, label, scorer), ("n", SET, label, scorer))


def cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0
    return out.getvalue()


def meta_report_text(db: Path) -> dict:
    shown, label = {}, None
    row = re.compile(rf"^(?P<scorer>\S.*?)\s{{2,}}(?P<p>{FIGURE})\s+(?P<s>{FIGURE})\s+(?P<n>\d+)$")
    for line in cli("--db", str(db), "meta", "report", SET).splitlines():
        if line in ("correctness", "completeness", "overall"):
            label = line
        elif label and (m := row.match(line)):
            shown.update(zip(correlation_keys(label, m["scorer"]), (m["p"], m["s"], m["n"])))
    return shown


def judge_report_text(db: Path, run: str) -> dict:
    shown, section = {}, None
    kappa = re.compile(rf"^(?P<judge>\S+)\s+\d+(?:\s+\d+){{4}}\s+\S+\s+(?P<k>{FIGURE})\s")
    preference = re.compile(rf"^{SET}\s{{2,}}(?P<scorer>\S.*?)\s{{2,}}(?P<p>{FIGURE})\s+(?P<s>{FIGURE})\s+(?P<n>\d+)$")
    for line in cli("--db", str(db), "judge", "report", "claims", run).splitlines():
        if line.startswith("agreement with the human labels"):
            section = "kappa"
        elif line.startswith("agreement with people's preferences"):
            section = "preferences"
        elif not line.strip():
            section = None
        elif section == "kappa" and (m := kappa.match(line)):
            shown[("kappa", run, m["judge"])] = m["k"]
        elif section == "preferences" and (m := preference.match(line)):
            shown.update(zip(correlation_keys("overall", m["scorer"]), (m["p"], m["s"], m["n"])))
    return shown


def exact_rows(rows: list[dict]) -> dict:
    """Rows of ``meta report --json`` (or the preferences of ``judge report --json``) as exact values."""
    out = {}
    for r in rows:
        p, s, n = correlation_keys(r["label"], r["scorer"])
        out[p], out[s] = Estimate(r["pearson"], r["low"], r["high"]), Estimate(r["spearman"], r["spearman_low"],
                                                                               r["spearman_high"])
        out[n] = r["n"]
    return out


def meta_report_json(db: Path) -> dict:
    return exact_rows(json.loads(cli("--db", str(db), "meta", "report", SET, "--json")))


def judge_report_json(db: Path, run: str) -> dict:
    report = json.loads(cli("--db", str(db), "judge", "report", "claims", run, "--json"))
    out = exact_rows(report["preferences"])
    out.update({("kappa", run, judge): Estimate(**a["kappa"]) for judge, a in report["judges"].items()})
    return out


def html_report(db: Path, run: str, tmp_path: Path) -> dict:
    page = tmp_path / "report.html"
    cli("--db", str(db), "report", run, "--out", str(page))
    html = page.read_text(encoding="utf-8")

    def rows_after(heading: str) -> list[list[str]]:
        table = re.search(r"<table>.*?</table>", html[html.index(heading):], re.S).group(0)
        cell = lambda c: re.sub(r"<[^>]+>", "", c.replace("<br>", " "))  # noqa: E731
        return [[cell(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
                for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)]

    shown = {("kappa", run, r[0]): r[7] for r in rows_after("<h2>Judges against human labels") if r}
    for name, scorer, p, s, n in (r for r in rows_after("<h3>Checkers against people") if r):
        shown.update(zip(correlation_keys("overall", scorer), (p, s, n)))
    return shown


async def tui_screens(pilot) -> tuple[dict, dict]:
    """The Meta screen's table, then the Labels screen's κ and preferences (120 columns: the side panel)."""
    app = pilot.app
    await until_loaded(pilot)
    app.open_run(RUN)           # Labels shows the claims of the run selected
    await pilot.press("M")
    screen = await until_loaded(pilot, "meta")
    table = screen.query_one("#meta-rows")
    meta, label = {}, None
    for key in table.rows:
        cells = [str(table.get_cell(key, column)) for column in ("label", "scorer", "pearson", "spearman", "n")]
        label = cells[0] or label
        meta.update(zip(correlation_keys(label, cells[1]), cells[2:]))
    await pilot.press("T")
    await until_loaded(pilot, "labels")
    await wait_for(pilot, lambda: "Agreement with people's preferences" in str(app.screen.query_one("#preferences")
                                                                                .render()), what="the preferences")
    labels, name = {}, None
    for line in str(app.screen.query_one("#report").render()).splitlines():
        if m := re.match(r"^(\S+) n \d+ · acc", line):
            name = m[1]
        elif name and (m := re.match(rf"^ κ ({FIGURE})$", line)):
            labels[("kappa", app.run_name, name)] = m[1]
    for line in str(app.screen.query_one("#preferences").render()).splitlines():
        if m := re.match(rf"^ r ({FIGURE}) n (\d+)$", line):
            labels.update(zip(correlation_keys("overall", name)[::2], (m[1], m[2])))
        elif m := re.match(rf"^ ρ ({FIGURE})$", line):
            labels[correlation_keys("overall", name)[1]] = m[1]
        else:
            name = line
    return meta, labels


@pytest.fixture(scope="module")
def places(demo, tmp_path_factory) -> dict[str, dict]:
    """Every place showing a statistic: {place: {statistic: as shown (text) or exact (JSON)}}."""
    db, run = demo, RUN
    shared = SharedApp(db, SIZE)
    try:
        meta, labels = shared.walk(tui_screens, SIZE)
    finally:
        shared.close()
    return {"Meta screen": meta, "Labels screen": labels, "meta report": meta_report_text(db),
            "meta report --json": meta_report_json(db), f"judge report claims {run}": judge_report_text(db, run),
            f"judge report claims {run} --json": judge_report_json(db, run),
            "HTML report": html_report(db, run, tmp_path_factory.mktemp("html"))}


def as_shown(exact, shown: str) -> str:
    """``exact`` formatted as ``shown`` is: its digits, and its interval's comma (the HTML page's has a space)."""
    if isinstance(exact, int):
        return str(exact)
    m = PARSED.match(shown)
    digits = len(m[1].split(".")[1]) if m else 2
    text = fmt_estimate(exact, digits)
    return text.replace(",", ", ") if ", " in shown else text


def shared_statistics(places: dict[str, dict]) -> dict[tuple, dict[str, object]]:
    by_statistic: dict[tuple, dict[str, object]] = defaultdict(dict)
    for place, shown in places.items():
        for statistic, figure in shown.items():
            by_statistic[statistic][place] = figure
    return {s: where for s, where in by_statistic.items() if len(where) > 1}


# -- the class ------------------------------------------------------------------------------------------------------


def test_every_place_is_read_and_shows_the_annotators_correlation(places):
    """The reading of each place finds what it shows (a parser that reads nothing would make the class vacuous)."""
    annotators = correlation_keys("overall", "annotators")[0]
    for place, shown in places.items():
        assert shown, f"nothing read from {place}"
        assert annotators in shown, f"{place} shows no annotators' Pearson on the overall label"
    kappa = places["Labels screen"][("kappa", RUN, "lexical")]
    assert PARSED.match(kappa)[2] != PARSED.match(kappa)[3], f"κ {kappa}: an interval of one point tests nothing"


def test_the_annotators_correlation_is_one_figure_everywhere(places):
    """Issue 54's case: 74.64 [66.50,81.76] on Labels, Meta, the CLI's reports and the HTML page alike."""
    annotators = correlation_keys("overall", "annotators")[0]
    exact = places["meta report --json"][annotators]
    assert round(exact.value, 2) == 74.64
    for place, shown in places.items():
        figure = shown[annotators]
        expected = exact if isinstance(figure, Estimate) else as_shown(exact, figure)
        assert figure == expected, place


def test_every_statistic_shown_in_two_places_is_the_same_object(places):
    shared = shared_statistics(places)
    kinds = {s[0] for s in shared}
    assert {"pearson", "spearman", "n", "kappa"} <= kinds, kinds
    differ = []
    for statistic, where in sorted(shared.items(), key=str):
        exact = [f for f in where.values() if not isinstance(f, str)]
        if exact and any(e != exact[0] for e in exact):
            differ.append(f"{statistic}: exact values differ: {where}")
            continue
        if not exact:       # shown as text only: every place at the same digits
            texts = set(where.values())
            if len(texts) > 1:
                differ.append(f"{statistic}: {where}")
            continue
        for place, figure in where.items():
            if isinstance(figure, str) and figure != as_shown(exact[0], figure):
                differ.append(f"{statistic}: {place} shows {figure}, the statistic is {as_shown(exact[0], figure)}")
    assert not differ, "\n".join(differ)
