"""The dissipation ledger (docs/design.md §3): terms, undefined cases, identity, bootstrap, oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.metrics import stats as stats_mod
from workbench.metrics.ledger import (
    REASONING_TERMS,
    SUM_COLUMNS,
    TERMS,
    CellArrays,
    Estimate,
    cell_sums,
    compute_ledger,
    ledger_point,
    paired_difference,
    terms_from_sums,
)
from workbench.metrics.oracle import oracle_terms
from workbench.metrics.resample import poisson_weights

NAN = float("nan")


def make_cell(h_set, h_vis, score, k_eff=None, tokens=None, truncated=None) -> CellArrays:
    n = len(h_set)
    return CellArrays(
        h_set=np.asarray(h_set, dtype=float),
        h_vis=np.asarray(h_vis, dtype=float),
        score=np.asarray(score, dtype=float),
        k_eff=np.zeros(n) if k_eff is None else np.asarray(k_eff, dtype=float),
        evidence_tokens=np.zeros(n) if tokens is None else np.asarray(tokens, dtype=float),
        truncated=np.zeros(n) if truncated is None else np.asarray(truncated, dtype=float),
    )


def random_cell(rng: np.random.Generator, n: int, *, p_set=0.7, p_fit=0.7, nan_rate=0.0):
    h_set = (rng.random(n) < p_set).astype(float)
    h_vis = h_set * (rng.random(n) < p_fit)
    score = (rng.random(n) < np.where(h_vis == 1, 0.75, 0.2)).astype(float)
    score[rng.random(n) < nan_rate] = np.nan
    k_eff = rng.integers(0, 10, n).astype(float)
    tokens = rng.integers(10, 500, n).astype(float)
    truncated = (rng.random(n) < 0.3).astype(float)
    return CellArrays(h_set, h_vis, score, k_eff, tokens, truncated)


# --------------------------------------------------------------------------- worked example

#            sample:  0    1    2    3    4    5    6    7
WORKED = make_cell(
    h_set=[1, 1, 1, 1, 1, 0, 0, 0],  # gold path retrieved in top-K for samples 0-4
    h_vis=[1, 1, 1, 0, 0, 0, 0, 0],  # ...but only 0-2 kept it inside the budget
    score=[1, 1, 0, 1, 0, 1, 0, 0],
    k_eff=[3, 3, 2, 1, 0, 2, 1, 0],
    tokens=[120, 120, 100, 128, 128, 60, 40, 40],
    truncated=[0, 0, 0, 1, 1, 0, 0, 0],
)


def test_worked_example_every_term_by_hand() -> None:
    p = ledger_point(WORKED)
    assert p["n"] == 8  # every sample is scored
    assert p["S_set"] == 5 / 8 == 0.625  # samples 0-4
    assert p["S_vis"] == 3 / 8 == 0.375  # samples 0-2
    assert p["L_iface"] == 5 / 8 - 3 / 8 == 0.25  # 3 and 4 were cut by the budget
    assert p["S_llm"] == 4 / 8 == 0.5  # samples 0, 1, 3, 5 are right
    assert p["Acc_hit"] == 2 / 3  # visible {0,1,2}: scores 1, 1, 0
    assert p["Acc_miss"] == 2 / 5 == 0.4  # not visible {3,4,5,6,7}: scores 1,0,1,0,0
    assert p["D_rate"] == 1 - 2 / 3
    # D_mass = E[(1−s)·1(H_vis=1)]: only sample 2 (visible, wrong) contributes, 1/8.
    assert p["D_mass"] == 1 / 8 == 0.125
    # ... which is S_vis·(1−Acc_hit) = 3/8 · 1/3, equal up to rounding (0.12499999999999999).
    assert p["D_mass"] == pytest.approx(3 / 8 * (1 - 2 / 3), abs=1e-15)
    # L_leak = E[s·1(H_vis=0)]: samples 3 and 5 are right without visible evidence, 2/8.
    assert p["L_leak"] == 2 / 8 == 0.25
    assert p["L_leak"] == pytest.approx((1 - 3 / 8) * (2 / 5), abs=1e-15)
    assert p["K_eff"] == (3 + 3 + 2 + 1 + 0 + 2 + 1 + 0) / 8 == 1.5
    assert p["evidence_tokens"] == (120 + 120 + 100 + 128 + 128 + 60 + 40 + 40) / 8 == 92.0
    assert p["truncated"] == 2 / 8 == 0.25
    # The identity: 2/3 · 3/8 + 2/5 · 5/8 = 2/8 + 2/8 = 1/2 = S_llm.
    assert p["Acc_hit"] * p["S_vis"] + p["Acc_miss"] * (1 - p["S_vis"]) == pytest.approx(
        p["S_llm"], abs=1e-12
    )
    assert list(p) == list(TERMS)


def test_partially_scored_cell_uses_the_scored_samples_for_every_term() -> None:
    # Samples 6 and 7 are not scored yet: every term (retrieval ones too) is over 0-5.
    cell = make_cell(
        h_set=[1, 1, 1, 1, 1, 0, 0, 0],
        h_vis=[1, 1, 1, 0, 0, 0, 0, 0],
        score=[1, 1, 0, 1, 0, 1, NAN, NAN],
        truncated=[0, 0, 0, 1, 1, 0, 0, 0],
    )
    p = ledger_point(cell)
    assert p["n"] == 6
    assert p["S_set"] == 5 / 6  # not 5/8: one population for every term
    assert p["S_vis"] == 3 / 6
    assert p["S_llm"] == 4 / 6
    assert p["Acc_hit"] == 2 / 3
    assert p["Acc_miss"] == 2 / 3  # {3,4,5}: 1, 0, 1
    assert p["truncated"] == 2 / 6
    assert p["Acc_hit"] * p["S_vis"] + p["Acc_miss"] * (1 - p["S_vis"]) == pytest.approx(
        p["S_llm"], abs=1e-12
    )


# --------------------------------------------------------------------------- undefined terms


def test_unscored_cell_has_retrieval_terms_over_all_samples_and_no_reasoning_terms() -> None:
    cell = make_cell(h_set=[1, 1, 0, 0], h_vis=[1, 0, 0, 0], score=[NAN] * 4)
    p = ledger_point(cell)
    assert p["n"] == 4
    assert (p["S_set"], p["S_vis"], p["L_iface"]) == (0.5, 0.25, 0.25)
    for term in REASONING_TERMS:
        assert p[term] is None, term


def test_all_visible_leaves_acc_miss_undefined_not_zero() -> None:
    cell = make_cell(h_set=[1, 1, 1, 1], h_vis=[1, 1, 1, 1], score=[1, 0, 1, 1])
    p = ledger_point(cell)
    assert p["Acc_miss"] is None  # E[s | H_vis=0] over an empty set
    assert p["Acc_hit"] == 0.75
    assert p["L_leak"] == 0.0  # E[s·1(H_vis=0)] = 0: (1−S_vis)·Acc_miss = 0·undefined
    # Identity with the undefined term weighted 0: 0.75·1 + (0)·(1−1) = 0.75.
    assert p["S_llm"] == p["Acc_hit"] * p["S_vis"] == 0.75


def test_nothing_visible_leaves_acc_hit_and_d_rate_undefined_and_d_mass_zero() -> None:
    cell = make_cell(h_set=[1, 0, 0, 0], h_vis=[0, 0, 0, 0], score=[0, 1, 0, 0])
    p = ledger_point(cell)
    assert p["Acc_hit"] is None and p["D_rate"] is None
    assert p["D_mass"] == 0.0  # S_vis·(1−Acc_hit) = 0·undefined → E[(1−s)·1(H_vis=1)] = 0
    assert p["Acc_miss"] == 0.25 and p["L_leak"] == 0.25 and p["S_llm"] == 0.25


def test_empty_cell_is_all_undefined() -> None:
    p = ledger_point(make_cell([], [], []))
    assert p["n"] == 0
    assert all(p[t] is None for t in TERMS if t != "n")
    est = compute_ledger({"c": make_cell([], [], [])}, resamples=50)["c"]
    assert est["S_set"] == Estimate(None, None, None)


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="length"):
        make_cell([1, 0], [1], [1, 0])
    with pytest.raises(ValueError, match="h_vis"):
        make_cell([1, 0], [2, 0], [1, 0])
    with pytest.raises(ValueError, match="score"):
        make_cell([1, 0], [1, 0], [1.5, 0])
    with pytest.raises(ValueError, match="aligned"):
        compute_ledger({"a": make_cell([1], [1], [1]), "b": make_cell([1, 0], [1, 0], [1, 0])})


# --------------------------------------------------------------------------- one owner


def test_terms_from_sums_is_vectorized_and_matches_the_point_estimate() -> None:
    rng = np.random.default_rng(3)
    cells = [random_cell(rng, 50, nan_rate=0.2) for _ in range(4)]
    stacked = np.stack([cell_sums(c) for c in cells])  # (4, len(SUM_COLUMNS))
    assert stacked.shape == (4, len(SUM_COLUMNS))
    terms = terms_from_sums(stacked, scored=True)
    for i, cell in enumerate(cells):
        point = ledger_point(cell)
        for t in TERMS:
            assert terms[t][i] == pytest.approx(point[t], abs=1e-15)


# --------------------------------------------------------------------------- properties


@st.composite
def cells_strategy(draw, require_subset: bool = True):
    n = draw(st.integers(min_value=0, max_value=25))
    h_set = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    keep = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    h_vis = [a * b for a, b in zip(h_set, keep)] if require_subset else keep
    score = draw(
        st.lists(
            st.one_of(st.just(NAN), st.floats(0, 1), st.sampled_from([0.0, 1.0])),
            min_size=n,
            max_size=n,
        )
    )
    return make_cell(h_set, h_vis, score)


def identity_residual(p: dict) -> float:
    """S_llm − (Acc_hit·S_vis + Acc_miss·(1−S_vis)); an undefined conditional has weight 0."""
    hit = 0.0 if p["Acc_hit"] is None else p["Acc_hit"] * p["S_vis"]
    miss = 0.0 if p["Acc_miss"] is None else p["Acc_miss"] * (1 - p["S_vis"])
    return p["S_llm"] - (hit + miss)


@given(cells_strategy(require_subset=False))
def test_identity_holds_to_float_precision(cell: CellArrays) -> None:
    p = ledger_point(cell)
    if p["S_llm"] is None:  # nothing scored (or no sample at all)
        assert all(p[t] is None for t in REASONING_TERMS)
        return
    assert abs(identity_residual(p)) <= 1e-12
    # The conditional term is undefined exactly when its weight is 0.
    assert (p["Acc_hit"] is None) == (p["S_vis"] == 0)
    assert (p["Acc_miss"] is None) == (p["S_vis"] == 1)


@given(cells_strategy(require_subset=True))
def test_nonnegative_terms(cell: CellArrays) -> None:
    p = ledger_point(cell)
    if p["n"] == 0:
        return
    assert p["L_iface"] >= 0  # h_vis ≤ h_set elementwise
    if p["S_llm"] is not None:
        assert p["D_mass"] >= 0 and p["L_leak"] >= 0
        assert p["D_mass"] + p["L_leak"] <= 1 + 1e-12
        if p["Acc_hit"] is not None:  # the product forms agree with the expectation forms
            assert p["D_mass"] == pytest.approx(p["S_vis"] * p["D_rate"], abs=1e-12)
        if p["Acc_miss"] is not None:
            assert p["L_leak"] == pytest.approx((1 - p["S_vis"]) * p["Acc_miss"], abs=1e-12)


# --------------------------------------------------------------------------- bootstrap


def naive_terms(cell: CellArrays) -> dict[str, float]:
    """The definitions of docs/design.md §3 written out directly on (resampled) arrays; NaN = undefined."""
    scored = ~np.isnan(cell.score)
    if cell.scored:
        pop = scored
        if not pop.any():
            return {t: math.nan for t in TERMS}
    else:
        pop = np.ones(len(cell), dtype=bool)
    hs, hv, s = cell.h_set[pop], cell.h_vis[pop], cell.score[pop]
    mean = lambda x: float(np.mean(x)) if len(x) else math.nan  # noqa: E731
    out = {
        "n": float(pop.sum()),
        "S_set": mean(hs),
        "S_vis": mean(hv),
        "K_eff": mean(cell.k_eff[pop]),
        "evidence_tokens": mean(cell.evidence_tokens[pop]),
        "truncated": mean(cell.truncated[pop]),
    }
    out["L_iface"] = out["S_set"] - out["S_vis"]
    if cell.scored:
        out["S_llm"] = mean(s)
        out["Acc_hit"] = mean(s[hv == 1])
        out["Acc_miss"] = mean(s[hv == 0])
        out["D_rate"] = 1 - out["Acc_hit"]
        out["D_mass"] = mean((1 - s) * (hv == 1))
        out["L_leak"] = mean(s * (hv == 0))
    else:
        out.update({t: math.nan for t in REASONING_TERMS})
    return out


def resample(cell: CellArrays, counts: np.ndarray) -> CellArrays:
    idx = np.repeat(np.arange(len(cell)), counts.astype(int))
    return CellArrays(*(getattr(cell, f)[idx] for f in CellArrays.__dataclass_fields__))


def full_w(n: int, resamples: int, seed: int) -> np.ndarray:
    """The (resamples × n) Poisson weights of samples keyed 0..n-1."""
    return poisson_weights(np.arange(n), resamples, seed).T


@pytest.mark.parametrize("float32", [False, True])
def test_vectorized_bootstrap_equals_a_naive_loop_with_the_same_w(monkeypatch, float32) -> None:
    if float32:  # force the float32 matrix product used for large inputs
        monkeypatch.setattr(stats_mod, "_FLOAT64_MAX_WORK", 0)
    rng = np.random.default_rng(11)
    n, r = 40, 120
    cells = {
        "full": random_cell(rng, n),
        "partial": random_cell(rng, n, nan_rate=0.25),
        "unscored": random_cell(rng, n, nan_rate=1.0),
    }
    fast = compute_ledger(cells, resamples=r, seed=7)
    w = full_w(n, r, seed=7)
    for cid, cell in cells.items():
        naive = [naive_terms(resample(cell, w[i])) for i in range(r)]  # a loop over resamples
        for t in TERMS:
            values = np.array([d[t] for d in naive])
            est = fast[cid][t]
            if est.value is None:
                assert est.lo is None and est.hi is None
                continue
            lo, hi = np.nanpercentile(values, [2.5, 97.5])
            tol = 1e-5 * max(1.0, abs(hi)) if float32 else 1e-12 * max(1.0, abs(hi))
            assert est.lo == pytest.approx(lo, abs=tol), (cid, t)
            assert est.hi == pytest.approx(hi, abs=tol), (cid, t)


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(0)
    cells = {"a": random_cell(rng, 300), "b": random_cell(rng, 300, nan_rate=0.3)}
    first = compute_ledger(cells, resamples=500, seed=1)
    assert first == compute_ledger(cells, resamples=500, seed=1)
    assert first != compute_ledger(cells, resamples=500, seed=2)
    for cid in cells:
        for t in ("S_set", "S_vis", "S_llm", "Acc_hit", "Acc_miss", "D_mass", "L_leak"):
            e = first[cid][t]
            assert e.lo <= e.value <= e.hi, (cid, t, e)
            assert e.lo < e.hi


def test_intervals_shrink_with_n() -> None:
    rng = np.random.default_rng(2)

    def width(n: int) -> float:
        e = compute_ledger({"c": random_cell(rng, n)}, resamples=400, seed=0)["c"]["S_llm"]
        return e.hi - e.lo

    small, large = width(100), width(10_000)
    assert large < small / 4  # roughly 1/sqrt(100) = 1/10


def test_undefined_point_means_no_interval_and_no_resamples_means_no_interval() -> None:
    cell = make_cell([1, 1, 1], [1, 1, 1], [1, 0, 1])
    est = compute_ledger({"c": cell}, resamples=100)["c"]
    assert est["Acc_miss"] == Estimate(None, None, None)
    assert est["Acc_hit"].lo is not None
    bare = compute_ledger({"c": cell}, resamples=0)["c"]
    assert bare["Acc_hit"] == Estimate(2 / 3, None, None)


def test_rare_condition_ignores_undefined_resamples() -> None:
    # One sample with H_vis=0: many resamples miss it (Acc_miss undefined there → NaN,
    # ignored by the percentile) but the interval is still built from the others.
    cell = make_cell([1] * 10, [1] * 9 + [0], [1] * 9 + [0])
    e = compute_ledger({"c": cell}, resamples=300)["c"]["Acc_miss"]
    assert e == Estimate(0.0, 0.0, 0.0)


# --------------------------------------------------------------------------- paired differences


def test_paired_difference_of_a_cell_with_itself_is_exactly_zero() -> None:
    rng = np.random.default_rng(4)
    cell = random_cell(rng, 200, nan_rate=0.1)
    twin = CellArrays(*(getattr(cell, f).copy() for f in CellArrays.__dataclass_fields__))
    cells = {"a": cell, "b": twin}
    for t in ("S_llm", "Acc_hit", "D_mass", "evidence_tokens"):
        assert paired_difference(cells, "a", "a", t, resamples=300) == Estimate(0.0, 0.0, 0.0)
        assert paired_difference(cells, "a", "b", t, resamples=300) == Estimate(0.0, 0.0, 0.0)


def test_paired_difference_is_narrower_than_independent_intervals() -> None:
    # Cell b differs from a by 10 flipped scores. The pairing removes the sample-to-sample
    # variance the two cells share, so the difference is much sharper than either cell.
    rng = np.random.default_rng(5)
    a = random_cell(rng, 1000)
    score_b = a.score.copy()
    flip = rng.choice(1000, 10, replace=False)
    score_b[flip] = 1 - score_b[flip]
    b = CellArrays(a.h_set, a.h_vis, score_b, a.k_eff, a.evidence_tokens, a.truncated)
    cells = {"a": a, "b": b}
    ledger = compute_ledger(cells, resamples=400, seed=3)
    diff = paired_difference(cells, "a", "b", "S_llm", resamples=400, seed=3)
    assert diff.value == pytest.approx(ledger["a"]["S_llm"].value - ledger["b"]["S_llm"].value)
    assert diff.lo <= diff.value <= diff.hi
    width_a = ledger["a"]["S_llm"].hi - ledger["a"]["S_llm"].lo
    assert diff.hi - diff.lo < width_a / 3


def test_paired_difference_undefined_and_bad_term() -> None:
    cells = {"a": make_cell([1, 1], [1, 1], [1, 0]), "b": make_cell([1, 1], [1, 0], [1, 0])}
    assert paired_difference(cells, "a", "b", "Acc_miss", resamples=50).value is None
    with pytest.raises(ValueError, match="unknown term"):
        paired_difference(cells, "a", "b", "accuracy")
    with pytest.raises(KeyError):
        paired_difference(cells, "a", "zzz", "S_llm")


# --------------------------------------------------------------------------- oracle controls

#                 sample:    0    1    2    3    4    5
ORACLE_STRUCT = np.array([1.0, 1.0, 1.0, 0.0, 1.0, 0.0])
ORACLE_LINEAR = np.array(
    [
        [1.0, 1.0, 0.0, 0.0, 1.0, 0.0],  # shuffle 1
        [1.0, 0.0, 0.0, 0.0, 1.0, 1.0],  # shuffle 2
    ]
)  # per-sample mean over shuffles: 1, .5, 0, 0, 1, .5
REAL_LINEAR_K5 = make_cell(
    h_set=[1, 1, 0, 0, 1, 0],
    h_vis=[1, 1, 0, 0, 1, 0],  # the evidence is visible for the *easy* samples 0, 1, 4
    score=[1, 0, 0, 0, 1, 1],  # sample 5 is right by leakage
)


def test_oracle_terms_by_hand_paired_and_unpaired_noise_differ() -> None:
    res = oracle_terms(ORACLE_STRUCT, ORACLE_LINEAR, {"K=5": REAL_LINEAR_K5}, resamples=300)
    assert res["n"].value == 6
    assert res["Acc_struct"].value == 4 / 6  # samples 0, 1, 2, 4
    # Mean of per-shuffle means (3/6 + 3/6)/2 = per-sample mean (1+.5+0+0+1+.5)/6 = 1/2.
    assert res["Acc_linear"].value == 0.5
    assert res["L_struct"].value == pytest.approx(4 / 6 - 1 / 2, abs=1e-15)  # 1/6
    # Paired L_noise, over the H_vis=1 samples {0, 1, 4}, oracle-linear vs real score:
    # ((1 − 1) + (0.5 − 0) + (1 − 1)) / 3 = 1/6: noise costs the model sample 1.
    assert res["L_noise"]["K=5"].value == pytest.approx(1 / 6, abs=1e-15)
    assert res["n_noise"]["K=5"].value == 3
    # Unpaired: Acc_linear over all six samples minus Acc_hit over {0, 1, 4}:
    # 1/2 − 2/3 = −1/6. Negative "noise loss"! The H_vis=1 samples are the easy ones
    # (the oracle gets 5/6 of them but only 1/3 of the rest), so the unpaired form
    # mixes the noise loss with a difference in difficulty between two populations.
    assert res["L_noise_unpaired"]["K=5"].value == pytest.approx(0.5 - 2 / 3, abs=1e-15)
    for est in (res["Acc_struct"], res["L_struct"], res["L_noise"]["K=5"]):
        assert est.lo <= est.value <= est.hi


def test_oracle_partial_scores_use_one_population() -> None:
    linear = ORACLE_LINEAR.copy()
    linear[1, 5] = np.nan  # sample 5's second shuffle is not scored: sample 5 not complete
    struct = ORACLE_STRUCT.copy()
    struct[0] = np.nan  # sample 0 not scored under struct
    res = oracle_terms(struct, linear, resamples=0)
    # Population {1, 2, 3, 4}: struct 1, 1, 0, 1; linear .5, 0, 0, 1.
    assert res["n"].value == 4
    assert res["Acc_struct"].value == 3 / 4
    assert res["Acc_linear"].value == 1.5 / 4
    assert res["L_struct"].value == 3 / 4 - 1.5 / 4
    assert res["L_struct"].lo is None  # resamples=0


def test_oracle_missing_format_and_empty_paired_set_are_undefined() -> None:
    struct = np.full(6, np.nan)  # struct runs not started
    res = oracle_terms(struct, ORACLE_LINEAR, {"K=1": make_cell([0] * 6, [0] * 6, [0] * 6)})
    assert res["Acc_struct"].value is None and res["L_struct"].value is None
    assert res["Acc_linear"].value == 0.5  # over the linear-scored samples
    assert res["L_noise"]["K=1"] == Estimate(None, None, None)  # no sample with H_vis=1
    assert res["n_noise"]["K=1"].value == 0
    assert res["L_noise_unpaired"]["K=1"].value is None  # Acc_hit undefined


def test_oracle_noise_with_itself_is_zero() -> None:
    # If the real linear run scored exactly like the oracle on every visible sample,
    # the paired L_noise is exactly 0 with a zero-width interval.
    lin = np.array([[1.0, 0.0, 1.0, 1.0, 0.0]])
    real = make_cell([1] * 5, [1, 1, 1, 0, 1], [1, 0, 1, 0, 0])
    res = oracle_terms(lin[0], lin, {"K": real}, resamples=200)
    assert res["L_noise"]["K"] == Estimate(0.0, 0.0, 0.0)
