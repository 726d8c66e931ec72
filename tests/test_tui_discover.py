"""Discoverability: the help lists every key of every screen and scrolls; the palette lists the commands."""

from __future__ import annotations

import pytest
from textual.command import CommandPalette
from textual.containers import VerticalScroll

from conftest import copy_db
from tui_shared_a import running
from tuikit import SIZE, SMALL, footer_line, palette_highlights, run_from_palette, settle, snap_app, type_text, wait_for
from workbench.tui.help import HelpScreen, help_sections, help_table, key_label


@pytest.fixture(scope="module")
def shared(tmp_path_factory, swept_template):
    """One app on a copy of the swept database for these tests: they only look and press keys (tests/tui_shared_a.py)."""
    yield from running(copy_db(swept_template, tmp_path_factory.mktemp("discover") / "wb.db"))


def _help_text(app) -> str:
    """The help as a user reads it: the rendered table as plain text."""
    from rich.console import Console

    console = Console(width=100, record=True, file=open("/dev/null", "w"))
    console.print(help_table(app))
    return " ".join(console.export_text().split())


def test_help_lists_every_binding_of_every_screen_and_scrolls_at_80x24(shared):
    async def look(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "ledger")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = _help_text(app)
        # The keys the hand-written help forgot: SearChain and Dedup screens, Samples 9, Dedup keys.
        for line in ("h SearChain", "D Dedup", "9 unsupported", "a Accept", "x Reject/revert", "b Band",
                     "m Next run", "e Expand all"):
            assert line in text, line
        # The new-run form's keys, as they are: enter moves on, ctrl+s starts.
        assert "ctrl+s Start" in text and "enter next field" in text and "start (also ctrl+s" not in text
        shown = {(title, key, what) for title, items in help_sections(app) for key, what in items}
        names = {b.description: b.action for b in app.BINDINGS}
        for mode, screen in app.MODES.items():
            title = next(n for n, action in names.items() if action == f"switch_mode('{mode}')")
            for binding in screen.BINDINGS:
                assert (title, key_label(binding.key), binding.description) in shown, (mode, binding.key)
                assert binding.description in text
        body = app.screen.query_one("#help-body", VerticalScroll)
        assert body.max_scroll_y > 0 and body.scroll_y == 0      # longer than 24 rows: it scrolls
        await pilot.press("end")
        await wait_for(pilot, lambda: body.scroll_y == body.max_scroll_y)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

    shared.walk(look, SMALL)


def test_snapshot_help_at_80x24_scrolled_to_the_end(snap_compare, swept_db):
    async def open_help(pilot):
        app = pilot.app
        await settle(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        body = app.screen.query_one("#help-body", VerticalScroll)
        await wait_for(pilot, lambda: body.max_scroll_y > 0, what="the help laid out")
        await pilot.press("end")
        await wait_for(pilot, lambda: body.scroll_y == body.max_scroll_y, what="the help scrolled to its end")

    assert snap_compare(snap_app(swept_db), terminal_size=SMALL, run_before=open_help)


def _palette_prompts(app) -> list[str]:
    options = app.screen.query_one("CommandList")
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


def test_the_empty_palette_lists_the_workbench_commands_and_starts_a_new_run(shared):
    from workbench.tui.screens.run_form import RunForm

    async def look(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "ledger")
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette)
                       and any("New run" in p for p in _palette_prompts(app)))
        prompts = "\n".join(_palette_prompts(app))
        for command in ("New run", "Pause run", "Resume run", "Import dataset", "Go to Datasets", "Go to Runs",
                        "Go to Ledger", "Go to Samples", "Go to Retrieval", "Go to SearChain", "Go to Dedup",
                        "Open ledger of run sweep", "Help: keys"):
            assert command in prompts, command
        assert "Searchain" not in prompts
        await type_text(pilot, "New run")
        await wait_for(pilot, lambda: palette_highlights(app, "New run"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunForm))
        assert app.current_mode == "runs"

    shared.walk(look, SIZE)


def test_palette_pause_with_nothing_running_says_so(shared):
    async def look(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "ledger")
        await run_from_palette(pilot, app, "Pause run")
        await wait_for(pilot, lambda: any("nothing to pause" in str(n.message) for n in app._notifications))

    shared.walk(look, SIZE)


def test_every_screen_names_help_and_the_palette_in_its_header_and_keeps_its_keys_at_80x24(shared):
    """However narrow the footer, the header says where every key is listed."""
    from workbench.tui.widgets import KeyFooter

    async def look(pilot):
        app = pilot.app
        for key, mode in (("d", "datasets"), ("r", "runs"), ("l", "ledger"), ("s", "samples"), ("v", "retrieval"),
                          ("h", "searchain"), ("D", "dedup")):
            await pilot.press(key)
            await wait_for(pilot, lambda: app.current_mode == mode)
            title = str(app.screen.query_one("HeaderTitle").render())
            assert "? keys" in title and "ctrl+p commands" in title, (mode, title)
            footer = app.screen.query_one("Footer")
            assert isinstance(footer, KeyFooter) and footer.compact, mode
            # enter is each screen's main action: the focused table's own hidden enter must not hide it.
            enter = next((b for b in type(app.screen).BINDINGS if b.key == "enter"), None)
            if enter is not None:
                await wait_for(pilot, lambda: f"⏎ {enter.description}" in footer_line(app),
                               what=f"⏎ {enter.description} in the footer of {mode}")

    shared.walk(look, SMALL)
