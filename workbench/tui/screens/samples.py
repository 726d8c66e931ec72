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
from workbench.tui.columns import cell, fit_widths, natural, text_room
from workbench.tui.widgets import KeyFooter, fit_tail

PAGE = 50
QUADRANT_KEYS = ("all", "dissipation", "leakage", "interface", "retrieval-miss", "right", "unscored", "error",
                 "unsupported")
QUADRANT_GROUP = Binding.Group("Quadrant", compact=True)
PAGE_GROUP = Binding.Group("Page", compact=True)


# The short columns keep their width; the sample id, the question and the prediction are as wide as the page's
# longest, and on a narrow terminal give way in NARROW_CUTS's order (the detail, enter, shows them whole).
SHORT = {"set": 3, "vis": 3, "K_eff": 5, "cut": 3, "score": 5, "tags": 4}
COLUMNS = ("sample", "question", "set", "vis", "K_eff", "cut", "score", "tags", "prediction")
# Read least first, each down to the narrowest it gets (the prediction's heading stays whole).
GIVES_WAY = (("sample", 10), ("prediction", 10), ("question", 12))


def column_widths(width: int, rows=()) -> dict[str, int]:
    """Each column's width for a table ``width`` cells wide showing ``rows``: every column stays on screen.

    The text columns are as wide as their longest text on the page when that fits; narrower, the sample
    id, then the prediction, then the question give way.
    """
    wanted = {"sample": natural("sample", [r.sample_id for r in rows]),
              "question": natural("question", [r.question for r in rows]),
              "prediction": natural("prediction", [r.prediction or "" for r in rows]), **SHORT}
    widths = fit_widths(wanted, text_room(width, len(COLUMNS)), GIVES_WAY)
    return {c: widths[c] for c in COLUMNS}


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


def _tagged(store, run_name) -> dict[str, int]:
    return tag_counts(store, get_run(store, run_name).dataset_id)


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

    NARROW_CUTS = {"samples": tuple(name for name, _ in GIVES_WAY)}

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
        self._add_columns(table, column_widths(self.app.size.width))
        yield table
        yield Static("", id="empty", classes="status")
        yield Static("", id="status", classes="status")
        yield KeyFooter()

    def _add_columns(self, table: DataTable, widths: dict[str, int]) -> None:
        self.widths = widths
        for label in COLUMNS:
            table.add_column(label, width=widths[label], key=label)

    def _fit_columns(self) -> None:
        """Columns as wide as the page's texts, within the table's width (laid out again when they change)."""
        table = self.query_one(DataTable)
        widths = column_widths(table.size.width or self.size.width, self.rows)
        if widths != self.widths:
            table.clear(columns=True)
            self._add_columns(table, widths)

    def on_resize(self) -> None:
        if self.shown is not None:  # a page has been loaded: draw it in the columns this width gives it
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
        elif message.what == "tagged":
            self._ask_export_path(message.payload)
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
        self._fit_columns()
        for r in self.rows:
            score = "—" if r.score is None else f"{r.score:.2f}"
            # The id cut from the left: its end (…dev-01137) tells samples apart.
            table.add_row(fit_tail(r.sample_id, self.widths["sample"]), cell(r.question),
                          "✓" if r.h_set else "·", "✓" if r.h_vis else "·", str(r.k_eff), "✂" if r.truncated else "",
                          score, tag_abbrev(r.tags), cell(r.prediction or ""), key=str(r.sid))
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
        narrowed = self._narrowed()
        return (f"[b]no samples in {self.quadrant} for this cell[/b] ({QUADRANTS[self.quadrant][1]})"
                + (" with " + ", ".join(narrowed) if narrowed else "") + " · " + " · ".join(self._ways_out()))

    def _narrowed(self) -> list[str]:
        """The filters besides the quadrant, as the heading names them."""
        narrowed = [f"search “{esc(self.search)}”"] if self.search else []
        return narrowed + ([f"tag ~{esc(self.tag)}"] if self.tag else [])

    def _ways_out(self) -> list[str]:
        """The keys that show more than this empty page, each said as what it really does: 1 changes the
        quadrant only (a search and a tag filter stay), / and t change those."""
        ways = []
        if self.quadrant != "all":
            ways.append("1 shows quadrant all" if self.search or self.tag else "1 shows all samples")
        if self.search and self.tag:
            ways.append("/ and t change the filters")
        elif self.search or self.tag:
            ways.append("/ changes the search" if self.search else "t changes the tag filter")
        return ways or ["esc goes back to the Ledger, to open another cell"]

    def action_back(self) -> None:
        self.app.switch_mode("ledger")

    def _sid(self) -> int | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return int(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def _no_run(self) -> bool:
        if self.app.run_name is None or self.shown is None:
            self.notify("No samples shown: open a run in Runs (r, then enter).", timeout=4)
            return True
        return False

    def _no_row(self, what: str) -> bool:
        """Say why a key for the highlighted sample has nothing to act on."""
        if self._no_run():
            return True
        if self._sid() is None:
            self.notify(f"No sample to {what}: {self._empty_reason()}.", timeout=4)
            return True
        return False

    def _empty_reason(self) -> str:
        narrowed = " with " + ", ".join(self._narrowed()) if self.search or self.tag else ""
        return f"quadrant {self.quadrant} of this cell is empty{narrowed} ({'; '.join(self._ways_out())})"

    def action_quadrant(self, quadrant: str) -> None:
        if self._no_run():
            return
        if quadrant == self.quadrant:
            narrowed = self._narrowed()
            # The search and the tag filter stay whatever the quadrant: said, so 1 is not taken to clear them.
            self.notify(f"Already showing quadrant {quadrant} ({QUADRANTS[quadrant][1]})"
                        + (f", narrowed by {', '.join(narrowed)}: {self._ways_out()[-1]}." if narrowed else "."),
                        timeout=4)
            return
        self.quadrant, self.page_offset = quadrant, 0
        self.reload()

    def _go_to_page(self, offset: int, where: str) -> None:
        if self._no_run():
            return
        last = max(0, (self.total - 1) // PAGE * PAGE)
        if not self.total:
            self.notify(f"No page to turn: {self._empty_reason()}.", timeout=4)
        elif self.total <= PAGE:
            on_it = "the one sample is" if self.total == 1 else f"all {self.total:,} samples are"
            self.notify(f"Only one page: {on_it} on it.", timeout=3)
        elif offset == self.page_offset or not 0 <= offset <= last:
            self.notify(f"Already on the {where} page.", timeout=3)
        else:
            self.page_offset = offset
            self.reload()

    def action_page(self, step: int) -> None:
        self._go_to_page(self.page_offset + step * PAGE, "last" if step > 0 else "first")

    def action_first(self) -> None:
        self._go_to_page(0, "first")

    def action_last(self) -> None:
        self._go_to_page(max(0, (self.total - 1) // PAGE * PAGE), "last")

    def action_search(self) -> None:
        if self._no_run():
            return

        def got(text: str | None) -> None:
            if text is not None:
                self.search, self.page_offset = text.strip(), 0
                self.reload()

        self.app.push_screen(PromptDialog("Search questions and sample ids (empty clears)", self.search), got)

    def action_tag_filter(self) -> None:
        if self._no_run():
            return

        def got(text: str | None) -> None:
            if text is not None:
                self.tag, self.page_offset = (text.strip() or None), 0
                self.reload()

        self.app.push_screen(PromptDialog("Show only samples with a tag containing (e.g. alias; empty clears)",
                                          self.tag or ""), got)

    def action_tag(self, tag: str) -> None:
        if not self._no_row("tag"):
            self.load("tag", toggle_sample_tag, self.app.run_name, self._sid(), tag)

    def action_note(self) -> None:
        if self._no_row("note"):
            return
        sid = self._sid()

        def got(text: str | None) -> None:
            if text is not None:
                self.load("note", set_sample_note, self.app.run_name, sid, text)

        self.app.push_screen(PromptDialog("Note for this sample (empty clears)"), got)

    def action_export(self) -> None:
        # Asked first: with nothing tagged there is nothing to write (an empty file would read as an export).
        if not self._no_run():
            self.load("tagged", _tagged, self.app.run_name)

    def _ask_export_path(self, tagged: dict[str, int]) -> None:
        if not tagged:
            self.notify("No sample of this dataset is tagged: nothing to export (A/L/R/F tag the highlighted "
                        "sample).", timeout=5)
            return

        def got(path: str | None) -> None:
            if path:
                self.load("export", _export, self.app.run_name, path.strip())

        count = sum(tagged.values())
        self.app.push_screen(PromptDialog(f"Export the tagged samples ({count:,} tags) to (JSONL path)",
                                          "tagged.jsonl"), got)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # A click on the highlighted row (enter is the screen's priority binding).
        self.action_detail()

    def action_detail(self) -> None:
        if self._no_row("open"):
            return
        sid = self._sid()
        if sid is not None:
            sids = [r.sid for r in self.rows]
            self.app.push_screen(SampleDetailScreen(self.app.run_name, sid, self.app.cell_id, sids))


def status_line() -> str:
    """The keys the footer has no room for at 80 columns, and what each quadrant key shows."""
    quadrants = " ".join(f"{i + 1} {q}" for i, q in enumerate(QUADRANT_KEYS))
    return f"{quadrants} · ]/[ also page, g/G first/last · N note · X export tagged"

