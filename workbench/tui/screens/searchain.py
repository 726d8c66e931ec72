"""SearChain: a run's report and samples, and each sample's reasoning tree by keyboard."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Header, Static, Tree

from workbench.metrics.stats import RESAMPLES as SHOWN_RESAMPLES
from workbench.pipelines.render import render_report
from workbench.pipelines.report import chain_tree, pipeline_runs, sample_rows, searchain_report
from workbench.tables import DASH
from workbench.tui.base import WorkbenchScreen
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.columns import cell, fit_widths, natural, text_room
from workbench.tui.widgets import KeyFooter

PAGE = 200
RESAMPLES = SHOWN_RESAMPLES   # the CLI's interval
STATUS_STYLE = {"verified": "green", "corrected": "yellow", "completed": "cyan", "model": "dim"}


def _overview(store, name):
    runs = pipeline_runs(store)
    if not runs:
        return None
    name = name or runs[0]["name"]
    return runs, searchain_report(store, name, resamples=RESAMPLES), sample_rows(store, name, limit=PAGE)


def _tree(store, name, sid):
    return chain_tree(store, name, sid)


class SearChainScreen(WorkbenchScreen):
    """The latest SearChain run (m: next run); enter opens a sample's tree."""

    BINDINGS = [Binding("enter", "open_tree", "Tree", priority=True), Binding("m", "next_run", "Next run"),
                Binding("R", "focus_report", "Scroll report", show=False)]
    NARROW_CUTS = {"chains": ("question",)}     # enter opens the tree, with the question whole

    def __init__(self):
        super().__init__()
        self.name_shown: str | None = None
        self.runs: list[dict] = []
        self.rows: list[dict] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        # The report scrolls in at most half the height: the sample list always keeps rows.
        with VerticalScroll(id="report-scroll"):
            yield Static("", id="report")
        yield DataTable(id="chains", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_screen_resume(self) -> None:
        self.load("overview", _overview, self.name_shown)

    def on_data_changed(self, message: DataChanged) -> None:
        self.load("overview", _overview, self.name_shown)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "overview":
            # With no run, the report and the sample list have nothing to show: hidden, so tab has no empty
            # pane to move to (and says so) and the heading alone says what to do.
            self._show_panes(message.payload is not None)
            if message.payload is None:
                self.runs, self.rows, self.name_shown = [], [], None
                self.query_one("#heading", Static).update(
                    "[b]SearChain[/b]  no runs yet: `workbench searchain run DATASET --hops 2 --limit 50`")
                return
            self.runs, report, (total, self.rows) = message.payload
            self.name_shown = report["run"]
            self.query_one("#heading", Static).update(
                f"[b]SearChain[/b]  {esc(report['run'])} · {total} samples · m next run · enter tree · "
                "R scroll report")
            self.query_one("#report", Static).update(esc(render_report(report)))
            self._draw_rows()

    def _show_panes(self, shown: bool) -> None:
        for pane in (self.query_one("#report-scroll"), self.query_one("#chains", DataTable)):
            pane.display = shown

    def on_resize(self) -> None:
        if self.rows:
            self._draw_rows()

    def _draw_rows(self) -> None:
        """The samples, the question as wide as the screen leaves it (whole when it fits)."""
        table = self.query_one("#chains", DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        fmt = lambda v: DASH if v is None else f"{v:.0f}"  # noqa: E731
        rows = [(r["sample_id"], r["question"], r["status"], r["outcome"] or DASH, fmt(r["cover"]),
                 fmt(r["baseline_cover"]), fmt(r["rounds"]), fmt(r["steps"])) for r in self.rows]
        labels = ("sample", "question", "status", "outcome", "cover", "RAG", "rounds", "steps")
        wanted = {label: natural(label, [row[i] for row in rows]) for i, label in enumerate(labels)}
        widths = fit_widths(wanted, text_room(table.size.width or self.size.width or 80, len(labels)),
                            (("question", 16),))
        for label in labels:
            table.add_column(label, width=widths[label], key=label)
        for r, row in zip(self.rows, rows):
            table.add_row(*row[:1], cell(row[1]), *row[2:], key=str(r["sid"]))
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1))

    def _no_runs(self) -> bool:
        if not self.runs:
            self.notify("No SearChain run yet: `workbench searchain run DATASET --hops 2 --limit 50` makes one.",
                        timeout=5)
            return True
        return False

    def action_next_run(self) -> None:
        if self._no_runs():
            return
        if len(self.runs) == 1:
            self.notify(f"{self.runs[0]['name']} is the only SearChain run.", timeout=3)
            return
        if self.runs:
            names = [r["name"] for r in self.runs]
            i = names.index(self.name_shown) if self.name_shown in names else -1
            self.name_shown = names[(i + 1) % len(names)]
            self.load("overview", _overview, self.name_shown)

    def action_focus_report(self) -> None:
        """Toggle focus between the report (to scroll it) and the sample list."""
        if self._no_runs():
            return
        scroll = self.query_one("#report-scroll", VerticalScroll)
        (self.query_one("#chains", DataTable) if scroll.has_focus else scroll).focus()

    def action_open_tree(self) -> None:
        table = self.query_one("#chains", DataTable)
        if self._no_runs():
            return
        if not self.rows:
            self.notify(f"Run {self.name_shown} has no samples to open.", timeout=3)
        elif table.cursor_row < len(self.rows):
            row = self.rows[table.cursor_row]
            if row["status"] == "done":
                self.app.push_screen(ChainTreeScreen(self.name_shown, row["sid"]))
            else:
                self.notify(f"{row['sample_id']} is {row['status']}")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_tree()


class ChainTreeScreen(WorkbenchScreen):
    """One sample's tree: ↑/↓ move, enter/space expand a branch, each node's reference and feedback below it."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("e", "expand_all", "Expand all"),
                Binding("c", "collapse_all", "Collapse all")]

    def __init__(self, run_name: str, sid: int):
        super().__init__()
        self.run_name, self.sid = run_name, sid
        self.tree_data: dict | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("loading …", id="heading", classes="title")
            yield Tree("question", id="chain-tree")
            yield Static("", id="final")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.load("tree", _tree, self.run_name, self.sid)

    def on_loaded(self, message: Loaded) -> None:
        if message.what != "tree":
            return
        t = self.tree_data = message.payload
        self.query_one("#heading", Static).update(
            f"[b]{esc(t['sample_id'])}[/b]  {esc(t['question'])}   gold: {esc(' | '.join(t['answers']))}\n"
            f"outcome {t['outcome']} · rounds {t['rounds']} · cover {t['cover']} · plain RAG cover "
            f"{t['baseline_cover']}   [dim]★ final chain; green verified, yellow corrected, cyan completed, "
            f"dim unchecked[/dim]")
        tree = self.query_one(Tree)
        tree.clear()
        tree.root.set_label(esc(t["question"]))
        children: dict[int, list[dict]] = {}
        for n in t["nodes"]:
            children.setdefault(n["parent"], []).append(n)

        def add(parent_widget, parent: int) -> None:
            for n in children.get(parent, []):
                style = STATUS_STYLE.get(n["status"], "")
                answer = "[Unsolved]" if n["unsolved"] else n["answer"]
                label = (f"{'★ ' if n['in_final'] else ''}[{style}]{n['status']}[/{style}] "
                         f"[dim]b{n['branch']}[/dim] {esc(n['query'])} → {esc(answer or '')}")
                node = parent_widget.add(label, expand=True, data=n)
                if n["evidence"]:
                    node.add_leaf(f"[dim]reference[/dim] {esc(n['evidence'])}  [dim]reader[/dim] "
                                  f"{esc(n['reader_answer'] or '')} ({n['confidence']:.2f})")
                if n["feedback"]:
                    fb = node.add("[b]feedback[/b]", expand=False)
                    for line in n["feedback"].splitlines():
                        fb.add_leaf(esc(line))
                add(node, n["node"])

        add(tree.root, 0)
        for b in t["branches"]:
            if b["parse_error"]:
                tree.root.add_leaf(f"[red]branch {b['branch']} unparseable: {esc(b['parse_error'])}[/red]")
        tree.root.expand()
        tree.focus()
        self.query_one("#final", Static).update(
            f"[b]Final content[/b] {esc(t['final_content'] or DASH)}\n[b]Prediction[/b] {esc(t['prediction'] or DASH)}"
            f"   [b]Plain RAG[/b] {esc((t['baseline_prediction'] or DASH)[:200])}")

    def action_expand_all(self) -> None:
        self.query_one(Tree).root.expand_all()

    def action_collapse_all(self) -> None:
        tree = self.query_one(Tree)
        tree.root.collapse_all()
        tree.root.expand()
