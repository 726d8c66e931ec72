"""Dedup review: proposed merges by confidence band, both contexts side by side, one key to decide."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static

from workbench.tui.app import WorkbenchScreen
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded

BAND_ORDER = ("all", "high", "mid", "low", "below")


def _proposals(store, run, mode, band):
    from workbench.kg.merges import proposals
    from workbench.kg.runner import get_dedup_run

    try:
        _, name, _, config = get_dedup_run(store, run)
    except ValueError:
        return None
    mode = mode if mode in config.modes else config.modes[-1]
    return name, config.modes, mode, proposals(store, name, mode, band=band, only_coreferent=False)


def _decide(store, run, a, b, mode, decision):
    from workbench.kg.merges import decide

    decide(store, run, a, b, mode, decision)
    return a, b, decision


class DedupScreen(WorkbenchScreen):
    """The latest dedup run's judged pairs; a accepts, x rejects (or reverts), u clears the decision."""

    BINDINGS = [Binding("a", "decide('accepted')", "Accept"), Binding("x", "decide('rejected')", "Reject/revert"),
                Binding("u", "decide(None)", "Clear"), Binding("b", "next_band", "Band"),
                Binding("m", "next_mode", "Mode")]

    def __init__(self):
        super().__init__()
        self.run: str | None = None
        self.mode: str | None = None
        self.modes: tuple[str, ...] = ()
        self.band = "all"
        self.items: list = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        table = DataTable(id="pairs", cursor_type="row", zebra_stripes=True)
        table.add_columns("conf", "judge", "decision", "entity 1", "entity 2", "found by")
        yield table
        with Horizontal(id="contexts"):
            with VerticalScroll():
                yield Static("", id="context-a")
            with VerticalScroll():
                yield Static("", id="context-b")
        yield Footer()

    def reload(self) -> None:
        self.load("pairs", _proposals, self.run, self.mode, self.band)

    def on_screen_resume(self) -> None:
        self.reload()

    def on_data_changed(self, message: DataChanged) -> None:
        self.reload()

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "decided":
            self.reload()
            return
        if message.what != "pairs":
            return
        if message.payload is None:
            self.query_one("#heading", Static).update(
                "[b]Dedup[/b]  no dedup runs yet: `workbench dedup import sample_data/dedup` then `workbench dedup run`")
            return
        self.run, self.modes, self.mode, self.items = message.payload
        merged = sum(p.merged for p in self.items)
        self.query_one("#heading", Static).update(
            f"[b]Dedup[/b]  {esc(self.run)} · mode {self.mode} (m) · band {self.band} (b) · {len(self.items)} pairs, "
            f"{merged} merge  [dim]a accept · x reject/revert · u clear[/dim]")
        table = self.query_one("#pairs", DataTable)
        cursor = table.cursor_row
        table.clear()
        for p in self.items:
            decision = p.decision or ("→ merge" if p.merged else "—")
            table.add_row(f"{p.confidence:.2f}", "same" if p.is_coreferent else "different", decision,
                          p.name_a, p.name_b, p.reasons, key=f"{p.a}-{p.b}")
        if self.items:
            table.move_cursor(row=min(cursor, len(self.items) - 1))
        self._show_contexts()

    def _current(self):
        table = self.query_one("#pairs", DataTable)
        return self.items[table.cursor_row] if self.items and table.cursor_row < len(self.items) else None

    def _show_contexts(self) -> None:
        p = self._current()
        a = self.query_one("#context-a", Static)
        b = self.query_one("#context-b", Static)
        if p is None:
            a.update("")
            b.update("")
            return
        a.update(f"[b]{esc(p.name_a)}[/b]\n{esc(p.context_a)}\n\n[dim]judge: {esc(p.rationale)}[/dim]")
        b.update(f"[b]{esc(p.name_b)}[/b]\n{esc(p.context_b)}")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_contexts()

    def action_decide(self, decision: str | None) -> None:
        p = self._current()
        if p is not None:
            self.load("decided", _decide, self.run, p.a, p.b, self.mode, decision)
            table = self.query_one("#pairs", DataTable)
            if table.cursor_row < len(self.items) - 1:
                table.move_cursor(row=table.cursor_row + 1)

    def action_next_band(self) -> None:
        self.band = BAND_ORDER[(BAND_ORDER.index(self.band) + 1) % len(BAND_ORDER)]
        self.reload()

    def action_next_mode(self) -> None:
        if self.modes:
            self.mode = self.modes[(self.modes.index(self.mode) + 1) % len(self.modes)]
            self.reload()
