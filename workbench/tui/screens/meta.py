"""Meta: how far each checker agrees with people's preferences between two answers.

The numbers are ``workbench.meta``'s (the same as ``workbench meta report``); this screen lays
the report out by human label, opens a scorer's instances worst disagreement first, and one
instance's query, reference and both responses side by side, each response's claims with their
verdicts against the reference and the reference's claims it holds or misses.
"""

from __future__ import annotations


from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from workbench.meta.report import MetaRow
from workbench.meta.sets import LABELS
from workbench.tables import fmt_estimate
from workbench.tui.base import WorkbenchScreen
from workbench.tui.dialogs import ChoiceDialog
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.widgets import KeyFooter, move_or_say
from workbench.tui.meta_view import PADDING, QUICK_RESAMPLES, RESAMPLES, SCROLLBAR, MetaView, load_meta, split_words
from workbench.tui.screens.meta_instances import MetaInstancesScreen


class MetaScreen(WorkbenchScreen):
    """A meta set's report: every scorer's Pearson and Spearman ×100 with people's labels, grouped by label."""

    BINDINGS = [
        Binding("enter", "open", "Instances", priority=True),
        Binding("m", "pick_set", "Meta set"),
        Binding("j", "move(1)", "Down", show=False),
        Binding("k", "move(-1)", "Up", show=False),
    ]
    AUTO_FOCUS = "#meta-rows"

    def __init__(self):
        super().__init__()
        self.name_asked: str | None = None      # the set picked with m (None: the newest)
        self.view: MetaView | None = None
        self.resamples = RESAMPLES
        self.version: int | None = None         # the database version the shown report was asked at
        self._shape: tuple | None = None        # (rows, width) the table was laid out for

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("[b]Meta[/b]  computing …", id="heading", classes="title")
        yield DataTable(id="meta-rows", cursor_type="row", zebra_stripes=True)
        yield Static("", id="meta-empty")
        yield KeyFooter()

    def on_screen_resume(self) -> None:
        self.refresh_report()

    def on_data_changed(self, message: DataChanged) -> None:
        self.refresh_report(force=True)

    def refresh_report(self, force: bool = False) -> None:
        version = self.app.store.data_version()
        if not force and version == self.version and self.view is not None and self.view.requested == self.name_asked:
            return
        self.version = version
        # A quick bootstrap paints at once; the full one refines the intervals (as on Compare).
        self.load("meta", load_meta, self.name_asked, QUICK_RESAMPLES)

    def on_loaded(self, message: Loaded) -> None:
        if message.what != "meta":
            return
        view: MetaView = message.payload
        if view.requested != self.name_asked:
            return      # another set was picked meanwhile: its report is on its way
        self.view = view
        if view.problem is None and view.resamples < self.resamples:
            self.load("meta", load_meta, self.name_asked, self.resamples)
        self._draw()

    def on_resize(self) -> None:
        if self.view is not None:
            self._draw()

    def _draw(self) -> None:
        view = self.view
        heading = self.query_one("#heading", Static)
        table = self.query_one("#meta-rows", DataTable)
        empty = self.query_one("#meta-empty", Static)
        table.display = view.problem is None
        empty.display = view.problem is not None
        if view.problem is not None:
            heading.update("[b]Meta[/b]  how far each checker agrees with people's preferences")
            empty.update(view.problem)
            table.clear()
            self._shape = None
            return
        refining = " (refining…)" if view.resamples < self.resamples else ""
        sets = f" · m: {len(view.names)} sets" if len(view.names) > 1 else ""
        todo = ("" if any(r.kind == "claims" for r in view.rows) else
                f"\n[b]No checker run yet:[/b] `workbench meta run {esc(view.name)}` checks both answers' claims.")
        heading.update(
            f"[b]Meta[/b]  set [b]{esc(view.name)}[/b] · {view.instances:,} instances · {view.annotators} annotators · "
            f"{esc(view.runs[0])} vs {esc(view.runs[1])}{sets}\n"
            f"[dim]Pearson, Spearman ×100 \\[95% CI over instances, {view.resamples:,} resamples{refining}] of "
            f"each scorer's response 2 − 1 against each annotator's label · n pairs · enter: where it disagrees "
            f"most[/dim]{todo}")
        self._fill(table)

    def _fill(self, table: DataTable) -> None:
        rows = self.view.rows
        width = self.size.width or 80    # the table spans the screen (its own size lags a resize)
        cursor = table.cursor_row
        p = [fmt_estimate(r.pearson, 2) for r in rows]
        s = [fmt_estimate(r.spearman, 2) for r in rows]
        label_w = max(len(label) for label in LABELS)
        n_w = max([len(str(r.n)) for r in rows] + [1])
        one_line = label_w + max(len(r.scorer) for r in rows) + max(map(len, p + ["Pearson ×100"])) \
            + max(map(len, s + ["Spearman ×100"])) + n_w + 5 * PADDING + SCROLLBAR
        tall = one_line > width
        table.clear(columns=True)
        if tall:    # the value above its interval, the scorer on two lines
            split = lambda e: e.split(" ", 1) if " " in e else [e, ""]  # noqa: E731
            p, s = [split(e) for e in p], [split(e) for e in s]
            p_w = max(len(x) for pair in p for x in pair + ["Pearson"])
            s_w = max(len(x) for pair in s for x in pair + ["Spearman"])
            scorer_w = max(12, width - (label_w + p_w + s_w + n_w + 5 * PADDING + SCROLLBAR))
            headers = ("Pearson", "Spearman")
        else:
            p_w, s_w = max(map(len, p + ["Pearson ×100"])), max(map(len, s + ["Spearman ×100"]))
            scorer_w = max(len(r.scorer) for r in rows)
            headers = ("Pearson ×100", "Spearman ×100")
        table.add_column("label", width=label_w, key="label")
        table.add_column("scorer", width=scorer_w, key="scorer")
        table.add_column(Text(headers[0], justify="right"), width=p_w, key="pearson")
        table.add_column(Text(headers[1], justify="right"), width=s_w, key="spearman")
        table.add_column(Text("n", justify="right"), width=n_w, key="n")
        previous = None
        for i, r in enumerate(rows):
            label = Text(r.label if r.label != previous else "", style="bold")
            previous = r.label
            style = "bold" if r.kind == "annotators" else ""
            if tall:
                scorer = split_words(r.scorer, scorer_w)
                cells = (Text("\n".join(scorer), style=style), Text("\n".join(p[i]), justify="right"),
                         Text("\n".join(s[i]), justify="right"))
                height = max(2, len(scorer))
            else:
                cells = Text(r.scorer, style=style), Text(p[i], justify="right"), Text(s[i], justify="right")
                height = 1
            table.add_row(label, *cells, Text(str(r.n), justify="right"), height=height, key=str(i))
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1))

    def current_row(self) -> MetaRow | None:
        if self.view is None or self.view.problem is not None or not self.view.rows:
            return None
        table = self.query_one("#meta-rows", DataTable)
        return self.view.rows[min(table.cursor_row, len(self.view.rows) - 1)]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()      # a click on the highlighted row (enter is the screen's priority binding)

    def action_open(self) -> None:
        row = self.current_row()
        if row is None:
            self.notify("no meta set yet: import one with `workbench import --from ragchecker-meta HUMAN.json "
                        "--name NAME`" if self.view is not None else "the report is still being computed",
                        timeout=6)
            return
        self.app.push_screen(MetaInstancesScreen(self.view.name, row))

    def action_move(self, step: int) -> None:
        move_or_say(self, self.query_one("#meta-rows", DataTable), step)

    def action_pick_set(self) -> None:
        view = self.view
        if view is None:
            self.notify("the report is still being computed", timeout=4)
            return
        if not view.names:
            self.notify("no meta set yet: import one with `workbench import --from ragchecker-meta HUMAN.json "
                        "--name NAME`", timeout=6)
            return
        if len(view.names) == 1:
            self.notify(f"{view.names[0]} is the only meta set: import another with `workbench import --from "
                        "ragchecker-meta HUMAN.json --name NAME`", timeout=6)
            return

        def picked(name: str | None) -> None:
            if name is None or name == view.name:
                return
            self.name_asked = name
            self.refresh_report(force=True)

        choices = [(n, f"[b]{esc(n)}[/b]") for n in reversed(view.names)]
        self.app.push_screen(ChoiceDialog("Meta set (newest first)", choices, view.name), picked)
