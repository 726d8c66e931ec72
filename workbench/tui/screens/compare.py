"""Compare: run B against run A cell by cell (paired deltas with CIs, Holm-adjusted tests), and the flips by stage.

The numbers are ``workbench.compare``'s (the same as ``workbench compare A B``); this screen
only picks the runs, lays the deltas out as a table, and opens a flipped sample in both
runs side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from workbench.metrics.stats import RESAMPLES as SHOWN_RESAMPLES
from workbench.compare import compare_runs
from workbench.compare.render import ARROWS
from workbench.compare.report import CellDelta, Comparison
from workbench.store.lookup import NotFound
from workbench.store.queries import get_run, list_runs, load_samples
from workbench.tui.base import WorkbenchScreen
from workbench.tui.dialogs import ChoiceDialog, TextDialog
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.screens.compare_flip import WAYS, FlipDetailScreen
from workbench.tui.columns import cell as cell_text
from workbench.tui.columns import columns_that_fit, natural
from workbench.tui.widgets import KeyFooter, fit_tail
from workbench.tui.compare_text import (FLIP_ROWS, axes_line, cell_label, differences_lines, flip_rows, flips_line,
                                        sentence, term_cell)

TERMS: tuple[str, ...] = ("S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "D_rate")
QUICK_RESAMPLES, RESAMPLES = 200, SHOWN_RESAMPLES   # the full pass: the CLI's interval
TERM_WIDTH = 15            # "[-0.232,-0.136]", the interval line of a delta
VIEWS = ("delta", "values", "p")
VIEW_NAMES = {"delta": "B − A [95% CI]", "values": "A → B", "p": "p, then p(Holm)"}
TERM_KEYS = Binding.Group("Terms", compact=True)


@dataclass
class CompareView:
    """What a compare worker returns: the runs to pick from, the pair shown and its comparison, or why there is none."""

    requested: tuple[str | None, str | None]   # the (A, B) asked for: a result for an older pick is dropped
    runs: list[dict]
    a: str | None
    b: str | None
    comparison: Comparison | None = None
    problem: str | None = None
    questions: dict[str, str] = field(default_factory=dict)   # flipped sample id → its question


def default_pair(runs: list[dict]) -> tuple[str | None, str | None]:
    """B = the newest run with a job done (a run just planned has nothing to compare yet); A = the newest other such
    run over B's dataset, else the second newest (None if none). Without any job done anywhere, the newest runs."""
    if not runs:
        return None, None
    answered = [r for r in runs if r.get("done")] or runs
    b = answered[-1]["name"]
    return partner(runs, b), b


def partner(runs: list[dict], name: str) -> str | None:
    """The newest run other than ``name`` over its dataset, else the newest other run (None if there is none);
    runs with a job done first."""
    dataset = next(r["dataset"] for r in runs if r["name"] == name)
    others = [r for r in runs if r["name"] != name]
    others = [r for r in others if r.get("done")] or others
    same = [r for r in others if r["dataset"] == dataset]
    return (same or others)[-1]["name"] if others else None


def _compare(store, a: str | None, b: str | None, resamples: int) -> CompareView:
    """Compare the runs asked for (or the default pair, if either is not a run); a refusal becomes ``problem``."""
    runs = list_runs(store)
    names = [r["name"] for r in runs]
    view = CompareView((a, b), runs, a, b)
    # A run not (or no longer) in the database is replaced, keeping the other side if it still exists.
    if a not in names and b not in names:
        view.a, view.b = default_pair(runs)
    elif b not in names:
        view.b = partner(runs, a)
    elif a not in names:
        view.a = partner(runs, b)
    if view.a is None or view.b is None:
        view.problem = (f"Compare needs two runs over one dataset; this database has "
                        f"{'only run ' + repr(names[0]) if names else 'no run'}. Start another in Runs (r, then n), "
                        "or plan one in a shell with `workbench sweep` and import its predictions.")
        return view
    if view.a == view.b:
        view.problem = f"A and B are both run {view.a!r}: press a or b to pick another run."
        return view
    try:
        c = compare_runs(store, view.a, view.b, terms=TERMS, resamples=resamples)
    except (ValueError, NotFound) as exc:
        # A refusal (other datasets, no cell in common) is a message to read, not a failure of the screen.
        hint = (f" This screen pairs cells by id; `workbench compare {view.a} {view.b} --map A_CELL=B_CELL` pairs "
                "them by hand." if "--map" in str(exc) else "")
        view.problem = f"{sentence(str(exc))}{hint} Press a or b to pick other runs."
        return view
    flipped = {sid for cell in c.cells for ways in cell.flips.values() for ids in ways.values() for sid in ids}
    if flipped:
        view.questions = {s.id: s.question for s in load_samples(store, get_run(store, view.a).dataset_id)
                          if s.id in flipped}
    view.comparison = c
    return view


class CompareScreen(WorkbenchScreen):
    """Pick runs A and B; per cell, B − A of the main terms; the highlighted cell's flips; enter opens one."""

    # enter takes priority over the focused table's own (hidden) enter, as on the other screens; ←/→ page the
    # terms a term at a time beside the cell column, and are in the footer because at 80 columns half the terms
    # are on other pages.
    BINDINGS = [
        Binding("enter", "open", "Open flip", priority=True),
        Binding("a", "pick('a')", "Run A"), Binding("b", "pick('b')", "Run B"),
        Binding("x", "swap", "Swap A/B"), Binding("t", "next_view", "Δ/A→B/p"),
        Binding("i", "differences", "Differences"),
        Binding("escape", "focus_cells", "Back to cells", show=False),
        Binding("left", "scroll_table(-1)", "Terms left", priority=True, group=TERM_KEYS),
        Binding("right", "scroll_table(1)", "Terms right", priority=True, group=TERM_KEYS, key_display="/→"),
    ]
    AUTO_FOCUS = "#deltas"
    # The flipped sample's question gives way on a narrow terminal (enter opens the flip, with it whole).
    NARROW_CUTS = {"flips": ("question",)}

    def __init__(self):
        super().__init__()
        self.a: str | None = None
        self.b: str | None = None
        self.view: CompareView | None = None
        self.table_view = "delta"
        # The term pages: the table holds only the terms that fit whole, from this one on (←/→ move it). A table
        # scrolled sideways showed a term cut at the right edge, its values without a heading, and its last
        # stop, where the content ends, rarely left the last term whole.
        self.first_term = 0
        self.shown_terms: tuple[str, ...] = TERMS
        self.resamples = RESAMPLES
        # The database version the shown comparison was asked at: coming back unchanged recomputes nothing.
        self.version: int | None = None
        # Whether enter acts on the flips (set at once, where focus moves only after the key is handled).
        self._in_flips = False
        # The (cell, result) whose flips the list holds, and the question column's width.
        self._shown_flips: tuple[str | None, CompareView | None] = (None, None)
        self._flip_widths: int | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        # The cell column is fixed for its look (the row labels set apart): the table never scrolls sideways.
        deltas = DataTable(id="deltas", cursor_type="row", zebra_stripes=True, fixed_columns=1)
        self._set_columns(deltas, len("cell"), TERMS)
        yield deltas
        yield Static("", id="flips-heading", classes="status")
        flips = DataTable(id="flips", cursor_type="row", zebra_stripes=True)
        yield flips
        yield KeyFooter()

    def on_screen_resume(self) -> None:
        self.refresh_comparison()

    def on_data_changed(self, message: DataChanged) -> None:
        self.refresh_comparison(force=True)

    def refresh_comparison(self, force: bool = False) -> None:
        """Compare A and B unless what is shown (or being computed) is of this database version and pick."""
        version = self.app.store.data_version()
        if not force and version == self.version and self.view is not None and self.view.requested == (self.a, self.b):
            return
        self.version = version
        if self.view is None:
            self.query_one("#heading", Static).update("[b]Compare[/b]  comparing …")
        # Two passes, as on the Ledger: a quick bootstrap paints at once, the full one refines the intervals.
        self.load("compare", _compare, self.a, self.b, QUICK_RESAMPLES)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "compare":
            view: CompareView = message.payload
            if view.requested != (self.a, self.b):
                return      # a pick changed while it was computed: the new pick's result is on its way
            self.a, self.b, self.view = view.a, view.b, view
            if view.comparison is not None and view.comparison.resamples < self.resamples:
                self.load("compare", _compare, self.a, self.b, self.resamples)
            self._draw()

    def on_resize(self) -> None:
        self._size_flip_columns()
        if self.view is not None:
            self._draw()

    # Drawing

    def _draw(self) -> None:
        view = self.view
        heading = self.query_one("#heading", Static)
        deltas = self.query_one("#deltas", DataTable)
        c = view.comparison
        if c is None:
            names = f"A = {esc(view.a)} · B = {esc(view.b)}" if view.a and view.b else ""
            heading.update(f"[b]Compare[/b]  {names}\n[b]{esc(view.problem)}[/b]")
            deltas.clear()
            self._show_flips(None)
            return
        refining = " (refining…)" if c.resamples < self.resamples else ""
        cells = len(c.cells)
        labels = [cell_label(cell) for cell in c.cells]
        cell_width = natural("cell", labels)
        shown = self._term_page(cell_width)
        page = (f" · terms {self.first_term + 1}–{self.first_term + len(shown)} of {len(TERMS)} (←/→)"
                if len(shown) < len(TERMS) else "")
        heading.update(
            f"[b]Compare[/b]  A = [b]{esc(c.run_a)}[/b] · B = [b]{esc(c.run_b)}[/b] · {esc(c.dataset)} · "
            f"{c.samples:,} samples in both · score {esc(c.score)}\n{axes_line(c)}\n"
            f"[dim]{esc(VIEW_NAMES[self.table_view])}{page} · {c.resamples:,} resamples{refining} · p Holm-adjusted "
            f"over {cells} cell{'s' if cells != 1 else ''} · ▲ better ▼ worse * significant[/dim]")
        cursor = deltas.cursor_row
        self._set_columns(deltas, cell_width, shown)
        for cell, label in zip(c.cells, labels):
            deltas.add_row(Text(label), *[term_cell(cell.terms[t], t, self.table_view) for t in shown],
                           height=2, key=cell.cell_a)
        if c.cells:
            deltas.move_cursor(row=min(cursor, len(c.cells) - 1))
        self._show_flips(self._highlighted())

    def _term_page(self, cell_width: int) -> tuple[str, ...]:
        """The terms that fit whole beside the cell column, from ``first_term`` on (moved back when the screen
        widened, so that a page is never shorter than the screen has room for)."""
        fit = min(len(TERMS), columns_that_fit(self.size.width, cell_width, TERM_WIDTH))
        self.first_term = max(0, min(self.first_term, len(TERMS) - fit))
        self.shown_terms = TERMS[self.first_term:self.first_term + fit]
        return self.shown_terms

    @staticmethod
    def _set_columns(deltas: DataTable, cell_width: int, terms: tuple[str, ...]) -> None:
        """The cell column as wide as its widest label, then ``terms``, the table emptied."""
        deltas.clear(columns=True)
        deltas.add_column("cell", width=cell_width, key="cell")
        for term in terms:
            deltas.add_column(Text(term, justify="right"), width=TERM_WIDTH, key=term)

    def _highlighted(self) -> CellDelta | None:
        if self.view is None or self.view.comparison is None:
            return None
        deltas = self.query_one("#deltas", DataTable)
        if deltas.row_count == 0:
            return None
        key = deltas.coordinate_to_cell_key(deltas.cursor_coordinate).row_key.value
        return next((cell for cell in self.view.comparison.cells if cell.cell_a == key), None)

    def _size_flip_columns(self) -> None:
        """Fixed widths: a long question must not push the sample id off an 80-column screen."""
        flips = self.query_one("#flips", DataTable)
        width = max(60, (flips.size.width or self.size.width or 80) - 2)
        question = max(12, width - 11 - 13 - 23 - 2 * 4)
        if self._flip_widths == question:
            return
        self._flip_widths = question
        flips.clear(columns=True)
        flips.add_column("stage", width=9, key="stage")
        flips.add_column("way", width=11, key="way")
        flips.add_column("sample", width=21, key="sample")
        flips.add_column("question", width=question, key="question")
        self._shown_flips = (None, None)

    def _show_flips(self, cell: CellDelta | None) -> None:
        self._size_flip_columns()
        line = self.query_one("#flips-heading", Static)
        flips = self.query_one("#flips", DataTable)
        line.update("" if cell is None else flips_line(cell))
        shown_cell, shown_view = self._shown_flips
        cell_id = cell.cell_a if cell else None
        if cell_id == shown_cell and shown_view is self.view:
            return      # the same cell of the same result: keep the list and its cursor
        self._shown_flips = (cell_id, self.view)
        # A refined result keeps the cursor on its flip; another cell's flips start at the top.
        cursor = flips.cursor_row if cell_id is not None and cell_id == shown_cell else 0
        flips.clear()
        if cell is None:
            return
        questions = self.view.questions
        for stage, way, sid in flip_rows(cell)[:FLIP_ROWS]:
            symbol, colour = WAYS[way]
            flips.add_row(stage, Text(f"{symbol} {ARROWS[way]}", style=colour), Text(fit_tail(sid, 21)),
                          cell_text(questions.get(sid, "")), key=sid)
        if flips.row_count:
            flips.move_cursor(row=min(cursor, flips.row_count - 1))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "deltas" and self.view is not None:
            self._show_flips(self._highlighted())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # A click on the highlighted row (enter is the screen's priority binding).
        self.action_open()

    # Actions

    def on_descendant_focus(self, event) -> None:
        self._in_flips = event.widget.id == "flips"

    def action_open(self) -> None:
        """On a flip: both runs' detail side by side. On a cell: move to its flips."""
        flips = self.query_one("#flips", DataTable)
        cell = self._highlighted()
        if cell is None:
            self._no_comparison()
            return
        # Not ``self.focused``: focus moves after the key is handled, so a second enter typed at once would
        # still find the cells focused and never open the flip.
        if not self._in_flips:
            if flips.row_count:
                self._in_flips = True
                flips.focus()
            else:
                self.notify(f"no sample changed its score in {cell_label(cell)}", timeout=4)
            return
        if not flips.row_count:
            self.notify(f"No sample changed its score in {cell_label(cell)}: esc goes back to the cells.", timeout=4)
            return
        rows = flip_rows(cell)[:FLIP_ROWS]
        self.app.push_screen(FlipDetailScreen(self.a, self.b, cell.cell_a, cell.cell_b, rows, flips.cursor_row,
                                              self.view.questions))

    def action_focus_cells(self) -> None:
        deltas = self.query_one("#deltas", DataTable)
        if not self._in_flips and deltas.has_focus:
            self.notify("Already on the cells (enter goes to the highlighted cell's flips).", timeout=3)
        self._in_flips = False
        deltas.focus()

    def _no_comparison(self) -> bool:
        """Say why a key has nothing to compare (the heading says what is missing)."""
        if self.view is None:
            self.notify("Still comparing the runs.", timeout=3)
        elif self.view.comparison is None:
            self.notify(f"No comparison shown: {self.view.problem}", timeout=6)
        else:
            return False
        return True

    def action_pick(self, side: str) -> None:
        if self.view is None:
            self._no_comparison()
            return
        if not self.view.runs:
            self.notify("no run yet: start one in Runs (r, then n)")
            return
        choices = [(r["name"], f"[b]{esc(r['name'])}[/b]  [dim]{esc(r['dataset'])} · "
                               f"{esc(r['model'] or 'no model')} · {r['cells']} cells · {r['done']:,}/{r['jobs']:,} "
                               f"done · {esc(str(r['created_at'])[:16])}[/dim]") for r in reversed(self.view.runs)]
        current, other = (self.a, self.b) if side == "a" else (self.b, self.a)

        def picked(name: str | None) -> None:
            # A pick that changes nothing says so: a silent key looks broken.
            if name is not None and name == current:
                self.notify(f"{name} is already run {side.upper()}", timeout=4)
                return
            if name is not None and name == other:
                self.notify(f"{name} is already run {'B' if side == 'a' else 'A'}: a run against itself has "
                            "nothing to compare. Pick another run, or x to swap A and B", timeout=6)
                return
            if name is None:
                return
            if side == "a":
                self.a = name
            else:
                self.b = name
            self.refresh_comparison(force=True)

        self.app.push_screen(ChoiceDialog(f"Run {side.upper()} (newest first; B − A is what the table shows)",
                                          choices, current), picked)

    def action_swap(self) -> None:
        if self.a is None or self.b is None:
            self.notify("No two runs to swap: " + (self.view.problem if self.view is not None else "still comparing."),
                        timeout=5)
            return
        self.a, self.b = self.b, self.a
        self.refresh_comparison(force=True)

    def action_next_view(self) -> None:
        if self._no_comparison():
            return
        self.table_view = VIEWS[(VIEWS.index(self.table_view) + 1) % len(VIEWS)]
        self._draw()

    def action_differences(self) -> None:
        if self._no_comparison():
            return
        c = self.view.comparison
        self.app.push_screen(TextDialog(f"A = {c.run_a}, B = {c.run_b}: what differs", differences_lines(c)))

    def action_scroll_table(self, step: int) -> None:
        """Page the terms a term at a time (the cell column stays), each term shown whole with its heading."""
        if self._no_comparison():
            return
        shown = self.shown_terms
        if len(shown) == len(TERMS):
            self.notify("Every term is shown: nothing to scroll sideways.", timeout=3)
            return
        first = self.first_term + step
        if not 0 <= first <= len(TERMS) - len(shown):
            self.notify(f"Already at the {'last' if step > 0 else 'first'} terms ({', '.join(shown)}).", timeout=3)
            return
        self.first_term = first
        self._draw()
