"""The statistics module: resample weights, the percentile interval and its one clamping
rule, the bootstrap of a mean, of a pooled ratio and of a paired difference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.metrics import ledger
from workbench.metrics.resample import poisson_weights
from workbench.metrics.stats import (
    Estimate,
    ResampledColumns,
    bootstrap_mean,
    bootstrap_means,
    bootstrap_ratio,
    check_bootstrap_args,
    common_length,
    optional_float,
    paired_mean_difference,
    percentile_interval,
    percentile_intervals,
    ratio,
)

NAN = math.nan

# Exact-match scores of ten questions under two configurations (1 = answered correctly).
# Run B gets questions 2 and 7 wrong that run A got right, and question 9 right.
RUN_A = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 0], dtype=float)
RUN_B = np.array([1, 0, 0, 1, 0, 1, 1, 0, 0, 1], dtype=float)


def full_w(n: int, resamples: int, seed: int) -> np.ndarray:
    """The (resamples × n) weight matrix of n items keyed by their positions."""
    return poisson_weights(np.arange(n), resamples, seed).T


# --------------------------------------------------------------------------- small helpers


def test_the_ledger_uses_the_one_estimate_type() -> None:
    assert ledger.Estimate is Estimate


def test_ratio_is_undefined_where_the_denominator_is_zero() -> None:
    out = ratio(np.array([1.0, 0.0, 3.0]), np.array([2.0, 0.0, 0.0]))
    assert out[0] == 0.5
    assert np.isnan(out[1]) and np.isnan(out[2])


def test_optional_float_maps_nan_to_none() -> None:
    assert optional_float(np.float64(0.25)) == 0.25 and type(optional_float(np.float64(0.25))) is float
    assert optional_float(np.array(NAN)) is None


def test_bootstrap_arguments_are_checked() -> None:
    assert check_bootstrap_args(np.int64(3), 0.05) == 3
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="resamples"):
            check_bootstrap_args(bad, 0.05)
    for alpha in (0.0, 1.0):
        with pytest.raises(ValueError, match="alpha"):
            check_bootstrap_args(10, alpha)


def test_common_length_refuses_misaligned_arrays() -> None:
    assert common_length([4, 4], "runs") == 4
    assert common_length([], "runs") == 0
    with pytest.raises(ValueError, match="runs must be aligned"):
        common_length([4, 5], "runs")


# --------------------------------------------------------------------------- resample weights


def test_weights_are_a_pure_function_of_seed_item_and_resample() -> None:
    w = poisson_weights(np.arange(1000), 200, seed=5)
    assert w.shape == (1000, 200) and np.all(w == np.round(w)) and w.min() >= 0
    # An item's weights do not depend on the other items, on their order, or on how many
    # resamples are asked for (fewer is a prefix): what lets a ledger add one event at a time.
    assert np.array_equal(poisson_weights([999, 3, 7], 50, seed=5), w[[999, 3, 7], :50])
    assert np.array_equal(poisson_weights([42], 200, seed=5)[0], w[42])
    assert not np.array_equal(poisson_weights(np.arange(1000), 200, seed=6), w)


def test_weights_are_philox_words_through_the_poisson_1_inverse_cdf() -> None:
    # The oracle: numpy's Philox keyed by (key, seed) and scipy's Poisson quantile function.
    from scipy.stats import poisson

    key, seed = 12345, 9
    words = np.random.Philox(key=key + (seed << 64)).random_raw(500).view(np.uint32)
    expected = poisson(1.0).ppf((words.astype(np.float64) + 0.5) / 2**32)
    assert np.array_equal(poisson_weights([key], 1000, seed)[0], expected)


def test_weights_are_poisson_1_draws() -> None:
    w = poisson_weights(np.arange(4000), 500, seed=0)  # 2M draws
    assert abs(w.mean() - 1) < 0.003 and abs(w.var() - 1) < 0.006
    pmf = [math.exp(-1) / math.factorial(k) for k in range(5)]
    freq = np.bincount(w.astype(int).ravel(), minlength=5)[:5] / w.size
    assert np.allclose(freq, pmf, atol=0.002)


def test_resampled_columns_store_identical_columns_once_and_sum_with_w() -> None:
    cols = ResampledColumns(10)
    first = cols.add(np.column_stack([RUN_A, RUN_B]))
    again = cols.add(np.column_stack([RUN_B.copy(), np.ones(10)]))
    assert list(first) == [0, 1] and list(again) == [1, 2]  # RUN_B is not stored twice
    sums = cols.resampled_sums(50, seed=1, exact=True)
    w = full_w(10, 50, seed=1)
    assert np.array_equal(sums, w @ np.column_stack([RUN_A, RUN_B, np.ones(10)]))
    assert np.array_equal(sums[:, 2], w.sum(axis=1))  # a resample's size Σw varies (Poisson)
    keyed = ResampledColumns(np.array([50, 10, 7]))  # items keyed by id, not position
    keyed.add(np.ones((3, 1)))
    assert np.array_equal(keyed.resampled_sums(20, seed=1)[:, 0], poisson_weights([50, 10, 7], 20, 1).sum(axis=0))


# --------------------------------------------------------------------------- the percentile interval


def test_percentile_interval_of_five_values() -> None:
    # alpha = 0.5: the 25th and 75th percentiles of 1..5 are 2 and 4.
    assert percentile_interval(3.0, np.array([5.0, 1.0, 4.0, 2.0, 3.0]), alpha=0.5) == Estimate(3.0, 2.0, 4.0)


def test_percentile_interval_leaves_out_undefined_resamples() -> None:
    boot = np.array([1.0, NAN, 2.0, 3.0, NAN, 4.0, 5.0])
    assert percentile_interval(3.0, boot, alpha=0.5) == Estimate(3.0, 2.0, 4.0)


def test_the_interval_always_contains_its_point() -> None:
    # The one clamping rule: the nearer end moves onto a point the percentiles miss.
    boot = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert percentile_interval(10.0, boot, alpha=0.5) == Estimate(10.0, 2.0, 10.0)
    assert percentile_interval(0.0, boot, alpha=0.5) == Estimate(0.0, 0.0, 4.0)


def test_undefined_stays_none_never_zero() -> None:
    assert percentile_interval(None, np.array([1.0, 2.0])) == Estimate(None, None, None)
    assert percentile_interval(0.5, None) == Estimate(0.5, None, None)
    assert percentile_interval(0.5, np.array([NAN, NAN])) == Estimate(0.5, None, None)


def test_vectorized_intervals_equal_one_at_a_time() -> None:
    rng = np.random.default_rng(3)
    boots = {"a": rng.random(200), "b": rng.random(200), "c": rng.random(200)}
    boots["b"][::7] = NAN  # some undefined resamples
    points = {"a": 0.5, "b": 0.4, "c": None}
    many = percentile_intervals(points, boots, alpha=0.1)
    assert many == {k: percentile_interval(points[k], boots[k], alpha=0.1) for k in points}
    assert percentile_intervals(points, None) == {k: Estimate(points[k], None, None) for k in points}


# --------------------------------------------------------------------------- bootstraps


def test_bootstrap_mean_is_the_percentile_interval_of_the_resampled_means() -> None:
    est = bootstrap_mean(RUN_A, resamples=400, seed=2)
    w = full_w(10, 400, seed=2)
    naive = w @ RUN_A / w.sum(axis=1)  # the (weighted) mean of each resample
    lo, hi = np.percentile(naive, [2.5, 97.5])
    assert est == Estimate(0.6, float(lo), float(hi))
    assert est == bootstrap_mean(RUN_A, resamples=400, seed=2)  # seeded


def test_bootstrap_mean_without_enough_data() -> None:
    assert bootstrap_mean(np.array([])) == Estimate(None, None, None)
    # One item: the interval is the point (once it was left out, and the claims table showed a bare point).
    assert bootstrap_mean(np.array([0.75])) == Estimate(0.75, 0.75, 0.75)
    assert bootstrap_mean(RUN_A, resamples=0) == Estimate(0.6, None, None)


def test_bootstrap_mean_of_a_constant_contains_the_mean_despite_round_off() -> None:
    # 0.1 summed seven times is not exactly 0.7; the resampled means may miss the mean by an ulp.
    est = bootstrap_mean(np.full(7, 0.1), resamples=200)
    assert est.lo <= est.value <= est.hi
    assert est.hi - est.lo < 1e-15


def test_bootstrap_means_of_columns_match_one_column_at_a_time() -> None:
    block = np.column_stack([RUN_A, RUN_B])
    both = bootstrap_means(block, resamples=300, seed=4)
    for est, col in zip(both, (RUN_A, RUN_B)):
        alone = bootstrap_mean(col, resamples=300, seed=4)
        assert est.value == pytest.approx(alone.value, abs=1e-15)
        assert est.lo == pytest.approx(alone.lo, abs=1e-15) and est.hi == pytest.approx(alone.hi, abs=1e-15)
    assert bootstrap_means(block[:1]) == [Estimate(1.0, 1.0, 1.0)] * 2
    assert bootstrap_means(np.zeros((0, 3))) == [Estimate(None, None, None)] * 3


def test_bootstrap_ratio_pools_numerators_and_denominators() -> None:
    cited = np.array([2.0, 0.0, 3.0, 1.0])
    steps = np.array([4.0, 0.0, 3.0, 2.0])  # the second item has no steps at all
    est = bootstrap_ratio(cited, steps, resamples=300, seed=0)
    assert est.value == 6 / 9  # Σcited / Σsteps, not the mean of per-item ratios
    assert est.lo <= est.value <= est.hi
    assert bootstrap_ratio(np.zeros(3), np.zeros(3)) == Estimate(None, None, None)
    # A resample of only the second item has Σsteps = 0: undefined, left out (not 0).
    lone = bootstrap_ratio(np.array([1.0, 0.0]), np.array([1.0, 0.0]), resamples=200, seed=0)
    assert lone == Estimate(1.0, 1.0, 1.0)


def test_paired_difference_is_the_mean_difference_with_a_paired_interval() -> None:
    d = paired_mean_difference(RUN_A, RUN_B, resamples=1000, seed=0)
    assert d.value == pytest.approx(RUN_A.mean() - RUN_B.mean())  # 0.6 − 0.5
    assert d == bootstrap_mean(RUN_A - RUN_B, resamples=1000, seed=0)
    assert d.lo <= d.value <= d.hi


def test_paired_difference_of_a_run_with_itself_is_exactly_zero() -> None:
    assert paired_mean_difference(RUN_A, RUN_A.copy(), resamples=100) == Estimate(0.0, 0.0, 0.0)


def test_pairing_makes_the_difference_sharper_than_independent_intervals() -> None:
    # 200 questions of varied difficulty; run B flips 6 of run A's answers. Pairing removes
    # the question-to-question variance both runs share.
    rng = np.random.default_rng(9)
    a = (rng.random(200) < 0.6).astype(float)
    b = a.copy()
    flipped = rng.choice(200, 6, replace=False)
    b[flipped] = 1 - b[flipped]
    d = paired_mean_difference(a, b, resamples=500, seed=1)
    alone = bootstrap_mean(a, resamples=500, seed=1)
    assert d.hi - d.lo < (alone.hi - alone.lo) / 2.5


def test_paired_difference_needs_aligned_finite_measurements() -> None:
    with pytest.raises(ValueError, match="aligned"):
        paired_mean_difference(RUN_A, RUN_B[:9])
    with pytest.raises(ValueError, match="finite"):
        paired_mean_difference(RUN_A, np.where(RUN_B == 1, NAN, RUN_B))
