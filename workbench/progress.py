"""The rate and ETA of a pass, and a plain stderr progress bar showing them, for the CLI.

:func:`pace` is the one computation of a rate and an ETA: the CLI's bar and the TUI's Runs
line both show it. It divides by the seconds the pass worked, which its driver measures
without the waits for the model slot (:meth:`workbench.passes.driver.Driver.worked`): a
pass that waited 10 minutes for another process's model, then did 1 job in 2 s, goes at
0.5 jobs/s, not 1 in 602 s (the ETA 17 hours of a run that ended 20 s later).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from workbench.models import slot as model_slot
from workbench.terminal import raw_stream, write_control


@dataclass(frozen=True)
class Pace:
    """How fast a pass goes: jobs a second, tokens a second (None: not counted), and the seconds left."""

    rate: float
    tokens: float | None
    left: float | None      # None: not known yet (no job took time so far)

    def eta(self) -> str:
        """The time left as a duration ("0s", "4m05s", "1h26m"), or "?" while it is not known."""
        return "?" if self.left is None else duration(self.left)


def pace(done: int, total: int, seconds: float, *, instant: int = 0, tokens: int | None = None) -> Pace:
    """The pace of ``done`` of ``total`` jobs in ``seconds`` of work (waits excluded: whoever measured them).

    ``instant`` of the done jobs took no time (answered from the cache): counted in the rate, a
    burst of them made the jobs still to generate look instant ("ETA 0s"). The time left is 0
    when nothing is left, unknown while no job took time.
    """
    worked = done - instant
    rate = worked / seconds if seconds > 0 and worked > 0 else 0.0
    left = total - done
    token_rate = None if tokens is None else tokens / seconds if seconds > 0 else 0.0
    return Pace(rate, token_rate, 0.0 if left <= 0 else left / rate if rate > 0 else None)


def duration(seconds: float) -> str:
    """``seconds`` as "42s", "4m05s", or "17h15m"."""
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class ProgressBar:
    """Call with ``(done, total)``; redraws at most 10 times a second, one final line at the end."""

    def __init__(self, label: str, stream=None, width: int = 30):
        self.label, self.stream, self.width = label, stream or sys.stderr, width
        self.start = time.monotonic()
        self.last = 0.0
        self.tty = self.stream.isatty()
        self._waited = False

    def waiting(self, message: str) -> None:
        """Show ``message`` (e.g. "waiting for the model: pid N …") in the bar's place until the bar is drawn.

        The time spent waiting for the model slot is not the pass's: the rate and ETA
        count from when this process took the slot.
        """
        self._waited = True
        self._return()
        self.stream.write(f"{self.label}: {message}" + ("" if self.tty else "\n"))
        self.stream.flush()

    def __call__(self, done: int, total: int, tokens: int | None = None, extra: str = "", *,
                 already: int = 0, overall: int | None = None, force: bool = False, seconds: float | None = None,
                 instant: int = 0) -> None:
        """Draw ``done`` of ``total`` for this execution; ``already`` of ``overall`` place it in a resumed run.

        The bar and the count show the run overall (a resume of 2 remaining jobs of 24 reads
        23/24, not 1/2), while the rate and ETA come from this execution's own work: ``seconds``
        of it, as the pass's driver measured them (waits for the model excluded), else the
        bar's own clock; ``instant`` of the done jobs came from the cache (:func:`pace`).
        ``force`` draws now, however recently the bar was drawn (what ``extra`` says has changed).
        """
        now = time.monotonic()
        if self._waited:
            # On a terminal the bar replaces the (longer) waiting line.
            self._waited, self.last = False, 0.0
            # The bar's own clock (a caller that gives no ``seconds``) restarts when the wait for the model ended.
            self.start = max(self.start, min(model_slot.taken_at() or self.start, now))
            if self.tty:
                write_control(self.stream, "\r\x1b[K")
        if done < total and not force and now - self.last < (0.1 if self.tty else 5.0):
            return
        self.last = now
        speed = pace(done, total, now - self.start if seconds is None else seconds, instant=instant, tokens=tokens)
        shown, of = already + done, overall if overall is not None else total
        filled = int(self.width * shown / of) if of else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        tok = f" {speed.tokens:,.1f} tok/s" if speed.tokens is not None else ""
        line = f"{self.label} [{bar}] {shown}/{of} {speed.rate:,.1f}/s{tok} ETA {speed.eta()}{extra}"
        end = "\n" if done >= total or not self.tty else ""
        self._return()
        self.stream.write(line + end)
        self.stream.flush()

    def _return(self) -> None:
        """Back to the start of the line on a terminal: the bar is redrawn in place."""
        if self.tty:
            write_control(self.stream, "\r")


def say(stream, text: str) -> None:
    """Write ``text`` from a signal handler: to the stream's descriptor, past its buffer.

    The handler runs between two bytecodes of the main thread, which may be inside a write to the
    same stream (the progress bar's line): a second write through its buffer raises "reentrant
    call", in the middle of the run, and a run that then waited for its jobs in flight hung with
    nothing said. A stream with no descriptor (captured output) is written as usual.
    """
    try:
        fd = raw_stream(stream).fileno()
    except (AttributeError, ValueError, OSError):
        stream.write(text)
        return
    os.write(fd, text.encode("utf-8", "backslashreplace"))


class StopOnSigint:
    """A context manager: the first Ctrl-C sets ``.stop`` (finish the job in progress), the second aborts."""

    def __init__(self, stream=None):
        import threading

        self.stop = threading.Event()
        self.stream = stream or sys.stderr
        self._previous = None

    def _handler(self, signum, frame):
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.stop.set()
        say(self.stream, "\nstopping after the job in progress (Ctrl-C again to abort now)…\n")

    def __enter__(self) -> "StopOnSigint":
        import signal

        self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        signal.signal(signal.SIGINT, self._previous)
