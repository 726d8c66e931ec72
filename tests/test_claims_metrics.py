"""RAGChecker-style claim metrics (docs/design.md §6): a worked example, undefined cases, identities,
a cross-check against a literal transcription of RAGChecker, and the bootstrap aggregate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from workbench.claims.metrics import (
    FORMULAS,
    METRICS,
    CellMetric,
    SampleClaims,
    aggregate,
    sample_metrics,
)

T, F = True, False

# ---------------------------------------------------------------- the worked example
#
# Three shown units: U0 and U1 lie on the gold path, U2 is a distractor.
# Five response claims, one per kind:
#
#   claim  supported by   correct?  kind
#   c0     U0             yes       faithful, correct
#   c1     U1, U2         no        faithful via a relevant unit, wrong  -> noise (relevant)
#   c2     U2             no        faithful via the distractor only, wrong -> noise (irrelevant)
#   c3     —              yes       unfaithful, correct                    -> self-knowledge
#   c4     —              no        unfaithful, wrong                      -> hallucination
#
# Three gold items: g0 is in U0, g1 is in U1, g2 was not shown; the response states g0 and g2.
CLAIM_UNIT = [[T, F, F], [F, T, T], [F, F, T], [F, F, F], [F, F, F]]
CLAIM_CORRECT = [T, F, F, T, F]
GOLD_UNIT = [[T, F, F], [F, T, F], [F, F, F]]
GOLD_IN_RESPONSE = [T, F, T]
RELEVANT = [T, T, F]

EXPECTED = {
    "faithfulness": 3 / 5,  # c0, c1, c2
    "hallucination": 1 / 5,  # c4
    "self_knowledge": 1 / 5,  # c3
    "noise_sensitivity_relevant": 1 / 5,  # c1 (U1 is relevant; U2 does not make it "irrelevant")
    "noise_sensitivity_irrelevant": 1 / 5,  # c2
    "precision": 2 / 5,  # c0, c3
    "claim_recall": 2 / 3,  # g0, g1 are in shown units
    "context_precision": 2 / 3,  # U0, U1 contain a gold item
    "context_utilization": 1 / 2,  # of the recalled {g0, g1}, the response uses g0
    "recall": 2 / 3,  # g0, g2
    "f1": 1 / 2,  # 2·(2/5)(2/3) / (2/5 + 2/3) = (8/15) / (16/15)
}


def example(**overrides) -> SampleClaims:
    fields = dict(claim_unit=CLAIM_UNIT, claim_correct=CLAIM_CORRECT, gold_unit=GOLD_UNIT,
                  gold_in_response=GOLD_IN_RESPONSE, relevant=RELEVANT)
    fields.update(overrides)
    return SampleClaims(**{k: (v if v is None else np.array(v)) for k, v in fields.items()})


def test_worked_example_matches_hand_computed_fractions():
    got = sample_metrics(example())
    assert list(got) == list(METRICS)
    for name, want in EXPECTED.items():
        assert got[name] == pytest.approx(want), name


def test_without_relevant_units_are_relevant_if_they_contain_a_gold_item():
    # RAGChecker's fallback: relevant_j = any_g gold_unit[g, j] = [U0, U1] — the same as RELEVANT.
    got = sample_metrics(example(relevant=None))
    assert got["noise_sensitivity_relevant"] == pytest.approx(1 / 5)
    assert got["noise_sensitivity_irrelevant"] == pytest.approx(1 / 5)


def test_explicit_relevant_overrides_the_gold_item_fallback():
    # Only U0 on the gold path: c1 (U1, U2) is now backed by irrelevant units only.
    got = sample_metrics(example(relevant=[T, F, F]))
    assert got["noise_sensitivity_relevant"] == 0.0
    assert got["noise_sensitivity_irrelevant"] == pytest.approx(2 / 5)  # c1, c2
    # relevance does not enter the other metrics
    assert got["faithfulness"] == pytest.approx(3 / 5)
    assert got["context_precision"] == pytest.approx(2 / 3)


def test_zero_one_numbers_are_accepted_as_booleans():
    as_ints = example(claim_unit=np.array(CLAIM_UNIT, dtype=int), claim_correct=[1, 0, 0, 1, 0])
    assert sample_metrics(as_ints) == sample_metrics(example())
    assert as_ints.claim_unit.dtype == np.bool_ and not as_ints.claim_unit.flags.writeable


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(claim_unit=[T, F]), "claim_unit"),  # not 2-D
        (dict(claim_correct=[T, F]), "claim_correct"),  # 2 entries for 5 claims
        (dict(gold_unit=[[T, F], [F, T], [F, F]]), "gold_unit"),  # 2 units, not 3
        (dict(gold_in_response=[T]), "gold_in_response"),
        (dict(relevant=[T, F]), "relevant"),
        (dict(claim_correct=[2, 0, 0, 1, 0]), "claim_correct"),  # not 0/1
        (dict(claim_correct=["y", "n", "n", "y", "n"]), "claim_correct"),
    ],
)
def test_bad_shapes_and_values_name_the_field(overrides, field):
    with pytest.raises(ValueError, match=rf"SampleClaims\.{field}\b"):
        example(**overrides)


# ---------------------------------------------------------------- undefined cases → None

CLAIM_METRICS = ("faithfulness", "hallucination", "self_knowledge", "noise_sensitivity_relevant",
                 "noise_sensitivity_irrelevant", "precision")


def empty(n_claims, n_units, n_gold, relevant=None, claim_unit=None, gold_unit=None):
    """A sample with the given sizes, all verdicts False unless given."""
    return SampleClaims(
        claim_unit=(np.zeros((n_claims, n_units), bool) if claim_unit is None
                    else np.array(claim_unit)),
        claim_correct=np.zeros(n_claims, bool),
        gold_unit=np.zeros((n_gold, n_units), bool) if gold_unit is None else np.array(gold_unit),
        gold_in_response=np.zeros(n_gold, bool),
        relevant=relevant,
    )


def test_no_claims_leaves_every_claim_metric_undefined():
    got = sample_metrics(empty(0, 3, 2))
    for name in CLAIM_METRICS + ("f1",):
        assert got[name] is None, name
    assert got["recall"] == 0.0 and got["claim_recall"] == 0.0  # gold side still defined


def test_claims_but_no_units_are_unfaithful_not_undefined():
    # RAGChecker reports 0 for all five; we say: nothing shown supports anything.
    s = SampleClaims(claim_unit=np.zeros((4, 0), bool), claim_correct=np.array([T, T, F, F]),
                     gold_unit=np.zeros((1, 0), bool), gold_in_response=np.array([T]))
    got = sample_metrics(s)
    assert got["faithfulness"] == 0.0
    assert got["self_knowledge"] == pytest.approx(2 / 4)
    assert got["hallucination"] == pytest.approx(2 / 4)
    assert got["noise_sensitivity_relevant"] == 0.0
    assert got["noise_sensitivity_irrelevant"] == 0.0
    assert got["claim_recall"] == 0.0  # the gold item was not shown
    assert got["context_precision"] is None  # no units to be precise about
    assert got["context_utilization"] is None  # nothing recalled to utilize


def test_no_gold_items_leaves_gold_metrics_undefined():
    got = sample_metrics(empty(2, 3, 0))
    for name in ("claim_recall", "context_utilization", "recall", "f1", "context_precision",
                 "noise_sensitivity_relevant", "noise_sensitivity_irrelevant"):
        assert got[name] is None, name
    assert got["faithfulness"] == 0.0 and got["precision"] == 0.0


def test_no_gold_items_but_known_gold_units_keeps_noise_sensitivity_defined():
    s = empty(2, 3, 0, relevant=np.array([T, F, F]), claim_unit=[[T, F, F], [F, F, T]])
    got = sample_metrics(s)
    assert got["noise_sensitivity_relevant"] == pytest.approx(1 / 2)
    assert got["noise_sensitivity_irrelevant"] == pytest.approx(1 / 2)


def test_context_utilization_is_undefined_when_nothing_is_recalled():
    assert sample_metrics(empty(1, 2, 3))["context_utilization"] is None


def test_f1_is_zero_when_precision_and_recall_are_both_zero():
    got = sample_metrics(empty(2, 2, 2))
    assert got["precision"] == 0.0 and got["recall"] == 0.0 and got["f1"] == 0.0


def test_formulas_cover_every_metric():
    assert set(FORMULAS) == set(METRICS)
    assert all(FORMULAS[m].strip() for m in METRICS)


# ---------------------------------------------------------------- identities (property tests)


@st.composite
def samples(draw, with_relevant=st.booleans()):
    n_claims, n_units, n_gold = (draw(st.integers(0, 5)) for _ in range(3))
    b = st.booleans()
    return SampleClaims(
        claim_unit=draw(arrays(bool, (n_claims, n_units), elements=b)),
        claim_correct=draw(arrays(bool, (n_claims,), elements=b)),
        gold_unit=draw(arrays(bool, (n_gold, n_units), elements=b)),
        gold_in_response=draw(arrays(bool, (n_gold,), elements=b)),
        relevant=draw(arrays(bool, (n_units,), elements=b)) if draw(with_relevant) else None,
    )


@settings(max_examples=300, deadline=None)
@given(samples())
def test_every_claim_is_faithful_hallucinated_or_self_knowledge(s):
    m = sample_metrics(s)
    if s.claim_unit.shape[0] == 0:
        return
    assert m["faithfulness"] + m["hallucination"] + m["self_knowledge"] == pytest.approx(1.0)
    # self-knowledge claims are correct ones: it can never exceed precision
    assert m["self_knowledge"] <= m["precision"] + 1e-12


@settings(max_examples=300, deadline=None)
@given(samples())
def test_every_wrong_claim_is_relevant_noise_irrelevant_noise_or_hallucination(s):
    # Relevant and irrelevant units partition the shown units, so a faithful claim is exactly
    # one of the two kinds; hence noise + hallucination counts each incorrect claim once.
    m = sample_metrics(s)
    if m["noise_sensitivity_relevant"] is None:
        return
    total = m["noise_sensitivity_relevant"] + m["noise_sensitivity_irrelevant"] + m["hallucination"]
    assert total == pytest.approx(1.0 - m["precision"])


@settings(max_examples=300, deadline=None)
@given(samples())
def test_values_are_probabilities_and_f1_lies_between_precision_and_recall(s):
    m = sample_metrics(s)
    assert all(v is None or 0.0 <= v <= 1.0 for v in m.values())
    if m["f1"] is not None:
        lo, hi = sorted((m["precision"], m["recall"]))
        assert (lo == 0.0 and m["f1"] == 0.0) or lo - 1e-12 <= m["f1"] <= hi + 1e-12
    if m["context_utilization"] is not None:
        # used-and-recalled gold items are a subset of the gold items the response states
        assert m["context_utilization"] * m["claim_recall"] <= m["recall"] + 1e-12


# ---------------------------------------------------------------- cross-check with RAGChecker


def ragchecker_reference(retrieved2response, answer2response, retrieved2answer, response2answer):
    """A literal transcription of ragchecker/computation.py (np.max / np.mean), without its
    empty-input guards: where a guard would fire RAGChecker returns 0. and we return None,
    so the caller only compares shapes where no guard fires (claims, units, gold items ≥ 1)."""
    faithful = np.max(retrieved2response, axis=1)
    unfaithful = ~faithful
    claim_recalled = np.max(retrieved2answer, axis=1)
    psg_useful = np.max(retrieved2answer, axis=0)
    relevant_retrieved = np.max(retrieved2answer, axis=0, keepdims=True)
    relevant_faithful = np.max(relevant_retrieved & retrieved2response, axis=1)
    irrelevant_retrieved = ~np.max(retrieved2answer, axis=0, keepdims=True)
    irrelevant_faithful = np.max(irrelevant_retrieved & retrieved2response, axis=1)
    irrelevant_faithful &= ~relevant_faithful
    incorrect = ~answer2response
    precision = np.mean(answer2response)
    recall = np.mean(response2answer)
    out = {
        "faithfulness": np.mean(faithful),
        "hallucination": np.mean(unfaithful & ~answer2response),
        "self_knowledge": np.mean(unfaithful & answer2response),
        "noise_sensitivity_relevant": np.mean(relevant_faithful & incorrect),
        "noise_sensitivity_irrelevant": np.mean(irrelevant_faithful & incorrect),
        "claim_recall": np.mean(claim_recalled),
        "context_precision": np.mean(psg_useful),
        "precision": precision,
        "recall": recall,
        "f1": (2 * precision * recall / (precision + recall)
               if precision > 0 and recall > 0 else 0.0),
        # RAGChecker: 0. when np.sum(claim_recalled) == 0 — a guard; we return None there
        "context_utilization": (np.sum(claim_recalled & response2answer) / np.sum(claim_recalled)
                                if np.sum(claim_recalled) > 0 else None),
    }
    return {k: None if v is None else float(v) for k, v in out.items()}


def test_agrees_with_ragchecker_on_random_verdict_tables():
    rng = np.random.default_rng(3)
    compared = 0
    for _ in range(500):
        n_claims, n_units, n_gold = rng.integers(1, 7, size=3)
        density = rng.uniform(0.1, 0.9)
        r2resp = rng.random((n_claims, n_units)) < density
        a2resp = rng.random(n_claims) < 0.5
        r2ans = rng.random((n_gold, n_units)) < density / 2
        resp2ans = rng.random(n_gold) < 0.5
        ours = sample_metrics(SampleClaims(r2resp, a2resp, r2ans, resp2ans))
        ref = ragchecker_reference(r2resp, a2resp, r2ans, resp2ans)
        for name in METRICS:
            assert (ours[name] is None) == (ref[name] is None), name
            if ref[name] is not None:
                assert ours[name] == pytest.approx(ref[name], abs=1e-12), name
                compared += 1
    assert compared > 500 * 10  # essentially every metric of every table was compared


# ---------------------------------------------------------------- aggregate


def cells(*values, name="faithfulness"):
    return [{name: v} for v in values]


def test_aggregate_averages_defined_samples_only():
    agg = aggregate(cells(1.0, 0.0, None, 0.5, None))
    f = agg["faithfulness"]
    assert f.n == 3 and f.mean == pytest.approx(0.5)
    assert 0.0 <= f.low < f.mean < f.high <= 1.0
    # metrics absent from every dict are undefined, not 0
    assert agg["recall"] == CellMetric(0, None, None, None)
    assert list(agg) == list(METRICS)


def test_aggregate_with_one_defined_sample_has_its_mean_as_the_interval():
    # Once the interval was left out, and the claims table showed a bare point beside intervals.
    assert aggregate(cells(None, 0.25))["faithfulness"] == CellMetric(1, 0.25, 0.25, 0.25)


def test_aggregate_of_constant_values_has_a_degenerate_interval():
    f = aggregate(cells(0.4, 0.4, 0.4))["faithfulness"]
    # Σw·0.4 / Σw may round an ulp away from 0.4: degenerate up to round-off, and it contains the mean.
    assert f.low <= f.mean <= f.high and f.high - f.low < 1e-15
    assert f.mean == pytest.approx(0.4)


def test_aggregate_is_reproducible_from_the_seed():
    data = cells(*np.random.default_rng(0).random(40))
    assert aggregate(data, seed=7) == aggregate(data, seed=7)
    assert aggregate(data, seed=7)["faithfulness"] != aggregate(data, seed=8)["faithfulness"]


def test_aggregate_interval_shrinks_with_more_samples_and_covers_the_mean():
    small = aggregate(cells(*[1.0, 0.0] * 5))["faithfulness"]
    large = aggregate(cells(*[1.0, 0.0] * 500))["faithfulness"]
    for c in (small, large):
        assert c.mean == pytest.approx(0.5) and c.low <= c.mean <= c.high
    assert large.high - large.low < small.high - small.low
    # a Bernoulli(1/2) mean over 1000 samples: 95 % half-width ≈ 1.96·0.5/√1000 ≈ 0.031
    assert (large.high - large.low) / 2 == pytest.approx(1.96 * 0.5 / math.sqrt(1000), rel=0.15)


def test_aggregate_end_to_end_from_verdict_tables():
    per_sample = [sample_metrics(example()), sample_metrics(empty(0, 3, 2))]
    agg = aggregate(per_sample, resamples=0)
    assert agg["faithfulness"] == CellMetric(1, pytest.approx(3 / 5), None, None)
    assert agg["recall"].n == 2 and agg["recall"].mean == pytest.approx((2 / 3 + 0.0) / 2)


@pytest.mark.parametrize("kwargs", [dict(resamples=-1), dict(resamples=1.5), dict(alpha=0.0),
                                    dict(alpha=1.0)])
def test_aggregate_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        aggregate(cells(0.1, 0.2), **kwargs)


def test_aggregate_rejects_nan_values_use_none_instead():
    with pytest.raises(ValueError, match="None for undefined"):
        aggregate(cells(0.1, float("nan")))
