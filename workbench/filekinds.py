"""What a path is, in words: the one naming every refusal of a path that is not a regular file uses."""

from __future__ import annotations

import stat

__all__ = ["file_kind"]

_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symbolic link"))


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` is, as a noun phrase: "a regular file", "a FIFO", "a character device"…"""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "not a regular file"
