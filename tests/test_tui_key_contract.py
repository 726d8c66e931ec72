"""The TUI's contracts (docs/design.md §9), walked in one app as the database changes under it.

The key contract: every key of every screen, in every state of data, acts or says why. Generated
from the app, not written key by key: tests/tuiwalk.py reads the bindings of every screen it
reaches (the modes, and what their keys open: Sample detail with its claims, the new-run form,
the SearChain tree, Compare's flip, Meta's instances, dialogs) and of the app, presses each, and
fails on a key that raises, or that changes nothing on the screen and posts no message.
The room contract (tests/contractroom.py): no column is cut while the screen has room for it.
The cursor contract (tests/contractcursor.py): every detail pane, mark and side panel shows the
highlighted row's own data.

One app (tests/contractapp.py) goes through four states of data (tests/tuistates.py), the database
changing under it as a CLI would change it: empty; what `just demo` leaves, where some screens are empty
or filtered while the rest has data (tests/contractempty.py: a screen with no run of its kind, Samples
searched with no match or on an empty quadrant, an answer with no claims of its own, a narrowed Runs
list), walked at 80×24, the workbench's keys and tab, a focus moved onto a pane showing nothing counting
as no change; like the demo's; the same with a run in progress.
The tests below run in this file's order, each on the state it names: the room and cursor contracts
on the demo's data before the key walk of that state writes in it (tags, labels). In `just test`
each state is walked once and both sizes are walked: the empty database at 80×24, every key,
Textual's and the app's too; the demo at 200×50 and the run in progress (on Runs, where it executes)
at 80×24, the keys the workbench binds, Textual's being answered by construction (CopyOrSay, the
app's focus actions) and checked so. ``WORKBENCH_WALK=full`` walks every state at both sizes, every
key, and with the run in progress every screen that changes when it starts: about three times as
long, for a change to the TUI's keys or layout.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contractapp import Contracts
from contractcursor import KEYS, Checker
from contractempty import VIEWS, SeenWalk
from contractroom import room_findings
from tuikit import SMALL, WIDE
from tuistates import GatedBackend, build_like_just_demo, few_resamples, no_model_runs, shared_template
from tuiwalk import KeyWalk, background_workers, draw_only_when_looked_at, mode_of_key, settle

SIZES = [SMALL, WIDE]
# In short (`just test`): the empty database at 80×24, every key; the demo at 200×50 and the run in progress
# (Runs) at 80×24, the workbench's keys. WORKBENCH_WALK=full: every state at both sizes, every key, and with
# the run in progress every screen it changes (about three times as long).
FULL = os.environ.get("WORKBENCH_WALK") == "full"


@pytest.fixture(scope="session")
def partial_template(tmp_path_factory, demo_template):
    """What `just demo` leaves (the demo-like database without SearChain and dedup runs), once per test session."""
    return shared_template(tmp_path_factory, "partial.db", lambda path: build_like_just_demo(path, demo_template))


@pytest.fixture(scope="module")
def contracts(tmp_path_factory, demo_template, partial_template):
    """The one app every contract of this file walks (tests/contractapp.py), on an empty database to begin."""
    gate = GatedBackend()
    with pytest.MonkeyPatch.context() as monkeypatch:
        no_model_runs(monkeypatch, gate)
        few_resamples(monkeypatch)
        draw_only_when_looked_at(monkeypatch)
        shared = Contracts(tmp_path_factory.mktemp("contracts"), demo_template, gate, partial_template)
        try:
            yield shared
        finally:
            shared.close()


class Walks:
    """The walks of one app, state after state; their findings and how many keys they pressed."""

    def __init__(self, pilot, walk_opened_once: bool = False):
        self.pilot, self.findings, self.pressed = pilot, [], 0
        # The screens keys opened, walked once across this object's walks (else once per walk: each state and size).
        self.opened: set | None = set() if walk_opened_once else None

    async def state(self, name: str, sizes, every: bool, modes=None, seen: bool = False,
                    not_followed: tuple = ()) -> None:
        """Walk the app in this state at each of ``sizes`` (``every``: every key; else the workbench's). ``seen``:
        tests/contractempty.py's SeenWalk, tab and shift+tab pressed in any case and a focus moved onto a pane
        showing nothing no change. The screens of ``not_followed`` are opened, not walked."""
        for size in sizes:
            await self.pilot.resize_terminal(*size)
            walked = set() if self.opened is None else self.opened
            skipped = set(not_followed) - walked
            label = f"{name} {size[0]}×{size[1]}"
            walk = SeenWalk(self.pilot, label, every=every or FULL, walked=walked | skipped, focus_keys=True) \
                if seen else KeyWalk(self.pilot, label, every=every or FULL, walked=walked | skipped)
            await walk.start()
            await walk.walk_modes(modes)
            walked |= walk.walked - skipped
            self.findings += walk.findings
            self.pressed += walk.pressed

    def verdict(self) -> str:
        return f"{len(self.findings)} of {self.pressed} keys break the contract:\n" + "\n".join(self.findings)


async def pictures_of_modes(pilot) -> dict[str, tuple]:
    """What each mode shows now (at the app's size)."""
    app, shown = pilot.app, {}
    for mode in mode_of_key(app).values():
        await app.switch_mode(mode)
        while len(app.screen_stack) > 1:
            await app.pop_screen()
        app.clear_notifications()
        shown[mode] = await settle(pilot, background_workers(app), look=True)
    return shown


def test_every_key_of_every_screen_acts_or_says_why_on_an_empty_database(contracts):
    driver = contracts.at("empty")
    walks = Walks(driver.pilot)
    # seen: a key that only moves the focus onto a pane showing nothing says nothing either.
    driver.run(lambda pilot: walks.state("empty", SIZES if FULL else [SMALL], every=True, seen=True))
    assert not walks.findings, walks.verdict()
    assert walks.pressed > 100, walks.pressed      # every screen's keys (201 at 80×24): not a walk of nothing


def test_every_key_acts_or_says_why_where_a_screen_is_empty_or_filtered_among_data(contracts):
    """Each view of tests/contractempty.py (a screen with no run of its kind, Samples with no match or an empty
    quadrant, an answer with no claims of its own, a narrowed Runs list): its screen walked at 80×24, the keys the
    workbench binds and tab and shift+tab; what a key opens is walked once across the views."""
    driver = contracts.at("partial")
    walks = Walks(driver.pilot, walk_opened_once=True)

    pressed: dict[str, int] = {}

    async def views(pilot):
        for view in VIEWS:
            await view.enter(pilot)
            before = walks.pressed
            await walks.state(f"partial, {view.name}", [SMALL], every=FULL, modes=[view.mode], seen=True,
                              not_followed=view.unwalked(pilot.app))
            pressed[view.name] = walks.pressed - before

    driver.run(views)
    assert not walks.findings, walks.verdict()
    # Every view walked (tab and shift+tab at least, and its screen's keys): none passes by pressing nothing.
    assert all(n >= 5 for n in pressed.values()), pressed


def test_no_column_is_cut_while_the_screen_has_room(contracts):
    """The room contract on the demo's data (tests/contractroom.py)."""
    findings = contracts.at("demo").run(room_findings)
    assert not findings, "\n".join(findings)


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(keys=st.lists(st.sampled_from(KEYS), min_size=4, max_size=10))
# The walks the issue reported, always tried first: a detail left open, a mark and a scrolled panel taken along.
@example(keys=["down", "down", "s", "enter", "l", "down", "s"])
@example(keys=["space", "r", "down", "enter"])
@example(keys=["J", "J", "m"])
def test_every_pane_mark_and_side_panel_shows_the_highlighted_rows_own_data(contracts, keys):
    """The cursor contract on the demo's data (tests/contractcursor.py), at 80×24."""
    driver = contracts.at("demo")
    if tuple(driver.app.size) != SMALL:
        driver.run(lambda pilot: pilot.resize_terminal(*SMALL))
    checker = Checker(driver.pilot)
    driver.run(lambda pilot: checker.reset())
    for key in keys:
        driver.run(lambda pilot, key=key: checker.step(key))


def test_every_key_of_every_screen_acts_or_says_why_on_the_demo_and_a_run_in_progress(contracts):
    driver = contracts.at("demo")
    walks = Walks(driver.pilot)

    async def demo(pilot):
        await walks.state("demo", SIZES if FULL else [WIDE], every=False)
        await pilot.resize_terminal(*SMALL)
        return await pictures_of_modes(pilot) if FULL else {}

    before = driver.run(demo)
    driver = contracts.at("running")

    async def running(pilot):
        # The screens that change when the run starts (in short: Runs, where it executes).
        changed = [mode for mode, shown in (await pictures_of_modes(pilot)).items() if before[mode] != shown] \
            if FULL else ["runs"]
        await walks.state("running", SIZES if FULL else [SMALL], every=False, modes=changed)

    driver.run(running)
    assert not walks.findings, walks.verdict()
    assert walks.pressed > 100, walks.pressed      # every screen's keys (216 in short): not a walk of nothing
