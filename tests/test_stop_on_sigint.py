"""Ctrl-C during a pass: the first says the pass stops after the job in progress, the second aborts.

The handler runs between two bytecodes of the main thread, which may be inside a write to stderr (the
progress bar's line). Said through the stream, the sentence raised Python's "reentrant call inside
<_io.BufferedWriter name='<stderr>'>" in the middle of the run: the run ended its loop with that error and
waited for its jobs in flight, hung, having said nothing (a CI run of tests/test_generation.py's
test_ctrl_c_stops_cleanly_after_the_current_job waited 120 s for the sentence). The sentence now goes to the
stream's descriptor, past its buffer.
"""

from __future__ import annotations

import io
import os
import signal

import pytest

from workbench.progress import StopOnSigint

SAID = "\nstopping after the job in progress (Ctrl-C again to abort now)…\n"


class MidWrite:
    """stderr while the bar's line is being written: a second write through its buffer fails as Python's does."""

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def write(self, text: str) -> int:
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")


def test_the_first_ctrl_c_is_said_even_in_the_middle_of_a_write_to_the_stream():
    read, write = os.pipe()
    try:
        with StopOnSigint(MidWrite(write)) as interrupt:
            signal.raise_signal(signal.SIGINT)
            assert interrupt.stop.is_set()
        os.close(write)
        write = None
        assert os.read(read, 1000).decode() == SAID
    finally:
        os.close(read)
        if write is not None:
            os.close(write)


def test_the_second_ctrl_c_aborts():
    stream = io.StringIO()      # no descriptor (captured output): written as usual
    with StopOnSigint(stream) as interrupt:
        signal.raise_signal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert interrupt.stop.is_set() and stream.getvalue() == SAID
