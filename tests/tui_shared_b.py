"""What the TUI tests of group "TUI B" share: typing into a field as fast as the app handles each key.

Textual's ``Pilot.press`` waits, after every key, for the whole process to look idle twice (at least
two 20 ms sleeps a key, and up to a second each while a worker thread or another process keeps the CPU
busy): typing a path of 70 characters cost seconds. ``typed`` sends each key as the terminal would
(tests/tuiwalk.py's ``press``) and waits for what it is for, the field holding one character more, so
each key is handled before the next is sent, in the order a user types them.
"""

from __future__ import annotations

import asyncio

from tuikit import PATIENCE, palette_highlights, wait_for
from tuiwalk import press


async def typed(pilot, text: str, within: float = PATIENCE) -> None:
    """Type ``text`` into the focused field key by key, each key handled (the field's value grown) within
    ``within`` seconds, or the test fails saying which key took how long."""
    app = pilot.app
    loop = asyncio.get_running_loop()
    # The field the keys go to: focused on the screen on top (a prompt just opened focuses its field on mount).
    await wait_for(pilot, lambda: app.focused is not None and app.focused.screen is app.screen
                   and hasattr(app.focused, "value"), what="a field focused on the screen on top")
    for ch in text:
        field = app.focused
        before = field.value
        began = loop.time()
        await press(pilot, "space" if ch == " " else ch)
        await wait_for(pilot, lambda: field.value != before, timeout=max(within, PATIENCE),
                       what=f"the key {ch!r} typed into #{field.id}")
        took = loop.time() - began
        assert took < within, f"the key {ch!r} took {took:.1f} s: the UI thread waited on something"


async def import_prompt(pilot):
    """i on Datasets: the import prompt open, its field focused (what ``typed`` types into); the prompt."""
    from workbench.tui.dialogs import PromptDialog

    app = pilot.app
    await pilot.press("i")
    await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog) and app.focused is not None
                   and app.focused.screen is app.screen, what="the import prompt, its field focused")
    return app.screen


async def from_palette(pilot, command: str) -> None:
    """ctrl+p, ``command`` typed (``typed``), enter once the palette highlights it (tests/tuikit.py's
    ``run_from_palette``, typed as fast as the palette handles each key)."""
    from textual.command import CommandPalette

    app = pilot.app
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette) and app.focused is not None
                   and app.focused.screen is app.screen, what="the command palette, its field focused")
    await typed(pilot, command)
    await wait_for(pilot, lambda: palette_highlights(app, command), what=f"{command!r} highlighted")
    await pilot.press("enter")
