"""Modal dialogs: errors, confirmation, single-line prompts, a choice from a list and a page of text."""

from __future__ import annotations

from typing import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from workbench.tui.markup import esc
from workbench.tui.says import CopyOrSay


class ErrorDialog(CopyOrSay, ModalScreen[None]):
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


class ConfirmDialog(CopyOrSay, ModalScreen[bool]):
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


class PromptDialog(CopyOrSay, ModalScreen[str | None]):
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


class ChoiceDialog(CopyOrSay, ModalScreen[str | None]):
    """Pick one of a list (e.g. a run): ↑/↓ move, Enter picks, Esc cancels (None).

    ``choices`` are (value, label) pairs; the label is markup, the value what the dialog returns.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, choices: list[tuple[str, str]], current: str | None = None):
        super().__init__()
        self.question, self.choices, self.current = question, choices, current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog choice"):
            yield Static(esc(self.question))
            yield OptionList(*[Option(label, id=value) for value, label in self.choices], id="choices")
            yield Label("[dim]↑/↓ move · Enter picks · Esc cancels[/dim]")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        values = [value for value, _ in self.choices]
        if self.current in values:
            options.highlighted = values.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TextDialog(CopyOrSay, ModalScreen[None]):
    """A page of plain text to read (scrolls with ↑/↓ pgup/pgdn); Esc closes."""

    BINDINGS = [Binding("escape", "dismiss", "Close")]

    def __init__(self, title: str, text: str):
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog text") as box:
            # The keys on the border, as on a miss (Retrieval): after the title they wrapped with it, and at 80
            # columns "esc" ended one line and "closes" stood alone on the next.
            box.border_subtitle = "↑/↓ pgup/pgdn scroll · esc closes"
            yield Static(f"[b]{esc(self.title_text)}[/b]", id="title")
            with VerticalScroll(id="text-body"):
                # Plain text: data (a config's JSON, a template) is shown as it is, brackets and backslashes too.
                yield Static(self.text, id="text", markup=False)

    def on_mount(self) -> None:
        self.query_one("#text-body", VerticalScroll).focus()
