"""Ledger: the terms with CIs for each cell, the main and oracle plots, live while a run writes."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Header, Static

from workbench.claims.report import LEDGER_METRICS
from workbench.tables import DASH, fmt_estimate, fmt_number
from workbench.tui.app import WorkbenchScreen
from workbench.tui.messages import DataChanged, Loaded

COLUMNS = ("K", "B", "format", "n", "S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "Acc_miss", "D_rate",
           "D_mass", "L_leak", "K_eff", "Faith")
QUICK_RESAMPLES = 100


@dataclass
class LedgerView:
    """What a ledger worker returns: the report, the runs of the dataset and tag counts."""

    report: object
    runs: list[str]
    tags: dict[str, int]
    has_model: bool


def _ledger(store, run_name, exclude: bool, resamples: int) -> LedgerView | None:
    from workbench.runs.report import run_ledger
    from workbench.store.queries import get_run, run_names
    from workbench.triage import tag_counts

    if run_name is None:
        return None
    run = get_run(store, run_name)
    tags = tag_counts(store, run.dataset_id)
    report = run_ledger(store, run, resamples=resamples, exclude_tags=list(tags) if exclude else ())
    return LedgerView(report, run_names(store, run.dataset_id), tags, run.config.get("generation") is not None)


def _difference(store, run_name, a, b, exclude: bool):
    from workbench.runs.report import cell_difference
    from workbench.store.queries import get_run
    from workbench.triage import tag_counts

    run = get_run(store, run_name)
    tags = list(tag_counts(store, run.dataset_id)) if exclude else []
    return {term: cell_difference(store, run, a, b, term, resamples=1000, exclude_tags=tags)
            for term in ("S_vis", "S_llm", "D_rate")}


class LedgerScreen(WorkbenchScreen):
    """Pick B, format and run (model); mark two cells for their paired difference."""

    BINDINGS = [
        Binding("b", "next_budget", "Budget"), Binding("f", "next_format", "Format"),
        Binding("m", "next_run", "Run/model"), Binding("o", "toggle_oracle", "Oracle plot"),
        Binding("space", "mark", "Mark cell"), Binding("e", "toggle_exclude", "Excl. tagged"),
        Binding("enter", "samples", "Samples"),
    ]

    def __init__(self):
        super().__init__()
        self.view: LedgerView | None = None
        self.budget: int | None = None
        self.format: str | None = None
        self.show_oracle = False
        self.marked: list[str] = []
        self.resamples = 1000

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        with Horizontal(id="plots"):
            yield Static("", id="main-plot", classes="plot")
            yield Static("", id="side", classes="side")
        table = DataTable(id="ledger", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        yield Footer()

    def on_screen_resume(self) -> None:
        self.refresh_ledger()

    def on_data_changed(self, message: DataChanged) -> None:
        self.refresh_ledger()

    def refresh_ledger(self) -> None:
        if self.app.run_name is None:
            self.query_one("#heading", Static).update("No run selected: start one in Runs (r, then n).")
            return
        # Two passes: a quick bootstrap paints the ledger at once, the full one refines it.
        self.load("ledger", _ledger, self.app.run_name, self.app.exclude_tagged, QUICK_RESAMPLES)

    def on_resize(self) -> None:
        if self.view:
            self._draw()

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "ledger" and message.payload is not None:
            self.view = message.payload
            if self.view.report.resamples < self.resamples:
                self.load("ledger", _ledger, self.app.run_name, self.app.exclude_tagged, self.resamples)
            rows = self.view.report.rows
            budgets = sorted({r["budget"] for r in rows})
            formats = list(dict.fromkeys(r["format"] for r in rows))
            if self.budget not in budgets:
                self.budget = budgets[-1] if budgets else None
            if self.format not in formats:
                self.format = "linear" if "linear" in formats else (formats[0] if formats else None)
            self._draw()
        elif message.what == "difference":
            a, b = self.marked
            lines = [f"[b]paired difference[/b] {a} − {b}"]
            lines += [f"{term}: {fmt_estimate(est)}" for term, est in message.payload.items()]
            self.query_one("#side", Static).update("\n".join(lines))

    def _draw(self) -> None:
        from workbench import plots

        report = self.view.report
        generating = self.view.has_model
        progress = (f" · {report.jobs_done:,}/{report.jobs_total:,} jobs" if generating else " · no model (sweep)")
        excluded = (f" · [reverse] {report.excluded} tagged samples excluded [/reverse]" if report.excluded
                    else " · tagged samples kept" if self.view.tags else "")
        self.query_one("#heading", Static).update(
            f"[b]Ledger[/b]  {report.run} · {report.dataset} · B={self.budget} · {self.format}{progress}{excluded}"
            f"  [dim]95% CI, {report.resamples} resamples"
            f"{' (refining…)' if report.resamples < self.resamples else ''}[/dim]")
        plot = self.query_one("#main-plot", Static)
        width, height = max(40, (plot.size.width or 80) - 1), max(10, plot.size.height or 16)
        try:
            figure = (plots.oracle_plot(report.oracle, width=width, height=height, colors=True)
                      if self.show_oracle else
                      plots.main_plot(report.rows, budget=self.budget, fmt=self.format, width=width, height=height,
                                      colors=True))
            plot.update(Text.from_ansi(figure, no_wrap=True, overflow="crop"))
        except ValueError as exc:
            plot.update(str(exc))
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        for r in report.rows:
            mark = "● " if r["cell_id"] in self.marked else ""
            table.add_row(f"{mark}{r['k']}", str(r["budget"]), r["format"], fmt_number(r["n"], 0),
                          *[_value(r[t]) for t in COLUMNS[4:13]], fmt_number(r["K_eff"]),
                          _value(r.get("faithfulness")), key=r["cell_id"])
        if report.rows:
            table.move_cursor(row=min(cursor, len(report.rows) - 1))
        # After the rows: the side panel describes the highlighted cell, which needs them.
        if not self.marked:
            self.query_one("#side", Static).update(self._side_text())

    def _side_text(self) -> str:
        report = self.view.report
        lines = []
        cell = self._highlighted()
        row = next((r for r in report.rows if r["cell_id"] == cell), None)
        if row is not None:
            lines.append(f"[b]{cell}[/b]  n={fmt_number(row['n'], 0)}  [dim]95% CI[/dim]")
            lines += [f"{t:>15} {fmt_estimate(row[t], 3)}" for t in CI_TERMS]
            if report.claims:
                cfg = report.claims["config"]
                lines.append(f"[b]Claims[/b] [dim]{cfg['decomposer']} + {','.join(cfg['verifiers'])}, "
                             f"{row.get('claims_n', 0)} answers[/dim]")
                lines += [f"{t:>15} {fmt_estimate(row.get(t), 3)}" for t in LEDGER_METRICS]
            lines.append("")
        lines.append("[b]Oracle (only p*)[/b]")
        for o in report.oracle:
            lines.append(f"B={o['budget']}: struct {fmt_estimate(o['Acc_struct'], 2)}")
            lines.append(f"       linear {fmt_estimate(o['Acc_linear'], 2)}  L_struct "
                         f"{fmt_estimate(o['L_struct'], 2)}")
        if not report.oracle:
            lines.append(DASH + " (no oracle cells)")
        if self.view.tags:
            lines.append("")
            lines.append("[b]Tags[/b] " + ", ".join(f"{t} {n}" for t, n in self.view.tags.items()))
        lines.append("")
        lines.append("[dim]space marks two cells for a paired difference[/dim]")
        return "\n".join(lines)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.view and not self.marked:
            self.query_one("#side", Static).update(self._side_text())

    def _cycle(self, values, current):
        if not values:
            return current
        return values[(values.index(current) + 1) % len(values)] if current in values else values[0]

    def action_next_budget(self) -> None:
        if self.view:
            self.budget = self._cycle(sorted({r["budget"] for r in self.view.report.rows}), self.budget)
            self._draw()

    def action_next_format(self) -> None:
        if self.view:
            self.format = self._cycle(list(dict.fromkeys(r["format"] for r in self.view.report.rows)), self.format)
            self._draw()

    def action_next_run(self) -> None:
        if self.view and len(self.view.runs) > 1:
            self.app.run_name = self._cycle(self.view.runs, self.app.run_name)
            self.marked = []
            self.refresh_ledger()

    def action_toggle_oracle(self) -> None:
        self.show_oracle = not self.show_oracle
        if self.view:
            self._draw()

    def action_toggle_exclude(self) -> None:
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
            return
        if cell in self.marked:
            self.marked.remove(cell)
        else:
            self.marked = (self.marked + [cell])[-2:]
        self._draw()
        if len(self.marked) == 2:
            self.query_one("#side", Static).update("computing the paired difference …")
            self.load("difference", _difference, self.app.run_name, *self.marked, self.app.exclude_tagged)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # Enter on the focused table arrives as RowSelected, not as the screen's binding.
        self.action_samples()

    def action_samples(self) -> None:
        cell = self._highlighted()
        if cell:
            self.app.cell_id = cell
            self.app.switch_mode("samples")


def _value(est) -> str:
    value = getattr(est, "value", None)
    return DASH if value is None else f"{value:.3f}"


CI_TERMS = ("S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak", "K_eff",
            "evidence_tokens", "truncated")
