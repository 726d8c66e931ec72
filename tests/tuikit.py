"""Helpers for driving the real app with Textual's Pilot (shared by every TUI test module)."""

from __future__ import annotations

import asyncio

SIZE = (120, 40)
SMALL = (80, 24)


async def wait_for(pilot, condition, timeout=60.0, step=0.1):
    """Let the app work until ``condition()`` holds (workers run in threads)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        await pilot.pause(step)
        if condition():
            return
    raise AssertionError("condition not reached in time")


async def type_text(pilot, text):
    """Type ``text`` key by key, as a user would."""
    for ch in text:
        await pilot.press(ch if ch != " " else "space")


def heading(app) -> str:
    """The rendered text of the current screen's ``#heading``."""
    return str(app.screen.query_one("#heading").render())


def screen_text(app) -> str:
    """Everything the current screen shows, as plain text (for asserting what a user reads)."""
    return "\n".join(str(w.render()) for w in app.screen.query("Static, Label"))


def snap_app(db):
    """The app for a snapshot: no live polling, so the picture cannot change under the camera."""
    from workbench.tui.app import WorkbenchApp

    return WorkbenchApp(db, poll_seconds=3600)


async def settle(pilot):
    """Wait for the data and, on the ledger, for the full bootstrap (not the quick first pass)."""
    await pilot.pause(0.5)
    screen = pilot.app.screen

    def ready():
        view = getattr(screen, "view", None)
        return not hasattr(screen, "view") or (view is not None and view.report.resamples == screen.resamples)

    await wait_for(pilot, ready, timeout=30)
    await pilot.pause(0.3)


def footer_line(app) -> str:
    """The footer as the terminal shows it: each key and label drawn where it sits, cut off where the
    screen (or the command palette's hint, docked on the right) begins to hide it."""
    footer = app.screen.query_one("Footer")
    palette = [w.region.x for w in footer.query("FooterKey.-command-palette")]
    end = min(palette + [app.size.width])
    line = [" "] * app.size.width
    for w in footer.query("FooterKey, FooterLabel"):
        if w.has_class("-command-palette") or not w.region.width:
            continue
        for i, ch in enumerate(str(w.render())):
            if w.region.x + i < end:
                line[w.region.x + i] = ch
    return "".join(line[:end])
