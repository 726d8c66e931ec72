"""Reading RAGChecker's JSON document: parsed strictly, each ``results[i]`` checked, every problem
named as ``file:line: field: reason`` (the line where that entry starts).

RAGChecker (amazon-science/RAGChecker, ``ragchecker/container.py``) reads one JSON document::

    {"results": [{"query_id": str, "query": str, "gt_answer": str, "response": str,
                  "retrieved_context": [{"doc_id": str (optional), "text": str}, ...]}, ...]}

:mod:`workbench.data.ragchecker` imports what is read here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from workbench.data.errors import InputRejected, Problem, ProblemLog
from workbench.data.fields import check_str, json_type
from workbench.data.importer import count_noun
from workbench.data.jsonl import RecordRefused, decode_record

_RESULT_PATH = re.compile(r"^\$\.results\[(\d+)\]")
_WS = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class Result:
    """One checked ``results[i]`` entry of a RAGChecker file."""

    index: int
    lines: "_EntryLines"          # where results[index] starts, looked up only for a message
    query_id: str | None          # None only until read_results names it by position
    query: str
    gt_answer: str
    response: str
    contexts: list[tuple[str | None, str]]   # (doc_id or None, text), in the file's order

    @property
    def line(self) -> int:
        return self.lines[self.index]


def read_results(data: bytes, display: str) -> tuple[list[Result], list[str]]:
    """Parse and check a RAGChecker document; return its results and the warnings.

    Raises :class:`InputRejected` naming ``file:line: field: reason`` for every problem found
    (up to the importers' limit). The JSON is decoded strictly as the JSONL importers decode a
    line: no repeated key, no lone surrogate, no nesting past the depth limit.
    """
    text = _decode(data, display)
    try:
        doc = decode_record(text)
    except json.JSONDecodeError as exc:
        raise InputRejected([Problem(display, exc.lineno, "$", f"malformed JSON: {exc.msg} (column {exc.colno})")])
    except RecordRefused as exc:
        raise InputRejected([Problem(display, _line_of(text, exc.field), exc.field, exc.reason)]) from None
    if not isinstance(doc, dict):
        raise InputRejected([Problem(display, 1, "$", f'expected an object {{"results": [...]}}, got {json_type(doc)}')])
    if "results" not in doc:
        raise InputRejected([Problem(display, 1, "$.results", 'missing (RAGChecker\'s input is {"results": [...]})')])
    entries = doc["results"]
    if not isinstance(entries, list):
        raise InputRejected([Problem(display, 1, "$.results", f"expected an array, got {json_type(entries)}")])
    if not entries:
        raise InputRejected([Problem(display, 1, "$.results", "must not be empty")])
    lines = _EntryLines(text)
    log = ProblemLog()
    results: list[Result] = []
    first: dict[str, int] = {}
    unnamed = 0
    for i, rec in enumerate(entries):
        result = _check_entry(log, display, i, lines, rec)
        if result is None:
            continue
        unnamed += result.query_id is None
        qid = str(i) if result.query_id is None else result.query_id
        if qid in first:
            j = first[qid]
            log.add(display, lines[i], f"$.results[{i}].query_id",
                    f"duplicate query id {qid!r} (first at results[{j}], line {lines[j]})")
            continue
        first[qid] = i
        results.append(replace(result, query_id=qid))
    log.raise_if_any()
    warnings = []
    if unnamed:
        warnings.append(f"{count_noun(unnamed, 'result')} of {display} had no query_id: "
                        "named by position in results (0-based)")
    return results, warnings


def _decode(data: bytes, display: str) -> str:
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


def _entry_lines(text: str) -> list[int]:
    """The 1-based line where each element of the top-level ``results`` array starts.

    ``text`` is known to be valid JSON by now; this walks its top-level object with
    ``raw_decode`` to find where each entry starts (``json`` itself keeps no positions).
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

    i = skip(0) + 1                                   # past "{"
    while True:
        i = skip(i)
        if text[i] == "}":
            return lines
        key, i = decoder.raw_decode(text, i)
        i = skip(skip(i) + 1)                         # past ":"
        if key == "results":
            i = skip(i + 1)                           # past "["
            while text[i] != "]":
                lines.append(at(i))
                _, i = decoder.raw_decode(text, i)
                i = skip(i)
                if text[i] == ",":
                    i = skip(i + 1)
            return lines
        _, i = decoder.raw_decode(text, i)
        i = skip(i)
        if text[i] == ",":
            i += 1


class _EntryLines:
    """``lines[i]``: the line where ``results[i]`` starts, found (by :func:`_entry_lines`) on first use.

    Only a message needs a line, and finding them walks the whole document a second time.
    """

    def __init__(self, text: str):
        self.text, self._lines = text, None

    def __getitem__(self, i: int) -> int:
        if self._lines is None:
            self._lines = _entry_lines(self.text)
        return self._lines[i]


def _line_of(text: str, fld: str) -> int:
    """The line of the ``results[i]`` entry a refused field lies in (1 when it lies elsewhere)."""
    m = _RESULT_PATH.match(fld)
    if not m:
        return 1
    try:
        lines = _entry_lines(text)
    except (ValueError, RecursionError):   # too deep for the walk: the top of the file will do
        return 1
    i = int(m.group(1))
    return lines[i] if i < len(lines) else 1


def _check_entry(log: ProblemLog, display: str, i: int, lines: _EntryLines, rec: Any) -> Result | None:
    """One ``results[i]``, checked field by field; None (with the problems logged) when bad."""
    base = f"$.results[{i}]"
    if not isinstance(rec, dict):
        log.add(display, lines[i], base, f"expected an object, got {json_type(rec)}")
        return None
    ok = True

    def bad(fld: str, reason: str) -> None:
        nonlocal ok
        log.add(display, lines[i], f"{base}.{fld}", reason)
        ok = False

    qid = rec.get("query_id")
    if qid is not None:
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        elif found := check_str(qid):
            bad("query_id", found[1].replace("a string", "a string (or null)"))
    for fld in ("query", "gt_answer"):
        if fld not in rec:
            bad(fld, "missing")
        elif found := check_str(rec[fld]):
            bad(fld, found[1])
    if "response" not in rec:
        bad("response", "missing")
    elif not isinstance(rec["response"], str):
        # An empty response is a legitimate (wrong) answer, as in `predictions import`.
        bad("response", f"expected a string, got {json_type(rec['response'])}")
    contexts: list[tuple[str | None, str]] = []
    ctx = rec.get("retrieved_context")
    if ctx is not None and not isinstance(ctx, list):
        bad("retrieved_context", f"expected an array of {{\"doc_id\", \"text\"}} (or null), got {json_type(ctx)}")
        ctx = None
    for j, item in enumerate(ctx or ()):
        where = f"retrieved_context[{j}]"
        if not isinstance(item, dict):
            bad(where, f'expected an object {{"doc_id", "text"}}, got {json_type(item)}')
            continue
        doc_id = item.get("doc_id")
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        elif doc_id is not None and (found := check_str(doc_id)):
            bad(f"{where}.doc_id", found[1].replace("a string", "a string (or null)"))
            continue
        if "text" not in item:
            bad(f"{where}.text", "missing")
            continue
        if found := check_str(item["text"]):
            bad(f"{where}.text", found[1])
            continue
        contexts.append((doc_id, item["text"]))
    if not ok:
        return None
    return Result(i, lines, qid, rec["query"], rec["gt_answer"], rec["response"], contexts)
