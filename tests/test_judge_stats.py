"""Trusting a judge: Cohen's κ against scikit-learn, and prediction-powered
inference (power-tuned, as ppi_py) covering the true metric where the naive judged estimate does not."""

from __future__ import annotations

import numpy as np
import pytest
import ppi_py  # the test oracle only
from sklearn.metrics import cohen_kappa_score  # the test oracle only

from workbench.metrics.agreement import agreement, cohen_kappa
from workbench.metrics.ppi import ppi_mean
from workbench.metrics.stats import Estimate


def test_kappa_equals_scikit_learn_on_random_label_pairs():
    rng = np.random.default_rng(0)
    for trial in range(300):
        n, k = int(rng.integers(2, 60)), int(rng.integers(2, 5))
        human = rng.integers(0, k, n)
        # A judge that copies the human with some probability, else answers at random: κ from ~0 to 1.
        judge = np.where(rng.random(n) < rng.random(), human, rng.integers(0, k, n))
        ours = cohen_kappa(human.tolist(), judge.tolist())
        if len(set(human) | set(judge)) == 1:
            assert ours is None  # one shared label: p_e = 1, undefined (scikit-learn gives nan)
            continue
        assert ours == pytest.approx(cohen_kappa_score(human, judge), abs=1e-12), trial


def test_kappa_is_undefined_not_zero_when_both_raters_use_one_label():
    assert cohen_kappa([True, True, True], [True, True, True]) is None
    assert cohen_kappa([True, False], [True, False]) == 1.0


def test_agreement_reports_the_confusion_rates_baseline_and_a_kappa_interval():
    human = [True] * 30 + [False] * 70
    judge = [True] * 25 + [False] * 5 + [True] * 20 + [False] * 50   # says True 45% where humans say 30%
    a = agreement(human, judge, resamples=500)
    assert a.labels == (False, True) and a.n == 100
    assert a.confusion == [[50, 20], [5, 25]]   # [human][judge], False first
    assert a.accuracy == 0.75 and a.majority_baseline == 0.70
    assert (a.judge_positive_rate, a.human_positive_rate) == (0.45, 0.30)
    assert a.kappa.value == pytest.approx(cohen_kappa_score(human, judge), abs=1e-12)
    assert a.kappa.lo < a.kappa.value < a.kappa.hi
    # The interval is the bootstrap's: keyed by item, the same items give the same interval.
    assert agreement(human, judge, resamples=500, keys=list(range(100))).kappa == a.kappa


def judged_population(rng, n_items, p_true, false_pos, false_neg):
    """Items with a true 0/1 label and a judge of known bias and noise (it says 1 too often)."""
    y = (rng.random(n_items) < p_true).astype(float)
    flip = np.where(y == 1, rng.random(n_items) < false_neg, rng.random(n_items) < false_pos)
    return y, np.where(flip, 1 - y, y)


def test_ppi_covers_the_true_metric_where_the_naive_judged_estimate_does_not():
    # 1,000 trials: 2,000 judged claims, 200 of them labelled uniformly at random. The true
    # faithfulness is 0.6; the judge says "supported" for 30% of unsupported claims and misses
    # 10% of supported ones (E[f] = 0.6·0.9 + 0.4·0.3 = 0.66: biased by +0.06).
    rng = np.random.default_rng(7)
    truth, trials = 0.6, 1000
    covered = {"naive": 0, "human": 0, "ppi": 0}
    widths = {"human": [], "ppi": []}
    for _ in range(trials):
        y, f = judged_population(rng, 2000, truth, false_pos=0.3, false_neg=0.1)
        labelled = rng.choice(2000, 200, replace=False)
        mask = np.zeros(2000, dtype=bool)
        mask[labelled] = True
        est = ppi_mean(f[mask], y[mask], f[~mask])
        for name in covered:
            e = getattr(est, name)
            covered[name] += e.lo <= truth <= e.hi
        widths["human"].append(est.human.hi - est.human.lo)
        widths["ppi"].append(est.ppi.hi - est.ppi.lo)
    rate = {name: c / trials for name, c in covered.items()}
    assert 0.93 <= rate["ppi"] <= 0.97, rate
    assert 0.93 <= rate["human"] <= 0.97, rate
    assert rate["naive"] < 0.05, rate   # a narrow interval around the judge's bias
    assert np.mean(widths["ppi"]) < np.mean(widths["human"])  # the judge's scores still help


def test_ppi_estimates_are_undefined_without_data_not_zero():
    est = ppi_mean([], [], [0.0, 1.0])
    assert est.human.value is None and est.ppi.value is None and est.naive.value == 0.5
    one = ppi_mean([1.0], [1.0], [1.0, 0.0, 1.0], lam=1)
    assert one.ppi.value == pytest.approx(2 / 3) and one.ppi.lo is None  # one label: no variance, no interval


def test_ppi_equals_ppi_py_the_reference_implementation():
    """Point estimates, intervals and the power-tuned λ agree with ``ppi_py`` (the authors' package,
    a test oracle only) to 1e-12, for judges from useless to perfect."""
    rng = np.random.default_rng(0)
    for trial in range(200):
        n, big_n = int(rng.integers(2, 80)), int(rng.integers(2, 500))
        y = (rng.random(n) < 0.6).astype(float)
        f = np.where(rng.random(n) < rng.random(), y, rng.random(n))
        f_unl = rng.random(big_n)
        for lam in (None, 1.0, 0.0):
            ours = ppi_mean(f, y, f_unl, lam=lam)
            lo, hi = ppi_py.ppi_mean_ci(y, f, f_unl, alpha=0.05, lam=lam)
            point = ppi_py.ppi_mean_pointestimate(y, f, f_unl, lam=lam)
            assert ours.ppi.value == pytest.approx(float(np.ravel(point)[0]), abs=1e-12), (trial, lam)
            assert (ours.ppi.lo, ours.ppi.hi) == pytest.approx((float(np.ravel(lo)[0]), float(np.ravel(hi)[0])),
                                                                abs=1e-12), (trial, lam)
        lo, hi = ppi_py.classical_mean_ci(y, alpha=0.05)
        assert (ours.human.lo, ours.human.hi) == pytest.approx((float(np.ravel(lo)[0]), float(np.ravel(hi)[0])),
                                                                abs=1e-12)


def test_power_tuning_falls_back_to_the_human_estimate_when_the_judge_is_useless():
    """A judge that answers at random: λ near 0, so PPI is no wider than the human-only interval,
    where the untuned PPI (λ = 1) pays for the judge's noise."""
    rng = np.random.default_rng(3)
    y = (rng.random(2000) < 0.6).astype(float)
    f = (rng.random(2000) < 0.8).astype(float)          # unrelated to y
    tuned = ppi_mean(f[:200], y[:200], f[200:])
    plain = ppi_mean(f[:200], y[:200], f[200:], lam=1)
    assert tuned.lam < 0.2 and plain.lam == 1
    width = lambda e: e.hi - e.lo  # noqa: E731
    assert width(tuned.ppi) <= width(tuned.human) * 1.01 < width(plain.ppi)


def test_bounds_clip_a_share_to_its_range():
    est = ppi_mean([1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0], bounds=(0.0, 1.0))
    assert 0.0 <= est.ppi.lo <= est.ppi.value <= est.ppi.hi <= 1.0
    assert est.naive == Estimate(1.0, 1.0, 1.0)
