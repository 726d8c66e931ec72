"""A screen's ``loaded`` flag: what the TUI tests and screenshots wait on instead of a guessed delay.

A probe screen on the real base class, whose loads run only when the test releases them, so
every state is reached on purpose whatever the machine's load.
"""

from __future__ import annotations

import threading

from textual.widgets import Static

from tuikit import SIZE, wait_for
from workbench.tui.app import WorkbenchApp
from workbench.tui.base import WorkbenchScreen
from workbench.tui.dialogs import ErrorDialog


def _released(store, gate: threading.Event, value: str, fail: bool) -> str:
    """A load that returns ``value`` (or fails) once the test sets ``gate``."""
    assert gate.wait(60), "the test never released this load"
    if fail:
        raise RuntimeError("the worker failed")
    return value


class Probe(WorkbenchScreen):
    """Loads ``value`` on mount; ``fetch`` asks again. Each load waits for its own gate."""

    def __init__(self):
        super().__init__()
        self.gates: list[threading.Event] = []
        self.shown: list[str] = []

    def compose(self):
        yield Static("probe")

    def on_mount(self) -> None:
        self.fetch("first")

    def fetch(self, value: str, fail: bool = False) -> None:
        gate = threading.Event()
        self.gates.append(gate)
        self.load("value", _released, gate, value, fail)

    def on_loaded(self, message) -> None:
        self.shown.append(message.payload)


async def _probe(pilot) -> Probe:
    app = pilot.app
    await wait_for(pilot, lambda: app.current_mode == "datasets" and app.screen.loaded)
    probe = Probe()
    app.push_screen(probe)
    await wait_for(pilot, lambda: app.screen is probe and len(probe.gates) == 1)
    return probe


async def test_loaded_waits_for_every_result_owed_including_one_queued_behind_a_running_load(tmp_path):
    app = WorkbenchApp(tmp_path / "wb.db")
    async with app.run_test(size=SIZE) as pilot:
        probe = await _probe(pilot)
        assert not probe.loaded                      # shown, but its first load is running
        probe.fetch("second")                        # asked again meanwhile: queued behind it
        probe.gates[0].set()
        await wait_for(pilot, lambda: probe.shown == ["first"])
        assert not probe.loaded                      # the first is shown, the queued one is still owed
        probe.gates[1].set()
        await wait_for(pilot, lambda: probe.loaded, what="loaded after the queued result")
        assert probe.shown == ["first", "second"]


async def test_a_failed_load_owes_nothing_and_a_screen_shown_again_is_not_loaded_until_it_is_back(tmp_path):
    app = WorkbenchApp(tmp_path / "wb.db")
    async with app.run_test(size=SIZE) as pilot:
        probe = await _probe(pilot)
        probe.gates[0].set()
        await wait_for(pilot, lambda: probe.loaded)
        probe.fetch("bad", fail=True)
        probe.gates[1].set()
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorDialog))
        assert not probe.loaded                      # covered by the dialog: not what the user sees
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is probe and probe.loaded, what="loaded once the dialog is gone")
        assert probe.shown == ["first"]              # the failure delivered nothing, and nothing waits for it
