"""What the workbench keeps beside a database besides SQLite's own files: the BM25 index cache.

It lives in ``<db>.indexes/``, beside the database. Only the retrieval code writes there, and
the output guard (``workbench.data.outfile``) refuses every ``--out`` that names it or anything
inside it, as it refuses the database's ``-wal`` and ``-shm``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["INDEX_CACHE_SUFFIX", "index_cache"]

INDEX_CACHE_SUFFIX = ".indexes"


def index_cache(database: str | os.PathLike) -> Path:
    """The directory of ``database``'s BM25 indexes: ``<database>.indexes``."""
    return Path(f"{os.fspath(database)}{INDEX_CACHE_SUFFIX}")
