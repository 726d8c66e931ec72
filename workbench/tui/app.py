"""The Workbench app: modes (Datasets, Runs, Ledger, Samples, Retrieval, SearChain, Dedup, Compare, Labels, Meta)
over one SQLite file.

Screens never touch SQL or llama.cpp: they call core functions from thread workers,
each with its own connection, and get results back as messages. A 1 s timer watches
``PRAGMA data_version`` so a run written by the CLI shows up live.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ScreenStackError
from textual.binding import Binding

from workbench.store.queries import list_datasets, opening_run_name, run_names
from workbench.tui.base import WorkbenchAppBase
from workbench.tui.commands import WorkbenchCommands
from workbench.tui.dialogs import ConfirmDialog
from workbench.tui.help import HelpScreen
from workbench.tui.messages import DataChanged
from workbench.tui.screens.compare import CompareScreen
from workbench.tui.screens.datasets import DatasetsScreen
from workbench.tui.screens.dedup import DedupScreen
from workbench.tui.screens.labels import LabelsScreen
from workbench.tui.screens.ledger import LedgerScreen
from workbench.tui.screens.meta import MetaScreen
from workbench.tui.screens.retrieval import RetrievalScreen
from workbench.tui.screens.runs import RunsScreen
from workbench.tui.screens.samples import SamplesScreen
from workbench.tui.screens.searchain import SearChainScreen


class WorkbenchApp(WorkbenchAppBase):
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
        # C, not c: c is a key of Sample detail, Retrieval and the SearChain tree, which would hide this one there.
        Binding("C", "switch_mode('compare')", "Compare"),
        # T (trust the judges), not L: L tags alias-miss in Samples and Sample detail, which would hide this one there.
        Binding("T", "switch_mode('labels')", "Labels"),
        # M (meta-evaluation): m picks a run on the Ledger and Labels and a meta set on Meta itself.
        Binding("M", "switch_mode('meta')", "Meta"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]
    MODES = {"datasets": DatasetsScreen, "runs": RunsScreen, "ledger": LedgerScreen,
             "samples": SamplesScreen, "retrieval": RetrievalScreen,
             "searchain": SearChainScreen, "dedup": DedupScreen, "compare": CompareScreen,
             "labels": LabelsScreen, "meta": MetaScreen}

    def __init__(self, db_path: str | Path | None = None, *, poll_seconds: float = 0.5):
        super().__init__(db_path)
        self.poll_seconds = poll_seconds
        self._poll_timer = None

    def on_mount(self) -> None:
        self.run_name = opening_run_name(self.store)
        # An empty database opens on Datasets, which greets a new user with what to do first.
        self.switch_mode("ledger" if self.run_name else ("runs" if self._has_datasets() else "datasets"))
        self._poll_timer = self.set_interval(self.poll_seconds, self._poll)

    def _has_datasets(self) -> bool:
        return bool(list_datasets(self.store))

    def _poll(self) -> None:
        version = self.store.data_version()
        if version != self._version:
            self._version = version
            try:
                screen = self.screen
            except ScreenStackError:   # quitting: the screens are gone a tick before the timer
                return
            screen.post_message(DataChanged(version))

    async def action_switch_mode(self, mode: str) -> None:
        """Go to ``mode``. Its own key on a screen opened over it (a sample's detail) goes back to the mode's
        screen; on that screen, it says so rather than seem to do nothing."""
        if mode != self.current_mode:
            self.switch_mode(mode)
            return
        if len(self.screen_stack) > 1:
            while len(self.screen_stack) > 1:
                await self.pop_screen()
            return
        title = next((b.description for b in self.BINDINGS if b.action == f"switch_mode('{mode}')"), mode)
        self.notify(f"Already on {title}.", timeout=3)

    def run_names(self) -> list[str]:
        """Every run's name (the command palette offers to open each)."""
        return run_names(self.store)

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
        if self._poll_timer is not None:
            self._poll_timer.stop()     # before the store closes under it
        for stop in self.executions.values():
            stop.set()
        self.store.close()


def run_tui(db_path: str | Path | None = None) -> None:
    """Start the TUI on ``db_path`` (default: ``$WORKBENCH_DB`` or the per-user database)."""
    WorkbenchApp(db_path).run()
