"""The database files this process has open, which nothing but SQLite may open.

On POSIX, closing any descriptor of a file drops every advisory lock the process holds on
that file, SQLite's included (SQLite's "How To Corrupt An SQLite Database File", 2.2). So a
path about to be opened with Python (an input, an output's header, a model file) is first
compared, by name and by device and inode, with the databases this process opened (or is
about to open: :func:`expect`), their ``-wal``, ``-shm`` and ``-journal`` files and their BM25
index cache ``<db>.indexes`` (:func:`database_file_of`). The store registers each database as
it opens it. This module imports nothing of the workbench's, so that finding a model file
still needs no database code.
"""

from __future__ import annotations

import os
from collections import Counter

__all__ = ["INDEX_CACHE_SUFFIX", "SIDECARS", "database_file_of", "expect", "opened", "closed",
           "open_database_paths"]

SIDECARS = ("-wal", "-shm", "-journal")
#: The BM25 index cache beside a database: ``<db>.indexes`` (:mod:`workbench.store.caches`).
INDEX_CACHE_SUFFIX = ".indexes"
# The real paths of every database this process opened: no output may be written over one.
_OPENED: set[str] = set()
# How many of this process's stores are open on each real path.
_OPEN_NOW: Counter[str] = Counter()


def opened(path: str | os.PathLike) -> int:
    """Record that a store opened ``path``; how many of this process's stores now have it open."""
    real = os.path.realpath(path)
    _OPENED.add(real)
    _OPEN_NOW[real] += 1
    return _OPEN_NOW[real]


def expect(path: str | os.PathLike) -> None:
    """Record that this process is about to open the database ``path`` (the CLI's ``--db``), so that
    an input or output naming it is refused before the store is even opened."""
    _OPENED.add(os.path.realpath(path))


def closed(path: str | os.PathLike) -> int:
    """Record that a store closed ``path``; how many of this process's stores still have it open."""
    real = os.path.realpath(path)
    _OPEN_NOW[real] -= 1
    return _OPEN_NOW[real]


def open_database_paths() -> frozenset[str]:
    """The real paths of the databases this process has opened (output files may not go there)."""
    return frozenset(_OPENED)


def database_file_of(path: str | os.PathLike, extra: str | os.PathLike | None = None) -> str | None:
    """What ``path`` is, if it is a file of a database this process opened (or of ``extra``), else None.

    "the database D", "the wal file of the database D" or "in the BM25 index cache of the
    database D". Compared by name (so a file not there yet counts) and by device and inode (so
    a hard link or a symbolic link is recognised too); nothing is opened.
    """
    databases = set(_OPENED)
    if extra is not None:
        databases.add(os.path.realpath(extra))
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    for db in sorted(databases):
        for suffix in ("", *SIDECARS):
            if real == db + suffix:
                return _describe(db, suffix)
        cache = db + INDEX_CACHE_SUFFIX
        if real == cache or real.startswith(cache + os.sep):
            return f"in {cache}, the BM25 index cache of the database {db}"
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    for db in sorted(databases):
        for suffix in ("", *SIDECARS):
            try:
                if os.path.samestat(st, os.stat(db + suffix)):
                    return _describe(db, suffix)
            except OSError:
                continue
    return None


def _describe(db: str, suffix: str) -> str:
    return f"the {suffix[1:]} file of the database {db}" if suffix else f"the database {db}"
