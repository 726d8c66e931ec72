"""Modal dialogs: help, errors, confirmation and single-line prompts."""

from __future__ import annotations

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
            yield Label(f"[b]{esc(self.title_text)}[/b]")
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
            yield Label(esc(self.question))
            yield Label("[b]y[/b] yes   [b]n[/b] no")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class PromptDialog(ModalScreen[str | None]):
    """Ask for one line of text (a path, a note, a search)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, value: str = "", placeholder: str = ""):
        super().__init__()
        self.question, self.value, self.placeholder = question, value, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(esc(self.question))
            yield Input(value=self.value, placeholder=self.placeholder, id="answer")
            yield Label("[dim]Enter to accept, Esc to cancel[/dim]")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


HELP = """\
[b]Everywhere[/b]
  d Datasets   r Runs   l Ledger   s Samples   v Retrieval   ? this help   ctrl+p command palette   q quit

[b]Datasets[/b]   i import a directory (kb/samples/retrieval.jsonl)   enter: runs of the dataset
[b]Runs[/b]       n new run   enter open its ledger   p pause   u resume   x delete (asks first)
[b]Ledger[/b]     b next budget B   f next format   m next run (model) of the dataset   o oracle plot
             space mark a cell (two marks: paired difference)   e exclude/keep tagged samples
             enter samples of the highlighted cell
[b]Samples[/b]    1 all  2 dissipation  3 leakage  4 interface loss  5 retrieval miss  6 right  7 unscored  8 errors
             / search   t filter by tag   pgdn/pgup or ] / \\[ page   g/G first/last page   enter detail
             A annotation-error  L alias-miss  R reasoning-fail  F format-fail  N note   X export tagged
[b]Retrieval[/b]  c doc/chunk level   enter open the highlighted miss (gold document vs retrieved)
[b]Detail[/b]     left/right previous/next cell   j/k next/previous sample   A L R F N tags and note   esc back
"""


class HelpScreen(ModalScreen[None]):
    """Every key of every screen."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help"):
            yield Label("[b]Dissipation Workbench: keys[/b]")
            yield Static(HELP)
