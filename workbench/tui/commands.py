"""The command palette (ctrl+p): every workbench command, listed even before anything is typed."""

from __future__ import annotations

from functools import partial
from typing import Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider


def _on_runs(app, action: str) -> Callable[[], None]:
    """A Runs-screen action (new, pause, resume) run from anywhere: switch to Runs, then act on its selection."""

    def run() -> None:
        if action == "pause" and not app.executions:
            app.notify("No run is executing in this app: nothing to pause.")
            return
        app.switch_mode("runs")
        app.call_after_refresh(lambda: getattr(app.screen, f"action_{action}")())

    return run


def _import_dataset(app) -> None:
    app.switch_mode("datasets")
    app.call_after_refresh(lambda: app.screen.action_import())


def workbench_commands(app) -> list[tuple[str, Callable[[], None], str]]:
    """(text, callback, help) of every palette command, in the order an empty palette lists them."""
    names = {b.action.split("'")[1]: b.description for b in app.BINDINGS if b.action.startswith("switch_mode(")}
    commands = [
        ("New run", _on_runs(app, "new"), "open the new-run form (Runs: n)"),
        ("Pause run", _on_runs(app, "pause"), "pause the run selected on Runs (p)"),
        ("Resume run", _on_runs(app, "resume"), "resume the run selected on Runs (u)"),
        ("Import dataset", partial(_import_dataset, app), "import a directory of JSONL files (Datasets: i)"),
    ]
    for mode in app.MODES:
        title = names.get(mode, mode.title())
        key = next((b.key for b in app.BINDINGS if b.action == f"switch_mode('{mode}')"), "")
        commands.append((f"Go to {title}", partial(app.switch_mode, mode), f"the {title} screen ({key})"))
    commands.append(("Help: keys", app.action_help, "every key of every screen (?)"))
    for run in app.run_names():
        commands.append((f"Open ledger of run {run}", partial(app.open_run, run), "select the run, show its ledger"))
    return commands


class WorkbenchCommands(Provider):
    """Palette entries: new/pause/resume a run, import, go to a screen, open a run's ledger, help."""

    async def discover(self) -> Hits:
        for text, callback, help_text in workbench_commands(self.app):
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in workbench_commands(self.app):
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text)
