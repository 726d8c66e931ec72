"""What a path the user gave means: the one place a path value becomes a :class:`~pathlib.Path`.

A path comes from the command line, a TUI field or an environment variable. A shell expands
``~`` only at the start of an unquoted word, so ``--db=~/w.db``, a quoted ``'~/data'`` or a
path typed into the TUI reaches the workbench with its tilde: it is expanded here, the same
way for every path, as the shell would have (``~`` is ``$HOME``, ``~user`` that user's home).

What cannot be a path is refused in one line (:class:`~workbench.errors.BadInput`, exit 2,
unless the caller names another error), before anything is opened or written:

- a ``~user`` prefix naming no user of this system, or ``~`` when ``HOME`` is unset and the
  user has no home directory (pathlib would raise a bare ``RuntimeError``);
- a NUL byte, which no file name can hold (``os.stat`` would raise a ``ValueError`` naming no path);
- an empty path (:func:`user_path`), which :class:`~pathlib.Path` would take for the current directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import BadInput

__all__ = ["expand_home", "user_path"]


def expand_home(text: str | os.PathLike[str], what: str | None = None, *,
                error: type[Exception] = BadInput) -> str:
    """``text`` with a leading ``~`` or ``~user`` replaced by that home directory; any other text as it is.

    The string is otherwise untouched (``./-`` stays ``./-``, a trailing ``/`` stays), for a
    caller that gives a spelling meaning of its own. ``what`` (``--db``) starts the message;
    ``error`` is the exception raised (:class:`BadInput` unless the caller's layer has its own).
    """
    raw = os.fspath(text)
    if "\0" in raw:
        raise error(f"{_about(what)}{_shown(raw)}: a path cannot hold a NUL byte")
    if not raw.startswith("~"):
        return raw
    expanded = os.path.expanduser(raw)
    # os.path.expanduser returns the text unchanged when it finds no home; pathlib's test is the same.
    if expanded.startswith("~"):
        prefix = raw.split("/", 1)[0]
        why = (f"no user named {prefix[1:]!r} on this system" if len(prefix) > 1
               else "HOME is not set and this user has no home directory")
        raise error(f"{_about(what)}{_shown(raw)}: cannot expand {_shown(prefix)}: {why}")
    return expanded


def user_path(text: str | os.PathLike[str], what: str | None = None, *, error: type[Exception] = BadInput) -> Path:
    """The :class:`Path` a user's path value names, ``~`` expanded (:func:`expand_home`); an empty one is refused."""
    raw = expand_home(text, what, error=error)
    if raw == "":
        raise error(f"{_about(what)}the path is empty; name a file or a directory")
    return Path(raw)


def _about(what: str | None) -> str:
    return f"{what}: " if what else ""


def _shown(text: str) -> str:
    """The path as typed, cut short, a NUL byte written ``\\0``: it is echoed (and a terminal's stream escapes the rest)."""
    text = text.replace("\0", "\\0")
    return text if len(text) <= 200 else text[:200] + "…"
