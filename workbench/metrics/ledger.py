"""The dissipation ledger (DESIGN §3, seed 000) with paired bootstrap intervals.

Per sample i of a cell (K, B, phi, model, prompt) we have ``h_set`` (0/1), ``h_vis`` (0/1),
the score ``s`` in [0, 1] (NaN = not scored yet), ``k_eff`` (units visible in the window),
``evidence_tokens`` and ``truncated`` (0/1). The ledger terms of a cell are:

==================  ==============================================================
``n``               size of the population the terms are computed on (see below)
``S_set``           mean H_set
``S_vis``           mean H_vis
``L_iface``         S_set − S_vis   (≥ 0 whenever h_vis ≤ h_set)
``S_llm``           mean s
``Acc_hit``         E[s | H_vis = 1]
``Acc_miss``        E[s | H_vis = 0]
``D_rate``          1 − Acc_hit
``D_mass``          S_vis·(1 − Acc_hit), computed in its expectation form E[(1−s)·1(H_vis=1)]
``L_leak``          (1 − S_vis)·Acc_miss, computed in its expectation form E[s·1(H_vis=0)]
``K_eff``           mean k_eff
``evidence_tokens`` mean evidence token count
``truncated``       truncation rate
==================  ==============================================================

Population rule. If any sample of the cell has a score, *every* term of that cell (the
retrieval and interface terms included) is computed over the scored samples only, so that
the identity ``S_llm = Acc_hit·S_vis + Acc_miss·(1 − S_vis)`` holds exactly on one
population while a run is still filling in. If no sample is scored, the terms are computed
over all samples and the reasoning terms (``S_llm, Acc_hit, Acc_miss, D_rate, D_mass,
L_leak``) are ``None``.

Undefined terms. An empty conditioning set gives ``None`` (shown as ``—``), never 0:
``Acc_hit`` and ``D_rate`` are ``None`` when no scored sample has H_vis = 1, ``Acc_miss``
when every one has. ``D_mass`` and ``L_leak`` are defined by the expectation forms of
seed §4.2/§4.3, E[(1−s)·1(H_vis=1)] and E[s·1(H_vis=0)]; they equal the product forms
whenever those are defined, and are 0.0 (not undefined) when the product would be
0·undefined (``S_vis = 0`` for ``D_mass``, ``S_vis = 1`` for ``L_leak``). In the identity an
undefined conditional term has weight 0, so the identity always holds.

One owner for the formulas. :func:`terms_from_sums` maps weighted sums (the columns of
:data:`SUM_COLUMNS`, e.g. Σm, Σm·h_vis, Σm·s·h_vis, … where m is the population mask) to
the terms, vectorized over any leading axes. The point estimate feeds it the plain sums
(weights 1); the bootstrap feeds it the sums under each resample's weights; an incremental
aggregator can feed it running sums.

Uncertainty. Intervals are 95 % bootstrap percentile intervals over samples (2,000
resamples by default, seeded). Resample r is a row of multinomial counts W[r] (how many
times each sample was drawn), and the resampled sums of *all* cells are one matrix product
``W_chunk @ X`` per chunk of rows, X holding the columns of every cell. W depends only on
``(seed, N, resamples)`` and is shared by all cells of a call, so differences between cells
(:func:`paired_difference`, the oracle's paired ``L_noise``) are paired bootstraps. A
resample where a term is undefined yields NaN and is ignored by the percentile; a term whose
point estimate is ``None`` has no interval. For speed the large matrix products run in
float32 (relative error ~1e-6 on the sums, far below the Monte-Carlo error of the
bootstrap); point estimates are always float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

import numpy as np

__all__ = [
    "Estimate",
    "CellArrays",
    "TERMS",
    "REASONING_TERMS",
    "SUM_COLUMNS",
    "cell_columns",
    "cell_sums",
    "terms_from_sums",
    "ledger_point",
    "compute_ledger",
    "paired_difference",
    "iter_resample_counts",
]

TERMS: tuple[str, ...] = (
    "n",
    "S_set",
    "S_vis",
    "L_iface",
    "S_llm",
    "Acc_hit",
    "Acc_miss",
    "D_rate",
    "D_mass",
    "L_leak",
    "K_eff",
    "evidence_tokens",
    "truncated",
)
REASONING_TERMS: tuple[str, ...] = ("S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak")

#: The weighted sums a cell's terms are computed from (m = population mask, see module doc).
SUM_COLUMNS: tuple[str, ...] = (
    "m",  # Σ m                 (population size)
    "m_hset",  # Σ m·h_set
    "m_hvis",  # Σ m·h_vis
    "m_s",  # Σ m·s
    "m_s_hvis",  # Σ m·s·h_vis
    "m_keff",  # Σ m·k_eff
    "m_tokens",  # Σ m·evidence_tokens
    "m_trunc",  # Σ m·truncated
)


# Bootstrap W is generated in chunks of at most this many entries (rows × N) and at most
# _CHUNK_MAX_ROWS rows; each chunk is filled _DRAW_ROWS rows at a time (cache-friendly).
_CHUNK_ENTRIES = 1 << 24
_CHUNK_MAX_ROWS = 256
_DRAW_ROWS = 16
# Products with at most this many multiply-adds run in float64, larger ones in float32.
_FLOAT64_MAX_WORK = 1 << 28


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its bootstrap interval; ``None`` means undefined (``—``)."""

    value: float | None
    lo: float | None
    hi: float | None


def _as_1d(name: str, values: object) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"CellArrays.{name} must be 1-D, got shape {arr.shape}")
    return arr


@dataclass
class CellArrays:
    """One cell's per-sample arrays, aligned on the samples of a dataset (length N)."""

    h_set: np.ndarray
    h_vis: np.ndarray
    score: np.ndarray
    k_eff: np.ndarray
    evidence_tokens: np.ndarray
    truncated: np.ndarray

    def __post_init__(self) -> None:
        names = ("h_set", "h_vis", "score", "k_eff", "evidence_tokens", "truncated")
        for name in names:
            setattr(self, name, _as_1d(name, getattr(self, name)))
        n = len(self.h_set)
        for name in names:
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"CellArrays.{name} has length {len(getattr(self, name))}, expected {n}"
                )
        for name in ("h_set", "h_vis", "truncated"):
            arr = getattr(self, name)
            if not np.all((arr == 0) | (arr == 1)):
                raise ValueError(f"CellArrays.{name} must hold only 0 and 1")
        s = self.score
        scored = ~np.isnan(s)
        if np.any((s[scored] < 0) | (s[scored] > 1)):
            raise ValueError("CellArrays.score must lie in [0, 1] (NaN = not scored)")
        for name in ("k_eff", "evidence_tokens"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"CellArrays.{name} must be finite")

    def __len__(self) -> int:
        return len(self.h_set)

    @property
    def scored(self) -> bool:
        """True if any sample has a score (the population is then the scored samples)."""
        return bool(np.any(~np.isnan(self.score)))


# --------------------------------------------------------------------------- formulas


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den == 0 (an empty conditioning set)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def terms_from_sums(sums: np.ndarray, scored: bool) -> dict[str, np.ndarray]:
    """THE ledger formulas: weighted sums (``[..., len(SUM_COLUMNS)]``) → terms (``[...]``).

    Vectorized over the leading axes. Undefined values are NaN. ``scored`` says whether the
    population is the scored samples; if not, the reasoning terms are all NaN.
    """
    sums = np.asarray(sums, dtype=np.float64)
    if sums.shape[-1] != len(SUM_COLUMNS):
        raise ValueError(f"sums must end in an axis of {len(SUM_COLUMNS)}, got {sums.shape}")
    w, hs, hv, s, shv, k, tok, tr = np.moveaxis(sums, -1, 0)
    s_set = _ratio(hs, w)
    s_vis = _ratio(hv, w)
    out = {
        "n": w.copy(),
        "S_set": s_set,
        "S_vis": s_vis,
        "L_iface": s_set - s_vis,
        "K_eff": _ratio(k, w),
        "evidence_tokens": _ratio(tok, w),
        "truncated": _ratio(tr, w),
    }
    if scored:
        acc_hit = _ratio(shv, hv)
        out.update(
            S_llm=_ratio(s, w),
            Acc_hit=acc_hit,
            Acc_miss=_ratio(s - shv, w - hv),
            D_rate=1.0 - acc_hit,
            D_mass=_ratio(hv - shv, w),  # E[(1−s)·1(H_vis=1)] = S_vis·(1−Acc_hit)
            L_leak=_ratio(s - shv, w),  # E[s·1(H_vis=0)] = (1−S_vis)·Acc_miss
        )
    else:
        nan = np.full(w.shape, np.nan)
        out.update({name: nan.copy() for name in REASONING_TERMS})
    return {name: out[name] for name in TERMS}


def cell_columns(cell: CellArrays) -> np.ndarray:
    """The N × len(SUM_COLUMNS) matrix whose column sums (any weights) feed the formulas."""
    scored_mask = ~np.isnan(cell.score)
    m = scored_mask.astype(np.float64) if scored_mask.any() else np.ones(len(cell))
    s = np.where(scored_mask, cell.score, 0.0)  # NaN·0 would be NaN
    return np.column_stack(
        [
            m,
            m * cell.h_set,
            m * cell.h_vis,
            m * s,
            m * s * cell.h_vis,
            m * cell.k_eff,
            m * cell.evidence_tokens,
            m * cell.truncated,
        ]
    )


def cell_sums(cell: CellArrays) -> np.ndarray:
    """The point-estimate sums of a cell (weights 1), shape ``(len(SUM_COLUMNS),)``."""
    return cell_columns(cell).sum(axis=0)


def _to_py(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


_COUNT_TERMS = frozenset({"n", "n_noise"})


def _point(terms: Mapping[str, np.ndarray]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, arr in terms.items():
        value = _to_py(float(arr))
        if name in _COUNT_TERMS and value is not None:
            value = int(round(value))  # a count
        out[name] = value
    return out


def ledger_point(cell: CellArrays) -> dict[str, float | None]:
    """The point estimates of every term of :data:`TERMS` (``None`` = undefined)."""
    return _point(terms_from_sums(cell_sums(cell), cell.scored))


# --------------------------------------------------------------------------- bootstrap


def _chunk_rows(n: int) -> int:
    return max(1, min(_CHUNK_MAX_ROWS, _CHUNK_ENTRIES // max(n, 1)))


def iter_resample_counts(
    n: int, resamples: int, seed: int, dtype: type = np.float32
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(first_row, W_chunk)``: the bootstrap resample-count matrix W, in row chunks.

    Row r of W holds how many times each of the ``n`` samples was drawn in resample r
    (multinomial counts summing to ``n``: ``n`` uniform draws with replacement, counted with
    ``np.bincount``). W depends only on ``(n, resamples, seed)``: the chunking is a function
    of ``n`` alone, so every caller with the same arguments sees the same W. Memory stays
    bounded by one chunk (at most 16 M entries). The chunk buffer is reused: copy a chunk
    if you keep it past the next iteration.
    """
    rng = np.random.default_rng(seed)
    step = _chunk_rows(n)
    draw = min(_DRAW_ROWS, step)
    idx_dtype = np.uint32 if n <= np.iinfo(np.uint32).max else np.int64
    buf = np.empty((min(step, resamples), n), dtype=dtype)
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        w = buf[:rows]
        for s in range(0, rows, draw):
            r = min(draw, rows - s)
            # uint32 draws are ~4x faster than int64 ones, and a row-by-row bincount of
            # them (cache-sized) is faster than one offset bincount over the whole block.
            idx = rng.integers(0, n, size=(r, n), dtype=idx_dtype)
            for j in range(r):
                w[s + j] = np.bincount(idx[j], minlength=n)
        yield start, w


class _Columns:
    """Collects columns for the one big product W @ X, storing each distinct column once.

    Identical columns (h_set shared across budgets, masks shared across cells, a cell
    compared with itself) get one index, which saves work and makes their resampled sums
    bit-identical, so a paired difference of equal cells is exactly 0.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.cols: list[np.ndarray] = []
        self._by_key: dict[bytes, list[int]] = {}
        self._probe = np.unique(np.linspace(0, max(n - 1, 0), num=min(n, 256)).astype(np.int64))

    def add(self, block: np.ndarray) -> np.ndarray:
        """Add the columns of an N × k block; return their k indices."""
        block = np.asarray(block, dtype=np.float64)
        index = np.empty(block.shape[1], dtype=np.int64)
        for j in range(block.shape[1]):
            col = np.ascontiguousarray(block[:, j])
            key = col[self._probe].tobytes()
            for u in self._by_key.get(key, ()):
                if np.array_equal(self.cols[u], col):
                    index[j] = u
                    break
            else:
                self._by_key.setdefault(key, []).append(len(self.cols))
                index[j] = len(self.cols)
                self.cols.append(col)
        return index

    def resampled_sums(self, resamples: int, seed: int) -> np.ndarray:
        """(resamples × number of distinct columns) float64: W @ X for the shared W."""
        u = len(self.cols)
        out = np.empty((resamples, u), dtype=np.float64)
        if resamples == 0 or u == 0:
            return out
        work = resamples * self.n * u
        dtype = np.float64 if work <= _FLOAT64_MAX_WORK else np.float32
        x = np.empty((self.n, u), dtype=dtype)
        for j, col in enumerate(self.cols):
            x[:, j] = col
        for start, w in iter_resample_counts(self.n, resamples, seed, dtype):
            out[start : start + len(w)] = w @ x
        return out


def _interval(point: float | None, boot: np.ndarray | None, alpha: float) -> Estimate:
    if point is None or boot is None:
        return Estimate(point, None, None)
    finite = boot[~np.isnan(boot)]
    if finite.size == 0:
        return Estimate(point, None, None)
    lo, hi = np.percentile(finite, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Estimate(point, float(lo), float(hi))


def _intervals(
    points: Mapping[str, float | None], boots: Mapping[str, np.ndarray] | None, alpha: float
) -> dict[str, Estimate]:
    """Percentile intervals for many terms at once (one vectorized percentile call)."""
    names = list(points)
    if boots is None:
        return {k: Estimate(points[k], None, None) for k in names}
    mat = np.column_stack([np.asarray(boots[k], dtype=np.float64) for k in names])
    qs = [100 * alpha / 2, 100 * (1 - alpha / 2)]
    nan_cols = np.isnan(mat).any(axis=0)
    lo = np.full(len(names), np.nan)
    hi = np.full(len(names), np.nan)
    clean = ~nan_cols
    if clean.any():
        lo[clean], hi[clean] = np.percentile(mat[:, clean], qs, axis=0)
    out = {}
    for j, k in enumerate(names):
        if points[k] is None:
            out[k] = Estimate(None, None, None)
        elif nan_cols[j]:
            out[k] = _interval(points[k], mat[:, j], alpha)
        else:
            out[k] = Estimate(points[k], float(lo[j]), float(hi[j]))
    return out


def _check_bootstrap_args(resamples: int, alpha: float) -> int:
    if isinstance(resamples, bool) or int(resamples) != resamples or resamples < 0:
        raise ValueError(f"resamples must be a non-negative integer, got {resamples!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    return int(resamples)


def _common_length(arrays: list[int], what: str) -> int:
    lengths = set(arrays)
    if len(lengths) > 1:
        raise ValueError(f"{what} must be aligned on the same samples; lengths {sorted(lengths)}")
    return lengths.pop() if lengths else 0


def _ledger_bootstrap(
    cells: Mapping[str, CellArrays], resamples: int, seed: int
) -> tuple[dict[str, dict[str, float | None]], dict[str, dict[str, np.ndarray]] | None]:
    """Point terms and resampled terms (R-vectors, NaN = undefined) of every cell."""
    n = _common_length([len(c) for c in cells.values()], "ledger cells")
    columns = _Columns(n)
    index: dict[str, np.ndarray] = {}
    points: dict[str, dict[str, float | None]] = {}
    for cid, cell in cells.items():
        block = cell_columns(cell)
        points[cid] = _point(terms_from_sums(block.sum(axis=0), cell.scored))
        index[cid] = columns.add(block)
    if resamples == 0 or n == 0:
        return points, None
    sums = columns.resampled_sums(resamples, seed)
    boots = {cid: terms_from_sums(sums[:, index[cid]], cells[cid].scored) for cid in cells}
    return points, boots


def compute_ledger(
    cells: Mapping[str, CellArrays],
    *,
    resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, dict[str, Estimate]]:
    """Every term of every cell with its bootstrap interval: ``{cell_id: {term: Estimate}}``.

    All cells must be aligned on the same N samples; they share one resample matrix W.
    ``resamples=0`` gives point estimates with no intervals.
    """
    resamples = _check_bootstrap_args(resamples, alpha)
    points, boots = _ledger_bootstrap(cells, resamples, seed)
    flat_points = {(cid, t): points[cid][t] for cid in cells for t in TERMS}
    flat_boots = None if boots is None else {(cid, t): boots[cid][t] for cid in cells for t in TERMS}
    flat = _intervals(flat_points, flat_boots, alpha)
    return {cid: {t: flat[(cid, t)] for t in TERMS} for cid in cells}


def paired_difference(
    cells: Mapping[str, CellArrays],
    a: str,
    b: str,
    term: str,
    *,
    resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> Estimate:
    """``term(a) − term(b)`` with a paired bootstrap interval (the same resamples for both).

    ``None`` if the term is undefined in either cell. Uses the same W as
    :func:`compute_ledger` with the same ``seed`` and ``resamples``.
    """
    resamples = _check_bootstrap_args(resamples, alpha)
    if term not in TERMS:
        raise ValueError(f"unknown term {term!r}; choose one of: {', '.join(TERMS)}")
    for cid in (a, b):
        if cid not in cells:
            raise KeyError(f"no cell {cid!r}")
    pair = {a: cells[a]} if a == b else {a: cells[a], b: cells[b]}
    _common_length([len(c) for c in cells.values()], "ledger cells")
    points, boots = _ledger_bootstrap(pair, resamples, seed)
    pa, pb = points[a][term], points[b][term]
    value = None if pa is None or pb is None else float(pa - pb)
    diff = None if boots is None else boots[a][term] - boots[b][term]
    return _intervals({"d": value}, None if diff is None else {"d": diff}, alpha)["d"]
