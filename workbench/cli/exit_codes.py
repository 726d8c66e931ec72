"""Exit codes of the ``workbench`` command, and the failures that map to them.

0 success; 1 unexpected failure, or the environment's (a database that is not SQLite, another
process holding the run, a model that cannot be used); 2 bad input or usage, nothing written
(argparse's own usage errors exit 2 as well); 130 stopped by Ctrl-C, the run stays resumable.
"""

from __future__ import annotations

import os
import sqlite3

from workbench.data.errors import InputRejected
from workbench.errors import EnvironmentFault
from workbench.models.base import ModelError

OK = 0
FAILURE = 1
BAD_INPUT = 2
STOPPED = 130   # 128 + SIGINT, as a shell reports a process ended by Ctrl-C


def failure_of(exc: Exception, db: str | None) -> tuple[int, str] | None:
    """The exit code and the message for ``exc`` raised by a verb, or None for a bug (its traceback is shown).

    ``db`` is the ``--db`` the user gave, named in the one line that stands in for a
    database error's traceback (unless ``WORKBENCH_DEBUG=1``).
    """
    # Imported on a failure only: the store loads sqlite_utils and pandas, which `workbench --help` never needs.
    from workbench.store.db import default_db_path
    from workbench.store.faults import sqlite_error_message
    from workbench.store.lookup import NotFound

    if isinstance(exc, InputRejected):
        return BAD_INPUT, f"error: input rejected, nothing was written:\n{exc}"
    if isinstance(exc, (ValueError, NotFound)):
        return BAD_INPUT, f"error: {exc}"
    if isinstance(exc, (EnvironmentFault, ModelError)):
        # ModelError: a model that passed the checks before the work but fails to load (llama.cpp
        # refuses it, a server stops answering) is the environment's, said in one line.
        return FAILURE, f"error: {exc}"
    if isinstance(exc, sqlite3.Error) and os.environ.get("WORKBENCH_DEBUG") != "1":
        # The last resort: one line naming the database rather than a traceback.
        return FAILURE, f"error: {sqlite_error_message(db or default_db_path(), exc)}"
    return None
