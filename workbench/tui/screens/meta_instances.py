"""Meta: a scorer's instances, the largest disagreement with the annotators first, and one instance's
query, reference and both responses side by side with their claims and verdicts."""

from __future__ import annotations


from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Header, Static

from workbench.meta.instances import Disagreement
from workbench.meta.report import MetaRow
from workbench.tui.base import WorkbenchScreen
from workbench.tui.markup import esc
from workbench.tui.messages import Loaded
from workbench.tui.columns import cell
from workbench.tui.widgets import KeyFooter, move_or_say, scroll_both_or_say
from workbench.tui.meta_view import (BOTH_KEYS, INSTANCE_KEYS, PADDING, SCROLLBAR, WIDE, claim_run_key, load_disagreements,
                                     load_instance, response_lines, row_name, signed)


class MetaInstancesScreen(WorkbenchScreen):
    """A scorer's instances under one label, the largest disagreement with the annotators first."""

    BINDINGS = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
        Binding("enter", "open", "Open instance", priority=True),
        Binding("j", "move(1)", "Down", show=False),
        Binding("k", "move(-1)", "Up", show=False),
    ]
    AUTO_FOCUS = "#instances"
    NARROW_CUTS = {"instances": ("query",)}     # enter opens the instance, with its query whole

    def __init__(self, meta_name: str, row: MetaRow):
        super().__init__()
        self.meta_name, self.row = meta_name, row
        self.items: list[Disagreement] | None = None
        self._width: int | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(f"[b]{esc(row_name(self.row))}[/b]  loading …", id="heading", classes="title")
        yield DataTable(id="instances", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.load("instances", load_disagreements, self.meta_name, self.row)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "instances":
            self.items = message.payload
            self._draw()

    def on_resize(self) -> None:
        if self.items is not None:
            self._draw()

    def _draw(self) -> None:
        row, items = self.row, self.items
        pair = row.kind == "annotators"
        explain = ("A1, A2: each annotator's label (−2 … +2: response 1 … response 2 much better) · distance: "
                   "|z(A1) − z(A2)|" if pair else "Δ: the scorer's response 2 − 1 · people: the annotators' mean "
                                                  "label (−2 … +2) · distance: |z(Δ) − z(people)|")
        self.query_one("#heading", Static).update(
            f"[b]{esc(row_name(row))}[/b] · set {esc(self.meta_name)} · {len(items):,} instances, worst "
            f"disagreement first\n[dim]{explain}[/dim]")
        table = self.query_one("#instances", DataTable)
        width = self.size.width or 80
        if self._width == width and table.row_count == len(items):
            return
        self._width = width
        cursor = table.cursor_row
        deltas = signed([d.delta for d in items])
        humans = signed([d.human for d in items]) if pair else [f"{d.human:+.2f}" for d in items]
        distances = [f"{d.distance:.2f}" for d in items]
        names = ("A1", "A2") if pair else ("Δ", "people")
        id_w = max([len(d.instance) for d in items] + [len("instance")])
        d_w = max(map(len, deltas + [names[0]]))
        h_w = max(map(len, humans + [names[1]]))
        x_w = max(map(len, distances + ["distance"]))
        query_w = max(12, width - (id_w + d_w + h_w + x_w + 5 * PADDING + SCROLLBAR))
        table.clear(columns=True)
        table.add_column("instance", width=id_w, key="instance")
        table.add_column(Text(names[0], justify="right"), width=d_w, key="delta")
        table.add_column(Text(names[1], justify="right"), width=h_w, key="human")
        table.add_column(Text("distance", justify="right"), width=x_w, key="distance")
        table.add_column("query", width=query_w, key="query")
        for d, delta, human, distance in zip(items, deltas, humans, distances):
            table.add_row(Text(d.instance), Text(delta, justify="right"), Text(human, justify="right"),
                          Text(distance, justify="right"), cell(d.query), key=str(d.sid))
        if items:
            table.move_cursor(row=min(cursor, len(items) - 1))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        if not self.items:
            self.notify("no instance to open: this scorer has no defined difference here" if self.items is not None
                        else "the instances are still loading", timeout=4)
            return
        table = self.query_one("#instances", DataTable)
        self.app.push_screen(MetaInstanceScreen(self.meta_name, self.row, self.items,
                                                min(table.cursor_row, len(self.items) - 1)))

    def action_move(self, step: int) -> None:
        move_or_say(self, self.query_one("#instances", DataTable), step)


class MetaInstanceScreen(WorkbenchScreen):
    """One instance: query and reference on top, both responses beside each other (one above the other on a
    narrow terminal), each with the annotators' labels, its claims and the reference's claims it holds."""

    BINDINGS = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
        Binding("j", "instance(1)", "Next instance", group=INSTANCE_KEYS),
        Binding("k", "instance(-1)", "Prev instance", group=INSTANCE_KEYS, key_display="/k"),
        Binding("J", "scroll_both(1)", "Both panes down", group=BOTH_KEYS),
        Binding("K", "scroll_both(-1)", "Both panes up", group=BOTH_KEYS, key_display="/K"),
        Binding("e", "toggle_reference", "Whole reference"),
    ]
    AUTO_FOCUS = "#side-1"

    def __init__(self, meta_name: str, row: MetaRow, items: list[Disagreement], index: int):
        super().__init__()
        self.meta_name, self.row, self.items, self.index = meta_name, row, items, index
        self.detail: dict | None = None
        self._drawn: tuple[int, int] | None = None      # the widths the responses were wrapped to

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("loading …", id="heading", classes="title")
        with VerticalScroll(id="reference-scroll"):
            yield Static("", id="reference")
        with Horizontal(id="sides"):
            with VerticalScroll(id="side-1", classes="pane"):
                yield Static("", id="response-1")
            with VerticalScroll(id="side-2", classes="pane"):
                yield Static("", id="response-2")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        self.load("instance", load_instance, self.meta_name, self.items[self.index].sid, claim_run_key(self.row))

    def on_loaded(self, message: Loaded) -> None:
        if message.what != "instance":
            return
        if message.payload["sid"] != self.items[self.index].sid:
            return      # j/k moved on while it loaded: that instance's detail follows
        self.detail = message.payload
        self._draw()
        for pane in self.query(".pane"):
            pane.scroll_home(animate=False)
        self.query_one("#reference-scroll", VerticalScroll).scroll_home(animate=False)

    def on_resize(self) -> None:
        self.set_class(self.size.width < WIDE, "stacked")
        if self.detail is not None:
            # Wrapped to the panes' width, which the new layout gives once it is laid out.
            self.call_after_refresh(self._rewrap)

    def _draw(self) -> None:
        d, item = self.detail, self.items[self.index]
        if d is None:
            return
        pair = self.row.kind == "annotators"
        delta, human = signed([item.delta]), signed([item.human])
        numbers = f"A1 {delta[0]} · A2 {human[0]}" if pair else f"Δ {delta[0]} · people {item.human:+.2f}"
        self.query_one("#heading", Static).update(
            f"[b]Instance {esc(d['instance'])}[/b] · {self.index + 1} of {len(self.items)} by disagreement (j/k) · "
            f"{esc(row_name(self.row))}: {numbers} · distance {item.distance:.2f}\n[b]Query[/b] {esc(d['query'])}")
        self.query_one("#reference", Static).update(
            Content.assemble(("Reference ", "bold"), " ".join((d["reference"] or "(none)").split())))
        widths = self._widths()
        for side, width in zip(d["responses"], widths):
            text = Content("\n").join(response_lines(d, side, width, self.row))
            self.query_one(f"#response-{side['side']}", Static).update(text)
        self._drawn = widths
        # The panes' width is known once laid out (a new layout after a resize): wrapped again if it changed.
        self.call_after_refresh(self._rewrap)

    def _widths(self) -> tuple[int, int]:
        """Each response pane's text width (its scrollbar's place kept, shown or not)."""
        wide = self.size.width >= WIDE
        guess = max(20, (self.size.width - 8) // 2 if wide else self.size.width - 6)
        return tuple(self.query_one(f"#side-{n}", VerticalScroll).scrollable_content_region.width or guess
                     for n in (1, 2))

    def _rewrap(self) -> None:
        if self.detail is not None and self._widths() != self._drawn:
            self._draw()

    def action_instance(self, step: int) -> None:
        i = self.index + step
        if not 0 <= i < len(self.items):
            self.notify("This is the last instance of the list." if step > 0 else
                        "This is the first instance: the largest disagreement.", timeout=3)
            return
        self.index = i
        self.reload()

    def action_scroll_both(self, step: int) -> None:
        scroll_both_or_say(self, step)

    def action_toggle_reference(self) -> None:
        self.toggle_class("whole")
        self.notify("the whole reference" if self.has_class("whole") else "the reference in a few lines "
                    "(↑/↓ scroll it once focused with tab)", timeout=3)
