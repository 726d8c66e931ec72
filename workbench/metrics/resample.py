"""The resample weights of every bootstrap: Poisson(1) weights that are a pure function of (seed, item key, resample).

Why Poisson and keyed by item, and what follows from it (paired bootstraps across cells, runs and
reads; per-item incremental updates; prefixes of resamples), is told in :mod:`workbench.metrics.stats`,
which computes the intervals over them.
"""

from __future__ import annotations

import math
from typing import Iterator, Sequence

import numpy as np

__all__ = ["poisson_weights", "iter_resample_weights", "item_keys"]

# Weights are generated for chunks of at most this many entries (items × resamples).
_CHUNK_ENTRIES = 1 << 22


def _poisson1_thresholds() -> np.ndarray:
    """uint32 thresholds T_k = ⌊F(k)·2³²⌋ of the Poisson(1) CDF F: w = #{k : u ≥ T_k} for a uniform word u."""
    out, cdf, term, k = [], 0.0, math.exp(-1.0), 0
    while True:
        cdf += term
        t = math.floor(cdf * 2.0**32)
        if t >= 2**32:
            break
        out.append(t)
        k += 1
        term /= k
    return np.array(out, dtype=np.uint32)


_THRESHOLDS = _poisson1_thresholds()  # 13 words: P(w ≥ 13) < 2⁻³²
_COMMON = 6  # thresholds compared for every word; the tail (P(w ≥ 6) ≈ 6e-4) is looked up


def poisson_weights(keys: np.ndarray | Sequence[int], resamples: int, seed: int,
                    dtype: type = np.float64) -> np.ndarray:
    """The Poisson(1) bootstrap weights of ``keys`` (items) × ``resamples``: THE resample weights.

    ``out[i, r]`` is a pure function of ``(seed, keys[i], r)``: the r-th 32-bit word of
    numpy's Philox4x64-10 stream keyed by ``(keys[i], seed)`` (counter from 0), mapped
    through the Poisson(1) inverse CDF. Keys and seed are integers in [0, 2⁶⁴).
    """
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    if seed < 0 or seed >= 2**64:
        raise ValueError(f"seed must lie in [0, 2**64), got {seed!r}")
    if len(keys) and keys.min() < 0:
        raise ValueError("bootstrap keys must be non-negative integers")
    words = np.empty((len(keys), resamples), dtype=np.uint32)
    if resamples:
        bits = np.random.Philox(key=0)
        state = bits.state
        inner = state["state"]
        raw_words = (resamples + 1) // 2
        for i, key in enumerate(keys.tolist()):
            inner["key"] = np.array([key, seed], dtype=np.uint64)
            inner["counter"] = np.zeros(4, dtype=np.uint64)
            state["buffer_pos"] = 4
            bits.state = state
            words[i] = bits.random_raw(raw_words).view(np.uint32)[:resamples]
    w = np.zeros(words.shape, dtype=np.uint8)
    for t in _THRESHOLDS[:_COMMON]:
        w += words >= t
    tail = words >= _THRESHOLDS[_COMMON - 1]
    if tail.any():
        w[tail] = np.searchsorted(_THRESHOLDS, words[tail], side="right")
    return w.astype(dtype, copy=False)


def iter_resample_weights(
    keys: np.ndarray | Sequence[int], resamples: int, seed: int, dtype: type = np.float64
) -> Iterator[tuple[slice, np.ndarray]]:
    """Yield ``(items, W_chunk)``: :func:`poisson_weights` for consecutive chunks of ``keys``.

    ``W_chunk`` is (items in the chunk × resamples); memory stays bounded by one chunk.
    """
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    step = max(1, _CHUNK_ENTRIES // max(resamples, 1))
    for start in range(0, len(keys), step):
        items = slice(start, min(start + step, len(keys)))
        yield items, poisson_weights(keys[items], resamples, seed, dtype)


def item_keys(n: int, keys: np.ndarray | Sequence[int] | None = None) -> np.ndarray:
    """The bootstrap keys of ``n`` items: ``keys`` (checked to be n distinct ids) or their positions."""
    if keys is None:
        return np.arange(n, dtype=np.int64)
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    if len(keys) != n:
        raise ValueError(f"{len(keys)} bootstrap keys for {n} items")
    if len(np.unique(keys)) != n:
        raise ValueError("bootstrap keys must be distinct (one per item)")
    return keys
