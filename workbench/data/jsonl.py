"""Reading JSON Lines in bounded memory, with exact line numbers.

A line longer than ``MAX_LINE_BYTES`` is rejected without being held in memory: lines are
read in slices of ``_SLICE`` bytes; a line longer than one slice is first measured by reading
ahead (discarding the slices), then, if it is within the limit, re-read whole from its
start. So an over-long line costs about one slice of memory, whatever its length. The
limit is documented in the README.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from workbench.data.errors import ProblemLog
from workbench.data.fields import json_type

MAX_LINE_BYTES = 8 * 1024 * 1024
_SLICE = 1024 * 1024


def read_jsonl(path: Path, log: ProblemLog, *, display: str | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each non-blank line of ``path``.

    Malformed JSON, invalid UTF-8, over-long lines and an empty file are added to
    ``log`` (the caller decides when to stop); such lines are not yielded.
    """
    name = display or path.name
    seen_record = False
    first_slice = min(_SLICE, MAX_LINE_BYTES)
    with open(path, "rb") as fh:
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
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                # exc.colno would count the line's own newline as a line break ("column 1")
                column = min(exc.pos, len(text.rstrip("\r\n"))) + 1
                log.add(name, lineno, "$", f"malformed JSON: {exc.msg} (column {column})")
                continue
            if not isinstance(obj, dict):
                log.add(name, lineno, "$", f"expected a JSON object, got {json_type(obj)}")
                continue
            yield lineno, obj
    if not seen_record:
        log.add(name, 1, "$", "file is empty (no JSON records)")


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
