"""Walking the running TUI key by key, as the key contract does (tests/test_tui_key_contract.py).

Every key the walk presses must act or say why: after it, the screen shows something else, a screen
was opened or left, a notification (one line) was posted, or the app exited; a worker that raised
a bug, or an exception in the app, fails the walk at once. The keys are read from the bindings, so a
binding added tomorrow is walked without a change here:

- on every screen the walk reaches, each key of the screen's bindings and of its bases' (tab,
  shift+tab, ctrl+c and super+c come from Textual's Screen), shown in the footer or not; a walk with
  ``every=False`` presses the keys the workbench's screens bind, and checks that the screen has the
  inherited keys' answers (CopyOrSay) rather than pressing them again;
- the app's keys: a mode key is pressed when the walk goes to that mode and on every screen of that
  mode (where it has nothing to switch to); on the other screens the walk checks that the key
  reaches the app's binding (no screen or widget swallows it). The other app keys (?, q, ctrl+q,
  ctrl+p) do the same from every screen: pressed once a walk, checked to reach the app elsewhere.

A key that opens a screen the walk has not walked yet is followed: that screen is walked, then left
(the dialogs and the help once a test session: they show what they are given). A key that moves the
focus is pressed once more from there (enter on Compare's cells focuses the flips; enter again opens
one). After each key the walk puts back where it stood: the mode, the screens open, the app's
selection (run, cell, exclusion, dataset filter) and a run it paused. What a key changes inside a
screen (a filter, a budget, a page) or writes (a tag, a label) stays, so the keys after it act in the
view it left: the walk also visits the states keys lead to (an empty quadrant, the last page).

What a key says is recorded rather than shown (q's exit too), and the screen is drawn only when the
walk looks at it: a toast per key and a frame per update for a terminal that is not there would cost
more than the keys.
"""

from __future__ import annotations

import asyncio
import unicodedata
from dataclasses import dataclass, field

from textual import events
from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key
from textual.screen import ModalScreen, Screen
from textual.worker import WorkerState

from tuikit import EXPECTED_ERRORS, PATIENCE
from workbench.tui.says import CopyOrSay

# Workers that do not end while the state holds (the run the "run in progress" state keeps executing).
BACKGROUND_GROUPS = ("execute",)


async def press(pilot, key: str) -> None:
    """Send ``key`` as the terminal would, without Pilot.press's waits for an idle CPU (settle waits instead)."""
    app = pilot.app
    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    try:
        char = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
    except KeyError:
        char = key if len(key) == 1 else None
    event = events.Key(key, char)
    event.set_sender(app)
    app._driver.send_message(event)


def draw_only_when_looked_at(monkeypatch) -> None:
    """The headless app draws each update for a terminal that is not there: drawn only when the walk takes
    a picture, the walk costs half as much (what the screen holds, its layout and styles, is kept up to date)."""
    refresh = Screen._compositor_refresh

    def compositor_refresh(screen) -> None:
        if screen is not screen.app.screen:
            refresh(screen)
            return
        screen._compositor._dirty_regions.clear()
        screen._dirty_widgets.clear()

    monkeypatch.setattr(Screen, "_compositor_refresh", compositor_refresh)


def picture(app) -> tuple:
    """What the screen on top shows: every cell's character and style (a cursor moved is a change)."""
    return tuple(tuple((seg.text, seg.style) for seg in strip) for strip in app.screen._compositor.render_strips())


def background_workers(app) -> frozenset:
    """The workers that go on while the state holds (the run the "run in progress" state keeps executing)."""
    return frozenset(w for w in app.workers if w.group in BACKGROUND_GROUPS and not w.is_finished)


def busy(app, background: frozenset = frozenset()) -> bool:
    """A load is in flight, or the screen on top still owes results (``WorkbenchScreen.loaded``)."""
    if not getattr(app.screen, "loaded", True):
        return True
    return any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) and w not in background for w in app.workers)


def quiet(app) -> bool:
    """No message waits in the app's queue or in any of the screen's widgets'."""
    return app._message_queue.empty() and all(w._message_queue.empty() for w in app.screen.walk_children(with_self=True))


def drawn(app) -> bool:
    """The screen on top has no layout, repaint, recompose or after-refresh callback pending."""
    screen = app.screen
    return not (screen._layout_required or screen._repaint_required or screen._recompose_required
                or screen._scroll_required or screen._dirty_widgets or screen._callbacks)


async def settle(pilot, background: frozenset = frozenset(), timeout: float = PATIENCE,
                 look: bool = False) -> tuple | None:
    """Wait until no load is in flight and the screen is drawn, twice in a row; with ``look``, return its picture.

    Twice: the last callbacks may post messages that schedule more. A picture only when asked for
    (the key walk's before and after): drawing the whole screen costs more than anything else the
    walk does, and the room and cursor contracts read the widgets, not the picture.
    """
    app = pilot.app
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for _ in range(3):
            await asyncio.sleep(0)
        if busy(app, background):
            await asyncio.sleep(0.002)   # the workers' threads need the GIL
            continue
        app.screen._on_timer_update()    # what the screen's update timer would do next: lay out, repaint
        if not (quiet(app) and drawn(app)):
            continue
        await pilot.pause(0)             # every widget has handled what was posted to it
        if quiet(app) and drawn(app) and not busy(app, background):
            return picture(app) if look else None
    running = [f"{w.group}/{w.name}" for w in app.workers if not w.is_finished and w not in background]
    raise AssertionError(f"{type(app.screen).__name__} did not settle in {timeout:.0f} s (loaded: "
                         f"{getattr(app.screen, 'loaded', None)}, drawn: {drawn(app)}, workers: {running})")


@dataclass(frozen=True)
class Key:
    """One key of one binding: who binds it (a class name), the key and the action it names."""

    owner: str
    key: str
    action: str
    ours: bool = True   # bound by a workbench class (not inherited from Textual's Screen or App)

    def __str__(self) -> str:
        return f"{self.key} ({self.action})"


def bindings_of(cls) -> list[Key]:
    """The keys ``cls`` and its bases bind, base classes first (a key bound twice: the subclass's)."""
    keys: dict[str, Key] = {}
    for klass in reversed(cls.__mro__):
        for binding in klass.__dict__.get("BINDINGS", ()):
            key, action = (binding.key, binding.action) if hasattr(binding, "key") else binding[:2]
            for one in key.split(","):
                keys[one.strip()] = Key(klass.__name__, one.strip(), action, klass.__module__.startswith("workbench."))
    return list(keys.values())


def app_keys(app) -> list[Key]:
    """The app's keys: its bindings, Textual's App's, and the command palette's (shown in the footer)."""
    keys = bindings_of(type(app))
    if app.ENABLE_COMMAND_PALETTE:
        keys.append(Key("App", app.COMMAND_PALETTE_BINDING, "command_palette", False))
    return keys


def mode_of_key(app) -> dict[str, str]:
    """The app's mode keys: key → mode."""
    return {k.key: k.action.split("'")[1] for k in bindings_of(type(app)) if k.action.startswith("switch_mode(")}


def resolves_to_app(app, key: str) -> bool:
    """Whether ``key`` pressed now runs the app's own binding (not a screen's or a focused widget's)."""
    active = app.screen.active_bindings.get(key)
    return active is not None and active.node is app


def is_ours(screen: Screen) -> bool:
    """A screen of the workbench (Textual's own, such as the command palette, are pressed into, not walked)."""
    return type(screen).__module__.startswith("workbench.")


# The dialogs and the help show what they are given, whatever the data and the size: each is walked once a
# test session (the first time a key opens it), not once per state and size.
GENERIC_MODULES = ("workbench.tui.dialogs", "workbench.tui.help")
GENERIC_WALKED: set = set()


def generic(screen: Screen) -> bool:
    return type(screen).__module__ in GENERIC_MODULES


CLOSING = ("pop_screen", "dismiss", "cancel", "back", "quit")


def closes(key: Key) -> bool:
    """Whether the key's action closes the screen (or the app): pressed last."""
    return any(word in key.action for word in CLOSING)


@dataclass
class Place:
    """Where the walk stands: restored after every key."""

    mode: str
    stack: list
    selection: tuple
    paused: dict


@dataclass
class KeyWalk:
    """One app's walk at its current size; ``findings`` lists every key that broke the contract."""

    pilot: object
    label: str
    findings: list[str] = field(default_factory=list)
    pressed: int = 0
    walked: set = field(default_factory=set)
    background: frozenset = frozenset()
    app_keys_pressed: set = field(default_factory=set)
    shown: tuple | None = None
    every: bool = True      # every key, Textual's and the app's too; False: the keys the workbench's screens bind

    @property
    def app(self):
        return self.pilot.app

    async def start(self) -> None:
        """Stub the app's exit (q must not end the walk) and remember the workers that run throughout."""
        app = self.app
        self.exits: list = []
        app.exit = lambda *args, **kwargs: self.exits.append(args)
        # What a key says is kept here, not shown: a toast on screen for each would cost more than the key.
        self.said: list[str] = []
        app.notify = lambda message, *args, **kwargs: self.said.append(str(message))
        self.background = background_workers(app)
        await self.wait()

    async def walk_modes(self, modes=None) -> None:
        """Go to each mode (of ``modes``, default all) by its key and walk its screen and what its keys open."""
        app = self.app
        for key, mode in mode_of_key(app).items():
            if modes is not None and mode not in modes:
                continue
            while len(app.screen_stack) > 1:
                await app.pop_screen()
                self.shown = None
            if app.current_mode != mode:    # the screen the app opened on is walked where it stands
                await self._press_and_check(Key(type(app).__name__, key, f"switch_mode('{mode}')"), app.current_mode,
                                            switches=True)
            assert app.current_mode == mode, f"{key} did not switch to {mode}"
            await self.walk_screen()

    async def settle(self) -> tuple:
        """The screen settled; its picture is kept until the walk does something (``shown = None``)."""
        if self.shown is None:
            self.shown = await settle(self.pilot, self.background, look=True)
        return self.shown

    async def wait(self) -> None:
        """The screen settled, no picture taken: one is taken when a key needs it (``settle``)."""
        if self.shown is None:
            await settle(self.pilot, self.background)

    def where(self) -> str:
        return f"{self.label} · {type(self.app.screen).__name__} ({self.app.current_mode})"

    def keys_here(self) -> list[Key]:
        """The keys to press on the screen on top (see the module's docstring)."""
        app, screen = self.app, self.app.screen
        keys = bindings_of(type(screen))
        if isinstance(screen, ModalScreen):
            return keys if self.every else [k for k in keys if k.ours]  # the app's keys do not reach past it
        own = {k.key for k in keys}
        modes = mode_of_key(app)
        if not self.every:
            self._inherited_keys_say_why(screen)
            keys = [k for k in keys if k.ours]
        for k in app_keys(app):
            if k.key in own:
                continue
            # A mode key does the same from every other screen, and so do ?, q and ctrl+q: pressed once a walk
            # (the walk goes to each mode by its key); elsewhere it must reach the app. Its own mode's key
            # may have nothing to switch to: pressed on every screen of that mode.
            pressed_here = self.every and modes.get(k.key, app.current_mode) == app.current_mode \
                and k.key not in self.app_keys_pressed
            if not pressed_here:
                if not resolves_to_app(app, k.key):
                    self.findings.append(f"{self.where()}: {k} does not reach the app: "
                                         f"{app.screen.active_bindings.get(k.key)}")
                continue
            if k.key not in modes:
                self.app_keys_pressed.add(k.key)
            keys.append(k)
        return keys

    def _inherited_keys_say_why(self, screen) -> None:
        """Textual's keys not pressed here act or say why by construction: copy through ``CopyOrSay``, tab
        through the app's focus actions (checked where they were pressed); the screen must have them."""
        if not isinstance(screen, CopyOrSay):
            self.findings.append(f"{self.where()}: ctrl+c/super+c (screen.copy_text) would say nothing: "
                                 f"{type(screen).__name__} does not inherit CopyOrSay")

    async def walk_screen(self, reopen=None) -> None:
        """Press every key of the screen on top, following what opens, putting the place back after each.

        ``reopen`` opens this screen again (from the screen below, by the key that opened it) when one
        of its keys closed it: Esc on a dialog, enter on a form.
        """
        app = self.app
        self.walked.add(type(app.screen))
        if generic(app.screen):
            GENERIC_WALKED.add(type(app.screen))
        place = self._place()
        walked = type(app.screen)
        keys = sorted(self.keys_here(), key=closes)     # the keys that close the screen last: fewer reopenings
        for i, key in enumerate(keys):
            if place.stack[-1] not in app.screen_stack:
                assert reopen is not None, f"{self.where()}: {type(place.stack[-1]).__name__} closed"
                place = await reopen()
                if type(app.screen) is not walked:
                    self.findings.append(f"{self.where()}: could not open {walked.__name__} again to press {key}")
                    return
            await self._press_and_check(key, place.mode)
            presses = 1
            moved = app.focused is not None and app.focused is not place.selection[-1] and app.screen is place.stack[-1]
            if moved and "focus_" not in key.action:
                await self._press_and_check(key, place.mode)      # a focus move: the same key from there
                presses = 2
            top = app.screen
            if top not in place.stack and is_ours(top) and type(top) not in self.walked | GENERIC_WALKED:
                await self.walk_screen(self._reopener(place, key, presses))
            if i < len(keys) - 1:      # after the last key, whoever called puts its own place back
                await self._restore(place)

    def _reopener(self, place: Place, key: Key, presses: int):
        """Open again what ``key`` opened from ``place`` (pressed twice when its first press moved the focus)."""
        async def reopen() -> Place:
            await self._restore(place)
            for _ in range(presses):
                await press(self.pilot, key.key)
                self.shown = None
                await self.wait()
            return self._place()

        return reopen

    def _place(self) -> Place:
        app = self.app
        return Place(app.current_mode, list(app.screen_stack),
                     (app.run_name, app.cell_id, app.exclude_tagged, app.dataset_filter, app.focused),
                     {name: stop.is_set() for name, stop in app.executions.items()})

    async def _press_and_check(self, key: Key, mode: str, switches: bool = False) -> None:
        """Press ``key`` and check that it acted or said why. ``switches``: the key goes to another mode, which
        is seen without a picture before it (were it not to switch, the walk fails on the mode it stands in)."""
        app = self.app
        self.said.clear()
        before = None if switches else await self.settle()
        screens, modes, exits, errors = list(app.screen_stack), app.current_mode, len(self.exits), len(app.worker_errors)
        self.shown = None
        await press(self.pilot, key.key)
        self.pressed += 1
        if app._exception is not None:
            raise AssertionError(f"{self.where()}: {key} raised {app._exception!r}") from app._exception
        await self.wait()
        bugs = [e for e in app.worker_errors[errors:] if not isinstance(e, EXPECTED_ERRORS)]
        if bugs:
            self.findings.append(f"{self.where()}: {key} raised {type(bugs[0]).__name__}: {bugs[0]}")
        said = list(self.said)
        if any("\n" in s for s in said):
            self.findings.append(f"{self.where()}: {key} said more than one line: {said!r}")
        # What is seen without a picture first: the picture after the key is taken only when none of it holds
        # (a key that opened a screen or switched modes is put back next: a picture of it would go unused).
        acted = (said or len(self.exits) > exits or app.current_mode != modes or list(app.screen_stack) != screens
                 or (before is not None and await self.settle() != before))
        if not acted:
            self.findings.append(f"{self.where()}: {key} changed nothing and said nothing")

    async def _restore(self, place: Place) -> None:
        app = self.app
        if app.current_mode != place.mode:
            while len(app.screen_stack) > 1:
                await app.pop_screen()
            self._select(place)
            await app.switch_mode(place.mode)
            self.shown = None
        while len(app.screen_stack) > len(place.stack) or (
                app.screen not in place.stack and len(app.screen_stack) > 1):
            await app.pop_screen()
            self.shown = None
        self._select(place)
        for name, stop in app.executions.items():
            if name in place.paused and not place.paused[name] and stop.is_set():
                stop.clear()        # p paused it: the run goes on (the job in progress waits on the gate)
                self.shown = None
        await self.wait()
        focus = place.selection[-1]
        if focus is not None and app.screen is place.stack[-1] and app.focused is not focus:
            focus.focus()
            self.shown = None
        await self.wait()      # the picture for the next key is taken as it is pressed
        closed = place.stack[-1] not in app.screen_stack     # a key of the screen closed it: walk_screen reopens it
        assert closed or app.screen is place.stack[-1], f"{self.where()}: the walk could not go back to {place.stack[-1]}"

    def _select(self, place: Place) -> None:
        app = self.app
        if (app.run_name, app.cell_id, app.exclude_tagged, app.dataset_filter) != place.selection[:4]:
            app.run_name, app.cell_id, app.exclude_tagged, app.dataset_filter = place.selection[:4]
            self.shown = None
