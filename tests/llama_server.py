"""The servers the tests talk to: ``python -m llama_cpp.server`` on a free loopback port, and a canned one.

:func:`serve` starts the real one on a GGUF, waits until ``GET /v1/models`` answers and stops it on exit.
:class:`Canned` answers from a script (a fault, a slow answer, a pass's verdicts): what the client does then.
One thread: ggml's worker threads spin-wait at barriers, and on a busy 2-core box (other test
processes running) two of them slowed a 1-token request to more than 8 s.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import threading
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

from workbench.models.llamacpp import PERTURB_ENV
from workbench.models.openai_http import PROBE_MESSAGES

#: The server computes the model's own logits; `just test-perturbed` perturbs only the in-process path's.
same_logits = pytest.mark.skipif(bool(os.environ.get(PERTURB_ENV)), reason=(
    "the in-process logits are perturbed (just test-perturbed) and the server's are not: the two paths "
    "compute the same only unperturbed"))


def free_port() -> int:
    """A TCP port nothing listens on now (on 127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Server:
    """A running ``llama_cpp.server``: its API root, the model's reference there, and its log."""

    base: str      # http://127.0.0.1:PORT/v1
    ref: str       # base#alias: what a model option takes
    log: Path
    proc: subprocess.Popen = field(repr=False, compare=False)

    def requests(self) -> int:
        """The requests it answered (model calls; uvicorn's access log has a line for each)."""
        return self.log.read_text(errors="replace").count('"POST /v1/')


@contextmanager
def serve(model: Path, log_dir: Path, *, alias: str | None = None, n_ctx: int = 2048,
          extra: tuple[str, ...] = (), port: int | None = None) -> Iterator[Server]:
    """Serve ``model`` (as ``alias``, on ``port`` or a free one) until the block ends. The log goes to ``log_dir``."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "1", "--n_threads_batch", "1",
           "--verbose", "False", *(("--model_alias", alias) if alias else ()), *extra]
    log = log_dir / f"server-{port}.log"
    log_fh = open(log, "wb")      # a file, not a pipe: a full pipe would stall the server
    proc = subprocess.Popen(cmd, stdout=log_fh, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}: "
                            f"{log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer GET /v1/models within 60 s")
            time.sleep(0.2)
        yield Server(base, f"{base}#{alias or model.name}", log, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log_fh.close()


class Canned:
    """A loopback server answering each POST with the next canned ``(status, JSON body)`` (a dict alone is a 200),
    or with ``answer(request)`` when given; ``GET /models`` lists ``models`` (one, ``m``, unless given), and the check's one-token request
    (:data:`~workbench.models.openai_http.PROBE_MESSAGES`) is answered apart, never recorded. ``port`` 0 picks a free one.

    Each answer waits ``delay`` seconds first (``delay(request_number)`` when callable). It records the requests
    (``requests``), the answers sent whole (``answered``) and the most requests it held at once (``most``).
    """

    def __init__(self, *bodies, port: int = 0, answer: Callable[[dict], object] | None = None,
                 delay: float | Callable[[int], float] = 0.0, models: tuple[str, ...] = ("m",)):
        self.bodies, self.requests, self.answered, self.most = list(bodies), [], 0, 0
        self._lock, self._running = threading.Lock(), 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def send(self, status: int, body) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                self.send(200, {"data": [{"id": name} for name in models]})

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if request.get("messages") == PROBE_MESSAGES:   # the up-front check's one token, not a pass's call
                    self.send(200, {"choices": [{"message": {"role": "assistant", "content": "OK"}}]})
                    return
                with outer._lock:
                    outer.requests.append(request)
                    number = len(outer.requests)
                    outer._running += 1
                    outer.most = max(outer.most, outer._running)
                    reply = answer(request) if answer is not None else outer.bodies.pop(0)
                try:
                    time.sleep(delay(number) if callable(delay) else delay)
                finally:
                    # Held until its answer starts, not until this thread is done: the client may send its
                    # next request the moment the answer arrives, before this thread runs again.
                    with outer._lock:
                        outer._running -= 1
                try:
                    self.send(*(reply if isinstance(reply, tuple) else (200, reply)))
                    with outer._lock:
                        outer.answered += 1
                except OSError:   # the client gave up (its timeout) or was killed
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def first_token(*tokens: tuple[str, float]) -> dict:
    """A chat completion of one token, the first of ``tokens`` (text, logprob), with all of them as its top_logprobs."""
    first = {"token": tokens[0][0], "logprob": tokens[0][1],
             "top_logprobs": [{"token": t, "logprob": lp} for t, lp in tokens]}
    return {"choices": [{"message": {"content": tokens[0][0]}, "logprobs": {"content": [first]}}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 1}}
