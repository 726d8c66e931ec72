"""A plain stderr progress bar with rate and ETA, for the CLI (the TUI has its own)."""

from __future__ import annotations

import sys
import time

from workbench.models import slot as model_slot
from workbench.terminal import write_control


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
                 already: int = 0, overall: int | None = None, force: bool = False) -> None:
        """Draw ``done`` of ``total`` for this execution; ``already`` of ``overall`` place it in a resumed run.

        The bar and the count show the run overall (a resume of 2 remaining jobs of 24 reads
        23/24, not 1/2), while the rate and ETA come from this execution's own work. ``force``
        draws now, however recently the bar was drawn (what ``extra`` says has changed).
        """
        now = time.monotonic()
        if self._waited:
            # On a terminal the bar replaces the (longer) waiting line.
            self._waited, self.last = False, 0.0
            self.start = max(self.start, min(model_slot.taken_at() or self.start, now))
            if self.tty:
                write_control(self.stream, "\r\x1b[K")
        if done < total and not force and now - self.last < (0.1 if self.tty else 5.0):
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        eta = (total - done) / rate if rate > 0 else float("inf")
        shown, of = already + done, overall if overall is not None else total
        filled = int(self.width * shown / of) if of else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        tok = f" {tokens / elapsed:,.1f} tok/s" if tokens is not None else ""
        line = f"{self.label} [{bar}] {shown}/{of} {rate:,.1f}/s{tok} ETA {_eta(eta)}{extra}"
        end = "\n" if done >= total or not self.tty else ""
        self._return()
        self.stream.write(line + end)
        self.stream.flush()

    def _return(self) -> None:
        """Back to the start of the line on a terminal: the bar is redrawn in place."""
        if self.tty:
            write_control(self.stream, "\r")


def _eta(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


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
        print("\nstopping after the job in progress (Ctrl-C again to abort now)…", file=self.stream)

    def __enter__(self) -> "StopOnSigint":
        import signal

        self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        signal.signal(signal.SIGINT, self._previous)
