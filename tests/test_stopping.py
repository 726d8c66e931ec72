"""Stopping rules of sequential runs (workbench.runs.stopping) and their replay (workbench.runs.replay)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.metrics.confseq import paired_difference_sequence, wor_confidence_sequence
from workbench.metrics.stats import wilson_interval
from workbench.runs.replay import replay, replay_outcomes
from workbench.runs.stopping import (
    SequentialRun,
    StopSettings,
    full_run_calls,
    round_calls,
    sample_order,
    sequence_alpha,
    simulate,
    simulate_many,
)

quick = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def bernoulli_cells(means, size: int, seed: int) -> np.ndarray:
    """(size × K) 0/1 scores whose columns have about the given means."""
    rng = np.random.default_rng(seed)
    return (rng.random((size, len(means))) < np.asarray(means)).astype(float)


def test_alpha_is_split_equally_over_every_cell_and_for_best_every_pair():
    assert sequence_alpha(StopSettings("best", alpha=0.05), 4) == pytest.approx(0.05 / 10)    # 4 cells + 6 pairs
    assert sequence_alpha(StopSettings("precision", alpha=0.05), 4) == pytest.approx(0.05 / 4)
    assert SequentialRun(4, 50, StopSettings("best")).alpha == pytest.approx(0.005)


def test_the_order_is_a_permutation_and_a_pure_function_of_seed_and_replay():
    order = sample_order(50, seed=7, replay=3)
    assert sorted(order) == list(range(50))
    assert (order == sample_order(50, 7, 3)).all()
    assert not (order == sample_order(50, 7, 4)).all() and not (order == sample_order(50, 8, 3)).all()


def test_a_clearly_best_cell_is_named_and_the_others_stop_early():
    scores = bernoulli_cells([0.2, 0.35, 0.9, 0.3], 400, seed=1)
    out = simulate(scores, None, sample_order(400, 0), StopSettings("best"))
    assert out.winner == 2
    assert out.cells[2].stopped == "best"
    for c in (0, 1, 3):
        assert out.cells[c].stopped in ("worse", "tied") and out.cells[c].answered < 150
    assert out.cells[2].answered == out.rounds < 400
    assert out.calls < 0.4 * out.full_calls
    for c, cell in enumerate(out.cells):                # and every interval holds the full-run mean
        assert cell.lo <= scores[:, c].mean() <= cell.hi


def test_a_cell_stops_as_worse_once_its_difference_with_the_leader_lies_below_zero():
    # With no tolerance a cell can only stop as worse: its difference's interval is below 0.
    scores = bernoulli_cells([0.1, 0.95], 200, seed=2)
    order = sample_order(200, 1)
    out = simulate(scores, None, order, StopSettings("best", tolerance=0.0))
    loser = out.cells[0]
    assert loser.stopped == "worse" and out.winner == 1
    n = loser.answered
    alpha = sequence_alpha(StopSettings("best"), 2)
    d = paired_difference_sequence(scores[order, 0], scores[order, 1], 200, alpha)
    assert d[n - 1, 1] <= 0 < d[n - 2, 1]           # the first round its upper end reached 0


def test_a_cell_far_behind_stopped_by_the_tolerance_is_said_to_be_worse_not_tied():
    # With E > 0 the upper end of (cell − leader) crosses +E before it crosses 0: the cell 0.6 behind
    # stops on the tolerance rule, as a tie would, and is named for where it is.
    scores = bernoulli_cells([0.2, 0.8], 300, seed=5)
    out = simulate(scores, None, sample_order(300, 0), StopSettings("best", tolerance=0.02))
    assert out.winner == 1 and out.cells[0].stopped == "worse"


def test_tied_cells_stop_when_they_cannot_beat_the_leader_by_more_than_the_tolerance():
    scores = bernoulli_cells([0.6, 0.6, 0.6], 300, seed=3)
    scores[:, 1] = scores[:, 0]                         # cells 0 and 1 answer alike
    out = simulate(scores, None, sample_order(300, 2), StopSettings("best", tolerance=0.3))
    assert out.winner is not None
    reasons = sorted(cell.stopped for cell in out.cells)
    assert reasons == ["best", "tied", "tied"]
    assert out.rounds < 300


def test_precision_stops_each_cell_at_the_first_round_its_half_width_reaches_the_target():
    scores = np.column_stack([bernoulli_cells([0.5], 300, 4)[:, 0], np.full(300, 0.97), np.random.default_rng(4).random(300)])
    order = sample_order(300, 5)
    settings_ = StopSettings("precision", tolerance=0.08)
    out = simulate(scores, None, order, settings_)
    alpha = sequence_alpha(settings_, 3)
    for c, cell in enumerate(out.cells):
        path = wor_confidence_sequence(scores[order, c], 300, alpha)
        half = (path[:, 1] - path[:, 0]) / 2
        first = int(np.argmax(half <= 0.08)) + 1
        assert cell.stopped == "precision" and cell.answered == first
        assert (cell.lo, cell.hi) == tuple(path[first - 1])
    assert out.winner is None
    assert out.cells[1].answered < out.cells[0].answered   # a near-constant cell is pinned down sooner


def test_a_round_costs_one_call_per_distinct_prompt_among_the_cells_asked():
    groups = np.array([[0, 0, 1], [0, 1, 2], [3, 3, 3]])
    asked = np.array([[True, True, True], [True, False, True], [False, True, True]])
    assert list(round_calls(groups, asked)) == [2, 2, 1]
    assert full_run_calls(groups) == 2 + 3 + 1


def test_calls_count_shared_prompts_once_and_only_the_cells_still_asked():
    rng = np.random.default_rng(6)
    scores = bernoulli_cells([0.3, 0.32, 0.8, 0.5], 200, seed=6)
    groups = np.tile(np.arange(4), (200, 1))
    shared = rng.random(200) < 0.5
    groups[shared, 1] = 0                               # on half the samples cells 0 and 1 render the same prompt
    scores[shared, 1] = scores[shared, 0]               # and so get the same answer
    order = sample_order(200, 9)
    out = simulate(scores, groups, order, StopSettings("best"))
    assert out.full_calls == 4 * 200 - shared.sum()
    answered = np.array([cell.answered for cell in out.cells])
    expected = sum(len({groups[order[t], c] for c in range(4) if answered[c] > t}) for t in range(out.rounds))
    assert out.calls == expected < out.full_calls


def test_a_round_limit_leaves_undecided_cells_without_a_winner():
    scores = bernoulli_cells([0.5, 0.52, 0.55], 100, seed=7)
    out = simulate(scores, None, sample_order(100, 1), StopSettings("best", limit=10))
    assert out.rounds == 10 and out.winner is None
    assert all(cell.stopped is None and cell.answered == 10 for cell in out.cells)


def test_cells_that_answer_every_sample_are_exhausted_and_their_interval_is_exact():
    scores = bernoulli_cells([0.5, 0.5], 40, seed=8)
    out = simulate(scores, None, sample_order(40, 3), StopSettings("precision", tolerance=0.0))
    for c, cell in enumerate(out.cells):
        assert cell.stopped == "exhausted" and cell.answered == 40
        assert cell.lo == cell.hi and abs(cell.lo - scores[:, c].mean()) < 1e-12


def test_a_single_cell_is_the_best_without_asking_anything():
    out = simulate(np.ones((5, 1)), None, sample_order(5, 0), StopSettings("best"))
    assert out.winner == 0 and out.calls == 0 and out.cells[0].lo is None


def test_the_live_run_asks_only_the_cells_still_in_and_keeps_pair_intervals_on_their_common_samples():
    scores = bernoulli_cells([0.15, 0.5, 0.85], 300, seed=10)
    order = sample_order(300, 4)
    settings_ = StopSettings("best")
    run = SequentialRun(3, 300, settings_)
    assert run.leader is None and run.state(0).lo is None
    stopped_at = {}
    while not run.done:
        asked = run.asked()
        for c in run.feed(scores[order[run.round], asked]):
            stopped_at[c] = run.round
        assert run.leader in asked
    assert run.winner == 2 and run.asked().size == 0
    a, b = 0, 2
    common = min(stopped_at[a], stopped_at[b])
    assert run.state(a).answered == stopped_at[a]
    d = paired_difference_sequence(scores[order[:common], a], scores[order[:common], b], 300, run.alpha)[-1]
    lo, hi = run.pair_interval(a, b)
    assert d[0] - 1e-9 <= lo <= hi <= d[1] + 1e-9 and hi - lo >= d[1] - d[0] - 1e-9
    assert run.pair_interval(b, a) == (-hi, -lo)
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
        assert simulate(scores, groups, order, settings_) == outcome


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
