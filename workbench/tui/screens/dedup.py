"""Dedup review: proposed merges by confidence band, both contexts side by side, one key to decide.

Accepting (a) or rejecting (x) a merge also labels the pair for the judge report (same /
different, via ``browse``); y / n label a pair without deciding. A label is kept apart from the
decision: clearing a decision (u) leaves the label. Decisions and labels are written by one
serial writer, in the order the keys were pressed.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Header, Static

from workbench.kg.merges import decide, decision_counts, proposals
from workbench.kg.runner import get_dedup_run
from workbench.store.labels import PairKey, default_annotator, labels_of, put_label
from workbench.store.lookup import NotFound
from workbench.tui.base import WorkbenchScreen
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.serial import SerialWrites
from workbench.tui.widgets import KeyFooter

BAND_ORDER = ("all", "high", "mid", "low", "below")
BAND_RANGES = {"all": ("0", "1"), "high": ("0.9", "1"), "mid": ("0.7", "0.9"), "low": ("0.5", "0.7"),
               "below": ("0", "0.5")}  # as workbench.kg.merges.BANDS, for display


def _proposals(store, run, mode, band, annotator):
    try:
        dedup = get_dedup_run(store, run)
    except NotFound:
        return None
    modes = dedup.config.modes
    mode = mode if mode in modes else modes[-1]
    labels = {(lab.key.a, lab.key.b): lab.label for lab in labels_of(store.conn, "dedup_pair", dedup.id)
              if lab.annotator == annotator}
    return (dedup.name, dedup.id, modes, mode,
            proposals(store, dedup.name, mode, band=band, only_coreferent=False),
            decision_counts(store, dedup.name), labels)


def plural(n: int, word: str) -> str:
    """``0 merges``, ``1 merge``, ``2 merges``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def decisions_note(mode: str, counts: dict[str, int]) -> str:
    """Where the reviewer's decisions are: each mode keeps its own, so say so when this one has none."""
    here = counts.get(mode, 0)
    elsewhere = [f"{m} ({n})" for m, n in counts.items() if m != mode and n]
    if here or not elsewhere:
        return f"{plural(here, 'decision')} in this mode"
    return (f"no decisions in mode {mode}; decisions are per mode, made in {', '.join(elsewhere)} "
            "(m switches mode)")


def _decide(store, run, run_id, a, b, mode, decision, annotator):
    """The decision, then (accept or reject) the label it implies: two transactions, the label kept apart."""
    decide(store, run, a, b, mode, decision)
    if decision is not None:
        put_label(store, PairKey(run_id, min(a, b), max(a, b)), decision == "accepted", annotator, via="browse")
    return a, b, decision


def _label(store, run_id, a, b, label, annotator):
    put_label(store, PairKey(run_id, min(a, b), max(a, b)), label, annotator, via="browse")
    return a, b, label


def label_mark(label: bool | None) -> str:
    """A pair's label in the list: what the annotator said, apart from the decision."""
    return "" if label is None else ("✔ same" if label else "✘ diff")


class DedupScreen(SerialWrites, WorkbenchScreen):
    """The latest dedup run's judged pairs; a accepts, x rejects (or reverts), u clears the decision; y/n label."""

    BINDINGS = [Binding("a", "decide('accepted')", "Accept"), Binding("x", "decide('rejected')", "Reject/revert"),
                Binding("u", "decide(None)", "Clear"), Binding("b", "next_band", "Band"),
                Binding("m", "next_mode", "Mode"), Binding("y", "label(True)", "Same"),
                Binding("n", "label(False)", "Different")]

    def __init__(self):
        super().__init__()
        self.annotator = default_annotator()
        self.run: str | None = None
        self.run_id: int | None = None
        self.labels: dict[tuple[int, int], bool] = {}
        self.mode: str | None = None
        self.modes: tuple[str, ...] = ()
        self.band = "all"
        self.items: list = []
        self.decisions: dict[str, int] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        table = DataTable(id="pairs", cursor_type="row", zebra_stripes=True)
        table.add_columns("conf", "judge", "decision", "label", "entity 1", "entity 2", "found by")
        yield table
        with Horizontal(id="contexts"):
            with VerticalScroll():
                yield Static("", id="context-a")
            with VerticalScroll():
                yield Static("", id="context-b")
        yield KeyFooter()

    @property
    def loaded(self) -> bool:
        return super().loaded and self.writes_owed == 0

    def reload(self) -> None:
        self.load("pairs", _proposals, self.run, self.mode, self.band, self.annotator)

    def on_screen_resume(self) -> None:
        self.reload()

    def on_data_changed(self, message: DataChanged) -> None:
        self.reload()

    def on_loaded(self, message: Loaded) -> None:
        if message.what in ("decided", "labelled"):
            self.serial_done(message.what)
            self.reload()
            return
        if message.what != "pairs":
            return
        if message.payload is None:
            self.query_one("#heading", Static).update(
                "[b]Dedup[/b]  no dedup runs yet. In a shell: `workbench dedup import sample_data/dedup`, then "
                "`workbench dedup run dedup`; this screen then fills in.")
            return
        self.run, self.run_id, self.modes, self.mode, self.items, self.decisions, self.labels = message.payload
        merged = sum(p.merged for p in self.items)
        self.query_one("#heading", Static).update(
            f"[b]Dedup[/b]  {esc(self.run)} · mode {self.mode} (m) · band {self.band} (b) · "
            f"{plural(len(self.items), 'pair')}, {plural(merged, 'merge')} · "
            f"{esc(decisions_note(self.mode, self.decisions))}  "
            "[dim]a accept · x reject/revert · u clear · y/n label only[/dim]")
        table = self.query_one("#pairs", DataTable)
        cursor = table.cursor_row
        table.clear()
        for p in self.items:
            decision = p.decision or ("→ merge" if p.merged else "—")
            table.add_row(f"{p.confidence:.2f}", "same" if p.is_coreferent else "different", decision,
                          label_mark(self.labels.get((p.a, p.b))), p.name_a, p.name_b, p.reasons, key=f"{p.a}-{p.b}")
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
            # An empty band must not look like a broken screen.
            lo, hi = BAND_RANGES[self.band]
            a.update(f"[b]No pairs in band {self.band}[/b] (confidence {lo}–{hi}, mode {esc(self.mode or '')}).\n\n"
                     "[dim]b: next band · m: next mode[/dim]" if self.run else "")
            b.update("")
            return
        a.update(f"[b]{esc(p.name_a)}[/b]\n{esc(p.context_a)}\n\n[dim]judge: {esc(p.rationale)}[/dim]")
        b.update(f"[b]{esc(p.name_b)}[/b]\n{esc(p.context_b)}")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_contexts()

    def _nothing_here(self) -> bool:
        """Say why a key for the highlighted pair, band or mode has nothing to act on."""
        if self.run is None:
            self.notify("No dedup run yet: `workbench dedup import DIR`, then `workbench dedup run NAME`.", timeout=5)
            return True
        return False

    def _no_pair(self) -> bool:
        if self._nothing_here():
            return True
        if self._current() is None:
            self.notify(f"No pair in band {self.band} (mode {self.mode}): b shows the next band.", timeout=4)
            return True
        return False

    def action_decide(self, decision: str | None) -> None:
        p = self._current()
        if self._no_pair():
            return
        if decision is None and p.decision is None:
            self.notify(f"No decision to clear on {p.name_a} ~ {p.name_b}.", timeout=3)
        else:
            # Serial, not a load: a load asked for while one runs replaces the one waiting, losing a decision.
            self.serial_write("decided", _decide, self.run, self.run_id, p.a, p.b, self.mode, decision,
                              self.annotator)
        self._next_row()

    def action_label(self, label: bool) -> None:
        p = self._current()
        if not self._no_pair():
            self.serial_write("labelled", _label, self.run_id, p.a, p.b, label, self.annotator)
            self._next_row()

    def _next_row(self) -> None:
        table = self.query_one("#pairs", DataTable)
        if table.cursor_row < len(self.items) - 1:
            table.move_cursor(row=table.cursor_row + 1)
        else:
            self.notify(f"That was the last pair in band {self.band} (b: next band).", timeout=3)

    def action_next_band(self) -> None:
        if self._nothing_here():
            return
        self.band = BAND_ORDER[(BAND_ORDER.index(self.band) + 1) % len(BAND_ORDER)]
        self.reload()

    def action_next_mode(self) -> None:
        if self._nothing_here():
            return
        if len(self.modes) < 2:
            self.notify(f"This run was judged in one mode only: {self.mode}.", timeout=3)
            return
        if self.modes:
            self.mode = self.modes[(self.modes.index(self.mode) + 1) % len(self.modes)]
            self.reload()
