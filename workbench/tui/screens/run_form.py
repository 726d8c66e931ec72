"""The new-run form: every setting of a run, a live summary of what it will run, and field-level errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Button, Checkbox, Input, Label, Select, Static
from textual.worker import Worker, WorkerState

from workbench.errors import BadInput
from workbench.models.base import ModelError
from workbench.models.check import GENERATOR, check_model
from workbench.models.locate import model_label
from workbench.models.registry import served_model
from workbench.runs.generation import GenerationConfig
from workbench.runs.cells import grid
from workbench.runs.executor import check_models_fit
from workbench.runs.prompt import load_template
from workbench.runs.sequential import DEFAULT_ALPHA, DEFAULT_PRECISION, DEFAULT_TOLERANCE, SequentialConfig
from workbench.runs.sweep import SweepConfig
from workbench.tui.markup import esc
from workbench.tui.says import CopyOrSay


# The form's fields in order, id → label (errors name a field by its label).
FIELDS = {"dataset": "dataset", "model": "model", "k": "K values", "budget": "budgets B", "format": "formats",
          "limit": "samples (first N)", "answer_format": "answer format", "max_tokens": "max tokens",
          "prompt_file": "prompt template file", "name": "run name", "oracle": "oracle cells",
          "stop_when": "stop when", "alpha": "α (chance of a miss)", "stop_width": "E (tolerance / ±)"}
# CLI options named by core validation messages → the form field that sets them.
_OPTIONS = {"--k": "k", "--budget": "budget", "--format": "format", "--limit": "limit", "--model": "model",
            "--answer-format": "answer_format", "--max-tokens": "max_tokens", "--prompt-file": "prompt_file",
            "--name": "name", "--stop-when": "stop_when", "--alpha": "alpha", "--tolerance": "stop_width",
            "--precision": "stop_width"}
DEFAULTS = {"model": "default", "k": "1,2,5,10,20", "budget": "32,128", "format": "linear", "limit": "20",
            "answer_format": "json", "max_tokens": "32", "prompt_file": "", "name": "", "oracle": True,
            "stop_when": "", "alpha": "", "stop_width": ""}
# Typing in the model field checks the value it settles on, this long after the last key: not every prefix of a path.
CHECK_DELAY = 0.4
# Seconds a served model's server has to answer the form's check: the user waits on it, so far less than a run's
# --timeout (a server that accepts and never answers held the screen for the whole 120 s default once).
CHECK_TIMEOUT = 5.0
CHECKING = "checking the model…"
# The stopping rules the form offers (docs/sequential.md): "" answers every job. Each label at most 31 characters:
# what the field shows at 80 columns ("best: until the best cell is known" showed "best: until the best cell is").
STOP_CHOICES = [("never: answer every job", ""), ("best: until the best is known", "best"),
                ("precision: each cell until ±E", "precision")]


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
    gens = [GenerationConfig(model=model, max_tokens=max_tokens[0] if max_tokens else 0,
                             answer_format=form["answer_format"],
                             **({"system": template.system, "user": template.user} if template else {}))
            for model in model_specs(form["model"])]
    try:
        for gen in gens:
            gen.validate()
    except ValueError as exc:
        raise form_error(str(exc)) from None
    labels = [model_label(gen.model) for gen in gens]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise FormError("model", f"{FIELDS['model']}: {gens[labels.index(label)].model!r} and {gens[i].model!r} "
                                     f"have the same label {label!r}, which names their cells: give each model once")
    return sweep, gens


def model_specs(field: str) -> list[str]:
    """The models the model field names: one, or several comma-separated (a run whose grid has a model axis)."""
    return [part.strip() for part in field.split(",") if part.strip()] or ["default"]


def run_models(gens: list[GenerationConfig]) -> dict:
    """``plan_sweep``'s model settings for the form's models: ``generation`` for one, ``generations`` by label for
    several."""
    if len(gens) == 1:
        return {"generation": gens[0].as_dict()}
    return {"generations": {model_label(gen.model): gen.as_dict() for gen in gens}}


def sequential_from_form(form: dict) -> SequentialConfig | None:
    """The stopping settings the form asks for (None: every job is answered); ``FormError`` names the bad field.

    As ``run --stop-when``: α and E empty take the defaults; the oracle controls are not part of a sequential run.
    """
    rule = form.get("stop_when") or ""
    if not rule:
        for wid in ("alpha", "stop_width"):
            if form.get(wid, "").strip():
                raise FormError(wid, f"{FIELDS[wid]}: only with a stopping rule (stop when best or precision)")
        return None
    if form["oracle"]:
        raise FormError("oracle", f"{FIELDS['oracle']}: a sequential run weighs its grid cells; the oracle controls "
                                  "would be asked on every sample: uncheck them (or stop when: never)")

    def number(wid: str, default: float) -> float:
        text = form.get(wid, "").strip()
        try:
            return float(text) if text else default
        except ValueError:
            raise FormError(wid, f"{FIELDS[wid]}: expected a number, got {text!r}") from None

    config = SequentialConfig(rule, alpha=number("alpha", DEFAULT_ALPHA),
                              tolerance=number("stop_width", DEFAULT_TOLERANCE if rule == "best" else DEFAULT_PRECISION))
    try:
        config.validate()
    except ValueError as exc:
        raise form_error(str(exc)) from None
    return config


def check_form_model(spec: str, *, timeout: float | None = None) -> Path | str | tuple[Path | str, ...]:
    """The core's check of the model field (a GGUF's path, or a served model's reference; several, comma-separated,
    give a tuple); ``FormError`` names the field with the refusal. Each header read, then loaded once by llama.cpp
    and freed (cached per file), or its server asked within ``timeout`` seconds; several local models must fit in
    memory together (they stay loaded for the run). Blocking, so the form runs it in a worker, never on the UI
    thread."""
    specs = model_specs(spec)
    try:
        checked = tuple(check_model(one, GENERATOR, timeout=timeout) for one in specs)
        local = [one for one in specs if not _served(one)]
        if len(specs) > 1:
            check_models_fit({model_label(one): GenerationConfig(model=one) for one in local})
    except (ModelError, BadInput) as exc:
        raise FormError("model", f"{FIELDS['model']}: {str(exc).removeprefix('--model: ')}") from None
    return checked if len(checked) > 1 else checked[0]


def describe_plan(form: dict, samples: int, model: Path | str | FormError | None = None, *,
                  checking: bool = False) -> str:
    """What the form would run: cells × samples = jobs, and the model (``FormError`` if it cannot).

    The cells are the core's grid (``runs.cells.grid``, as ``plan_sweep`` builds it), so
    the count is the one the run will have. ``model`` is the answer of the model's check
    (:func:`check_form_model`: the model, or the refusal, raised here after the other fields'
    errors); ``checking``: the answer is not in yet, and the line says so. With neither, the
    model is checked here, blocking (what a caller off the UI thread may do; the form never does).
    """
    sweep, gens = configs_from_form(form)
    sequential = sequential_from_form(form)
    labels = tuple(model_label(gen.model) for gen in gens) if len(gens) > 1 else ()
    if checking:
        said = CHECKING
    else:
        # A model that cannot serve blocks Start before the run is planned, as the CLI refuses it before writing.
        model = check_form_model(form["model"]) if model is None else model
        if isinstance(model, FormError):
            raise model
        if labels:
            said = f"{len(labels)} models " + esc(", ".join(labels))
        else:
            name = model.name.removesuffix(".gguf") if isinstance(model, Path) else model
            said = "model " + esc(name + (" (default)" if gens[0].model == "default" else ""))
    cells = set(grid(sweep.ks, sweep.budgets, sweep.formats, oracle=sweep.oracle, shuffles=sweep.shuffles,
                     models=labels))
    oracle = sum(c.kind == "oracle" for c in cells)
    n = min(sweep.limit, samples) if sweep.limit else samples
    return (f"{len(cells)} cells" + (f" ({oracle} oracle)" if oracle else "")
            + f" × {n:,}" + (f" of {samples:,}" if n < samples else "") + " samples"
            + f" = [b]{len(cells) * n:,} jobs[/b]" + (" at most" if sequential else "") + f" · {said}"
            + (f" · stops when decided ({esc(sequential.describe())})" if sequential else ""))


def _served(spec: str) -> bool:
    """Whether ``spec`` names a served model (a malformed URL is refused at once, so it counts as local)."""
    try:
        return served_model(spec) is not None
    except ModelError:
        return False


class RunForm(CopyOrSay, ModalScreen[dict | None]):
    """The settings of a new run and what they will run; ctrl+s or the Start button starts it.

    Enter moves to the next field (on a list it opens the list), so no key press meant
    for a field can start a few hundred jobs by accident. The summary under the fields is
    recomputed on every change; a setting that cannot work is named there instead.

    The model is checked in a thread worker (loading a GGUF, asking a server: seconds), never on
    the UI thread: typing in its field schedules a check of the value it settles on
    (``CHECK_DELAY``), the summary says "checking the model…" until the answer, and only the
    answer for the latest value is shown. Start pressed meanwhile starts once the model passes.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "submit", "Start")]

    @dataclass
    class ModelChecked(Message):
        """The check numbered ``ticket`` of model ``spec`` answered: the model, or the refusal."""

        ticket: int
        spec: str
        answer: Path | str | FormError

    def __init__(self, datasets: dict[str, int], values: dict | None = None, error: FormError | None = None, *,
                 problems: dict[str, str] | None = None):
        super().__init__()
        self.datasets = datasets
        self.problems = problems or {}      # dataset → why no run can be planned on it
        self.values = {**DEFAULTS, "dataset": next(reversed(datasets), None), **(values or {})}
        self.error = error
        # The model check: each request takes the next ticket, and only the latest ticket's answer is kept.
        self._ticket = 0
        self._spec: str | None = None       # the model value the latest check is for
        self._answer: tuple[int, Path | str | FormError] | None = None
        self._debounce: Timer | None = None
        self._worker: Worker | None = None
        # The values Start was pressed with while the model was being checked: it starts on a pass.
        self._start_with: dict | None = None
        self._summary_shown: tuple[str, bool] | None = None     # the summary's text and whether it is a refusal

    @property
    def loaded(self) -> bool:
        """The model's answer for the value in its field is in (what tests and the key walk wait on)."""
        return self._answer is not None and self._answer[0] == self._ticket

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
                # At most 35 characters: what the field shows at 80 columns.
                yield from text("prompt_file", "optional: JSON {system,user}/text")
                yield from text("name", "optional")
                yield Label(FIELDS["oracle"])
                yield Checkbox("only p*, struct vs shuffled", value=v["oracle"], id="oracle")
                yield Label(FIELDS["stop_when"])
                yield Select(STOP_CHOICES, value=v["stop_when"], allow_blank=False, id="stop_when")
                yield from text("alpha", f"empty = {DEFAULT_ALPHA:g}")
                yield from text("stop_width", f"empty = {DEFAULT_TOLERANCE:g} (best), {DEFAULT_PRECISION:g} (±)")
            yield Static("", id="summary", classes="summary")
            yield Static("", id="form-error", classes="form-error")
            yield Button("Start (ctrl+s)", id="start", variant="primary", compact=True)

    def on_mount(self) -> None:
        self._check_model(self.form()["model"], delay=0)
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
            "stop_when": self.query_one("#stop_when", Select).value, "alpha": self._value("alpha"),
            "stop_width": self._value("stop_width"),
        }

    def _refresh_summary(self) -> FormError | None:
        """Recompute the summary line; return the error that blocks starting, if any."""
        summary = self.query_one("#summary", Static)
        form = self.form()
        try:
            if form["dataset"] in self.problems:
                raise FormError("dataset", f"{FIELDS['dataset']}: {form['dataset']}: {self.problems[form['dataset']]}")
            text = describe_plan(form, self.datasets.get(form["dataset"], 0),
                                 self._answer[1] if self.loaded else None, checking=not self.loaded)
            if not self.loaded and self._start_with is not None:
                text += " [dim](Start waits for it)[/dim]"
        except FormError as exc:
            self._show_summary(summary, f"✗ {esc(str(exc))}", invalid=True)
            return exc
        self._show_summary(summary, text, invalid=False)
        return None

    def _show_summary(self, summary: Static, text: str, *, invalid: bool) -> None:
        # Every key in a field recomputes the summary, and a changed Static lays the whole form out again
        # (tens of ms a key, seconds on a loaded machine): an unchanged line is left alone.
        if self._summary_shown != (text, invalid):
            self._summary_shown = (text, invalid)
            summary.set_class(invalid, "invalid")
            summary.update(text)

    def show_error(self, error: FormError, *, planned: bool = False) -> None:
        """Say why the run cannot start, naming the field, and put the cursor there; the typed values stay.

        ``planned``: the core refused it while planning (e.g. a run name taken by another
        config), which the summary cannot know: it gets a line of its own until that field changes.
        """
        if planned:
            self.error = error
            # The values it was refused for: the line goes when one of them changes, not when a list announces
            # the value it opened with (Select posts a change as it mounts, which hid the reason at once).
            self.refused = self.form()
            box = self.query_one("#form-error", Static)
            box.update(f"Cannot start: {esc(str(error))}")
            box.display = True
        else:
            summary = self.query_one("#summary", Static)
            self._show_summary(summary, f"✗ Cannot start: {esc(str(error))}", invalid=summary.has_class("invalid"))
        if error.field:
            widget = self.query_one(f"#{error.field}")
            widget.focus()
            widget.scroll_visible()

    def _check_model(self, spec: str, *, delay: float | None = None) -> None:
        """Check ``spec`` after ``delay`` seconds (None: ``CHECK_DELAY``, read now) in a worker; whatever was asked
        before is no longer awaited."""
        delay = CHECK_DELAY if delay is None else delay
        self._ticket, self._spec = self._ticket + 1, spec
        if self._debounce is not None:
            self._debounce.stop()
            self._debounce = None
        if self._worker is not None:
            self._worker.cancel()   # a thread runs on to its deadline, but its answer is dropped (its ticket is old)
            self._worker = None
        if delay:
            ticket = self._ticket
            self._debounce = self.set_timer(delay, lambda: self._start_check(ticket, spec))
        else:
            self._start_check(self._ticket, spec)

    def _start_check(self, ticket: int, spec: str) -> None:
        self._debounce = None
        if ticket == self._ticket:
            self._worker = self._run_check(ticket, spec)

    @work(thread=True, exit_on_error=False, group="model-check")
    def _run_check(self, ticket: int, spec: str) -> None:
        try:
            # The short deadline is for a served model; a GGUF is loaded once per file (the core caches it).
            answer: Path | str | FormError = check_form_model(spec, timeout=CHECK_TIMEOUT)
        except FormError as exc:
            answer = exc
        self.post_message(self.ModelChecked(ticket, spec, answer))

    def on_run_form_model_checked(self, message: ModelChecked) -> None:
        if message.ticket != self._ticket:
            return          # the field changed since: this answer is for a value no longer there
        self._answered(message.answer)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker is self._worker:
            # A bug in the check: shown as the app shows every worker's failure, and Start stays blocked.
            self.app.worker_errors.append(event.worker.error)
            self.app.show_error("Checking the model failed", event.worker.error)
            self._answered(FormError("model", f"{FIELDS['model']}: could not be checked: {event.worker.error}"))

    def _answered(self, answer: Path | str | FormError) -> None:
        self._answer, self._worker = (self._ticket, answer), None
        start, self._start_with = self._start_with, None
        self._refresh_summary()
        if start is not None:
            self._submit(ask_again=False)

    def _changed(self, wid: str | None) -> None:
        if wid == "model" and self.form()["model"] != self._spec:
            self._check_model(self.form()["model"])
        if self._start_with is not None and self.form() != self._start_with:
            self._start_with = None
            self.notify("Not started: a field changed while the model was checked (ctrl+s starts).", timeout=5)
        self._refresh_summary()
        if self.error is None or self.error.field not in (wid, None):
            return
        now = self.form()
        if now[wid] != self.refused[wid] if self.error.field else now != self.refused:
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
        self._submit(ask_again=True)

    def _submit(self, *, ask_again: bool) -> None:
        """Start, or say why not; while the model is being checked, start once it passes.

        ``ask_again``: a served model refused earlier is asked again first (its server may be up by now).
        """
        error = self._refresh_summary()
        if error is None and self.error is not None and self.form() == self.refused:
            error = self.error      # refused while planning, and nothing changed since: the same answer
        if ask_again and self.loaded and error is self._answer[1] and _served(self._spec):
            self._check_model(self._spec, delay=0)
            error = None            # the other fields were fine: the model's refusal is only raised after theirs
        if error is None and not self.loaded:
            self._start_with = self.form()
            self._refresh_summary()
            return
        if error is not None:
            self.show_error(error)
            # Said where the eye is too: pressed again, the summary line would not change.
            self.notify(f"Cannot start: {error}", severity="error", timeout=5)
            return
        self.dismiss(self.form())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_submit()

    def action_cancel(self) -> None:
        self.dismiss(None)
