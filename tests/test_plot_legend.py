"""Every plot the workbench draws names each series in a legend outside its frame: no label over a curve.

plotext draws its own legend inside the plot's top-left corner, where it hid the curves at small K
(`workbench plot demo --budget 128`: S_set, S_vis, S_llm, D_rate over K = 1 to 1.5). Generated over every
kind of plot (the K sweep, the same with a curve under another, a run of several models, the oracle's B
sweep with and without Acc_linear = Acc_struct, Retrieval's curves with and without a curve under another)
at 80 and 120 columns, heights from a small panel's to a tall terminal's, plain and in colour; over any
values (hypothesis), for the promise that every series with a point is named whatever is drawn on top; and
the same figures as image files (matplotlib), whose legend must lie outside the axes and name a series with
no score too (a note written over the axes could hide a curve).

Read from the figure as the terminal shows it (colours stripped): the frame is the box from ``┌`` to ``┘``.
"""

from __future__ import annotations

import plotext
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.backends.backend_agg import FigureCanvasAgg

from workbench import figures, plots

KS = (1, 2, 5, 10, 20)
MODELS = ("qwen2.5-0.5b-instruct-q4_k_m", "llama-3.2-1b-instruct-q4_k_m", "phi-3.5-mini-instruct-q4_k_m")
RATES = {"S_set": [0.55, 0.7, 0.85, 0.9, 0.95], "S_vis": [0.5, 0.6, 0.7, 0.7, 0.6], "S_llm": [0.3, 0.35, 0.4, 0.4, 0.3],
         "D_rate": [0.4, 0.42, 0.43, 0.45, 0.5]}


def main_rows(values: dict[str, list[float | None]], model: str | None = None) -> list[dict]:
    return [{"k": k, "budget": 128, "format": "linear", **({"model": model} if model else {}),
             **{term: vs[i] for term, vs in values.items()}} for i, k in enumerate(KS)]


def models_rows() -> list[dict]:
    return [row for i, m in enumerate(MODELS)
            for row in main_rows({**RATES, "S_llm": [v + 0.1 * i for v in RATES["S_llm"]]}, model=m)]


def oracle_rows(linear: list[float]) -> list[dict]:
    struct = [0.2, 0.25, 0.3]
    return [{"budget": b, "Acc_struct": s, "Acc_linear": lin, "L_struct": s - lin}
            for b, s, lin in zip((32, 64, 128), struct, linear)]


# Each kind of plot: (its figure at a width, height and colouring; the series it must name).
KINDS = {
    "K sweep": (lambda w, h, c: plots.main_plot(main_rows(RATES), budget=128, fmt="linear", width=w, height=h,
                                                colors=c), ("S_set", "S_vis", "S_llm", "D_rate")),
    "K sweep, S_vis over S_set": (
        lambda w, h, c: plots.main_plot(main_rows({**RATES, "S_vis": RATES["S_set"]}), budget=128, fmt="linear",
                                        width=w, height=h, colors=c), ("S_set", "S_vis", "S_llm", "D_rate")),
    "K sweep of several models": (
        lambda w, h, c: plots.main_plot(models_rows(), budget=128, fmt="linear", width=w, height=h, colors=c),
        ("S_set", "S_vis", *MODELS)),
    "oracle B sweep": (lambda w, h, c: plots.oracle_plot(oracle_rows([0.35, 0.3, 0.2]), width=w, height=h, colors=c),
                       ("Acc_struct", "Acc_linear", "L_struct")),
    "oracle B sweep, Acc_linear = Acc_struct": (
        lambda w, h, c: plots.oracle_plot(oracle_rows([0.2, 0.25, 0.3]), width=w, height=h, colors=c),
        ("Acc_struct", "Acc_linear", "L_struct")),
    "Retrieval's curves": (
        lambda w, h, c: plots.retrieval_plot([1, 3, 5, 10], {"Recall@k": [0.6, 0.8, 0.9, 0.95],
                                                             "MRR@k": [0.6, 0.7, 0.72, 0.73]},
                                             width=w, height=h, colors=c), ("Recall@k", "MRR@k")),
    "Retrieval's curves, MRR@k over Recall@k": (
        lambda w, h, c: plots.retrieval_plot([1, 3, 5, 10], {"Recall@k": [0.97] * 4, "MRR@k": [0.97] * 4},
                                             width=w, height=h, colors=c), ("Recall@k", "MRR@k")),
}
WIDTHS = (80, 120)
HEIGHTS = (12, 16, 20, 24, 30)


def frame(figure: str) -> tuple[list[str], list[str]]:
    """(the text inside the frame, row by row, borders excluded; the lines under it) of a plain figure."""
    lines = figure.splitlines()
    top = next(i for i, line in enumerate(lines) if "┌" in line)
    bottom = next(i for i, line in enumerate(lines) if "└" in line)
    left, right = lines[top].index("┌"), lines[top].index("┐")
    return [line[left + 1:right] for line in lines[top + 1:bottom]], lines[bottom + 1:]


def check_legend_outside(figure: str, names, width: int, height: int) -> None:
    inside, below = frame(figure)
    for name in names:
        assert not any(name in row for row in inside), f"{name!r} drawn inside the frame:\n{figure}"
        assert any(name in line for line in below), f"{name!r} not named under the frame:\n{figure}"
    lines = figure.splitlines()
    assert len(lines) <= height and max(len(line) for line in lines) <= width, f"{width}×{height} exceeded:\n{figure}"


@pytest.mark.parametrize("colors", [False, True], ids=["plain", "colour"])
@pytest.mark.parametrize("height", HEIGHTS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_series_is_named_under_the_frame_and_no_label_is_inside_it(kind, width, height, colors):
    draw, names = KINDS[kind]
    check_legend_outside(plotext.uncolorize(draw(width, height, colors)), names, width, height)


def test_a_curve_under_one_that_is_itself_under_another_is_still_named():
    """S_set under S_vis, S_vis under S_llm: neither shows, the top one names both."""
    values = {"S_set": [0.5, 0.6, 0.7, 0.8, 0.9], "S_vis": [0.5, 0.6, 0.7, 0.8, 0.9],
              "S_llm": [0.5, 0.6, 0.7, 0.8, 0.9], "D_rate": RATES["D_rate"]}
    figure = plots.main_plot(main_rows(values), budget=128, fmt="linear", width=80, height=20)
    assert "+ S_llm (over S_set, S_vis)" in frame(figure)[1][-1], figure


def test_the_legend_takes_more_lines_not_more_columns_when_it_needs_them():
    """Several models with long names at 80 columns: the legend wraps onto lines of its own, the plot gives them."""
    figure = plots.main_plot(models_rows(), budget=128, fmt="linear", width=80, height=20)
    inside, below = frame(figure)
    legend = below[2:]      # after the x ticks and the x label
    assert len(legend) >= 2 and len(figure.splitlines()) == 20, figure


rate = st.one_of(st.none(), st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.floats(0.0, 1.0))


@settings(max_examples=60, deadline=None)
@given(values=st.fixed_dictionaries({term: st.lists(rate, min_size=len(KS), max_size=len(KS)) for term in RATES}),
       width=st.sampled_from(WIDTHS), height=st.integers(10, 30))
def test_whatever_the_values_each_series_with_a_point_is_named_outside_the_frame(values, width, height):
    """Curves that coincide anywhere (equal rates are common: S_vis = S_set when every retrieved fact shows) are each
    still named, whichever is drawn on top."""
    figure = plots.main_plot(main_rows(values), budget=128, fmt="linear", width=width, height=height)
    named = [term for term, vs in values.items() if any(v is not None for v in vs)]
    check_legend_outside(figure, named, width, height)


# The same figures as image files (`plot --out FILE.svg|png`, the HTML report, the docs): matplotlib's legend is
# placed outside the axes; each series, one with no score included, is named in it.
FIGURES = {
    "K sweep": (lambda: figures.main_figure(main_rows(RATES), budget=128, fmt="linear"),
                ("S_set", "S_vis", "S_llm", "D_rate")),
    "K sweep, no score yet": (
        lambda: figures.main_figure(main_rows({**RATES, "S_llm": [None] * 5, "D_rate": [None] * 5}), budget=128,
                                    fmt="linear"), ("S_set", "S_vis", "S_llm: no scores yet", "D_rate: no scores yet")),
    "K sweep of several models": (lambda: figures.main_figure(models_rows(), budget=128, fmt="linear"),
                                  ("S_set", "S_vis", *MODELS)),
    "oracle B sweep, Acc_linear = Acc_struct": (lambda: figures.oracle_figure(oracle_rows([0.2, 0.25, 0.3])),
                                                ("Acc_struct", "Acc_linear", "L_struct")),
}


@pytest.mark.parametrize("kind", FIGURES)
def test_the_image_figures_name_every_series_in_a_legend_outside_the_axes(kind):
    draw, names = FIGURES[kind]
    fig = draw()
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    legend = fig.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    assert all(any(name in label for label in labels) for name in names), labels
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), f"the legend {box} over the axes {ax}"
