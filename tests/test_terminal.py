"""Data never drives the terminal: what a real terminal receives from the CLI and the TUI.

A name, a question or an answer may hold an escape sequence (``ESC ] 0 ; … BEL`` retitles the
window, ``ESC [ 2 J`` clears the screen). The CLI prints it escaped (``\\u001b``); the TUI draws
it as a visible picture (``␛``). Both are checked on the bytes a pseudo-terminal receives from
the real program, as a terminal emulator would get them. A file's content sent to stdout
(``--out -``) is escaped the same way on a terminal, and is the file byte for byte in a pipe.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.terminal import EscapingStream, pictured, printable, write_data

ATTACK = "ti\x1b]0;PWNED\x07\x1b[2Jny\x9b31m"


def test_printable_escapes_controls_and_keeps_text():
    assert printable("红烧肉\tline\nnext") == "红烧肉\tline\nnext"
    assert printable(ATTACK) == "ti\\u001b]0;PWNED\\u0007\\u001b[2Jny\\u009b31m"
    assert printable("bad-\udcff.md") == "bad-\\udcff.md"      # a file name that is not UTF-8


def test_pictured_draws_one_cell_per_control_character():
    drawn = pictured(ATTACK)
    assert len(drawn) == len(ATTACK) and "\x1b" not in drawn
    assert drawn.startswith("ti␛]0;PWNED␇␛[2Jny")


def test_the_escaping_stream_writes_only_escaped_text(tmp_path):
    with open(tmp_path / "out.txt", "w", encoding="utf-8", newline="") as fh:
        stream = EscapingStream(fh)
        assert stream.write(ATTACK) == len(ATTACK)
        stream.raw.write("\r")        # the workbench's own control (a progress bar) goes past it
    assert (tmp_path / "out.txt").read_bytes() == (printable(ATTACK) + "\r").encode()


def _attacked(store) -> Path:
    """Close ``store`` and give its dataset a name with an escape sequence, as a database written before
    names were checked would hold it, and a question that carries one."""
    path = store.path
    store.close()
    con = sqlite3.connect(path)
    con.execute("UPDATE datasets SET name = ?", (ATTACK,))
    con.execute("UPDATE samples SET question = ? WHERE id = 'q1'", ("who\x1b]0;PWNED2\x07 directed Kismet",))
    con.commit()
    con.close()
    return path


@pytest.fixture
def attacked_db(tmp_path, tiny_store) -> Path:
    """The tiny dataset; its name and a question carry escape sequences."""
    return _attacked(tiny_store)


def on_a_terminal(argv: list[str], steps: list[tuple[bytes, bytes]], timeout: float = 90) -> bytes:
    """Run ``workbench ARGV`` on an 80×24 pseudo-terminal; return every byte it sent.

    ``steps``: for each ``(seen, keys)``, once ``seen`` has arrived, ``keys`` are typed. The
    program must then end by itself (the last keys quit it).
    """
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", *argv], stdin=follower, stdout=follower,
                            stderr=follower, env=env, close_fds=True)
    os.close(follower)
    received, pending = b"", list(steps)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    received += os.read(leader, 65536)
                except OSError:     # the program ended and closed the terminal
                    break
            if pending and pending[0][0] in received:
                os.write(leader, pending.pop(0)[1])
            if proc.poll() is not None and not ready:
                break
        else:
            raise AssertionError(f"{argv} did not finish; it sent {received[-400:]!r}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(leader)
    assert not pending, f"never saw {pending[0][0]!r}; the end of what arrived: {received[-400:]!r}"
    return received


def test_the_cli_prints_a_name_with_an_escape_sequence_escaped_on_a_real_terminal(attacked_db):
    out = on_a_terminal(["--db", str(attacked_db), "datasets"], [])
    assert b"\x1b" not in out and b"\x07" not in out and "\x9b".encode() not in out
    assert b"ti\\u001b]0;PWNED\\u0007\\u001b[2Jny\\u009b31m: 5 triples" in out


def test_the_tui_draws_escape_sequences_as_pictures_and_never_sends_them(attacked_db):
    # The app opens on Runs; d shows the Datasets screen, with the name; q quits. Textual sends its own
    # escape sequences, but the data's title change and screen clear must arrive only as drawn characters.
    out = on_a_terminal(["--db", str(attacked_db), "tui"], [(b"Runs", b"d"), ("␛]0;PWNED".encode(), b"q")])
    assert b"\x1b]0;PWNED" not in out and b"\x1b[2Jny" not in out
    # (Rich itself drops the BEL; the escapes are drawn, each one cell.)
    assert "ti␛]0;PWNED".encode() in out and "␛[2Jny".encode() in out


# -- a file's content sent to stdout (--out -) ------------------------------------------------------

class FakeTerminal:
    """A text stream that says it is a terminal and keeps what it was sent."""

    def __init__(self):
        self.sent = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.sent += text
        return len(text)

    def flush(self) -> None:
        pass


def test_write_data_escapes_a_files_content_on_a_terminal():
    terminal = FakeTerminal()
    # A UTF-8 character split between two chunks stays one character; a byte that is not UTF-8 is escaped.
    size = write_data(EscapingStream(terminal), [b"caf\xc3", b"\xa9 \x1b[2J", b"\xff", "ok\x07\n"])
    assert terminal.sent == "café \\u001b[2J\\udcffok\\u0007\n"
    assert size == 15


def test_write_data_writes_a_files_content_byte_for_byte_into_a_file(tmp_path):
    with open(tmp_path / "out.txt", "w", encoding="utf-8") as fh:
        fh.write("before\n")
        size = write_data(EscapingStream(fh), [b"caf\xc3", b"\xa9 \x1b[2J", b"\xff", "ok\x07\n"])
    assert (tmp_path / "out.txt").read_bytes() == b"before\ncaf\xc3\xa9 \x1b[2J\xffok\x07\n"
    assert size == 15


@pytest.fixture
def attacked_run_db(tmp_path, tiny_store) -> Path:
    """The tiny dataset with a model-free sweep ``s``; the dataset's name and a question carry escape sequences."""
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), name="s")
    return _attacked(tiny_store)


@pytest.mark.parametrize("argv, escaped", [
    (["export", "samples", "s", "--format", "csv"], b"who\\u001b]0;PWNED2\\u0007 directed Kismet"),
    (["report", "s", "--resamples", "50"], b"ti\\u001b]0;PWNED\\u0007\\u001b[2Jny\\u009b31m")])
def test_dash_sends_an_export_escaped_to_a_real_terminal(attacked_run_db, argv, escaped):
    out = on_a_terminal(["--db", str(attacked_run_db), *argv, "--out", "-"], [])
    assert b"\x1b" not in out and b"\x07" not in out and "\x9b".encode() not in out
    assert escaped in out


def test_dash_into_a_pipe_is_the_export_byte_for_byte(attacked_run_db, tmp_path):
    from workbench.cli import main

    assert main(["--db", str(attacked_run_db), "export", "samples", "s", "--format", "csv",
                 "--out", str(tmp_path / "samples.csv")]) == 0
    piped = subprocess.run([sys.executable, "-m", "workbench.cli", "--db", str(attacked_run_db), "export", "samples",
                            "s", "--format", "csv", "--out", "-"], capture_output=True, timeout=120, check=True)
    assert b"who\x1b]0;PWNED2\x07 directed Kismet" in piped.stdout
    assert piped.stdout == (tmp_path / "samples.csv").read_bytes()
