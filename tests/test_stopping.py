"""Stopping rules of sequential runs (workbench.runs.stopping) and their replay (workbench.runs.replay).

The rule's promises, proved by its intervals, are checked on generated grids in
tests/test_stopping_proofs.py; here, how it behaves on small hand-made ones.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.metrics.confseq import BettingBatch
from workbench.metrics.stats import wilson_interval
from workbench.runs.replay import replay, replay_outcomes, simulate, simulate_many
from workbench.runs.stopping import (
    Engine,
    SequentialRun,
    StopSettings,
    arms_of,
    distinct_groups,
    full_run_calls,
    sample_order,
    split_alpha,
)

quick = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def bernoulli_cells(means, size: int, seed: int) -> np.ndarray:
    """(size × K) 0/1 scores whose columns have about the given means."""
    rng = np.random.default_rng(seed)
    return (rng.random((size, len(means))) < np.asarray(means)).astype(float)


def test_alpha_goes_half_to_the_differences_with_the_best_half_to_the_arms_own_intervals():
    assert split_alpha("best", 4) == (pytest.approx(0.5 / 3), pytest.approx(0.5 / 4))     # 3 pairs hold the proof
    assert split_alpha("precision", 4) == (0.0, pytest.approx(1 / 4))
    assert split_alpha("best", 4, told_best=True) == (pytest.approx(1 / 3), pytest.approx(1 / 4))
    engine = Engine(1, 4, 50, StopSettings("best", alpha=0.05))
    assert (engine.pair_alpha, engine.cell_alpha) == (pytest.approx(0.05 / 6), pytest.approx(0.05 / 8))


def test_the_order_is_a_permutation_and_a_pure_function_of_seed_and_replay():
    order = sample_order(50, seed=7, replay=3)
    assert sorted(order) == list(range(50))
    assert (order == sample_order(50, 7, 3)).all()
    assert not (order == sample_order(50, 7, 4)).all() and not (order == sample_order(50, 8, 3)).all()


def test_cells_whose_prompts_are_the_same_on_every_sample_are_one_arm():
    groups = np.array([[0, 0, 1, 0], [2, 2, 3, 4], [5, 5, 5, 5]])
    assert list(arms_of(groups)) == [0, 0, 2, 3]        # cell 3 shares cell 0's prompt on two samples only
    assert distinct_groups(groups).tolist() == [[0, 0, 2, 0], [0, 0, 2, 3], [0, 0, 0, 0]]
    assert full_run_calls(groups) == 2 + 3 + 1


def test_a_clearly_best_cell_is_named_the_others_stop_early_each_on_the_difference_it_was_settled_on():
    scores = bernoulli_cells([0.2, 0.35, 0.9, 0.3], 400, seed=1)
    out = simulate(scores, None, sample_order(400, 0), StopSettings("best"))
    assert out.winner == 2 and out.cells[2].stopped == "best" and out.cells[2].versus is None
    for c in (0, 1, 3):
        cell = out.cells[c]
        assert cell.answered < 150 and cell.versus.other == 2
        # What each word says is what its interval proves: worse below 0, tied at most E above.
        assert (cell.stopped == "worse" and cell.versus.hi < 0) or (cell.stopped == "tied" and cell.versus.hi <= 0.02)
    assert out.calls < 0.4 * out.full_calls
    for c, cell in enumerate(out.cells):                # and every interval holds the full-run mean
        assert cell.lo <= scores[:, c].mean() <= cell.hi


def test_an_arm_within_the_tolerance_pauses_as_tied_on_an_interval_whose_upper_end_is_at_most_e():
    scores = bernoulli_cells([0.6, 0.6, 0.6], 300, seed=3)
    out = simulate(scores, None, sample_order(300, 2), StopSettings("best", tolerance=0.3))
    assert out.winner is not None and sorted(c.stopped for c in out.cells) == ["best", "tied", "tied"]
    for cell in out.cells:
        if cell.stopped == "tied":
            assert cell.versus.other == out.winner and 0 <= cell.versus.hi <= 0.3
    assert out.rounds < 300


def test_a_paused_arm_is_asked_again_when_a_new_leader_leaves_it_unsettled():
    """Three close arms: the leader changes while others are paused against it; a paused arm left unsettled by
    the new leader answers again from where it paused, and the run ends with every arm settled on the winner."""
    scores = bernoulli_cells([0.5, 0.53, 0.47], 300, seed=3)
    resumed = 0
    for seed in range(6):
        order = sample_order(300, seed)
        run = SequentialRun([0, 1, 2], 300, StopSettings("best", tolerance=0.05))
        while not run.done:
            before = [run.state(c).stopped for c in range(3)]
            positions = [run.position(c) for c in range(3)]
            run.feed([scores[order[run.position(a)], a] for a in run.asked()])
            for c in range(3):
                if before[c] is not None and run.state(c).stopped is None:
                    resumed += 1
                    assert run.position(c) == positions[c]        # from where it paused
        for c in range(3):
            if c != run.winner:
                assert run.state(c).versus.other == run.winner and run.state(c).versus.hi <= 0.05
    assert resumed > 0


def test_precision_stops_each_arm_at_the_first_round_its_half_width_reaches_the_target():
    scores = np.column_stack([bernoulli_cells([0.5], 300, 4)[:, 0], np.full(300, 0.97),
                              np.random.default_rng(4).random(300)])
    order = sample_order(300, 5)
    settings_ = StopSettings("precision", tolerance=0.08)
    out = simulate(scores, None, order, settings_)
    for c, cell in enumerate(out.cells):
        assert cell.stopped == "precision" and cell.versus is None
        # The arm's own sequence (α/3, bets tuned to the horizon N), read where it stopped: its first narrow enough.
        alone = BettingBatch(1, 300, 0.05 / 3, horizon=True)
        half = []
        for x in scores[order[:cell.answered], c]:
            alone.update([x])
            lo, hi = alone.intervals()
            half.append((hi[0] - lo[0]) / 2)
        assert half[-1] <= 0.08 < min(half[:-1]) and (cell.lo, cell.hi) == (lo[0], hi[0])
    assert out.winner is None
    assert out.cells[1].answered < out.cells[0].answered   # a near-constant arm is pinned down sooner


def test_calls_count_a_prompt_once_whichever_arm_asked_it_first():
    rng = np.random.default_rng(6)
    scores = bernoulli_cells([0.3, 0.32, 0.8, 0.5], 200, seed=6)
    groups = np.tile(np.arange(4), (200, 1))
    shared = rng.random(200) < 0.5
    groups[shared, 1] = 0                               # on half the samples cells 0 and 1 render the same prompt
    scores[shared, 1] = scores[shared, 0]               # and so get the same answer
    order = sample_order(200, 9)
    out = simulate(scores, groups, order, StopSettings("best"))
    assert out.full_calls == 4 * 200 - shared.sum()
    answered = [set(order[:cell.answered]) for cell in out.cells]
    expected = len({(s, groups[s, c]) for c in range(4) for s in answered[c]})
    assert out.calls == expected < out.full_calls


def test_a_round_limit_leaves_undecided_arms_without_a_winner():
    scores = bernoulli_cells([0.5, 0.52, 0.55], 100, seed=7)
    out = simulate(scores, None, sample_order(100, 1), StopSettings("best", limit=10))
    assert out.rounds == 10 and out.winner is None
    assert all(cell.stopped is None and cell.answered == 10 for cell in out.cells)


def test_at_n_equals_n_every_interval_is_exact_and_exact_ties_go_to_the_first_arm():
    """With no tolerance, two arms of exactly equal full-run S_llm: the differences are exact at n = N
    (a float running sum once made 0.5000000000000001 > 0.5 and no winner), and the first arm wins."""
    rng = np.random.default_rng(8)
    a = (rng.random(60) < 0.5).astype(float)
    b = rng.permutation(a)                               # the same count of right answers, other samples
    scores = np.column_stack([a, b, np.full(60, 0.1)])
    outs = simulate_many(scores, None, np.stack([sample_order(60, 3, r) for r in range(40)]),
                         StopSettings("best", tolerance=0.0))
    assert all(o.winner == 0 for o in outs if o.cells[1].answered == 60)
    assert all(o.winner in (0, 1) for o in outs)
    precise = simulate(scores, None, sample_order(60, 3), StopSettings("precision", tolerance=0.0))
    for c, cell in enumerate(precise.cells):
        assert cell.answered == 60 and cell.lo == cell.hi and abs(cell.lo - scores[:, c].mean()) < 1e-12


def test_best_needs_two_distinct_configurations():
    with pytest.raises(ValueError, match="two or more distinct configurations"):
        simulate(np.ones((5, 1)), None, sample_order(5, 0), StopSettings("best"))
    with pytest.raises(ValueError, match="two or more distinct configurations"):
        simulate(np.ones((5, 2)), np.zeros((5, 2), dtype=int), sample_order(5, 0), StopSettings("best"))


def test_the_live_run_keeps_pair_intervals_on_the_arms_common_samples():
    scores = bernoulli_cells([0.15, 0.5, 0.85], 300, seed=10)
    order = sample_order(300, 4)
    run = SequentialRun([0, 1, 2], 300, StopSettings("best"))
    assert run.leader is None and run.state(0).lo is None
    while not run.done:
        run.feed([scores[order[run.position(a)], a] for a in run.asked()])
    assert run.winner == 2 and run.asked() == []
    lo, hi = run.pair_interval(0, 2)
    assert lo <= hi < 0 and run.pair_interval(2, 0) == (-hi, -lo)
    with pytest.raises(ValueError):
        run.feed([1.0])


matrices = st.tuples(st.integers(8, 40), st.integers(2, 5), st.sampled_from(["binary", "fractional"]),
                     st.integers(0, 2**32 - 1))


@settings(quick, max_examples=10)
@given(matrices, st.sampled_from(["best", "precision"]), st.sampled_from([0.0, 0.02, 0.15]),
       st.sampled_from([None, 7]), st.sampled_from([0.05, 0.3]))
def test_the_vectorised_replay_reaches_exactly_the_live_runs_decisions(matrix, rule, tolerance, limit, alpha):
    size, cells, kind, seed = matrix
    rng = np.random.default_rng(seed)
    means = rng.random(cells)
    scores = (rng.random((size, cells)) < means).astype(float) if kind == "binary" else rng.beta(
        1 + 4 * means, 1 + 4 * (1 - means), (size, cells))
    groups = rng.integers(0, 2, (size, cells)) * cells + np.arange(cells)   # some cells share a prompt
    groups[:, 0] = np.where(rng.random(size) < 0.3, groups[:, 1], groups[:, 0])
    settings_ = StopSettings(rule, alpha=alpha, tolerance=tolerance, limit=limit)
    orders = np.stack([sample_order(size, seed % 1000, r) for r in range(3)])
    fast = simulate_many(scores, groups, orders, settings_)
    for order, outcome in zip(orders, fast):
        live = simulate(scores, groups, order, settings_)
        assert (live.winner, live.calls, live.rounds) == (outcome.winner, outcome.calls, outcome.rounds)
        for a, b in zip(live.cells, outcome.cells):
            assert (a.answered, a.lo, a.hi, a.stopped) == (b.answered, b.lo, b.hi, b.stopped)
            assert (a.versus is None) == (b.versus is None) and (a.versus is None or a.versus.other == b.versus.other)


def test_the_replay_is_deterministic_given_its_seed_and_a_prefix_of_a_longer_one():
    scores = bernoulli_cells([0.3, 0.5, 0.7], 120, seed=11)
    first = replay(scores, None, "best", seed=5, replays=6)
    assert replay(scores, None, "best", seed=5, replays=6) == first
    settings_ = StopSettings("best")
    assert replay_outcomes(scores, None, settings_, 5, 6)[:4] == replay_outcomes(scores, None, settings_, 5, 4)
    assert replay_outcomes(scores, None, settings_, 6, 4) != replay_outcomes(scores, None, settings_, 5, 4)


def test_the_replay_summary_reports_calls_saved_the_winner_and_coverage_with_its_interval():
    scores = bernoulli_cells([0.25, 0.45, 0.85], 150, seed=12)
    summary = replay(scores, None, "best", alpha=0.05, tolerance=0.02, seed=1, replays=20)
    assert summary.replays == 20 and summary.full_calls == 450
    assert 0 < summary.call_share_mean < 0.6 and summary.call_share_sd >= 0
    q05, q50, q95 = summary.call_share_quantiles
    assert q05 <= q50 <= q95
    assert summary.named_best == 20 and summary.named_best_share == 1.0
    assert summary.covered == 20 and summary.coverage_interval == wilson_interval(20, 20)
    assert summary.stopped[2] == {"best": 20}
    assert summary.as_dict()["coverage"] == 1.0
    precise = replay(scores, None, "precision", tolerance=0.1, seed=1, replays=5)
    assert precise.named_best is None and precise.stopped[0] == {"precision": 5}


def test_the_wilson_interval_matches_its_textbook_values():
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert lo == pytest.approx(0.7225, abs=1e-4) and hi == 1.0
    assert wilson_interval(0, 0) is None
    assert math.isclose(sum(wilson_interval(3, 7)), 2 * (3 / 7 + 1.96**2 / 14) / (1 + 1.96**2 / 7), rel_tol=1e-3)


def test_bad_settings_and_matrices_are_refused():
    with pytest.raises(ValueError):
        StopSettings("fastest")
    with pytest.raises(ValueError):
        StopSettings("best", alpha=0)
    with pytest.raises(ValueError):
        simulate(np.full((3, 2), 2.0), None, [0, 1, 2], StopSettings("best"))
    with pytest.raises(ValueError):
        simulate(np.ones((3, 2)), np.full((3, 2), -1), [0, 1, 2], StopSettings("best"))


def test_a_replay_reads_each_versus_interval_the_live_run_reads():
    """A replay of many orders decides on its probes alone and rebuilds each settled arm's versus interval
    afterwards (the benchmark's difference coverage rests on it): the very intervals a live run reads."""
    rng = np.random.default_rng(12)
    scores = np.column_stack([(rng.random(200) < p).astype(float) for p in (0.4, 0.45, 0.47, 0.6, 0.62)])
    orders = np.stack([sample_order(200, 6, r) for r in range(3)])
    settings_ = StopSettings("best", tolerance=0.05)
    replayed = simulate_many(scores, None, orders, settings_)
    settled = 0
    for order, many in zip(orders, replayed):
        one = simulate(scores, None, order, settings_)
        assert one.winner == many.winner
        for live, replay_ in zip(one.cells, many.cells):
            assert live.stopped == replay_.stopped and (live.versus is None) == (replay_.versus is None)
            if live.versus is not None:
                settled += 1
                assert (live.versus.other, live.versus.lo, live.versus.hi) == (
                    replay_.versus.other, pytest.approx(replay_.versus.lo, abs=1e-12),
                    pytest.approx(replay_.versus.hi, abs=1e-12))
    assert settled >= 3
