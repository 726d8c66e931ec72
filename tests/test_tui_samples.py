"""The Samples and Sample-detail screens as a newcomer meets them: Esc, filters per cell, tags, empty
quadrants, the order of cells and the keys in the footer."""

from __future__ import annotations

import re

import pytest

from workbench.runs.report import cell_order
from workbench.store import open_store
from workbench.store.queries import get_run
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.samples import QUADRANT_KEYS

from conftest import copy_db
from contractempty import NO_MATCH
from tui_shared_a import running
from tuikit import SIZE, SMALL, footer_line, heading, settled_after, snap_app, type_text, until_loaded, wait_for


@pytest.fixture(scope="module")
def looking(tmp_path_factory, swept_template):
    """One app on a copy of the swept database, for the tests that only look and navigate (no tag, no write):
    each walks it made fresh (tests/tui_shared_a.py). The tests that tag start an app of their own."""
    yield from running(copy_db(swept_template, tmp_path_factory.mktemp("samples-looking") / "wb.db"))


async def open_samples(pilot, rows: int = 50):
    """From the ledger, Enter on the highlighted cell, then wait for its first page."""
    app = pilot.app
    await wait_for(pilot, lambda: app.current_mode == "ledger" and app.screen.view is not None
                   and app.screen.query_one("#ledger").row_count > 0)
    await pilot.press("enter")
    await until_loaded(pilot, "samples")
    assert "page 1/" in heading(app) and app.screen.query_one("#samples").row_count == rows


async def open_detail(pilot):
    """Samples of the first cell, then the first sample's detail, loaded."""
    app = pilot.app
    await open_samples(pilot)
    await pilot.press("enter")
    await until_loaded(pilot, "SampleDetailScreen")
    assert app.screen.detail is not None


def test_filters_reset_when_another_cell_is_opened_but_stay_for_the_same_cell(looking):
    async def walk(pilot):
        app = pilot.app
        await open_samples(pilot)
        assert "cell k1-b64-score" in heading(app)
        await pilot.press("5")
        await wait_for(pilot, lambda: "quadrant retrieval-miss" in heading(app))
        await pilot.press("escape", "s")  # back and forth on the same cell: the filter stays
        await wait_for(pilot, lambda: app.current_mode == "samples" and "quadrant retrieval-miss" in heading(app))
        await pilot.press("escape", "down", "enter")  # another cell: a fresh start
        await wait_for(pilot, lambda: app.current_mode == "samples" and "cell k5-b64-score" in heading(app)
                       and "quadrant all" in heading(app) and "300 samples" in heading(app))
        assert app.screen.page_offset == 0 and app.screen.search == "" and app.screen.tag is None

    looking.walk(walk, SIZE)


async def test_tags_stay_short_and_the_prediction_stays_on_screen(swept_db):
    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_samples(pilot)
        await pilot.press("A", "L", "R", "F")
        await wait_for(pilot, lambda: len(app.screen.rows[0].tags) == 4)
        table = app.screen.query_one("#samples")
        await wait_for(pilot, lambda: table.get_row_at(0)[7] == "ALRF")
        columns = list(table.columns.values())
        prediction_right = sum(c.get_render_width(table) for c in columns)
        assert prediction_right <= table.scrollable_content_region.width


def test_at_80_columns_every_column_down_to_the_prediction_fits_and_at_200_every_question_is_whole(looking):
    async def walk(pilot):
        app = pilot.app
        await open_samples(pilot)
        table = app.screen.query_one("#samples")
        await wait_for(pilot, lambda: table.row_count > 0)
        columns = list(table.columns.values())
        assert [str(c.label) for c in columns][-1] == "prediction"
        assert sum(c.get_render_width(table) for c in columns) <= table.scrollable_content_region.width
        row = table.get_row_at(0)
        assert row[0].startswith("…") and row[0][-5:].isdigit()   # the id's distinctive end is kept
        await pilot.resize_terminal(200, 50)                      # with room, every id and question whole
        await wait_for(pilot, lambda: table.row_count > 0 and table.get_row_at(0)[0].startswith("metaqa-"),
                       what="full sample ids at 200 columns")
        question = table.columns[table.ordered_columns[1].key]
        assert question.width == max(len(r.question) for r in app.screen.rows)

    looking.walk(walk, SMALL)


async def test_the_tag_filter_matches_part_of_a_tag_and_lists_the_tags_when_none_matches(swept_db):
    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_samples(pilot)
        await pilot.press("L")  # alias-miss on the first sample
        await wait_for(pilot, lambda: app.screen.rows[0].tags == ("alias-miss",))
        await pilot.press("t")
        await type_text(pilot, "alias")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "tag ~alias" in heading(app) and app.screen.total == 1)
        await pilot.press("t", "ctrl+u")
        await type_text(pilot, "halluc")
        await pilot.press("enter")
        empty = app.screen.query_one("#empty")
        await wait_for(pilot, lambda: app.screen.total == 0 and empty.display)
        text = str(empty.render())
        assert "no tag matches “halluc”" in text and "alias-miss (1)" in text


def test_an_empty_quadrant_says_so_and_escape_goes_back_to_the_ledger(looking):
    async def walk(pilot):
        app = pilot.app
        await open_samples(pilot)
        empty = app.screen.query_one("#empty")
        assert not empty.display
        await pilot.press("2")  # a sweep without a model has no scores: nothing is dissipated yet
        await wait_for(pilot, lambda: "quadrant dissipation" in heading(app) and app.screen.total == 0)
        await wait_for(pilot, lambda: empty.display)
        text = str(empty.render())
        assert "no samples in dissipation for this cell" in text and "visible hit but wrong" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.current_mode == "ledger")

    looking.walk(walk, SIZE)


def test_detail_arrows_step_through_cells_in_ledger_order(looking):
    store = open_store(looking.app.db_path)
    order = cell_order(store, get_run(store, "sweep"))
    store.close()
    assert order[:3] == ["k1-b64-score", "k5-b64-score", "k20-b64-score"]  # not k1, k20, k5

    async def walk(pilot):
        app = pilot.app
        await open_detail(pilot)
        detail = app.screen
        assert detail.detail.cells == order
        seen = [detail.cell_id]
        for _ in range(len(order) - 1):
            await pilot.press("right")
            await wait_for(pilot, lambda: detail.detail.cell_id != seen[-1])
            seen.append(detail.detail.cell_id)
        assert seen == order
        await pilot.press("left")
        await wait_for(pilot, lambda: detail.detail.cell_id == order[-2])

    looking.walk(walk, SIZE)


def test_the_samples_footer_shows_detail_pages_quadrants_search_tags_and_escape_at_80_and_120_columns(looking):
    """One app, resized: what the footer shows and what its keys do, at 80×24 then at 120×40."""
    async def walk(pilot):
        app = pilot.app
        await open_samples(pilot)
        for size in (SMALL, SIZE):
            await pilot.resize_terminal(*size)
            # enter was hidden by the table's own enter binding; only 2, 3 and 4 of the nine quadrants showed.
            keys = ("⏎ Detail", "pgup/pgdn Page", "1-9 Quadrant", "/ Search", "t Tag filter", "ALRF Tag",
                    "esc Ledger")
            await wait_for(pilot, lambda: app.size == size and all(key in footer_line(app) for key in keys),
                           what=lambda: f"every samples key in the footer at {size} (it shows {footer_line(app)!r})")
            await pilot.press("9")
            await wait_for(pilot, lambda: "quadrant unsupported" in heading(app))
            await pilot.press("1", "pagedown")
            await wait_for(pilot, lambda: "quadrant all" in heading(app) and "page 2/6" in heading(app))

    looking.walk(walk, SMALL)


async def test_the_status_line_names_every_quadrant_key_and_the_keys_the_footer_leaves_out(swept_db):
    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SMALL) as pilot:
        await open_samples(pilot)
        status = " ".join(str(app.screen.query_one("#status").render()).split())
        for number, quadrant in enumerate(QUADRANT_KEYS, start=1):
            assert f"{number} {quadrant}" in status  # it said "8 errors" for error and had no 9
        for keys in ("]/[ also page", "g/G first/last", "N note", "X export tagged"):
            assert keys in status
        await pilot.press("A")  # once a tag shows, the status line explains the tags column
        widget = app.screen.query_one("#status")
        await wait_for(pilot, lambda: "tags column: A annotation-error" in str(widget.render()))


def test_the_detail_footer_fits_80_columns_and_shows_the_cell_note_and_chain_keys_at_120(looking):
    """One app, resized: the detail's footer at 80×24, then its keys on screen at 120×40."""
    async def walk(pilot):
        app = pilot.app
        await open_detail(pilot)
        keys = ("←/→ Cell", "esc Back", "j/k Sample", "ALRF Tag", "N Note", "c SearChain")
        await wait_for(pilot, lambda: all(key in footer_line(app) for key in keys),
                       what=lambda: f"every detail key in the footer (it shows {footer_line(app)!r})")
        await pilot.resize_terminal(*SIZE)

        def on_screen(key):
            shown = [k for k in app.screen.query("FooterKey") if k.key == key]
            return app.size == SIZE and shown and shown[0].region.width > 0 and shown[0].region.right <= SIZE[0]

        for key in ("left", "right", "N", "c"):
            await wait_for(pilot, lambda: on_screen(key), what=f"{key} on screen in the footer")

    looking.walk(walk, SMALL)


# -- snapshots at 80×24 ----------------------------------------------------------------------
def test_snapshot_small_samples(snap_compare, swept_db):
    assert snap_compare(snap_app(swept_db), terminal_size=SMALL, run_before=settled_after(("s", "samples")))


def test_snapshot_small_empty_quadrant(snap_compare, swept_db):
    run_before = settled_after(("s", "samples"), ("2", "samples"))
    assert snap_compare(snap_app(swept_db), terminal_size=SMALL, run_before=run_before)


def test_snapshot_small_sample_detail(snap_compare, swept_db):
    run_before = settled_after(("s", "samples"), ("enter", "SampleDetailScreen"))
    assert snap_compare(snap_app(swept_db), terminal_size=SMALL, run_before=run_before)


def test_j_on_the_last_sample_and_k_on_the_first_say_so(looking):
    async def walk(pilot):
        app = pilot.app
        await open_detail(pilot)
        detail = app.screen
        first = detail.sid
        await pilot.press("k")
        await wait_for(pilot, lambda: any("first sample" in str(n.message) for n in app._notifications),
                       what="a notice that this is the first sample")
        assert detail.sid == first
        detail.sid = detail.sids[-1]
        await pilot.press("j")
        await wait_for(pilot, lambda: any("last sample" in str(n.message) for n in app._notifications),
                       what="a notice that this is the last sample")
        assert detail.sid == detail.sids[-1]


    looking.walk(walk, SIZE)


# -- what an empty page offers (issue 54, case 6) ----------------------------------------------

# The empty pages a user meets (NO_MATCH: the key contract's search that matches nothing): a search with no match
# on quadrant all and on an empty quadrant, and an empty quadrant unfiltered (a sweep run without a model has no
# scores: nothing is dissipated).
EMPTY_PAGES = [("all", NO_MATCH), ("dissipation", NO_MATCH), ("dissipation", "")]
OFFER = re.compile(r"(\S+) shows (all samples|quadrant all)")


async def show(pilot, quadrant: str, search: str) -> None:
    """Samples on ``quadrant`` searched for ``search``, loaded."""
    screen = pilot.app.screen
    screen.quadrant, screen.search, screen.page_offset = quadrant, search, 0
    screen.reload()
    await until_loaded(pilot, "samples")


def empty_hint(app) -> str:
    return " ".join(str(app.screen.query_one("#empty").render()).split())


def test_every_key_an_empty_samples_page_offers_does_what_it_says(looking):
    """An empty page names the keys that show more: each offer, pressed, does what it said ("1 shows all
    samples" said with a search that 1 keeps; the page keys said "all 0 samples are on it")."""
    async def walk(pilot):
        app = pilot.app
        said: list[str] = []
        app.notify = lambda message, *args, **kwargs: said.append(" ".join(str(message).split()))
        try:
            await open_samples(pilot)
            whole = app.screen.total
            for quadrant, search in EMPTY_PAGES:
                await show(pilot, quadrant, search)
                assert app.screen.total == 0, (quadrant, search)
                offers = OFFER.findall(empty_hint(app))
                assert offers or "/ changes the search" in empty_hint(app), empty_hint(app)
                for key, what in offers:
                    await pilot.press(key)
                    await until_loaded(pilot, "samples")
                    if what == "all samples":
                        assert (app.screen.quadrant, app.screen.search, app.screen.total) == ("all", "", whole), \
                            f"on {quadrant} searched {search!r}, {key} was said to show all samples"
                    else:
                        assert app.screen.quadrant == "all" and app.screen.search == search
                    await show(pilot, quadrant, search)

                # A page key on the empty page says why there is no page, not that "all 0 samples" are on one.
                said.clear()
                await pilot.press("pagedown")
                assert said and "0 samples" not in said[-1] and "empty" in said[-1], said

                # The quadrant's own key says the search stays, and how to change it.
                said.clear()
                await pilot.press(str(QUADRANT_KEYS.index(quadrant) + 1))
                assert said and said[-1].startswith(f"Already showing quadrant {quadrant}"), said
                assert ("/ changes the search" in said[-1]) == bool(search), said
        finally:
            del app.notify      # the shared app's own notify again, for the next test, pass or fail

    looking.walk(walk, SIZE)
