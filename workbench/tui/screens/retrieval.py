"""Retrieval evaluation: metrics at k with CIs, Recall@k and MRR@k curves, and the misses to triage."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Header, Static

from workbench import plots
from workbench.metrics.stats import RESAMPLES as SHOWN_RESAMPLES
from workbench.retrieval.evaluate import document_preview, evaluate_retrieval, latest_corpus, stored_retrievers
from workbench.tables import fmt_estimate
from workbench.tui.base import WorkbenchScreen
from workbench.tui.markup import esc
from workbench.tui.says import CopyOrSay
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.screens.ledger import PLOT_MIN_WIDTH
from workbench.tui.columns import cell, fit_widths, natural, text_room
from workbench.tui.widgets import KeyFooter


QUICK_RESAMPLES, RESAMPLES = 100, SHOWN_RESAMPLES   # the full pass: the CLI's interval


def _evaluation(store, retriever: str | None, resamples: int):
    """The latest corpus's evaluation for ``retriever`` (default: its first stored), and every stored retriever."""
    name = latest_corpus(store)
    if name is None:
        return None
    names = stored_retrievers(store, name)
    if not names:
        return None
    chosen = retriever if retriever in names else names[0]
    return evaluate_retrieval(store, name, chosen, (1, 3, 5, 10), resamples=resamples), names


def _miss(store, dataset, miss):
    return miss, document_preview(store, dataset, miss["gold"]), [document_preview(store, dataset, d)
                                                                  for d in miss["retrieved"]]


class MissScreen(CopyOrSay, ModalScreen[None]):
    """A question the retriever missed: its gold document and what came back instead."""

    BINDINGS = [Binding("escape", "dismiss", "Back")]

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help miss") as box:
            box.border_subtitle = "↑/↓ pgup/pgdn scroll · esc back"
            with VerticalScroll(id="miss-body"):
                yield Static(self.text, id="miss-text")

    def on_mount(self) -> None:
        self.query_one("#miss-body", VerticalScroll).focus()


class RetrievalScreen(WorkbenchScreen):
    """Doc- or chunk-level metrics of a retriever (bm25, dense, hybrid, …) on the latest corpus."""

    BINDINGS = [Binding("c", "toggle_level", "Doc/chunk level"), Binding("n", "next_retriever", "Next retriever"),
                Binding("enter", "open_miss", "Open miss", priority=True),
                # In the footer, not only in ?: between the misses and the metrics panel (↑/↓ scroll it).
                Binding("tab", "app.focus_next", "Misses/metrics")]
    # The misses' texts give way on a narrow terminal (enter opens the miss, with each whole).
    NARROW_CUTS = {"misses": ("retrieved", "question", "gold")}
    # The misses, not the metrics panel (which comes first and can take focus to scroll): ↑/↓ move
    # through what enter opens; tab moves to the panel (listed in ? with the Retrieval keys).
    AUTO_FOCUS = "#misses"

    def __init__(self):
        super().__init__()
        self.level = "doc"
        self.report = None
        self.retriever: str | None = None      # None: the first stored (bm25 when there is one)
        self.retrievers: list[str] = []
        self.resamples = RESAMPLES
        # The database version the shown report was computed at: coming back unchanged costs nothing.
        self.version: int | None = None
        self.computing = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        with Horizontal(id="plots"):
            yield Static("", id="curves", classes="plot")
            with VerticalScroll(id="side-scroll", classes="side"):
                yield Static("", id="side")
        yield DataTable(id="misses", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_screen_resume(self) -> None:
        self.refresh_report()

    def on_data_changed(self, message: DataChanged) -> None:
        self.refresh_report(force=True)

    def refresh_report(self, force: bool = False) -> None:
        """Evaluate the latest corpus unless the report shown (or being computed) is of this database version."""
        version = self.app.store.data_version()
        if not force and version == self.version and (self.report is not None or self.computing):
            return
        self.version, self.computing = version, True
        if self.report is None:
            self.query_one("#heading", Static).update("[b]Retrieval[/b]  evaluating the latest corpus …")
        # Two passes, as on the Ledger: a quick bootstrap paints at once, the full one refines the CIs.
        self.load("eval", _evaluation, self.retriever, QUICK_RESAMPLES)

    def on_resize(self) -> None:
        if self.report is not None:
            self._draw()

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "eval":
            self.report, self.retrievers = message.payload if message.payload is not None else (None, [])
            if self.report is not None:
                self.retriever = self.report.retriever
            if self.report is not None and self.report.resamples < self.resamples:
                self.load("eval", _evaluation, self.retriever, self.resamples)
            else:
                self.computing = False
            self._draw()
        elif message.what == "miss":
            miss, gold, got = message.payload
            # An empty section would read as a display fault: say that nothing came back.
            instead = ("\n\n".join(esc(g) for g in got) if got else
                       "[dim](nothing: the retriever returned no document for this question)[/dim]")
            names = " · ".join(esc(d) for d in miss["retrieved"]) or "—"
            text = (f"[b]{esc(miss['question'])}[/b]\n\n[b]Gold document[/b] {esc(miss['gold'])}\n{esc(gold)}\n\n"
                    f"[b]Retrieved instead[/b] {names}\n{instead}")
            self.app.push_screen(MissScreen(text))

    def _draw(self) -> None:
        heading = self.query_one("#heading", Static)
        if self.report is None:
            heading.update("[b]Retrieval[/b]  no corpus yet. In a shell: `workbench corpus import "
                           "sample_data/howtocook --name hc`, `workbench questions generate hc`, "
                           "`workbench retrieve hc`; this screen then fills in.")
            return
        r = self.report
        overall = r.levels[self.level]["overall"]
        refining = "  [dim]refining CIs …[/dim]" if r.resamples < self.resamples else ""
        others = f" (n: next of {len(self.retrievers)})" if len(self.retrievers) > 1 else ""
        heading.update(f"[b]Retrieval[/b]  {esc(r.dataset)} · {esc(r.retriever)}{others} · {r.n:,} questions · "
                       f"{self.level}-level · {len(r.misses):,} doc-level misses at @{max(r.ks)}{refining}")
        curves = self.query_one("#curves", Static)
        width, height = max(40, (curves.size.width or 80) - 1), max(10, curves.size.height or 14)
        if curves.size.width and curves.size.width - 1 < PLOT_MIN_WIDTH:
            # Cropped, a plot this narrow reads as stray braille; the panel beside it has every number.
            curves.update("[dim]No room for the curves beside the panel: they need 80 columns.[/dim]")
        else:
            figure = plots.retrieval_plot(r.ks, {"Recall@k": [overall[("recall", k)].value for k in r.ks],
                                                 "MRR@k": [overall[("mrr", k)].value for k in r.ks]},
                                          width=width, height=height, colors=True,
                                          title=f"{self.level}-level Recall@k and MRR@k")
            curves.update(Text.from_ansi(figure, no_wrap=True, overflow="crop"))
        lines = [f"[b]{self.level}-level, 95% CI[/b]"]
        for metric in ("recall", "precision", "hit_rate", "mrr", "f1", "ndcg"):
            for k in r.ks:
                lines.append(f"{metric:>9}@{k:<2} {fmt_estimate(overall[(metric, k)])}")
        self.query_one("#side", Static).update("\n".join(lines))
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        # As wide as the misses' texts when that fits; narrower, what came back instead gives way first, the
        # gold document's path last (enter opens the miss, with each whole).
        retrieved = [" · ".join(m["retrieved"]) or "—" for m in r.misses]
        wanted = {"question": natural("missed question", [m["question"] for m in r.misses]),
                  "gold": natural("gold document", [m["gold"] for m in r.misses]),
                  "retrieved": natural("retrieved instead (top 3)", retrieved)}
        room = text_room(table.size.width or self.size.width or 80, 3)
        widths = fit_widths(wanted, room, (("retrieved", 17), ("question", 16), ("gold", 12)))
        table.add_column("missed question", width=widths["question"], key="question")
        table.add_column("gold document", width=widths["gold"], key="gold")
        # The heading whole or shorter, never cut mid-word.
        table.add_column("retrieved instead (top 3)" if widths["retrieved"] >= 25 else "retrieved instead",
                         width=widths["retrieved"], key="retrieved")
        for i, (miss, instead) in enumerate(zip(r.misses, retrieved)):
            table.add_row(cell(miss["question"]), cell(miss["gold"]), cell(instead), key=str(i))
        if r.misses:
            table.move_cursor(row=min(cursor, len(r.misses) - 1))

    def action_next_retriever(self) -> None:
        """Show the next stored retriever of the corpus (bm25 → dense → hybrid → …)."""
        if self._no_report():
            return
        if len(self.retrievers) < 2 or self.retriever not in self.retrievers:
            self.notify(f"{self.retriever} is the only retriever stored for {self.report.dataset}: "
                        f"`workbench retrieve {self.report.dataset} --retriever dense` adds another.", timeout=5)
            return
        self.retriever = self.retrievers[(self.retrievers.index(self.retriever) + 1) % len(self.retrievers)]
        self.report, self.version, self.computing = None, None, False
        self.query_one("#heading", Static).update(f"[b]Retrieval[/b]  evaluating {esc(self.retriever)} …")
        self.refresh_report(force=True)

    def _no_report(self) -> bool:
        if self.report is None:
            self.notify("No retrieval evaluated yet" + (": it is being computed." if self.computing else
                        ": import a corpus and retrieve (see the heading)."), timeout=4)
            return True
        return False

    def action_toggle_level(self) -> None:
        if self._no_report():
            return
        self.level = "chunk" if self.level == "doc" else "doc"
        self._draw()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open_miss()

    def action_open_miss(self) -> None:
        table = self.query_one(DataTable)
        if self._no_report():
            return
        if table.row_count == 0:
            self.notify(f"No miss to open: {self.report.retriever} found a gold document for every question "
                        f"at @{max(self.report.ks)}.", timeout=4)
            return
        i = int(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        self.load("miss", _miss, self.report.dataset, self.report.misses[i])
