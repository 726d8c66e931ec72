"""Writes a screen makes one after another, in the order asked, in one thread worker (labels, dedup decisions)."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable

from textual import work

from workbench.tui.messages import Loaded


class SerialWrites:
    """A screen mixin: writes run one after another in a thread worker, in the order they were asked for.

    ``serial_write(what, fn, *args)`` queues ``fn(store, *args)`` and returns at once; one worker
    drains the queue with its own connection and posts ``Loaded(what, result)`` after each.
    Unlike ``WorkbenchScreen.load`` nothing is coalesced or replaced: forty quick keys are
    forty writes, in order. ``writes_owed`` counts the writes whose result has not been
    applied yet (a screen is not ``loaded`` while it is positive).
    """

    def _serial_state(self) -> dict:
        state = self.__dict__.get("_serial")
        if state is None:
            state = self.__dict__["_serial"] = {"ops": deque(), "lock": threading.Lock(), "running": False,
                                                "owed": 0}
        return state

    @property
    def writes_owed(self) -> int:
        return self._serial_state()["owed"]

    def serial_write(self, what: str, fn: Callable[..., Any], *args) -> None:
        state = self._serial_state()
        state["owed"] += 1
        with state["lock"]:
            state["ops"].append((what, fn, args))
            start = not state["running"]
            state["running"] = True
        if start:
            self._drain_writes()

    @work(thread=True, exit_on_error=False, group="serial-writes")
    def _drain_writes(self) -> None:
        state = self._serial_state()
        store = None
        drained = False
        try:
            while True:
                with state["lock"]:
                    if not state["ops"]:
                        # Under the lock: a write asked for after this starts a new worker.
                        state["running"], drained = False, True
                        return
                    what, fn, args = state["ops"].popleft()
                try:
                    if store is None:
                        store = self.app.open_store()
                    result = fn(store, *args)
                except Exception as exc:  # noqa: BLE001 - shown to the user; the next writes still run
                    self.app.call_from_thread(self._write_failed, what, exc)
                    continue
                self.post_message(Loaded(what, result))
        finally:
            if store is not None:
                store.close()
            if not drained:     # stopped abnormally: let the next write start a worker
                with state["lock"]:
                    state["running"] = False

    def _write_failed(self, what: str, error: Exception) -> None:
        self.serial_done(what)
        self.app.show_error(f"Not saved ({what})", error)

    def serial_done(self, what: str) -> None:
        """Call when a write's result (or failure) is applied."""
        state = self._serial_state()
        state["owed"] = max(0, state["owed"] - 1)
