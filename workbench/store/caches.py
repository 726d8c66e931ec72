"""What the workbench keeps beside a database besides SQLite's own files: the BM25 index cache.

It lives in ``<db>.indexes/``, beside the database. Only the retrieval code writes there; the
input guard (``workbench.data.infile``) and the output guard (``workbench.data.outfile``) refuse
every path that names it or anything inside it, as they refuse the database's ``-wal`` and ``-shm``
(:func:`workbench.dbfiles.database_file_of` knows it).
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.dbfiles import INDEX_CACHE_SUFFIX

__all__ = ["INDEX_CACHE_SUFFIX", "index_cache"]


def index_cache(database: str | os.PathLike) -> Path:
    """The directory of ``database``'s BM25 indexes: ``<database>.indexes``."""
    return Path(f"{os.fspath(database)}{INDEX_CACHE_SUFFIX}")
