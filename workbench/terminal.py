"""Text shown on a terminal never carries the terminal's own commands.

A name, a question or a model's answer read from a file can hold control characters: an
ESC starts a sequence the terminal obeys (``ESC ] 0 ; … BEL`` retitles the window, ``ESC [ 2 J``
clears the screen), and C1 controls such as U+009B do the same on many terminals. Such data
is shown escaped instead, as ``\\u001b``: the same spelling JSON uses, so escaping text that
is JSON (``--json``) leaves it valid JSON with the same value.

The CLI writes through :class:`EscapingStream` (installed by ``workbench.cli.main``); what the
workbench itself means as terminal control (a progress bar's line erase, a plot's colours)
is written with :func:`write_control`, which bypasses the escaping. A file's content sent to
stdout (``--out -``) goes through :func:`write_data`: escaped on a terminal like everything
else, byte for byte into a file or a pipe, where it is the export itself. The TUI applies the
same rule to every line it draws (``workbench.tui.app``).
"""

from __future__ import annotations

import codecs
import os
import re
import sys
from typing import Iterable, TextIO

# C0 controls but tab and newline, DEL, and the C1 controls: everything a terminal may act on. Also
# lone surrogates (a file name that is not UTF-8 decodes to them), which no terminal can be sent.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# For one-cell-per-character drawing (the TUI): the Unicode "control pictures" (U+2400…).
_PICTURES = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)} | {0x7F: 0x2421}
_PICTURES |= {c: 0xFFFD for c in (*range(0x80, 0xA0), *range(0xD800, 0xE000))}


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline (and any lone surrogate) escaped as ``\\uXXXX``."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def pictured(text: str) -> str:
    """``text`` with each control character drawn as one visible cell (␛ for ESC, � for C1)."""
    return text.translate(_PICTURES)


def has_control(text: str) -> bool:
    """Whether ``text`` holds a character :func:`printable` would escape."""
    return _CONTROL.search(text) is not None


class EscapingStream:
    """A text stream that escapes control characters in everything written through it.

    Other attributes (``isatty``, ``flush``, ``fileno``, ``buffer``, ``encoding``) are the
    wrapped stream's, so code that writes bytes or asks for a terminal works as before.
    """

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    @property
    def raw(self) -> TextIO:
        """The wrapped stream: writes there are not escaped."""
        return self._stream

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def raw_stream(stream: TextIO) -> TextIO:
    """The stream under an :class:`EscapingStream` (or ``stream`` itself)."""
    return stream.raw if isinstance(stream, EscapingStream) else stream


def write_control(stream: TextIO, text: str) -> None:
    """Write text the workbench composed itself, terminal control included, past any escaping."""
    raw_stream(stream).write(text)


def write_data(stream: TextIO, chunks: Iterable[str | bytes]) -> int:
    """Write a file's content (text, or UTF-8 bytes) to ``stream``; return its size in bytes.

    On a terminal it is shown as :func:`printable` shows text (a byte that is not UTF-8 too),
    so the data cannot drive the terminal. Anywhere else (a file, a pipe) it is written byte
    for byte, as the file would hold it.
    """
    target = raw_stream(stream)
    terminal = target.isatty()
    binary = None if terminal else getattr(target, "buffer", None)
    if binary is not None:
        target.flush()    # what was printed as text before goes first
    # Incremental: a chunk boundary may split a UTF-8 character, which must not be escaped as two bytes.
    decode = codecs.getincrementaldecoder("utf-8")("surrogateescape").decode
    size = 0
    for chunk in chunks:
        data = chunk.encode("utf-8") if isinstance(chunk, str) else chunk
        size += len(data)
        if binary is not None:
            binary.write(data)
        else:
            text = decode(data)
            target.write(printable(text) if terminal else text)
    if binary is None:
        rest = decode(b"", final=True)
        target.write(printable(rest) if terminal else rest)
    (target if binary is None else binary).flush()
    return size


def output_width() -> int | None:
    """How many columns the CLI's tables may take: ``COLUMNS`` when set (as other command-line tools read it),
    else the width of the terminal standard output is; None for a pipe or a file, read whole by a program."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    stream = raw_stream(sys.stdout)
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else None
    except (AttributeError, ValueError, OSError):      # no descriptor (captured output), or a closed one
        return None
