"""Prediction-powered inference of a mean (Angelopoulos et al., Science 2023): a judged metric corrected by labels.

A judge scores every item (``f_i``, e.g. 1 if an LLM says a claim is supported); humans label
a uniformly drawn subset (``y_i``). Three estimates of the true mean of y, each with a 95 % CI:

- **naive**: the mean of the judge's scores over all N items. Its interval is narrow and
  wrong when the judge is biased: it estimates E[f], not E[y].
- **human**: the mean of the labels over the n labelled items. Unbiased, but n is small.
- **PPI**: ``θ̂ = mean(f over the unlabelled) − mean(f − y over the labelled)``. The second
  term ("the rectifier") measures the judge's bias where labels exist and removes it. Its
  variance is ``Var(f)/N_u + Var(f − y)/n``, so a good judge (f − y nearly constant) gives an
  interval much narrower than the human-only one, and a bad judge costs little more than it.

The intervals are the CLT ones of the paper (normal quantile, sample variances with ddof = 1).
They are valid only if the labelled items are a *uniform random* subset of the items judged:
the label queue's default (issue 18). An undefined estimate (no item, or one label for a
variance) is ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

from workbench.metrics.stats import Estimate

__all__ = ["PPIEstimates", "ppi_mean"]


@dataclass(frozen=True)
class PPIEstimates:
    """The naive judged, the human-only and the prediction-powered estimates of one mean."""

    naive: Estimate
    human: Estimate
    ppi: Estimate
    n_labelled: int
    n_unlabelled: int


def _interval(value: float | None, variance: float | None, alpha: float) -> Estimate:
    if value is None or variance is None or not np.isfinite(variance):
        return Estimate(value, None, None)
    half = NormalDist().inv_cdf(1 - alpha / 2) * float(np.sqrt(max(variance, 0.0)))
    return Estimate(value, value - half, value + half)


def _mean_and_var(x: np.ndarray) -> tuple[float | None, float | None]:
    """The mean and the variance *of the mean* (ddof 1); None where undefined."""
    if len(x) == 0:
        return None, None
    return float(x.mean()), (float(x.var(ddof=1)) / len(x) if len(x) > 1 else None)


def ppi_mean(judged_labelled: Sequence[float], labels: Sequence[float], judged_unlabelled: Sequence[float],
             *, alpha: float = 0.05) -> PPIEstimates:
    """The naive, human-only and PPI estimates of E[y] with their ``1 − alpha`` intervals.

    ``judged_labelled[i]`` and ``labels[i]`` are the judge's score and the human label of the
    same labelled item; ``judged_unlabelled`` are the judge's scores of the other items.
    """
    f_lab = np.asarray(judged_labelled, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    f_unl = np.asarray(judged_unlabelled, dtype=np.float64)
    if f_lab.shape != y.shape:
        raise ValueError(f"{len(f_lab)} judged scores for {len(y)} labels: pair them item by item")
    everything = np.concatenate([f_lab, f_unl])
    naive = _interval(*_mean_and_var(everything), alpha)
    human = _interval(*_mean_and_var(y), alpha)
    unl_mean, unl_var = _mean_and_var(f_unl)
    rect_mean, rect_var = _mean_and_var(f_lab - y)
    if unl_mean is None or rect_mean is None:
        ppi = Estimate(None, None, None)
    else:
        variance = None if unl_var is None or rect_var is None else unl_var + rect_var
        ppi = _interval(unl_mean - rect_mean, variance, alpha)
    return PPIEstimates(naive, human, ppi, len(y), len(f_unl))
