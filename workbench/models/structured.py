"""Structured output of a model: a list of strings asked for under a JSON schema, and what a cut-off one held.

Answers, claims and generated questions are all one JSON object holding a list of strings;
the grammar llama.cpp builds from the schema keeps the output to that shape, and
:func:`strings_after` recovers the complete strings of a list that ``max_tokens`` cut off.
"""

from __future__ import annotations

import json
import re


def string_list_schema(key: str) -> dict:
    """The JSON schema of an object holding one list of strings under ``key`` (e.g. claims, questions)."""
    return {"type": "object", "properties": {key: {"type": "array", "items": {"type": "string"}}}, "required": [key]}


def strings_after(text: str, key: str) -> list[str]:
    """The complete JSON strings of the list under ``"key"`` in ``text``, even when the JSON is cut off."""
    m = re.search(r'"%s"\s*:\s*\[' % key, text)
    if not m:
        return []
    rest = text[m.end():]
    end = rest.find("]")
    body = rest if end < 0 else rest[:end]
    out = []
    for s in re.findall(r'"((?:[^"\\]|\\.)*)"', body):
        try:
            out.append(json.loads(f'"{s}"'))
        except json.JSONDecodeError:
            continue
    return out
