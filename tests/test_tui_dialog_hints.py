"""Every dialog names its keys whole on one row at 80×24, however long its title (issue 54, case 8).

Compare's ``i`` put "esc closes" after the title in one wrapped text: at 80 columns "esc" ended a line and
"closes" stood alone on the next. The class: every modal screen of the TUI (found by walking workbench.tui, so a
new one is checked too, or this test says it is missing) is opened at 80 columns with its title built as the
product builds it, around the demo's run name and a long one, and its key hint must read whole on one row.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from textual.screen import ModalScreen

import workbench.tui
from tui_shared_a import running
from tuikit import SMALL, screen_lines, wait_for
from workbench.tui.dialogs import ChoiceDialog, ConfirmDialog, ErrorDialog, PromptDialog, TextDialog
from workbench.tui.help import HelpScreen
from workbench.tui.screens.retrieval import MissScreen
from workbench.tui.screens.run_form import RunForm

#: Run names as the product shows them: the demo's (Compare's `i` on prefs.model1 vs prefs.model2 split its hint
#: at 80 columns) and a long one `workbench run` makes. Each dialog is opened with each in its title.
NAMES = ("prefs.model1", "metaqa-k-sweep-b256-3c1f0e77")
PAGE = "The runs differ in 1 axis: other.\n\nother: source.side \"model1\" → \"model2\""


def _other(name: str) -> str:
    return name[:-1] + "2"


#: Each modal screen: how the product opens it (its title built around a run name), and the key hint it shows.
OPENED = {
    ErrorDialog: (lambda name: ErrorDialog(f"Cannot import /home/someone/data/{name}/samples.jsonl",
                                           "samples.jsonl:2: field 'question': missing"), "Close (Esc)"),
    ConfirmDialog: (lambda name: ConfirmDialog(f"Quit while {name} is executing? It stops after the job in progress "
                                               f"and keeps every finished job; resume it later with u in Runs or "
                                               f"`workbench resume {name}`."), "y yes   n no"),
    PromptDialog: (lambda name: PromptDialog(f"Export the tagged samples of {name} (12 tags) to (JSONL path)"),
                   "Enter to accept, Esc to cancel"),
    ChoiceDialog: (lambda name: ChoiceDialog(f"Run A (newest first; B − A is what the table shows; now {name})",
                                             [(name, name), (_other(name), _other(name))], name),
                   "↑/↓ move · Enter picks · Esc cancels"),
    TextDialog: (lambda name: TextDialog(f"A = {name}, B = {_other(name)}: what differs", PAGE),
                 "↑/↓ pgup/pgdn scroll · esc closes"),
    HelpScreen: (lambda name: HelpScreen(), "↑/↓ pgup/pgdn scroll · esc closes"),
    MissScreen: (lambda name: MissScreen(f"a question of {name}\n\nGold document x.md"),
                 "↑/↓ pgup/pgdn scroll · esc back"),
    RunForm: (lambda name: RunForm({name: 300}), "Enter next field · ctrl+s start · Esc cancel"),
}
#: The dialogs whose title is fixed text (the name goes elsewhere, if anywhere): opened once.
FIXED_TITLE = {HelpScreen, RunForm}


def modal_screens() -> set[type]:
    """Every modal screen class defined in workbench.tui (its modules walked, each imported)."""
    found = set()
    for info in pkgutil.walk_packages(workbench.tui.__path__, "workbench.tui."):
        module = importlib.import_module(info.name)
        found |= {c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, ModalScreen) and c.__module__ == info.name}
    return found


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One app on an empty database (the dialogs are opened over its first screen; none reads or writes data)."""
    yield from running(tmp_path_factory.mktemp("dialog-hints") / "wb.db")


def test_every_modal_screen_of_the_tui_is_listed_here():
    assert modal_screens() == set(OPENED), "a new dialog: add how it opens and its key hint to OPENED"


@pytest.mark.budget(15)     # eight dialogs, the help's table and the run form's model check among them
def test_every_dialogs_key_hint_reads_whole_on_one_row_at_80_columns(shared):
    """Each dialog of OPENED (every modal screen, by the test above), once per run name; one walk for all."""
    split = []

    async def look(pilot):
        app = pilot.app
        for dialog, (make, hint) in OPENED.items():
            for name in NAMES[:1] if dialog in FIXED_TITLE else NAMES:
                app.push_screen(make(name))
                await wait_for(pilot, lambda: isinstance(app.screen, dialog) and app.screen.is_mounted,
                               what=f"{dialog.__name__} open")
                await pilot.pause()
                shown = screen_lines(app)
                if not any(hint in row for row in shown):
                    split.append(f"{dialog.__name__} ({name}): {hint!r} not on one row of\n" + "\n".join(shown))
                app.pop_screen()

    shared.walk(look, SMALL)
    assert not split, "\n\n".join(split)


def test_the_datasets_import_prompt_asks_on_one_row_at_80_columns(shared):
    """Datasets' `i`: its question is fixed text, and it read "… samples.jsonl," with "retrieval.jsonl)" alone below."""

    async def look(pilot):
        app = pilot.app
        await pilot.press("d")
        await wait_for(pilot, lambda: app.current_mode == "datasets" and app.screen.loaded, what="Datasets")
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog), what="the import prompt")
        await pilot.pause()
        question = app.screen.question
        assert any(question in row for row in screen_lines(app)), "\n".join(screen_lines(app))

    shared.walk(look, SMALL)
