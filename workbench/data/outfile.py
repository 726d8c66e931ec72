"""Where a file the workbench writes may go: the one guard every writing verb passes through.

An export, a report, a plot, a label or tag file, a dedup KG: each is written only to a path
the user named, and never onto something that is not plainly a file of theirs to replace.
:func:`check_target` refuses, with one line and exit 2 (:class:`BadInput`):

- the open workbench database, or its ``-wal``/``-shm``/``-journal`` files;
- any SQLite database (by its 16-byte header), or such a file of one;
- a symbolic link (whatever it points at: an export never writes through a link);
- a directory, a device, a FIFO or a socket;
- an existing file, unless ``force`` (``--force``): then it is replaced atomically;
- a path whose directory does not exist.

:func:`write_atomic` checks again just before it writes, then writes a temp file beside the
target and renames it over: a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable

from workbench.errors import BadInput, EnvironmentFault
from workbench.store.db import SQLITE_MAGIC, open_database_paths

__all__ = ["check_target", "write_atomic", "TargetExists"]
_SIDECARS = ("-wal", "-shm", "-journal")


class TargetExists(BadInput):
    """The output file exists and replacing it was not asked for (``--force``; the TUI asks)."""


def check_target(path: str | os.PathLike, *, force: bool = False, database: str | os.PathLike | None = None) -> Path:
    """``path`` as a :class:`Path` if a file may be written there, else :class:`BadInput` saying why.

    ``database`` names a database about to be opened (the CLI checks before the verb opens
    it); the databases this process has opened are protected without being named.
    """
    target = Path(path)
    try:
        st = target.lstat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise BadInput(f"{path}: cannot be written ({exc.strerror or exc})") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise BadInput(f"{path}: is a symbolic link; name the file itself (output is never written through a link)")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{path}: is a directory; name the file to write")
    _refuse_database(path, target, database)
    if st is None:
        if not target.parent.is_dir():
            raise BadInput(f"{target.parent}: directory does not exist (for {path})")
        return target
    if not stat.S_ISREG(st.st_mode):
        mode = st.st_mode
        kind = ("a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise BadInput(f"{path}: is {kind}; name a regular file (or - for stdout)")
    if _is_sqlite(target):
        raise BadInput(f"{path}: is a SQLite database; refusing to write over it")
    if not force:
        raise TargetExists(f"{path}: exists; pass --force to replace it")
    return target


def _refuse_database(path, target: Path, database) -> None:
    """The open database and any SQLite database's sidecar files, even where they do not exist yet."""
    real = os.path.realpath(target)
    opened = set(open_database_paths())
    if database is not None:
        opened.add(os.path.realpath(database))
    for db in opened:
        if real == db:
            raise BadInput(f"{path}: is the open workbench database; refusing to write over it")
        for suffix in _SIDECARS:
            if real == db + suffix:
                raise BadInput(f"{path}: is the {suffix[1:]} file of the open workbench database {db}")
    for suffix in _SIDECARS:
        if real.endswith(suffix) and _is_sqlite(Path(real[: -len(suffix)])):
            raise BadInput(f"{path}: is the {suffix[1:]} file of SQLite database {real[: -len(suffix)]}")


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def write_atomic(path: str | os.PathLike, chunks: Iterable[str | bytes], *, force: bool = False) -> int:
    """Write ``chunks`` (text as UTF-8, or bytes) to exactly ``path``; return the bytes written.

    :func:`check_target` first (``force`` allows replacing an existing file). The content
    goes to a temp file in the same directory, renamed over ``path`` when complete; an
    existing file's permissions are kept. A failed write (a full disk, no permission) is
    one :class:`EnvironmentFault` line, and ``path`` is as it was.
    """
    target = check_target(path, force=force)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.fchmod(fd, mode)     # mkstemp makes the file 0600; it should look as any other the user writes
        with os.fdopen(fd, "wb") as fh:
            size = _write_chunks(fh, chunks)
        # The target may have become something else while the content was computed.
        check_target(path, force=force)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise EnvironmentFault(f"cannot write {path}: {exc.strerror or exc}; nothing was written") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return size


def _write_chunks(fh, chunks: Iterable[str | bytes]) -> int:
    """Write text (as UTF-8) or bytes chunks to a binary file; return the bytes written."""
    size = 0
    for chunk in chunks:
        data = chunk.encode("utf-8") if isinstance(chunk, str) else chunk
        fh.write(data)
        size += len(data)
    return size


def _current_umask() -> int:
    # Read once at import: os.umask can only be read by setting it, which races with threads.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _current_umask()
