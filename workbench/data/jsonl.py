"""Reading JSON Lines in bounded memory, with exact line numbers.

A line longer than ``MAX_LINE_BYTES`` is rejected without being held in memory: lines are
read in slices of ``_SLICE`` bytes; a line longer than one slice is first measured by reading
ahead (discarding the slices), then, if it is within the limit, re-read whole from its
start. So an over-long line costs about one slice of memory, whatever its length. The
limit is documented in the README.

Each line is decoded strictly: an object may not repeat a key (``json`` would keep the last
one silently), a string may not hold a lone surrogate (``\\ud800`` parses, then cannot be
stored as UTF-8), and nesting deeper than ``MAX_DEPTH`` levels is refused (deep enough
nesting exhausts Python's stack in the parser, and in anything that walks the value later).
Numbers must be storable as they are: an integer within SQLite's 64-bit range, a float that
is finite (``1e309`` would be infinity); ``NaN`` and ``Infinity``, which Python's parser
accepts, are not JSON and are refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from workbench.data.errors import ProblemLog
from workbench.data.fields import json_type
from workbench.data.infile import open_input

MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 100
_SLICE = 1024 * 1024
# A surrogate can only come from a \uD800-\uDFFF escape (the UTF-8 decoder refuses their
# bytes), so a line without one needs no look at its strings.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# Strings (whose brackets do not count) and the structural characters of JSON.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKEN = re.compile(_STRING + r'|[\[\]{},:]')
_STRING_OR_NOT_BRACKET = re.compile(_STRING + r'|[^\[\]{}]+')
_INNERMOST = re.compile(r"\[\]|\{\}")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 63 - 1


def read_jsonl(path: Path, log: ProblemLog, *, display: str | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each non-blank line of ``path``.

    Malformed JSON, invalid UTF-8, over-long lines and an empty file are added to
    ``log`` (the caller decides when to stop); such lines are not yielded.
    """
    name = display or path.name
    seen_record = False
    first_slice = min(_SLICE, MAX_LINE_BYTES)
    with open_input(path) as fh:
        lineno = 0
        while True:
            raw = fh.readline(first_slice)
            if not raw:
                break
            lineno += 1
            if len(raw) == first_slice and not raw.endswith(b"\n"):
                raw, total = _read_long_line(fh, raw)
                if raw is None:
                    seen_record = True
                    log.add(name, lineno, "$", f"line is {total:,} bytes, over the {MAX_LINE_BYTES:,}-byte limit")
                    continue
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                seen_record = True
                log.add(name, lineno, "$", f"not valid UTF-8 (byte {exc.start} of the line: {raw[exc.start:exc.start + 1]!r})")
                continue
            if not text.strip():
                continue
            seen_record = True
            try:
                obj = decode_record(text)
            except json.JSONDecodeError as exc:
                # exc.colno would count the line's own newline as a line break ("column 1")
                column = min(exc.pos, len(text.rstrip("\r\n"))) + 1
                log.add(name, lineno, "$", f"malformed JSON: {exc.msg} (column {column})")
                continue
            except RecordRefused as exc:
                log.add(name, lineno, exc.field, exc.reason)
                continue
            if not isinstance(obj, dict):
                log.add(name, lineno, "$", f"expected a JSON object, got {json_type(obj)}")
                continue
            yield lineno, obj
    if not seen_record:
        log.add(name, 1, "$", "file is empty (no JSON records)")


class RecordRefused(ValueError):
    """A record that parses as JSON but is refused; ``field`` is its JSONPath-like place."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


def decode_record(text: str) -> Any:
    """Parse one JSON text strictly.

    Raises ``json.JSONDecodeError`` for malformed JSON and :class:`RecordRefused` for a
    duplicate key, a lone surrogate or nesting deeper than ``MAX_DEPTH``.
    """
    # id -> (the first repeated key, the object): holding the object keeps its id its own
    # even when a repeated key of its parent dropped it from the result.
    duplicates: dict[int, tuple[str, dict]] = {}

    def keep_pairs(pairs: list[tuple[str, Any]]) -> dict:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    duplicates[id(obj)] = (key, obj)
                    break
                seen.add(key)
        return obj

    unstorable: list[_Unstorable] = []

    def checked(parse):
        def hook(token: str):
            value = parse(token)
            if isinstance(value, _Unstorable):
                unstorable.append(value)
            return value
        return hook

    try:
        obj = json.loads(text, object_pairs_hook=keep_pairs, parse_int=checked(_parse_int),
                         parse_float=checked(_parse_float), parse_constant=checked(_parse_constant))
    except RecursionError:
        raise RecordRefused(_deep_field(text), f"nested deeper than {MAX_DEPTH} levels") from None
    # The walk (in Python) only runs to name the place of a problem found at C speed.
    strings = _SURROGATE_ESCAPE.search(text) is not None
    if duplicates or strings or unstorable or _too_deep(text, obj):
        _check_tree(obj, duplicates, strings=strings, numbers=bool(unstorable))
    return obj


class _Unstorable:
    """What the checking hooks put in place of a number that cannot be stored; the walk finds it."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


def _parse_int(text: str) -> int | _Unstorable:
    digits = len(text) - text.startswith("-")
    # Past 19 digits it cannot fit, and int() of 4,300+ digits raises: count before converting.
    value = int(text) if digits <= 19 else None
    if value is None or not INT_MIN <= value <= INT_MAX:
        shown = text if digits <= 24 else f"{text[:12]}… ({digits:,} digits)"
        return _Unstorable(f"integer {shown} is out of range (a 64-bit integer: -2^63 to 2^63-1)")
    return value


def _parse_float(text: str) -> float | _Unstorable:
    value = float(text)
    if value - value != 0.0:    # inf or nan (a literal too large for a double parses as inf)
        shown = text if len(text) <= 24 else f"{text[:12]}… ({len(text):,} characters)"
        return _Unstorable(f"number {shown} is out of range (a finite 64-bit float)")
    return value


def _parse_constant(name: str) -> _Unstorable:
    return _Unstorable(f"{name} is not a JSON number (a finite number or null)")


def _too_deep(text: str, obj: Any) -> bool:
    """Whether ``obj`` (parsed from ``text``) nests deeper than ``MAX_DEPTH``.

    A line is checked on its text at C speed (:func:`_deeper_than`); a whole document (a
    RAGChecker file of 100 MB) by walking its containers, which costs less than rewriting
    its text.
    """
    if len(text) < _WALK_ABOVE:
        return _deeper_than(text, MAX_DEPTH)
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


_WALK_ABOVE = 1 << 20


def _deeper_than(text: str, limit: int) -> bool:
    """Whether valid JSON ``text`` nests deeper than ``limit``, by regular expressions only.

    Counting brackets bounds the depth; past the bound, the brackets outside strings are
    kept and each pass deletes the innermost (empty) pairs: a value ``limit`` deep is gone
    after ``limit`` passes.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _STRING_OR_NOT_BRACKET.sub("", text)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = _INNERMOST.sub("", brackets)
    return bool(brackets)


def _check_tree(root: Any, duplicates: dict[int, tuple[str, dict]], *, strings: bool, numbers: bool = False) -> None:
    """Walk a parsed value without recursion; raise at the first refused place.

    Strings are looked at only when ``strings`` (the text held a surrogate escape), numbers
    only when ``numbers`` (the text was parsed with the checking hooks).
    """
    if strings and isinstance(root, str):
        _check_text(root, "$")
    if isinstance(root, _Unstorable):
        raise RecordRefused("$", root.reason)
    stack: list[tuple[Any, str, int, str]] = [(root, "$", 1, "$")] if isinstance(root, (dict, list)) else []
    while stack:
        value, path, depth, top = stack.pop()
        if depth > MAX_DEPTH:
            raise RecordRefused(top, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            if id(value) in duplicates:
                key = duplicates[id(value)][0]
                raise RecordRefused(_child(path, key), f"duplicate key {key!r}")
            items = value.items()
        else:
            items = enumerate(value)
        children = []
        for key, item in items:
            nested = isinstance(item, (dict, list))
            if not (nested or strings or numbers):
                continue
            child = f"{path}[{key}]" if isinstance(key, int) else _child(path, key)
            if numbers and isinstance(item, _Unstorable):
                raise RecordRefused(child, item.reason)
            if strings:
                if isinstance(key, str):
                    _check_text(key, child)
                if isinstance(item, str):
                    _check_text(item, child)
            if nested:
                children.append((item, child, depth + 1, top if depth > 1 else child))
        stack.extend(reversed(children))


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecordRefused(path, f"lone surrogate \\u{ord(text[exc.start]):04x} in a string "
                                  "(not a Unicode character)") from None


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if _PLAIN_KEY.fullmatch(key) else f"{path}[{json.dumps(key)}]"


def _deep_field(text: str) -> str:
    """The top-level field under which ``text`` nests deeper than ``MAX_DEPTH`` (``$`` if none).

    Used when the parser itself ran out of stack, so there is no value to walk: the text is
    scanned for its strings and structural characters instead.
    """
    depth, top_key, last_string = 0, None, None
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return _child("$", top_key) if top_key is not None else "$"
        elif token in "]}":
            depth -= 1
        elif token == ":":
            if depth == 1 and last_string is not None:
                top_key = json.loads(last_string)
        elif token != ",":
            last_string = token
    return "$"


def _read_long_line(fh, head: bytes) -> tuple[bytes | None, int]:
    """Finish a line whose first ``_SLICE`` bytes are ``head``.

    Returns ``(line, size)``, or ``(None, size)`` when its content (without the newline)
    is over ``MAX_LINE_BYTES``; ``size`` counts the newline, and the file is left at the
    start of the next line either way.
    """
    if not fh.seekable():  # a pipe: keep the slices, but never more than the limit
        pieces, size = [head], len(head)
        while True:
            chunk = fh.readline(_SLICE)
            newline = chunk.endswith(b"\n")
            size += len(chunk)
            if size - newline > MAX_LINE_BYTES:
                return None, size + (0 if newline or not chunk else _skip_rest_of_line(fh)[0])
            pieces.append(chunk)
            if not chunk or newline:
                return b"".join(pieces), size
    start = fh.tell() - len(head)
    rest, newline = _skip_rest_of_line(fh)
    size = len(head) + rest
    if size - newline > MAX_LINE_BYTES:
        return None, size
    end = fh.tell()
    fh.seek(start)
    line = fh.read(size)
    fh.seek(end)
    return line, size


def _skip_rest_of_line(fh) -> tuple[int, bool]:
    """Read past the end of the current line; return (bytes skipped, ended by a newline)."""
    skipped = 0
    while True:
        chunk = fh.readline(_SLICE)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped, bool(chunk)
