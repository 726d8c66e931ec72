"""What a path is, in words: the noun phrase every refusal of a path that is not a regular file uses.

The workbench opens files only through :func:`workbench.dbfiles.guarded_open`, which refuses
what :class:`NotRegular` names here: a FIFO or a device is never read (opening a FIFO blocks
until someone writes, and ``/dev/zero`` never ends).
"""

from __future__ import annotations

import os
import stat

__all__ = ["NotRegular", "file_kind"]

_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symbolic link"))


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
