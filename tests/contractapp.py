"""The one app the TUI's three contracts walk (tests/test_tui_key_contract.py), state of data after state.

The key, room and cursor contracts look at the same screens in the same states of data
(tests/tuistates.py): an app started, and its screens first loaded, once per state instead of once
per contract. The database changes under the running app as a CLI would change it: empty, then
what `just demo` leaves ("partial": no SearChain or dedup run), then like the demo's, then with a run
in progress. States only go forward in one app; a test that asks for an earlier state than the app
has reached (tests run out of their file's order) gets a new app. A state is reached without going
through the ones before it that no test asked for ("partial" is only restored when asked for).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tuikit import SMALL, wait_for
from tuistates import LIVE, GatedBackend, plan_live, restore
from workbench.store.queries import opening_run_name
from workbench.tui.app import WorkbenchApp

STATES = ("empty", "partial", "demo", "running")


class Driver:
    """The app running in its own event loop, driven one call at a time from synchronous tests.

    One task holds ``run_test`` open and runs each call sent to it, so every call sees the app's context,
    and the app outlives a test: the next test drives it on from where it stands.
    """

    def __init__(self, app, size=SMALL):
        self.app, self.loop = app, asyncio.new_event_loop()
        self.calls: asyncio.Queue = asyncio.Queue()
        self.server = self.loop.create_task(self._serve(size))
        self.pilot = self.run(lambda pilot: asyncio.sleep(0, pilot))

    async def _serve(self, size) -> None:
        async with self.app.run_test(size=size) as pilot:
            while (call := await self.calls.get()) is not None:
                fn, done = call
                try:
                    done.set_result(await fn(pilot))
                except BaseException as exc:  # noqa: BLE001 - handed to the test, which raises it
                    done.set_exception(exc)

    def run(self, fn):
        """``await fn(pilot)`` inside the app's task; its result."""
        done = self.loop.create_future()
        self.calls.put_nowait((fn, done))
        return self.loop.run_until_complete(done)

    def close(self) -> None:
        self.calls.put_nowait(None)
        self.loop.run_until_complete(self.server)
        self.loop.close()


async def start_live(pilot, gate: GatedBackend) -> None:
    """Runs, the cursor on ``live``, u: it executes, and waits in its third job (``gate``)."""
    app = pilot.app
    await app.switch_mode("runs")
    # The table may show the runs it had before ``live`` was planned until its reload lands: wait for the row.
    await wait_for(pilot, lambda: LIVE in {key.value for key in app.screen.query_one("#runs").rows}, what="live listed")
    table = app.screen.query_one("#runs")
    table.move_cursor(row=table.get_row_index(LIVE))
    await pilot.press("u")
    await wait_for(pilot, lambda: LIVE in app.executions and gate.calls > gate.free, what="live executing")


class Contracts:
    """The contracts' app (``driver``) on a database in ``state``, one of ``STATES``.

    ``gate`` answers the run ``live`` (tests/tuistates.py's ``no_model_runs`` must route it there);
    ``partial_template`` is the "partial" state's database (tests/tuistates.py's ``build_like_just_demo``).
    """

    def __init__(self, folder: Path, demo_template: Path, gate: GatedBackend, partial_template: Path | None = None):
        self.folder, self.demo_template, self.gate = folder, demo_template, gate
        self.partial_template = partial_template
        self.apps = 0
        self.driver: Driver | None = None
        self._fresh()

    def _fresh(self) -> None:
        if self.driver is not None:
            self.driver.close()
        self.apps += 1
        self.db = self.folder / f"wb-{self.apps}.db"
        self.driver, self.state = Driver(WorkbenchApp(self.db, poll_seconds=3600)), "empty"

    def at(self, state: str) -> Driver:
        """The driver of the app, its database brought to ``state`` (a new app if that is behind it)."""
        if STATES.index(state) < STATES.index(self.state):
            self._fresh()
        if state == "partial" and self.state == "empty":
            assert self.partial_template is not None, "Contracts(..., partial_template=) for the partial state"
            self._to(self.partial_template, "partial")
        if self.state in ("empty", "partial") and state in ("demo", "running"):
            self._to(self.demo_template, "demo")
        if self.state == "demo" and state == "running":
            plan_live(self.db)           # as `workbench sweep` in a shell would, then u on Runs
            self.driver.run(self._start_live)
            self.state = "running"
        return self.driver

    def _to(self, template: Path, state: str) -> None:
        # The data arrives as an import in a shell would bring it; the app opens its latest run, as it would
        # when started on it: no cell, dataset filter or exclusion chosen in the state before.
        restore(self.db, template)
        self.driver.run(self._seen_data)
        self.state = state

    async def _seen_data(self, pilot) -> None:
        app = pilot.app
        app._poll()
        app.run_name, app.cell_id = opening_run_name(app.store), None
        app.dataset_filter, app.exclude_tagged = None, False

    async def _start_live(self, pilot) -> None:
        pilot.app._poll()
        await start_live(pilot, self.gate)

    def close(self) -> None:
        self.gate.release()
        self.driver.close()
