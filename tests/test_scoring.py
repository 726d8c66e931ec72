"""Answer scoring (docs/design.md §3 "Score s"): normalization, acc, cover, set-F1, macro-F1."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.metrics.scoring import (
    SCORERS,
    get_scorer,
    macro_f1,
    normalize_answer,
    parse_prediction,
    score_acc,
    score_cover,
    score_set_f1,
)

# --------------------------------------------------------------------------- normalization


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Kismet", "kismet"),
        ("  The   Kismet! ", "kismet"),  # article, punctuation, spaces
        ("A Night at the Opera", "night at opera"),  # articles only as whole words
        ("Theatre an Anthem", "theatre anthem"),  # "Theatre"/"Anthem" keep their letters
        ("U.S.A.", "usa"),  # punctuation is deleted, not turned into spaces
        ("Farewell, Home Sweet Home", "farewell home sweet home"),
        ("ＡＢＣ１２３", "abc123"),  # full-width → half-width by NFKC
        ("《红烧肉》。", "红烧肉"),  # Chinese brackets and full stop are punctuation (P*)
        ("「北京」，上海！", "北京上海"),
        ("北京\u3000 上海", "北京 上海"),  # ideographic space collapses like any space
        ("ｆｉ", "fi"),  # compatibility forms
        ("", ""),
        ("?!.", ""),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


@given(st.text())
def test_normalize_is_idempotent(s: str) -> None:
    once = normalize_answer(s)
    assert normalize_answer(once) == once


# --------------------------------------------------------------------------- parsing


def test_parse_prediction_json_list() -> None:
    assert parse_prediction('["Paris", "Rome", "Paris"]') == ["Paris", "Rome"]
    assert parse_prediction("[1999, 2001]") == ["1999", "2001"]


def test_parse_prediction_separators_but_not_commas() -> None:
    text = "Farewell, Home Sweet Home | Kismet; Pandora；北京、上海\n\n Kismet "
    assert parse_prediction(text) == [
        "Farewell, Home Sweet Home",
        "Kismet",
        "Pandora",
        "北京",
        "上海",
    ]


def test_parse_prediction_not_json_falls_back_to_splitting() -> None:
    assert parse_prediction("[unclosed | b") == ["[unclosed", "b"]
    assert parse_prediction('[{"a": 1}]') == ['[{"a": 1}]']  # not a list of strings
    assert parse_prediction("   ") == []


# --------------------------------------------------------------------------- acc


def test_acc_whole_prediction_or_any_item() -> None:
    assert score_acc("The Kismet.", ["Kismet"]) == 1.0
    assert score_acc("Pandora | Kismet", ["Kismet"]) == 1.0  # an item matches
    assert score_acc("Kismet was directed by him", ["Kismet"]) == 0.0  # acc is not cover
    assert score_acc("Farewell, Home Sweet Home", ["Farewell Home Sweet Home"]) == 1.0


def test_acc_with_aliases_and_chinese() -> None:
    aliases = {"New York City": ["NYC", "纽约"]}
    assert score_acc("nyc", ["New York City"], aliases) == 1.0
    assert score_acc("《纽约》。", ["New York City"], aliases) == 1.0
    assert score_acc("NYC", ["New York City"]) == 0.0  # no alias, no match
    assert score_acc("ＡＢＣ１２３", ["abc123"]) == 1.0


def test_empty_normalized_answers_never_count() -> None:
    assert score_acc("", ["the"]) == 0.0
    assert score_acc("?", ["!"]) == 0.0
    assert score_cover("anything", ["..."]) == 0.0
    assert score_acc("x", []) == 0.0


def test_answers_must_be_a_sequence_not_a_string() -> None:
    with pytest.raises(TypeError):
        score_acc("Kismet", "Kismet")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- cover


def test_cover_is_substring_of_normalized_output() -> None:
    verbose = "I think the answer is William Dieterle, who directed it."
    assert score_cover(verbose, ["William Dieterle"]) == 1.0
    assert score_acc(verbose, ["William Dieterle"]) == 0.0
    assert score_cover("答案是《红烧肉》。", ["红烧肉"]) == 1.0
    assert score_cover("The film is Kismet", ["Pandora"], {"Pandora": ["Kismet"]}) == 1.0
    assert score_cover("no idea", ["Kismet"]) == 0.0


# --------------------------------------------------------------------------- set F1


def test_set_f1_values() -> None:
    answers = ["Paris", "Rome", "Berlin"]
    assert score_set_f1("Paris | Rome | Berlin", answers) == 1.0
    # 2 of 2 predicted are right (P = 1), 2 of 3 answers found (R = 2/3): F1 = 0.8.
    assert score_set_f1("Paris; Rome", answers) == pytest.approx(0.8)
    # 1 right of 2 predicted (P = 1/2), 1 of 3 found (R = 1/3): F1 = 2·(1/6)/(5/6) = 0.4.
    assert score_set_f1('["Paris", "Madrid"]', answers) == pytest.approx(0.4)
    assert score_set_f1("Madrid", answers) == 0.0
    assert score_set_f1("", answers) == 0.0


def test_set_f1_alias_counts_as_its_answer() -> None:
    aliases = {"New York City": ["NYC"]}
    # "NYC" and "New York City" are one answer: predicted set {NYC-answer}, P = R = 1.
    assert score_set_f1("NYC | New York City", ["New York City"], aliases) == 1.0
    # Without the alias "NYC" is a wrong item: P = 1/2, R = 1, F1 = 2/3.
    assert score_set_f1("NYC | New York City", ["New York City"]) == pytest.approx(2 / 3)


def test_set_f1_commas_stay_inside_titles() -> None:
    assert score_set_f1("Farewell, Home Sweet Home", ["Farewell, Home Sweet Home"]) == 1.0


# --------------------------------------------------------------------------- macro F1


def test_macro_f1_hand_computed() -> None:
    golds = ["cat", "cat", "dog", "dog", "bird"]
    preds = ["cat", "dog", "dog", "dog", "cat"]
    # cat:  TP=1, FP=1 (bird→cat), FN=1 (cat→dog)  F1 = 2/(2+1+1) = 0.5
    # dog:  TP=2, FP=1 (cat→dog), FN=0             F1 = 4/(4+1)   = 0.8
    # bird: TP=0, FP=0, FN=1                       F1 = 0
    # macro = (0.5 + 0.8 + 0) / 3 = 0.4333...
    assert macro_f1(preds, golds) == pytest.approx((0.5 + 0.8 + 0.0) / 3)


def test_macro_f1_normalizes_and_counts_predicted_only_classes() -> None:
    # "The Cat." normalizes to "cat"; "fish" appears only among predictions: F1(fish) = 0.
    # cat: TP=1, FP=0, FN=1 → 2/3 ; fish: TP=0, FP=1, FN=0 → 0. Macro = 1/3.
    assert macro_f1(["The Cat.", "fish"], ["cat", "cat"]) == pytest.approx(1 / 3)
    assert macro_f1(["a", "b"], ["a", "b"]) == 1.0


def test_macro_f1_empty_and_misaligned() -> None:
    assert macro_f1([], []) is None
    with pytest.raises(ValueError):
        macro_f1(["a"], [])


# --------------------------------------------------------------------------- registry


def test_get_scorer() -> None:
    assert get_scorer("cover") is score_cover
    assert set(SCORERS) == {"acc", "cover", "set_f1"}
    with pytest.raises(ValueError, match="acc, cover, set_f1"):
        get_scorer("bleu")


@given(st.text(max_size=30), st.lists(st.text(max_size=10), min_size=1, max_size=4))
def test_scores_are_in_unit_interval_and_acc_implies_cover(pred: str, answers: list[str]) -> None:
    for scorer in SCORERS.values():
        assert 0.0 <= scorer(pred, answers) <= 1.0
    # An exact (normalized) match of the whole prediction is also a cover match.
    if normalize_answer(pred) in {normalize_answer(a) for a in answers} - {""}:
        assert score_acc(pred, answers) == 1.0
        assert score_cover(pred, answers) == 1.0
