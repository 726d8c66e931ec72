"""What the workbench may read on a user's word: the one guard every input path passes through.

A verb names a file (predictions, labels, RAGChecker's JSON, a prompt template) or a
directory (a dataset, a corpus, a KG) whose files it reads. Before anything is opened,
:func:`check_input` looks at the path with ``stat`` and refuses, in one line
(:class:`BadInput`, exit 2), anything that is not what the verb reads, naming it as what it is:

- a file of a database this process has open or is about to open (the database itself, its
  ``-wal``, ``-shm`` or ``-journal``, its BM25 index cache), by name or by device and inode, so a
  hard link counts (:func:`refuse_database`). Reading it with Python would be harmless as a
  read, but closing that descriptor drops every POSIX lock the process holds on the file,
  SQLite's included: another process may then delete the -wal under the open connection and a
  later commit is lost (SQLite's "How To Corrupt An SQLite Database File", 2.2);
- ``-``: an import reads a named file, not stdin;
- a path where nothing is: "not found", said of nothing else;
- a symbolic link to nothing, or a loop of links;
- a directory where a file is wanted, or a file where a directory is;
- a FIFO, a socket or a device. These are never opened: opening a FIFO waits for a writer
  that may never come, and a device such as ``/dev/zero`` never ends.

:func:`entry_kind` names what a directory entry is, for a corpus that skips such entries
with a warning instead of refusing the whole import. :func:`open_input` and
:func:`read_input` are how an input is then read: through the same guard, opened without
blocking, a regular file only.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from typing import BinaryIO

from workbench.dbfiles import database_file_of, open_regular_fd, read_regular
from workbench.errors import BadInput
from workbench.filekinds import NotRegular, file_kind
from workbench.paths import user_path

__all__ = ["check_input", "check_optional", "entry_kind", "open_input", "read_input", "refuse_database"]


def refuse_database(path: str | os.PathLike, shown: str | os.PathLike | None = None) -> None:
    """:class:`BadInput` if ``path`` is a file of a database this process has open (see the module).

    ``shown`` is how the user named it (``path`` by default).
    """
    held = database_file_of(path)
    if held is not None:
        raise BadInput(f"{path if shown is None else shown}: is {held}; the workbench never reads its database "
                       "as an input (name the file to read)")


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
    shown, path = path, user_path(path)
    refuse_database(path, shown)
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


def open_input(path: str | os.PathLike, *, hint: str = "") -> BinaryIO:
    """The regular file ``path``, opened for reading in binary, once :func:`check_input` accepts it.

    Opened without blocking (should it have become a FIFO since, it is refused, not waited on).
    """
    path = check_input(path, hint=hint)
    try:
        fd, _ = open_regular_fd(path)
    except NotRegular as exc:
        raise BadInput(f"{path}: is {exc.kind}, not a regular file") from None
    return os.fdopen(fd, "rb")


def read_input(path: str | os.PathLike, *, limit: int | None = None, what: str = "file", hint: str = "") -> bytes:
    """The bytes of the input file ``path`` (:func:`check_input` first); one over ``limit`` bytes is refused."""
    path = check_input(path, hint=hint)
    size = path.stat().st_size
    if limit is not None and size > limit:
        raise BadInput(f"{path}: {size:,} bytes, over the {limit:,}-byte limit for one {what}")
    try:
        return read_regular(path, limit)
    except NotRegular as exc:
        raise BadInput(f"{path}: is {exc.kind}, not a regular file") from None


def _unreachable(path, exc: OSError) -> str:
    """Why ``stat`` could not reach ``path``: "not found" (nothing is there), or what is there instead."""
    if exc.errno == errno.ELOOP:
        return "is a symbolic link loop"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        if os.path.islink(path):
            return f"is a symbolic link to nothing ({os.readlink(path)})"
        return "not found"
    return f"cannot be examined ({exc.strerror or exc})"
