"""Entity deduplication (docs/design.md §8): union-find merges, the representative rule, reverts,
and clustering scores (pairwise and B-cubed) with entity-bootstrap intervals."""

from __future__ import annotations

import itertools
from fractions import Fraction as Fr

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.kg.metrics import (
    METRICS,
    ClusterScores,
    bcubed,
    cluster_scores,
    pair_counts,
    paired_difference,
    pairwise,
    per_entity,
)
from workbench.kg.unionfind import UnionFind, choose_representative, merge_clusters, revert_merge
from workbench.metrics.stats import Estimate

# ---------------------------------------------------------------- union-find


def test_union_is_transitive():
    # a~b and b~c put a and c together although (a, c) was never merged.
    uf = UnionFind(5)
    uf.union(0, 1)
    uf.union(1, 2)
    assert uf.find(0) == uf.find(2)
    assert uf.find(3) != uf.find(0)


def test_union_returns_the_new_root_and_is_idempotent():
    uf = UnionFind(4)
    root = uf.union(2, 3)
    assert root == uf.find(2) == uf.find(3)
    assert uf.union(3, 2) == root  # already together: a no-op returning the root
    # Union by size: the larger set's root survives.
    assert uf.union(0, 2) == root


def test_clusters_include_singletons_sorted():
    uf = UnionFind(6)
    uf.union(4, 1)
    uf.union(5, 3)
    uf.union(3, 1)
    assert uf.clusters() == [[0], [1, 3, 4, 5], [2]]


def test_out_of_range_ids_are_rejected():
    # A negative id would silently index from the end of a Python list.
    uf = UnionFind(3)
    with pytest.raises(IndexError):
        uf.find(-1)
    with pytest.raises(IndexError):
        uf.union(0, 3)


def test_merge_clusters_labels_are_the_smallest_member():
    assert merge_clusters(6, [(5, 3), (3, 1), (2, 4)]) == [0, 1, 2, 1, 2, 1]
    # The labels depend only on the set of pairs, not their order.
    assert merge_clusters(6, [(2, 4), (1, 3), (3, 5)]) == [0, 1, 2, 1, 2, 1]
    assert merge_clusters(3, []) == [0, 1, 2]


def test_revert_recomputes_from_the_remaining_pairs():
    a, b, c = 0, 1, 2
    merges = [(a, b), (b, c)]
    assert merge_clusters(3, merges) == [0, 0, 0]
    # Reverting a→b keeps b~c and splits a off ...
    remaining = revert_merge(merges, (a, b))
    assert remaining == [(b, c)]
    assert merge_clusters(3, remaining) == [0, 1, 1]
    # ... unless another accepted path still links a (here a~c).
    assert merge_clusters(3, revert_merge([(a, b), (b, c), (a, c)], (b, a))) == [0, 0, 0]
    with pytest.raises(KeyError):
        revert_merge(merges, (a, c))  # never accepted


def test_representative_rule_degree_then_name_length_then_id():
    names = ["UN", "United Nations", "U.N.", "United Nations"]
    # Most connected wins even with the shortest name.
    assert choose_representative([0, 1, 2], [9, 3, 3], names) == 0
    # Degree tie: the longest name, the most complete surface form.
    assert choose_representative([0, 1, 2], [3, 3, 3], names) == 1
    # Degree and length tie: the smallest id.
    assert choose_representative([3, 1], [0, 5, 0, 5], names) == 1
    with pytest.raises(ValueError):
        choose_representative([], [], [])


# ---------------------------------------------------------------- hand-computed scores
#
# Entities a..f = 0..5. Gold {a,b,c},{d,e},{f}; predicted {a,b},{c,d,e},{f}.
#   predicted pairs: ab | cd ce de          = 4
#   gold pairs:      ab ac bc | de          = 4
#   true positives:  ab, de                 = 2
#   pairwise P = 2/4 = 1/2, R = 2/4 = 1/2, F1 = 1/2
# B-cubed, per entity (|pred ∩ gold| / |pred|, / |gold|):
#   a: {a,b}∩{a,b,c} = 2 -> P 2/2, R 2/3      b: same as a
#   c: {c,d,e}∩{a,b,c} = 1 -> P 1/3, R 1/3
#   d: {c,d,e}∩{d,e} = 2 -> P 2/3, R 2/2      e: same as d
#   f: 1 -> P 1, R 1
#   P = (1+1+1/3+2/3+2/3+1)/6 = 7/9, R = (2/3+2/3+1/3+1+1+1)/6 = 7/9, F1 = 7/9
GOLD = [0, 0, 0, 1, 1, 2]
PRED = [0, 0, 1, 1, 1, 2]


def test_pairwise_and_bcubed_hand_computed():
    assert pair_counts(PRED, GOLD) == (2, 4, 4)
    assert pairwise(PRED, GOLD) == (0.5, 0.5, 0.5)
    p, r, f = bcubed(PRED, GOLD)
    assert (p, r, f) == pytest.approx((7 / 9, 7 / 9, 7 / 9), abs=1e-12)


def test_asymmetric_example_does_not_swap_precision_and_recall():
    # Gold {a,b,c,d}; predicted {a,b},{c},{d}: an under-merged prediction.
    #   pairwise: predicted 1 (ab), gold 6, TP 1 -> P 1, R 1/6, F1 = 2·(1/6)/(7/6) = 2/7
    #   B-cubed: every P_e = 1; R_e = 2/4, 2/4, 1/4, 1/4 -> R = 3/8, F1 = (3/4)/(11/8) = 6/11
    gold, pred = [7, 7, 7, 7], [0, 0, 1, 2]
    assert pairwise(pred, gold) == pytest.approx((1.0, float(Fr(1, 6)), float(Fr(2, 7))))
    assert bcubed(pred, gold) == pytest.approx((1.0, float(Fr(3, 8)), float(Fr(6, 11))))


def test_labels_are_only_compared_for_equality():
    assert pairwise(["x", "x", "y", "y", "y", "z"], GOLD) == pairwise(PRED, GOLD)


def test_all_singletons_prediction():
    # No predicted pairs: precision undefined (None, never 0); recall 0 since gold has pairs.
    singletons = list(range(6))
    assert pairwise(singletons, GOLD) == (None, 0.0, None)
    # B-cubed stays defined: every P_e = 1, R_e = 1/|C_gold(e)|.
    p, r, _ = bcubed(singletons, GOLD)
    assert p == 1.0 and r == pytest.approx((1 / 3 * 3 + 1 / 2 * 2 + 1) / 6)
    # Singletons everywhere: no pairs at all, pairwise entirely undefined.
    assert pairwise(singletons, singletons) == (None, None, None)


def test_one_big_cluster_prediction():
    # Everything merged: recall 1, precision = gold pairs / all pairs = 4/15.
    p, r, _ = pairwise([0] * 6, GOLD)
    assert (p, r) == (pytest.approx(4 / 15), 1.0)


def test_perfect_clustering_is_one_everywhere():
    assert pairwise(GOLD, GOLD) == (1.0, 1.0, 1.0)
    assert bcubed(GOLD, GOLD) == (1.0, 1.0, 1.0)
    scores = cluster_scores(GOLD, GOLD, resamples=200)
    for m in METRICS:
        assert getattr(scores, m).value == 1.0


def test_mismatched_lengths_rejected():
    with pytest.raises(ValueError):
        pairwise([0, 0], [0, 0, 0])


def test_per_entity_sums_match_pair_counts():
    terms = per_entity(PRED, GOLD)
    assert terms["tp"].tolist() == [1, 1, 0, 1, 1, 0]
    tp, n_pred, n_gold = pair_counts(PRED, GOLD)
    # Each pair is counted from both of its ends.
    assert terms["tp"].sum() == 2 * tp
    assert terms["pred"].sum() == 2 * n_pred
    assert terms["gold"].sum() == 2 * n_gold
    assert terms["bp"].mean() == bcubed(PRED, GOLD)[0]


# ---------------------------------------------------------------- bootstrap


def _random_clustering(rng, n, k):
    return rng.integers(0, k, size=n).tolist()


def test_cluster_scores_points_equal_the_plain_functions_and_cis_contain_them():
    rng = np.random.default_rng(1)
    gold = _random_clustering(rng, 80, 25)
    # A noisy copy of gold: 20 % of the entities moved to a random cluster.
    pred = [g if rng.random() > 0.2 else int(rng.integers(0, 25)) for g in gold]
    scores = cluster_scores(pred, gold, resamples=500, seed=3)
    assert isinstance(scores, ClusterScores)
    points = (*pairwise(pred, gold), *bcubed(pred, gold))
    for m, point in zip(METRICS, points):
        est = getattr(scores, m)
        assert est.value == point
        assert est.lo <= est.value <= est.hi, m
        assert 0.0 <= est.lo <= est.hi <= 1.0
    # Seeded: the same call gives the same intervals.
    assert cluster_scores(pred, gold, resamples=500, seed=3) == scores


def test_undefined_point_has_no_interval_and_zero_resamples_none():
    scores = cluster_scores(list(range(6)), GOLD, resamples=100)
    assert scores.pairwise_precision == Estimate(None, None, None)
    assert scores.pairwise_recall.value == 0.0
    plain = cluster_scores(PRED, GOLD, resamples=0)
    assert plain.bcubed_f1 == Estimate(plain.bcubed_f1.value, None, None)


def test_paired_difference_of_identical_predictions_is_exactly_zero():
    for m in METRICS:
        d = paired_difference(PRED, list(PRED), GOLD, m, resamples=300)
        assert d == Estimate(0.0, 0.0, 0.0)


def test_paired_difference_sign_and_point():
    d = paired_difference(GOLD, PRED, GOLD, "bcubed_f1", resamples=500)
    assert d.value == pytest.approx(1 - 7 / 9)
    assert 0 < d.lo <= d.value <= d.hi
    with pytest.raises(ValueError):
        paired_difference(PRED, PRED, GOLD, "accuracy")


# ---------------------------------------------------------------- properties

labels = st.integers(min_value=1, max_value=25).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 5), min_size=n, max_size=n),
        st.lists(st.integers(0, 5), min_size=n, max_size=n),
    )
)


@settings(max_examples=150, deadline=None)
@given(labels)
def test_scores_in_unit_interval_and_pair_counts_brute_force(pg):
    pred, gold = pg
    for value in (*pairwise(pred, gold), *bcubed(pred, gold)):
        assert value is None or 0.0 <= value <= 1.0 + 1e-12
    # Literal definition: enumerate every pair.
    pairs = list(itertools.combinations(range(len(pred)), 2))
    same_p = {(i, j) for i, j in pairs if pred[i] == pred[j]}
    same_g = {(i, j) for i, j in pairs if gold[i] == gold[j]}
    assert pair_counts(pred, gold) == (len(same_p & same_g), len(same_p), len(same_g))
    # Swapping roles swaps precision and recall.
    p, r, _ = bcubed(pred, gold)
    assert bcubed(gold, pred)[:2] == pytest.approx((r, p))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=30))
def test_bcubed_of_gold_against_itself_is_one(gold):
    assert bcubed(gold, gold) == (1.0, 1.0, 1.0)
