"""Correlation with a bootstrap interval, to measure checkers against human labels (issue 36):
the points are scipy's Pearson and Spearman, undefined stays ``None``, a resample is the data
replicated by its weights, items sharing a key are drawn together, and RAGChecker's reference
figures come out of its own data."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from scipy import stats as scipy_stats

from conftest import REPO
from workbench.metrics import correlation as correlation_module
from workbench.metrics.correlation import Correlation, _key_weights, _Pair, correlation, pearson, spearman
from workbench.metrics.resample import poisson_weights
from workbench.metrics.stats import Estimate

META = REPO / "sample_data" / "ragchecker-meta"
NONE = Estimate(None, None, None)


def meta_eval_like(instances: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score differences repeated for two annotators, their labels in -2..2, and the instances as keys.

    The differences are rounded to one decimal, so both columns are full of ties.
    """
    rng = np.random.default_rng(seed)
    delta = np.round(rng.normal(0, 0.3, instances), 1)
    labels = np.clip(np.round(4 * delta[:, None] + rng.normal(0, 1, (instances, 2))), -2, 2)
    return np.repeat(delta, 2), labels.ravel(), np.repeat(np.arange(instances), 2)


def assert_close(a: Estimate, b: Estimate) -> None:
    assert (a.value, a.lo, a.hi) == pytest.approx((b.value, b.lo, b.hi), abs=1e-12)


def width(e: Estimate) -> float:
    return e.hi - e.lo


# --------------------------------------------------------------------------- the points


@pytest.mark.parametrize("seed", range(4))
def test_points_equal_scipys_pearson_and_spearman_on_labels_with_ties(seed: int) -> None:
    delta, labels, _ = meta_eval_like(100, seed)
    assert pearson(delta, labels) == pytest.approx(scipy_stats.pearsonr(delta, labels)[0], abs=1e-12)
    assert spearman(delta, labels) == pytest.approx(scipy_stats.spearmanr(delta, labels)[0], abs=1e-12)
    # Annotator against annotator: integer labels on both sides.
    first, second = labels[0::2], labels[1::2]
    assert pearson(first, second) == pytest.approx(scipy_stats.pearsonr(first, second)[0], abs=1e-12)
    assert spearman(first, second) == pytest.approx(scipy_stats.spearmanr(first, second)[0], abs=1e-12)


def test_points_are_exact_for_data_far_from_zero() -> None:
    # Raw sums of squares of values near 1e8 would lose the variance to cancellation.
    rng = np.random.default_rng(1)
    x = 1e8 + rng.normal(size=200)
    y = x + rng.normal(size=200)
    assert pearson(x, y) == pytest.approx(scipy_stats.pearsonr(x, y)[0], abs=1e-12)
    assert spearman(x, y) == pytest.approx(scipy_stats.spearmanr(x, y)[0], abs=1e-12)


def test_spearman_is_pearson_of_the_average_ranks() -> None:
    x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]  # the two 1s share ranks 1 and 2: 1.5 each
    y = [2, 7, 1, 8, 2, 8, 1, 8]
    ranks = pearson(scipy_stats.rankdata(x), scipy_stats.rankdata(y))
    assert spearman(x, y) == pytest.approx(ranks, abs=1e-15)


def test_undefined_correlations_are_none_never_zero() -> None:
    assert pearson([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]) is None
    assert spearman([5, 5, 5], [1, 2, 3]) is None
    # Seven 0.1s do not average to exactly 0.1, yet the column is constant all the same.
    assert pearson([0.1] * 7, range(7)) is None
    assert pearson([1.0], [2.0]) is None and spearman([], []) is None
    assert correlation([2, 2, 2, 2], [1, 2, 3, 4]) == Correlation(NONE, NONE, 4)
    assert correlation([], []) == Correlation(NONE, NONE, 0)


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="aligned"):
        pearson([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        spearman([1, 2, float("nan")], [1, 2, 3])
    with pytest.raises(ValueError, match="bootstrap keys for 3 items"):
        correlation([1, 2, 3], [1, 3, 2], keys=[0, 1])
    with pytest.raises(ValueError, match="non-negative"):
        correlation([1, 2, 3], [1, 3, 2], keys=[0, -1, 1])
    with pytest.raises(ValueError, match="resamples"):
        correlation([1, 2, 3], [1, 3, 2], resamples=-1)


# --------------------------------------------------------------------------- resamples


@pytest.mark.parametrize("data", ["few values", "continuous"])
def test_a_resample_is_the_data_replicated_by_its_weights(data: str) -> None:
    if data == "few values":
        # Eight items with three values of x: some resamples draw a single value, undefined (NaN).
        x = np.array([0.0, 1, 1, 2, 0, 2, 1, 0])
        y = np.array([-2.0, 0, 1, 2, -1, 1, 0, 2])
    else:
        rng = np.random.default_rng(3)
        x = rng.normal(size=40)
        y = x + rng.normal(size=40)
    w = poisson_weights(np.arange(len(x)), 300, seed=1)
    r, rho = _Pair(x, y).correlations(w)
    undefined = 0
    for k in range(300):
        xr, yr = np.repeat(x, w[:, k].astype(int)), np.repeat(y, w[:, k].astype(int))
        if len(xr) < 2 or np.ptp(xr) == 0 or np.ptp(yr) == 0:
            assert np.isnan(r[k]) and np.isnan(rho[k])
            undefined += 1
        else:
            assert r[k] == pytest.approx(scipy_stats.pearsonr(xr, yr)[0], abs=1e-12)
            assert rho[k] == pytest.approx(scipy_stats.spearmanr(xr, yr)[0], abs=1e-12)
    assert (undefined > 0) == (data == "few values")


def test_items_sharing_a_key_carry_that_keys_one_weight() -> None:
    keys = np.array([7, 7, 3, 3, 9])
    per_key, inverse = _key_weights(keys, 50, seed=1)
    w = per_key[inverse]
    assert np.array_equal(w[0], w[1]) and np.array_equal(w[2], w[3]) and not np.array_equal(w[0], w[2])
    # They are stats.py's weights of the key: the same resamples as any statistic keyed alike.
    assert np.array_equal(w, poisson_weights(keys, 50, seed=1))


def test_an_instance_labelled_twice_is_drawn_once_not_twice() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=60)
    y = x + rng.normal(size=60)
    alone = correlation(x, y, resamples=500, seed=3)
    # Every item twice under its key: each resample holds both copies or neither, the same
    # multiset doubled, so the same correlations and the same intervals.
    same_key = correlation(np.repeat(x, 2), np.repeat(y, 2), keys=np.repeat(np.arange(60), 2), resamples=500, seed=3)
    assert_close(same_key.pearson, alone.pearson)
    assert_close(same_key.spearman, alone.spearman)
    # Keyed apart, the copies pass for 120 independent items: an interval about √2 too narrow.
    apart = correlation(np.repeat(x, 2), np.repeat(y, 2), resamples=500, seed=3)
    assert width(apart.pearson) < 0.85 * width(alone.pearson)
    assert width(apart.spearman) < 0.85 * width(alone.spearman)


def test_the_interval_is_the_percentile_interval_of_the_resampled_statistics(monkeypatch) -> None:
    delta, labels, keys = meta_eval_like(50, seed=5)
    c = correlation(delta, labels, keys=keys, resamples=400, seed=7)
    r, rho = _Pair(delta, labels).correlations(poisson_weights(keys, 400, seed=7))
    for est, boot in ((c.pearson, r), (c.spearman, rho)):
        lo, hi = np.percentile(boot[np.isfinite(boot)], [2.5, 97.5])
        assert_close(est, Estimate(est.value, min(lo, est.value), max(hi, est.value)))
    # Seven resamples a chunk: chunking is memory only, the numbers stay.
    monkeypatch.setattr(correlation_module, "_CHUNK_ENTRIES", 7 * len(delta))
    chunked = correlation(delta, labels, keys=keys, resamples=400, seed=7)
    assert_close(chunked.pearson, c.pearson)
    assert_close(chunked.spearman, c.spearman)


def test_intervals_contain_their_point_and_are_fixed_by_the_seed() -> None:
    delta, labels, keys = meta_eval_like(80, seed=6)
    c = correlation(delta, labels, keys=keys, resamples=300, seed=1)
    assert c.n == 160
    for est in (c.pearson, c.spearman):
        assert -1 <= est.lo <= est.value <= est.hi <= 1
    assert correlation(delta, labels, keys=keys, resamples=300, seed=1) == c
    assert correlation(delta, labels, keys=keys, resamples=300, seed=2) != c
    bare = correlation(delta, labels, keys=keys, resamples=0)
    assert bare == Correlation(Estimate(c.pearson.value, None, None), Estimate(c.spearman.value, None, None), 160)


def test_resamples_that_draw_one_value_are_left_out() -> None:
    # Two items: a resample drawing both gives 1, one drawing a single item is undefined, not 0.
    c = correlation([0.0, 1.0], [0.0, 1.0], resamples=200)
    assert c.spearman == Estimate(1.0, 1.0, 1.0)
    assert_close(c.pearson, Estimate(1.0, 1.0, 1.0))


# --------------------------------------------------------------------------- RAGChecker's data


@functools.cache
def ragchecker_meta() -> tuple[list[dict], list[dict]]:
    """(human labels: entries 2i and 2i+1 are instance i's annotators, RAGChecker's scores: entry i)."""
    human = json.loads((META / "human_labeled_data.json").read_text())
    checker = json.loads((META / "baseline_ragchecker.json").read_text())
    assert len(human) == 2 * len(checker) == 280
    assert all(human[2 * i]["instance_id"] == human[2 * i + 1]["instance_id"] == c["instance_id"]
               for i, c in enumerate(checker))
    return human, checker


def deltas_and_labels(label: str) -> tuple[np.ndarray, np.ndarray]:
    """RAGChecker's score difference model2 − model1 once per label, and the 280 labels."""
    human, checker = ragchecker_meta()
    delta = [c["model2"]["ragchecker"][label] - c["model1"]["ragchecker"][label] for c in checker]
    return np.repeat(delta, 2), np.array([h[label] for h in human], dtype=float)


@pytest.mark.parametrize(("label", "ragchecker", "annotators"), [
    ("correctness_label", 38.86, 68.21),
    ("completeness_label", 64.95, 72.11),
    ("overall_label", 63.76, 74.64),
])
def test_pearson_gives_the_readmes_figures_on_ragcheckers_data(label: str, ragchecker: float, annotators: float) -> None:
    delta, labels = deltas_and_labels(label)
    assert round(100 * pearson(delta, labels), 2) == ragchecker
    assert round(100 * pearson(labels[0::2], labels[1::2]), 2) == annotators


def test_an_instance_is_resampled_with_both_its_annotators_labels() -> None:
    delta, labels = deltas_and_labels("overall_label")
    instances = np.repeat(np.arange(140), 2)
    keyed = correlation(delta, labels, keys=instances, resamples=1000)
    assert keyed.n == 280 and keyed.pearson.lo <= keyed.pearson.value <= keyed.pearson.hi
    # Both labels of an instance share its delta: drawn apart they would pass for 280
    # independent judgments, and the interval would be too narrow.
    apart = correlation(delta, labels, resamples=1000)
    assert width(apart.pearson) < width(keyed.pearson)
