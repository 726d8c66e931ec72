"""The ledger's plots read as the terminal shows them: ticks on rows and even, a curve under another named,
a sweep of one point said to be one.

Read from the plain figure (``colors=False``), as a user reads it: the tick labels at the frame's edges.
"""

from __future__ import annotations

import re

import pytest

from workbench import plots

SIZES = [(60, h) for h in range(12, 31)] + [(150, 30), (76, 20)]


def main_rows(values: dict[str, list[float]], ks=(1, 2, 5, 10, 20)) -> list[dict]:
    return [{"k": k, "budget": 128, "format": "linear", **{term: vs[i] for term, vs in values.items()}}
            for i, k in enumerate(ks)]


RATES = {"S_set": [0.55, 0.7, 0.85, 0.9, 0.95], "S_vis": [0.5, 0.6, 0.7, 0.7, 0.6], "S_llm": [0.3, 0.35, 0.4, 0.4, 0.3],
         "D_rate": [0.4, 0.42, 0.43, 0.45, 0.5]}


def ticks(figure: str, side: str) -> list[tuple[int, float]]:
    """(row, value) of each tick label on the ``side`` of the frame."""
    pattern = r"^\s*(-?\d+\.\d+)┤" if side == "left" else r"├(-?\d+\.\d+)\s*$"
    return [(row, float(m.group(1))) for row, line in enumerate(figure.splitlines())
            if (m := re.search(pattern, line))]


def even(values: list[float]) -> bool:
    steps = {round(b - a, 6) for a, b in zip(values, values[1:])}
    return len(steps) == 1


@pytest.mark.parametrize("width, height", SIZES)
def test_both_axes_tick_on_the_same_rows_evenly_in_rows_and_in_value(width, height):
    figure = plots.main_plot(main_rows(RATES), budget=128, fmt="linear", width=width, height=height)
    left, right = ticks(figure, "left"), ticks(figure, "right")
    assert len(left) >= 3, figure
    assert even([row for row, _ in left]) and even([v for _, v in left]), figure
    # D_rate's axis: its ticks on the left ones' rows, read evenly, and holding D_rate (0.4 to 0.5).
    assert [row for row, _ in right] == [row for row, _ in left], figure
    assert even([v for _, v in right]) and right[0][1] >= 0.5 and right[-1][1] == 0.0, figure


@pytest.mark.parametrize("width, height", [(60, h) for h in range(12, 31, 3)] + [(150, 30)])
def test_the_oracle_axis_ticks_evenly_through_every_step_below_and_above_zero(width, height):
    oracle = [{"budget": b, "Acc_struct": s, "Acc_linear": lin, "L_struct": s - lin}
              for b, s, lin in ((32, 0.2, 0.35), (64, 0.25, 0.3), (128, 0.3, 0.2))]
    figure = plots.oracle_plot(oracle, width=width, height=height)
    left = ticks(figure, "left")
    values = [v for _, v in left]
    assert even([row for row, _ in left]) and even(values), figure
    assert max(values) >= 0.35 and min(values) <= -0.15 and 0.0 in values, figure


def test_a_curve_drawn_over_another_is_named_in_the_legend():
    same = {**RATES, "S_vis": RATES["S_set"]}      # every cell retrieved is visible: S_vis draws over S_set
    small = plots.main_plot(main_rows(same), budget=128, fmt="linear", width=60, height=14)
    assert "x S_vis (over S_set)" in small and "o S_set" not in small, small
    wide = plots.main_plot(main_rows(same), budget=128, fmt="linear", width=100, height=24)
    assert "S_vis (over S_set)" in wide, wide
    recall = plots.retrieval_plot([1, 3, 5], {"Recall@k": [1.0, 1.0, 1.0], "MRR@k": [1.0, 1.0, 1.0]}, width=60,
                                  height=12)
    assert "MRR@k (over Recall@k)" in recall, recall


def test_one_k_says_it_draws_dots_not_curves():
    one = {term: values[:1] for term, values in RATES.items()}
    figure = plots.main_plot(main_rows(one, ks=(5,)), budget=128, fmt="linear", width=100, height=20)
    assert "one K (5): dots, no curves" in figure, figure
    assert "one K" not in plots.main_plot(main_rows(RATES), budget=128, fmt="linear", width=100, height=20)
