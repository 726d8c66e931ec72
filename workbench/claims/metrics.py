"""RAGChecker-style claim metrics (docs/design.md §6) over a claim × unit verdict table.

The formulas are those of amazon-science/RAGChecker ``ragchecker/computation.py``, per
sample (one answer), then averaged over samples. Inputs of one sample, all boolean:

======================  ======  ==========================================  ==================
field                   shape   true when                                   RAGChecker name
======================  ======  ==========================================  ==================
``claim_unit[i, j]``    (I, J)  response claim i is supported by unit j     retrieved2response
``claim_correct[i]``    (I,)    response claim i is entailed by the gold    answer2response
``gold_unit[g, j]``     (G, J)  reference claim g is entailed by unit j     retrieved2answer
``gold_in_response[g]`` (G,)    reference claim g is entailed by response   response2answer
``relevant[j]``         (J,)    unit j is on a gold path (optional)         (none)
======================  ======  ==========================================  ==================

Units j are the shown units (those visible in the evidence window). The reference claims g
are the gold answers of a short (KG) answer, "entailed" then meaning "contained" (one claim per
answer with its aliases), or the claims a long reference answer is decomposed into
(:mod:`workbench.claims.reference`).
``relevant`` overrides RAGChecker's notion of a relevant unit (one that contains some gold
item, ``any_g gold_unit[g, j]``) when the gold units are known; without it that notion is
used. See :data:`FORMULAS` for every metric in one line.

Undefined cases — where we deliberately differ from RAGChecker. RAGChecker returns ``0.``
whenever an input is empty, which silently drags averages down; here an undefined value is
``None`` (shown as ``—``) and is left out of the cell mean. The rule is: *a mean over an
empty set, or a ratio with a zero denominator, is None; a max over an empty set is False*
(with nothing shown, a claim is supported by nothing). Hence:

* no claims (I = 0): faithfulness, hallucination, self_knowledge, both noise
  sensitivities and precision are None;
* claims but no units (J = 0): faithfulness = 0.0, hallucination + self_knowledge = 1
  (split by ``claim_correct``) and both noise sensitivities = 0.0 — all defined, where
  RAGChecker's empty-input guard reports 0 for all five; claim_recall = 0.0 if there are gold items;
* no gold items (G = 0): claim_recall, context_utilization and recall are None, and so
  are context_precision and — when ``relevant`` is not given — the noise sensitivities,
  because relevance is defined by gold items;
* context_utilization is None when no gold item is recalled by the units;
* context_precision is None with no units;
* f1 is None if precision or recall is None, and 0.0 when both are 0 (as RAGChecker).

Aggregation. A cell's value is the mean of the per-sample values over the samples where the
metric is defined (RAGChecker averages per-sample values too), with a 95 % percentile
bootstrap interval over those samples (:func:`workbench.metrics.stats.bootstrap_mean`: one
resample-count matrix W, means ``W @ v / n``, no Python loop over resamples).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from workbench.metrics.stats import RESAMPLES, SEED, bootstrap_mean, check_bootstrap_args

__all__ = ["METRICS", "FORMULAS", "SampleClaims", "CellMetric", "sample_metrics", "aggregate"]

METRICS: tuple[str, ...] = (
    "faithfulness",
    "hallucination",
    "self_knowledge",
    "context_utilization",
    "noise_sensitivity_relevant",
    "noise_sensitivity_irrelevant",
    "claim_recall",
    "context_precision",
    "precision",
    "recall",
    "f1",
)

#: One human-readable formula per metric (i: response claims, j: shown units, g: reference claims).
FORMULAS: dict[str, str] = {
    "faithfulness": "mean_i faithful_i, faithful_i = any_j claim_unit[i,j]",
    "hallucination": "mean_i (not faithful_i and not correct_i)",
    "self_knowledge": "mean_i (not faithful_i and correct_i)",
    "context_utilization": "#{g: recalled_g and in_response_g} / #{g: recalled_g}, "
                           "recalled_g = any_j gold_unit[g,j]",
    "noise_sensitivity_relevant": "mean_i (rel_faithful_i and not correct_i), "
                                  "rel_faithful_i = any_j (relevant_j and claim_unit[i,j])",
    "noise_sensitivity_irrelevant": "mean_i (irr_faithful_i and not rel_faithful_i and not "
                                    "correct_i), irr_faithful_i = any_j (not relevant_j and "
                                    "claim_unit[i,j])",
    "claim_recall": "mean_g recalled_g (reference claims entailed by some shown unit)",
    "context_precision": "mean_j any_g gold_unit[g,j] (shown units entailing some reference claim)",
    "precision": "mean_i correct_i (response claims entailed by the reference answer)",
    "recall": "mean_g in_response_g (reference claims entailed by the response)",
    "f1": "2·precision·recall / (precision + recall); 0 if both are 0",
}


def _bool_array(name: str, value: object, ndim: int) -> np.ndarray:
    """``value`` as a read-only boolean array of ``ndim`` dimensions (0/1 numbers accepted)."""
    arr = np.asarray(value)
    if arr.ndim != ndim:
        raise ValueError(f"SampleClaims.{name} must be {ndim}-D, got shape {arr.shape}")
    if arr.dtype != np.bool_:
        # An empty list arrives as float64; anything non-numeric or not 0/1 is a caller bug.
        if arr.dtype.kind not in "biuf" or (arr.size and not np.isin(arr, (0, 1)).all()):
            raise ValueError(
                f"SampleClaims.{name} must be boolean (or 0/1), got dtype {arr.dtype}"
            )
    arr = arr.astype(np.bool_, copy=True)
    arr.flags.writeable = False  # the dataclass is frozen; so are its arrays
    return arr


@dataclass(frozen=True)
class SampleClaims:
    """The verdict table of one sample (one answer); see the module doc for the fields."""

    claim_unit: np.ndarray
    claim_correct: np.ndarray
    gold_unit: np.ndarray
    gold_in_response: np.ndarray
    relevant: np.ndarray | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise the fields once, here
        set_(self, "claim_unit", _bool_array("claim_unit", self.claim_unit, 2))
        set_(self, "claim_correct", _bool_array("claim_correct", self.claim_correct, 1))
        set_(self, "gold_unit", _bool_array("gold_unit", self.gold_unit, 2))
        set_(self, "gold_in_response", _bool_array("gold_in_response", self.gold_in_response, 1))
        if self.relevant is not None:
            set_(self, "relevant", _bool_array("relevant", self.relevant, 1))
        n_claims, n_units = self.claim_unit.shape
        n_gold = self.gold_unit.shape[0]
        expected = {
            "claim_correct": (self.claim_correct.shape, (n_claims,)),
            "gold_unit": (self.gold_unit.shape, (n_gold, n_units)),
            "gold_in_response": (self.gold_in_response.shape, (n_gold,)),
        }
        if self.relevant is not None:
            expected["relevant"] = (self.relevant.shape, (n_units,))
        for name, (got, want) in expected.items():
            if got != want:
                raise ValueError(
                    f"SampleClaims.{name} has shape {got}, expected {want} "
                    f"({n_claims} claims, {n_units} units, {n_gold} gold items)"
                )


def _mean(x: np.ndarray) -> float | None:
    """Mean of a boolean vector; None over an empty set."""
    return float(np.mean(x)) if x.size else None


def _ratio(num: int, den: int) -> float | None:
    return float(num) / float(den) if den else None


def _f1(p: float | None, r: float | None) -> float | None:
    if p is None or r is None:
        return None
    return 0.0 if p + r == 0 else 2.0 * p * r / (p + r)


def sample_metrics(s: SampleClaims) -> dict[str, float | None]:
    """Every metric of :data:`METRICS` for one sample; ``None`` = undefined (module doc)."""
    n_gold = s.gold_unit.shape[0]
    # np.any over an empty axis is False: with no units shown, no claim is supported.
    faithful = s.claim_unit.any(axis=1)
    correct = s.claim_correct
    recalled = s.gold_unit.any(axis=1)  # gold item g is in some shown unit
    useful = s.gold_unit.any(axis=0)  # unit j contains some gold item
    relevant = useful if s.relevant is None else s.relevant
    relevance_known = s.relevant is not None or n_gold > 0
    rel_faithful = (s.claim_unit & relevant).any(axis=1)
    # RAGChecker makes the two kinds exclusive: a claim backed by any relevant unit is "relevant".
    irr_faithful = (s.claim_unit & ~relevant).any(axis=1) & ~rel_faithful
    precision = _mean(correct)
    recall = _mean(s.gold_in_response)
    return {
        "faithfulness": _mean(faithful),
        "hallucination": _mean(~faithful & ~correct),
        "self_knowledge": _mean(~faithful & correct),
        "context_utilization": _ratio(int(np.sum(recalled & s.gold_in_response)),
                                      int(np.sum(recalled))),
        "noise_sensitivity_relevant": _mean(rel_faithful & ~correct) if relevance_known else None,
        "noise_sensitivity_irrelevant": _mean(irr_faithful & ~correct) if relevance_known else None,
        "claim_recall": _mean(recalled),
        "context_precision": _mean(useful) if n_gold else None,
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
    }


@dataclass
class CellMetric:
    """A metric over a cell: ``n`` samples where it is defined, their mean and 95 % interval."""

    n: int
    mean: float | None
    low: float | None
    high: float | None


def aggregate(
    per_sample: Sequence[dict[str, float | None]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = 0.05,
    names: Sequence[str] = METRICS,
    keys: Sequence[int] | None = None,
) -> dict[str, CellMetric]:
    """Each metric of ``names`` (default :data:`METRICS`) over a cell of samples (outputs of :func:`sample_metrics`).

    The value is the mean over the samples where the metric is defined (a missing key counts
    as undefined); the interval is a percentile bootstrap over those samples, reproducible
    from ``seed``. Fewer than 2 defined samples, or ``resamples=0``, give no interval.
    ``keys`` (one per sample, e.g. sids) key the bootstrap weights; default the positions.
    """
    resamples = check_bootstrap_args(resamples, alpha)
    out: dict[str, CellMetric] = {}
    ids = list(range(len(per_sample))) if keys is None else list(keys)
    for name in names:
        defined = [(k, d[name]) for k, d in zip(ids, per_sample) if d.get(name) is not None]
        values = np.array([v for _, v in defined], dtype=np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"metric {name!r} has a non-finite value; use None for undefined")
        est = bootstrap_mean(values, resamples=resamples, seed=seed, alpha=alpha, keys=[k for k, _ in defined])
        out[name] = CellMetric(len(values), est.value, est.lo, est.hi)
    return out


# -- RAGChecker's own convention ---------------------------------------------------------------

#: RAGChecker's metric names (``ragchecker/metrics.py``) and the workbench's name of each.
RAGCHECKER_NAMES: dict[str, str] = {
    "precision": "precision", "recall": "recall", "f1": "f1",
    "claim_recall": "claim_recall", "context_precision": "context_precision",
    "context_utilization": "context_utilization",
    "noise_sensitivity_in_relevant": "noise_sensitivity_relevant",
    "noise_sensitivity_in_irrelevant": "noise_sensitivity_irrelevant",
    "hallucination": "hallucination", "self_knowledge": "self_knowledge", "faithfulness": "faithfulness",
}
#: RAGChecker's three groups of its overall report, in its order, named as its code names them
#: (``ragchecker/metrics.py``; files written by older versions say ``overall``, ``retriever``, ``generator``).
RAGCHECKER_GROUPS: dict[str, tuple[str, ...]] = {
    "overall_metrics": ("precision", "recall", "f1"),
    "retriever_metrics": ("claim_recall", "context_precision"),
    "generator_metrics": ("context_utilization", "noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant",
                  "hallucination", "self_knowledge", "faithfulness"),
}


def ragchecker_metrics(s: SampleClaims) -> dict[str, float]:
    """Every RAGChecker metric of one sample under RAGChecker's own convention, by its name.

    As ``ragchecker/computation.py`` computes them, guard for guard: an empty input makes a
    metric 0.0 (never undefined); a relevant unit is one that entails some reference claim
    (``s.relevant`` is not used); the two noise sensitivities are exclusive.
    """
    a2r, r2a = s.claim_correct, s.gold_in_response        # answer2response (I,), response2answer (G,)
    ret2r, ret2a = s.claim_unit, s.gold_unit              # retrieved2response (I, J), retrieved2answer (G, J)
    n_claims, n_units = ret2r.shape
    n_ref = ret2a.shape[0]
    out: dict[str, float] = {}
    out["precision"] = float(np.mean(a2r)) if len(a2r) > 0 else 0.0
    out["recall"] = float(np.mean(r2a)) if len(r2a) > 0 else 0.0
    p, r = out["precision"], out["recall"]
    out["f1"] = 2 * p * r / (p + r) if p > 0 and r > 0 else 0.0
    if n_ref > 0 and n_units > 0:
        recalled = np.max(ret2a, axis=1)
        out["claim_recall"] = float(np.mean(recalled))
        out["context_precision"] = float(np.mean(np.max(ret2a, axis=0)))
        out["context_utilization"] = (float(np.sum(recalled & r2a) / np.sum(recalled)) if np.sum(recalled) > 0
                                      else 0.0)
    else:
        out["claim_recall"] = out["context_precision"] = out["context_utilization"] = 0.0
    if n_claims > 0 and n_units > 0 and n_ref > 0:
        relevant = np.max(ret2a, axis=0, keepdims=True)
        relevant_faithful = np.max(relevant & ret2r, axis=1)
        irrelevant_faithful = np.max(~relevant & ret2r, axis=1) & ~relevant_faithful
        out["noise_sensitivity_in_relevant"] = float(np.mean(relevant_faithful & ~a2r))
        out["noise_sensitivity_in_irrelevant"] = float(np.mean(irrelevant_faithful & ~a2r))
    else:
        out["noise_sensitivity_in_relevant"] = out["noise_sensitivity_in_irrelevant"] = 0.0
    if n_claims > 0 and n_units > 0:
        unfaithful = ~np.max(ret2r, axis=1)
        out["hallucination"] = float(np.mean(unfaithful & ~a2r))
        out["self_knowledge"] = float(np.mean(unfaithful & a2r))
        out["faithfulness"] = float(np.mean(np.max(ret2r, axis=1)))
    else:
        out["hallucination"] = out["self_knowledge"] = out["faithfulness"] = 0.0
    return {name: out[name] for name in RAGCHECKER_NAMES}


def ragchecker_overall(per_query: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    """RAGChecker's overall report: per group, each metric's mean over *all* queries × 100 (not rounded;
    RAGChecker prints it rounded to one decimal)."""
    return {group: {name: float(np.mean([q[name] for q in per_query])) * 100 if per_query else 0.0
                    for name in names}
            for group, names in RAGCHECKER_GROUPS.items()}
