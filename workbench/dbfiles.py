"""Only SQLite opens the database: the registry of this process's databases, and the one guarded open.

On POSIX, closing any descriptor of a file drops every advisory lock the process holds on
that file, SQLite's included (SQLite's "How To Corrupt An SQLite Database File", 2.2): another
process may then checkpoint and delete the -wal under the open connection, and a later commit
is lost. So nothing but SQLite may open the database, its ``-wal``, ``-shm`` or ``-journal``,
through any name or link. Two layers make it so:

- :func:`guarded_open` is the one way the workbench opens a file of its own accord or on a
  user's word (an input, an output's temp file, a cache, the model slot): it refuses a file of
  a database this process opened (or is about to open: :func:`expect`) by name and by device
  and inode, opens without blocking (``O_NONBLOCK``: a FIFO is never waited on) and, for a file
  to be read, a regular file only. :func:`read_regular` and :func:`open_regular_fd` read
  through it. A path that became the database between the look and the open is caught on the
  opened descriptor, which is then kept open, never closed (closing it is the harm).
- :func:`guard_process` adds an audit hook (``sys.addaudithook``) when the store opens its
  first database: any Python-level open of a file of a database open in this process now, by
  any module (``open``, ``os.open``, ``io.open``, numpy, a library's own reads), raises
  :class:`DatabaseFileRefused` before a descriptor exists. SQLite's own opens are made in C
  and never pass through it.

The store registers each database as it opens and closes it (:func:`opened`, :func:`closed`).
:func:`database_file_of` also knows the BM25 index cache ``<db>.indexes``, which no input or
output may name (the cache's own code writes there, through :func:`guarded_open`).
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
import threading
from collections import Counter

from workbench.errors import BadInput
from workbench.filekinds import NotRegular, file_kind

__all__ = ["INDEX_CACHE_SUFFIX", "SIDECARS", "DatabaseFileRefused", "database_file_of", "held_file_of", "expect",
           "opened", "closed", "open_database_paths", "guard_process", "guarded_open", "open_regular_fd",
           "read_regular", "write_new", "new_temp"]

SIDECARS = ("-wal", "-shm", "-journal")
#: The BM25 index cache beside a database: ``<db>.indexes`` (:mod:`workbench.store.caches`).
INDEX_CACHE_SUFFIX = ".indexes"

_LOCK = threading.Lock()
# The real paths of every database this process opened or announced: no output may be written over one.
_OPENED: set[str] = set()
# How many of this process's stores are open on each real path.
_OPEN_NOW: Counter[str] = Counter()
# Databases announced (expect) and not opened since: guarded by inode too until their store opens them.
_EXPECTED: set[str] = set()
# What the audit hook watches: the databases open now (a tuple, read without the lock). Only an open
# connection has locks to lose; a database merely announced (expect) is guarded by name in guarded_open.
_LIVE: tuple[str, ...] = ()
# Descriptors of a database file that an open caught too late: kept open, since closing one is the harm.
_PARKED: list[int] = []
_GUARDED = False

# O_NONBLOCK: a FIFO put in place of a file is opened at once (and refused) instead of waiting for a
# writer; it changes nothing for a regular file. O_CLOEXEC: no child process inherits the descriptor.
_BASE_FLAGS = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


class DatabaseFileRefused(BadInput, PermissionError):
    """A file of a database this process has open was about to be opened by Python: refused, nothing opened.

    A :class:`~workbench.errors.BadInput` (one line, exit 2) where a user named the path; an
    ``OSError`` too, so that a cache read that meets it is treated as an unreadable cache and
    rebuilt beside it rather than read through.
    """


def _refresh_live() -> None:
    global _LIVE
    _LIVE = tuple(sorted(p for p, n in _OPEN_NOW.items() if n > 0))


def opened(path: str | os.PathLike) -> int:
    """Record that a store opened ``path``; how many of this process's stores now have it open."""
    real = os.path.realpath(path)
    with _LOCK:
        _OPENED.add(real)
        _EXPECTED.discard(real)
        _OPEN_NOW[real] += 1
        _refresh_live()
        return _OPEN_NOW[real]


def expect(path: str | os.PathLike) -> None:
    """Record that this process is about to open the database ``path`` (the CLI's ``--db``), so that
    an input or output naming it is refused before the store is even opened."""
    with _LOCK:
        _OPENED.add(os.path.realpath(path))
        _EXPECTED.add(os.path.realpath(path))


def unexpect(path: str | os.PathLike) -> None:
    """The verb that announced ``path`` (:func:`expect`) has ended: it is no longer about to be opened. Its name
    stays refused (:func:`open_database_paths`); its inode is no longer checked at every guarded open, which a
    long-lived process calling the CLI (a test worker, a script) would otherwise do for every ``--db`` it named."""
    with _LOCK:
        _EXPECTED.discard(os.path.realpath(path))


def announced() -> frozenset[str]:
    """The databases announced (:func:`expect`) and not opened yet."""
    return frozenset(_EXPECTED)


def closed(path: str | os.PathLike) -> int:
    """Record that a store closed ``path``; how many of this process's stores still have it open."""
    real = os.path.realpath(path)
    with _LOCK:
        _OPEN_NOW[real] -= 1
        _refresh_live()
        return _OPEN_NOW[real]


def open_database_paths() -> frozenset[str]:
    """The real paths of the databases this process has opened (output files may not go there)."""
    return frozenset(_OPENED)


def _describe(db: str, suffix: str) -> str:
    return f"the {suffix[1:]} file of the database {db}" if suffix else f"the database {db}"


def _file_of(path, names, inodes) -> str | None:
    """What ``path`` is among the files (the file, -wal, -shm, -journal) of the databases ``names`` by name, or of
    ``inodes`` by device and inode. Names are looked up, not scanned: a long-lived process (a test session)
    that opened thousands of databases pays one lookup per suffix."""
    try:
        # A bytes path (an os.scandir of bytes, a name that is not UTF-8) is compared as the str the OS means.
        path = os.fsdecode(path)
        real = os.path.realpath(path)
    except (OSError, ValueError, TypeError):
        return None
    for suffix in ("", *SIDECARS):
        if real.endswith(suffix):
            db = real[:len(real) - len(suffix)] if suffix else real
            if db in names:
                return _describe(db, suffix)
    if not inodes:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError, TypeError):
        return None
    return _same_file(st, inodes)


def _watched() -> tuple[str, ...]:
    """The databases whose files are also recognised by inode (a hard link): those open now and those announced
    but not opened yet. A database this process closed has no lock to lose; it is still recognised by name."""
    return _LIVE + tuple(sorted(_EXPECTED - set(_LIVE)))


def _same_file(st: os.stat_result, databases) -> str | None:
    """Which of ``databases``' files the file of ``st`` is (a hard link counts), or None."""
    if not stat.S_ISREG(st.st_mode):
        return None
    for db in databases:
        for suffix in ("", *SIDECARS):
            try:
                if os.path.samestat(st, os.stat(db + suffix)):
                    return _describe(db, suffix)
            except OSError:
                continue
    return None


def held_file_of(path: str | os.PathLike) -> str | None:
    """What ``path`` is, if it is the file, -wal, -shm or -journal of a database this process opened
    or announced, by name (a file not there yet counts) or by device and inode (a hard or symbolic
    link counts): "the database D", "the wal file of the database D"; else None. Nothing is opened."""
    return _file_of(path, _OPENED, _watched())


def database_file_of(path: str | os.PathLike, extra: str | os.PathLike | None = None) -> str | None:
    """What ``path`` is, if it is a file of a database this process opened (or of ``extra``), else None.

    As :func:`held_file_of`, and also anything in a database's BM25 index cache: "in D.indexes,
    the BM25 index cache of the database D". Nothing is opened.
    """
    databases = set(_OPENED)
    watched = _watched()
    if extra is not None:
        databases.add(os.path.realpath(extra))
        watched += (os.path.realpath(extra),)
    try:
        real = os.path.realpath(os.fsdecode(path))
    except (OSError, ValueError, TypeError):
        return None
    at = real.find(INDEX_CACHE_SUFFIX)
    while at > 0:           # D.indexes itself or anything below it, for a database D of this process
        end = at + len(INDEX_CACHE_SUFFIX)
        if (end == len(real) or real[end] == os.sep) and real[:at] in databases:
            return f"in {real[:end]}, the BM25 index cache of the database {real[:at]}"
        at = real.find(INDEX_CACHE_SUFFIX, at + 1)
    return _file_of(path, databases, watched)


def _refusal(path, what: str) -> DatabaseFileRefused:
    return DatabaseFileRefused(f"{os.fsdecode(path)}: is {what}; only SQLite opens a database's files "
                               "(closing any other descriptor of them drops SQLite's locks)")


# -- the run-time guard -----------------------------------------------------------------------------------

def _audit(event: str, args) -> None:
    # Called for every audit event of the process: the common case returns at once.
    if event != "open" or not _LIVE:
        return
    path = args[0]
    if path is None or isinstance(path, int):
        return                      # os.fdopen of an existing descriptor: nothing new is opened
    what = _file_of(path, _LIVE, _LIVE)
    if what is not None:
        raise _refusal(path, what)


def guard_process() -> None:
    """From now on, refuse any Python open of a file of a database open in this process (see the module).

    Installed once per process by the store when it opens a database; an audit hook cannot be removed.
    """
    global _GUARDED
    with _LOCK:
        if not _GUARDED:
            sys.addaudithook(_audit)
            _GUARDED = True


def guarded() -> bool:
    """Whether this process's opens are guarded (:func:`guard_process` ran)."""
    return _GUARDED


# -- the one guarded open -----------------------------------------------------------------------------------

def guarded_open(path: str | os.PathLike, flags: int = os.O_RDONLY, mode: int = 0o666, *, regular: bool = True,
                 follow: bool = True) -> tuple[int, os.stat_result]:
    """A descriptor of ``path`` opened with ``flags`` (``O_NONBLOCK`` and ``O_CLOEXEC`` added), and its ``fstat``.

    Refuses with :class:`DatabaseFileRefused` a file of a database this process opened (by
    name or inode, before anything is opened); with ``regular`` (the default) anything but a
    regular file, looked at first and again on the descriptor (:class:`NotRegular`: a FIFO, a
    device, a directory). ``follow=False`` refuses a symbolic link itself (``O_NOFOLLOW``).
    Other failures are the ``OSError`` of ``stat`` or ``open``. The caller closes the descriptor.
    """
    what = held_file_of(path)
    if what is not None:
        raise _refusal(path, what)
    if regular:
        try:
            st = os.stat(path) if follow else os.lstat(path)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                raise
        else:
            if not stat.S_ISREG(st.st_mode):
                raise NotRegular(path, file_kind(st.st_mode))
    fd = os.open(path, flags | _BASE_FLAGS | (0 if follow else getattr(os, "O_NOFOLLOW", 0)), mode)
    try:
        opened_st = os.fstat(fd)
        if regular and not stat.S_ISREG(opened_st.st_mode):
            raise NotRegular(path, file_kind(opened_st.st_mode))
        what = _same_file(opened_st, _watched())
    except BaseException:
        os.close(fd)
        raise
    if what is not None:
        # It became the database between the look and the open: closing this descriptor would drop
        # SQLite's locks, so it stays open for the life of the process.
        _PARKED.append(fd)
        raise _refusal(path, what)
    return fd, opened_st


def open_regular_fd(path: str | os.PathLike, *, follow: bool = True) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path``, and its ``fstat``; the caller closes it.

    Raises :class:`NotRegular` for anything else (nothing is read), :class:`DatabaseFileRefused`
    for a database's file, ``FileNotFoundError`` or another ``OSError`` when it cannot be looked at.
    ``follow=False`` refuses a symbolic link itself (a cache the workbench wrote holds none).
    """
    return guarded_open(path, os.O_RDONLY, follow=follow)


def read_regular(path: str | os.PathLike, limit: int | None = None, *, follow: bool = True,
                 size: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (its first ``limit`` at most), read without blocking.

    A file larger than ``limit`` is not an error: only its first ``limit`` bytes are read. With
    ``size``, the opened file must be exactly that long, or ``ValueError`` says so and nothing is
    read (a cache whose metadata records its files' sizes). Raises as :func:`open_regular_fd` does.
    """
    fd, st = open_regular_fd(path, follow=follow)
    try:
        if size is not None and st.st_size != size:
            raise ValueError(f"{os.fsdecode(path)}: {st.st_size:,} bytes, its metadata says {size:,}")
        want = st.st_size if limit is None else min(limit, st.st_size)
        if st.st_size == 0 and limit is not None:
            want = limit     # a file of /proc says size 0 and has text all the same: read to its end, bounded
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


def write_new(path: str | os.PathLike, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path``, a file that must not exist yet (``O_EXCL``: nothing is written through a
    link or over another file); a failed write removes the partial file."""
    fd, _ = guarded_open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode, follow=False)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def new_temp(directory: str | os.PathLike, prefix: str, mode: int = 0o600) -> tuple[int, str]:
    """A new, empty temporary file in ``directory`` (``O_EXCL`` under a random name, as ``tempfile.mkstemp``
    makes one, but through :func:`guarded_open`): its descriptor and path. The caller closes and renames it."""
    for _ in range(100):
        path = os.path.join(os.fspath(directory), f"{prefix}{secrets.token_hex(6)}")
        try:
            fd, _ = guarded_open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode, follow=False)
        except FileExistsError:
            continue
        return fd, path
    raise FileExistsError(f"{directory}: no free temporary name for {prefix}*")
