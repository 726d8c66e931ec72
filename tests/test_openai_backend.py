"""The ``openai`` backend, against a real OpenAI-compatible server.

A module-scoped fixture starts ``python -m llama_cpp.server`` on 127.0.0.1 with the
default SmolLM2-135M model (n_ctx 2048), so every assertion about generation, seeds,
JSON schemas and context errors is about what a real server does. The transport and
HTTP-error tests use tiny stdlib servers that misbehave on purpose and count requests.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from workbench.models.base import ModelError, PromptError, Sampling
from workbench.models.openai_http import OpenAIBackend

from genkit import ServedModel
from llama_server import free_port

@pytest.fixture(scope="module")
def server_url(smollm2_server):
    """``python -m llama_cpp.server`` serving the default model; its base URL (…/v1)."""
    return smollm2_server.base


@pytest.fixture
def backend(server_url):
    b = OpenAIBackend(server_url, "smollm2", concurrency=4, timeout=60)
    yield b
    b.close()


def ask(backend, question: str, **sampling):
    prompt = backend.render([{"role": "user", "content": question}])
    return backend.generate(prompt, Sampling(**{"max_tokens": 24, **sampling}))


# -- identity and rendering -----------------------------------------------------------

def test_identity_is_url_and_model_and_the_prompt_is_canonical_messages_json():
    b = OpenAIBackend("http://gpu-box:8000/v1/", "Qwen/Qwen2.5-7B-Instruct", concurrency=16)
    assert (b.name, b.model_id, b.chat_template, b.concurrency) == (
        "openai", "http://gpu-box:8000/v1#Qwen/Qwen2.5-7B-Instruct", "", 16)
    p = b.render([{"role": "user", "content": "Qui a réalisé Kismet ?"}, {"content": "x", "role": "system"}])
    assert p.messages == (("user", "Qui a réalisé Kismet ?"), ("system", "x"))
    assert p.text == '[{"content":"Qui a réalisé Kismet ?","role":"user"},{"content":"x","role":"system"}]'
    assert p.tokens is None


def test_a_base_url_that_is_not_http_is_rejected_up_front():
    with pytest.raises(ModelError, match="base URL"):
        OpenAIBackend("127.0.0.1:8080", "m")


# -- against the real server ----------------------------------------------------------

def test_check_lists_the_served_models(backend):
    assert backend.check() == ["smollm2"]   # the --model_alias it was started with


def test_generate_answers_with_real_token_counts(backend):
    g = ask(backend, "What is the capital of France?")
    assert g.text.strip()
    assert g.prompt_tokens > 0 and g.completion_tokens > 0
    assert g.eval_tokens == g.prompt_tokens          # no KV-reuse accounting over HTTP
    assert g.finish_reason in ("stop", "length")
    assert g.seconds > 0


def test_greedy_with_the_same_seed_is_reproducible(backend):
    # Each from the same KV-cache state (the server would otherwise reuse the first's prompt and
    # evaluate the second in other batches, whose float sums may flip a near-tie).
    # Eight tokens show it as well as a page: every one of them is a greedy pick from the same state.
    ask(backend, "Zzz", max_tokens=1)
    first = ask(backend, "Name three rivers in Europe.", temperature=0.0, seed=11, max_tokens=8)
    ask(backend, "Zzz", max_tokens=1)
    second = ask(backend, "Name three rivers in Europe.", temperature=0.0, seed=11, max_tokens=8)
    assert first.text == second.text


def test_the_seed_is_honoured_when_sampling_from_the_same_cache_state(backend):
    """Seeded sampling reproduces only when the server's KV cache is in the same state.

    llama-cpp-python's server reseeds per request, but it reuses the KV cache of the
    previous prompt: a repeated identical prompt re-evaluates one token, a fresh one the
    whole prompt, and the logits differ in the last bits. Greedy decoding does not care;
    at temperature 1 the draw can. So each sampled request here follows the same
    unrelated prompt, and the two draws match.
    """
    def sampled():
        ask(backend, "Zzz", max_tokens=1)
        return ask(backend, "Write a word.", temperature=1.0, top_p=0.95, seed=1234, max_tokens=8).text
    assert sampled() == sampled()


def test_a_json_schema_constrains_the_output(backend):
    # Bounded (3 items of at most 24 characters), so the grammar closes the object within max_tokens
    # whatever the model writes on this CPU: cut off by max_tokens it would not be JSON.
    bounded = {"type": "object", "properties": {"answers": {"type": "array", "maxItems": 3,
                                                            "items": {"type": "string", "maxLength": 24}}},
               "required": ["answers"]}
    prompt = backend.render([{"role": "user", "content": "Who wrote Hamlet? Reply in JSON with a list of answers."}])
    g = backend.generate(prompt, Sampling(max_tokens=160, repeat_penalty=1.3), json_schema=bounded)
    data = json.loads(g.text)
    assert isinstance(data["answers"], list)
    assert all(isinstance(a, str) for a in data["answers"])


def test_concurrent_generate_calls_from_four_threads(backend):
    questions = [f"What is {i} plus {i}?" for i in range(1, 5)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda q: ask(backend, q, max_tokens=12), questions))
    assert len(results) == 4
    assert all(r.text.strip() and r.completion_tokens > 0 for r in results)


def test_a_prompt_longer_than_the_context_window_is_a_prompt_error(backend):
    """The server answers 400 {"error": {"code": "context_length_exceeded", ...}}."""
    with pytest.raises(PromptError, match="maximum context length is 2048"):
        ask(backend, " ".join(["word"] * 5000))
    assert ask(backend, "Still there?", max_tokens=4).text      # the server (and backend) carry on


# -- transport and HTTP errors --------------------------------------------------------

class _HangUp:
    """A socket server that accepts each connection and closes it at once, counting them."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.recv(65536)
            conn.close()

    def close(self):
        self.sock.close()


def test_transport_errors_are_retried_then_reported():
    hangup = _HangUp()
    try:
        b = OpenAIBackend(f"http://127.0.0.1:{hangup.port}/v1", "m", retries=3, backoff=0.01)
        started = time.monotonic()
        with pytest.raises(ModelError, match="unreachable after 3 attempts"):
            b.generate(b.render([{"role": "user", "content": "hi"}]), Sampling())
        assert hangup.accepted == 3
        assert time.monotonic() - started < 3
    finally:
        hangup.close()


def test_a_closed_port_fails_check_with_a_clear_message():
    b = OpenAIBackend(f"http://127.0.0.1:{free_port()}/v1", "m", retries=2, backoff=0.01)
    with pytest.raises(ModelError, match=r"/v1/models: server unreachable after 2 attempts: ConnectionRefused"):
        b.check()


class _Status500(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self):
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"error": {"message": "CUDA out of memory", "type": "server_error"}}).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_http_errors_are_not_retried():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status500)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        b = OpenAIBackend(url, "m", retries=3, backoff=0.01)
        with pytest.raises(ModelError) as info:
            b.generate(b.render([{"role": "user", "content": "hi"}]), Sampling())
        assert _Status500.hits == 1
        assert "HTTP 500" in str(info.value) and "CUDA out of memory" in str(info.value)
        assert url + "/chat/completions" in str(info.value)
    finally:
        srv.shutdown()
        srv.server_close()


class _KeepAliveThenHangUp(http.server.BaseHTTPRequestHandler):
    """Answers as if keeping the connection alive, then closes it (an idle-timeout server)."""

    protocol_version = "HTTP/1.1"
    hits = 0

    def do_POST(self):
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, *args):
        pass


def test_a_stale_keep_alive_connection_is_reopened_without_spending_an_attempt():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveThenHangUp)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        b = OpenAIBackend(f"http://127.0.0.1:{srv.server_address[1]}/v1", "m", retries=1)
        prompt = b.render([{"role": "user", "content": "hi"}])
        texts = [b.generate(prompt, Sampling()).text for _ in range(3)]
        assert texts == ["ok", "ok", "ok"] and _KeepAliveThenHangUp.hits == 3
        b.close()
    finally:
        srv.shutdown()
        srv.server_close()


# -- a whole run over HTTP -------------------------------------------------------------

def test_a_run_over_http_fills_every_job_with_concurrent_requests(tiny_store):
    """The answers come from a served stand-in (tests/genkit.py): the subject is the run's bookkeeping over HTTP,
    not the text; the tests above are the real server's generation."""
    from workbench.models.registry import ExecOptions
    from workbench.runs.generation import GenerationConfig
    from workbench.runs.executor import execute, run_stats
    from workbench.runs.sweep import SweepConfig, plan_sweep
    from workbench.store.queries import get_run

    with ServedModel() as served:
        gen = GenerationConfig(backend="openai", base_url=served.url, model="m", max_tokens=24)
        plan_sweep(tiny_store, SweepConfig(ks=(1, 2), budgets=(256,), formats=("score",)), name="http",
                   generation=gen.as_dict())
        run = get_run(tiny_store, "http")
        report = execute(tiny_store, run, opts=ExecOptions(concurrency=3, timeout=60))
        assert (report.done, report.errors) == (6, 0)
        stats = run_stats(tiny_store, run)
        assert stats["model_calls"] + stats["cache_hits"] == 6
        assert stats["model_calls"] == tiny_store.conn.execute("SELECT count(*) FROM generations").fetchone()[0]
        assert len(served.requests) == stats["model_calls"]   # each model call was one request to the server
        # The cache and resume semantics are the backend's too: nothing is left to do.
        assert execute(tiny_store, run, opts=ExecOptions(concurrency=3)).jobs == 0
