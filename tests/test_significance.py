"""Paired tests: exact McNemar, the paired bootstrap's p-value, and Holm, against hand-computed cases and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from workbench.metrics.significance import binomial_two_sided, bootstrap_p, holm, mcnemar_exact
from workbench.metrics.stats import mean_and_resampled, percentile_interval


def test_mcnemar_counts_only_the_discordant_pairs():
    # 3 samples pass in B only, 0 in A only, 5 agree: p = 2·P(X ≤ 0), X ~ Bin(3, 1/2) = 2/8.
    a = np.array([0, 0, 0, 1, 1, 1, 0, 0])
    b = np.array([1, 1, 1, 1, 1, 1, 0, 0])
    assert mcnemar_exact(a, b) == pytest.approx(0.25)


def test_mcnemar_is_one_when_no_pair_is_discordant_and_none_for_fractional_scores():
    same = np.array([0, 1, 1, 0])
    assert mcnemar_exact(same, same) == 1.0
    assert mcnemar_exact(np.array([0.5, 1.0]), np.array([1.0, 1.0])) is None


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 7), (4, 20), (10, 21), (37, 100), (480, 1000), (4_900, 10_000)])
def test_the_binomial_tail_matches_scipy_even_for_large_n(k, n):
    expected = scipy_stats.binomtest(k, n, 0.5, alternative="two-sided").pvalue
    assert binomial_two_sided(k, n) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_holm_on_a_known_family():
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 → monotone: 0.02, 0.03, 0.06, 0.06.
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005, "e": None})
    assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "d": 0.02, "e": None})


def test_holm_caps_at_one_and_leaves_a_single_p_as_it_is():
    assert holm({"x": 0.7, "y": 0.9}) == {"x": 1.0, "y": 1.0}
    assert holm({"only": 0.04}) == {"only": 0.04}


def test_the_bootstrap_p_value_agrees_with_the_interval():
    # A clear improvement: the 95% interval excludes 0 exactly when p < 0.05.
    rng = np.random.default_rng(1)
    for shift in (0.0, 0.05, 0.15, 0.4):
        d = rng.normal(shift, 1.0, size=120)
        point, boot = mean_and_resampled(d, 2000, 0)
        p = bootstrap_p(float(point), boot)
        ci = percentile_interval(float(point), boot)
        assert (p < 0.05) == (ci.lo > 0 or ci.hi < 0), (shift, p, ci)


def test_the_bootstrap_p_value_of_no_difference_is_one_and_undefined_stays_none():
    assert bootstrap_p(0.0, np.zeros(100)) == 1.0
    assert bootstrap_p(None, np.zeros(3)) is None
    assert bootstrap_p(0.1, np.array([np.nan, np.nan])) is None
