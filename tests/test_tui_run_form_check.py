"""The New-run form checks its model in a worker, never on the UI thread.

A served model whose server accepts the connection and never answers once froze the screen (no
redraw, Esc ignored) for the whole 120 s default timeout on every key typed into the model field.
Now a key only schedules a check of the value the field settles on; the check runs in a thread
with a short deadline; the summary says "checking the model…" and then the answer, and only the
answer for the value in the field is ever shown.

The stand-in server below is a socket that listens, accepts and never replies. Its watchdog closes
every connection ``FROZEN`` seconds after the first: on the code that checked on the UI thread, that gives the
loop back so the test fails on its timings instead of hanging (``asyncio.wait_for`` cannot fire in a
loop that is blocked).

The scenarios that plan nothing share one app (tests/tui_shared_a.py's ``SharedApp``, made fresh before each):
each opens the form anew, and its silent server is let go when it ends, so no check's thread outlives it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from textual.widgets import Input

from conftest import copy_db
from tui_shared_a import running
from tui_shared_b import typed
from tuikit import SIZE, until_loaded, wait_for
from tuistates import no_model_runs
from workbench.store import open_store
from workbench.store.queries import list_runs
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens import run_form
from workbench.tui.screens.run_form import CHECK_TIMEOUT, CHECKING, RunForm

# Seconds after which the silent server lets go of a frozen UI thread (far past any check's deadline).
FROZEN = 20.0
# Seconds one key may take to be handled while a check runs: the UI thread is never the one waiting (a
# blocked thread would wait out the check's DEADLINE, 2 s; a loaded 2-core machine took 1.1 s for one key).
PROMPT = 1.5
# The most a scenario may take, deadlines included (it fails, not hangs, when the UI thread is blocked).
SCENARIO = 90.0


class SilentServer:
    """Accepts connections on 127.0.0.1 and never answers; ``release()`` closes them (and every later one)."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._released = threading.Event()
        # Counted from the first connection held, not from here: a slow start of the app is no frozen UI thread.
        self._watchdog = threading.Timer(FROZEN, self.release)
        threading.Thread(target=self._accept, daemon=True).start()

    def ref(self, model: str) -> str:
        """The served-model reference of ``model`` on this server."""
        return f"http://127.0.0.1:{self.port}/v1#{model}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return      # closed
            self.accepted += 1
            if self._released.is_set():
                conn.close()
            else:
                self._held.append(conn)
                if len(self._held) == 1:
                    self._watchdog.start()

    def release(self) -> None:
        self._released.set()
        for conn in self._held:
            conn.close()

    def close(self) -> None:
        self._watchdog.cancel()
        self.release()
        self.listener.close()


@pytest.fixture
def silent():
    server = SilentServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory, swept_template):
    """The swept database the scenarios that plan nothing share (each asserts it planned nothing)."""
    return copy_db(swept_template, tmp_path_factory.mktemp("form-check") / "wb.db")


@pytest.fixture(scope="module")
def shared(shared_db):
    """One app on ``shared_db`` for the scenarios that plan nothing: ``shared.walk(scenario)``."""
    yield from running(shared_db)


def walk(shared, scenario) -> None:
    """``scenario(pilot)`` in the shared app, made fresh; it fails, not hangs, past ``SCENARIO`` seconds."""
    shared.walk(lambda pilot: asyncio.wait_for(scenario(pilot), SCENARIO))


# The form's deadline for a served model in these tests: what they look at is the order of things, and the
# silent server makes every check that asks it last this long (unless it lets go first, as at a test's end).
DEADLINE = 2.0


@pytest.fixture(autouse=True)
def short_deadline(monkeypatch):
    """A 2 s deadline for the form's check of a served model (5 s in use: ``CHECK_TIMEOUT``)."""
    monkeypatch.setattr(run_form, "CHECK_TIMEOUT", DEADLINE)
    return DEADLINE


@pytest.fixture
def quick_deadline(monkeypatch):
    """A 1 s deadline for the form's check of a served model: what these tests look at is the order of things."""
    monkeypatch.setattr(run_form, "CHECK_TIMEOUT", 1.0)
    return 1.0


def summary(form: RunForm) -> str:
    return str(form.query_one("#summary").render())


async def open_form(pilot) -> RunForm:
    """Runs, n: the form, its default model checked, then the cursor in the model field, emptied."""
    app = pilot.app
    await pilot.press("r")
    await until_loaded(pilot, "runs")
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, RunForm) and app.screen.loaded, what="the form checked")
    form = app.screen
    form.query_one("#model", Input).focus()
    await pilot.press("end", "ctrl+u")        # the whole value deleted, as a user would
    assert form.query_one("#model", Input).value == ""
    return form


async def type_promptly(pilot, text: str, within: float = PROMPT) -> None:
    """Type ``text`` key by key, each key handled within ``within`` seconds (tests/tui_shared_b.py's ``typed``:
    a key waits for the one before to be handled, so a UI thread blocked by one key's handling shows as a slow
    key, that one's or the next's)."""
    await typed(pilot, text, within)


def test_a_silent_server_typed_into_the_model_field_says_checking_then_its_refusal_and_keys_keep_working(
        shared, silent, monkeypatch):
    # While typing, the field settles a minute after a key (0.4 s in use): a machine slow to handle one key still
    # checks once. The last key schedules the check with a short delay (read when a key schedules it).
    monkeypatch.setattr(run_form, "CHECK_DELAY", 60.0)
    ref = silent.ref("st")

    async def scenario(pilot):
        app = pilot.app
        form = await open_form(pilot)
        loop = asyncio.get_running_loop()
        await type_promptly(pilot, ref[:-1])
        monkeypatch.setattr(run_form, "CHECK_DELAY", 0.2)
        await type_promptly(pilot, ref[-1])
        done_typing = loop.time()
        assert CHECKING in summary(form)        # at once: the field is settling
        await wait_for(pilot, lambda: CHECKING in summary(form) and silent.accepted, timeout=1 + 2 * PROMPT,
                       what="the check asking the server, the summary saying so")
        # The app answers while the check waits for the server: tab moves on at once.
        began = loop.time()
        await pilot.press("tab")
        assert app.focused.id == "k" and loop.time() - began < PROMPT
        assert CHECKING in summary(form)
        await wait_for(pilot, lambda: form.loaded, timeout=DEADLINE + 10, what="the check's answer")
        waited = loop.time() - done_typing
        said = summary(form)
        assert said.startswith(f"✗ model: http://127.0.0.1:{silent.port}/v1"), said
        assert CHECKING not in said
        # The deadline decided it: the server never answered, and the form waited its deadline (5 s in use,
        # DEADLINE here), not a run's 120 s.
        assert DEADLINE - 0.5 < waited < DEADLINE + 5, waited
        assert CHECK_TIMEOUT <= 5
        # One check for the value typed, not one per key ("…#s", "…#st": each would have asked the server).
        assert silent.accepted == 1

    walk(shared, scenario)


def test_esc_closes_the_form_at_once_while_a_served_model_is_being_checked(shared, silent):
    async def scenario(pilot):
        app = pilot.app
        form = await open_form(pilot)
        await type_promptly(pilot, silent.ref("silent-model"))
        await wait_for(pilot, lambda: silent.accepted == 1 and CHECKING in summary(form), timeout=2 * PROMPT,
                       what="the check waiting on the server")
        loop = asyncio.get_running_loop()
        began = loop.time()
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RunForm), timeout=PROMPT, step=0.02,
                       what="the form closed by esc")
        assert loop.time() - began < PROMPT
        assert app.current_mode == "runs"

    walk(shared, scenario)


def test_the_answer_for_a_value_no_longer_in_the_field_is_never_shown(shared, silent, tmp_path, monkeypatch):
    """A slow check (a silent server) is overtaken by a quick one (a missing file): the slow answer, when it
    comes, is dropped; the summary only ever showed "checking…" and the missing file's refusal."""
    answers: list[str] = []
    handle = RunForm.on_run_form_model_checked

    def counted(self, message):
        answers.append(message.spec)
        handle(self, message)

    monkeypatch.setattr(RunForm, "on_run_form_model_checked", counted)
    slow, quick = silent.ref("slow"), str(tmp_path / "missing.gguf")

    async def scenario(pilot):
        form = await open_form(pilot)
        shown: list[str] = []
        box = form.query_one("#summary")
        update = box.update
        box.update = lambda content="", **kw: (shown.append(str(content)), update(content, **kw))[1]
        field = form.query_one("#model", Input)
        field.value = slow
        await wait_for(pilot, lambda: silent.accepted == 1, timeout=2 * PROMPT, what="the slow check asking")
        field.value = quick
        await wait_for(pilot, lambda: form.loaded, timeout=2 * PROMPT, what="the missing file's answer")
        refusal = summary(form)
        assert refusal.startswith(f"✗ model: {quick}"), refusal
        # The slow answer comes now (the server lets go of its connection) rather than at its deadline: either
        # way it comes after the answer for the value in the field, which is what is tested.
        silent.release()
        await wait_for(pilot, lambda: slow in answers, timeout=DEADLINE + 10, what="the slow answer")
        await pilot.pause()     # handled (the handler ran before it was counted) and drawn
        assert summary(form) == refusal, "the slow answer replaced the one for the value in the field"
        assert answers == ["default", quick, slow]      # the form's opening check, then both
        assert not [s for s in shown if str(silent.port) in s], shown

    walk(shared, scenario)


def test_a_value_overtaken_before_it_settles_is_never_checked(shared, silent, tmp_path, monkeypatch):
    """Typed over before the field settled, the served model is not asked for at all: keys only schedule a
    check, and only the value the field settles on is checked."""
    # While typing, the field settles a minute after a key: each key is handled well within that, however loaded
    # the machine. The last key schedules the check of the value typed with a short delay (the delay is read
    # when a key schedules the check), so the test does not wait out the long one.
    monkeypatch.setattr(run_form, "CHECK_DELAY", 60.0)
    second = "/no-such-dir/second.gguf"

    async def scenario(pilot):
        form = await open_form(pilot)
        await type_promptly(pilot, silent.ref("first"), within=3.0)
        await pilot.press("end", "ctrl+u")            # the whole value deleted, and another typed
        await type_promptly(pilot, second[:-1], within=3.0)
        monkeypatch.setattr(run_form, "CHECK_DELAY", 0.2)
        await type_promptly(pilot, second[-1], within=3.0)
        await wait_for(pilot, lambda: form.loaded, what="the answer for the second value")
        assert summary(form).startswith(f"✗ model: {second}")
        assert silent.accepted == 0

    walk(shared, scenario)


def test_start_while_a_served_model_is_checked_waits_then_refuses_with_the_reason(
        shared, shared_db, silent, quick_deadline):
    async def scenario(pilot):
        app = pilot.app
        form = await open_form(pilot)
        await type_promptly(pilot, silent.ref("st"))
        await pilot.press("ctrl+s")
        assert app.screen is form and not app.executions
        assert CHECKING in summary(form) and "Start waits for it" in summary(form)
        await wait_for(pilot, lambda: form.loaded, timeout=quick_deadline + 10, what="the refusal")
        assert summary(form).startswith(f"✗ Cannot start: model: http://127.0.0.1:{silent.port}/v1")
        # A notification is a message the app handles after this handler: waited on, not read at once.
        await wait_for(pilot, lambda: any("Cannot start: model:" in str(n.message) for n in app._notifications),
                       what="the refusal's notification")
        assert app.screen is form and app.focused is form.query_one("#model")
        # Start again: the server is asked again (it may be up by now), and still refused.
        await pilot.press("ctrl+s")
        assert CHECKING in summary(form)
        await wait_for(pilot, lambda: form.loaded, timeout=quick_deadline + 10, what="the second refusal")
        assert silent.accepted == 2
        assert summary(form).startswith("✗ Cannot start: model:") and app.screen is form

    walk(shared, scenario)
    assert [r["name"] for r in runs(shared_db)] == ["sweep"], "nothing was planned"


def test_a_field_changed_after_start_while_the_model_is_checked_starts_nothing(shared, shared_db, silent,
                                                                                quick_deadline):
    """Start waits for the check with the values it was pressed with: another value typed meanwhile is a
    form still being filled in, not one to start."""

    async def scenario(pilot):
        app = pilot.app
        form = await open_form(pilot)
        await type_promptly(pilot, silent.ref("st"))
        await pilot.press("ctrl+s")
        form.query_one("#k", Input).value = "3"
        await wait_for(pilot, lambda: any("Not started: a field changed" in str(n.message)
                                          for n in app._notifications), timeout=2 * PROMPT)
        assert "Start waits" not in summary(form)

    walk(shared, scenario)


class SlowModels(BaseHTTPRequestHandler):
    """A served model's server that lists its model once ``listing`` is set (a test sets it when it has seen
    what the form does meanwhile; each test gives its subclass an Event of its own) and answers a chat completion."""

    listing: threading.Event

    def do_GET(self):  # noqa: N802 (the name http.server calls)
        self.listing.wait(SCENARIO)
        self._answer({"object": "list", "data": [{"id": "st", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer({"choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"},
                                   "finish_reason": "length"}]})

    def _answer(self, data: dict) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


async def test_start_while_the_model_is_checked_starts_the_run_once_it_passes(swept_db, monkeypatch):
    no_model_runs(monkeypatch)            # the run's jobs are answered by EchoBackend: the check is what is tested
    # The deadline in use: the server answers when the test lets it, which on a loaded machine may take seconds.
    monkeypatch.setattr(run_form, "CHECK_TIMEOUT", CHECK_TIMEOUT)
    held = type("HeldModels", (SlowModels,), {"listing": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), held)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    ref = f"http://127.0.0.1:{server.server_address[1]}/v1#st"
    app = WorkbenchApp(swept_db)

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            form = await open_form(pilot)
            for wid, value in (("model", ref), ("k", "1"), ("budget", "64"), ("limit", "2"), ("name", "served")):
                form.query_one(f"#{wid}", Input).value = value
            await pilot.press("ctrl+s")
            assert app.screen is form and "Start waits for it" in summary(form)
            held.listing.set()                                # the server answers the check now
            await wait_for(pilot, lambda: app.screen is not form, timeout=10,
                           what=lambda: f"the run started once the server answered (the form says {summary(form)!r})")
            await wait_for(pilot, lambda: "served" in app.screen.query_one("#runs").rows, what="the run listed")

    try:
        await asyncio.wait_for(scenario(), SCENARIO)
    finally:
        held.listing.set()
        server.shutdown()
        server.server_close()
    assert any(r["name"] == "served" and r["model"] == ref for r in runs(swept_db))


def runs(db) -> list[dict]:
    store = open_store(db)
    try:
        return list_runs(store)
    finally:
        store.close()
