"""Table columns sized to what they hold: whole when the screen has room, and when it has not, the columns a
user reads least give way first (docs/design.md §9, the room contract)."""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.cells import cell_len
from rich.text import Text

SCROLLBAR = 2   # a table's vertical scrollbar, kept free whether it shows or not


def natural(label: str, texts: Iterable[str]) -> int:
    """The width a column takes to show ``label`` and every one of ``texts`` whole."""
    return max([cell_len(label)] + [cell_len(t) for t in texts])


def fit_widths(wanted: dict[str, int], room: int, give_way: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Widths for columns that want ``wanted`` cells within ``room``: as wanted when they fit, else the
    ``give_way`` columns (name, narrowest it may get), read least first, shrink in that order."""
    widths = dict(wanted)
    excess = sum(widths.values()) - room
    for name, least in give_way:
        if excess <= 0:
            break
        cut = min(excess, max(0, widths[name] - least))
        widths[name] -= cut
        excess -= cut
    return widths


def text_room(table_width: int, columns: int, padding: int = 1) -> int:
    """What a table ``table_width`` cells wide leaves for the text of ``columns`` columns."""
    return table_width - SCROLLBAR - 2 * padding * columns


def columns_that_fit(table_width: int, fixed: int, each: int, padding: int = 1) -> int:
    """How many columns of text ``each`` cells wide fit whole beside fixed columns holding ``fixed`` cells of
    text (one fixed column) in a table ``table_width`` cells wide; at least one, even if it is cut."""
    room = text_room(table_width, 1, padding) - fixed
    return max(1, room // (each + 2 * padding))


def fit_to_content(table) -> None:
    """Each auto-width column of a DataTable as wide as its heading and the cells it holds now.

    A column only widens with what it is given, and clear() keeps its width: a cell that was wide once (a mark,
    since cleared) would keep its column that wide. Measured at once, not at the table's next idle, so that what
    reads the widths in between (a scroll kept across a redraw) reads these.
    """
    for index, column in enumerate(table.ordered_columns):
        if column.auto_width:
            lines = (line for value in table.get_column_at(index) for line in _plain(value).split("\n"))
            column.content_width = natural(_plain(column.label), lines)


def _plain(value) -> str:
    return value.plain if isinstance(value, Text) else str(value)


def cell(text: str, style: str = "") -> Text:
    """A cell holding ``text`` whole: a column narrower than it ends it with "…" (never wraps it)."""
    return Text(" ".join(text.split()), style=style, no_wrap=True, overflow="ellipsis", end="")
