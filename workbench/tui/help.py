"""The help screen (?): every key of every screen, generated from the bindings so it cannot drift."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from workbench.tui.says import CopyOrSay
from workbench.tui.screens.compare import FlipDetailScreen
from workbench.tui.screens.detail import SampleDetailScreen
from workbench.tui.screens.meta_instances import MetaInstanceScreen, MetaInstancesScreen
from workbench.tui.screens.run_form import RunForm
from workbench.tui.screens.searchain import ChainTreeScreen

# Keys that are not bindings of a screen class: widgets' own keys and dialogs.
EXTRA_KEYS = {
    "Everywhere": [("↑/↓", "move in tables and trees"), ("ctrl+p", "command palette (empty: every command)")],
    "New-run form": [("enter", "next field, or open the focused list"), ("tab/shift+tab", "next/previous field"),
                     ("space", "tick or untick the oracle box")],
    "Retrieval": [("esc", "close the miss (↑/↓ pgup/pgdn scroll it)")],
    "SearChain": [("tab", "focus the report to scroll it (or R)")],
    "SearChain tree": [("enter", "expand or collapse a branch (also space)")],
    "Compare": [("tab", "between the cells and the highlighted cell's flips"),
                ("a/b, then enter", "pick the highlighted run (↑/↓ move, esc cancels)")],
    "Compare flip": [("tab", "the other pane (↑/↓ pgup/pgdn scroll it)")],
    "Labels": [("↑/↓", "scroll the item (also pgup/pgdn)"), ("s at the end", "go through the skipped items again"),
               ("tab", "the report: κ, and people's preferences with a meta set (↑/↓ scroll it)")],
    "Meta": [("m, then enter", "pick the highlighted meta set (↑/↓ move, esc cancels)")],
    "Meta instance": [("tab", "the next pane: reference, response 1, response 2 (↑/↓ pgup/pgdn scroll it)")],
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

    def keys(bindings) -> list[tuple[str, str]]:
        return [(key_label(b.key), b.description or b.action) for b in bindings]

    names = {b.action.split("'")[1]: b.description for b in app.BINDINGS if b.action.startswith("switch_mode(")}
    screens = [(names.get(mode, mode), cls) for mode, cls in app.MODES.items()]
    screens += [("Compare flip", FlipDetailScreen), ("Meta instances", MetaInstancesScreen),
                ("Meta instance", MetaInstanceScreen), ("New-run form", RunForm), ("Sample detail", SampleDetailScreen),
                ("SearChain tree", ChainTreeScreen)]
    sections = [("Everywhere", keys(app.BINDINGS) + EXTRA_KEYS["Everywhere"])]
    sections += [(title, keys(cls.BINDINGS) + EXTRA_KEYS.get(title, [])) for title, cls in screens]
    sections.append(("Help", EXTRA_KEYS["Help"]))
    return sections


def help_table(app, per_row: int = 2) -> Table:
    """The help as a table: the screen, then ``per_row`` (key, what) pairs a row; long descriptions wrap."""
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


class HelpScreen(CopyOrSay, ModalScreen[None]):
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
