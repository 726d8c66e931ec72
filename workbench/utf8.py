"""Bytes a tokenizer decodes: a cut through a multi-byte character must not become text."""

from __future__ import annotations


def complete_utf8_prefix(data: bytes) -> bytes:
    """Drop a trailing UTF-8 sequence that a byte-level BPE cut in half."""
    end = len(data)
    # A sequence is at most 4 bytes, so its lead byte is within the last 4.
    for back in range(1, min(4, end) + 1):
        b = data[end - back]
        if b & 0xC0 == 0x80:  # continuation byte: keep looking for the lead
            continue
        need = 1 if b < 0x80 else 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4
        return data if back >= need else data[: end - back]
    return data
