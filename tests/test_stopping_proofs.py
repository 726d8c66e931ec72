"""What a sequential run says is what its intervals prove: checked on generated grids (hypothesis).

Two kinds of grid: *ladders*, where neighbouring arms lie 0.6–0.9·E apart (the case that chains of
ties got wrong: a winner settled against a leader that was itself settled against another can drift
k·E from the best), and random grids. On each, several seeded orders of the same complete answers
are run as a live run would run them, and at the stop:

- every ``worse`` rests on a difference interval whose upper end is below 0, every ``tied`` on one
  whose upper end is at most E (what the word says is what the interval shows);
- the winner is within E of the best arm's full-run S_llm;
- the arms' intervals and the versus intervals cover the full-run values, at the rate their levels
  promise (the intervals are conservative: misses are rare).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.runs.replay import simulate
from workbench.runs.stopping import StopSettings, sample_order

proofs = settings(deadline=None, derandomize=True, max_examples=8,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ORDERS = 4
SIZE = 160
BEFORE = Path(__file__).resolve().parents[1] / "bench" / "stopping_before.py"


def rule_before():
    """The stopping rule the workbench had before this one (bench/stopping_before.py), as a module."""
    spec = importlib.util.spec_from_file_location("stopping_before", BEFORE)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("stopping_before", module)     # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def ladder(arms: int, tolerance: float, spacing: float, seed: int) -> np.ndarray:
    """0/1 answers of ``arms`` arms whose full-run means step down by ``spacing``·E, exactly (SIZE samples)."""
    rng = np.random.default_rng(seed)
    top = 0.3 + 0.4 * rng.random()
    means = top - np.arange(arms) * spacing * tolerance
    scores = np.zeros((SIZE, arms))
    for a, m in enumerate(means):
        scores[rng.permutation(SIZE)[:int(round(m * SIZE))], a] = 1.0
    return scores[:, rng.permutation(arms)]


def random_grid(arms: int, seed: int) -> np.ndarray:
    """Answers of ``arms`` arms with random means, some 0/1, some fractional (a set F1, say)."""
    rng = np.random.default_rng(seed)
    means = rng.random(arms)
    binary = (rng.random((SIZE, arms)) < means).astype(float)
    fractional = rng.beta(1 + 6 * means, 1 + 6 * (1 - means), (SIZE, arms))
    return np.where(rng.random(arms) < 0.5, binary, fractional)


def check(scores: np.ndarray, tolerance: float, seed: int) -> tuple[int, int, int, int]:
    """Run ORDERS orders; assert the words hold their intervals and the winner is within E; return the counts of
    (arm intervals, arm misses, versus intervals, versus misses) for the rate checks."""
    truth = scores.mean(axis=0)
    settings_ = StopSettings("best", alpha=0.05, tolerance=tolerance)
    cells = cell_misses = pairs = pair_misses = 0
    for r in range(ORDERS):
        out = simulate(scores, None, sample_order(SIZE, seed, r), settings_)
        assert out.winner is not None
        assert truth[out.winner] >= truth.max() - tolerance - 1e-12, (truth, out.winner)
        for c, cell in enumerate(out.cells):
            cells += 1
            cell_misses += not (cell.lo - 1e-9 <= truth[c] <= cell.hi + 1e-9)
            if c == out.winner:
                assert cell.stopped == "best" and cell.versus is None
                continue
            v = cell.versus
            assert cell.stopped in ("worse", "tied") and v is not None
            assert (cell.stopped == "worse") == (v.hi < 0)
            assert v.hi <= tolerance                      # settled: cannot beat the arm it names by more than E
            pairs += 1
            pair_misses += not (v.lo - 1e-9 <= truth[c] - truth[v.other] <= v.hi + 1e-9)
    return cells, cell_misses, pairs, pair_misses


def at_the_promised_rate(total: int, misses: int, level: float) -> bool:
    """``misses`` of ``total`` intervals at level 1 − ``level`` each: no more than chance would allow (3 sd)."""
    return misses <= level * total + 3 * np.sqrt(level * (1 - level) * total) + 1


@proofs
@given(st.integers(3, 6), st.sampled_from([0.02, 0.05, 0.1]), st.floats(0.6, 0.9), st.integers(0, 2**31))
def test_on_a_ladder_every_word_is_proved_and_the_winner_is_within_e(arms, tolerance, spacing, seed):
    cells, cell_misses, pairs, pair_misses = check(ladder(arms, tolerance, spacing, seed), tolerance, seed % 997)
    assert at_the_promised_rate(cells, cell_misses, 0.05 / (2 * arms))
    assert at_the_promised_rate(pairs, pair_misses, 0.05 / (2 * (arms - 1)))


@proofs
@given(st.integers(2, 6), st.sampled_from([0.0, 0.02, 0.1]), st.integers(0, 2**31))
def test_on_random_grids_every_word_is_proved_and_the_winner_is_within_e(arms, tolerance, seed):
    cells, cell_misses, pairs, pair_misses = check(random_grid(arms, seed), tolerance, seed % 991)
    assert at_the_promised_rate(cells, cell_misses, 0.05 / (2 * arms))
    assert at_the_promised_rate(pairs, pair_misses, 0.05 / (2 * (arms - 1)))


def test_the_rule_before_this_one_called_cells_worse_that_its_intervals_did_not_prove():
    """The checks above have teeth: the rule the workbench had before (kept as the benchmark's baseline,
    bench/stopping_before.py) stopped a cell when its difference with that round's leader could not exceed E,
    then called it ``worse`` on its running mean. On a ladder most of its ``worse`` words rest on a difference
    interval that still holds 0, which the first check above refuses."""
    before = rule_before()
    tolerance, worse, unproved = 0.05, 0, 0
    scores = ladder(5, tolerance, 0.75, 1)
    for r in range(ORDERS):
        order = sample_order(SIZE, 1, r)
        run = before.SequentialRun(5, SIZE, before.StopSettings("best", 0.05, tolerance))
        while not run.done:
            asked = run.asked()
            stopped = run.feed(scores[order[run.round], asked])
            leader = int(asked[np.argmax(run._cells.total[asked])])      # the round's leader, as that rule took it
            for c in stopped:
                if run.state(c).stopped == "worse" and c != leader:
                    worse += 1
                    unproved += run.pair_interval(c, leader)[1] >= 0
    assert worse > 0 and unproved > 0, (worse, unproved)
