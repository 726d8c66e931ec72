"""Oracle controls at one budget B (docs/design.md §3 "Oracle controls"): Acc_struct, Acc_linear,
L_struct, and the noise loss L_noise paired with the real linear cells.

Built on the ledger's bootstrap machinery, so every oracle term shares the resamples of
the ledger and pairs with it.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from workbench.metrics.ledger import CellArrays, cell_columns, point_values, terms_from_sums
from workbench.metrics.stats import (
    ResampledColumns,
    check_bootstrap_args,
    common_length,
    percentile_intervals,
    ratio,
)

# Oracle-control terms; "L_noise*" are per real cell (see :func:`oracle_terms`).
ORACLE_TERMS: tuple[str, ...] = ("n", "Acc_struct", "Acc_linear", "L_struct")

_ORACLE_SUMS = ("o", "o_struct", "o_linear")


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


def oracle_terms(
    struct_scores: np.ndarray,
    linear_scores: np.ndarray,
    real: Mapping[str, CellArrays] | None = None,
    *,
    resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
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

    struct_ok = ~np.isnan(struct)
    linear_ok = (
        ~np.isnan(linear).any(axis=0) if linear.shape[0] > 0 else np.zeros(n, dtype=bool)
    )
    with np.errstate(invalid="ignore"):
        lin_mean = np.where(linear_ok, linear.mean(axis=0) if linear.shape[0] else 0.0, 0.0)
    has_struct, has_linear = bool(struct_ok.any()), bool(linear_ok.any())
    if has_struct and has_linear:
        o = struct_ok & linear_ok
    elif has_struct or has_linear:
        o = struct_ok if has_struct else linear_ok
    else:
        o = np.ones(n, dtype=bool)
    of = o.astype(np.float64)
    oracle_block = np.column_stack([of, of * np.where(struct_ok, struct, 0.0), of * lin_mean])

    columns = ResampledColumns(n)
    oracle_idx = columns.add(oracle_block)
    point_oracle = point_values(_oracle_from_sums(oracle_block.sum(axis=0), has_struct, has_linear))

    cell_idx: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    point_cells: dict[str, tuple[dict, dict]] = {}
    for cid, cell in real.items():
        ledger_block = cell_columns(cell)
        scored = ~np.isnan(cell.score)
        p = (cell.h_vis == 1) & scored & linear_ok
        pf = p.astype(np.float64)
        noise_block = np.column_stack([pf, pf * lin_mean, pf * np.where(scored, cell.score, 0.0)])
        cell_idx[cid] = (columns.add(ledger_block), columns.add(noise_block))
        point_cells[cid] = (
            point_values(terms_from_sums(ledger_block.sum(axis=0), cell.scored)),
            point_values(_noise_from_sums(noise_block.sum(axis=0))),
        )

    do_boot = resamples > 0 and n > 0
    sums = columns.resampled_sums(resamples, seed) if do_boot else None

    boot_oracle = (
        _oracle_from_sums(sums[:, oracle_idx], has_struct, has_linear) if do_boot else None
    )
    result: dict = percentile_intervals(point_oracle, boot_oracle, alpha)
    result["L_noise"], result["L_noise_unpaired"], result["n_noise"] = {}, {}, {}
    for cid, cell in real.items():
        ledger_pt, noise_pt = point_cells[cid]
        a_lin, a_hit = point_oracle["Acc_linear"], ledger_pt["Acc_hit"]
        points = {
            "n_noise": noise_pt["n"],
            "L_noise": noise_pt["L_noise"],
            "L_noise_unpaired": None if a_lin is None or a_hit is None else a_lin - a_hit,
        }
        boots = None
        if do_boot:
            li, ni = cell_idx[cid]
            noise_b = _noise_from_sums(sums[:, ni])
            boots = {
                "n_noise": noise_b["n"],
                "L_noise": noise_b["L_noise"],
                "L_noise_unpaired": boot_oracle["Acc_linear"]
                - terms_from_sums(sums[:, li], cell.scored)["Acc_hit"],
            }
        for name, est in percentile_intervals(points, boots, alpha).items():
            result[name][cid] = est
    return result
