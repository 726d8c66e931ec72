"""``python -m llama_cpp.server`` on a free loopback port, for the tests that talk to a real server.

:func:`serve` starts it on a GGUF, waits until ``GET /v1/models`` answers and stops it on exit.
One thread: ggml's worker threads spin-wait at barriers, and on a busy 2-core box (other test
processes running) two of them slowed a 1-token request to more than 8 s.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


def free_port() -> int:
    """A TCP port nothing listens on now (on 127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(model: Path, log_dir: Path, *, alias: str | None = None, n_ctx: int = 2048,
          extra: tuple[str, ...] = ()) -> Iterator[str]:
    """Serve ``model``; yields the base URL (``http://127.0.0.1:PORT/v1``). The log goes to ``log_dir``."""
    port = free_port()
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
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log_fh.close()
