"""One running app shared by the tests of a TUI module that only look and navigate (group "TUI A").

Starting a WorkbenchApp and opening its first screen costs Textual more than most of what such a test checks
(a new screen: every stylesheet parsed again, its compose, its first load and drawing). Tests that do not
change the database share one app per module, driven through tests/contractapp.py's ``Driver`` (its own event
loop, which outlives a test). Before each test, ``fresh`` puts the app back where a new one would stand: no
dialog or detail open, the test's terminal size, the app's selection as it opens, its opening screen (kept:
that is the saving) as it first shows, and every other screen made anew, so that no filter, mark, cursor,
scroll or notice left by the test before is seen, in whatever order the tests run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from contractapp import Driver
from tuikit import SIZE, until_loaded
from workbench.store.queries import opening_run_name
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.ledger import LedgerScreen


class SharedApp:
    """A WorkbenchApp on ``db`` that outlives a test: ``walk(fn, size)`` runs ``await fn(pilot)`` in it, fresh."""

    def __init__(self, db: Path, size=SIZE):
        self.driver = Driver(WorkbenchApp(db), size=size)
        self.app = self.driver.app

    def walk(self, fn, size=SIZE):
        """``await fn(pilot)`` in the app made fresh (see the module's docstring) at ``size``; its result."""

        async def walk(pilot):
            await fresh(pilot, size)
            return await fn(pilot)

        return self.driver.run(walk)

    def close(self) -> None:
        self.driver.close()


def running(db: Path, size=SIZE, kind=SharedApp) -> Iterator[SharedApp]:
    """A module fixture's body (``yield from running(db)``): the shared app (a ``kind``) on ``db``, closed after the
    module."""
    shared = kind(db, size)
    try:
        yield shared
    finally:
        shared.close()


async def fresh(pilot, size) -> None:
    """The app as it stands once started at ``size`` (see the module's docstring)."""
    app = pilot.app
    while len(app.screen_stack) > 1:         # a dialog or a detail left open by the test before
        app.pop_screen()
    if app.size != tuple(size):
        await pilot.resize_terminal(*size)
    excluding = app.exclude_tagged
    app.run_name, app.cell_id, app.exclude_tagged = opening_run_name(app.store), None, False
    home = "ledger" if app.run_name else ("runs" if app._has_datasets() else "datasets")   # as on_mount picks
    kept = app.get_screen_stack(home)[0] if home in app._screen_stacks else None
    if kept is not None and not _as_opened(kept, app.run_name, excluding):
        # The test before changed more than the cursor: a new screen, opened from another mode as a new app's.
        aside = "runs" if home == "datasets" else "datasets"
        await app.switch_mode(aside)
        await _renew(app, home)
    await app.switch_mode(home)
    for mode in [m for m in app._screen_stacks if m not in (home, app.DEFAULT_MODE)]:
        await _renew(app, mode)
    while len(app.screen_stack) > 1:
        app.pop_screen()
    app.clear_notifications()
    screen = await until_loaded(pilot, home)
    if isinstance(screen, LedgerScreen):      # kept: its cursor, scroll and focus as a new Ledger has them
        table = screen.query_one("#ledger")
        table.move_cursor(row=0, column=0, animate=False)
        table.scroll_home(animate=False)
        screen.query_one("#side-scroll").scroll_home(animate=False)
        table.focus()


def _as_opened(screen, run_name: str | None, excluding: bool) -> bool:
    """Whether ``screen`` shows what it showed when first opened, but for its tables' cursors and scroll."""
    if not isinstance(screen, LedgerScreen):
        return False
    view = screen.view
    if view is None or view.report.run != run_name or excluding or screen.marked or screen.show_oracle:
        return False
    budgets = sorted({r["budget"] for r in view.report.rows})
    formats = list(dict.fromkeys(r["format"] for r in view.report.rows))
    # The budget and format the Ledger picks when it first loads a run (LedgerScreen.on_loaded).
    return screen.budget == (budgets[-1] if budgets else None) and \
        screen.format == ("linear" if "linear" in formats else (formats[0] if formats else None))


async def _renew(app, mode: str) -> None:
    """Forget ``mode``'s screens (not the current mode): the next switch to it builds its screen anew."""
    await app.remove_mode(mode)
    app.add_mode(mode, WorkbenchApp.MODES[mode])
