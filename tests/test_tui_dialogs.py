"""Dialogs read whole at 80×24: a long question or error wraps instead of being cut at the edge."""

from __future__ import annotations

import pytest

from conftest import copy_db
from tui_shared_a import running
from workbench.tui.dialogs import ConfirmDialog, ErrorDialog

from tuikit import SMALL, wait_for


@pytest.fixture(scope="module")
def shared(tmp_path_factory, swept_template):
    """One app on a copy of the swept database for the tests that do not change it (tests/tui_shared_a.py)."""
    yield from running(copy_db(swept_template, tmp_path_factory.mktemp("dialogs") / "wb.db"))


LONG = ("Quit while metaqa-98a508e8 is executing? It stops after the job in progress and keeps every finished "
        "job; resume it later with u in Runs or `workbench resume metaqa-98a508e8`.")


def shown_text(screen) -> str:
    """What the dialog's widgets draw on screen, line by line, as one string (wrapping undone)."""
    lines = []
    for widget in screen.query("Static, Label"):
        region = widget.content_region
        for y in range(region.height):
            lines.append(widget.render_line(y).text.strip())
    return " ".join(" ".join(lines).split())


def test_a_long_confirmation_wraps_so_every_word_is_on_screen(shared):
    async def look(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "ledger")
        app.push_screen(ConfirmDialog(LONG))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        question = app.screen.query_one("#question")
        # wrapped over several lines …
        await wait_for(pilot, lambda: question.content_region.height >= 3, what="the question wrapped")
        assert question.content_region.right <= SMALL[0]      # … inside the terminal
        assert "`workbench resume metaqa-98a508e8`." in shown_text(app.screen)

    shared.walk(look, SMALL)


def test_a_long_error_title_wraps_too(shared):
    async def look(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.current_mode == "ledger")
        app.show_error("Cannot import /a/very/long/path/that/a/user/typed/into/the/import/dialog/samples.jsonl",
                       "samples.jsonl:2: field 'question': missing")
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        # The end of the title, on its next line.
        await wait_for(pilot, lambda: "/import/dialog" in shown_text(app.screen)
                       and "/samples.jsonl" in shown_text(app.screen), what="the whole title on screen")

    shared.walk(look, SMALL)
