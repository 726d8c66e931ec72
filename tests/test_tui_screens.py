"""The newcomer pass on Datasets, Retrieval, Dedup and SearChain, driven by keys.

SearChain and Dedup reuse the real-model fixtures of their own test modules.
"""

from __future__ import annotations

import shutil

import pytest
from textual.containers import VerticalScroll

from conftest import copy_db
from tui_shared_a import running
from tui_shared_b import import_prompt, typed
from tuikit import SIZE, SMALL, footer_line, heading, screen_text, settle, settled_after, snap_app, until_loaded, wait_for
from workbench.store import open_store
from workbench.tui.app import WorkbenchApp
from workbench.tui.dialogs import ErrorDialog, PromptDialog


@pytest.fixture(scope="module")
def shared_corpus(tmp_path_factory, corpus_template):
    """One app on a copy of corpus_db for the Retrieval tests: they only look and press keys (tests/tui_shared_a.py)."""
    yield from running(copy_db(corpus_template, tmp_path_factory.mktemp("retrieval") / "hc.db"))


# -- Datasets ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared_empty(tmp_path_factory, empty_template):
    """One app on an empty database for the imports that are refused (each asserts nothing was imported)."""
    db = copy_db(empty_template, tmp_path_factory.mktemp("refused-imports") / "new.db")
    yield from running(db)
    store = open_store(db)
    try:
        assert store.count("datasets") == 0, "a refused import wrote a dataset"
    finally:
        store.close()


def test_import_prompt_shows_a_hint_and_an_empty_enter_says_what_is_needed(shared_empty):
    async def look(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "datasets")
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog))
        field = app.screen.query_one("Input")
        assert field.value == "" and field.placeholder.startswith("a directory, e.g.")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "kb.jsonl" in str(app.screen.query_one("#problem").render()),
                       what="the prompt saying what it needs")
        assert isinstance(app.screen, PromptDialog)        # still asking, and saying for what

    shared_empty.walk(look, SIZE)


def test_a_bad_path_is_refused_in_a_dialog_before_the_name_is_asked_and_the_app_keeps_going(shared_empty, tmp_path):
    """A failing worker (the import's check of the path) shows an error dialog; Esc, and the app goes on."""
    async def look(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "datasets")
        await import_prompt(pilot)
        await typed(pilot, str(tmp_path / "no-such-dir"))
        await pilot.press("enter")  # refused before the name is asked
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        assert app.screen.title_text == "Cannot import" and "no-such-dir: not found" in app.screen.message
        await pilot.press("escape")
        assert not isinstance(app.screen, (ErrorDialog, PromptDialog))  # no name prompt behind it
        await pilot.press("r")
        await wait_for(pilot, lambda: app.current_mode == "runs")

    shared_empty.walk(look, SIZE)


def test_a_rejected_file_names_file_line_and_field_and_the_status_clears(shared_empty, tmp_path, tiny_dir):
    bad = shutil.copytree(tiny_dir, tmp_path / "bad")
    lines = (bad / "samples.jsonl").read_text().splitlines()
    lines[1] = '{"id": "q2", "answers": ["x"], "gold_paths": []}'       # no question
    (bad / "samples.jsonl").write_text("\n".join(lines) + "\n")

    async def look(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "datasets")
        await import_prompt(pilot)
        await typed(pilot, str(bad))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog) and "name" in app.screen.question)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        assert app.screen.title_text == "Cannot import"
        assert "samples.jsonl:2:" in app.screen.message and "question" in app.screen.message
        await pilot.press("escape")
        assert "importing" not in str(app.screen.query_one("#status").render())

    shared_empty.walk(look, SIZE)


async def test_enter_on_a_dataset_opens_the_runs_of_that_dataset(swept_db, tiny_dir):
    store = open_store(swept_db)
    from workbench.data.importer import import_dataset

    import_dataset(store, tiny_dir, "tiny")       # a second dataset, without runs
    store.close()
    app = WorkbenchApp(swept_db)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("d")
        table = app.screen.query_one("#datasets")
        await wait_for(pilot, lambda: app.current_mode == "datasets" and table.row_count == 2)
        await pilot.press("enter")                # metaqa: its run "sweep" is selected
        await wait_for(pilot, lambda: app.current_mode == "runs")
        assert app.dataset_filter == "metaqa" and app.run_name == "sweep"
        await wait_for(pilot, lambda: any("1 run of metaqa" in str(n.message) for n in app._notifications))
        await pilot.press("d")
        await wait_for(pilot, lambda: app.current_mode == "datasets")
        await pilot.press("down", "enter")        # tiny: no runs yet, and the user is told how to start one
        await wait_for(pilot, lambda: app.current_mode == "runs" and app.dataset_filter == "tiny")
        await wait_for(pilot, lambda: any("No runs of tiny yet" in str(n.message) for n in app._notifications))
        # The list really is narrowed: metaqa's run is not shown, the greeting offers a run on tiny.
        await wait_for(pilot, lambda: "Runs of tiny (0 of 1)" in heading(app))
        runs = app.screen.query_one("#runs")
        assert not runs.display and "start one on tiny" in str(app.screen.query_one("#welcome").render())
        await pilot.press("a")                    # every dataset's runs again
        await wait_for(pilot, lambda: app.dataset_filter is None and runs.display and runs.row_count == 1)
        assert "a: all runs" not in heading(app)


# -- Retrieval (corpus_db: sample_data/howtocook with filename questions and BM25 results, in conftest) ----
def test_retrieval_paints_a_quick_pass_then_refines_and_reopens_without_recomputing(shared_corpus, monkeypatch):
    from workbench.tui.screens.retrieval import QUICK_RESAMPLES, RESAMPLES, RetrievalScreen

    painted = []                                   # the bootstrap size behind each picture, in order
    draw = RetrievalScreen._draw
    monkeypatch.setattr(RetrievalScreen, "_draw",
                        lambda self: (painted.append(self.report and self.report.resamples), draw(self))[1])
    async def look(pilot):
        app = pilot.app
        await pilot.press("v")
        screen = app.screen
        await wait_for(pilot, lambda: screen.report is not None and screen.report.resamples == RESAMPLES)
        assert painted[:2] == [QUICK_RESAMPLES, RESAMPLES]    # the quick pass paints first, then the CIs are refined
        full, draws = screen.report, len(painted)
        await pilot.press("d")
        await pilot.press("v")
        await until_loaded(pilot, "retrieval")
        assert app.screen is screen and screen.report is full   # unchanged data: nothing recomputed
        assert all(n == RESAMPLES for n in painted[draws:])

    shared_corpus.walk(look, SIZE)


def test_retrieval_side_panel_column_and_miss_are_readable_at_80x24(shared_corpus):
    from workbench.tui.screens.retrieval import RESAMPLES

    async def look(pilot):
        app = pilot.app
        await pilot.press("v")
        screen = app.screen
        await wait_for(pilot, lambda: screen.report is not None and screen.report.resamples == RESAMPLES)
        await until_loaded(pilot, "retrieval")
        side = screen.query_one("#side-scroll", VerticalScroll)
        # 36 metric lines in a short panel: it scrolls.
        await wait_for(pilot, lambda: side.max_scroll_y > 0, what="the side panel scrolling")
        table = screen.query_one("#misses")
        columns = list(table.columns.values())
        assert "retrieved instead" in str(columns[2].label)
        assert all(len(str(c.label)) <= c.width for c in columns)                    # no heading cut
        assert sum(c.get_render_width(table) for c in columns) <= table.size.width   # all three on screen
        assert columns[2].width >= 15
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "MissScreen")
        # The first miss's question got no document back: the section says so rather than stay empty.
        assert not screen.report.misses[0]["retrieved"]
        assert "the retriever returned no document" in str(app.screen.query_one("#miss-text").render())
        body = app.screen.query_one("#miss-body", VerticalScroll)
        await wait_for(pilot, lambda: body.max_scroll_y > 0, what="the miss scrolling")
        await pilot.press("end")
        await wait_for(pilot, lambda: body.scroll_y == body.max_scroll_y)

    shared_corpus.walk(look, SMALL)


def test_retrieval_arrows_move_through_the_misses_and_tab_is_in_the_footer(shared_corpus):
    from workbench.tui.help import help_sections

    async def look(pilot):
        app = pilot.app
        await pilot.press("v")
        screen = await until_loaded(pilot, "retrieval")
        table = screen.query_one("#misses")
        side = screen.query_one("#side-scroll", VerticalScroll)
        assert table.row_count > 1 and app.focused is table
        await pilot.press("down")
        await wait_for(pilot, lambda: table.cursor_row == 1, what="↓ moving to the second miss")
        assert side.scroll_y == 0
        await pilot.press("tab")
        await wait_for(pilot, lambda: app.focused is side, what="tab moving to the metrics panel")
        assert "tab Misses/metrics" in footer_line(app)    # a key of the screen, shown where its keys are

    shared_corpus.walk(look, SMALL)
    retrieval = dict(help_sections(shared_corpus.app))["Retrieval"]
    assert ("tab", "Misses/metrics") in retrieval


def test_retrieval_screen_shows_curves_and_opens_a_miss(shared_corpus):
    async def look(pilot):
        app = pilot.app
        await pilot.press("v")
        await wait_for(pilot, lambda: app.current_mode == "retrieval" and app.screen.report is not None)
        assert "Recall@k" in str(app.screen.query_one("#curves").render())
        assert "recall@5" in str(app.screen.query_one("#side").render())
        assert app.screen.query_one("#misses").row_count == len(app.screen.report.misses) > 0
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "MissScreen")
        assert "Gold document" in str(app.screen.query_one("Static").render())
        await pilot.press("escape", "c")
        await wait_for(pilot, lambda: "chunk-level" in heading(app))

    shared_corpus.walk(look, SIZE)


async def test_n_shows_the_next_stored_retriever_of_the_corpus(corpus_db):
    from workbench.retrieval.runs import retrieve

    store = open_store(corpus_db)
    retrieve(store, name="bigrams", mode="bigram", k=10)         # a second retriever on the same corpus
    store.close()
    app = WorkbenchApp(corpus_db)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("v")
        await wait_for(pilot, lambda: app.current_mode == "retrieval" and app.screen.report is not None)
        assert app.screen.report.retriever == "bm25" and "(n: next of 2)" in heading(app)
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.report is not None and app.screen.report.retriever == "bigrams")
        assert "bigrams" in heading(app)
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen.report is not None and app.screen.report.retriever == "bm25")


def test_snapshot_retrieval_at_80x24(snap_compare, corpus_db):
    assert snap_compare(snap_app(corpus_db), terminal_size=SMALL, run_before=settled_after(("v", "retrieval")))


# -- Dedup (judged_db: conftest) -----------------------------------------------------------------
async def test_dedup_says_when_a_band_is_empty_pluralises_and_explains_per_mode_decisions(judged_db):
    app = WorkbenchApp(judged_db)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("D")
        screen = await until_loaded(pilot, "dedup")
        assert "review" in heading(app)
        merged = sum(p.merged for p in screen.items)
        assert f"{merged} merge{'' if merged == 1 else 's'} ·" in heading(app)   # "0 merges", "1 merge"
        assert "0 decisions in this mode" in heading(app)
        await pilot.press("a")                                 # decided in graph+text …
        await wait_for(pilot, lambda: "1 decision in this mode" in heading(app))
        await pilot.press("m")                                 # … and graph mode says where that decision is
        await wait_for(pilot, lambda: screen.mode == "graph" and "mode graph (m)" in heading(app))
        assert "decisions are per mode, made in graph+text (1)" in heading(app)
        empty = []
        for _ in range(4):                                     # high, mid, low, below
            band = screen.band
            await pilot.press("b")
            await wait_for(pilot, lambda: screen.band != band and f"band {screen.band} (b)" in heading(app))
            if not screen.items:
                empty.append(screen.band)
                text = str(screen.query_one("#context-a").render())
                assert f"No pairs in band {screen.band}" in text and "b: next band" in text
        assert empty, "the tiny KG has an empty band"


# -- SearChain (chained_db: conftest) ------------------------------------------------------------
def test_searchain_sample_list_keeps_rows_at_80x24(snap_compare, chained_db):
    """The report scrolls in its own box; the sample list below it keeps its rows (one real-model fixture)."""

    async def open_searchain(pilot):
        app = pilot.app
        await pilot.press("h")
        await settle(pilot, "searchain")
        assert "chains" in heading(app)
        table = app.screen.query_one("#chains")
        assert table.row_count == 2 and table.size.height >= 3      # header + both samples visible
        report = app.screen.query_one("#report-scroll", VerticalScroll)
        assert report.max_scroll_y > 0                              # the rest of the report scrolls
        assert "cover-EM" in screen_text(app)

    assert snap_compare(snap_app(chained_db), terminal_size=SMALL, run_before=open_searchain)
