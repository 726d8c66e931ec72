"""sqlite_utils as the store imports it: without pandas, unless pandas is loaded already.

sqlite_utils imports pandas whenever it is installed, only to give ``pd.Timestamp`` values a
TEXT column when it creates a table from rows, which the workbench never does (its tables come
from its migrations). That import was most of every CLI verb's start-up (0.6 s of 1.2 s on a
2-core machine), so pandas is hidden while sqlite_utils loads; the analysis API imports pandas
itself when it is used. This module is imported by the store's first import, before the CLI or
the TUI start a thread, so no other thread can be importing pandas meanwhile.
"""

from __future__ import annotations

import sys


def _import_sqlite_utils():
    if "pandas" in sys.modules:
        import sqlite_utils
        return sqlite_utils
    sys.modules["pandas"] = None  # type: ignore[assignment]  # `import pandas` raises ImportError, as if absent
    try:
        import sqlite_utils
    finally:
        del sys.modules["pandas"]
    return sqlite_utils


sqlite_utils = _import_sqlite_utils()

__all__ = ["sqlite_utils"]
