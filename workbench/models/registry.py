"""Which model a pass uses (``BackendSpec``), how it runs (``ExecOptions``), and the backend they build.

A model is named by one string wherever a verb takes one (``--model``, ``--nli-model``, a
config's ``model``): a local GGUF (a path, ``default`` or a known name) runs in-process in
llama.cpp; a *served model*, ``<base-url>#<model>`` (``http://gpu-box:8000/v1#qwen2.5-7b``),
is called over an OpenAI-compatible API (:mod:`workbench.models.openai_http`). The string is
also the model's identity in the cache (``model_id``) and in a config's key, so a served model
and a local one never share an answer. ``--backend openai --base-url URL --model NAME`` is
another way to write ``URL#NAME`` (:func:`served_ref`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from workbench.models.base import Backend, ModelError
from workbench.models.loadcheck import check_loads
from workbench.models.openai_http import DEFAULT_TIMEOUT
from workbench.models.locate import cached_file_sha256, resolve_model
from workbench.cores import usable_cores

BACKENDS = ("llamacpp", "openai")
_SCHEMES = ("http://", "https://")


def served_model(ref: str | None) -> tuple[str, str] | None:
    """``(base_url, model)`` of a served-model reference ``<base-url>#<model>``; None for a local model.

    Raises :class:`ModelError` for a URL without ``#<model>``.
    """
    if not isinstance(ref, str) or not ref.strip().lower().startswith(_SCHEMES):
        return None
    url, sep, name = ref.strip().rpartition("#")
    if not sep or not url.rstrip("/") or not name:
        raise ModelError(f"{ref!r}: a served model is <base-url>#<model>, e.g. http://127.0.0.1:8000/v1#smollm2")
    return url.rstrip("/"), name


def served_ref(base_url: str, model: str) -> str:
    """The reference of ``model`` served at ``base_url`` (the API root, with its ``/v1``)."""
    base = (base_url or "").strip().rstrip("/")
    if not base.lower().startswith(_SCHEMES) or len(base) <= len("https://"):
        raise ModelError(f"{base_url!r}: base URL must look like http://HOST:PORT/v1")
    if not model or model == "default":
        raise ModelError("a served model needs its name on the server (--model NAME; `curl URL/models` lists them)")
    return f"{base}#{model}"


def backend_spec(model: str | None, *, n_ctx: int = 2048, seed: int = 0, chat: bool = True) -> BackendSpec:
    """The :class:`BackendSpec` of a model string: a served model goes to ``openai``, anything else to llama.cpp."""
    served = served_model(model)
    if served is not None:
        return BackendSpec(backend="openai", model=served[1], base_url=served[0], n_ctx=n_ctx, seed=seed, chat=chat)
    return BackendSpec(model=model or "default", n_ctx=n_ctx, seed=seed, chat=chat)


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
    timeout: float = DEFAULT_TIMEOUT
    on_wait: Callable[[str], None] | None = None
    stop: threading.Event | None = None


def model_identity(store, model: str | None) -> str:
    """What identifies ``model``'s outputs in the store: a served model's reference, a local GGUF's sha256."""
    if served_model(model) is not None:
        return model.strip()
    return cached_file_sha256(store, resolve_model(model))


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
    check_loads(path)   # before its hash is kept in model_files: nothing is written for a model that cannot load
    return LlamaCppBackend(path, cached_file_sha256(store, path), n_ctx=spec.n_ctx,
                           n_threads=opts.n_threads or usable_cores(), n_gpu_layers=opts.n_gpu_layers, seed=spec.seed,
                           on_wait=opts.on_wait, stop=opts.stop, chat=spec.chat)
