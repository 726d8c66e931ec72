"""Which model a pass uses (``BackendSpec``), how it runs (``ExecOptions``), and the backend they build."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from workbench.models.base import Backend
from workbench.models.locate import cached_file_sha256, resolve_model
from workbench.cores import usable_cores

BACKENDS = ("llamacpp", "openai")


@dataclass(frozen=True)
class BackendSpec:
    """Which model serves a pass and how it is loaded: what :func:`make_backend` needs."""

    backend: str = "llamacpp"
    model: str = "default"          # GGUF path, "default" or a known model name (llamacpp); the served model (openai)
    base_url: str | None = None     # openai only, e.g. http://127.0.0.1:8080/v1
    n_ctx: int = 2048
    seed: int = 0
    # Whether prompts go through the GGUF's chat template: False lets a base model (no
    # template) load, for plain-completion prompts.
    chat: bool = True


@dataclass(frozen=True)
class ExecOptions:
    """How to run (not what): may change between a run and its resume.

    ``on_wait`` and ``stop`` concern the machine-wide model slot of a local model
    (:mod:`workbench.models.slot`): ``on_wait(message)`` hears once that another process
    holds it, ``stop`` set ends that wait.
    """

    n_threads: int | None = None
    n_gpu_layers: int = 0
    concurrency: int = 4
    timeout: float = 120.0
    on_wait: Callable[[str], None] | None = None
    stop: threading.Event | None = None


def make_backend(spec: BackendSpec, opts: ExecOptions, store) -> Backend:
    """Build the backend; raises ``ModelError`` with a clear message if the model is unusable.

    A llama.cpp backend first takes the machine-wide model slot, waiting while another
    process holds it. A server (``openai``) does not: it schedules its own requests.
    """
    if spec.backend == "openai":
        from workbench.models.openai_http import OpenAIBackend

        backend = OpenAIBackend(spec.base_url, spec.model, concurrency=opts.concurrency, timeout=opts.timeout)
        backend.check()
        return backend
    from workbench.models.llamacpp import LlamaCppBackend

    path = resolve_model(spec.model)
    return LlamaCppBackend(path, cached_file_sha256(store, path), n_ctx=spec.n_ctx,
                           n_threads=opts.n_threads or usable_cores(), n_gpu_layers=opts.n_gpu_layers, seed=spec.seed,
                           on_wait=opts.on_wait, stop=opts.stop, chat=spec.chat)
