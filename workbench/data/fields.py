"""Field checks shared by the importers.

Each returns ``None`` when the value is good, else ``(suffix, reason)`` where ``suffix``
extends the field path (``"[2]"``, or ``""`` for the field itself). ``check_name`` is the
exception: it guards the names a user gives (datasets, runs, KGs) and raises.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from workbench.errors import BadInput

Finding = tuple[str, str] | None

_JSON_TYPE = {dict: "object", list: "array", str: "string", int: "number", float: "number",
              bool: "boolean", type(None): "null"}


def json_type(value: Any) -> str:
    """The JSON name of a Python value's type, for messages."""
    return _JSON_TYPE.get(type(value), type(value).__name__)


def check_str(value: Any) -> Finding:
    """A non-blank string."""
    if not isinstance(value, str):
        return "", f"expected a string, got {json_type(value)}"
    if not value.strip():
        return "", "must not be empty"
    return None


def check_triple(value: Any) -> Finding:
    """``[head, relation, tail]``: three non-blank strings."""
    if not isinstance(value, list):
        return "", f"expected [head, relation, tail], got {json_type(value)}"
    if len(value) != 3:
        return "", f"expected 3 elements [head, relation, tail], got {len(value)}"
    return _first_bad_str(value)


def check_score(value: Any) -> Finding:
    """A finite JSON number (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "", f"expected a number, got {json_type(value)}"
    if not math.isfinite(value):
        return "", "must be finite"
    return None


def check_str_list(value: Any, *, allow_empty: bool = False) -> Finding:
    """A list of non-blank strings (non-empty unless ``allow_empty``)."""
    if not isinstance(value, list):
        return "", f"expected an array of strings, got {json_type(value)}"
    if not value and not allow_empty:
        return "", "must not be empty"
    return _first_bad_str(value)


def _first_bad_str(items: list) -> Finding:
    """The first element that is not a non-blank string, as ``[i]`` and what is wrong with it."""
    for i, item in enumerate(items):
        found = check_str(item)
        if found:
            return f"[{i}]", found[1]
    return None


def check_object(value: Any) -> Finding:
    """A JSON object."""
    if not isinstance(value, dict):
        return "", f"expected an object, got {json_type(value)}"
    return None


def check_list(value: Any) -> Finding:
    """A JSON array (its items are checked by the caller)."""
    if not isinstance(value, list):
        return "", f"expected an array, got {json_type(value)}"
    return None


def check_required(log, file: str, line: int, rec: dict, specs) -> bool:
    """Check each ``(field, check)`` of ``specs`` is present in ``rec`` and passes; log problems.

    Returns True when every field is good. ``log`` is a :class:`~workbench.data.errors.ProblemLog`.
    """
    ok = True
    for fld, check in specs:
        if fld not in rec:
            log.add(file, line, f"$.{fld}", "missing")
            ok = False
        elif found := check(rec[fld]):
            log.add(file, line, f"$.{fld}{found[0]}", found[1])
            ok = False
    return ok


def check_source_path(path, what: str = "the path") -> None:
    """Refuse (:class:`BadInput`) a path that is not UTF-8: it is stored with what is imported from it."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{str(path)!r}: {what} is not UTF-8 (the path is stored with the import); rename it") from None


def check_label_name(value: Any) -> Finding:
    """A name read from a file (a retriever, an annotator): a string under :func:`check_name`'s rules."""
    if found := check_str(value):
        return found
    try:
        check_name(value)
    except BadInput as exc:
        return "", str(exc)
    return None


def check_name(value: str, what: str = "name") -> str:
    """Return ``value`` if it can name a dataset, run or KG, else raise :class:`BadInput`.

    A name is echoed to terminals and shown in tables, so it must be printable text: no
    escape sequences or control characters (which a terminal would obey), and not blank.
    The message shows the value escaped.
    """
    if not value.strip():
        raise BadInput(f"{what} must not be blank, got {value!r}")
    bad = next((i for i, ch in enumerate(value) if not ch.isprintable()), None)
    if bad is not None:
        char = value[bad]
        label = unicodedata.name(char, "a control character")
        raise BadInput(f"{what} must be printable, got {value!r} "
                       f"(U+{ord(char):04X} {label} at character {bad + 1})")
    return value
