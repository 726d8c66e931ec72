"""The dissipation ledger (docs/design.md §3) with paired bootstrap intervals.

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
docs/design.md §3, E[(1−s)·1(H_vis=1)] and E[s·1(H_vis=0)]; they equal the product forms
whenever those are defined, and are 0.0 (not undefined) when the product would be
0·undefined (``S_vis = 0`` for ``D_mass``, ``S_vis = 1`` for ``L_leak``). In the identity an
undefined conditional term has weight 0, so the identity always holds.

One owner for the formulas. :func:`terms_from_sums` maps weighted sums (the columns of
:data:`SUM_COLUMNS`, e.g. Σm, Σm·h_vis, Σm·s·h_vis, … where m is the population mask) to
the terms, vectorized over any leading axes. The point estimate feeds it the plain sums
(weights 1); the bootstrap feeds it the sums under each resample's weights; an incremental
aggregator can feed it running sums.

Uncertainty. Intervals are 95 % bootstrap percentile intervals over samples (2,000
resamples by default, seeded), with the Poisson bootstrap of :mod:`workbench.metrics.stats`:
in resample r, sample i weighs w(seed, sid_i, r) ~ Poisson(1), a pure function of the seed,
the sample's id and r. The resampled sums of *all* cells are one product ``Wᵀ X`` per chunk
of samples, X holding the columns of every cell. The weights depend on the sample, not the
cell or the run, so differences between cells (:func:`paired_difference`, the oracle's
paired ``L_noise``) and between runs of a dataset (``compare``) are paired bootstraps.

Why Poisson weights (rather than multinomial resample counts): with them each
sample's contribution to every replicate sum is independent of the other samples, so the
replicate sums can be *maintained* — one changed event adds ``w(seed, sid, ·) ⊗ Δx`` in
O(resamples) — instead of regenerated and multiplied out after every change (Hanley &
MacGibbon 2006; Chamandy et al. 2012). For the ratios of sums used here the Poisson
bootstrap is asymptotically equivalent to the classical one; ``bench/bench_coverage.py``
measures the 95 % intervals' coverage at n = 50 and n = 2,000. The incremental state is
:mod:`workbench.runs.aggregate`; this module owns the formulas and the from-scratch path.

State columns. An incremental reader cannot know in advance which population a cell will
use (the first score switches it from all samples to the scored ones), so the state of a
cell keeps both: :data:`STATE_COLUMNS` are the :data:`SUM_COLUMNS` over the scored samples,
then over all samples (:func:`row_contributions`); :func:`terms_from_state` picks one.

A resample where a term is undefined yields NaN and is ignored by the percentile; a term
whose point estimate is ``None`` has no interval. For speed the large from-scratch products
run in float32 within a chunk (relative error ~1e-7 on the sums, far below the Monte-Carlo
error of the bootstrap); point estimates are always float64. The resampling and the
interval rules are those of :mod:`workbench.metrics.stats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Mapping, TypeVar

import numpy as np

from workbench.metrics.resample import item_keys
from workbench.metrics.stats import (
    RESAMPLES,
    SEED,
    Estimate,  # re-exported: the ledger's terms are Estimates
    ResampledColumns,
    check_bootstrap_args,
    common_length,
    optional_float,
    percentile_intervals,
    percentile_rows,
    ratio,
)

__all__ = [
    "Estimate",
    "CellArrays",
    "TERMS",
    "REASONING_TERMS",
    "SUM_COLUMNS",
    "STATE_COLUMNS",
    "row_contributions",
    "state_scored",
    "terms_from_state",
    "cell_columns",
    "cell_sums",
    "terms_from_sums",
    "point_values",
    "ledger_point",
    "compute_ledger",
    "paired_difference",
    "ledger_bootstrap",
    "ledger_from_states",
    "difference_from_states",
]

K = TypeVar("K", bound=Hashable)

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


#: A cell's state: the SUM_COLUMNS over its scored samples, then over all its samples.
STATE_COLUMNS: tuple[str, ...] = tuple(f"scored.{c}" for c in SUM_COLUMNS) + tuple(f"all.{c}" for c in SUM_COLUMNS)
_NSUM = len(SUM_COLUMNS)


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


def terms_from_sums(sums: np.ndarray, scored: bool) -> dict[str, np.ndarray]:
    """THE ledger formulas: weighted sums (``[..., len(SUM_COLUMNS)]``) → terms (``[...]``).

    Vectorized over the leading axes. Undefined values are NaN. ``scored`` says whether the
    population is the scored samples; if not, the reasoning terms are all NaN.
    """
    sums = np.asarray(sums, dtype=np.float64)
    if sums.shape[-1] != len(SUM_COLUMNS):
        raise ValueError(f"sums must end in an axis of {len(SUM_COLUMNS)}, got {sums.shape}")
    w, hs, hv, s, shv, k, tok, tr = np.moveaxis(sums, -1, 0)
    s_set = ratio(hs, w)
    s_vis = ratio(hv, w)
    out = {
        "n": w.copy(),
        "S_set": s_set,
        "S_vis": s_vis,
        "L_iface": s_set - s_vis,
        "K_eff": ratio(k, w),
        "evidence_tokens": ratio(tok, w),
        "truncated": ratio(tr, w),
    }
    if scored:
        acc_hit = ratio(shv, hv)
        out.update(
            S_llm=ratio(s, w),
            Acc_hit=acc_hit,
            Acc_miss=ratio(s - shv, w - hv),
            D_rate=1.0 - acc_hit,
            D_mass=ratio(hv - shv, w),  # E[(1−s)·1(H_vis=1)] = S_vis·(1−Acc_hit)
            L_leak=ratio(s - shv, w),  # E[s·1(H_vis=0)] = (1−S_vis)·Acc_miss
        )
    else:
        nan = np.full(w.shape, np.nan)
        out.update({name: nan.copy() for name in REASONING_TERMS})
    return {name: out[name] for name in TERMS}


def row_contributions(
    h_set: np.ndarray,
    h_vis: np.ndarray,
    score: np.ndarray,
    k_eff: np.ndarray,
    evidence_tokens: np.ndarray,
    truncated: np.ndarray,
    present: np.ndarray | None = None,
) -> np.ndarray:
    """Each row's contribution to a cell's state: an n × len(STATE_COLUMNS) matrix.

    ``score`` NaN = not scored; ``present`` False = no such row (its contribution is 0, so
    a deleted row is subtracted exactly). Summed with any weights, the first half feeds
    :func:`terms_from_sums` for the scored population, the second half for all rows.
    """
    h_set, h_vis, k_eff, tokens, trunc = (np.asarray(a, dtype=np.float64)
                                          for a in (h_set, h_vis, k_eff, evidence_tokens, truncated))
    score = np.asarray(score, dtype=np.float64)
    p = np.ones(len(score)) if present is None else np.asarray(present, dtype=np.float64)
    scored = p * ~np.isnan(score)
    s = np.where(scored > 0, score, 0.0)  # NaN·0 would be NaN
    out = np.empty((len(score), 2 * _NSUM))
    for half, m in ((0, scored), (_NSUM, p)):
        out[:, half:half + _NSUM] = np.column_stack(
            [m, m * h_set, m * h_vis, s, s * h_vis, m * k_eff, m * tokens, m * trunc])
    return out


def state_scored(state_sums: np.ndarray) -> bool:
    """Whether a cell's state (point sums, shape ``(len(STATE_COLUMNS),)``) has any scored row."""
    return bool(np.asarray(state_sums)[0] > 0)


def terms_from_state(state: np.ndarray, scored: bool) -> dict[str, np.ndarray]:
    """The terms from state sums (``[..., len(STATE_COLUMNS)]``): the scored population if ``scored``.

    ``scored`` comes from the point sums (:func:`state_scored`), never from a resample, so a
    cell's replicates and its point use one population.
    """
    state = np.asarray(state, dtype=np.float64)
    return terms_from_sums(state[..., :_NSUM] if scored else state[..., _NSUM:], scored)


def cell_columns(cell: CellArrays) -> np.ndarray:
    """The N × len(SUM_COLUMNS) matrix whose column sums (any weights) feed the formulas."""
    both = row_contributions(cell.h_set, cell.h_vis, cell.score, cell.k_eff, cell.evidence_tokens,
                             cell.truncated)
    return both[:, :_NSUM] if cell.scored else both[:, _NSUM:]


def cell_sums(cell: CellArrays) -> np.ndarray:
    """The point-estimate sums of a cell (weights 1), shape ``(len(SUM_COLUMNS),)``."""
    return cell_columns(cell).sum(axis=0)


_COUNT_TERMS = frozenset({"n", "n_noise"})


def point_values(terms: Mapping[str, np.ndarray]) -> dict[str, float | None]:
    """Scalar terms (0-d arrays) as Python values: NaN → ``None``, counts (``n``) → int."""
    out: dict[str, float | None] = {}
    for name, arr in terms.items():
        value = optional_float(arr)
        if name in _COUNT_TERMS and value is not None:
            value = int(round(value))  # a count
        out[name] = value
    return out


def ledger_point(cell: CellArrays) -> dict[str, float | None]:
    """The point estimates of every term of :data:`TERMS` (``None`` = undefined)."""
    return point_values(terms_from_sums(cell_sums(cell), cell.scored))


# --------------------------------------------------------------------------- bootstrap


def ledger_bootstrap(
    cells: Mapping[str, CellArrays], resamples: int, seed: int, keys: np.ndarray | None = None
) -> tuple[dict[str, dict[str, float | None]], dict[str, dict[str, np.ndarray]] | None]:
    """Point terms and resampled terms (R-vectors, NaN = undefined) of every cell, on one shared W.

    ``keys`` are the samples' ids (sids) the weights are drawn for (default: positions).
    None for the resampled terms when ``resamples`` is 0 or there are no samples. Public for
    a caller that pairs terms across cells itself (``compare``: a cell of run A against one of B).
    """
    n = common_length([len(c) for c in cells.values()], "ledger cells")
    columns = ResampledColumns(item_keys(n, keys))
    index: dict[str, np.ndarray] = {}
    points: dict[str, dict[str, float | None]] = {}
    for cid, cell in cells.items():
        block = cell_columns(cell)
        points[cid] = point_values(terms_from_sums(block.sum(axis=0), cell.scored))
        index[cid] = columns.add(block)
    if resamples == 0 or n == 0:
        return points, None
    sums = columns.resampled_sums(resamples, seed)
    boots = {cid: terms_from_sums(sums[:, index[cid]], cells[cid].scored) for cid in cells}
    return points, boots


def compute_ledger(
    cells: Mapping[str, CellArrays],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
    keys: np.ndarray | None = None,
) -> dict[str, dict[str, Estimate]]:
    """Every term of every cell with its bootstrap interval: ``{cell_id: {term: Estimate}}``.

    All cells must be aligned on the same N samples, whose ids are ``keys`` (default:
    positions); they share the samples' weights. ``resamples=0`` gives point estimates
    with no intervals.
    """
    resamples = check_bootstrap_args(resamples, alpha)
    points, boots = ledger_bootstrap(cells, resamples, seed, keys)
    flat_points = {(cid, t): points[cid][t] for cid in cells for t in TERMS}
    flat_boots = None if boots is None else {(cid, t): boots[cid][t] for cid in cells for t in TERMS}
    flat = percentile_intervals(flat_points, flat_boots, alpha)
    return {cid: {t: flat[(cid, t)] for t in TERMS} for cid in cells}


def paired_difference(
    cells: Mapping[str, CellArrays],
    a: str,
    b: str,
    term: str,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
    keys: np.ndarray | None = None,
) -> Estimate:
    """``term(a) − term(b)`` with a paired bootstrap interval (the same resamples for both).

    ``None`` if the term is undefined in either cell. Uses the same weights as
    :func:`compute_ledger` with the same ``seed``, ``resamples`` and ``keys``.
    """
    resamples = check_bootstrap_args(resamples, alpha)
    if term not in TERMS:
        raise ValueError(f"unknown term {term!r}; choose one of: {', '.join(TERMS)}")
    for cid in (a, b):
        if cid not in cells:
            raise KeyError(f"no cell {cid!r}")
    pair = {a: cells[a]} if a == b else {a: cells[a], b: cells[b]}
    common_length([len(c) for c in cells.values()], "ledger cells")
    points, boots = ledger_bootstrap(pair, resamples, seed, keys)
    pa, pb = points[a][term], points[b][term]
    value = None if pa is None or pb is None else float(pa - pb)
    diff = None if boots is None else boots[a][term] - boots[b][term]
    return percentile_intervals({"d": value}, None if diff is None else {"d": diff}, alpha)["d"]


# --------------------------------------------------------------------------- from state sums


def ledger_from_states(
    states: Mapping[K, tuple[np.ndarray, np.ndarray | None]], alpha: float = 0.05
) -> dict[K, dict[str, Estimate]]:
    """Every term of every cell from its state: point sums (len(STATE_COLUMNS),) and replicate
    sums (resamples × len(STATE_COLUMNS), or None for no intervals).

    Vectorized over the cells: one formula evaluation and one sort for all their resamples
    (a live ledger refresh builds 50 cells × 13 terms × 2,000 resamples in a few ms).
    """
    keys = list(states)
    if not keys:
        return {}
    points = np.array([np.asarray(states[k][0], dtype=np.float64) for k in keys])
    scored = points[:, 0] > 0
    half = np.where(scored[:, None], np.arange(_NSUM), np.arange(_NSUM, 2 * _NSUM))  # cells × SUM_COLUMNS
    cells = np.arange(len(keys))[:, None]
    point_terms = _with_unscored(terms_from_sums(points[cells, half], True), scored)
    flat_points = [optional_float(point_terms[t][i]) for t in TERMS for i in range(len(keys))]
    flat_points = [int(round(v)) if t == "n" and v is not None else v
                   for t, v in zip((t for t in TERMS for _ in keys), flat_points)]
    reps = [states[k][1] for k in keys]
    if any(r is None or not len(r) for r in reps):
        ests = [Estimate(v, None, None) for v in flat_points]
    else:
        stacked = np.stack([np.asarray(r, dtype=np.float64) for r in reps], axis=1)  # resamples × cells × 16
        boot = _with_unscored(terms_from_sums(stacked[:, cells, half], True), scored)
        rows = np.concatenate([boot[t].T for t in TERMS])  # (terms·cells) × resamples, one row each
        ests = percentile_rows(flat_points, rows, alpha)
    n = len(keys)
    return {k: {t: ests[j * n + i] for j, t in enumerate(TERMS)} for i, k in enumerate(keys)}


def _with_unscored(terms: dict[str, np.ndarray], scored: np.ndarray) -> dict[str, np.ndarray]:
    """Terms computed as if every cell were scored, with the reasoning terms of unscored cells undefined."""
    if scored.all():
        return terms
    for t in REASONING_TERMS:
        terms[t] = np.where(scored, terms[t], np.nan)
    return terms


def difference_from_states(
    a: tuple[np.ndarray, np.ndarray | None], b: tuple[np.ndarray, np.ndarray | None], term: str,
    alpha: float = 0.05,
) -> Estimate:
    """``term(a) − term(b)`` from two cells' states: paired, since both replicate sums use the samples' weights."""
    if term not in TERMS:
        raise ValueError(f"unknown term {term!r}; choose one of: {', '.join(TERMS)}")
    (pa, ra), (pb, rb) = a, b
    sa, sb = state_scored(pa), state_scored(pb)
    va = point_values(terms_from_state(pa, sa))[term]
    vb = point_values(terms_from_state(pb, sb))[term]
    value = None if va is None or vb is None else float(va - vb)
    boot = None
    if ra is not None and rb is not None and len(ra):
        boot = terms_from_state(ra, sa)[term] - terms_from_state(rb, sb)[term]
    return percentile_intervals({"d": value}, None if boot is None else {"d": boot}, alpha)["d"]
