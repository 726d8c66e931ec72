"""The cursor contract (docs/design.md §9): every detail pane, mark and side panel shows the highlighted row's own data.

A property test: hypothesis draws walks of keys (cursor moves, another run, a mark, a screen and
back, a sample's detail) on the demo-like database (tests/tuistates.py) and, after every key, the
screen on top must describe what is highlighted now:

- Ledger: the side panel names the highlighted cell and its n; "●" marks exactly the marked cells,
  all of the run shown; after another run (m) the side panel starts at its top;
- Samples opened from the Ledger (s or enter) is the highlighted cell's (or a detail of that cell left open),
  not another cell's detail left open;
- Sample detail shows the sample highlighted when it was opened;
- Compare: the flips line names the highlighted cell; Dedup: the contexts are the highlighted pair's.

Checked by tests/test_tui_key_contract.py, in the app its key walk uses: one app serves every example
(an app per example would cost seconds each); each example starts on the Ledger of the demo run, nothing
open above any screen.
"""

from __future__ import annotations

from textual.widgets import DataTable

from tuiwalk import press, settle
from workbench.tui.messages import DataChanged

# Drawn with these weights: mostly cursor moves, marks and the keys that change run or screen.
KEYS = ["down", "down", "up", "end", "pagedown", "m", "m", "space", "space", "J", "s", "s", "enter", "enter",
        "escape", "l", "l", "r", "C", "D"]


def highlighted(table: DataTable) -> str | None:
    if not table.row_count:
        return None
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


def text(widget) -> str:
    return str(widget.render())


class Checker:
    """What the screen on top must show, given the keys pressed so far in this example."""

    def __init__(self, pilot, run: str = "demo"):
        self.pilot, self.app, self.run = pilot, pilot.app, run
        self.opened_cell: str | None = None     # the cell highlighted on the Ledger when s/enter opened Samples
        self.opened_sample: str | None = None   # the sample highlighted on Samples when enter opened its detail
        self.marks_run: str | None = None       # the run shown when a cell was last marked

    async def reset(self) -> None:
        app = self.app
        for mode in ("samples", "compare", "dedup", "ledger"):
            await app.switch_mode(mode)
            while len(app.screen_stack) > 1:
                await app.pop_screen()
        app.run_name, app.cell_id = self.run, None
        await settle(self.pilot)
        app.screen.post_message(_data_changed(app))     # the Ledger shows run demo
        await settle(self.pilot)
        table = app.screen.query_one("#ledger", DataTable)
        for cell in list(app.screen.marked):            # nothing marked: space on each marked cell
            table.move_cursor(row=table.get_row_index(cell))
            await press(self.pilot, "space")
            await settle(self.pilot)
        table.move_cursor(row=0)
        await settle(self.pilot)

    async def step(self, key: str) -> None:
        app = self.app
        before = app.screen
        if type(before).__name__ == "LedgerScreen" and key in ("s", "enter"):
            self.opened_cell = highlighted(before.query_one("#ledger", DataTable))
        if type(before).__name__ == "LedgerScreen" and key == "space" and before.view is not None:
            self.marks_run = before.view.report.run
        if type(before).__name__ == "SamplesScreen" and key == "enter":
            table = before.query_one("#samples", DataTable)
            self.opened_sample = before.rows[table.cursor_row].sample_id if table.row_count else None
        await press(self.pilot, key)
        await settle(self.pilot)
        self.check(key, before)

    def check(self, key: str, before) -> None:
        screen = self.app.screen
        name = type(screen).__name__
        if name == "LedgerScreen":
            self.ledger(screen, key, before)
        elif name == "SamplesScreen" and type(before).__name__ == "LedgerScreen" and self.opened_cell:
            assert screen.app.cell_id == self.opened_cell and f"cell {self.opened_cell}" in text(
                screen.query_one("#heading")), f"Samples shows {screen.app.cell_id}, not {self.opened_cell}"
        elif name == "SampleDetailScreen" and type(before).__name__ == "LedgerScreen":
            # The detail left open over Samples may stay, if it is of the cell opened (coming back to it).
            assert (screen.run_name, screen.cell_id) == (self.app.run_name, self.opened_cell), \
                f"{key} on the Ledger ({self.opened_cell}) showed a Sample detail left open, of cell {screen.cell_id}"
        elif name == "SampleDetailScreen" and key == "enter" and self.opened_sample:
            assert screen.detail is not None and screen.detail.sample.id == self.opened_sample
        elif name == "CompareScreen" and screen.view is not None and screen.view.comparison is not None:
            cell = screen._highlighted()
            if cell is not None:
                assert cell.cell_a in text(screen.query_one("#flips-heading"))
        elif name == "DedupScreen" and screen.items:
            pair = screen._current()
            assert pair is not None and pair.name_a in text(screen.query_one("#context-a"))

    def ledger(self, screen, key: str, before) -> None:
        if screen.view is None:
            return
        table = screen.query_one("#ledger", DataTable)
        cells = [r["cell_id"] for r in screen.view.report.rows]
        marked = [c for c in cells if table.get_cell(c, table.ordered_columns[0].key).startswith("●")]
        assert marked == [c for c in cells if c in screen.marked], f"● on {marked}, marked {screen.marked}"
        assert not screen.marked or self.marks_run == screen.view.report.run, \
            f"● {screen.marked} were marked on run {self.marks_run}; the Ledger shows {screen.view.report.run}"
        cell = highlighted(table)
        if cell is not None and len(screen.marked) < 2:
            labels = [str(column.label) for column in table.ordered_columns]
            n = table.get_row(cell)[labels.index("n")]      # the n column, as the table shows it
            side = text(screen.query_one("#side"))
            assert f"{cell}  n={n}" in side, f"the side panel does not describe {cell}: {side[:80]!r}"
        if key == "m" and before is screen:
            assert screen.query_one("#side-scroll").scroll_y == 0, "another run, the side panel kept its scroll"


def _data_changed(app):
    return DataChanged(app.store.data_version())
