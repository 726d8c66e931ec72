"""Reading JSON Lines in bounded memory, with exact line numbers.

A line longer than ``MAX_LINE_BYTES`` is rejected without being held in memory: we read
it in slices and discard them. The limit is documented in the README.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from workbench.data.errors import ProblemLog

MAX_LINE_BYTES = 8 * 1024 * 1024
_SLICE = 1024 * 1024


def read_jsonl(path: Path, log: ProblemLog, *, display: str | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each non-blank line of ``path``.

    Malformed JSON, invalid UTF-8, over-long lines and an empty file are added to
    ``log`` (the caller decides when to stop); such lines are not yielded.
    """
    name = display or path.name
    seen_record = False
    with open(path, "rb") as fh:
        lineno = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            lineno += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                total = len(raw) + _skip_rest_of_line(fh)
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
                log.add(name, lineno, "$", f"malformed JSON: {exc.msg} (column {exc.colno})")
                continue
            if not isinstance(obj, dict):
                log.add(name, lineno, "$", f"expected a JSON object, got {type(obj).__name__}")
                continue
            yield lineno, obj
    if not seen_record:
        log.add(name, 1, "$", "file is empty (no JSON records)")


def _skip_rest_of_line(fh) -> int:
    skipped = 0
    while True:
        chunk = fh.readline(_SLICE)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped
