"""Shared apps for the TUI modules of group "TUI C": snapshots taken in a running app, and one app for tests that write.

A snapshot through ``snap_compare`` starts a new app for each picture (Textual's ``take_svg_screenshot`` runs the
app it is given), though most of a module's pictures are of one database. ``snap`` takes the picture in the
module's shared app instead (tests/tui_shared_a.py's ``SharedApp``, made fresh at the picture's size), the way
``take_svg_screenshot`` takes it, and compares it with the stored one as ``snap_compare`` does (the same file,
``tests/__snapshots__/<module>/<test>.svg``; a failure is in the snapshot report too). A ``Camera`` takes the
pictures of one state at two sizes by resizing the screen that shows it, where that gives the stored picture.

``Restoring`` is a shared app for tests that write: before each, its database gets the template's content back
(SQLite's backup, as another process's write would arrive), and the app is made fresh as for a test that only
looks, its opening screen reloading what changed.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Iterator

from pytest_textual_snapshot import PseudoApp, PseudoConsole, SVGImageExtension, node_to_report_path
from rich.console import Console

from conftest import copy_db
from tui_shared_a import SharedApp, fresh, running
from tuikit import SIZE, settle, until_loaded
from tuistates import restore
from workbench.tui.messages import DataChanged


async def screenshot(pilot, run_before=None) -> str:
    """The SVG ``take_svg_screenshot`` would give after ``run_before(pilot)``: the same pauses, then the picture."""
    if run_before is not None:
        await run_before(pilot)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    return pilot.app.export_screenshot(title=pilot.app.title, simplify=True)


def snap(snapshot, request, shared: SharedApp, size, run_before=None, state: str | None = None, again=None) -> bool:
    """Whether ``shared``'s picture at ``size`` after ``run_before`` is the stored snapshot of ``request``'s test.

    ``state`` names what ``run_before`` leads to: a ``Camera`` that shows it already (the picture before was of it,
    at another size) is only resized, then ``again(pilot)`` waits for what the new size redraws (by default, the
    screen on top loaded). The picture must be the one a new app at ``size`` takes: the stored one proves it.
    """
    if isinstance(shared, Camera):
        actual = shared.picture(size, run_before, state, again)
    else:
        actual = shared.walk(lambda pilot: screenshot(pilot, run_before), size)
    snapshot = snapshot.use_extension(SVGImageExtension)
    result = snapshot == actual
    # What snap_compare leaves for pytest-textual-snapshot's report (shown when a picture differs).
    index = snapshot.num_executions - 1
    executed = snapshot.executions.get(index)
    exists = index in snapshot.executions and executed is not None and executed.final_data is not None
    console = Console(legacy_windows=False, force_terminal=True)
    path, line, name = request.node.reportinfo()
    data = (result, str(snapshot), actual, PseudoApp(PseudoConsole(console.legacy_windows, console.size)), path, line,
            name, request.node.function.__doc__ or "", "", exists)
    node_to_report_path(request.node).write_bytes(pickle.dumps(data))
    return result


class Camera(SharedApp):
    """A shared app that remembers the state its last picture showed: a picture of that state at another size is
    taken by resizing the screen, not by making the app fresh and walking to it again. Any other walk forgets it."""

    def __init__(self, db: Path, size=SIZE):
        super().__init__(db, size)
        self.state: str | None = None

    def walk(self, fn, size=SIZE):
        self.state = None
        return super().walk(fn, size)

    def picture(self, size, run_before, state: str | None, again=None) -> str:
        """The SVG of ``state`` at ``size`` (see ``snap``)."""
        if state is None or state != self.state:
            svg = self.walk(lambda pilot: screenshot(pilot, run_before), size)
        else:
            async def resized(pilot):
                await pilot.resize_terminal(*size)
                await (again or settle)(pilot)
                return await screenshot(pilot)

            svg = self.driver.run(resized)
        self.state = state
        return svg


def camera(db: Path, size=SIZE) -> Iterator[Camera]:
    """A module fixture's body (``yield from camera(db)``): a ``Camera`` on ``db``, closed after the module."""
    return running(db, size, Camera)


class Restoring(SharedApp):
    """A shared app on a copy of ``template`` at ``db`` for tests that write: ``restore()`` (a function fixture's
    work, before the test reads the database) puts the template's content back; each ``walk`` then shows it."""

    def __init__(self, template: Path, db: Path, size=SIZE):
        self.template = template
        super().__init__(copy_db(template, db), size)

    @property
    def db(self) -> Path:
        return self.app.db_path

    def restore(self) -> Path:
        """The template's content written over the database (as another process's write arrives); its path."""
        restore(self.db, self.template)
        return self.db

    def walk(self, fn, size=SIZE):
        """``await fn(pilot)`` in the app made fresh at ``size``, its opening screen reloaded; its result."""

        async def walk(pilot):
            app = pilot.app
            app._poll()                # the version seen now: the app's timer has nothing left to announce
            await fresh(pilot, size)
            # The opening screen is kept: it reloads what a restore changed, as after any other process's write.
            app.screen.post_message(DataChanged(app._version))
            await until_loaded(pilot)
            return await fn(pilot)

        return self.driver.run(walk)


def restoring(template: Path, db: Path, size=SIZE) -> Iterator[Restoring]:
    """A module fixture's body (``yield from restoring(template, db)``): a ``Restoring`` app, closed after."""
    shared = Restoring(template, db, size)
    try:
        yield shared
    finally:
        shared.close()
