"""Where a file the workbench writes may go: the one guard every writing verb passes through.

An export, a report, a plot, a label or tag file, a dedup KG: each is written only to a path
the user named, and never onto something that is not plainly a file of theirs to replace.
``-`` is stdout, here and only here, so that no verb can take it for a file name (``./-``
names a file called ``-``). :func:`check_target` refuses, with one line and exit 2
(:class:`BadInput`):

- an empty path;
- the open workbench database, its ``-wal``/``-shm``/``-journal`` files, or its BM25 index
  cache (``<db>.indexes``) or anything inside it;
- any SQLite database (by its 16-byte header), or such a file or cache of one;
- a symbolic link (whatever it points at: an export never writes through a link);
- a directory, a device, a FIFO or a socket;
- an existing file, unless ``force`` (``--force``): then it is replaced atomically;
- a path whose directory does not exist.

:func:`write_atomic` checks again just before it writes, then writes a temp file beside the
target and renames it over: a reader sees the old file or the new one, never half of one. To
``-`` it streams the content to stdout (:func:`workbench.terminal.write_data`: escaped on a
terminal, byte for byte into a file or a pipe). An output that is a directory of files (``dedup
export``) passes :func:`check_directory` and is created by :func:`make_directory`.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Iterable

from workbench.errors import BadInput, EnvironmentFault
from workbench.paths import expand_home
from workbench.filekinds import file_kind
from workbench.dbfiles import INDEX_CACHE_SUFFIX, SIDECARS, database_file_of, new_temp, open_database_paths, read_regular
from workbench.store.db import SQLITE_MAGIC
from workbench.terminal import write_data

__all__ = ["STDOUT", "check_directory", "check_target", "is_stdout", "make_directory", "write_atomic", "TargetExists"]
#: The output path that means stdout.
STDOUT = "-"


class TargetExists(BadInput):
    """The output file exists and replacing it was not asked for (``--force``; the TUI asks)."""


def is_stdout(path: str | os.PathLike) -> bool:
    """Whether ``path`` is ``-``, which every output takes to mean stdout."""
    return os.fspath(path) == STDOUT


def check_target(path: str | os.PathLike, *, force: bool = False, database: str | os.PathLike | None = None,
                 stdout: bool = True) -> Path | None:
    """``path`` as a :class:`Path` if a file may be written there (None for ``-``, stdout), else :class:`BadInput`.

    ``database`` names a database about to be opened (the CLI checks before the verb opens
    it); the databases this process has opened are protected without being named. Where
    stdout is not the user's to read (the TUI draws on it), ``stdout=False`` refuses ``-``.
    """
    if is_stdout(path):
        if stdout:
            return None
        raise BadInput("-: stdout is not available here; name a file (./- for a file named -)")
    target = _named(path, "a file (or - for stdout)")
    st = _lstat(path, target)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise BadInput(f"{path}: is a symbolic link; name the file itself (output is never written through a link)")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{path}: is a directory; name the file to write")
    _refuse_database(path, target, database)
    if st is None:
        return _in_an_existing_directory(path, target)
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{path}: is {file_kind(st.st_mode)}; name a regular file (or - for stdout)")
    if _is_sqlite(target):
        raise BadInput(f"{path}: is a SQLite database; refusing to write over it")
    if not force:
        raise TargetExists(f"{path}: exists; pass --force to replace it")
    return target


def check_directory(path: str | os.PathLike, *, files: Iterable[str], force: bool = False,
                    database: str | os.PathLike | None = None) -> Path:
    """``path`` as a :class:`Path` if a directory of ``files`` may be written there, else :class:`BadInput`.

    The directory is the user's to name as a file is: not ``-`` (a directory cannot be
    stdout), not a link, not the database's or its index cache; missing, its parent must
    exist (:func:`make_directory` creates it); existing, each of ``files`` in it passes
    :func:`check_target` (``force`` replaces them).
    """
    if is_stdout(path):
        raise BadInput("-: a directory output cannot be stdout; name a directory (it is created if missing)")
    target = _named(path, "a directory")
    st = _lstat(path, target)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise BadInput(f"{path}: is a symbolic link; name the directory itself "
                       "(output is never written through a link)")
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{path}: is not a directory; name the directory the files go in")
    _refuse_database(path, target, database)
    if st is None:
        return _in_an_existing_directory(path, target)
    for name in files:
        check_target(target / name, force=force, database=database)
    return target


def make_directory(path: str | os.PathLike) -> Path:
    """Create the directory output ``path`` unless it is there (:func:`check_directory` first, again).

    A directory that cannot be made (a read-only filesystem, no permission) is one
    :class:`EnvironmentFault` line.
    """
    target = check_directory(path, files=())
    try:
        os.mkdir(target)
    except FileExistsError:
        # Made by someone else meanwhile: it must still be a plain directory.
        check_directory(path, files=())
    except OSError as exc:
        raise EnvironmentFault(f"cannot create directory {path}: {exc.strerror or exc}; nothing was written") from None
    return target


def _in_an_existing_directory(path, target: Path) -> Path:
    """``target``, a new output, when its directory exists; an output never creates its parents."""
    if not target.parent.is_dir():
        raise BadInput(f"{target.parent}: directory does not exist (for {path})")
    return target


def _named(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a :class:`Path`, refusing the empty one (which :class:`Path` would take for ``.``)."""
    if os.fspath(path) == "":
        raise BadInput(f"the output path is empty; name {what}")
    return Path(expand_home(path))


def _lstat(path, target: Path) -> os.stat_result | None:
    try:
        return target.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadInput(f"{path}: cannot be written ({exc.strerror or exc})") from None


def _refuse_database(path, target: Path, database) -> None:
    """The open database, its index cache and any SQLite database's sidecar files, even where they do not exist yet."""
    real = os.path.realpath(target)
    opened = set(open_database_paths())
    if database is not None:
        opened.add(os.path.realpath(database))
    for db in opened:
        if real == db:
            raise BadInput(f"{path}: is the open workbench database; refusing to write over it")
        for suffix in SIDECARS:
            if real == db + suffix:
                raise BadInput(f"{path}: is the {suffix[1:]} file of the open workbench database {db}")
        cache = db + INDEX_CACHE_SUFFIX
        if real == cache or real.startswith(cache + os.sep):
            raise BadInput(f"{path}: is in {cache}, the BM25 index cache of the open workbench database")
    held = database_file_of(real, database)
    if held is not None:
        raise BadInput(f"{path}: is {held}, by another name; refusing to write over it")
    for suffix in SIDECARS:
        if real.endswith(suffix) and _is_sqlite(Path(real[: -len(suffix)])):
            raise BadInput(f"{path}: is the {suffix[1:]} file of SQLite database {real[: -len(suffix)]}")
    for place in (Path(real), *Path(real).parents):
        if len(place.name) <= len(INDEX_CACHE_SUFFIX) or not place.name.endswith(INDEX_CACHE_SUFFIX):
            continue
        owner = place.with_name(place.name[: -len(INDEX_CACHE_SUFFIX)])
        if _is_sqlite(owner):
            raise BadInput(f"{path}: is in {place}, the BM25 index cache of SQLite database {owner}")


def _is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's header. A file of a database this process opened is
    answered without reading it: closing that descriptor would drop SQLite's locks."""
    if database_file_of(path) is not None:
        return True
    try:
        # A FIFO or a device is no database, and is not opened: a FIFO would block until a writer came.
        return read_regular(path, len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def write_atomic(path: str | os.PathLike, chunks: Iterable[str | bytes], *, force: bool = False,
                 stdout: bool = True) -> int:
    """Write ``chunks`` (text as UTF-8, or bytes) to exactly ``path``, or to stdout for ``-``; return the bytes written.

    :func:`check_target` first (``force`` allows replacing an existing file; ``stdout=False``
    refuses ``-``). The content goes to a temp file in the same directory, renamed over
    ``path`` when complete; an existing file's permissions are kept. A failed write (a full
    disk, no permission) is one :class:`EnvironmentFault` line, and ``path`` is as it was.
    """
    target = check_target(path, force=force, stdout=stdout)
    if target is None:
        return write_data(sys.stdout, chunks)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    tmp = None
    try:
        fd, tmp = new_temp(target.parent, f".{target.name}.")
        os.fchmod(fd, mode)     # made 0600; it should look as any other file the user writes
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
