"""Runs: every run with live progress; start one from a form, pause, resume, delete."""

from __future__ import annotations

import threading
import time

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, ProgressBar, Static

from workbench.errors import BadInput, EnvironmentFault
from workbench.models.registry import ExecOptions
from workbench.models.slot import ModelSlotStopped
from workbench.progress import pace
from workbench.runs.executor import ExecReport, execute, generations_of
from workbench.runs.sequential import sequential_status, stopped_lines, summary_line
from workbench.runs.sweep import plan_sweep
from workbench.store.lease import HOST, Holder, LeaseHeld, live_holders
from workbench.store.lookup import NotFound
from workbench.store.queries import delete_run, get_run, list_datasets, list_runs
from workbench.tui.base import WorkbenchScreen
from workbench.tui.dialogs import ConfirmDialog
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded, RunFinished, RunProgress
from workbench.tui.screens.run_form import (FormError, RunForm, configs_from_form, form_error, run_models,
                                             sequential_from_form)
from workbench.tui.widgets import KeyFooter, hanging_lines, welcome

NO_RUN = """\
[b]No run yet.[/b] Press [b]n[/b] to start one on {datasets}: the form shows how many
jobs it will run, and with which model, before anything starts.

[b]?[/b] lists every key · [b]ctrl+p[/b] the command palette · [b]q[/b] quits"""


def _runs(store):
    runs = list_runs(store)
    # The dataset names only matter for the greeting shown while there is no run.
    return {"runs": runs, "datasets": [] if runs else [d["name"] for d in list_datasets(store)],
            "writers": live_holders(store, "run")}


# A live sequential run's standing is rebuilt from its events at most this often (seconds).
SEQUENTIAL_EVERY = 1.0
#: The stopped cells a sequential run's box lists (each with the interval it was settled on), the rest counted.
RUNS_STOPPED_LINES = 6


def _sequential(store, name: str) -> tuple[str, list[str] | None]:
    """A sequential run's standing: where it is (or when it was decided and what), its calls used and saved, and
    which cells stopped and why, a line each (folded when shown). None for a run that answers every job (or no
    longer exists)."""
    try:
        status = sequential_status(store, get_run(store, name))
    except NotFound:
        return name, None
    if status is None:
        return name, None
    return name, [summary_line(status), *stopped_lines(status, most=RUNS_STOPPED_LINES)]


def run_state(run: dict, executing_here: bool, writer: Holder | None) -> str:
    """The Runs table's state: running here, being written by another process (``pid N``), done, decided (a
    sequential run that stopped asking: its other jobs skipped), a sweep, or paused."""
    if executing_here:
        return "running"
    if writer is not None:      # another process (a CLI `run`/`resume`) holds the run's lease
        # Its pid alone: the table's other columns leave the state 13 characters at 80 columns, and "running: pid
        # 10590" was cut to "running: pid 1" there (p and u say the rest: executing in another process).
        return f"{WRITER}{writer.pid}" + ("" if writer.host == HOST else f" on {writer.host}")
    skipped = run.get("skipped", 0)
    if run["done"] + skipped == run["jobs"]:
        return "decided" if skipped else "done"
    return "sweep" if run["model"] is None else "paused"


#: The state of a run another process writes begins so, its pid after.
WRITER = "pid "


def rate_line(p) -> str:
    """Jobs a second, tokens a second and the time left (:func:`workbench.progress.pace`, as the CLI's bar): over
    the time the run worked (``p.elapsed``: its waits for the model left out), from the jobs the model generated."""
    speed = pace(p.done, p.total, p.elapsed, instant=p.cache_hits, tokens=p.completion_tokens)
    eta = "? (no job generated yet)" if speed.left is None else speed.eta()
    return f"{speed.rate:.1f} jobs/s · {speed.tokens:.1f} tok/s · ETA {eta}"


def pausing_line(run: str, p) -> str:
    """The status line from p until the run has paused, with its latest progress (``p``) if any."""
    done = f" ({p.run_done:,}/{p.run_total:,} jobs done)" if p is not None else ""
    return f"pausing {esc(run)} after the job in progress …{done}"


def _datasets_for_form(store) -> tuple[dict[str, int], dict[str, str]]:
    """Each dataset's sample count, and why a run cannot be planned on a dataset (the form says so before Start)."""
    datasets = list_datasets(store)
    return ({d["name"]: d["samples"] for d in datasets},
            {d["name"]: "it has no retrieval results to sweep (import a retrieval.jsonl with its samples)"
             for d in datasets if not d["retrievers"]})


def _delete(store, name: str):
    delete_run(store, name)
    return name


class RunsScreen(WorkbenchScreen):
    """The runs table and the progress of runs executing in this app."""

    BINDINGS = [
        Binding("n", "new", "New run"), Binding("enter", "open", "Ledger", priority=True),
        Binding("p", "pause", "Pause"), Binding("u", "resume", "Resume"), Binding("x", "delete", "Delete"),
        Binding("a", "all_runs", "All runs"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        table = DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        # The state beside the run's name: a long model list (``default,gemma3-270m``) pushed it off at 80 columns.
        for column in ("run", "state", "dataset", "model", "cells", "done", "jobs", "%", "errors"):
            table.add_column(column, key=column)
        yield table
        yield Static("", id="welcome")
        # No ETA of the bar's own: it would count the cached jobs' burst in its rate (the status line has one).
        yield ProgressBar(id="progress", show_eta=False)
        yield Static("", id="status", classes="status")
        # The highlighted (or executing) sequential run: its intervals' verdicts as they come, and the calls saved.
        yield Static("", id="sequential", classes="status")
        yield KeyFooter()

    def _show_standing(self) -> None:
        """The sequential run's standing, folded to the screen's width with each stopped cell's line hanging."""
        box = self.query_one("#sequential", Static)
        box.display = self._standing is not None
        box.update(esc(hanging_lines(self._standing, self.size.width - 2) if self._standing else ""))

    def on_resize(self) -> None:
        if self.is_mounted:
            self._show_standing()

    def on_mount(self) -> None:
        self.query_one("#progress", ProgressBar).display = False
        self.query_one("#welcome", Static).display = False
        self.query_one("#sequential", Static).display = False
        self._standing: list[str] | None = None          # the shown sequential run's lines, unfolded
        self._sequential_asked: dict[str, float] = {}   # run -> when its standing was last asked for (monotonic)
        self._not_sequential: set[str] = set()          # runs that answer every job: nothing to show
        self._form_datasets: dict[str, int] = {}
        self._form_problems: dict[str, str] = {}
        self._last_progress: dict = {}   # run -> the Progress shown last, for the line when it ends
        self._latest: dict = {}          # run -> its newest Progress, written by the run's worker thread
        self.set_interval(0.2, self._show_latest)
        self._follow_app = True
        # A run just started here, until the list has shown it highlighted (p must pause it, whatever the list showed).
        self._started: str | None = None

    def on_screen_resume(self) -> None:
        self._follow_app = True
        # DataChanged reaches only the screen on top: a run started elsewhere while another
        # screen was shown appears when we come back.
        self.load("runs", _runs)

    def on_data_changed(self, message: DataChanged) -> None:
        self.load("runs", _runs)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "runs":
            self._show_runs(message.payload["runs"], message.payload["datasets"], message.payload["writers"])
        elif message.what == "deleted":
            self.notify(f"run {message.payload} deleted")
            if self.app.run_name == message.payload:
                self.app.run_name = None
            self.load("runs", _runs)
        elif message.what == "model-wait":
            run, line = message.payload
            self.query_one("#status", Static).update(f"{esc(run)}: {esc(line)} · p stops waiting (the run stays "
                                                     "paused; u resumes it)")
        elif message.what == "refused":
            self._refused(*message.payload)
        elif message.what == "sequential":
            name, line = message.payload
            if line is None:
                self._not_sequential.add(name)     # its progress ticks need not ask again
            if name == self._selected() or name in self.app.executions:
                self._standing = line
                self._show_standing()
        elif message.what == "datasets-for-form":
            datasets, self._form_problems = message.payload
            if not datasets:
                self.app.show_error("No dataset", "Import a dataset first (d, then i).")
                return
            self._form_datasets = datasets
            # On the highlighted run's dataset (a new run is most likely another try on it), else the one Runs is
            # narrowed to (from Datasets), else the newest import.
            name = self._selected()
            highlighted = str(self.query_one(DataTable).get_cell(name, "dataset")) if name else None
            dataset = next((d for d in (highlighted, self.app.dataset_filter) if d in datasets), None)
            self.app.push_screen(RunForm(datasets, {"dataset": dataset} if dataset else None,
                                         problems=self._form_problems), self._start_from_form)

    def _show_runs(self, runs: list[dict], datasets: list[str], writers: dict[str, Holder]) -> None:
        only = self.app.dataset_filter
        shown = [r for r in runs if only is None or r["dataset"] == only]
        started = next((r for r in runs if r["name"] == self._started), None)
        if started is not None and only is not None and started["dataset"] != only:
            # A run started on another dataset than the list is narrowed to (the form's dataset is free): the list
            # widens to every dataset's runs, or the run would execute unseen and p could not pause it.
            self.app.dataset_filter = only = None
            shown = runs
            self.notify(f"Showing the runs of every dataset: {started['name']} runs on {started['dataset']}.",
                        timeout=5)
        self.query_one("#heading", Static).update(
            "[b]Runs[/b]" + (f" of {esc(only)} ({len(shown)} of {len(runs)}) [dim]· a: all runs[/dim]" if only else "")
            + "  [dim]n new · enter ledger · p pause · u resume · x delete[/dim]")
        if only is not None and not shown:
            datasets = [only]  # the greeting offers a run on the dataset asked for
        runs = shown
        table = self.query_one(DataTable)
        greeting = self.query_one("#welcome", Static)
        greeting.display = not runs
        table.display = bool(runs)
        if not runs:
            greeting.update(NO_RUN.format(datasets=esc(", ".join(datasets))) if datasets
                            else welcome("[b]d[/b] then [b]i[/b]"))
        selected = self._selected()
        table.clear()
        for r in runs:
            # A sequential run's skipped jobs are settled too: it is complete when nothing is left to ask.
            pct = f"{100 * (r['done'] + r.get('skipped', 0)) / r['jobs']:.0f}" if r["jobs"] else "—"
            state = run_state(r, r["name"] in self.app.executions, writers.get(r["name"]))
            table.add_row(r["name"], state, r["dataset"], r["model"] or "—", str(r["cells"]), f"{r['done']:,}",
                          f"{r['jobs']:,}", pct, f"{r['errors']:,}" if r["errors"] else "", key=r["name"])
        names = [r["name"] for r in runs]
        # A run started here is highlighted once it is listed; arriving from Datasets (enter) selects that dataset's
        # latest run, not the old selection.
        if self._started in names:
            target, self._started = self._started, None
        else:
            target = (self.app.run_name if self._follow_app and self.app.run_name in names
                      else selected or self.app.run_name)
        self._follow_app = False
        if target in names:
            table.move_cursor(row=names.index(target))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        name = event.row_key.value if event.row_key is not None else None
        if name is None:
            return
        self._standing = None
        self._show_standing()
        self._ask_sequential(name)

    def _ask_sequential(self, name: str) -> None:
        self._sequential_asked[name] = time.monotonic()
        self.load("sequential", _sequential, name)

    def action_all_runs(self) -> None:
        if self.app.dataset_filter is None:
            self.notify("already showing the runs of every dataset")
            return
        self.app.dataset_filter = None
        self.load("runs", _runs)

    def _selected(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # A mouse click on a row (enter is the screen's priority binding, shown in the footer).
        self.action_open()

    def action_open(self) -> None:
        name = self._selected()
        if name:
            self.app.open_run(name)
        else:
            self.notify(self._no_run_yet("to open"), timeout=4)

    def _no_run_yet(self, what: str) -> str:
        only = self.app.dataset_filter
        return f"No run {what}" + (f" of {only} (a: all runs)" if only else "") + ": n starts one."

    def action_new(self) -> None:
        self.load("datasets-for-form", _datasets_for_form)

    def _start_from_form(self, form: dict | None) -> None:
        if not form:
            return
        try:
            sweep, gens = configs_from_form(form)
            sequential = sequential_from_form(form)
        except FormError as exc:
            self._reopen_form(form, exc)
            return
        self.execute_run(form["dataset"], (sweep, sequential), gens, form["name"] or None, form)

    def _reopen_form(self, form: dict, error: FormError) -> None:
        """A run that could not be planned: the form again, with what was typed and the reason."""
        self.app.push_screen(RunForm(self._form_datasets, form, error, problems=self._form_problems),
                             self._start_from_form)

    def action_pause(self) -> None:
        name = self._selected()
        if name in self.app.executions:
            if self.app.executions[name].is_set():     # pressed again: the line would not change
                self.notify(f"Already pausing {name}: it stops after the job in progress.", timeout=4)
                return
            self.app.executions[name].set()
            self.query_one("#status", Static).update(pausing_line(name, self._last_progress.get(name)))
            return
        # Nothing to pause: say why, from the state the table shows (a silent key looks broken).
        if name is None:
            self.notify(self._no_run_yet("to pause"), timeout=4)
            return
        state = str(self.query_one(DataTable).get_cell(name, "state"))
        why = {"done": "is finished: every job is done",
               "decided": "is finished: it stopped when decided (its other jobs are skipped)",
               "sweep": "has no model (a sweep): nothing executes",
               "paused": "is not executing (u resumes it)"}.get(
            state, f"is executing in another process ({state}): pause it there")
        self.notify(f"nothing to pause: run {name} {why}", timeout=5)

    def action_resume(self) -> None:
        name = self._selected()
        if name is None:
            self.notify(self._no_run_yet("to resume"), timeout=4)
            return
        state = str(self.query_one(DataTable).get_cell(name, "state"))
        # Nothing to resume: say why from the state the table shows, rather than start and stop at once.
        why = {"done": "is finished: every job is done (n starts another run)",
               "decided": "stopped when decided: its other jobs are skipped, never asked (n starts another run)",
               "running": "is executing here already (p pauses it)",
               "sweep": "has no model (planned by `sweep`): import its predictions (`workbench predictions "
                        "import`), or plan a run with a model (n)"}.get(state)
        if why is None and state.startswith(WRITER):
            why = f"is executing in another process ({state}): it goes on there"
        if why is not None:
            self.notify(f"Nothing to resume: run {name} {why}.", timeout=5)
            return
        self.execute_run(None, None, None, name)

    def action_delete(self) -> None:
        name = self._selected()
        if not name:
            self.notify(self._no_run_yet("to delete"), timeout=4)
            return
        if name in self.app.executions:
            self.app.show_error("Run is executing", f"Pause {name} (p) before deleting it.")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.load("deleted", _delete, name)

        self.app.push_screen(ConfirmDialog(f"Delete run {name} and all its jobs? Cached generations stay."),
                             confirmed)

    @work(thread=True, exit_on_error=False, group="execute")
    def execute_run(self, dataset, plan, gens, name, form: dict | None = None) -> None:
        """Plan (given ``plan``: the grid and the stopping settings or None; ``gens``: the form's models) and execute
        a run; progress comes back as messages."""
        store = self.app.open_store()
        stop = threading.Event()
        registered = False
        try:
            if plan is not None:
                try:
                    grid, sequential = plan
                    name = plan_sweep(store, grid, dataset=dataset, name=name, **run_models(gens),
                                      sequential=sequential).run
                except (ValueError, LookupError) as exc:
                    self.app.call_from_thread(self._reopen_form, form, form_error(str(exc)))
                    return
            if name in self.app.executions:
                self.app.call_from_thread(self.app.show_error, "Run is executing",
                                          f"{name} is already executing in this window.")
                return
            run = get_run(store, name)
            try:
                generations_of(run)
            except BadInput as exc:   # a run this window cannot execute (no model): said, no bar started
                self.post_message(Loaded("refused", (name, str(exc))))
                return
            self.app.executions[name] = stop
            registered = True
            if self.app.quitting:  # q was confirmed while this run was being planned
                stop.set()
            self.post_message(RunProgress(name, None))

            def progress(p) -> None:
                # Only the latest snapshot matters: a timer on the UI thread shows it (see _show_latest).
                self._latest[name] = p

            try:
                # Another process using the model: said on the progress line, and a pause ends the wait.
                waiting = ExecOptions(on_wait=lambda m: self.post_message(Loaded("model-wait", (name, m))), stop=stop)
                try:
                    # on_wait (the lease): a note when the lease of a writer that died is taken over.
                    report = execute(store, run, stop=stop, progress=progress, opts=waiting,
                                     on_wait=lambda line: self.app.call_from_thread(self.notify, line))
                except ModelSlotStopped:
                    report = ExecReport(run=name, stopped=True)
            except (LeaseHeld, BadInput, EnvironmentFault) as exc:
                # Another process (a CLI resume, another window) is executing it; or its model cannot serve
                # (a file replaced since, a server that does not answer): every job stays pending.
                # A message, not call_from_thread: it lands after the RunProgress above.
                self.post_message(Loaded("refused", (name, str(exc))))
                return
            self.post_message(RunFinished(name, report))
        finally:
            if registered:
                self.app.executions.pop(name, None)
            store.close()

    def _refused(self, name: str, reason: str) -> None:
        """The run cannot execute here (written elsewhere, or no model): say why, and leave it alone."""
        self.query_one("#progress", ProgressBar).display = False
        self.query_one("#status", Static).update(esc(reason))
        self.notify(reason, title=f"Run {name} not started", severity="error", timeout=10)
        self.load("runs", _runs)

    def on_run_progress(self, message: RunProgress) -> None:
        """A run started executing here (its jobs' progress comes through ``_show_latest``)."""
        self.query_one("#progress", ProgressBar).display = True
        self.app.run_name = message.run
        # What was learnt of a run by this name may be of a deleted one: a new run asks again.
        self._not_sequential.discard(message.run)
        # The cursor goes to the run now executing, however the list is narrowed, and whatever list a load begun
        # before it was planned brings first: p pauses it, not the one before.
        self._started = message.run
        self.query_one("#status", Static).update(f"{esc(message.run)}: loading the model …")
        self.load("runs", _runs)

    def _show_latest(self) -> None:
        """Show each executing run's latest progress, if not shown yet.

        Pulled by a timer rather than pushed per job: a burst of cached jobs would flood the
        UI with messages, and a throttle that drops ticks leaves the line behind the table
        (1/12 shown while 4 were done) until the next, possibly slow, generation ends.
        """
        for run, p in list(self._latest.items()):
            if self._last_progress.get(run) is not p:
                self._show_progress(run, p)

    def _show_progress(self, run: str, p) -> None:
        bar = self.query_one("#progress", ProgressBar)
        bar.display = True
        # The run's overall counts (a resume executes only the remaining jobs), as the table shows them.
        self._last_progress[run] = p
        bar.update(total=max(p.run_total, 1), progress=p.run_total - (p.total - p.done))
        self._update_row(run, p)
        if run not in self._not_sequential and \
                time.monotonic() - self._sequential_asked.get(run, 0.0) >= SEQUENTIAL_EVERY:
            self._ask_sequential(run)       # a sequential run's intervals narrow as its rounds complete
        status = self.query_one("#status", Static)
        stop = self.app.executions.get(run)
        if stop is not None and stop.is_set():
            # p was taken: the jobs still ending (a cached burst, the one in progress) must not read as if it was not.
            status.update(pausing_line(run, p))
            return
        status.update(
            f"{esc(run)}: {p.run_done:,}/{p.run_total:,} jobs done · {rate_line(p)} · {p.model_calls} generated, "
            f"{p.cache_hits} cached" + (f", {p.errors} errors" if p.errors else ""))

    def _update_row(self, run: str, p) -> None:
        """Keep the run's row in step with its progress line (a reload would lag behind it)."""
        table = self.query_one(DataTable)
        if run not in table.rows:
            return
        table.update_cell(run, "done", f"{p.run_done:,}")
        table.update_cell(run, "%", f"{100 * p.run_done / p.run_total:.0f}" if p.run_total else "—")
        table.update_cell(run, "state", "running")

    def on_run_finished(self, message: RunFinished) -> None:
        self._show_latest()  # the final tick, before the summary replaces the line
        self._latest.pop(message.run, None)
        r = message.report
        self.query_one("#progress", ProgressBar).display = False
        state = "paused" if r.stopped else "failed" if r.fatal else "finished"
        p = self._last_progress.pop(message.run, None)
        done = f"{p.run_done:,}/{p.run_total:,} jobs done ({r.done:,} this time)" if p else f"{r.done:,} done"
        self.query_one("#status", Static).update(
            f"{esc(message.run)} {state}: {done}, {r.model_calls:,} generated, {r.cache_hits:,} cached, "
            f"{r.errors:,} errors" + (f", {r.skipped:,} skipped (stopped when decided)" if r.skipped else "")
            + (f" · {esc(r.fatal)}" if r.fatal else ""))
        if r.fatal:
            self.app.show_error(f"Run {message.run} failed", r.fatal)
        self._ask_sequential(message.run)
        self.notify(f"run {message.run} {state}")
        self.load("runs", _runs)
