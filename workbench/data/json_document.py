"""One JSON document read whole (RAGChecker's files): decoded strictly, and each entry of its array
found by line, so that a problem can be named ``file:line: field: reason`` (the line where the
offending entry starts).

The array is either the document itself (``[...]``: RAGChecker's meta-evaluation files, fields
``$[i]...``) or one key of a top-level object (``{"results": [...]}``: RAGChecker's input and
output files, fields ``$.results[i]...``); ``key`` says which (None: the document itself).
"""

from __future__ import annotations

import json
import re
from typing import Any

from workbench.data.errors import InputRejected, Problem
from workbench.data.jsonl import RecordRefused, decode_record

_WS = re.compile(r"[ \t\n\r]*")
# A JSON string (kept as it is), or a non-standard constant outside strings.
_STRING_OR_CONSTANT = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|-?Infinity|NaN')


def parse_document(data: bytes, display: str, key: str | None = None, *,
                   constants_as_null: bool = False) -> tuple[str, Any]:
    """The text of ``data`` and the document it holds, decoded as the JSONL importers decode a line
    (no repeated key, no lone surrogate, no nesting past the depth limit).

    With ``constants_as_null``, the non-standard ``NaN``, ``Infinity`` and ``-Infinity`` that
    Python's ``json.dump`` writes for an undefined score are read as null (and the text returned
    holds null there; its lines are unchanged). Raises :class:`InputRejected` with the line of
    the entry a refused field lies in.
    """
    text = decode_text(data, display)
    if constants_as_null and ("NaN" in text or "Infinity" in text):
        text = _STRING_OR_CONSTANT.sub(lambda m: m.group() if m.group().startswith('"') else "null", text)
    try:
        return text, decode_record(text)
    except json.JSONDecodeError as exc:
        raise InputRejected([Problem(display, exc.lineno, "$", f"malformed JSON: {exc.msg} (column {exc.colno})")])
    except RecordRefused as exc:
        raise InputRejected([Problem(display, line_of(text, exc.field, key), exc.field, exc.reason)]) from None


def decode_text(data: bytes, display: str) -> str:
    """``data`` as UTF-8 text (a byte-order mark dropped); not UTF-8, or blank, is refused."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputRejected([Problem(display, line, "$", f"not valid UTF-8 (byte {exc.start} of the file: "
                                                          f"{data[exc.start:exc.start + 1]!r})")]) from None
    if not text.strip():
        raise InputRejected([Problem(display, 1, "$", "file is empty (no JSON document)")])
    return text


def entry_lines(text: str, key: str | None = None) -> list[int]:
    """The 1-based line where each element of the array (the document, or its ``key``) starts.

    ``text`` is known to be valid JSON by now; this walks it with ``raw_decode`` to find where
    each entry starts (``json`` itself keeps no positions).
    """
    # Only skips values: numbers are not converted (a 5,000-digit integer would raise).
    decoder = json.JSONDecoder(parse_int=len, parse_float=len, parse_constant=len)
    lines: list[int] = []
    pos, line = 0, 1

    def at(i: int) -> int:
        nonlocal pos, line
        line += text.count("\n", pos, i)
        pos = i
        return line

    def skip(i: int) -> int:
        return _WS.match(text, i).end()

    def array(i: int) -> list[int]:
        i = skip(i + 1)                               # past "["
        while text[i] != "]":
            lines.append(at(i))
            _, i = decoder.raw_decode(text, i)
            i = skip(i)
            if text[i] == ",":
                i = skip(i + 1)
        return lines

    i = skip(0)
    if key is None:
        return array(i) if text[i] == "[" else lines
    i += 1                                            # past "{"
    while True:
        i = skip(i)
        if text[i] == "}":
            return lines
        name, i = decoder.raw_decode(text, i)
        i = skip(skip(i) + 1)                         # past ":"
        if name == key:
            return array(i) if text[i] == "[" else lines
        _, i = decoder.raw_decode(text, i)
        i = skip(i)
        if text[i] == ",":
            i += 1


class EntryLines:
    """``lines[i]``: the line where entry ``i`` starts, found (by :func:`entry_lines`) on first use.

    Only a message needs a line, and finding them walks the whole document a second time.
    """

    def __init__(self, text: str, key: str | None = None):
        self.text, self.key, self._lines = text, key, None

    def __getitem__(self, i: int) -> int:
        if self._lines is None:
            self._lines = entry_lines(self.text, self.key)
        return self._lines[i]


def line_of(text: str, fld: str, key: str | None = None) -> int:
    """The line of the entry a refused field lies in (1 when it lies elsewhere)."""
    prefix = "$" if key is None else f"$.{key}"
    m = re.match(re.escape(prefix) + r"\[(\d+)\]", fld)
    if not m:
        return 1
    try:
        lines = entry_lines(text, key)
    except (ValueError, RecursionError):   # too deep for the walk: the top of the file will do
        return 1
    i = int(m.group(1))
    return lines[i] if i < len(lines) else 1
