"""What a path is, in words, and the one way the workbench opens a file it only inspects or reads.

:func:`file_kind` names every refusal of a path that is not a regular file. :func:`open_regular_fd`
is how a file is opened to be looked at or read (an output's would-be database header, a cache
file, a model header, an input): it is examined with ``stat`` first and opened only if it is a
regular file, with ``O_NONBLOCK``, so that a path that turns into a FIFO between the look and the
open does not wait for a writer; the opened descriptor is examined again with ``fstat``. A FIFO
or a device is never read: opening a FIFO blocks until someone writes, and ``/dev/zero`` never
ends. Reading a regular file is bounded by its own size, which :func:`read_regular` bounds again.
"""

from __future__ import annotations

import os
import stat

__all__ = ["NotRegular", "file_kind", "open_regular_fd", "read_regular"]

_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symbolic link"))

# O_NONBLOCK: a FIFO put in place of the file between the stat and the open is opened at once
# (and refused by fstat) instead of waiting for a writer. It changes nothing for a regular file.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


class NotRegular(OSError):
    """The path is not a regular file (``kind`` says what it is instead); it was not read."""

    def __init__(self, path: str | os.PathLike, kind: str):
        super().__init__(f"{os.fsdecode(path)}: is {kind}, not a regular file")
        self.kind = kind


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` is, as a noun phrase: "a regular file", "a FIFO", "a character device"…"""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "not a regular file"


def open_regular_fd(path: str | os.PathLike, *, follow: bool = True) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path``, and its ``fstat``; the caller closes it.

    Raises :class:`NotRegular` for anything else (nothing is opened), ``FileNotFoundError``
    or another ``OSError`` when it cannot be looked at. ``follow=False`` refuses a symbolic
    link itself (a cache the workbench wrote holds none).
    """
    st = os.stat(path) if follow else os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(path, file_kind(st.st_mode))
    fd = os.open(path, _OPEN_FLAGS | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise NotRegular(path, file_kind(opened.st_mode))
    except BaseException:
        os.close(fd)
        raise
    return fd, opened


def read_regular(path: str | os.PathLike, limit: int | None = None, *, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (its first ``limit`` at most), read without blocking.

    A file larger than ``limit`` is not an error: only its first ``limit`` bytes are read.
    Raises as :func:`open_regular_fd` does.
    """
    fd, st = open_regular_fd(path, follow=follow)
    try:
        want = st.st_size if limit is None else min(limit, st.st_size)
        chunks, got = [], 0
        while got < want:
            chunk = os.read(fd, min(want - got, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
