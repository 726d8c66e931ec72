"""How far a judge agrees with human labels: the confusion matrix, accuracy, Cohen's κ with a CI.

A *judge* is anything that labels items: a claim verifier, the vote of several, the dedup
judge, an answer scorer. Against human labels of the same items it gets:

- the confusion matrix (rows: human label, columns: judge label) and the accuracy;
- Cohen's κ = (p_o − p_e) / (1 − p_e), the agreement beyond what the two marginals give by
  chance (Cohen 1960), with a 95 % bootstrap interval over items on the Poisson weights of
  :mod:`workbench.metrics.stats` (keyed by item, so two judges on the same items are paired);
- the judge's positive rate against the human one (a judge that says "supported" 84 % of the
  time where humans say 30 % is biased, whatever its κ);
- the majority-class baseline: the accuracy of always answering the humans' commonest label.

κ is undefined (``None``) when p_e = 1, i.e. both raters used one and the same label
throughout; a resample where that happens is left out of the interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from workbench.metrics.resample import item_keys, iter_resample_weights
from workbench.metrics.stats import RESAMPLES, SEED, Estimate, optional_float, percentile_interval

__all__ = ["Agreement", "agreement", "cohen_kappa"]


@dataclass(frozen=True)
class Agreement:
    """A judge against human labels on the same items (``labels``: the categories, in matrix order)."""

    labels: tuple
    confusion: list[list[int]]      # [human][judge] counts
    n: int
    accuracy: float | None
    kappa: Estimate
    judge_positive_rate: float | None   # binary labels only: share the judge labels True/1
    human_positive_rate: float | None
    majority_baseline: float | None     # accuracy of always giving the humans' commonest label


def _codes(human: Sequence[Hashable], judge: Sequence[Hashable],
           categories: Sequence[Hashable] | None = None) -> tuple[np.ndarray, np.ndarray, tuple]:
    if len(human) != len(judge):
        raise ValueError(f"{len(human)} human labels for {len(judge)} judge labels: pair them item by item")
    labels = tuple(sorted(set(human) | set(judge), key=repr)) if categories is None else tuple(categories)
    if categories is not None and not set(human) | set(judge) <= set(labels):
        raise ValueError(f"labels outside the categories {labels}: {sorted(set(human) | set(judge) - set(labels))}")
    index = {label: i for i, label in enumerate(labels)}
    return (np.array([index[h] for h in human], dtype=np.int64), np.array([index[j] for j in judge], dtype=np.int64),
            labels)


def _kappa_from_counts(counts: np.ndarray) -> np.ndarray:
    """κ of confusion matrices ``[..., k, k]`` (any non-negative weights); NaN where p_e = 1 or no weight."""
    total = counts.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        p_o = np.trace(counts, axis1=-2, axis2=-1) / total
        p_e = (counts.sum(axis=-1) * counts.sum(axis=-2)).sum(axis=-1) / total**2
        kappa = (p_o - p_e) / (1 - p_e)
    return np.where((total > 0) & (p_e < 1), kappa, np.nan)


def cohen_kappa(human: Sequence[Hashable], judge: Sequence[Hashable]) -> float | None:
    """Cohen's κ of two raters on the same items (``None`` when undefined: one shared label throughout)."""
    h, j, labels = _codes(human, judge)
    counts = np.zeros((len(labels), len(labels)))
    np.add.at(counts, (h, j), 1)
    return optional_float(_kappa_from_counts(counts)) if len(h) else None


def agreement(human: Sequence[Hashable], judge: Sequence[Hashable], *, keys: Sequence[int] | None = None,
              categories: Sequence[Hashable] | None = None, resamples: int = RESAMPLES, seed: int = SEED,
              alpha: float = 0.05) -> Agreement:
    """The judge's agreement with the human labels, κ with its percentile bootstrap interval.

    ``keys`` are the items' bootstrap keys (e.g. claim or sample ids: two judges scored on
    the same keys get paired intervals); default their positions. ``categories`` fixes the
    labels and the matrix order (e.g. ``(False, True)``: a 2 × 2 matrix even when one label
    is never used); default the labels seen, sorted.
    """
    h, j, labels = _codes(human, judge, categories)
    k, n = len(labels), len(h)
    counts = np.zeros((k, k), dtype=np.int64)
    np.add.at(counts, (h, j), 1)
    point = cohen_kappa(human, judge) if n else None
    boot = None
    if n >= 2 and resamples and point is not None:
        cell = h * k + j   # each item's cell of the matrix: the resampled matrix is Wᵀ · one-hot
        onehot = np.zeros((n, k * k))
        onehot[np.arange(n), cell] = 1.0
        weighted = np.zeros((resamples, k * k))
        for items, w in iter_resample_weights(item_keys(n, keys), resamples, seed):
            weighted += w.T @ onehot[items]
        boot = _kappa_from_counts(weighted.reshape(resamples, k, k))
    kappa = percentile_interval(point, boot, alpha)
    binary = set(labels) <= {0, 1, False, True}
    positive = labels.index(1) if binary and 1 in labels else None   # True == 1: either spelling
    rate = (lambda codes: float(np.mean(codes == positive))) if positive is not None and n else None
    return Agreement(
        labels=labels, confusion=counts.tolist(), n=n,
        accuracy=float(np.mean(h == j)) if n else None, kappa=kappa,
        judge_positive_rate=rate(j) if rate else None, human_positive_rate=rate(h) if rate else None,
        majority_baseline=float(np.bincount(h).max() / n) if n else None)
