"""The Meta screen (M) on meta set ``rc``: the report by label, a scorer's instances worst first, one instance's
two responses side by side with their claims; and people's preferences beside κ on the Labels screen."""

from __future__ import annotations

import pytest

from conftest import SAMPLE_META, copy_db
from tui_shared_c import camera, snap
from tuikit import SIZE, SMALL, heading, screen_text, settle, settled_after, until_loaded, wait_for
from tuistates import few_resamples
from workbench.data.meta_import import import_meta
from workbench.meta.instances import disagreements
from workbench.meta.report import meta_report, preference_rows
from workbench.meta.sets import get_meta_set
from workbench.store import open_store
from workbench.tables import fmt_estimate
from workbench.tui.app import WorkbenchApp
from workbench.tui.dialogs import ChoiceDialog
from workbench.tui.meta_view import RESAMPLES, SEED, split_words
from workbench.tui.screens.meta_instances import MetaInstanceScreen, MetaInstancesScreen

CLAIMS_ROW = 2      # correctness · the rule + lexical claim run's precision (after the annotators and the baseline)


def _core(db, fn):
    store = open_store(db)
    try:
        return fn(store)
    finally:
        store.close()


def said(app, text: str) -> bool:
    return any(text in str(n.message) for n in app._notifications)


def text_of(app, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


def column(table, key: str) -> list[str]:
    return [str(table.get_cell(row, key)) for row in table.rows]


@pytest.fixture(scope="module")
def looking(tmp_path_factory, meta_template):
    """One app on a copy of meta set ``rc`` for the tests that only look and navigate (none writes): each walks
    it made fresh (tests/tui_shared_a.py), and the snapshots are taken in it (tests/tui_shared_c.py's ``Camera``: the
    same screen at its second size is resized, not opened again). A test that writes, or needs another database,
    starts its own."""
    yield from camera(copy_db(meta_template, tmp_path_factory.mktemp("meta-looking") / "meta.db"))


async def open_meta(pilot):
    await until_loaded(pilot)
    await pilot.press("M")
    return await until_loaded(pilot, "meta")


def test_the_report_lists_every_scorer_by_label_then_its_instances_worst_first_then_one_instance(looking):
    rows = _core(looking.app.db_path, lambda s: meta_report(s, get_meta_set(s, "rc"), resamples=RESAMPLES, seed=SEED))
    worst = _core(looking.app.db_path, lambda s: disagreements(s, get_meta_set(s, "rc"), rows[CLAIMS_ROW]))

    async def walk(pilot):
        app = pilot.app
        screen = await open_meta(pilot)
        top = heading(app)
        for text in ("set rc", "140 instances", "2 annotators", "rc.model1 vs rc.model2", "2,000 resamples"):
            assert text in top, text
        table = screen.query_one("#meta-rows")
        assert table.row_count == len(rows) == 12
        # The annotators' own agreement on correctness: the README's 68.21, every row as the core computes it.
        assert column(table, "scorer")[0] == "annotators" and column(table, "pearson")[0].startswith("68.21 [")
        assert column(table, "pearson") == [fmt_estimate(r.pearson, 2) for r in rows]
        assert column(table, "spearman") == [fmt_estimate(r.spearman, 2) for r in rows]
        assert column(table, "n") == [str(r.n) for r in rows]
        # Grouped: each label named once, on its first row.
        assert [label for label in column(table, "label") if label] == ["correctness", "completeness", "overall"]

        # j/k move like ↓/↑; enter on the claim run's row: its instances, the largest disagreement first.
        await pilot.press("j", "j", "j", "k")
        assert table.cursor_row == CLAIMS_ROW and rows[CLAIMS_ROW].kind == "claims"
        await pilot.press("enter")
        instances = await until_loaded(pilot, "MetaInstancesScreen")
        assert "claims rule + lexical" in heading(app) and "precision · correctness" in heading(app)
        listed = instances.query_one("#instances")
        distances = [float(d) for d in column(listed, "distance")]
        assert distances == sorted(distances, reverse=True) and len(distances) == len(worst)
        assert [k.value for k in listed.rows] == [str(d.sid) for d in worst]
        assert distances[0] == pytest.approx(worst[0].distance, abs=0.005)

        # enter: the worst instance, its query and reference on top and both responses with their claims.
        await pilot.press("enter")
        await until_loaded(pilot, "MetaInstanceScreen")
        top = heading(app)
        assert f"Instance {worst[0].instance}" in top and "1 of 138" in top and worst[0].query.split()[0] in top
        assert text_of(app, "#reference").startswith("Reference ")
        one, two = text_of(app, "#response-1"), text_of(app, "#response-2")
        assert one.startswith("Response 1 · ") and two.startswith("Response 2 · ")
        for side in (one, two):
            assert "overall" in side and "(A1)" in side and "(A2)" in side
            assert "Claims vs the reference (rule + lexical)" in side
            assert "✔ E " in side or "✘ N " in side
            assert "The reference's claims in this response" in side
        # Side by side at 120 columns.
        assert app.screen.query_one("#side-2").region.x > app.screen.query_one("#side-1").region.x
        # j: the next instance; k twice: the first one says it is the first.
        await pilot.press("j")
        await wait_for(pilot, lambda: f"Instance {worst[1].instance} · 2 of" in heading(app))
        await pilot.press("k", "k")
        await wait_for(pilot, lambda: said(app, "This is the first instance"))
        await pilot.press("e")
        assert app.screen.has_class("whole")
        # escape and backspace go back a level each.
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MetaInstancesScreen))
        await pilot.press("backspace")
        await wait_for(pilot, lambda: app.current_mode == "meta" and len(app.screen_stack) == 1)
        assert table.cursor_row == CLAIMS_ROW

        # The annotators' row: annotator 1 against annotator 2, their own disagreements.
        await pilot.press("k", "k", "enter")
        pair = await until_loaded(pilot, "MetaInstancesScreen")
        assert "annotators · correctness" in heading(app)
        listed = pair.query_one("#instances")
        assert [str(c.label) for c in listed.columns.values()][1:3] == ["A1", "A2"]
        assert listed.row_count == 140

    looking.walk(walk, SIZE)


async def test_m_picks_another_meta_set_and_says_so_when_there_is_one(meta_db, tmp_path, monkeypatch):
    few_resamples(monkeypatch)          # which set is shown is the subject, not its intervals
    app = WorkbenchApp(meta_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_meta(pilot)
        await pilot.press("m")
        await wait_for(pilot, lambda: said(app, "rc is the only meta set"))
        # A second set, imported meanwhile (as a CLI would): m lists both, the newest first.
        _core(meta_db, lambda s: import_meta(s, SAMPLE_META / "human_labeled_data.json", "again"))
        await wait_for(pilot, lambda: "set again" in heading(app) and app.screen.loaded, what="the new set shown")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceDialog))
        assert [v for v, _ in app.screen.choices] == ["again", "rc"]
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: "set rc" in heading(app) and app.screen.loaded, what="rc shown again")


async def test_with_no_meta_set_the_screen_says_what_to_do(tmp_path):
    app = WorkbenchApp(tmp_path / "empty.db")
    async with app.run_test(size=SMALL) as pilot:
        await open_meta(pilot)
        shown = screen_text(app)
        assert "No meta set in this database" in shown
        assert "workbench import --from ragchecker-meta HUMAN.json --name NAME" in shown
        assert "workbench meta run NAME" in shown
        for key in ("enter", "m"):
            await pilot.press(key)
            await wait_for(pilot, lambda: said(app, "no meta set yet"), what=f"{key} saying why")
            app.clear_notifications()


def test_the_labels_screen_shows_peoples_preferences_beside_kappa(looking):
    # The core's figures at its own resamples and seed: the Meta screen's and the CLI's (tests/test_meta_same_figure.py).
    want = _core(looking.app.db_path, preference_rows)

    async def walk(pilot):
        app = pilot.app
        await until_loaded(pilot)
        await pilot.press("T")
        await until_loaded(pilot, "labels")
        await wait_for(pilot, lambda: "Agreement with people's preferences" in text_of(app, "#preferences"))
        shown = text_of(app, "#preferences")
        assert "overall label · meta set rc" in shown
        for _, row in want:
            assert row.scorer in shown and f"r {fmt_estimate(row.pearson, 2)}" in shown, row.scorer
        assert "Judges vs human labels" in text_of(app, "#report")

    looking.walk(walk, SIZE)


def test_a_scorer_name_breaks_at_spaces_then_after_a_dot_never_mid_word():
    assert split_words("ragchecker.correctness_label", 27) == ["ragchecker.", "correctness_label"]
    assert split_words("claims rule + lexical (f6a96e) · precision", 27) == ["claims rule + lexical", "(f6a96e) · precision"]
    assert split_words("annotators", 27) == ["annotators"]
    assert split_words("similarity (e5.small) · f1", 40) == ["similarity (e5.small) · f1"]     # spaces kept


def test_the_help_lists_the_meta_keys():
    from workbench.tui.help import help_sections

    sections = dict(help_sections(WorkbenchApp))
    assert ("M", "Meta") in sections["Everywhere"]
    assert ("enter", "Instances") in sections["Meta"] and ("m", "Meta set") in sections["Meta"]
    assert ("esc/backspace", "Back") in sections["Meta instances"]
    for key in (("j", "Next instance"), ("J", "Both panes down"), ("e", "Whole reference")):
        assert key in sections["Meta instance"], key


def test_snapshot_meta_report_at_120x40(snapshot, request, looking):
    assert snap(snapshot, request, looking, SIZE, settled_after(("M", "meta")), state="report")


def test_snapshot_meta_report_at_80x24(snapshot, request, looking):
    assert snap(snapshot, request, looking, SMALL, settled_after(("M", "meta")), state="report")


async def _wrapped(pilot):
    """The instance's responses wrapped to their panes' width once laid out, and drawn."""
    await settle(pilot, "MetaInstanceScreen")
    screen = pilot.app.screen
    assert isinstance(screen, MetaInstanceScreen)
    await wait_for(pilot, lambda: screen._drawn == screen._widths(), what="the responses wrapped to their panes")
    await pilot.wait_for_scheduled_animations()


def _to_instance(pilot_keys=("down", "down")):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("M")
        await settle(pilot, "meta")
        await pilot.press(*pilot_keys, "enter")
        await settle(pilot, "MetaInstancesScreen")
        await pilot.press("enter")
        await _wrapped(pilot)

    return run_before


def test_snapshot_meta_instance_side_by_side_at_120x40(snapshot, request, looking):
    assert snap(snapshot, request, looking, SIZE, _to_instance(), state="instance", again=_wrapped)


def test_snapshot_meta_instance_stacked_at_80x24(snapshot, request, looking):
    assert snap(snapshot, request, looking, SMALL, _to_instance(), state="instance", again=_wrapped)
