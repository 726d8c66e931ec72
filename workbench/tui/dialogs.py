"""Modal dialogs: help, errors, confirmation and single-line prompts."""

from __future__ import annotations

from typing import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from workbench.tui.markup import esc


class ErrorDialog(ModalScreen[None]):
    """Shows a worker's failure; the app keeps going."""

    BINDINGS = [Binding("escape,enter", "dismiss", "Close")]

    def __init__(self, title: str, message: str):
        super().__init__()
        self.title_text, self.message = title, message

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog error"):
            yield Static(f"[b]{esc(self.title_text)}[/b]")
            with VerticalScroll():
                yield Static(self.message, markup=False)
            yield Button("Close (Esc)", id="close", variant="error")

    def on_button_pressed(self) -> None:
        self.dismiss()


class ConfirmDialog(ModalScreen[bool]):
    """Yes/no; ``y`` confirms, ``n``/Esc cancels."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            # A Static wraps: a long question (a run to stop, how to resume it) is read whole.
            yield Static(esc(self.question), id="question")
            yield Label("[b]y[/b] yes   [b]n[/b] no")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class PromptDialog(ModalScreen[str | None]):
    """Ask for one line of text (a path, a note, a search).

    ``validate(value)`` returns why the value will not do (shown in the dialog, which stays
    open) or None to accept it: an Enter is never silently ignored.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, value: str = "", placeholder: str = "",
                 validate: Callable[[str], str | None] | None = None):
        super().__init__()
        self.question, self.value, self.placeholder, self.validate = question, value, placeholder, validate

    def compose(self) -> ComposeResult:
        # Statics, not Labels: a long question or problem wraps instead of being cut at the dialog's edge.
        with Vertical(classes="dialog"):
            yield Static(esc(self.question))
            yield Input(value=self.value, placeholder=self.placeholder, id="answer")
            yield Static("", id="problem", classes="problem")
            yield Label("[dim]Enter to accept, Esc to cancel[/dim]")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        problem = self.validate(event.value) if self.validate else None
        if problem:
            self.query_one("#problem", Static).update(f"[b]{esc(problem)}[/b]")
            return
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


# Keys that are not bindings of a screen class: widgets' own keys and dialogs.
EXTRA_KEYS = {
    "Everywhere": [("↑/↓", "move in tables and trees"), ("ctrl+p", "command palette (empty: every command)")],
    "New-run form": [("enter", "next field, or open the focused list"), ("tab/shift+tab", "next/previous field"),
                     ("space", "tick or untick the oracle box")],
    "Retrieval": [("esc", "close the miss (↑/↓ pgup/pgdn scroll it)")],
    "SearChain": [("tab", "focus the report to scroll it (or R)")],
    "SearChain tree": [("enter", "expand or collapse a branch (also space)")],
    "Help": [("↑/↓", "scroll (also pgup/pgdn, home/end)"), ("esc", "close (also ? and q)")],
}
KEY_NAMES = {"question_mark": "?", "slash": "/", "right_square_bracket": "]", "left_square_bracket": "[",
             "pagedown": "pgdn", "pageup": "pgup", "escape": "esc", "left": "←", "right": "→", "up": "↑",
             "down": "↓", "circumflex_accent": "^"}


def key_label(keys: str) -> str:
    """A binding's keys as a user types them: ``pagedown,right_square_bracket`` → ``pgdn/]``."""
    return "/".join(KEY_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))


def help_sections(app) -> list[tuple[str, list[tuple[str, str]]]]:
    """(screen, [(keys, what)]) for every screen, read from the BINDINGS themselves so the help cannot drift."""
    from workbench.tui.screens.detail import SampleDetailScreen
    from workbench.tui.screens.run_form import RunForm
    from workbench.tui.screens.searchain import ChainTreeScreen

    def keys(bindings) -> list[tuple[str, str]]:
        return [(key_label(b.key), b.description or b.action) for b in bindings]

    names = {b.action.split("'")[1]: b.description for b in app.BINDINGS if b.action.startswith("switch_mode(")}
    screens = [(names.get(mode, mode), cls) for mode, cls in app.MODES.items()]
    screens += [("New-run form", RunForm), ("Sample detail", SampleDetailScreen), ("SearChain tree", ChainTreeScreen)]
    sections = [("Everywhere", keys(app.BINDINGS) + EXTRA_KEYS["Everywhere"])]
    sections += [(title, keys(cls.BINDINGS) + EXTRA_KEYS.get(title, [])) for title, cls in screens]
    sections.append(("Help", EXTRA_KEYS["Help"]))
    return sections


def help_table(app, per_row: int = 2):
    """The help as a table: the screen, then ``per_row`` (key, what) pairs a row; long descriptions wrap."""
    from rich.table import Table

    table = Table(box=None, show_header=False, padding=(0, 1, 0, 0), expand=True)
    table.add_column("screen", style="bold", no_wrap=True)
    for _ in range(per_row):
        table.add_column("key", style="bold cyan", no_wrap=True, justify="right")
        table.add_column("what", ratio=1)
    for title, items in help_sections(app):
        rows = [items[i:i + per_row] for i in range(0, len(items), per_row)]
        for n, row in enumerate(rows):
            cells = [c for item in row for c in item] + ["", ""] * (per_row - len(row))
            table.add_row(title if n == 0 else "", *cells)
        table.add_row(*[""] * (1 + 2 * per_row))
    return table


class HelpScreen(ModalScreen[None]):
    """Every key of every screen, generated from the bindings; scrolls on a small terminal."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help"):
            yield Label("[b]Keys of every screen[/b]  [dim]↑/↓ pgup/pgdn scroll · esc closes[/dim]")
            with VerticalScroll(id="help-body"):
                # Two keys a row where they fit, one on a small terminal (no description cut short).
                yield Static(help_table(self.app, 2 if self.app.size.width >= 110 else 1), id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help-body", VerticalScroll).focus()
