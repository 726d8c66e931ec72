"""The two kinds of failure the workbench reports in one clear line instead of a traceback.

``BadInput`` (exit 2) is the user's to fix: a name, a flag, a file. ``EnvironmentFault``
(exit 1) is the machine's: a database that is not SQLite, a full disk, a read-only file,
another process holding a run. Either way nothing has been written.
"""

from __future__ import annotations


class BadInput(ValueError):
    """Bad input or usage, reported as ``error: <message>`` with exit 2; nothing was written."""


class EnvironmentFault(RuntimeError):
    """A fault of the environment, reported as ``error: <message>`` with exit 1; nothing was written."""
