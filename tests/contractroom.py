"""The room contract (docs/design.md §9): no column is cut while the screen has room for it.

Checked by tests/test_tui_key_contract.py, in the app its key walk uses.

On the demo-like database (tests/tuistates.py), every mode and the screen its enter opens, at
200×50 and at 80×24. For every table shown:

- a column is cut when a cell (or its heading) is wider than the column, or was shortened with "…";
- no column is cut while the table leaves columns of the screen unused;
- a table as wide as the screen cuts only the columns its screen names as giving way (``NARROW_CUTS``,
  the ones a user reads least): at 200 columns that is only text longer than the screen, and at 80
  columns the whole text of a cut cell is one key away (enter on its row shows it);
- scrolled sideways (→), a table starts on a column's edge: no column shows only its end;
- at 80 columns, on a screen whose ←/→ scroll or page a table's columns (Compare's terms, the Ledger's
  columns), every column the table holds at 200 columns, and every one it holds on any page, is whole in
  view (its heading and every value) on some page reached with →: none is only ever seen cut at an edge.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from textual.widgets import DataTable

from tuikit import SMALL, WIDE, screen_text
from tuiwalk import mode_of_key, press, settle



def plain(cell) -> str:
    return cell.plain if hasattr(cell, "plain") else str(cell)


def column_name(column) -> str:
    return str(column.key.value) if column.key.value else plain(column.label).strip()


def cut_columns(table: DataTable) -> dict[str, list[int]]:
    """Column (its key, else its heading) → the rows whose cell is cut (-1: the heading); the column's index
    is in ``cut_columns.index``."""
    cut: dict[str, list[int]] = {}
    for index, column in enumerate(table.ordered_columns):
        room = column.get_render_width(table) - 2 * table.cell_padding
        rows = [-1] if cell_len(plain(column.label).rstrip()) > room else []
        for row in range(table.row_count):
            lines = plain(table.get_cell_at((row, index))).split("\n")
            if any(cell_len(line) > room or line.endswith("…") for line in lines):
                rows.append(row)
        if rows:
            name = column_name(column)
            cut[name] = rows
            INDEX[name] = index
    return cut


INDEX: dict[str, int] = {}


def tables(screen) -> list[DataTable]:
    return [t for t in screen.query(DataTable) if t.display and t.region.width and t.row_count]


def whole_in_view(table: DataTable) -> set[str]:
    """The columns shown whole: not cut (``cut_columns``), and from edge to edge inside the table's view, a
    scrolled column right of the fixed ones."""
    cut = cut_columns(table)
    view = table.scrollable_content_region.width
    widths = [c.get_render_width(table) for c in table.ordered_columns]
    fixed = sum(widths[:table.fixed_columns])
    whole, left = set(), 0
    for index, (column, width) in enumerate(zip(table.ordered_columns, widths)):
        x = left if index < table.fixed_columns else left - round(table.scroll_x)
        if (index < table.fixed_columns or x >= fixed) and x + width <= view and column_name(column) not in cut:
            whole.add(column_name(column))
        left += width
    return whole


def sideways_screen(screen) -> bool:
    """A screen whose → scrolls or pages a table's columns."""
    return any(b.key == "right" and "scroll_table" in b.action for b in type(screen).BINDINGS)


def where_columns_are(screen) -> dict[tuple[str, str], set[str]]:
    """(screen, table) → the columns each shown table holds now."""
    return {(type(screen).__name__, t.id): {column_name(c) for c in t.ordered_columns} for t in tables(screen)}


def squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


class Room:
    """Checks the screen on top at one size; ``findings`` lists what breaks the contract."""

    def __init__(self, pilot, label: str):
        self.pilot, self.label, self.findings = pilot, label, []

    def where(self, table: DataTable) -> str:
        return f"{self.label} · {type(self.pilot.app.screen).__name__} #{table.id}"

    async def check(self, narrow: bool, follow: bool) -> None:
        screen = self.pilot.app.screen
        for table in tables(screen):
            cut = cut_columns(table)
            if not cut:
                continue
            room = table.scrollable_content_region.width
            used = sum(c.get_render_width(table) for c in table.ordered_columns)
            if used < room - 2:     # the vertical scrollbar's two columns come and go with the rows
                self.findings.append(f"{self.where(table)}: {sorted(cut)} cut, {room - used} of {room} columns unused")
                continue
            allowed = getattr(type(screen), "NARROW_CUTS", {}).get(table.id, ())
            others = sorted(set(cut) - set(allowed))
            if others:
                self.findings.append(f"{self.where(table)}: {others} cut (the columns that give way, read least: "
                                     f"{list(allowed)})")
            if narrow and follow:
                await self.one_key_away(table, cut)

    async def one_key_away(self, table: DataTable, cut: dict[str, list[int]]) -> None:
        """Enter on a row with a cut cell shows each cut cell of that row whole."""
        app = self.pilot.app
        row = min(r for rows in cut.values() for r in rows if r >= 0)
        wanted = [plain(table.get_cell_at((row, INDEX[name]))) for name, rows in cut.items() if row in rows]
        table.move_cursor(row=row)
        table.focus()
        where, before = self.where(table), app.screen
        await settle(self.pilot)
        await press(self.pilot, "enter")
        await settle(self.pilot)
        shown = squeezed(screen_text(app)) if app.screen is not before else ""
        for text in wanted:
            whole = squeezed(text.split("…")[0])
            if not shown or whole not in shown:
                self.findings.append(f"{where}: the whole of {text!r} is not one key (enter) away")
        while app.screen is not before and len(app.screen_stack) > 1:
            await app.pop_screen()
        await settle(self.pilot)

    async def scrolled(self) -> None:
        """→ twice on a screen that scrolls a table sideways: the table starts on a column's edge."""
        app = self.pilot.app
        screen = app.screen
        if not sideways_screen(screen):
            return
        for _ in range(2):
            await press(self.pilot, "right")
            await settle(self.pilot)
            for table in tables(screen):
                widths = [c.get_render_width(table) for c in table.ordered_columns[table.fixed_columns:]]
                edges = {sum(widths[:i]) for i in range(len(widths) + 1)}
                if table.scroll_x and round(table.scroll_x) not in edges:
                    self.findings.append(f"{self.where(table)}: scrolled to {table.scroll_x}, inside a column "
                                         f"(edges {sorted(edges)})")
        for _ in range(2):
            await press(self.pilot, "left")
        await settle(self.pilot)

    async def pages(self, wide: dict[tuple[str, str], set[str]]) -> None:
        """From the first page, → until it changes nothing: every column of each table (those it holds at 200
        columns, ``wide``, and on any page) is whole in view on some page. Then back to the first page."""
        screen = self.pilot.app.screen
        if not sideways_screen(screen):
            return
        seen: dict[str, set[str]] = {}
        held: dict[str, set[str]] = {}

        def state():
            return [(t.id, round(t.scroll_x), tuple(column_name(c) for c in t.ordered_columns)) for t in tables(screen)]

        async def walk(key: str, look: bool) -> None:
            for _ in range(PAGES):
                before = state()
                for table in tables(screen) if look else ():
                    seen.setdefault(table.id, set()).update(whole_in_view(table))
                    held.setdefault(table.id, set()).update(column_name(c) for c in table.ordered_columns)
                await press(self.pilot, key)
                await settle(self.pilot)
                if state() == before:
                    return

        await walk("left", look=False)
        await walk("right", look=True)
        await walk("left", look=False)
        for table_id, whole in seen.items():
            missing = (wide.get((type(screen).__name__, table_id), set()) | held[table_id]) - whole
            if missing:
                self.findings.append(f"{self.label} · {type(screen).__name__} #{table_id}: {sorted(missing)} never "
                                     "whole in view (heading and values) on any page that → reaches")


PAGES = 30      # more than any table's columns: → stops earlier, when it changes nothing


async def room_findings(pilot) -> list[str]:
    """Every mode and the screen its enter opens, at 200×50 then 80×24: what breaks the room contract (at 80×24
    also: every column of a mode's sideways table is whole on some page)."""
    app, findings = pilot.app, []
    wide: dict[tuple[str, str], set[str]] = {}
    for size in (WIDE, SMALL):
        await pilot.resize_terminal(*size)
        room = Room(pilot, f"{size[0]}×{size[1]}")
        for mode in mode_of_key(app).values():
            await app.switch_mode(mode)
            base = app.screen
            await settle(pilot)
            await room.check(size == SMALL, follow=True)
            await room.scrolled()
            if size == WIDE:
                wide.update(where_columns_are(base))
            else:
                await room.pages(wide)
            if tables(base):
                await press(pilot, "enter")
                await settle(pilot)
                if app.screen is not base and type(app.screen).__module__.startswith("workbench."):
                    await room.check(size == SMALL, follow=False)
                while len(app.screen_stack) > 1:
                    await app.pop_screen()
                await settle(pilot)
        findings += room.findings
    return findings
