"""What every screen builds on: the app as screens see it, and the screen base class.

Screens import this module, never ``workbench.tui.app``: the app imports every screen (its
modes), so a screen importing the app would close a cycle. ``WorkbenchAppBase`` holds the
state the screens share (the selection, the runs executing here, the database) and the
calls they make on the app; ``WorkbenchApp`` adds the modes, the keys, the database watch
and quitting.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from rich.segment import Segment
from textual import work
from textual.app import App
from textual.color import Color
from textual.filter import LineFilter
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from workbench.store import Store, open_store
from workbench.terminal import has_control, pictured
from workbench.tui.dialogs import ErrorDialog
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.says import NOTHING_TO_FOCUS, CopyOrSay


class ControlPictures(LineFilter):
    """Draws each control character in a line as a visible picture (␛ for ESC), never sending it.

    Names, questions and model answers come from files and models: an ESC in one would
    otherwise reach the terminal raw and be obeyed (retitle the window, clear the screen).
    Applied to every line of every widget, so no screen can forget it; Textual's own
    cursor and style sequences are control segments and pass untouched.
    """

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [seg if seg.control or not has_control(seg.text) else Segment(pictured(seg.text), seg.style)
                for seg in segments]


_CONTROL_PICTURES = ControlPictures()


class WorkbenchAppBase(App):
    """The app's state and calls that screens use: ``self.app`` of a ``WorkbenchScreen`` is one of these."""

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then :class:`ControlPictures`."""
        return [*super().get_line_filters(), _CONTROL_PICTURES]

    def __init__(self, db_path: str | Path | None = None):
        super().__init__()
        self.store: Store = open_store(db_path)
        self.db_path = self.store.path
        # The database's data_version when last looked at (the app's timer compares it).
        self._version = self.store.data_version()
        # Selection shared by the screens.
        self.run_name: str | None = None
        self.cell_id: str | None = None
        self.exclude_tagged = False
        # Datasets → enter: the Runs list shows only this dataset's runs (None: all).
        self.dataset_filter: str | None = None
        # Runs executing inside this app: name -> stop event (pause = set it).
        self.executions: dict[str, threading.Event] = {}
        # Set once a quit is confirmed: runs stop after the job in progress, then the app exits.
        self.quitting = False
        # Every exception a worker raised, in order: the dialog shows each; tests fail on a bug among them.
        self.worker_errors: list[BaseException] = []

    def open_store(self) -> Store:
        """A new connection for a worker thread (SQLite connections stay on one thread)."""
        return open_store(self.db_path)

    def open_run(self, name: str) -> None:
        """Select a run and show its ledger."""
        self.run_name, self.cell_id = name, None
        self.switch_mode("ledger")
        self.screen.post_message(DataChanged(self._version))

    def action_focus_next(self) -> None:
        self._focus_or_say(self.screen.focus_next)

    def action_focus_previous(self) -> None:
        self._focus_or_say(self.screen.focus_previous)

    def _focus_or_say(self, move: Callable[[], object]) -> None:
        """tab / shift+tab: the next pane, or, with one pane only, a word that there is no other."""
        before = self.focused
        move()
        if self.focused is before:
            self.notify(NOTHING_TO_FOCUS, timeout=3)

    def show_error(self, title: str, error: BaseException | str | None) -> None:
        """An error dialog; the app keeps running."""
        text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
        self.push_screen(ErrorDialog(title, text))


class WorkbenchScreen(CopyOrSay, Screen):
    """Base screen: loads data in thread workers and shows worker failures in a dialog.

    ``loaded`` is True once the screen is shown and every result its workers owe has been
    applied: what a test (or a screenshot) waits on instead of a guessed delay.
    """

    if TYPE_CHECKING:
        @property
        def app(self) -> WorkbenchAppBase: ...

    _mounted = False
    _shown = False

    @property
    def loaded(self) -> bool:
        """Shown, and no load in flight or queued: the widgets hold the latest results."""
        awaited = self.__dict__.get("_awaited", {})
        return self._mounted and self._shown and not any(awaited.values())

    def load(self, what: str, fn: Callable[..., Any], *args, **kwargs) -> None:
        """Run ``fn(store, *args)`` in a thread with a fresh connection; post ``Loaded(what, result)``.

        One load per ``what`` at a time: a request while one runs is remembered and run
        once after it (threads cannot be cancelled, and duplicate ledger computations on
        2 cores would only slow each other down).
        """
        pending = self.__dict__.setdefault("_pending_loads", {})
        awaited = self.__dict__.setdefault("_awaited", {})
        if what in pending:
            if pending[what] is None:  # a second result is now owed (a replaced request owes none)
                awaited[what] = awaited.get(what, 0) + 1
            pending[what] = (fn, args, kwargs)
            return
        awaited[what] = awaited.get(what, 0) + 1
        pending[what] = None
        self._load(what, fn, args, kwargs)

    @work(thread=True, exit_on_error=False, exclusive=False, group="load")
    def _load(self, what: str, fn, args, kwargs) -> None:
        store = self.app.open_store()
        delivered = False
        try:
            result = fn(store, *args, **kwargs)
            delivered = True
        finally:
            store.close()
            self.app.call_from_thread(self._load_done, what, delivered)
        self.post_message(Loaded(what, result))

    def _load_done(self, what: str, delivered: bool) -> None:
        pending = self.__dict__.get("_pending_loads", {})
        again = pending.pop(what, None)
        if not delivered:  # a failed load posts nothing: its result is no longer awaited
            self._applied(what)
        if again is not None:  # already counted in ``_awaited`` when it was queued
            pending[what] = None
            self._load(what, *again)

    def _applied(self, what: str) -> None:
        awaited = self.__dict__.get("_awaited", {})
        awaited[what] = max(0, awaited.get(what, 0) - 1)

    # Textual calls these after the subclass's own handlers (it walks the MRO): by then a
    # subclass has started whatever follow-up load its handler asked for.
    def on_loaded(self, message: Loaded) -> None:
        self._applied(message.what)

    def on_mount(self) -> None:
        self._mounted = True

    def on_screen_resume(self) -> None:
        self._shown = True

    def on_screen_suspend(self) -> None:
        # Coming back, the screen reloads: until then what it holds may be stale.
        self._shown = False

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.worker_errors.append(event.worker.error)
            self.app.show_error("A background task failed", event.worker.error)

    def on_data_changed(self, message: DataChanged) -> None:
        """Override to refresh when another connection wrote to the database."""
