"""Prediction-powered inference of a mean (Angelopoulos et al., Science 2023; PPI++, 2023): a judged metric corrected by labels.

A judge scores every item (``f_i``, e.g. 1 if an LLM says a claim is supported); humans label
a uniformly drawn subset (``y_i``). Three estimates of the true mean of y, each with a 95 % CI:

- **naive**: the mean of the judge's scores over all items. Its interval is narrow and
  wrong when the judge is biased: it estimates E[f], not E[y].
- **human**: the mean of the labels over the n labelled items. Unbiased, but n is small.
- **PPI**: ``θ̂ = λ·mean(f over the N unlabelled) + mean(y − λ·f over the labelled)``. The
  second term (the "rectifier") measures the judge's bias where labels exist and removes it.
  Its variance is ``λ²·Var(f)/N + Var(y − λf)/n``. With λ = 1 this is the PPI of the Science
  paper: a good judge (f − y nearly constant) gives an interval much narrower than the
  human-only one, but a poor judge gives a *wider* one. **Power tuning** (PPI++, Angelopoulos,
  Duchi and Zrnic, arXiv:2311.01453) picks the λ in [0, 1] that minimises that variance
  (estimated from the data), so a useless judge falls back towards the human-only estimate
  (λ → 0) and a good one is used fully (λ → 1). Tuned λ is the default, as in ``ppi_py``.

Every formula is ``ppi_py``'s (``ppi_mean_pointestimate``, ``ppi_mean_ci``,
``classical_mean_ci``, ``_calc_lam_glm`` with ``clip=True``), which the tests check to 1e-12:
CLT intervals with the normal quantile and population standard deviations (ddof 0). Where
``ppi_py`` would divide by zero (a judge with one score throughout) λ is 0: the judge carries
no information and the estimate is the human one.

A metric that is a share lives in [0, 1]: with ``bounds=(0, 1)`` every estimate and interval
end is clipped to it, which keeps the coverage (the true value is inside the bounds) and
never moves an estimate further from it; a small sample's CLT interval or a strongly
rectified estimate can otherwise leave the range.

They are valid only if the labelled items are a *uniform random* subset of the items judged:
the label queue's default. An undefined estimate (no item; an interval from fewer
than two values) is ``None``.
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
    lam: float | None = None    # the power-tuning λ the PPI estimate used (None: undefined)


def _interval(value: float | None, std_error: float | None, alpha: float,
              bounds: tuple[float, float] | None = None) -> Estimate:
    clip = (lambda x: x) if bounds is None else (lambda x: min(max(x, bounds[0]), bounds[1]))
    if value is None:
        return Estimate(None, None, None)
    if std_error is None or not np.isfinite(std_error):
        return Estimate(clip(value), None, None)
    half = NormalDist().inv_cdf(1 - alpha / 2) * std_error
    return Estimate(clip(value), clip(value - half), clip(value + half))


def _classical(x: np.ndarray, alpha: float, bounds) -> Estimate:
    """``ppi_py.classical_mean_ci``: the mean with a CLT interval (ddof 0); no interval from < 2 values."""
    if len(x) == 0:
        return Estimate(None, None, None)
    return _interval(float(x.mean()), float(x.std()) / np.sqrt(len(x)) if len(x) > 1 else None, alpha, bounds)


def power_tuning(f_lab: np.ndarray, y: np.ndarray, f_unl: np.ndarray) -> float:
    """The variance-minimising λ in [0, 1] (``ppi_py._calc_lam_glm`` for a mean, clipped); 0 when f is constant."""
    n, big_n = len(y), len(f_unl)
    theta = f_unl.mean() + (y - f_lab).mean()                  # the λ = 1 estimate centres the gradients
    grads, grads_hat = y - theta, f_lab - theta
    cov = 2 * ((grads - grads.mean()) * (grads_hat - grads_hat.mean())).sum() / n
    var = np.var(np.concatenate([grads_hat, f_unl - theta]), ddof=1)
    if not var > 0:
        return 0.0
    return float(np.clip(cov / (2 * (1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean(judged_labelled: Sequence[float], labels: Sequence[float], judged_unlabelled: Sequence[float],
             *, alpha: float = 0.05, lam: float | None = None,
             bounds: tuple[float, float] | None = None) -> PPIEstimates:
    """The naive, human-only and PPI estimates of E[y] with their ``1 − alpha`` intervals.

    ``judged_labelled[i]`` and ``labels[i]`` are the judge's score and the human label of the
    same labelled item; ``judged_unlabelled`` are the judge's scores of the other items.
    ``lam`` fixes λ (1: the original PPI; 0: human-only); default power-tuned.
    ``bounds`` clips the estimates and intervals to the metric's range (see the module doc).
    """
    f_lab = np.asarray(judged_labelled, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    f_unl = np.asarray(judged_unlabelled, dtype=np.float64)
    if f_lab.shape != y.shape:
        raise ValueError(f"{len(f_lab)} judged scores for {len(y)} labels: pair them item by item")
    naive = _classical(np.concatenate([f_lab, f_unl]), alpha, bounds)
    human = _classical(y, alpha, bounds)
    n, big_n = len(y), len(f_unl)
    if n == 0 or big_n == 0:
        return PPIEstimates(naive, human, Estimate(None, None, None), n, big_n)
    tuned = power_tuning(f_lab, y, f_unl) if lam is None else float(lam)
    rectified = y - tuned * f_lab
    value = float(tuned * f_unl.mean() + rectified.mean())
    std_error = (float(np.sqrt((tuned * f_unl).var() / big_n + rectified.var() / n))
                 if n > 1 and big_n > 1 else None)
    return PPIEstimates(naive, human, _interval(value, std_error, alpha, bounds), n, big_n, tuned)
