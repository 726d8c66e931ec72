"""Samples: one cell's samples by quadrant, searched and paged; tagging by key."""

from __future__ import annotations

import io
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from workbench.browse import QUADRANTS, list_samples, matching_tags
from workbench.data.outfile import TargetExists, write_atomic
from workbench.runs.report import first_cell
from workbench.store.queries import get_run
from workbench.triage import export_tagged, tag_counts
from workbench.tui.base import WorkbenchScreen
from workbench.tui.dialogs import ConfirmDialog, PromptDialog
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.screens.detail import SampleDetailScreen
from workbench.tui.tagging import TAG_GROUP, TAG_KEYS, set_sample_note, toggle_sample_tag
from workbench.tui.widgets import KeyFooter, fit, fit_tail

PAGE = 50
QUADRANT_KEYS = ("all", "dissipation", "leakage", "interface", "retrieval-miss", "right", "unscored", "error",
                 "unsupported")
QUADRANT_GROUP = Binding.Group("Quadrant", compact=True)
PAGE_GROUP = Binding.Group("Page", compact=True)


# Columns with fixed widths: a long tag list or question must not push the prediction off screen.
COLUMNS = (("sample", 21), ("question", 32), ("set", 3), ("vis", 3), ("K_eff", 5), ("cut", 3), ("score", 5),
           ("tags", 4), ("prediction", 22))
FLEXIBLE = ("sample", "question", "prediction")  # the text columns that give way on a narrow terminal


def column_widths(width: int) -> dict[str, int]:
    """Each column's width for a table ``width`` cells wide: every column stays on screen.

    At full width the widths are COLUMNS'; narrower, the sample id, the question and the
    prediction share what the short columns, the cell padding and the scrollbar leave.
    """
    widths = dict(COLUMNS)
    full = sum(widths.values()) + 2 * len(COLUMNS) + 2
    if width >= full:
        return widths
    room = width - 2 - 2 * len(COLUMNS) - sum(w for c, w in COLUMNS if c not in FLEXIBLE)
    widths["sample"] = max(8, min(21, room // 4))
    widths["question"] = max(8, (room - widths["sample"]) * 11 // 20)
    widths["prediction"] = max(6, room - widths["sample"] - widths["question"])
    return widths


@dataclass
class PageView:
    """What a page worker returns: the cell shown, one page of rows and, if the tag filter matched no
    tag at all, the dataset's tags (so the screen can say which exist)."""

    cell_id: str
    page: object
    known_tags: dict[str, int] | None = None


def _page(store, run_name, cell_id, quadrant, search, tag, offset):
    run = get_run(store, run_name)
    if cell_id is None:
        cell_id = first_cell(store, run)
    page = list_samples(store, run, cell_id, quadrant=quadrant, search=search, tag=tag, offset=offset, limit=PAGE)
    known = None
    if tag and page.total == 0:
        tags = tag_counts(store, run.dataset_id)
        if not matching_tags(tags, tag):
            known = tags
    return PageView(cell_id, page, known)


def tag_abbrev(tags) -> str:
    """Tags in a few characters: the tagging key's letter (A/L/R/F) or the first letter, then +N."""
    letters = {t: k for k, t in TAG_KEYS.items()}
    known = [letters[t] for t in TAG_KEYS.values() if t in tags]  # always in key order: A L R F
    short = "".join(known) + "".join(t[:1].lower() for t in tags if t not in letters)
    return short if len(short) <= 4 else short[:3] + "+"


def _export(store, run_name, path, force=False):
    """Write the tagged samples to ``path``: ``(count, path)``, or ``(None, path)`` when it exists and not ``force``."""
    buf = io.StringIO()
    count = export_tagged(store, get_run(store, run_name).dataset_id, buf)
    try:
        write_atomic(path, [buf.getvalue()], force=force, stdout=False)    # the TUI draws on stdout
    except TargetExists:
        return None, path
    return count, path


class SamplesScreen(WorkbenchScreen):
    """A page of rows at a time: only the visible page is ever loaded."""

    # At 80 columns the footer holds enter, the page keys, "1-9 Quadrant" (1 and 9 grouped, shown as 1 and
    # -9), /, t, the tag keys and Esc; the status line under the table names the quadrants and the rest.
    # priority: the focused table's own (hidden) enter and page keys would otherwise win, so the footer
    # would not show them and page keys would scroll instead of paging.
    BINDINGS = [
        Binding("enter", "detail", "Detail", priority=True),
        *[Binding(str(i + 1), f"quadrant('{q}')", q, show=i in (0, 8), group=QUADRANT_GROUP,
                  key_display="-9" if i == 8 else None) for i, q in enumerate(QUADRANT_KEYS)],
        Binding("slash", "search", "Search"), Binding("t", "tag_filter", "Tag filter"),
        *[Binding(k, f"tag('{t}')", t, group=TAG_GROUP) for k, t in TAG_KEYS.items()],
        Binding("escape", "back", "Ledger"),
        Binding("pageup,left_square_bracket", "page(-1)", "Prev page", priority=True, group=PAGE_GROUP,
                key_display="pgup"),
        Binding("pagedown,right_square_bracket", "page(1)", "Next page", priority=True, group=PAGE_GROUP,
                key_display="/pgdn"),
        Binding("g", "first", "First page", show=False), Binding("G", "last", "Last page", show=False),
        Binding("N", "note", "Note", show=False), Binding("X", "export", "Export tagged", show=False),
    ]

    def __init__(self):
        super().__init__()
        self.quadrant = "all"
        self.search = ""
        self.tag: str | None = None
        self.page_offset = 0
        self.total = 0
        self.rows = []
        self.known_tags: dict[str, int] | None = None
        # The (run, cell) the filters were chosen for: another cell starts unfiltered.
        self.shown: tuple[str | None, str | None] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        table = DataTable(id="samples", cursor_type="row", zebra_stripes=True)
        self._add_columns(table, dict(COLUMNS))
        yield table
        yield Static("", id="empty", classes="status")
        yield Static("", id="status", classes="status")
        yield KeyFooter()

    def _add_columns(self, table: DataTable, widths: dict[str, int]) -> None:
        self.widths = widths
        for label, _ in COLUMNS:
            table.add_column(label, width=widths[label], key=label)

    def on_resize(self) -> None:
        table = self.query_one(DataTable)
        widths = column_widths(table.size.width or self.size.width)
        if widths != self.widths:
            table.clear(columns=True)
            self._add_columns(table, widths)
            if self.shown is not None:  # a page has been loaded: draw it in the new columns
                self._draw()

    def on_screen_resume(self) -> None:
        if self.shown is not None and self.shown != (self.app.run_name, self.app.cell_id):
            self.quadrant, self.search, self.tag, self.page_offset = "all", "", None, 0
        self.reload()

    def on_data_changed(self, message: DataChanged) -> None:
        self.reload()

    def reload(self) -> None:
        if self.app.run_name is None:
            self.query_one("#heading", Static).update("No run selected: pick one in Runs (r).")
            return
        self.load("page", _page, self.app.run_name, self.app.cell_id, self.quadrant, self.search, self.tag,
                  self.page_offset)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "page":
            view: PageView = message.payload
            self.app.cell_id, page = view.cell_id, view.page
            self.shown = (self.app.run_name, view.cell_id)
            self.total, self.rows, self.known_tags = page.total, page.rows, view.known_tags
            if self.page_offset and self.page_offset >= self.total:
                self.page_offset = max(0, (self.total - 1) // PAGE * PAGE)
                self.reload()
                return
            self._draw()
        elif message.what == "tag":
            tag, now = message.payload
            self.notify(f"{'tagged' if now else 'untagged'} {tag}")
            self.reload()
        elif message.what == "note":
            self.notify("note saved")
        elif message.what == "export":
            count, path = message.payload
            if count is None:
                def replace(yes: bool | None) -> None:
                    if yes:
                        self.load("export", _export, self.app.run_name, path, True)

                self.app.push_screen(ConfirmDialog(f"{path} exists. Replace it?"), replace)
                return
            self.notify(f"wrote {count} tagged samples to {path}")

    def _draw(self) -> None:
        last = max(1, (self.total + PAGE - 1) // PAGE)
        filters = [f"quadrant [b]{self.quadrant}[/b] ({QUADRANTS[self.quadrant][1]})"]
        if self.search:
            filters.append(f"search “{esc(self.search)}”")
        if self.tag:
            filters.append(f"tag ~{esc(self.tag)}")
        self.query_one("#heading", Static).update(
            f"[b]Samples[/b] {self.app.run_name} · cell {self.app.cell_id} · " + " · ".join(filters)
            + f" · {self.total:,} samples · page {self.page_offset // PAGE + 1}/{last}")
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        for r in self.rows:
            score = "—" if r.score is None else f"{r.score:.2f}"
            w = self.widths
            table.add_row(fit_tail(r.sample_id, w["sample"]), fit(r.question, w["question"]),
                          "✓" if r.h_set else "·", "✓" if r.h_vis else "·", str(r.k_eff), "✂" if r.truncated else "",
                          score, tag_abbrev(r.tags), fit(r.prediction or "", w["prediction"]), key=str(r.sid))
        if self.rows:
            table.move_cursor(row=min(cursor, len(self.rows) - 1))
        empty = self.query_one("#empty", Static)
        empty.display = not self.rows
        empty.update(self._empty_text())
        # The tags column's letters are explained once there is a tag to read.
        legend = (" · tags column: A annotation-error, L alias-miss, R reasoning-fail, F format-fail"
                  if any(r.tags for r in self.rows) else "")
        self.query_one("#status", Static).update(f"[dim]{esc(status_line())}{legend}[/dim]")

    def _empty_text(self) -> str:
        if self.rows:
            return ""
        if self.known_tags is not None:
            known = ", ".join(f"{esc(t)} ({n})" for t, n in self.known_tags.items())
            return (f"[b]no tag matches “{esc(self.tag or '')}”[/b] · "
                    + (f"tags in this dataset: {known}" if known else
                       "no sample is tagged yet (A/L/R/F tag the highlighted sample)") + " · t changes the filter")
        narrowed = [f"search “{esc(self.search)}”"] if self.search else []
        narrowed += [f"tag ~{esc(self.tag)}"] if self.tag else []
        return (f"[b]no samples in {self.quadrant} for this cell[/b] ({QUADRANTS[self.quadrant][1]})"
                + (" with " + ", ".join(narrowed) if narrowed else "")
                + " · 1 shows all samples" + (" · / and t change the filters" if narrowed else ""))

    def action_back(self) -> None:
        self.app.switch_mode("ledger")

    def _sid(self) -> int | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return int(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def action_quadrant(self, quadrant: str) -> None:
        self.quadrant, self.page_offset = quadrant, 0
        self.reload()

    def action_page(self, step: int) -> None:
        new = self.page_offset + step * PAGE
        if 0 <= new < max(self.total, 1):
            self.page_offset = new
            self.reload()

    def action_first(self) -> None:
        self.page_offset = 0
        self.reload()

    def action_last(self) -> None:
        self.page_offset = max(0, (self.total - 1) // PAGE * PAGE)
        self.reload()

    def action_search(self) -> None:
        def got(text: str | None) -> None:
            if text is not None:
                self.search, self.page_offset = text.strip(), 0
                self.reload()

        self.app.push_screen(PromptDialog("Search questions and sample ids (empty clears)", self.search), got)

    def action_tag_filter(self) -> None:
        def got(text: str | None) -> None:
            if text is not None:
                self.tag, self.page_offset = (text.strip() or None), 0
                self.reload()

        self.app.push_screen(PromptDialog("Show only samples with a tag containing (e.g. alias; empty clears)",
                                          self.tag or ""), got)

    def action_tag(self, tag: str) -> None:
        sid = self._sid()
        if sid is not None:
            self.load("tag", toggle_sample_tag, self.app.run_name, sid, tag)

    def action_note(self) -> None:
        sid = self._sid()
        if sid is None:
            return

        def got(text: str | None) -> None:
            if text is not None:
                self.load("note", set_sample_note, self.app.run_name, sid, text)

        self.app.push_screen(PromptDialog("Note for this sample (empty clears)"), got)

    def action_export(self) -> None:
        def got(path: str | None) -> None:
            if path:
                self.load("export", _export, self.app.run_name, path.strip())

        self.app.push_screen(PromptDialog("Export tagged samples to (JSONL path)", "tagged.jsonl"), got)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # A click on the highlighted row (enter is the screen's priority binding).
        self.action_detail()

    def action_detail(self) -> None:
        sid = self._sid()
        if sid is not None:
            sids = [r.sid for r in self.rows]
            self.app.push_screen(SampleDetailScreen(self.app.run_name, sid, self.app.cell_id, sids))


def status_line() -> str:
    """The keys the footer has no room for at 80 columns, and what each quadrant key shows."""
    quadrants = " ".join(f"{i + 1} {q}" for i, q in enumerate(QUADRANT_KEYS))
    return f"{quadrants} · ]/[ also page, g/G first/last · N note · X export tagged"

