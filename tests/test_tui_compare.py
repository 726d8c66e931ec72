"""The Compare screen on real runs: two model-free sweeps of sample_data/metaqa, scored by imported predictions."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest

from conftest import copy_db, new_template, write_jsonl
from contractroom import whole_in_view
from tui_shared_c import camera, snap
from tuikit import SIZE, SMALL, footer_line, heading, settle, settled_after, until_loaded, wait_for
from workbench.compare import compare_runs
from workbench.compare.render import fmt_delta
from workbench.data.importer import import_dataset
from workbench.data.predictions import export_prompts, import_predictions
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run, load_samples
from workbench.tui.app import WorkbenchApp
from workbench.tui.dialogs import ChoiceDialog, ErrorDialog, TextDialog
from workbench.tui.compare_text import axes_line, flip_rows, mark, term_cell
from workbench.tui.screens.compare import TERMS, CompareScreen, default_pair

SWEEP = SweepConfig(ks=(1, 5, 20), budgets=(64,), formats=("score",), oracle=True, shuffles=2)


def reader(record: dict, answers: dict[str, list[str]], index: int, *, careless: bool) -> str:
    """A stand-in generator: the first gold answer found in the prompt's evidence, else "I don't know".

    ``careless``: it also gives up on every 5th question and guesses every 7th right
    without evidence, so the two runs differ in both directions on the reasoning stage.
    """
    evidence = record["messages"][1]["content"].split("Question:")[0]
    if careless and index % 5 == 0:
        return "I don't know"
    if careless and index % 7 == 0:
        return answers[record["sample_id"]][0]
    hits = [a for a in answers[record["sample_id"]] if a in evidence]
    return hits[0] if hits else "I don't know"


def score_run(store, run_name: str, directory, *, careless: bool) -> None:
    """Export the run's prompts, answer them with ``reader`` and import the predictions (no model)."""
    run = get_run(store, run_name)
    samples = load_samples(store, run.dataset_id)
    answers = {s.id: s.answers for s in samples}
    index = {s.id: i for i, s in enumerate(samples)}
    buf = io.StringIO()
    export_prompts(store, run, buf)
    records = [json.loads(line) for line in buf.getvalue().splitlines()]
    path = write_jsonl(directory / f"{run_name}.jsonl", [
        {"sample_id": r["sample_id"], "cell_id": r["cell_id"],
         "prediction": reader(r, answers, index[r["sample_id"]], careless=careless)} for r in records])
    import_predictions(store, run, path)


@pytest.fixture(scope="session")
def compare_template(tmp_path_factory):
    """Run A ``sweep`` (300 questions) and run B ``reader`` (its first 250: one axis differs), both scored."""
    with new_template(tmp_path_factory, "cmp.db") as store:
        plan_sweep(store, SWEEP, name="sweep")
        plan_sweep(store, replace(SWEEP, limit=250), name="reader")
        score_run(store, "sweep", store.path.parent, careless=False)
        score_run(store, "reader", store.path.parent, careless=True)
    return store.path


@pytest.fixture
def compare_db(tmp_path, compare_template):
    """The two scored runs: this test's own copy."""
    return copy_db(compare_template, tmp_path / "cmp.db")


@pytest.fixture(scope="module")
def looking(tmp_path_factory, compare_template):
    """One app on a copy of the two scored runs for the tests that only look and navigate (none writes): each
    walks it made fresh (tests/tui_shared_a.py); the snapshots are taken in it (tests/tui_shared_c.py). A test that
    writes, or needs another database, starts its own."""
    yield from camera(copy_db(compare_template, tmp_path_factory.mktemp("compare-looking") / "cmp.db"))


def expected(db, a="sweep", b="reader"):
    """The comparison the screen must show, computed by the core directly."""
    store = open_store(db)
    try:
        return compare_runs(store, a, b, terms=TERMS, resamples=2000)
    finally:
        store.close()


def cell_text(table, row: str, column: str) -> str:
    return str(table.get_cell(row, column))


def said(app, text: str) -> bool:
    return any(text in str(n.message) for n in app._notifications)


def flips_heading(app) -> str:
    return str(app.screen.query_one("#flips-heading").render())


async def open_compare(pilot) -> CompareScreen:
    await until_loaded(pilot)
    await pilot.press("C")
    screen = await until_loaded(pilot, "compare")
    assert screen.view.comparison is None or screen.view.comparison.resamples == screen.resamples
    return screen


def test_the_delta_ledger_shows_each_cell_with_b_minus_a_its_interval_and_marks(looking):
    want = expected(looking.app.db_path)

    async def walk(pilot):
        app = pilot.app
        screen = await open_compare(pilot)
        top = heading(app)
        for text in ("A = sweep", "B = reader", "metaqa", "250 samples in both", "Differs in 1 axis: samples",
                     "2,000 resamples", "p Holm-adjusted over 3 cells", "▲ better ▼ worse * significant"):
            assert text in top, text
        table = screen.query_one("#deltas")
        assert [k.value for k in table.rows] == ["k1-b64-score", "k5-b64-score", "k20-b64-score"]
        for cell in want.cells:
            for term in TERMS:
                d = cell.terms[term]
                shown = cell_text(table, cell.cell_a, term)
                value, _, interval = fmt_delta(d).partition(" ")
                assert value in shown and interval in shown, (cell.cell_a, term, shown)
                assert ("*" in shown) == d.significant
        # The reader gives up on every 5th question: S_llm and Acc_hit drop, D_rate rises, all worse (▼) …
        k1 = want.cells[0].terms
        assert k1["S_llm"].significant and k1["D_rate"].significant and k1["D_rate"].delta.value > 0
        for term in ("S_llm", "Acc_hit", "D_rate"):
            assert cell_text(table, "k1-b64-score", term).startswith("▼ "), term
        # … and retrieval is the same in both runs: no mark, no star.
        assert cell_text(table, "k1-b64-score", "S_set").startswith("  +0.000 ")

    looking.walk(walk, SIZE)


def test_the_flips_of_the_highlighted_cell_and_both_runs_side_by_side(looking):
    want = expected(looking.app.db_path)

    async def walk(pilot):
        app = pilot.app
        screen = await open_compare(pilot)
        k1 = want.cells[0]
        reasoning = k1.flips["reasoning"]
        changed = len(reasoning["fail_to_pass"]) + len(reasoning["pass_to_fail"])
        counts = f"reasoning ▲{len(reasoning['fail_to_pass'])} ▼{len(reasoning['pass_to_fail'])}"
        assert f"Flips k1-b64-score {changed}/250: retrieval ▲0 ▼0 · interface ▲0 ▼0 · {counts}" in flips_heading(app)
        flips = screen.query_one("#flips")
        assert [k.value for k in flips.rows] == [sid for _, _, sid in flip_rows(k1)]
        first = reasoning["fail_to_pass"][0]
        assert "▲ fail→pass" in str(flips.get_cell(first, "way"))
        # Down to the next cell: its flips replace these.
        await pilot.press("down")
        await wait_for(pilot, lambda: "Flips k5-b64-score" in flips_heading(app))
        assert flips.row_count == sum(len(ids) for ways in want.cells[1].flips.values() for ids in ways.values())
        await pilot.press("up")
        await wait_for(pilot, lambda: "Flips k1-b64-score" in flips_heading(app))
        # enter on a cell moves to its flips, enter on a flip opens it in both runs.
        await pilot.press("enter")
        assert app.focused is flips
        await pilot.press("enter")
        detail = await until_loaded(pilot, "FlipDetailScreen")
        a_pane = str(detail.query_one("#detail-a").render())
        b_pane = str(detail.query_one("#detail-b").render())
        store = open_store(app.db_path)
        answer = next(s.answers[0] for s in load_samples(store, get_run(store, "sweep").dataset_id) if s.id == first)
        store.close()
        assert "A = sweep · k1-b64-score" in a_pane and "✗ fail" in a_pane and "\nI don't know\nscore" in a_pane
        assert "B = reader · k1-b64-score" in b_pane and "✓ pass" in b_pane and f"\n{answer}\nscore" in b_pane
        for pane in (a_pane, b_pane):
            assert "Evidence in window order" in pane and "Prompt" in pane and "Question:" in pane
        assert first in heading(app) and "reasoning fail→pass" in heading(app) and "flip 1/" in heading(app)
        # j: the next flip of the cell, in both panes.
        await pilot.press("j")
        second = flip_rows(k1)[1][2]
        await wait_for(pilot, lambda: second in heading(app) and detail.loaded)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.press("escape")     # back from the flips to the cells
        assert app.focused is screen.query_one("#deltas")

    looking.walk(walk, SIZE)


async def test_with_one_run_it_says_a_second_is_needed(swept_db):
    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SMALL) as pilot:
        screen = await open_compare(pilot)
        assert "Compare needs two runs over one dataset" in heading(app)
        assert "only run 'sweep'" in heading(app)
        assert screen.query_one("#deltas").row_count == 0 and screen.query_one("#flips").row_count == 0
        assert not isinstance(app.screen, ErrorDialog)


async def test_runs_that_cannot_be_paired_say_why_and_a_b_and_x_pick_others(compare_db, tiny_dir):
    store = open_store(compare_db)
    import_dataset(store, tiny_dir, "tiny")
    plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), dataset="tiny", name="T")
    # Answered: Compare opens on the newest run with answers (a run just planned has nothing to compare).
    answers = [{"sample_id": q, "cell_id": "k1-b64-score", "prediction": "French"} for q in ("q1", "q2", "q3")]
    import_predictions(store, get_run(store, "T"), write_jsonl(tiny_dir / "answers.jsonl", answers))
    store.close()
    app = WorkbenchApp(compare_db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot)
        # The newest run (T) against the newest other: over another dataset, so nothing to pair.
        assert (screen.a, screen.b) == ("reader", "T")
        assert "run 'reader' is over dataset 'metaqa' and run 'T' over 'tiny'" in heading(app)
        assert "must be over one dataset. Press a or b to pick other runs" in heading(app)   # a full stop between
        assert not isinstance(app.screen, ErrorDialog)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        options = app.screen.query_one("#choices")
        assert [options.get_option_at_index(i).id for i in range(options.option_count)] == ["T", "reader", "sweep"]
        assert options.highlighted == 0                      # the current B
        await pilot.press("down", "down", "enter")
        await wait_for(pilot, lambda: screen.b == "sweep" and screen.view.comparison is not None and screen.loaded)
        assert "A = reader · B = sweep" in heading(app)
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.a == "sweep" and screen.view.comparison is not None and screen.loaded)
        assert "A = sweep · B = reader" in heading(app)
        # A pick of the run already on the other side is refused in words, and the comparison stays.
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        await pilot.press("up", "enter")                     # from sweep (A) up to reader, which is B
        await wait_for(pilot, lambda: said(app, "reader is already run B"), what="a notice that reader is B")
        assert (screen.a, screen.b) == ("sweep", "reader") and "A = sweep · B = reader" in heading(app)
        # So is a pick of the run already shown on that side.
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        await pilot.press("enter")
        await wait_for(pilot, lambda: said(app, "sweep is already run A"), what="a notice that sweep is A")


def test_t_cycles_the_numbers_and_i_lists_what_differs(looking):
    want = expected(looking.app.db_path).cells[0].terms["S_llm"]

    async def walk(pilot):
        app = pilot.app
        screen = await open_compare(pilot)
        table = screen.query_one("#deltas")
        await pilot.press("t")
        await wait_for(pilot, lambda: "A → B" in heading(app))
        assert f"{want.a:.3f}→{want.b:.3f}" in cell_text(table, "k1-b64-score", "S_llm")
        await pilot.press("t")
        await wait_for(pilot, lambda: "p, then p(Holm)" in heading(app))
        assert "p <0.001" in cell_text(table, "k1-b64-score", "S_llm")
        assert "Holm <0.001" in cell_text(table, "k1-b64-score", "S_llm")
        await pilot.press("t")
        await wait_for(pilot, lambda: "B − A [95% CI]" in heading(app))
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, TextDialog))
        assert "samples: limit null → 250 (250 samples in both runs are compared)" in str(
            app.screen.query_one("#text").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)

    looking.walk(walk, SIZE)


def test_the_footer_shows_the_compare_keys_and_the_terms_page_at_80_columns(looking):
    """One app, resized: at 120×40 every term is on screen; at 80×24 the terms page, a term at a time, and every
    term is whole (heading and values) on some page: it once stopped with D_rate cut at the right edge."""

    async def walk(pilot):
        app = pilot.app
        screen = await open_compare(pilot)
        keys = ("⏎ Open flip", "a Run A", "b Run B", "x Swap A/B", "t Δ/A→B/p", "i Differences", "←/→ Terms")
        table = screen.query_one("#deltas")
        await wait_for(pilot, lambda: all(key in footer_line(app) for key in keys),
                       what=lambda: f"every compare key in the footer at 120×40: {footer_line(app)!r}")
        assert screen.shown_terms == TERMS and whole_in_view(table) >= set(TERMS), "at 120 columns every term shows"
        await pilot.press("right")
        await wait_for(pilot, lambda: said(app, "Every term is shown"))
        await pilot.resize_terminal(*SMALL)
        await wait_for(pilot, lambda: app.size == SMALL and all(key in footer_line(app) for key in keys),
                       what=lambda: f"every compare key in the footer at 80×24: {footer_line(app)!r}")
        await wait_for(pilot, lambda: len(screen.shown_terms) < len(TERMS), what="terms wider than 80 columns")
        assert "terms 1–" in heading(app) and f"of {len(TERMS)} (←/→)" in heading(app)
        seen = set()
        for _ in range(len(TERMS)):
            await settle(pilot)
            shown = whole_in_view(table)
            assert shown - {"cell"} == set(screen.shown_terms), "a page holds only terms shown whole"
            seen |= shown
            await pilot.press("right")
        assert seen >= set(TERMS), f"never whole at 80 columns: {sorted(set(TERMS) - seen)}"
        await wait_for(pilot, lambda: said(app, "Already at the last terms"))
        # Another view of the numbers keeps the page.
        last = screen.shown_terms
        await pilot.press("t")
        await wait_for(pilot, lambda: "A → B" in heading(app) and screen.loaded)
        assert screen.shown_terms == last and set(last) <= whole_in_view(table)
        await pilot.press("left")
        await wait_for(pilot, lambda: screen.shown_terms == TERMS[TERMS.index(last[0]) - 1:][:len(last)])

    looking.walk(walk, SIZE)


def test_significance_reads_without_colour_and_follows_each_terms_better_direction():
    from workbench.compare.report import TermDelta
    from workbench.metrics.stats import Estimate

    def delta(value, significant=True):
        return TermDelta(0.5, 0.5 + value, Estimate(value, value - 0.05, value + 0.05), 0.001, "mcnemar",
                         0.002, significant)

    assert mark(delta(0.1), "S_vis")[0] == "▲" and mark(delta(-0.1), "S_vis")[0] == "▼"
    assert mark(delta(-0.1), "L_iface")[0] == "▲" and mark(delta(0.1), "D_rate")[0] == "▼"  # less is better
    assert mark(delta(0.1), "Acc_miss")[0] == "•"            # significant, but no better direction
    assert mark(delta(0.1, significant=False), "S_vis") == (" ", "")
    text = str(term_cell(delta(-0.1), "S_llm", "delta"))
    assert text.splitlines() == ["▼ -0.100*", "[-0.150,-0.050]"]


def test_the_default_pair_is_the_newest_run_against_the_newest_other_of_its_dataset():
    runs = [{"name": "m1", "dataset": "m", "done": 3}, {"name": "t1", "dataset": "t", "done": 3},
            {"name": "m2", "dataset": "m", "done": 3}]
    assert default_pair(runs) == ("m1", "m2")
    assert default_pair(runs[:2]) == ("m1", "t1")            # none over t's dataset: the second newest
    assert default_pair(runs[:1]) == (None, "m1") and default_pair([]) == (None, None)
    # A run just planned (no job done) has nothing to compare: the newest runs with answers are paired.
    planned = {"name": "m3", "dataset": "m", "done": 0}
    assert default_pair([*runs, planned]) == ("m1", "m2")


def test_more_than_one_differing_axis_is_a_warning(compare_db):
    store = open_store(compare_db)
    plan_sweep(store, replace(SWEEP, limit=250, shuffles=3), name="two")
    comparison = compare_runs(store, "sweep", "two", terms=TERMS, resamples=10)
    store.close()
    line = axes_line(comparison)
    assert "⚠ 2 axes differ (oracle cells, samples): a delta may come from any" in line


def test_snapshot_compare_at_80x24(snapshot, request, looking):
    assert snap(snapshot, request, looking, SMALL, settled_after(("C", "compare")), state="compare")


def test_snapshot_compare_at_120x40(snapshot, request, looking):
    assert snap(snapshot, request, looking, SIZE, settled_after(("C", "compare")), state="compare")


def test_snapshot_flip_side_by_side_at_120x40(snapshot, request, looking):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("C")
        await settle(pilot, "compare")
        await pilot.press("enter", "enter")
        await settle(pilot, "FlipDetailScreen")

    assert snap(snapshot, request, looking, SIZE, run_before)


def test_the_help_lists_the_compare_keys_and_the_flip_screens():
    from workbench.tui.help import help_sections

    sections = dict(help_sections(WorkbenchApp))
    assert ("C", "Compare") in sections["Everywhere"]
    for key in (("enter", "Open flip"), ("a", "Run A"), ("b", "Run B"), ("x", "Swap A/B"), ("i", "Differences")):
        assert key in sections["Compare"], key
    for key in (("esc", "Back"), ("j", "Next flip"), ("k", "Prev flip"), ("J", "Both panes down")):
        assert key in sections["Compare flip"], key
