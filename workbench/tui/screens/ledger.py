"""Ledger: the terms with CIs for each cell, the main and oracle plots, live while a run writes."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Header, Static

from workbench import plots
from workbench.metrics.stats import RESAMPLES as SHOWN_RESAMPLES
from workbench.claims.report import LEDGER_METRICS
from workbench.judges.report import cell_estimates
from workbench.runs.aggregate import PERSIST_EVERY, LedgerReader, RefreshStats
from workbench.runs.generation import stored_generations
from workbench.runs.report import cell_difference, ledger_reader, run_ledger, saved_state_exists
from workbench.store.labels import label_count
from workbench.store.lookup import NotFound
from workbench.store.queries import EXTERNAL_MODEL, get_run, run_names
from workbench.tables import DASH, fmt_estimate, fmt_number
from workbench.triage import tag_counts
from workbench.tui.base import WorkbenchScreen
from workbench.tui.columns import fit_to_content
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.screens.ledger_panel import (CI_TERMS, ci_lines, claims_lines, label_lines, progress_text,
                                               sequential_lines)
from workbench.tui.widgets import KeyFooter

COLUMNS = ("K", "B", "format", "n", "S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "Acc_miss", "D_rate",
           "D_mass", "L_leak", "K_eff", "Faith")
QUICK_RESAMPLES, RESAMPLES = 100, SHOWN_RESAMPLES   # the full pass: the CLI's interval
WIDE = 112  # narrower screens cannot show every column: the heading says how to reach the rest
SIDE_KEYS = Binding.Group("Side", compact=True)
# Narrower than this, a plot's axes leave no room for its curves, and cropped it reads as stray braille.
PLOT_MIN_WIDTH = 40
# A sequential run stopped asking because of what it saw: its bootstrap intervals describe the answered samples,
# not the full run (the side panel's sequential interval does, at any stopping time).
STOPPED_CI = " over the answered samples, not valid under stopping (the Sequential interval is)"
NARROW_PLOT = "[dim]No room for the plot beside the panel: it needs 80 columns (or `workbench plot {run}`).[/dim]"


@dataclass
class LedgerView:
    """What a ledger worker returns: the report, the runs of the dataset, tag counts, and what the refresh read."""

    report: object
    runs: list[str]
    tags: dict[str, int]
    answered_by: str        # who answers the run's jobs: ``answered_by``
    refresh: RefreshStats | None = None
    # The run has human labels: the side panel then shows the highlighted cell's corrected metrics.
    has_labels: bool = False


def answered_by(run) -> str:
    """Who answers a run's jobs: "model" (planned with a model's settings), "import" (a sweep whose answers were
    imported, `predictions import`, or a run of imported answers: both mark its model ``external``), or "" (a
    sweep nobody has answered yet)."""
    if stored_generations(run.config):
        return "model"
    return "import" if run.model == EXTERNAL_MODEL else ""


def _reader(store, run, readers: dict) -> LedgerReader:
    """The screen's long-lived reader of ``run``: each refresh applies only the events changed since the last."""
    reader = readers.get(run.name)
    if reader is None or reader.run.id != run.id:
        reader = readers[run.name] = ledger_reader(store, run, persist_every=PERSIST_EVERY)
    return reader


def _ledger(store, run_name, exclude: bool, resamples: int, full: int, readers: dict) -> LedgerView | None:
    """The ledger of ``run_name``; None when there is no such run (e.g. it was just deleted).

    With no ledger state yet (the run's first read builds one: seconds on a large run), a
    quick pass with ``resamples`` paints first; otherwise the state is read at ``full``.
    """
    if run_name is None:
        return None
    try:
        run = get_run(store, run_name)
    except NotFound:
        return None
    tags = tag_counts(store, run.dataset_id)
    excluded = list(tags) if exclude else ()
    reader = _reader(store, run, readers)
    if resamples < full and not reader.ready and not saved_state_exists(store, run):
        quick = ledger_reader(store, run, resamples=resamples, persist=False)
        report = run_ledger(store, run, resamples=resamples, exclude_tags=excluded, reader=quick)
        stats = quick.stats
    else:
        try:
            report = run_ledger(store, run, resamples=full, exclude_tags=excluded, reader=reader)
        except NotFound:
            return None
        stats = reader.stats
    has_labels = bool(label_count(store.conn, "answer", run.id) or label_count(store.conn, "claim", run.id))
    return LedgerView(report, run_names(store, run.dataset_id), tags, answered_by(run), stats, has_labels)


def _cell_estimates(store, run_name, cell_id, version) -> tuple[str, int, list]:
    """One cell's judged metrics corrected by the run's human labels (the side panel's extra lines)."""
    return cell_id, version, cell_estimates(store, run_name, cell_id)


def _difference(store, run_name, a, b, exclude: bool, readers: dict):
    run = get_run(store, run_name)
    tags = list(tag_counts(store, run.dataset_id)) if exclude else []
    reader = _reader(store, run, readers)
    return (a, b), {term: cell_difference(store, run, a, b, term, resamples=RESAMPLES, exclude_tags=tags, reader=reader)
                    for term in ("S_vis", "S_llm", "D_rate")}


class LedgerScreen(WorkbenchScreen):
    """Pick B, format and run (model); mark two cells for their paired difference."""

    # The footer fits 80 columns: short descriptions, J/K as one "J/K Side" entry, and enter taking priority
    # over the table's own hidden enter, which would otherwise keep "Samples" out of the footer.
    BINDINGS = [
        Binding("enter", "samples", "Samples", priority=True),
        # The app's s opens the last cell opened; here it opens the highlighted one, as enter does.
        Binding("s", "samples", "Samples", show=False),
        Binding("b", "next_budget", "Budget"), Binding("f", "next_format", "Format"),
        Binding("m", "next_run", "Run"), Binding("o", "toggle_oracle", "Oracle"),
        Binding("space", "mark", "Mark"), Binding("e", "toggle_exclude", "Excl. tagged"),
        Binding("J", "scroll_side(1)", "Side panel down", group=SIDE_KEYS),
        Binding("K", "scroll_side(-1)", "Side panel up", group=SIDE_KEYS, key_display="/K"),
        # A row-cursor table scrolls sideways one character per key: a third of its width is usable.
        Binding("left", "scroll_table(-1)", "Columns", show=False, priority=True),
        Binding("right", "scroll_table(1)", "Columns", show=False, priority=True),
    ]
    # The table, not the side panel (which comes first and can take focus to scroll).
    AUTO_FOCUS = "#ledger"

    def __init__(self):
        super().__init__()
        self.view: LedgerView | None = None
        self.budget: int | None = None
        self.format: str | None = None
        self.show_oracle = False
        self.marked: list[str] = []
        self.resamples = RESAMPLES
        # One incremental reader per run, kept across refreshes (workers use it one at a time).
        self.readers: dict[str, LedgerReader] = {}
        # The highlighted cell's estimates from human labels, computed for one cell at a time (a
        # cell of a large run costs tens of ms; every cell on every refresh would cost seconds):
        # cell → (the ledger view version they were computed for, estimates). A cell shows its
        # last estimates while newer ones are computed, so a live run does not flicker.
        self.estimates: dict[str, tuple[int, list]] = {}
        self.version = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        with Horizontal(id="plots"):
            yield Static("", id="main-plot", classes="plot")
            with VerticalScroll(id="side-scroll", classes="side"):
                yield Static("", id="side")
        # K, B and format stay put when the terms scroll sideways (80 columns show half of them).
        table = DataTable(id="ledger", cursor_type="row", zebra_stripes=True, fixed_columns=3)
        table.add_columns(*COLUMNS)
        yield table
        yield KeyFooter()

    def on_screen_resume(self) -> None:
        self.refresh_ledger()

    def on_data_changed(self, message: DataChanged) -> None:
        self.refresh_ledger()

    def refresh_ledger(self) -> None:
        if self.app.run_name is None:
            self._clear("No run selected: open one in Runs (r, then enter) or start one (r, then n).")
            return
        # Two passes: a quick bootstrap paints the ledger at once, the full one refines it.
        self.load("ledger", _ledger, self.app.run_name, self.app.exclude_tagged, QUICK_RESAMPLES, self.resamples,
                  self.readers)

    def on_resize(self) -> None:
        if self.view:
            self._draw()

    def _clear(self, heading: str) -> None:
        """Forget the shown run: no plot, table or side panel of a run that is gone."""
        self.view, self.marked = None, []
        self.query_one("#heading", Static).update(heading)
        self.query_one("#main-plot", Static).update("")
        self.query_one("#side", Static).update("")
        self.query_one(DataTable).clear()

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "ledger" and message.payload is None:
            gone = self.app.run_name
            if gone is not None:
                self.app.run_name = None
            self._clear((f"Run {gone} no longer exists. " if gone else "")
                        + "No run selected: open one in Runs (r, then enter) or start one (r, then n).")
        elif message.what == "ledger":
            if self.view is None or self.view.report.run != message.payload.report.run:
                # Another run (m here, enter on Runs, m on Labels): its own cells, nothing marked, the panel at its top.
                self.estimates, self.marked = {}, []
                self.query_one("#side-scroll", VerticalScroll).scroll_home(animate=False)
            self.view = message.payload
            self.version += 1
            if self.view.report.resamples < self.resamples:
                self.load("ledger", _ledger, self.app.run_name, self.app.exclude_tagged, self.resamples,
                          self.resamples, self.readers)
            rows = self.view.report.rows
            budgets = sorted({r["budget"] for r in rows})
            formats = list(dict.fromkeys(r["format"] for r in rows))
            if self.budget not in budgets:
                self.budget = budgets[-1] if budgets else None
            if self.format not in formats:
                self.format = "linear" if "linear" in formats else (formats[0] if formats else None)
            self._draw()
        elif message.what == "estimates":
            cell, version, found = message.payload
            if version > self.estimates.get(cell, (-1, None))[0]:
                self.estimates[cell] = (version, found)
            if self.view is not None and len(self.marked) < 2 and cell == self._highlighted():
                self.query_one("#side", Static).update(self._side_text())
        elif message.what == "difference":
            pair, diffs = message.payload
            if list(pair) != self.marked:
                return  # a mark changed while it was computed: the side panel already shows the new state
            lines = ["[b]paired difference[/b]", f"{pair[0]} − {pair[1]}"]
            lines += [f"{term}: {fmt_estimate(est)}" for term, est in diffs.items()]
            lines += ["", "[dim]space on a marked cell unmarks it[/dim]"]
            self.query_one("#side", Static).update("\n".join(lines))

    def _draw(self) -> None:
        report = self.view.report
        progress = " · " + progress_text(self.view.answered_by, report.jobs_done, report.jobs_total)
        excluded = (f" · [reverse] {report.excluded} tagged samples excluded [/reverse]" if report.excluded
                    else " · tagged samples kept" if self.view.tags else "")
        self.query_one("#heading", Static).update(
            f"[b]Ledger[/b]  {report.run} · {report.dataset} · B={self.budget} · {self.format}{progress}{excluded}"
            f"  [dim]95% CI, {report.resamples} resamples{STOPPED_CI if report.sequential is not None else ''}"
            f"{' (refining…)' if report.resamples < self.resamples else ''}"
            f"{' · ←/→ more columns' if self.size.width < WIDE else ''}[/dim]")
        plot = self.query_one("#main-plot", Static)
        width, height = max(40, (plot.size.width or 80) - 1), max(10, plot.size.height or 16)
        if plot.size.width and plot.size.width - 1 < PLOT_MIN_WIDTH:
            plot.update(NARROW_PLOT.format(run=esc(report.run)))
        else:
            self._draw_plot(plot, width, height)
        table = self.query_one(DataTable)
        cursor, scrolled = table.cursor_row, table.scroll_x
        several = any("model" in r for r in report.rows)
        if several != (len(table.columns) > len(COLUMNS)):
            # A run of several models: a row per (model, cell), the model first and kept in view with K, B, format.
            table.clear(columns=True)
            table.add_columns(*(("model",) if several else ()), *COLUMNS)
            table.fixed_columns = 3 + several
        table.clear()
        for r in report.rows:
            mark = "● " if r["cell_id"] in self.marked else ""
            first = [f"{mark}{r['model']}", str(r["k"])] if several else [f"{mark}{r['k']}"]
            table.add_row(*first, str(r["budget"]), r["format"], fmt_number(r["n"], 0),
                          *[_value(r[t]) for t in COLUMNS[4:13]], fmt_number(r["K_eff"]),
                          _value(r.get("faithfulness")), key=r["cell_id"])
        # Each column as wide as what it holds now: the K column kept the width of a cleared "● 10" mark and
        # pushed D_rate's heading off an 80-column screen. (Not the columns anew: Faith's padded label would go
        # with them, and a scroll kept across a redraw would stop inside a column.)
        fit_to_content(table)
        if report.rows:
            table.move_cursor(row=min(cursor, len(report.rows) - 1))
        self.call_after_refresh(self._end_on_a_column_edge)
        if scrolled:
            # clear() scrolls home; a live run redraws every second, so keep the columns the user chose.
            self.call_after_refresh(table.scroll_to, x=scrolled, animate=False)
        # After the rows: the side panel describes the highlighted cell, which needs them.
        if len(self.marked) < 2:
            self.query_one("#side", Static).update(self._side_text())

    def _draw_plot(self, plot: Static, width: int, height: int) -> None:
        report = self.view.report
        try:
            figure = (plots.oracle_plot(report.oracle, width=width, height=height, colors=True)
                      if self.show_oracle else
                      plots.main_plot(report.rows, budget=self.budget, fmt=self.format, width=width, height=height,
                                      colors=True))
            plot.update(Text.from_ansi(figure, no_wrap=True, overflow="crop"))
        except ValueError as exc:
            plot.update(str(exc))

    def _side_text(self) -> str:
        report = self.view.report
        lines = []
        cell = self._highlighted()
        row = next((r for r in report.rows if r["cell_id"] == cell), None)
        if self.marked:
            lines += [f"● {self.marked[0]} marked: space on another cell", "  for the paired difference", ""]
        if row is not None:
            valid = " of its answers only" if report.sequential is not None else ""
            lines.append(f"[b]{cell}[/b]  n={fmt_number(row['n'], 0)}  [dim]95% CI{valid}[/dim]")
            lines += ci_lines(CI_TERMS, row)
            if report.sequential is not None and cell in report.sequential.states:
                lines += sequential_lines(report.sequential, cell)
            if report.claims:
                width = self.query_one("#side", Static).size.width
                lines += claims_lines(report.claims["config"], row.get("claims_n", 0), width)
                lines += ci_lines(LEDGER_METRICS, row)
            lines += self._label_lines(cell)
            lines.append("")
        lines.append("[b]Oracle (only p*)[/b]")
        for o in report.oracle:
            lines.append(f"{'B=' + str(o['budget']):<6} struct {fmt_estimate(o['Acc_struct'], 2)}")
            lines.append(f"{'':<6} linear {fmt_estimate(o['Acc_linear'], 2)}")
            lines.append(f"{'':<4} L_struct {fmt_estimate(o['L_struct'], 2)}")
        if not report.oracle:
            lines.append(DASH + " (no oracle cells)")
        if self.view.tags:
            lines.append("")
            lines.append("[b]Tags[/b] " + ", ".join(f"{t} {n}" for t, n in self.view.tags.items()))
        lines.append("")
        lines.append("[dim]space marks two cells for a paired difference · J/K scroll this panel · ←/→ scroll "
                     "the table sideways[/dim]")
        return "\n".join(lines)

    def _label_lines(self, cell: str) -> list[str]:
        """The highlighted cell's label lines; asks a worker for them the first time a view shows the cell."""
        if not self.view.has_labels:
            return []
        version, found = self.estimates.get(cell, (-1, None))
        if version < self.version:
            self.load("estimates", _cell_estimates, self.app.run_name, cell, self.version)
        return label_lines(found)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.view and len(self.marked) < 2:
            self.query_one("#side", Static).update(self._side_text())

    def action_scroll_table(self, step: int) -> None:
        """Scroll the terms sideways by about a third of the table, stopping on a column's edge."""
        table = self.query_one(DataTable)
        if self._no_ledger():
            return
        if not table.max_scroll_x:
            self.notify("Every column is shown: nothing to scroll sideways.", timeout=3)
            return
        if table.scroll_x >= table.max_scroll_x if step > 0 else table.scroll_x <= 0:
            self.notify("Already at the " + ("last" if step > 0 else "first") + " columns.", timeout=3)
            return
        widths = [c.get_render_width(table) for c in list(table.columns.values())[table.fixed_columns:]]
        edges = [sum(widths[:i]) for i in range(len(widths) + 1)]
        target = table.scroll_x + step * max(8, table.size.width // 3)
        ahead = [e for e in edges if (e >= target if step > 0 else e <= target)]
        x = (min(ahead) if step > 0 else max(ahead)) if ahead else (edges[-1] if step > 0 else 0)
        table.scroll_to(x=x, animate=False)

    def _end_on_a_column_edge(self) -> None:
        """Pad the last column's label so that the table scrolled fully right starts on a column's edge.

        Otherwise → at the far right shows the first term in view cut in half ("lm" for S_llm): the
        scroll stops where the content ends, which is rarely where a column begins.
        """
        table = self.query_one(DataTable)
        columns = list(table.columns.values())
        if not columns or not table.row_count:
            return
        last = columns[-1]
        name = str(last.label).rstrip()
        natural = max(len(name), *(len(str(v)) for v in table.get_column_at(len(columns) - 1)))
        added = last.content_width - natural                  # what an earlier call added
        widths = [c.get_render_width(table) for c in columns]
        furthest = sum(widths) - added - table.scrollable_content_region.width
        extra = 0
        if furthest > 0:
            edges = [sum(widths[table.fixed_columns:i]) for i in range(table.fixed_columns, len(columns) + 1)]
            extra = min((e for e in edges if e >= furthest), default=furthest) - furthest
        if extra != added:
            last.label = Text(name.ljust(natural + extra))
            # update_width measures the column again, its label included (no public call just for that).
            corner = Coordinate(0, len(columns) - 1)
            table.update_cell_at(corner, table.get_cell_at(corner), update_width=True)

    def action_scroll_side(self, step: int) -> None:
        side = self.query_one("#side-scroll", VerticalScroll)
        if self._no_ledger():
            return
        if not side.max_scroll_y:
            self.notify("The side panel is shown whole: nothing to scroll.", timeout=3)
        elif side.scroll_y >= side.max_scroll_y if step > 0 else side.scroll_y <= 0:
            self.notify(f"Already at the {'end' if step > 0 else 'top'} of the side panel.", timeout=3)
        else:
            side.scroll_to(y=side.scroll_y + step * max(1, side.size.height - 2), animate=False)

    def _no_ledger(self) -> bool:
        """Say so when no run is shown (a key of the table or its panels has nothing to act on)."""
        if self.view is None:
            self.notify("No ledger shown: open a run in Runs (r, then enter).", timeout=4)
            return True
        return False

    def _cycle(self, values, current):
        if not values:
            return current
        return values[(values.index(current) + 1) % len(values)] if current in values else values[0]

    def _only_one(self, values, what: str) -> bool:
        """Say so when there is nothing to switch to (a silent key looks broken)."""
        if self._no_ledger():
            return True
        if len(values) <= 1:
            self.notify(f"only one {what}: {values[0]}" if values else f"no {what}", timeout=4)
            return True
        return False

    def action_next_budget(self) -> None:
        budgets = sorted({r["budget"] for r in self.view.report.rows}) if self.view else []
        if not self._only_one(budgets, "budget in this run"):
            self.budget = self._cycle(budgets, self.budget)
            self._draw()

    def action_next_format(self) -> None:
        formats = list(dict.fromkeys(r["format"] for r in self.view.report.rows)) if self.view else []
        if not self._only_one(formats, "format in this run"):
            self.format = self._cycle(formats, self.format)
            self._draw()

    def action_next_run(self) -> None:
        runs = self.view.runs if self.view else []
        if not self._only_one(runs, "run of this dataset"):
            self.app.run_name = self._cycle(runs, self.app.run_name)
            self.marked = []
            self.refresh_ledger()

    def action_toggle_oracle(self) -> None:
        if self._no_ledger():
            return
        self.show_oracle = not self.show_oracle
        self._draw()

    def action_toggle_exclude(self) -> None:
        if self._no_ledger():
            return
        if not self.view.tags:
            # The ledger would not change: say why rather than seem to ignore the key.
            self.notify("no sample of this dataset is tagged: nothing to exclude (tag samples with A/L/R/F "
                        "in Samples or Sample detail)", timeout=5)
            return
        self.app.exclude_tagged = not self.app.exclude_tagged
        self.refresh_ledger()

    def _highlighted(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def action_mark(self) -> None:
        cell = self._highlighted()
        if cell is None:
            if not self._no_ledger():
                self.notify("No cell to mark: this run has no cells yet.", timeout=3)
            return
        if cell in self.marked:
            self.marked.remove(cell)
        else:
            self.marked = (self.marked + [cell])[-2:]
        self._draw()
        if len(self.marked) == 2:
            self.query_one("#side", Static).update("computing the paired difference …")
            self.load("difference", _difference, self.app.run_name, *self.marked, self.app.exclude_tagged,
                      self.readers)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # A click on the highlighted row (enter is the screen's priority binding).
        self.action_samples()

    def action_samples(self) -> None:
        """The highlighted cell's samples; before the table has loaded, the samples of the cell last opened."""
        cell = self._highlighted()
        if cell:
            self.app.cell_id = cell
        self.app.switch_mode("samples")
        # A sample's detail left open over Samples shows another cell or run: the cell asked for, not it.
        shown = self.app.screen
        if shown is not self.app.screen_stack[0] and (getattr(shown, "run_name", None), getattr(shown, "cell_id", None)) \
                != (self.app.run_name, self.app.cell_id):
            while len(self.app.screen_stack) > 1:
                self.app.pop_screen()


def _value(est) -> str:
    value = getattr(est, "value", None)
    return DASH if value is None else f"{value:.3f}"
