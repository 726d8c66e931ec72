"""Finding one named row: the named one, or the newest when no name is given; ``NotFound`` otherwise.

Every entity a user names on the command line (dataset, run, KG, dedup run, SearChain run)
is found through :func:`named_or_latest`, so a missing one is the same ``NotFound`` (exit 2)
everywhere, and its message lists the names that do exist.
"""

from __future__ import annotations

import sqlite3


class NotFound(LookupError):
    """A named dataset, run, KG or sample does not exist (the message says what does)."""


def named_or_latest(conn: sqlite3.Connection, source: str, columns: str, name: str | None, *, what: str,
                    none_yet: str, hint: str | None = None, alias: str = "") -> tuple:
    """The row of ``source`` whose name is ``name``, or the newest (highest id) when ``name`` is None.

    ``source`` is a table, possibly joined; ``alias`` is the prefix of its own columns in
    that join (e.g. ``"r."``). On a miss, NotFound says ``none_yet`` when nothing exists
    and no name was asked for, else "no {what} named ... (known: ...)", ending with ``hint``.
    """
    sql = f"SELECT {columns} FROM {source}"
    row = (conn.execute(f"{sql} WHERE {alias}name = ?", (name,)).fetchone() if name is not None
           else conn.execute(f"{sql} ORDER BY {alias}id DESC LIMIT 1").fetchone())
    if row is not None:
        return row
    if name is None:
        raise NotFound(none_yet)
    known = ", ".join(n for (n,) in conn.execute(f"SELECT {alias}name FROM {source} ORDER BY {alias}id")) or "none"
    raise NotFound(f"no {what} named {name!r} (known: {known}{'; ' + hint if hint else ''})")
