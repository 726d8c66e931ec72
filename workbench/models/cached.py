"""One cached LLM call, for the multi-step pipelines (claims, SearChain, dedup judge).

Runs cache whole jobs; a pipeline makes several calls per item, and an interrupted item
must not pay again for the calls it already made. Every call goes through the same
content-addressed ``generations`` table as runs (key: model sha256, chat template, exact
prompt, sampling, schema) and is committed on its own, so a kill between two calls of one
item loses nothing and a resume replays the finished calls from the cache.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from workbench.models.base import COMPLETION_TEMPLATE, Backend, ModelError, Prompt, Sampling
from workbench.models.check import GENERATOR, check_model_options
from workbench.models.openai_http import DEFAULT_TIMEOUT
from workbench.models.registry import ExecOptions, backend_spec, make_backend
from workbench.store.db import Store, utcnow


def cache_key(model_id: str, chat_template: str, prompt_text: str, sampling: dict, schema: dict | None) -> str:
    """sha256 over everything that determines an output (docs/design.md §4)."""
    material = json.dumps({"model": model_id, "template": chat_template, "prompt": prompt_text,
                           "sampling": sampling, "schema": schema}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def prompt_key(backend: Backend, prompt: Prompt, sampling: dict, schema: dict | None) -> str:
    """The cache key of a rendered ``prompt`` on ``backend``.

    A chat prompt keys on the backend's chat template, a plain-completion prompt on
    :data:`~workbench.models.base.COMPLETION_TEMPLATE`: the same text prompted both ways
    is two different inputs to the model (BOS, special tokens) and must not share outputs.
    """
    template = COMPLETION_TEMPLATE if prompt.completion else backend.chat_template
    return cache_key(backend.model_id, template, prompt.text, sampling, schema)


@dataclass(frozen=True)
class Call:
    """The outcome of one cached call."""

    text: str
    key: str
    cached: bool            # True when served from the cache, False when the model ran
    seconds: float          # the model's time when it ran (the original time on a cache hit)
    probabilities: tuple[float, ...] | None = None   # a choice: each option's probability among the options


class CachedLLM:
    """A backend wrapped with the store's generation cache.

    The backend is built on first use (``factory(on_wait=, stop=)``), so a command with
    nothing left to do (every item finished) never loads a model. ``on_wait`` and
    ``stop``, settable until then, go to the factory: loading a local model waits for the
    machine-wide model slot, and they say who hears of that wait and what ends it.

    Threads may share it (a pass with requests in flight): a served model (``width`` > 1) takes
    their calls at once, a local one in turn; a call asked by two threads at once reaches the
    model once, the second thread waiting for the first's answer.
    """

    def __init__(self, store: Store, factory, *, seed: int = 0, width: int = 1, model: str | None = None,
                 timeout: float | None = None):
        self.store = store
        self._factory = factory
        #: The model as a model option names it, and the server's answer bound: what :meth:`check` checks.
        self.model, self.timeout = model, timeout
        self._backend: Backend | None = None
        self.seed = seed
        #: How many calls may usefully run at once: a served model's ``--concurrency``; 1 for a
        #: local GGUF, whose calls take turns (``_lock``).
        self.width = max(1, int(width))
        self.model_calls = 0
        self.cache_hits = 0
        # Of the calls the model ran (generations and one-pass choices; a replay evaluates
        # nothing): prompt tokens, and those really evaluated (less the KV-cached prefix).
        self.prompt_tokens = 0
        self.eval_tokens = 0
        self.on_wait: Callable[[str], None] | None = None
        self.stop: threading.Event | None = None
        self._lock = threading.Lock()       # a local model runs one call at a time
        self._state = threading.Lock()      # the counters, and the calls in flight by key
        self._running: dict[str, threading.Event] = {}

    @property
    def backend(self) -> Backend:
        with self._state:
            if self._backend is None:
                self._backend = self._factory(on_wait=self.on_wait, stop=self.stop)
            return self._backend

    def _cached(self, key: str) -> tuple | None:
        """The cached row of ``key`` (output, seconds, scores). A call of the same key already running on
        another thread is waited for first, so two jobs in flight never ask the model the same thing."""
        while True:
            row = self.store.conn.execute("SELECT output, seconds, scores FROM generations WHERE key = ?",
                                          (key,)).fetchone()
            with self._state:
                running = self._running.get(key)
                if running is None:
                    if row is None:
                        self._running[key] = threading.Event()   # this thread asks; others wait for it
                    return row
            running.wait()

    def _model(self, key: str, call: Callable[[], object]) -> object:
        """Run ``call`` (the model), one at a time on a local model; then release the key's waiters."""
        try:
            if self.width > 1:
                return call()
            with self._lock:
                return call()
        finally:
            with self._state:
                waiters = self._running.pop(key, None)
            if waiters is not None:
                waiters.set()

    def _count(self, *, hit: bool, prompt_tokens: int = 0, eval_tokens: int = 0) -> None:
        with self._state:
            if hit:
                self.cache_hits += 1
            else:
                self.model_calls += 1
                self.prompt_tokens += prompt_tokens
                self.eval_tokens += eval_tokens

    def ask(self, messages: Sequence[dict[str, str]], *, max_tokens: int, schema: dict | None = None,
            grammar: str | None = None, temperature: float = 0.0, repeat_penalty: float = 1.0) -> Call:
        """Generate (or replay) one completion of ``messages``; commits it before returning.

        ``schema`` (JSON schema) or ``grammar`` (GBNF) constrain the output; either is part
        of the cache key.
        """
        backend = self.backend
        prompt = backend.render(messages)
        sampling = Sampling(max_tokens=max_tokens, temperature=temperature, seed=self.seed,
                            repeat_penalty=repeat_penalty)
        constraint = {"gbnf": grammar} if grammar is not None else schema
        key = prompt_key(backend, prompt, sampling.as_dict(), constraint)
        row = self._cached(key)
        if row is not None:
            self._count(hit=True)
            return Call(row[0], key, True, row[1])

        def generate():
            generation = (backend.generate(prompt, sampling, schema, grammar=grammar) if grammar is not None
                          else backend.generate(prompt, sampling, schema))
            with self.store.transaction() as conn:
                conn.execute(
                    "INSERT OR IGNORE INTO generations (key, model_id, output, prompt_tokens, completion_tokens,"
                    " seconds, finish_reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (key, backend.model_id, generation.text, generation.prompt_tokens,
                     generation.completion_tokens, generation.seconds, generation.finish_reason, utcnow()))
            return generation

        generation = self._model(key, generate)
        self._count(hit=False, prompt_tokens=generation.prompt_tokens, eval_tokens=generation.eval_tokens)
        return Call(generation.text, key, False, generation.seconds)

    def choose(self, messages: Sequence[dict[str, str]], options: Sequence[str]) -> Call:
        """Which of ``options`` the model writes next (one forward pass, no generation), cached like ``ask``.

        The chosen option is the call's text, and ``probabilities`` each option's probability among
        the options (kept in the cache with it). The cache key holds the options, so the same
        prompt asked to choose among others is another call. A local GGUF reads its next-token
        logits; a served model its first token's ``top_logprobs`` (see
        :meth:`~workbench.models.openai_http.OpenAIBackend.choose`). A choice cached before the
        probabilities were kept is made again once, to keep them.
        """
        backend = self.backend
        if not hasattr(backend, "choose"):
            raise ModelError(f"the {backend.name} backend cannot score options in one pass")
        prompt = backend.render(messages)
        key = prompt_key(backend, prompt, {"choose": list(options)}, None)
        row = self._cached(key)
        if row is not None and row[2] is not None:
            self._count(hit=True)
            return Call(row[0], key, True, row[1], tuple(json.loads(row[2])))
        if row is not None:   # cached before probabilities were kept: this thread makes it again
            with self._state:
                self._running.setdefault(key, threading.Event())

        def choose():
            choice = backend.choose(prompt, options)
            with self.store.transaction() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO generations (key, model_id, output, prompt_tokens, completion_tokens,"
                    " seconds, finish_reason, created_at, scores) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (key, backend.model_id, options[choice.index], choice.prompt_tokens, 0, choice.seconds,
                     "choice", utcnow(), json.dumps(choice.probabilities)))
            return choice

        choice = self._model(key, choose)
        self._count(hit=False, prompt_tokens=choice.prompt_tokens, eval_tokens=choice.eval_tokens)
        return Call(options[choice.index], key, False, choice.seconds, choice.probabilities)

    def check(self, label: str = "the run's model") -> None:
        """Load the model once and free it (or ask its server), before anything is written: one that cannot
        serve raises ``BadInput`` (exit 2) or, for a server that does not answer, ``EnvironmentFault`` (exit 1),
        as ``LABEL: PATH: why``. A model already built here has loaded: nothing to check."""
        if self._backend is None and self.model is not None:
            check_model_options((label, self.model, GENERATOR), timeout=self.timeout)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


def default_llm(store: Store, model: str = "default", *, n_ctx: int = 2048, n_threads: int | None = None,
                n_gpu_layers: int = 0, seed: int = 0, concurrency: int = 1, timeout: float = DEFAULT_TIMEOUT,
                on_wait: Callable[[str], None] | None = None, stop: threading.Event | None = None) -> CachedLLM:
    """A :class:`CachedLLM` over ``model``, loaded (or reached) on first use.

    ``model`` is a local GGUF (``default``: SmolLM2-135M) run by llama.cpp, or a served model
    ``<base-url>#<name>`` called over HTTP with up to ``concurrency`` requests in flight
    (:mod:`workbench.models.registry`), each waiting at most ``timeout`` seconds for its answer.
    Loading a local model waits for the machine-wide model slot; ``on_wait``/``stop`` (also
    settable on the returned object before its first call) hear of that wait and end it.
    """
    spec = backend_spec(model, n_ctx=n_ctx, seed=seed)

    def build(on_wait, stop) -> Backend:
        return make_backend(spec, ExecOptions(n_threads=n_threads, n_gpu_layers=n_gpu_layers, concurrency=concurrency,
                                             timeout=timeout, on_wait=on_wait, stop=stop), store)

    llm = CachedLLM(store, build, seed=seed, width=concurrency if spec.backend == "openai" else 1, model=model,
                    timeout=timeout)
    llm.on_wait, llm.stop = on_wait, stop
    return llm
