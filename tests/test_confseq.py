"""Confidence sequences for sampling without replacement (workbench.metrics.confseq).

The oracle is a direct, slow transcription of the papers' formulas (Waudby-Smith & Ramdas 2020,
2024) below: a loop over draws and grid points with per-point running exclusion. The authors'
package (PyPI ``confseq`` 0.0.11) does not install here (its C++ extension needs Boost, and its
Python modules use ``np.float_``, gone in numpy 2); run by hand with those patched, its
``betting_cs`` with the same bets, ``N``, ``breaks=1000`` and ``running_intersection=True`` agreed
with ours to 1e-16 on binary and fractional sequences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.metrics.confseq import (
    BettingBatch,
    PairedDifferenceSequence,
    WoRConfidenceSequence,
    paired_difference_sequence,
    wor_confidence_sequence,
)

quick = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def reference_cs(x: np.ndarray, population: int, alpha: float, grid: int = 1000, c: float = 0.5) -> np.ndarray:
    """The paper's hedged-capital WoR CS, transcribed point by point (slow on purpose)."""
    ms = [j / grid for j in range(grid + 1)]
    kp, km = [1.0] * len(ms), [1.0] * len(ms)
    out_lo, out_hi = [], []
    below, above = set(), set()           # grid indices ever excluded from below / from above
    total = sq = 0.0
    for i, xi in enumerate(x, start=1):
        var = (0.25 + sq) / i
        lam = math.sqrt(2 * math.log(2 / alpha) / (var * i * math.log1p(i)))
        for j, m in enumerate(ms):
            mu = min(max((population * m - total) / (population - i + 1), 0.0), 1.0)
            lp = lam if mu == 0 else min(lam, c / mu)
            lm = lam if mu == 1 else min(lam, c / (1 - mu))
            kp[j] *= 1 + lp * (xi - mu)
            km[j] *= 1 - lm * (xi - mu)
        total += xi
        sq += (xi - (0.5 + total) / (i + 1)) ** 2
        lo_det, hi_det = total / population, (total + population - i) / population
        for j, m in enumerate(ms):
            if kp[j] >= 2 / alpha or m < lo_det:
                below.add(j)
            if km[j] >= 2 / alpha or m > hi_det:
                above.add(j)
        lo = max([lo_det] + [ms[j] for j in below])
        hi = min([hi_det] + [ms[j] for j in above])
        if lo > hi:                        # crossed: a miss; the meeting point, within the possible range
            lo = hi = min(max((lo + hi) / 2, lo_det), hi_det)
        out_lo.append(lo)
        out_hi.append(hi)
    return np.column_stack([out_lo, out_hi])


def population_of(kind: str, size: int, level: float, rng: np.random.Generator) -> np.ndarray:
    """A population of ``size`` values in [0, 1]: 0/1 scores with mean ≈ level, or fractional ones."""
    if kind == "binary":
        return (rng.random(size) < level).astype(float)
    return np.clip(rng.beta(4 * level + 0.2, 4 * (1 - level) + 0.2, size), 0, 1)


populations = st.tuples(st.sampled_from(["binary", "fractional"]), st.integers(8, 40),
                        st.floats(0.05, 0.95), st.integers(0, 2**32 - 1))


@settings(quick, max_examples=12)
@given(populations, st.sampled_from([0.05, 0.2]))
def test_the_vectorised_sequence_equals_a_direct_transcription_of_the_papers_formulas(pop, alpha):
    kind, size, level, seed = pop
    rng = np.random.default_rng(seed)
    x = rng.permutation(population_of(kind, size, level, rng))
    np.testing.assert_allclose(wor_confidence_sequence(x, size, alpha, grid=200),
                               reference_cs(x, size, alpha, grid=200), rtol=0, atol=1e-12)


def miss_rates(kind: str, size: int, level: float, alpha: float, orders: int, seed: int) -> tuple[float, float]:
    """Over many random orders: the share whose CS ever misses the mean, and the share missing at a random stop."""
    rng = np.random.default_rng(seed)
    pop = population_of(kind, size, level, rng)
    draws = np.stack([rng.permutation(pop) for _ in range(orders)])
    path = wor_confidence_sequence(draws, size, alpha)
    truth = pop.mean()
    miss = (path[:, :, 0] > truth + 1e-12) | (path[:, :, 1] < truth - 1e-12)
    stop = rng.integers(1, size + 1, orders) - 1
    return float(miss.any(axis=1).mean()), float(miss[np.arange(orders), stop].mean())


@settings(quick, max_examples=5)
@given(populations.filter(lambda p: p[1] >= 20), st.sampled_from([0.1, 0.3]))
def test_the_sequence_covers_the_population_mean_at_every_time_at_least_at_its_level(pop, alpha):
    kind, size, level, seed = pop
    orders = 250
    ever, at_stop = miss_rates(kind, 2 * size, level, alpha, orders, seed)
    # The binomial slack of the orders simulated: three standard errors above alpha.
    slack = 3 * math.sqrt(alpha * (1 - alpha) / orders)
    assert ever <= alpha + slack
    assert at_stop <= ever


def test_the_sequence_survives_the_optional_stopping_that_breaks_a_fixed_sample_interval():
    # Optional stopping at its worst: stop at the first round the interval misses, if ever; that
    # miss rate is the "ever" rate. A 80 % normal interval (with the finite-population correction)
    # looked at every round fails it; the sequence at level 80 % does not.
    size, orders, alpha = 200, 300, 0.2
    rng = np.random.default_rng(11)
    pop = population_of("binary", size, 0.5, rng)
    draws = np.stack([rng.permutation(pop) for _ in range(orders)])
    n = np.arange(1, size + 1)
    mean = draws.cumsum(axis=1) / n
    half = 1.2816 * np.sqrt(mean * (1 - mean) / n * (size - n) / max(size - 1, 1))
    naive = ((mean - half > pop.mean() + 1e-12) | (mean + half < pop.mean() - 1e-12))[:, 4:].any(axis=1).mean()
    assert naive > 2 * alpha
    path = wor_confidence_sequence(draws, size, alpha)
    ever = ((path[:, :, 0] > pop.mean() + 1e-12) | (path[:, :, 1] < pop.mean() - 1e-12)).any(axis=1).mean()
    assert ever <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / orders)


@settings(quick, max_examples=25)
@given(populations)
def test_the_interval_is_exactly_the_population_mean_once_every_item_is_drawn(pop):
    kind, size, level, seed = pop
    rng = np.random.default_rng(seed)
    x = rng.permutation(population_of(kind, size, level, rng))
    lo, hi = wor_confidence_sequence(x, size, 0.05)[-1]
    assert lo == hi
    assert abs(lo - x.mean()) < 1e-12


@settings(quick, max_examples=25)
@given(populations)
def test_the_running_interval_only_shrinks_and_never_inverts(pop):
    kind, size, level, seed = pop
    rng = np.random.default_rng(seed)
    x = rng.permutation(population_of(kind, size, level, rng))
    path = wor_confidence_sequence(x, size, 0.05)
    assert (np.diff(path[:, 0]) >= 0).all() and (np.diff(path[:, 1]) <= 0).all()
    assert (path[:, 0] <= path[:, 1]).all()
    assert (path >= 0).all() and (path <= 1).all()


def test_the_interval_also_stays_within_what_the_remaining_items_could_make_of_the_mean():
    x = np.ones(10)                                   # ten 1s of a population of 20
    lo, hi = wor_confidence_sequence(x, 20, 0.05)[-1]
    assert lo >= 10 / 20 and hi <= 1.0


def test_the_grid_rounds_the_interval_outward_by_less_than_one_step():
    rng = np.random.default_rng(3)
    x = rng.permutation((rng.random(300) < 0.4).astype(float))
    coarse = wor_confidence_sequence(x, 300, 0.05)                 # the default grid: 1000 steps
    fine = wor_confidence_sequence(x, 300, 0.05, grid=16000)
    assert (coarse[:, 0] <= fine[:, 0] + 1e-12).all() and (coarse[:, 1] >= fine[:, 1] - 1e-12).all()
    assert np.abs(coarse - fine).max() <= 1e-3


def test_the_interval_narrows_with_the_draws_and_not_only_at_the_end():
    rng = np.random.default_rng(5)
    x = rng.permutation((rng.random(1000) < 0.5).astype(float))
    path = wor_confidence_sequence(x, 1000, 0.05)
    half = (path[:, 1] - path[:, 0]) / 2
    assert half[0] > 0.45
    assert half[99] < 0.17 and half[499] < 0.08 and half[899] < 0.04
    assert path[0, 0] <= x.mean() <= path[0, 1]


def test_before_any_draw_there_is_no_interval_and_the_batch_says_nan_not_zero():
    cs = WoRConfidenceSequence(10)
    assert cs.interval() is None and cs.mean is None and cs.n == 0
    batch = BettingBatch(2, 10, 0.05)
    batch.update([0.5], rows=[1])
    lo, hi = batch.intervals()
    assert math.isnan(lo[0]) and math.isnan(hi[0]) and 0 <= lo[1] <= hi[1] <= 1


def test_the_incremental_sequence_gives_the_offline_intervals_bit_for_bit():
    rng = np.random.default_rng(8)
    x = rng.beta(2, 5, 120)
    offline = wor_confidence_sequence(x, 120, 0.05)
    cs = WoRConfidenceSequence(120, 0.05)
    seen = []
    for start in range(0, 120, 7):                  # one draw or a batch of them at a time
        cs.update(x[start:start + 7])
        seen.append((cs.n, cs.interval()))
    for n, interval in seen:
        assert interval == tuple(offline[n - 1])


def test_a_row_gives_the_same_bits_alone_in_any_batch_and_after_its_neighbours_are_dropped():
    rng = np.random.default_rng(9)
    rows = (rng.random((6, 80)) < rng.random((6, 1))).astype(float)
    alone = wor_confidence_sequence(rows[4], 80, 0.01)
    batch = BettingBatch(6, 80, 0.01)
    for t in range(80):
        batch.update(rows[:, t])
        if t == 30:
            batch.keep([1, 4])
            rows = rows[[1, 4]]
        lo, hi = batch.intervals()
        k = 4 if t < 30 else 1
        assert (lo[k], hi[k]) == tuple(alone[t])


def test_some_rows_may_advance_while_the_others_wait():
    rng = np.random.default_rng(10)
    a, b = rng.random(50), rng.random(50)
    batch = BettingBatch(2, 50, 0.05)
    for t in range(50):
        batch.update([a[t]], rows=[0])
    for t in range(20):
        batch.update([b[t]], rows=[1])
    lo, hi = batch.intervals()
    assert (lo[0], hi[0]) == tuple(wor_confidence_sequence(a, 50, 0.05)[-1])
    assert (lo[1], hi[1]) == tuple(wor_confidence_sequence(b[:20], 50, 0.05)[-1])
    assert list(batch.n) == [50, 20]


def test_the_paired_difference_is_the_sequence_of_the_shifted_differences_mapped_back():
    rng = np.random.default_rng(12)
    a = (rng.random(150) < 0.7).astype(float)
    b = (rng.random(150) < 0.5).astype(float)
    d = paired_difference_sequence(a, b, 150, 0.05)
    unit = wor_confidence_sequence((a - b + 1) / 2, 150, 0.05, grid=2000)
    np.testing.assert_array_equal(d, 2 * unit - 1)
    assert abs(d[-1, 0] - (a - b).mean()) < 1e-12 and abs(d[-1, 1] - (a - b).mean()) < 1e-12
    assert (d >= -1).all() and (d <= 1).all()


def test_swapping_the_two_cells_mirrors_the_difference_interval():
    rng = np.random.default_rng(13)
    a, b = rng.random(90), rng.random(90) * 0.6
    ab = paired_difference_sequence(a, b, 90, 0.05)
    ba = paired_difference_sequence(b, a, 90, 0.05)
    np.testing.assert_allclose(ab[:, 0], -ba[:, 1], atol=1e-9)
    np.testing.assert_allclose(ab[:, 1], -ba[:, 0], atol=1e-9)


@settings(quick, max_examples=3)
@given(st.integers(0, 2**32 - 1), st.floats(-0.4, 0.4))
def test_the_paired_difference_covers_the_population_mean_difference_at_its_level(seed, shift):
    rng = np.random.default_rng(seed)
    size, orders, alpha = 60, 200, 0.2
    a = (rng.random(size) < 0.5 + shift / 2).astype(float)
    b = np.where(rng.random(size) < 0.7, a, 1 - a)            # correlated with a, as two cells are
    draws = np.stack([rng.permutation(size) for _ in range(orders)])
    path = paired_difference_sequence(a[draws], b[draws], size, alpha)
    truth = (a - b).mean()
    missed = ((path[:, :, 0] > truth + 1e-12) | (path[:, :, 1] < truth - 1e-12)).any(axis=1).mean()
    assert missed <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / orders)


def test_the_paired_sequence_object_reads_like_the_offline_one():
    a, b = np.array([1, 0, 1, 1, 0, 1.0]), np.array([0, 0, 1, 0, 0, 1.0])
    seq = PairedDifferenceSequence(6, 0.1)
    assert seq.interval() is None
    seq.update(a[:2], b[:2])
    seq.update(a[2], b[2])
    assert seq.n == 3
    assert seq.interval() == tuple(paired_difference_sequence(a[:3], b[:3], 6, 0.1)[-1])


def test_probes_report_where_the_interval_lies_relative_to_chosen_means():
    probes = np.arange(1, 20) / 20
    batch = BettingBatch(1, 100, 0.05, probes=probes)
    for v in np.zeros(10):                              # ten 0s of a population of 100
        batch.update([v])
    status = batch.probe_status()
    lo, hi = batch.intervals()
    assert lo[0] == 0.0 and 0.2 < hi[0] < 0.9
    np.testing.assert_array_equal(status["below"][0], probes >= hi[0])   # excluded from above: hi < probe
    np.testing.assert_array_equal(status["at_most"][0], status["below"][0])
    assert not status["above"][0].any() and not status["at_least"][0].any()


def test_at_the_end_a_probe_equal_to_the_exact_mean_is_at_most_but_not_below_it():
    batch = BettingBatch(1, 4, 0.05, grid=None, probes=[0.5])
    for v in [1.0, 0.0, 1.0, 0.0]:
        batch.update([v])
    status = batch.probe_status()
    assert status["at_most"][0, 0] and status["at_least"][0, 0]
    assert not status["below"][0, 0] and not status["above"][0, 0]


def test_values_outside_the_unit_interval_and_draws_past_the_population_are_refused():
    batch = BettingBatch(1, 2, 0.05)
    with pytest.raises(ValueError):
        batch.update([1.5])
    batch.update([1.0])
    batch.update([0.0])
    with pytest.raises(ValueError):
        batch.update([0.5])
    with pytest.raises(ValueError):
        BettingBatch(1, 10, 1.5)
