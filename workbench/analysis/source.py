"""Where the analysis API reads from: a database path, opened read-only, or a Store given by the caller."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator, Union

from workbench.store.db import Store, open_readonly

#: A database path, or an open :class:`~workbench.store.db.Store` (used as it is and left open).
Db = Union[str, "os.PathLike[str]", Store]


def connect(path: str | os.PathLike) -> Store:
    """Open the database at ``path`` read-only (SQLite ``mode=ro``), for several frames in a row.

    Every write through the returned store fails, and a writer in another process is never
    blocked. Close it with ``.close()``.
    """
    return open_readonly(path)


@contextmanager
def reading(db: Db) -> Iterator[Store]:
    """The store to read ``db`` through: a path is opened read-only and closed afterwards."""
    if isinstance(db, Store):
        yield db
        return
    store = open_readonly(db)
    try:
        yield store
    finally:
        store.close()


__all__ = ["Db", "connect", "reading"]
