"""The Workbench app: modes (Datasets, Runs, Ledger, Samples, Retrieval, SearChain, Dedup) over one SQLite file.

Screens never touch SQL or llama.cpp: they call core functions from thread workers,
each with its own connection, and get results back as messages. A 1 s timer watches
``PRAGMA data_version`` so a run written by the CLI shows up live.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from workbench.store import open_store
from workbench.tui.commands import WorkbenchCommands
from workbench.tui.dialogs import ConfirmDialog, ErrorDialog, HelpScreen
from workbench.tui.messages import DataChanged, Loaded


class WorkbenchScreen(Screen):
    """Base screen: loads data in thread workers and shows worker failures in a dialog.

    ``loaded`` is True once the screen is shown and every result its workers owe has been
    applied: what a test (or a screenshot) waits on instead of a guessed delay.
    """

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
            self.app.show_error("A background task failed", event.worker.error)

    def on_data_changed(self, message: DataChanged) -> None:
        """Override to refresh when another connection wrote to the database."""


class WorkbenchApp(App):
    """Keyboard-first triage of dissipation ledgers."""

    TITLE = "Dissipation Workbench"
    # In the header, so every screen names the way to every key however narrow its footer is.
    SUB_TITLE = "? keys · ctrl+p commands · q quit"
    CSS_PATH = "workbench.tcss"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    BINDINGS = [
        Binding("d", "switch_mode('datasets')", "Datasets"),
        Binding("r", "switch_mode('runs')", "Runs"),
        Binding("l", "switch_mode('ledger')", "Ledger"),
        Binding("s", "switch_mode('samples')", "Samples"),
        Binding("v", "switch_mode('retrieval')", "Retrieval"),
        Binding("h", "switch_mode('searchain')", "SearChain"),
        Binding("D", "switch_mode('dedup')", "Dedup"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, db_path: str | Path | None = None, *, poll_seconds: float = 1.0):
        from workbench.tui.screens.datasets import DatasetsScreen
        from workbench.tui.screens.dedup import DedupScreen
        from workbench.tui.screens.ledger import LedgerScreen
        from workbench.tui.screens.runs import RunsScreen
        from workbench.tui.screens.retrieval import RetrievalScreen
        from workbench.tui.screens.samples import SamplesScreen
        from workbench.tui.screens.searchain import SearChainScreen

        self.MODES = {"datasets": DatasetsScreen, "runs": RunsScreen, "ledger": LedgerScreen,
                      "samples": SamplesScreen, "retrieval": RetrievalScreen,
                      "searchain": SearChainScreen, "dedup": DedupScreen}
        super().__init__()
        self.store = open_store(db_path)
        self.db_path = self.store.path
        self.poll_seconds = poll_seconds
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

    def open_store(self):
        """A new connection for a worker thread (SQLite connections stay on one thread)."""
        return open_store(self.db_path)

    def on_mount(self) -> None:
        from workbench.store.queries import latest_run_name

        self.run_name = latest_run_name(self.store)
        # An empty database opens on Datasets, which greets a new user with what to do first.
        self.switch_mode("ledger" if self.run_name else ("runs" if self._has_datasets() else "datasets"))
        self.set_interval(self.poll_seconds, self._poll)

    def _has_datasets(self) -> bool:
        from workbench.store.queries import list_datasets

        return bool(list_datasets(self.store))

    def _poll(self) -> None:
        version = self.store.data_version()
        if version != self._version:
            self._version = version
            self.screen.post_message(DataChanged(version))

    def run_names(self) -> list[str]:
        from workbench.store.queries import run_names

        return run_names(self.store)

    def open_run(self, name: str) -> None:
        """Select a run and show its ledger."""
        self.run_name, self.cell_id = name, None
        self.switch_mode("ledger")
        self.screen.post_message(DataChanged(self._version))

    def show_error(self, title: str, error: BaseException | str | None) -> None:
        """An error dialog; the app keeps running."""
        text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
        self.push_screen(ErrorDialog(title, text))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Quit at once; with runs executing here, ask, stop them after the job in progress, then quit."""
        if not self.executions:
            self.exit()
            return
        if self.quitting:
            self.notify("Still stopping: quitting when the job in progress is done.")
            return
        if isinstance(self.screen, ConfirmDialog):
            return
        names = sorted(self.executions)
        resume = " / ".join(f"`workbench resume {n}`" for n in names)
        self.push_screen(ConfirmDialog(
            f"Quit while {', '.join(names)} {'is' if len(names) == 1 else 'are'} executing? It stops after the job "
            f"in progress and keeps every finished job; resume it later with u in Runs or {resume}."),
            self._quit_confirmed)

    def _quit_confirmed(self, yes: bool | None) -> None:
        if not yes:
            return
        if not self.executions:     # the runs ended while the question was up: nothing to stop
            self.exit()
            return
        self.quitting = True
        for stop in self.executions.values():
            stop.set()
        self.notify(f"Stopping {', '.join(sorted(self.executions))} after the job in progress, then quitting …",
                    title="Quitting", timeout=60)
        # Waiting here would freeze the screen: check the run workers from a timer instead.
        self._quit_timer = self.set_interval(0.1, self._exit_when_stopped)

    def _exit_when_stopped(self) -> None:
        running = [w for w in self.workers if w.group == "execute" and not w.is_finished]
        if not self.executions and not running:
            self._quit_timer.stop()
            self.exit()

    def on_unmount(self) -> None:
        for stop in self.executions.values():
            stop.set()
        self.store.close()


def run_tui(db_path: str | Path | None = None) -> None:
    """Start the TUI on ``db_path`` (default: ``$WORKBENCH_DB`` or the per-user database)."""
    WorkbenchApp(db_path).run()
