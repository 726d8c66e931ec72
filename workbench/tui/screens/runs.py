"""Runs: every run with live progress; start one from a form, pause, resume, delete."""

from __future__ import annotations

import re
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

WELCOME = """\
[b]Welcome to the Dissipation Workbench.[/b] Nothing is imported yet. To begin:

 • press [b]d[/b] then [b]i[/b] to import a dataset directory, e.g. [b]sample_data/metaqa[/b],
   then come back with [b]r[/b] and press [b]n[/b] for a new run;
 • or run [b]just demo[/b] in a shell: it imports the sample data and runs a
   small sweep with the default model. Then open the workbench again.

[b]?[/b] lists every key · [b]ctrl+p[/b] the command palette · [b]q[/b] quits"""

NO_RUN = """\
[b]No run yet.[/b] Press [b]n[/b] to start one on {datasets}: the form shows how many
jobs it will run, and with which model, before anything starts.

[b]?[/b] lists every key · [b]ctrl+p[/b] the command palette · [b]q[/b] quits"""


def _runs(store):
    from workbench.store.queries import list_datasets, list_runs

    runs = list_runs(store)
    # The dataset names only matter for the greeting shown while there is no run.
    return {"runs": runs, "datasets": [] if runs else [d["name"] for d in list_datasets(store)]}


def _datasets_for_form(store) -> dict[str, int]:
    from workbench.store.queries import list_datasets

    return {d["name"]: d["samples"] for d in list_datasets(store)}


def _delete(store, name: str):
    from workbench.store.queries import delete_run

    delete_run(store, name)
    return name


# The form's fields in order, id → label (errors name a field by its label).
FIELDS = {"dataset": "dataset", "model": "model", "k": "K values", "budget": "budgets B", "format": "formats",
          "limit": "samples (first N)", "answer_format": "answer format", "max_tokens": "max tokens",
          "prompt_file": "prompt template file", "name": "run name", "oracle": "oracle cells"}
# CLI options named by core validation messages → the form field that sets them.
_OPTIONS = {"--k": "k", "--budget": "budget", "--format": "format", "--limit": "limit", "--model": "model",
            "--answer-format": "answer_format", "--max-tokens": "max_tokens", "--prompt-file": "prompt_file",
            "--name": "name"}
DEFAULTS = {"model": "default", "k": "1,2,5,10,20", "budget": "32,128", "format": "linear", "limit": "20",
            "answer_format": "json", "max_tokens": "32", "prompt_file": "", "name": "", "oracle": True}


class FormError(ValueError):
    """A setting of the new-run form that cannot work; ``field`` is the id of the field to fix."""

    def __init__(self, field: str | None, message: str):
        super().__init__(message)
        self.field = field


def form_error(message: str) -> FormError:
    """Name the field a core error message is about (its first ``--option``, or the dataset)."""
    match = re.search(r"--[a-z][a-z-]*", message)
    field = _OPTIONS.get(match.group(0)) if match else ("dataset" if message.startswith("dataset") else None)
    if field and match and message.startswith(match.group(0)):
        message = message[len(match.group(0)):].lstrip(": ")
    return FormError(field, f"{FIELDS[field]}: {message}" if field else message)


def configs_from_form(form: dict):
    """Turn the form's text fields into the core's configs (``FormError`` names the bad field)."""
    from workbench.models.registry import GenerationConfig
    from workbench.runs.prompt import load_template
    from workbench.runs.sweep import SweepConfig

    def ints(field: str) -> tuple[int, ...]:
        try:
            return tuple(int(x) for x in form[field].split(",") if x.strip())
        except ValueError:
            raise FormError(field, f"{FIELDS[field]}: expected comma-separated integers, "
                                   f"got {form[field]!r}") from None

    limit = (ints("limit") or (None,))[0]
    max_tokens = ints("max_tokens")
    try:
        sweep = SweepConfig(ks=ints("k"), budgets=ints("budget"),
                            formats=tuple(f.strip() for f in form["format"].split(",") if f.strip()),
                            oracle=form["oracle"], shuffles=2, limit=limit)
        sweep.validate()
    except FormError:
        raise
    except ValueError as exc:
        raise form_error(str(exc)) from None
    try:
        template = load_template(form["prompt_file"], form["answer_format"]) if form["prompt_file"] else None
    except ValueError as exc:
        raise FormError("prompt_file", f"{FIELDS['prompt_file']}: {exc}") from None
    gen = GenerationConfig(model=form["model"], max_tokens=max_tokens[0] if max_tokens else 0,
                           answer_format=form["answer_format"],
                           **({"system": template.system, "user": template.user} if template else {}))
    try:
        gen.validate()
    except ValueError as exc:
        raise form_error(str(exc)) from None
    return sweep, gen


def describe_plan(form: dict, samples: int) -> str:
    """What the form would run: cells × samples = jobs, and the model (``FormError`` if it cannot).

    The cells are the core's grid (``runs.cells.grid``, as ``plan_sweep`` builds it), so
    the count is the one the run will have.
    """
    from workbench.models.base import ModelError
    from workbench.models.locate import resolve_model
    from workbench.runs.cells import grid

    sweep, gen = configs_from_form(form)
    try:
        path = resolve_model(gen.model)
    except ModelError as exc:
        raise FormError("model", f"{FIELDS['model']}: {exc}") from None
    cells = set(grid(sweep.ks, sweep.budgets, sweep.formats, oracle=sweep.oracle, shuffles=sweep.shuffles))
    oracle = sum(c.kind == "oracle" for c in cells)
    n = min(sweep.limit, samples) if sweep.limit else samples
    model = path.name.removesuffix(".gguf") + (" (default)" if gen.model == "default" else "")
    return (f"{len(cells)} cells" + (f" ({oracle} oracle)" if oracle else "")
            + f" × {n:,}" + (f" of {samples:,}" if n < samples else "") + " samples"
            + f" = [b]{len(cells) * n:,} jobs[/b] · model {esc(model)}")


class RunForm(ModalScreen[dict | None]):
    """The settings of a new run and what they will run; ctrl+s or the Start button starts it.

    Enter moves to the next field (on a list it opens the list), so no key press meant
    for a field can start a few hundred jobs by accident. The summary under the fields is
    recomputed on every change; a setting that cannot work is named there instead.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "Start")]

    def __init__(self, datasets: dict[str, int], values: dict | None = None, error: FormError | None = None):
        super().__init__()
        self.datasets = datasets
        self.values = {**DEFAULTS, "dataset": next(reversed(datasets), None), **(values or {})}
        self.error = error

    def compose(self) -> ComposeResult:
        v = self.values

        def text(wid: str, placeholder: str = "") -> ComposeResult:
            yield Label(FIELDS[wid])
            yield Input(v[wid], id=wid, placeholder=placeholder)

        with Vertical(classes="dialog form"):
            yield Label("[b]New run[/b]  [dim]Enter next field · ctrl+s start · Esc cancel[/dim]")
            with VerticalScroll(classes="form-body", can_focus=False), Grid(classes="fields"):
                yield Label(FIELDS["dataset"])
                yield Select([(d, d) for d in self.datasets], value=v["dataset"] if v["dataset"] in self.datasets
                             else Select.BLANK, allow_blank=False, id="dataset")
                yield from text("model", "default or a .gguf path")
                yield from text("k")
                yield from text("budget")
                yield from text("format", "score,linear,struct")
                yield from text("limit", "empty = all")
                yield Label(FIELDS["answer_format"])
                yield Select([("json", "json"), ("grounded (cite unit IDs)", "grounded"), ("text", "text")],
                             value=v["answer_format"], allow_blank=False, id="answer_format")
                yield from text("max_tokens")
                yield from text("prompt_file", "optional: JSON {system,user} or text")
                yield from text("name", "optional")
                yield Label(FIELDS["oracle"])
                yield Checkbox("only p*, struct vs shuffled", value=v["oracle"], id="oracle")
            yield Static("", id="summary", classes="summary")
            yield Static("", id="form-error", classes="form-error")
            yield Button("Start (ctrl+s)", id="start", variant="primary", compact=True)

    def on_mount(self) -> None:
        self._refresh_summary()
        if self.error is not None:
            self.show_error(self.error, planned=True)
        else:
            # The dataset list first: Enter there opens it, as a newcomer expects.
            self.query_one("#dataset", Select).focus()

    def _value(self, wid: str) -> str:
        return self.query_one(f"#{wid}", Input).value.strip()

    def form(self) -> dict:
        """The typed values (what the form dismisses with)."""
        return {
            "dataset": self.query_one("#dataset", Select).value,
            "model": self._value("model") or "default", "k": self._value("k"), "budget": self._value("budget"),
            "format": self._value("format") or "linear", "limit": self._value("limit"),
            "answer_format": self.query_one("#answer_format", Select).value,
            "max_tokens": self._value("max_tokens") or "48", "prompt_file": self._value("prompt_file"),
            "name": self._value("name"), "oracle": self.query_one("#oracle", Checkbox).value,
        }

    def _refresh_summary(self) -> FormError | None:
        """Recompute the summary line; return the error that blocks starting, if any."""
        summary = self.query_one("#summary", Static)
        form = self.form()
        try:
            text = describe_plan(form, self.datasets.get(form["dataset"], 0))
        except FormError as exc:
            summary.set_class(True, "invalid")
            summary.update(f"✗ {esc(str(exc))}")
            return exc
        summary.set_class(False, "invalid")
        summary.update(text)
        return None

    def show_error(self, error: FormError, *, planned: bool = False) -> None:
        """Say why the run cannot start, naming the field, and put the cursor there; the typed values stay.

        ``planned``: the core refused it while planning (e.g. a run name taken by another
        config), which the summary cannot know: it gets a line of its own until that field changes.
        """
        if planned:
            self.error = error
            box = self.query_one("#form-error", Static)
            box.update(f"Cannot start: {esc(str(error))}")
            box.display = True
        else:
            self.query_one("#summary", Static).update(f"✗ Cannot start: {esc(str(error))}")
        if error.field:
            widget = self.query_one(f"#{error.field}")
            widget.focus()
            widget.scroll_visible()

    def _changed(self, wid: str | None) -> None:
        self._refresh_summary()
        if self.error is not None and self.error.field in (wid, None):
            self.error = None
            self.query_one("#form-error", Static).display = False

    def on_input_changed(self, event: Input.Changed) -> None:
        self._changed(event.input.id)

    def on_select_changed(self, event: Select.Changed) -> None:
        self._changed(event.select.id)

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        self._changed(event.checkbox.id)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_next()

    def action_submit(self) -> None:
        error = self._refresh_summary()
        if error is not None:
            self.show_error(error)
            return
        self.dismiss(self.form())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_submit()

    def action_cancel(self) -> None:
        self.dismiss(None)


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
        for column in ("run", "dataset", "model", "cells", "done", "jobs", "%", "errors", "state"):
            table.add_column(column, key=column)
        yield table
        yield Static("", id="welcome")
        yield ProgressBar(id="progress", show_eta=True)
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#progress", ProgressBar).display = False
        self.query_one("#welcome", Static).display = False
        self._form_datasets: dict[str, int] = {}
        self._last_progress: dict = {}   # run -> its latest Progress, for the line when it ends

    def on_screen_resume(self) -> None:
        # DataChanged reaches only the screen on top: a run started elsewhere while another
        # screen was shown appears when we come back.
        self.load("runs", _runs)

    def on_data_changed(self, message: DataChanged) -> None:
        self.load("runs", _runs)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "runs":
            self._show_runs(message.payload["runs"], message.payload["datasets"])
        elif message.what == "deleted":
            self.notify(f"run {message.payload} deleted")
            if self.app.run_name == message.payload:
                self.app.run_name = None
            self.load("runs", _runs)
        elif message.what == "datasets-for-form":
            if not message.payload:
                self.app.show_error("No dataset", "Import a dataset first (d, then i).")
                return
            self._form_datasets = message.payload
            self.app.push_screen(RunForm(message.payload), self._start_from_form)

    def _show_runs(self, runs: list[dict], datasets: list[str]) -> None:
        table = self.query_one(DataTable)
        welcome = self.query_one("#welcome", Static)
        welcome.display = not runs
        table.display = bool(runs)
        if not runs:
            welcome.update(NO_RUN.format(datasets=esc(", ".join(datasets))) if datasets else WELCOME)
        selected = self._selected()
        table.clear()
        for r in runs:
            pct = f"{100 * r['done'] / r['jobs']:.0f}" if r["jobs"] else "—"
            state = ("running" if r["name"] in self.app.executions else
                     "done" if r["done"] == r["jobs"] else "sweep" if r["model"] is None else "paused")
            table.add_row(r["name"], r["dataset"], r["model"] or "—", str(r["cells"]), f"{r['done']:,}",
                          f"{r['jobs']:,}", pct, f"{r['errors']:,}" if r["errors"] else "", state, key=r["name"])
        names = [r["name"] for r in runs]
        target = selected or self.app.run_name
        if target in names:
            table.move_cursor(row=names.index(target))

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
        self.load("datasets-for-form", _datasets_for_form)

    def _start_from_form(self, form: dict | None) -> None:
        if not form:
            return
        try:
            sweep, gen = configs_from_form(form)
        except FormError as exc:
            self._reopen_form(form, exc)
            return
        self.execute_run(form["dataset"], sweep, gen, form["name"] or None, form)

    def _reopen_form(self, form: dict, error: FormError) -> None:
        """A run that could not be planned: the form again, with what was typed and the reason."""
        self.app.push_screen(RunForm(self._form_datasets, form, error), self._start_from_form)

    def action_pause(self) -> None:
        name = self._selected()
        if name in self.app.executions:
            self.app.executions[name].set()
            self.query_one("#status", Static).update(f"pausing {esc(name)} after the job in progress …")

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
    def execute_run(self, dataset, sweep, gen, name, form: dict | None = None) -> None:
        """Plan (when given configs) and execute a run; progress comes back as messages."""
        from workbench.runs.executor import execute
        from workbench.runs.sweep import plan_sweep
        from workbench.store.queries import get_run

        store = self.app.open_store()
        stop = threading.Event()
        registered = False
        try:
            if sweep is not None:
                try:
                    name = plan_sweep(store, sweep, dataset=dataset, name=name, generation=gen.as_dict()).run
                except (ValueError, LookupError) as exc:
                    self.app.call_from_thread(self._reopen_form, form, form_error(str(exc)))
                    return
            if name in self.app.executions:
                self.app.call_from_thread(self.app.show_error, "Run is executing",
                                          f"{name} is already executing in this window.")
                return
            self.app.executions[name] = stop
            registered = True
            if self.app.quitting:  # q was confirmed while this run was being planned
                stop.set()
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
            if registered:
                self.app.executions.pop(name, None)
            store.close()

    def on_run_progress(self, message: RunProgress) -> None:
        bar = self.query_one("#progress", ProgressBar)
        bar.display = True
        p = message.progress
        if p is None:
            self.app.run_name = message.run
            self.query_one("#status", Static).update(f"{esc(message.run)}: loading the model …")
            self.load("runs", _runs)
            return
        # The run's overall counts (a resume executes only the remaining jobs), as the table shows them.
        self._last_progress[message.run] = p
        bar.update(total=max(p.run_total, 1), progress=p.run_total - (p.total - p.done))
        self._update_row(message.run, p)
        rate = p.done / p.elapsed if p.elapsed else 0.0
        tps = p.completion_tokens / p.elapsed if p.elapsed else 0.0
        eta = (p.total - p.done) / rate if rate else float("inf")
        self.query_one("#status", Static).update(
            f"{esc(message.run)}: {p.run_done:,}/{p.run_total:,} jobs done · {rate:.1f} jobs/s · {tps:.1f} tok/s · "
            f"ETA {'?' if eta == float('inf') else f'{eta:.0f}s'} · {p.model_calls} generated, "
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
        r = message.report
        self.query_one("#progress", ProgressBar).display = False
        state = "paused" if r.stopped else "failed" if r.fatal else "finished"
        p = self._last_progress.pop(message.run, None)
        done = f"{p.run_done:,}/{p.run_total:,} jobs done ({r.done:,} this time)" if p else f"{r.done:,} done"
        self.query_one("#status", Static).update(
            f"{esc(message.run)} {state}: {done}, {r.model_calls:,} generated, {r.cache_hits:,} cached, "
            f"{r.errors:,} errors" + (f" · {esc(r.fatal)}" if r.fatal else ""))
        if r.fatal:
            self.app.show_error(f"Run {message.run} failed", r.fatal)
        self.notify(f"run {message.run} {state}")
        self.load("runs", _runs)
