"""Oracle controls at one budget B (docs/design.md §3 "Oracle controls"): Acc_struct, Acc_linear,
L_struct, and the noise loss L_noise paired with the real linear cells.

Built on the ledger's bootstrap machinery, so every oracle term shares the resamples of
the ledger and pairs with it.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from workbench.metrics.ledger import CellArrays, cell_columns, point_values, terms_from_sums
from workbench.metrics.resample import item_keys
from workbench.metrics.stats import (
    RESAMPLES,
    SEED,
    ResampledColumns,
    check_bootstrap_args,
    common_length,
    percentile_intervals,
    ratio,
)

# Oracle-control terms; "L_noise*" are per real cell (see :func:`oracle_terms`).
__all__ = [
    "ORACLE_TERMS",
    "ORACLE_STATE_COLUMNS",
    "NOISE_COLUMNS",
    "oracle_contributions",
    "oracle_flags",
    "oracle_from_state",
    "noise_contributions",
    "noise_from_state",
    "oracle_terms",
    "oracle_estimates",
]

ORACLE_TERMS: tuple[str, ...] = ("n", "Acc_struct", "Acc_linear", "L_struct")
_ORACLE_SUMS = ("o", "o_struct", "o_linear")
_POPULATIONS = ("both", "struct", "linear", "all")
#: An oracle group's state (one budget): row count, the two "scored" flags' counts, the struct
#: window's H_vis count (p* visible), then the oracle sums over each candidate population.
ORACLE_STATE_COLUMNS: tuple[str, ...] = ("rows", "struct_ok", "linear_ok", "hv_struct") + tuple(
    f"{pop}.{c}" for pop in _POPULATIONS for c in _ORACLE_SUMS)
#: The paired noise loss's state (one real linear cell): Σp, Σp·oracle_linear, Σp·real.
NOISE_COLUMNS: tuple[str, ...] = ("p", "p_linear", "p_real")


def _oracle_from_sums(sums: np.ndarray, has_struct: bool, has_linear: bool) -> dict[str, np.ndarray]:
    """Oracle formulas: sums (Σo, Σo·struct, Σo·linear) → Acc_struct, Acc_linear, L_struct."""
    o, st, li = np.moveaxis(np.asarray(sums, dtype=np.float64), -1, 0)
    nan = np.full(o.shape, np.nan)
    acc_struct = ratio(st, o) if has_struct else nan
    acc_linear = ratio(li, o) if has_linear else nan
    return {
        "n": o.copy(),
        "Acc_struct": acc_struct,
        "Acc_linear": acc_linear,
        "L_struct": acc_struct - acc_linear,
    }


def _noise_from_sums(sums: np.ndarray) -> dict[str, np.ndarray]:
    """Paired noise loss: sums (Σp, Σp·oracle_linear, Σp·real) → n_noise, L_noise."""
    p, li, real = np.moveaxis(np.asarray(sums, dtype=np.float64), -1, 0)
    return {"n": p.copy(), "L_noise": ratio(li - real, p)}


def _linear_mean(linear: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: scored under every shuffle, and the mean of its shuffle scores (0 if not)."""
    n = linear.shape[1]
    ok = ~np.isnan(linear).any(axis=0) if linear.shape[0] > 0 else np.zeros(n, dtype=bool)
    with np.errstate(invalid="ignore"):
        mean = np.where(ok, linear.mean(axis=0) if linear.shape[0] else 0.0, 0.0)
    return ok, mean


def oracle_contributions(
    struct_scores: np.ndarray,
    linear_scores: np.ndarray,
    present: np.ndarray | None = None,
    struct_hvis: np.ndarray | None = None,
) -> np.ndarray:
    """Each sample's contribution to an oracle state: n × len(ORACLE_STATE_COLUMNS).

    ``struct_scores`` (n,) and ``linear_scores`` (M, n) as in :func:`oracle_terms`;
    ``present`` False = the sample has no oracle row (contribution 0); ``struct_hvis`` the
    struct window's H_vis (for p* visible; default 0).
    """
    struct = np.asarray(struct_scores, dtype=np.float64)
    linear = np.asarray(linear_scores, dtype=np.float64)
    n = len(struct)
    pres = np.ones(n, dtype=bool) if present is None else np.asarray(present, dtype=bool)
    struct_ok = ~np.isnan(struct) & pres
    linear_ok, lin_mean = _linear_mean(linear)
    linear_ok &= pres
    hv = np.zeros(n) if struct_hvis is None else np.asarray(struct_hvis, dtype=np.float64) * pres
    s = np.where(struct_ok, struct, 0.0)
    cols = [pres, struct_ok, linear_ok, hv]
    for o in (struct_ok & linear_ok, struct_ok, linear_ok, pres):
        of = o.astype(np.float64)
        cols += [of, of * s, of * lin_mean]
    return np.column_stack(cols).astype(np.float64)


def oracle_flags(point_state: np.ndarray) -> tuple[bool, bool]:
    """(has_struct, has_linear) of an oracle state's point sums: does any sample have the score."""
    return bool(point_state[1] > 0), bool(point_state[2] > 0)


def oracle_from_state(state: np.ndarray, has_struct: bool, has_linear: bool) -> dict[str, np.ndarray]:
    """The oracle terms from state sums (``[..., len(ORACLE_STATE_COLUMNS)]``).

    One population for every term (so ``L_struct = Acc_struct − Acc_linear`` holds exactly):
    the samples scored under every oracle format that has any score, chosen by the point's
    flags (:func:`oracle_flags`), never per resample.
    """
    pop = ("both" if has_struct and has_linear else "struct" if has_struct
           else "linear" if has_linear else "all")
    start = 4 + 3 * _POPULATIONS.index(pop)
    return _oracle_from_sums(np.asarray(state)[..., start:start + 3], has_struct, has_linear)


def noise_contributions(real_hvis: np.ndarray, real_scores: np.ndarray, linear_scores: np.ndarray) -> np.ndarray:
    """Each sample's contribution to a real linear cell's paired noise loss: n × len(NOISE_COLUMNS).

    p = H_vis(K,B,linear) = 1, scored in the real cell, and scored under every oracle shuffle.
    """
    real = np.asarray(real_scores, dtype=np.float64)
    linear_ok, lin_mean = _linear_mean(np.asarray(linear_scores, dtype=np.float64))
    scored = ~np.isnan(real)
    p = ((np.asarray(real_hvis) == 1) & scored & linear_ok).astype(np.float64)
    return np.column_stack([p, p * lin_mean, p * np.where(scored, real, 0.0)])


def noise_from_state(state: np.ndarray) -> dict[str, np.ndarray]:
    """n_noise and the paired L_noise from noise state sums (``[..., len(NOISE_COLUMNS)]``)."""
    return _noise_from_sums(state)


def oracle_terms(
    struct_scores: np.ndarray,
    linear_scores: np.ndarray,
    real: Mapping[str, CellArrays] | None = None,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
    keys: np.ndarray | None = None,
) -> dict:
    """Oracle controls at one budget B (docs/design.md §3 "Oracle controls"), with intervals.

    ``struct_scores`` (N,) are the scores with only p* in struct order; ``linear_scores``
    (M, N) the scores with only p*, shuffled, one row per seeded shuffle (NaN = not scored).
    ``real`` holds the K-sweep cells of format ``linear`` at the same B, keyed by cell id.

    A sample's oracle-linear score is the mean of its M shuffle scores; it counts as scored
    only when all M shuffles are, so Acc_linear is both the mean over shuffles of the
    per-shuffle means and the mean over samples of the per-sample means. As in the ledger,
    one population is used: the samples scored under every oracle format that has any score
    (so ``L_struct = Acc_struct − Acc_linear`` holds exactly); a format with no score at all
    gives ``None`` for its terms.

    ``keys`` are the samples' ids the bootstrap weights are drawn for (default: positions).

    Returns ``{"n", "Acc_struct", "Acc_linear", "L_struct"}`` as :class:`Estimate`, plus
    per real cell id:

    - ``"L_noise"[cid]`` — *paired*: over the samples with H_vis(K,B,linear) = 1 that are
      scored in the real cell and in oracle-linear, mean(oracle-linear score − real score);
      ``None`` if that set is empty; ``"n_noise"[cid]`` is its size;
    - ``"L_noise_unpaired"[cid]`` — ``Acc_linear(B) − Acc_hit(K,B,linear)``, each over its
      own population (labelled unpaired: the H_vis = 1 samples are a selected subset, so
      this mixes the noise loss with a difference in sample difficulty).
    """
    resamples = check_bootstrap_args(resamples, alpha)
    struct = np.asarray(struct_scores, dtype=np.float64)
    linear = np.asarray(linear_scores, dtype=np.float64)
    if struct.ndim != 1:
        raise ValueError(f"struct_scores must be 1-D (N,), got shape {struct.shape}")
    if linear.ndim == 1:
        linear = linear[None, :]
    if linear.ndim != 2:
        raise ValueError(f"linear_scores must be (M, N), got shape {linear.shape}")
    real = dict(real or {})
    n = common_length(
        [len(struct), linear.shape[1]] + [len(c) for c in real.values()],
        "oracle scores and real cells",
    )
    for name, arr in (("struct_scores", struct), ("linear_scores", linear)):
        ok = np.isnan(arr) | ((arr >= 0) & (arr <= 1))
        if not ok.all():
            raise ValueError(f"{name} must lie in [0, 1] (NaN = not scored)")

    state_block = oracle_contributions(struct, linear)
    columns = ResampledColumns(item_keys(n, keys))
    oracle_idx = columns.add(state_block)
    cell_idx = {cid: (columns.add(cell_columns(cell)), columns.add(noise_contributions(cell.h_vis, cell.score, linear)))
                for cid, cell in real.items()}
    do_boot = resamples > 0 and n > 0
    sums = columns.resampled_sums(resamples, seed) if do_boot else None

    def state(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        return _plain_sums(columns, idx), (sums[:, idx] if do_boot else None)

    acc_hit = {}
    for cid, cell in real.items():
        point, reps = state(cell_idx[cid][0])
        acc_hit[cid] = (point_values(terms_from_sums(point, cell.scored))["Acc_hit"],
                        None if reps is None else terms_from_sums(reps, cell.scored)["Acc_hit"])
    return oracle_estimates(state(oracle_idx), {cid: state(idx[1]) for cid, idx in cell_idx.items()}, acc_hit, alpha)


def _plain_sums(columns: ResampledColumns, idx: np.ndarray) -> np.ndarray:
    """The plain (weight 1) sums of some of ``columns``' columns: the point-estimate sums."""
    return np.array([columns.cols[j].sum() for j in idx], dtype=np.float64)


def oracle_estimates(
    oracle: tuple[np.ndarray, np.ndarray | None],
    noise: Mapping[str, tuple[np.ndarray, np.ndarray | None]],
    acc_hit: Mapping[str, tuple[float | None, np.ndarray | None]],
    alpha: float = 0.05,
) -> dict:
    """The oracle controls with intervals from state sums: ``oracle`` (point, replicates) of the budget,
    ``noise[cid]`` of each real linear cell, and that cell's ``Acc_hit`` (point, resampled).

    Returns what :func:`oracle_terms` returns. Replicates None = no intervals. Shared by the
    from-scratch path (:func:`oracle_terms`) and the incremental ledger.
    """
    point_state, reps_state = oracle
    has_struct, has_linear = oracle_flags(point_state)
    point_oracle = point_values(oracle_from_state(point_state, has_struct, has_linear))
    boot_oracle = None if reps_state is None else oracle_from_state(reps_state, has_struct, has_linear)
    result: dict = percentile_intervals(point_oracle, boot_oracle, alpha)
    result["L_noise"], result["L_noise_unpaired"], result["n_noise"] = {}, {}, {}
    for cid, (noise_point, noise_reps) in noise.items():
        noise_pt = point_values(noise_from_state(noise_point))
        a_lin, (a_hit, hit_boot) = point_oracle["Acc_linear"], acc_hit[cid]
        points = {
            "n_noise": noise_pt["n"],
            "L_noise": noise_pt["L_noise"],
            "L_noise_unpaired": None if a_lin is None or a_hit is None else a_lin - a_hit,
        }
        boots = None
        if noise_reps is not None and boot_oracle is not None and hit_boot is not None:
            noise_b = noise_from_state(noise_reps)
            boots = {"n_noise": noise_b["n"], "L_noise": noise_b["L_noise"],
                     "L_noise_unpaired": boot_oracle["Acc_linear"] - hit_boot}
        for name, est in percentile_intervals(points, boots, alpha).items():
            result[name][cid] = est
    return result
