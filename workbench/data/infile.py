"""What an import may read: the one check every importing verb passes its input paths through.

An import names a file (predictions, labels, RAGChecker's JSON) or a directory (a dataset,
a corpus, a KG) whose files it reads. Before anything is opened, :func:`check_input` looks
at the path with ``stat`` and refuses, in one line (:class:`BadInput`, exit 2), anything
that is not what the verb reads, naming it as what it is:

- ``-``: an import reads a named file, not stdin;
- a path where nothing is: "not found", said of nothing else;
- a symbolic link to nothing, or a loop of links;
- a directory where a file is wanted, or a file where a directory is;
- a FIFO, a socket or a device. These are never opened: opening a FIFO waits for a writer
  that may never come, and a device such as ``/dev/zero`` never ends.

:func:`entry_kind` names what a directory entry is, for a corpus that skips such entries
with a warning instead of refusing the whole import.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from workbench.errors import BadInput
from workbench.filekinds import file_kind

__all__ = ["check_input", "check_optional", "entry_kind"]


def entry_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it is not a regular file (links followed), or None when it is one.

    A predicate: "is a FIFO", "is a directory", "is a symbolic link loop", "is a symbolic
    link to nothing (TARGET)"... Nothing is opened.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        return _unreachable(path, exc)
    return None if stat.S_ISREG(st.st_mode) else f"is {file_kind(st.st_mode)}"


def check_input(path: str | os.PathLike, *, directory: bool = False, hint: str = "") -> Path:
    """``path`` as a :class:`Path` if it is an existing regular file (a directory with ``directory``).

    Otherwise :class:`BadInput` says what it is instead, in one line. ``hint`` (e.g. "expected
    RAGChecker's JSON") is added in parentheses when nothing is there or it is the wrong kind.
    """
    wanted = "directory" if directory else "regular file"
    if str(path) == "-":
        raise BadInput(f"`-` (stdin) is not accepted here: name a {'directory' if directory else 'file'}")
    extra = f" ({hint})" if hint else ""
    shown, path = path, Path(path).expanduser()
    try:
        st = os.stat(path)
    except OSError as exc:
        what = _unreachable(path, exc)
        raise BadInput(f"{shown}: {what}{extra if what == 'not found' else ''}") from None
    if stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode):
        return path
    via = f" (a symbolic link to {os.readlink(path)})" if path.is_symlink() else ""
    raise BadInput(f"{shown}: is {file_kind(st.st_mode)}{via}, not a {wanted}{extra}")


def check_optional(path: str | os.PathLike) -> bool:
    """Whether an optional input file is there: False when nothing is at ``path``, True for a
    regular file; anything else (a directory, a FIFO, a link to nothing) is :class:`BadInput`."""
    if not os.path.lexists(path):
        return False
    check_input(path)
    return True


def _unreachable(path, exc: OSError) -> str:
    """Why ``stat`` could not reach ``path``: "not found" (nothing is there), or what is there instead."""
    if exc.errno == errno.ELOOP:
        return "is a symbolic link loop"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        if os.path.islink(path):
            return f"is a symbolic link to nothing ({os.readlink(path)})"
        return "not found"
    return f"cannot be examined ({exc.strerror or exc})"
