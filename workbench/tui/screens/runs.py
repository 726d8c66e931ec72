"""Runs: every run with live progress; start one from a form, pause, resume, delete."""

from __future__ import annotations

import threading
import time

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, DataTable, Footer, Header, Input, Label, ProgressBar, Select, Static

from workbench.tui.app import WorkbenchScreen
from workbench.tui.dialogs import ConfirmDialog
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded, RunFinished, RunProgress


def _runs(store):
    from workbench.store.queries import list_runs

    return list_runs(store)


def _delete(store, name: str):
    from workbench.store.queries import delete_run

    delete_run(store, name)
    return name


class RunForm(ModalScreen[dict | None]):
    """The settings of a new run; Enter in any field (or ctrl+s) starts it."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "Start")]

    def __init__(self, datasets: list[str]):
        super().__init__()
        self.datasets = datasets

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield Label("[b]New run[/b]  [dim]Enter or ctrl+s starts it, Esc cancels[/dim]")
            with VerticalScroll(classes="form-body"), Grid(classes="fields"):
                yield Label("dataset")
                yield Select([(d, d) for d in self.datasets], value=self.datasets[-1] if self.datasets else
                             Select.BLANK, allow_blank=False, id="dataset")
                yield Label("model")
                yield Input("default", id="model", placeholder="default or a .gguf path")
                yield Label("K values")
                yield Input("1,2,5,10,20", id="k")
                yield Label("budgets B")
                yield Input("32,128", id="budget")
                yield Label("formats")
                yield Input("linear", id="format", placeholder="score,linear,struct")
                yield Label("samples (first N)")
                yield Input("20", id="limit", placeholder="empty = all")
                yield Label("answer format")
                yield Select([("json", "json"), ("grounded (cite unit IDs)", "grounded"), ("text", "text")],
                             value="json", allow_blank=False, id="answer_format")
                yield Label("max tokens")
                yield Input("32", id="max_tokens")
                yield Label("prompt template file")
                yield Input("", id="prompt_file", placeholder="optional: JSON {system,user} or text")
                yield Label("run name")
                yield Input("", id="name", placeholder="optional")
                yield Label("oracle cells")
                yield Checkbox("only p*, struct vs shuffled", value=True, id="oracle")
            yield Button("Start (ctrl+s)", id="start", variant="primary")

    def on_mount(self) -> None:
        # Start in the first text field: Enter there starts the run (Enter on a Select opens it).
        self.query_one("#model", Input).focus()

    def _value(self, wid: str) -> str:
        return self.query_one(f"#{wid}", Input).value.strip()

    def action_submit(self) -> None:
        self.dismiss({
            "dataset": self.query_one("#dataset", Select).value,
            "model": self._value("model") or "default", "k": self._value("k"), "budget": self._value("budget"),
            "format": self._value("format") or "linear", "limit": self._value("limit"),
            "answer_format": self.query_one("#answer_format", Select).value,
            "max_tokens": self._value("max_tokens") or "48", "prompt_file": self._value("prompt_file"),
            "name": self._value("name"), "oracle": self.query_one("#oracle", Checkbox).value,
        })

    def on_input_submitted(self) -> None:
        self.action_submit()

    def on_button_pressed(self) -> None:
        self.action_submit()

    def action_cancel(self) -> None:
        self.dismiss(None)


def configs_from_form(form: dict):
    """Turn the form's text fields into the core's configs (ValueError names the bad field)."""
    from workbench.models.registry import GenerationConfig
    from workbench.runs.prompt import load_template
    from workbench.runs.sweep import SweepConfig

    def ints(field: str) -> tuple[int, ...]:
        try:
            return tuple(int(x) for x in form[field].split(",") if x.strip())
        except ValueError:
            raise ValueError(f"{field}: expected comma-separated integers, got {form[field]!r}") from None

    limit = ints("limit")[0] if form["limit"] else None
    sweep = SweepConfig(ks=ints("k"), budgets=ints("budget"),
                        formats=tuple(f.strip() for f in form["format"].split(",") if f.strip()),
                        oracle=form["oracle"], shuffles=2, limit=limit)
    template = load_template(form["prompt_file"], form["answer_format"]) if form["prompt_file"] else None
    gen = GenerationConfig(model=form["model"], max_tokens=ints("max_tokens")[0],
                           answer_format=form["answer_format"],
                           **({"system": template.system, "user": template.user} if template else {}))
    sweep.validate()
    gen.validate()
    return sweep, gen


class RunsScreen(WorkbenchScreen):
    """The runs table and the progress of runs executing in this app."""

    BINDINGS = [
        Binding("n", "new", "New run"), Binding("enter", "open", "Ledger"),
        Binding("p", "pause", "Pause"), Binding("u", "resume", "Resume"), Binding("x", "delete", "Delete"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("[b]Runs[/b]  [dim]n new · enter ledger · p pause · u resume · x delete[/dim]",
                     classes="title")
        table = DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        table.add_columns("run", "dataset", "model", "cells", "done", "jobs", "%", "errors", "state")
        yield table
        yield ProgressBar(id="progress", show_eta=True)
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#progress", ProgressBar).display = False
        self.load("runs", _runs)

    def on_data_changed(self, message: DataChanged) -> None:
        self.load("runs", _runs)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "runs":
            table = self.query_one(DataTable)
            selected = self._selected()
            table.clear()
            for r in message.payload:
                pct = f"{100 * r['done'] / r['jobs']:.0f}" if r["jobs"] else "—"
                state = ("running" if r["name"] in self.app.executions else
                         "done" if r["done"] == r["jobs"] else "sweep" if r["model"] is None else "paused")
                table.add_row(r["name"], r["dataset"], r["model"] or "—", str(r["cells"]), f"{r['done']:,}",
                              f"{r['jobs']:,}", pct, f"{r['errors']:,}" if r["errors"] else "", state, key=r["name"])
            names = [r["name"] for r in message.payload]
            target = selected or self.app.run_name
            if target in names:
                table.move_cursor(row=names.index(target))
        elif message.what == "deleted":
            self.notify(f"run {message.payload} deleted")
            if self.app.run_name == message.payload:
                self.app.run_name = None
            self.load("runs", _runs)
        elif message.what == "datasets-for-form":
            if not message.payload:
                self.app.show_error("No dataset", "Import a dataset first (d, then i).")
                return
            self.app.push_screen(RunForm(message.payload), self._start_from_form)

    def _selected(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # Enter on the focused table arrives as RowSelected, not as the screen's binding.
        self.action_open()

    def action_open(self) -> None:
        name = self._selected()
        if name:
            self.app.open_run(name)

    def action_new(self) -> None:
        from workbench.store.queries import list_datasets

        self.load("datasets-for-form", lambda store: [d["name"] for d in list_datasets(store)])

    def _start_from_form(self, form: dict | None) -> None:
        if not form:
            return
        try:
            sweep, gen = configs_from_form(form)
        except ValueError as exc:
            self.app.show_error("Cannot start the run", str(exc))
            return
        self.execute_run(form["dataset"], sweep, gen, form["name"] or None)

    def action_pause(self) -> None:
        name = self._selected()
        if name in self.app.executions:
            self.app.executions[name].set()
            self.query_one("#status", Static).update(f"pausing {name} after the job in progress …")

    def action_resume(self) -> None:
        name = self._selected()
        if name and name not in self.app.executions:
            self.execute_run(None, None, None, name)

    def action_delete(self) -> None:
        name = self._selected()
        if not name:
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
    def execute_run(self, dataset, sweep, gen, name) -> None:
        """Plan (when given configs) and execute a run; progress comes back as messages."""
        from workbench.runs.executor import execute
        from workbench.runs.sweep import plan_sweep
        from workbench.store.queries import get_run

        store = self.app.open_store()
        stop = threading.Event()
        try:
            if sweep is not None:
                name = plan_sweep(store, sweep, dataset=dataset, name=name, generation=gen.as_dict()).run
            self.app.executions[name] = stop
            self.post_message(RunProgress(name, None))
            last = [0.0]

            def progress(p) -> None:
                now = time.monotonic()
                if now - last[0] > 0.2 or p.done == p.total:
                    last[0] = now
                    self.post_message(RunProgress(name, p))

            report = execute(store, get_run(store, name), stop=stop, progress=progress)
            self.post_message(RunFinished(name, report))
        finally:
            if name:
                self.app.executions.pop(name, None)
            store.close()

    def on_run_progress(self, message: RunProgress) -> None:
        bar = self.query_one("#progress", ProgressBar)
        bar.display = True
        p = message.progress
        if p is None:
            self.app.run_name = message.run
            self.query_one("#status", Static).update(f"{message.run}: loading the model …")
            self.load("runs", _runs)
            return
        bar.update(total=max(p.total, 1), progress=p.done)
        rate = p.done / p.elapsed if p.elapsed else 0.0
        tps = p.completion_tokens / p.elapsed if p.elapsed else 0.0
        eta = (p.total - p.done) / rate if rate else float("inf")
        self.query_one("#status", Static).update(
            f"{message.run}: {p.done:,}/{p.total:,} jobs · {rate:.1f} jobs/s · {tps:.1f} tok/s · "
            f"ETA {'?' if eta == float('inf') else f'{eta:.0f}s'} · {p.model_calls} generated, "
            f"{p.cache_hits} cached" + (f", {p.errors} errors" if p.errors else ""))

    def on_run_finished(self, message: RunFinished) -> None:
        r = message.report
        self.query_one("#progress", ProgressBar).display = False
        state = "paused" if r.stopped else "failed" if r.fatal else "finished"
        self.query_one("#status", Static).update(
            f"{message.run} {state}: {r.done:,} done, {r.model_calls:,} generated, {r.cache_hits:,} cached, "
            f"{r.errors:,} errors" + (f" · {esc(r.fatal)}" if r.fatal else ""))
        if r.fatal:
            self.app.show_error(f"Run {message.run} failed", r.fatal)
        self.notify(f"run {message.run} {state}")
        self.load("runs", _runs)
