"""Helpers for driving the real app with Textual's Pilot (shared by every TUI test module)."""

from __future__ import annotations

import asyncio
import threading

from llama_server import Canned

SIZE = (120, 40)
SMALL = (80, 24)
WIDE = (200, 50)
# How long a wait may last before the test fails. Only a safety net (each wait ends as soon as its
# condition holds): generous, as a loaded 2-core machine runs workers and the real model slowly.
PATIENCE = 120.0
MODEL_PATIENCE = 900.0  # a run with the real model, its load included


def row_at(table, index: int) -> dict[str, str]:
    """A table's row as its columns' keys name the cells: a test reads the column it means, wherever it stands."""
    return {column.key.value: str(cell) for column, cell in zip(table.ordered_columns, table.get_row_at(index))}


async def wait_for(pilot, condition, timeout=PATIENCE, step=0.05, what="condition"):
    """Let the app work until ``condition()`` holds (workers run in threads).

    Every TUI test waits on what it needs to see, never on a guessed delay, so a loaded machine makes
    it slower, not flaky. The condition is checked once what was posted has been handled and the
    screen laid out, then again after ever longer pauses, from a few milliseconds up to ``step``:
    a wait ends about when its condition comes true, without a check every millisecond.
    ``what`` names the condition in the failure (a callable: computed when it fails).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pause = 0.0
    while loop.time() < deadline:
        await pilot.pause(pause)
        if condition():
            return
        fail_on_a_bug(pilot.app)
        pause = min(step, max(2 * pause, 0.005))
    raise AssertionError(f"{what() if callable(what) else what} not reached in {timeout:.0f} s")


# What a worker may raise for the user to read (a bad input, the machine's fault, a missing name):
# shown in a dialog, as designed. Anything else is a bug, and no condition waited on will come.
EXPECTED_ERRORS = (ValueError, LookupError, RuntimeError, OSError)


def fail_on_a_bug(app) -> None:
    """Fail now, with its traceback, if a worker of ``app`` raised something other than an expected error."""
    bugs = [e for e in getattr(app, "worker_errors", ()) if not isinstance(e, EXPECTED_ERRORS)]
    if bugs:
        raise AssertionError(f"a worker raised {type(bugs[0]).__name__}: {bugs[0]}") from bugs[0]


async def until_loaded(pilot, screen=None, timeout=PATIENCE):
    """Wait until the screen on top (of type name or mode ``screen``, if given) shows what its workers loaded.

    ``WorkbenchScreen.loaded``: shown, and every result its workers owe applied (on the
    Ledger and Retrieval screens, the full bootstrap after the quick one).
    """
    app = pilot.app

    def ready():
        top = app.screen
        mode_on_top = app.current_mode == screen and len(app.screen_stack) == 1
        if screen is not None and type(top).__name__ != screen and not mode_on_top:
            return False
        return getattr(top, "loaded", False)

    await wait_for(pilot, ready, timeout=timeout, what=f"{screen or 'the screen'} loaded")
    return app.screen


async def type_text(pilot, text):
    """Type ``text`` key by key, as a user would."""
    for ch in text:
        await pilot.press(ch if ch != " " else "space")


def heading(app) -> str:
    """The rendered text of the current screen's ``#heading``."""
    return str(app.screen.query_one("#heading").render())


def screen_text(app) -> str:
    """Everything the current screen shows, as plain text (for asserting what a user reads)."""
    return "\n".join(str(w.render()) for w in app.screen.query("Static, Label"))


def screen_lines(app) -> list[str]:
    """The screen on top as drawn, row by row (the characters a user reads, dialogs and borders included)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def snap_app(db):
    """The app for a snapshot: no live polling, so the picture cannot change under the camera."""
    from workbench.tui.app import WorkbenchApp

    return WorkbenchApp(db, poll_seconds=3600)


async def settle(pilot, screen=None):
    """For a screenshot: the screen on top has loaded (see ``until_loaded``) and has been drawn."""
    await until_loaded(pilot, screen)
    await pilot.wait_for_scheduled_animations()


def settled_after(*steps):
    """A snapshot's ``run_before``: the first screen loaded, then for each ``(key, screen)`` the key
    pressed and that screen (a type name or a mode) loaded. Keys go here, not in snap_compare's
    ``press``: those are pressed after ``run_before`` and nothing waits for what they load."""

    async def run_before(pilot):
        await settle(pilot)
        for key, screen in steps:
            await pilot.press(key)
            await settle(pilot, screen)

    return run_before


def palette_highlights(app, prompt: str) -> bool:
    """The command palette's search has put ``prompt`` on its highlighted line (enter would run it)."""
    options = app.screen.query("CommandList")
    if not options:
        return False
    options = options.first()
    index = options.highlighted
    return index is not None and prompt in str(options.get_option_at_index(index).prompt)


async def run_from_palette(pilot, app, command: str) -> None:
    """Open the command palette, type ``command``, wait until it is highlighted and press enter."""
    await pilot.press("ctrl+p")
    await type_text(pilot, command)
    await wait_for(pilot, lambda: palette_highlights(app, command))
    await pilot.press("enter")


async def open_runs(pilot, rows: int = 1):
    """Press r and wait until the Runs screen lists ``rows`` runs; returns its table."""
    app = pilot.app
    await pilot.press("r")
    await wait_for(pilot, lambda: app.current_mode == "runs" and app.screen.query_one("#runs").row_count == rows,
                   what=f"Runs listing {rows} runs")
    return app.screen.query_one("#runs")


def footer_line(app) -> str:
    """The footer as the terminal shows it: each key and label drawn where it sits, cut off where the
    screen (or the command palette's hint, docked on the right) begins to hide it."""
    footer = app.screen.query_one("Footer")
    palette = [w.region.x for w in footer.query("FooterKey.-command-palette")]
    end = min(palette + [app.size.width])
    line = [" "] * app.size.width
    for w in footer.query("FooterKey, FooterLabel"):
        if w.has_class("-command-palette") or not w.region.width:
            continue
        for i, ch in enumerate(str(w.render())):
            if w.region.x + i < end:
                line[w.region.x + i] = ch
    return "".join(line[:end])


class EchoBackend:
    """Stands in for the model where only that a model answered matters, not what: every answer the same."""

    name, model_id, chat_template, concurrency = "echo", "echo-model", "", 1

    def render(self, messages):
        import json

        from workbench.models.base import Prompt

        return Prompt(tuple((m["role"], m["content"]) for m in messages), json.dumps(messages), tokens=10)

    def generate(self, prompt, sampling, json_schema=None, grammar=None):
        from workbench.models.base import Generation

        return Generation("William Dieterle", 10, 4, 10, 0.001, "stop")

    def close(self) -> None:
        pass


class Turns:
    """How far a worker may go: each :meth:`take` waits for a turn the test gives (:meth:`allow`), or for
    :meth:`release`, after which none waits (an hour passing too: a test that failed lets its threads go)."""

    def __init__(self, free: int = 0):
        self._lock = threading.Condition()
        self._left, self._open = free, False

    def take(self) -> None:
        with self._lock:
            self._lock.wait_for(lambda: self._open or self._left > 0, timeout=3600)
            self._left -= 1

    def allow(self, n: int = 1) -> None:
        """Let ``n`` more takers through."""
        with self._lock:
            self._left += n
            self._lock.notify_all()

    def release(self) -> None:
        """Let every taker through, now and later."""
        with self._lock:
            self._open = True
            self._lock.notify_all()


class PacedServer:
    """A served model (tests/llama_server.py's ``Canned``) whose every answer waits for a turn the test gives
    (``allow``): a run another process executes through it commits a job only when the test lets it, however
    fast or loaded the machine. Every answer is the same: what a model says does not matter here, only when
    each job commits. Its model is ``m`` at ``url``; ``close()`` lets every answer go and stops it."""

    ANSWER = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "William Dieterle"},
                           "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 4}}

    def __init__(self):
        self.turns = Turns()
        self.allow, self.release = self.turns.allow, self.turns.release
        self.server = Canned(answer=lambda request: self.ANSWER, delay=self._turn)
        self.url = self.server.url

    def _turn(self, number: int) -> float:
        self.turns.take()
        return 0.0

    def close(self) -> None:
        self.release()
        self.server.close()


def plan_served_run(db, name: str, server: PacedServer, questions: int = 6) -> None:
    """Plan ``name``: one cell of ``questions`` MetaQA questions for ``server``'s model (nothing executed)."""
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.sweep import SweepConfig, plan_sweep
    from workbench.store import open_store

    store = open_store(db)
    try:
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=questions), name=name,
                   generation=GenerationConfig(backend="openai", base_url=server.url, model="m",
                                               max_tokens=16).as_dict())
    finally:
        store.close()


def answered_run(db, name: str, questions: int = 3) -> None:
    """Plan a one-cell run ``name`` of ``questions`` MetaQA questions with a model, and let EchoBackend answer
    them all: a finished run a model answered, without loading one."""
    from workbench.runs.executor import execute
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.sweep import SweepConfig, plan_sweep
    from workbench.store import open_store
    from workbench.store.queries import get_run

    store = open_store(db)
    try:
        plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",), limit=questions), name=name,
                   generation=GenerationConfig(answer_format="text", max_tokens=8).as_dict())
        assert execute(store, get_run(store, name), backend=EchoBackend()).done == questions
    finally:
        store.close()
