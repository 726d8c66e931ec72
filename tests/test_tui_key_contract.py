"""The key contract (docs/design.md §9): every key of every screen, in every state of data, acts or says why.

Generated from the app, not written key by key: tests/tuiwalk.py reads the bindings of every screen
it reaches (the modes, and what their keys open: Sample detail with its claims, the new-run form,
the SearChain tree, Compare's flip, Meta's instances, dialogs) and of the app, presses each, and
fails on a key that raises, or that changes nothing on the screen and posts no message.

One app walks three states of data (tests/tuistates.py), the database changing under it as a
CLI would change it: empty; like the demo's; the same with a run in progress. In `just test` each
state is walked once and both sizes are walked: the empty database at 80×24, every key, Textual's
and the app's too; the demo at 200×50 and the run in progress (on Runs, where it executes) at 80×24,
the keys the workbench binds, Textual's being answered by construction (CopyOrSay, the app's focus
actions) and checked so. ``WORKBENCH_WALK=full`` walks every state at both sizes, every key, and with
the run in progress every screen that changes when it starts: about three times as long, for a
change to the TUI's keys or layout.
"""

from __future__ import annotations

import os

import pytest

from tuikit import SMALL, wait_for
from tuistates import (LIVE, GatedBackend, build_demo_like, few_resamples, no_model_runs, plan_live, restore,
                       shared_template)
from tuiwalk import KeyWalk, background_workers, draw_only_when_looked_at, mode_of_key, settle
from workbench.store.queries import opening_run_name
from workbench.tui.app import WorkbenchApp

WIDE = (200, 50)
SIZES = [SMALL, WIDE]
# In short (`just test`): the empty database at 80×24, every key; the demo at 200×50 and the run in progress
# (Runs) at 80×24, the workbench's keys. WORKBENCH_WALK=full: every state at both sizes, every key, and with
# the run in progress every screen it changes (about three times as long).
FULL = os.environ.get("WORKBENCH_WALK") == "full"


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory):
    """The demo-like database, built once per test session."""
    return shared_template(tmp_path_factory, "demo.db", build_demo_like)


class Walks:
    """The walks of one app, state after state; their findings and how many keys they pressed."""

    def __init__(self, pilot):
        self.pilot, self.findings, self.pressed = pilot, [], 0

    async def state(self, name: str, sizes, every: bool, modes=None) -> None:
        """Walk the app in this state at each of ``sizes`` (``every``: every key; else the workbench's)."""
        for size in sizes:
            await self.pilot.resize_terminal(*size)
            walk = KeyWalk(self.pilot, f"{name} {size[0]}×{size[1]}", every=every or FULL)
            await walk.start()
            await walk.walk_modes(modes)
            self.findings += walk.findings
            self.pressed += walk.pressed


async def pictures_of_modes(pilot) -> dict[str, tuple]:
    """What each mode shows now (at the app's size)."""
    app, shown = pilot.app, {}
    for mode in mode_of_key(app).values():
        await app.switch_mode(mode)
        while len(app.screen_stack) > 1:
            await app.pop_screen()
        app.clear_notifications()
        shown[mode] = await settle(pilot, background_workers(app))
    return shown


async def start_live(pilot, gate: GatedBackend) -> None:
    """Runs, the cursor on ``live``, u: it executes, and waits in its third job (``gate``)."""
    app = pilot.app
    await app.switch_mode("runs")
    await wait_for(pilot, lambda: app.screen.query_one("#runs").row_count > 0)
    table = app.screen.query_one("#runs")
    table.move_cursor(row=table.get_row_index(LIVE))
    await pilot.press("u")
    await wait_for(pilot, lambda: LIVE in app.executions and gate.calls > gate.free, what="live executing")


async def test_every_key_of_every_screen_acts_or_says_why_on_an_empty_database_the_demo_and_a_run_in_progress(
        tmp_path, demo_template, monkeypatch):
    db = tmp_path / "wb.db"
    gate = GatedBackend()
    no_model_runs(monkeypatch, gate)
    few_resamples(monkeypatch)
    draw_only_when_looked_at(monkeypatch)
    app = WorkbenchApp(db, poll_seconds=3600)
    try:
        async with app.run_test(size=SMALL) as pilot:
            walks = Walks(pilot)
            await walks.state("empty", SIZES if FULL else [SMALL], every=True)
            # The demo's data arrives as an import in a shell would bring it; the app opens its latest run.
            restore(db, demo_template)
            app._poll()
            app.run_name = opening_run_name(app.store)
            await walks.state("demo", SIZES if FULL else [WIDE], every=False)
            await pilot.resize_terminal(*SMALL)
            before = await pictures_of_modes(pilot) if FULL else {}
            plan_live(db)           # as `workbench sweep` in a shell would, then u on Runs
            app._poll()
            await start_live(pilot, gate)
            # The screens that change when the run starts (in short: Runs, where it executes).
            changed = [mode for mode, shown in (await pictures_of_modes(pilot)).items() if before[mode] != shown] \
                if FULL else ["runs"]
            await walks.state("running", SIZES if FULL else [SMALL], every=False, modes=changed)
    finally:
        gate.release()
    assert not walks.findings, (f"{len(walks.findings)} of {walks.pressed} keys break the contract:\n"
                                + "\n".join(walks.findings))
