"""Every request to a served model has a deadline, and its up-front check asks what the run needs.

``--timeout`` bounds a request as a whole: connecting, sending, the status line, the headers and
the body. A stand-in server that trickles its answer (one byte every 0.05 s, under any per-read
timeout) is given up at the deadline, by the backend and by every CLI verb that calls a served
model, with one line and nothing written. The check before a run (``GET /models`` naming the
model, then one tiny request in the model's role) keeps to one deadline of ``--timeout`` in all,
and refuses a server that answers anything else than an OpenAI model list naming the model.

The servers here misbehave on purpose (test doubles of a server, not of a model): what is under
test is the client.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from conftest import copy_db, every_row, import_films_kg
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.errors import BadInput, EnvironmentFault
from workbench.models.base import ModelError, Sampling
from workbench.models.check import EMBEDDING, GENERATOR, check_model_options
from workbench.models.openai_http import OpenAIBackend, ServerUnreachable
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store

# Short, so each give-up costs the suite little; a trickled byte (every 0.05 s) still comes well within it.
TIMEOUT = 0.2
# What a whole answer may overrun the deadline by, on a busy 2-core box: the watchdog's wake-up.
SLACK = 1.5


class Trickler:
    """A loopback server that reads each request whole, then answers one byte every ``every`` seconds.

    ``head=False``: the status line and headers at once, announcing a ``Content-Length`` of 100,000,
    then the body byte by byte. ``head=True``: the status line and headers themselves byte by byte
    (a header long enough never to end). Every byte comes well within any per-read timeout, so only
    a deadline on the whole answer gives up. ``requests`` lists the request lines it read. ``port`` 0
    picks a free one.
    """

    def __init__(self, *, head: bool = False, every: float = 0.05, port: int = 0):
        self.head, self.every = head, every
        self.requests: list[str] = []
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._sock = socket.create_server(("127.0.0.1", port))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conns.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:])
                           if k.strip().lower() == "content-length"), 0)
            while len(body) < length:
                body += conn.recv(65536)
            with self._lock:
                self.requests.append(lines[0])
            if self.head:
                trickle = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"x" * 100_000
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                trickle = b"{" + b" " * 99_999
            for i in range(len(trickle)):
                conn.sendall(trickle[i:i + 1])
                time.sleep(self.every)
        except OSError:   # the client gave up
            pass

    def close(self) -> None:
        """Stop listening and end every connection: a client still reading sees the end of its answer."""
        with self._lock:
            self._closed = True
            # shutdown, not close alone: a close does not wake the thread blocked in accept (the socket would
            # go on listening) nor reach the peer of a connection another thread is sending on.
            for sock in (self._sock, *self._conns):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


@pytest.fixture(params=[False, True], ids=["trickled-body", "trickled-head"])
def trickler(request):
    server = Trickler(head=request.param)
    yield server
    server.close()


def within(seconds: float, call, server: Trickler):
    """Run ``call()`` in a thread for at most ``seconds``: (its exception or result, elapsed). A call still running
    then fails the test rather than hang it (the code before deadlines waited on a trickle for ever): ``server``
    is closed first, which ends the call (closing the client's connection under its reading thread would not)."""
    outcome: list = []

    def target():
        try:
            outcome.append(call())
        except BaseException as exc:   # noqa: BLE001 (handed to the test as it is)
            outcome.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        server.close()
        worker.join(5)
    assert outcome and time.monotonic() - started < seconds, f"still waiting after {seconds} s: no deadline"
    return outcome[0], time.monotonic() - started


# ---------------------------------------------------------------- the backend: one deadline per request

def test_check_gives_up_a_trickling_server_at_its_deadline(trickler):
    """Three attempts are allowed, but the check keeps to one deadline of ``timeout`` in all."""
    backend = OpenAIBackend(trickler.url, "m", timeout=TIMEOUT)
    try:
        error, elapsed = within(10, backend.check, trickler)
    finally:
        backend.close()
    assert isinstance(error, ServerUnreachable), error
    assert str(error) == f"{trickler.url}/models: no answer within {TIMEOUT:g} s (1 attempt; --timeout sets it)"
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + SLACK
    assert trickler.requests == ["GET /v1/models HTTP/1.1"]


def test_generate_gives_up_a_trickling_server_at_its_deadline(trickler):
    backend = OpenAIBackend(trickler.url, "m", timeout=TIMEOUT, retries=1)
    prompt = backend.render([{"role": "user", "content": "hi"}])
    try:
        error, elapsed = within(10, lambda: backend.generate(prompt, Sampling(max_tokens=4)), trickler)
    finally:
        backend.close()
    assert isinstance(error, ServerUnreachable), error
    assert str(error) == f"{trickler.url}/chat/completions: no answer within {TIMEOUT:g} s (1 attempt; --timeout sets it)"
    assert elapsed < TIMEOUT + SLACK


def test_each_retry_of_a_request_has_its_own_deadline():
    """A pass's request keeps its retries, each bounded as a whole: two attempts, about two timeouts."""
    server = Trickler()
    backend = OpenAIBackend(server.url, "m", timeout=TIMEOUT, retries=2, backoff=0.01)
    prompt = backend.render([{"role": "user", "content": "hi"}])
    try:
        error, elapsed = within(10, lambda: backend.generate(prompt, Sampling(max_tokens=4)), server)
    finally:
        server.close()
        backend.close()
    assert isinstance(error, ServerUnreachable) and f"no answer within {TIMEOUT:g} s (2 attempts" in str(error)
    assert 2 * TIMEOUT * 0.9 <= elapsed < 2 * TIMEOUT + SLACK
    assert server.requests == ["POST /v1/chat/completions HTTP/1.1"] * 2


def test_threads_each_keep_their_own_deadline():
    """The executor calls from ``concurrency`` threads: each request is given up at its own deadline."""
    server = Trickler()
    backend = OpenAIBackend(server.url, "m", timeout=TIMEOUT, retries=1, concurrency=4)
    prompt = backend.render([{"role": "user", "content": "hi"}])
    errors: list[BaseException] = []

    def ask():
        try:
            backend.generate(prompt, Sampling(max_tokens=4))
        except ModelError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask, daemon=True) for _ in range(4)]
    started = time.monotonic()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, started + 10 - time.monotonic()))
        waiting, elapsed = sum(t.is_alive() for t in threads), time.monotonic() - started
    finally:
        server.close()   # first: it ends a thread still waiting (without deadlines, all four)
        for t in threads:
            t.join(5)
        backend.close()
    assert waiting == 0 and elapsed < TIMEOUT + SLACK, f"{waiting} threads still waiting after {elapsed:.1f} s"
    assert len(errors) == 4 and all(f"no answer within {TIMEOUT:g} s" in str(e) for e in errors)


# ---------------------------------------------------------------- the check: what the run needs

class Stand:
    """A loopback server: ``GET /models`` answers ``listing``; a POST answers ``chat`` (``/chat/completions``) or
    ``vectors`` (``/embeddings``), a dict as a 200 or a ``(status, body)``, after ``delay`` seconds.
    ``posts`` lists the POSTed paths."""

    def __init__(self, listing, *, chat=None, vectors=None, delay: float = 0.0):
        self.posts: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def send(self, reply) -> None:
                status, body = reply if isinstance(reply, tuple) else (200, reply)
                raw = json.dumps(body).encode()
                time.sleep(delay)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                self.send(listing if self.path.endswith("/models") else (404, {"error": "no such path"}))

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.posts.append(self.path)
                reply = chat if self.path.endswith("/chat/completions") else vectors
                self.send(reply if reply is not None else (404, {"error": "no such path"}))

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # A short poll: close() waits for the loop's next look, half a second a test at the default poll.
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


LISTED = {"object": "list", "data": [{"id": "m", "object": "model"}, {"id": "other", "object": "model"}]}
ONE_TOKEN = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "length"}]}
ONE_VECTOR = {"data": [{"index": 0, "embedding": [0.6, 0.8]}]}


@pytest.mark.parametrize("listing, said", [
    ({}, "answered {} (not an OpenAI model list"),
    ([1, 2], "answered [1, 2] (not an OpenAI model list"),
    ({"data": 5}, 'answered {"data": 5} (not an OpenAI model list'),
    ({"data": [{"name": "m"}]}, 'answered {"data": [{"name": "m"}]} (not an OpenAI model list'),
    ({"data": [{"id": "a"}, {"id": "b"}]}, "model 'm' is not among the served models: a, b"),
    ({"data": []}, "model 'm' is not among the served models: (the server lists none)"),
])
def test_a_listing_that_does_not_name_the_model_is_refused_in_one_line_and_nothing_else_is_asked(listing, said):
    server = Stand(listing, chat=ONE_TOKEN)
    try:
        with pytest.raises(BadInput) as info:
            check_model_options(("--model", f"{server.url}#m", GENERATOR), timeout=5)
    finally:
        server.close()
    message = str(info.value)
    assert message.startswith(f"--model: {server.url}") and said in message and "\n" not in message
    assert server.posts == []   # no tiny request after a listing that cannot serve


def test_a_listed_model_is_proven_in_its_role_by_one_tiny_request():
    server = Stand(LISTED, chat=ONE_TOKEN, vectors=ONE_VECTOR)
    backend = OpenAIBackend(server.url, "m", timeout=5)
    try:
        assert backend.check() == ["m", "other"] and server.posts == []       # no role: the listing alone
        check_model_options(("--model", f"{server.url}#m", GENERATOR), timeout=5)
        check_model_options(("--embedding-model", f"{server.url}#m", EMBEDDING), timeout=5)
        assert server.posts == ["/v1/chat/completions", "/v1/embeddings"]
        # Proven once in this process: a second check asks the listing only.
        check_model_options(("--model", f"{server.url}#m", GENERATOR), timeout=5)
        assert server.posts == ["/v1/chat/completions", "/v1/embeddings"]
    finally:
        backend.close()
        server.close()


@pytest.mark.parametrize("role, reply, said", [
    (GENERATOR, {"result": "OK"}, "(not an OpenAI chat completion: no choices[0].message)"),
    (GENERATOR, {"choices": []}, "(not an OpenAI chat completion: no choices[0].message)"),
    (GENERATOR, None, "chat/completions: HTTP 404"),
    (EMBEDDING, {"vectors": [[1.0]]}, "embeddings: unexpected response shape"),
    (EMBEDDING, None, "embeddings: HTTP 404"),
])
def test_a_listed_model_that_does_not_serve_its_role_is_refused_naming_the_option(role, reply, said):
    server = Stand(LISTED, chat=reply if role == GENERATOR else None, vectors=reply if role == EMBEDDING else None)
    try:
        with pytest.raises(BadInput) as info:
            check_model_options(("--the-option", f"{server.url}#m", role), timeout=5)
    finally:
        server.close()
    assert str(info.value).startswith(f"--the-option: {server.url}") and said in str(info.value)
    assert "\n" not in str(info.value)


def test_a_model_named_without_its_ollama_tag_is_found_as_name_latest():
    """Ollama lists ``llama3:latest`` and serves it as ``llama3`` too: the name a user writes is accepted."""
    server = Stand({"data": [{"id": "m:latest"}]}, chat=ONE_TOKEN)
    try:
        check_model_options(("--model", f"{server.url}#m", GENERATOR), timeout=5)
    finally:
        server.close()
    assert server.posts == ["/v1/chat/completions"]


def test_the_listing_and_the_tiny_request_share_one_deadline():
    """Each answers in 0.35 s, under a 0.5 s timeout, but not both: the check as a whole is late."""
    timeout = 0.5   # its own: each answer must come well within it, or the listing alone would be late
    server = Stand(LISTED, chat=ONE_TOKEN, delay=0.35)
    try:
        started = time.monotonic()
        with pytest.raises(EnvironmentFault) as info:
            check_model_options(("--model", f"{server.url}#m", GENERATOR), timeout=timeout)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert f"--model: {server.url}/chat/completions: no answer within 0.5 s" in str(info.value)
    assert elapsed < timeout + SLACK


# ---------------------------------------------------------------- every verb, from the command line

@pytest.fixture(scope="module")
def template(tmp_path_factory, metaqa_template) -> Path:
    """MetaQA imported (``metaqa``) with a model-free sweep (``sweep``) and the films KG (``films``), built once."""
    directory = tmp_path_factory.mktemp("served-deadline")
    store = open_store(copy_db(metaqa_template, directory / "wb.db"))
    try:
        plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",), limit=2), name="sweep")
        import_films_kg(store, directory)
    finally:
        store.close()
    return directory / "wb.db"


def db_with_served_run(template: Path, tmp_path: Path, url: str) -> Path:
    """A copy of the template with the run ``served`` planned for ``url#m`` (planning asks no server)."""
    db = copy_db(template, tmp_path / "wb.db")
    store = open_store(db)
    try:
        plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",), limit=2), name="served",
                   generation=GenerationConfig(backend="openai", base_url=url, model="m", max_tokens=8).as_dict())
    finally:
        store.close()
    return db


SERVED = ("--backend", "openai", "--base-url", "{url}", "--model", "m")
VERBS = {
    "run": ("run", "metaqa", "--limit", "2", "--k", "1", "--budget", "64", "--format", "score", *SERVED),
    "claims run": ("claims", "run", "sweep", "--decomposer", "llm", "--verifiers", "lexical", *SERVED),
    "dedup run": ("dedup", "run", "films", *SERVED),
    "searchain run": ("searchain", "run", "metaqa", "--limit", "1", *SERVED),
    "retrieval judge": ("retrieval", "judge", "metaqa", "--k", "2", "--limit", "1", *SERVED),
    "resume": ("resume", "served"),
}


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verb_gives_up_a_trickling_server_within_its_timeout_and_writes_nothing(verb, template, tmp_path,
                                                                                      capsys):
    """The verb's up-front check meets the trickle: exit 1 within ``--timeout`` (and the verb's imports), one line
    naming the deadline, every row as it was (the code before deadlines was still waiting when killed at 30 s).
    Run in this process as the command line runs it; a watchdog closes the server at 10 s, which would end (too
    late) a verb that set no deadline."""
    server = Trickler()
    watchdog = threading.Timer(10, server.close)
    try:
        # Only `resume` needs the served run (planning one reads the whole MetaQA KB for its manifest).
        db = (db_with_served_run(template, tmp_path, server.url) if verb == "resume"
              else copy_db(template, tmp_path / "wb.db"))
        before = every_row(db)
        argv = ["--db", str(db), *(a.format(url=server.url) for a in VERBS[verb]), "--timeout", str(TIMEOUT)]
        watchdog.start()
        started = time.monotonic()
        code = main(argv)
        elapsed = time.monotonic() - started
    finally:
        watchdog.cancel()
        server.close()
    err = capsys.readouterr().err
    assert code == 1, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"{server.url}/models: no answer within {TIMEOUT:g} s" in errors[0], err
    assert "Traceback" not in err
    assert elapsed < 10, f"{verb} took {elapsed:.1f} s"
    assert every_row(db) == before
