"""The ledger's figures (docs/design.md §3) drawn with plotext, returned as strings (no Textual here).

Main: budget B fixed, sweep K: S_set, S_vis and S_llm on the left axis, D_rate on the
right. Oracle: sweep B: Acc_struct, Acc_linear and L_struct. Undefined points (None)
are left out of a line rather than drawn as 0. Every figure names each series in a legend
of its own lines under the x label, outside the frame: never over a curve.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import plotext as plt

MAIN_LEFT = ("S_set", "S_vis", "S_llm")
# Without colour, braille lines look alike: give each series its own character instead.
PLAIN_MARKERS = {"S_set": "o", "S_vis": "x", "S_llm": "+", "D_rate": ".", "Acc_struct": "o", "Acc_linear": "x",
                 "L_struct": "+"}
# Fixed colours (plotext's own sequence, but per term): a series with no points must not shift the
# colours of the others, and the legend drawn below a small plot must match the lines.
COLORS = {"S_set": "blue+", "S_vis": "green+", "S_llm": "red+", "D_rate": "cyan+", "Acc_struct": "blue+",
          "Acc_linear": "green+", "L_struct": "red+"}
# A run of several models: each model's S_llm curve in its own colour and character, in the run's model order.
MODEL_COLORS = ("red+", "magenta+", "yellow+", "cyan+", "white", "red", "magenta", "yellow")
MODEL_MARKERS = ("+", "*", "#", "@", "%", "&", "$", "=")
# Retrieval's curves, in the order given (Recall@k, MRR@k …).
RETRIEVAL_MARKERS = tuple("ox+*.#")
RETRIEVAL_COLORS = ("blue+", "green+", "red+", "cyan+", "magenta+", "yellow")
# The legend: lines of its own under the x label, never inside the plot. plotext draws its legend over the
# canvas's top-left corner (_build.py: at row_end - 1 - s, col_start), with no option to move it, and that hid
# the curves at small K: no label is ever given to plotext.
LEGEND_GAP = "  "           # between two entries; one space when that saves a line
# The legend takes more lines only while the canvas keeps at least this many rows.
MIN_CANVAS_ROWS = 4
_colors = False
_legend: list[tuple[str, str | None, str]] = []  # (character, colour, label) of each named series
_missing: list[str] = []                         # the series with no point to draw
_size = (0, 0)                                   # the plotsize of the figure being built
# Rows of a figure that are not the plot's canvas: the title, the two frame lines, the x ticks and the x label.
FRAME_ROWS = 5


def _value(est: Any) -> float | None:
    if est is None:
        return None
    value = est.value if hasattr(est, "value") else est["value"] if isinstance(est, dict) else est
    return None if value is None else float(value)


def _line(xs: Sequence[int], ys: Sequence[float | None], term: str, *, label: str | None, **kwargs) -> bool:
    """Draw one series; False when it has no point (the legend then says so, naming it)."""
    points = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if not points:
        if label is not None:
            _missing.append(label.replace(" (right)", ""))
        return False
    plain = kwargs.pop("marker", PLAIN_MARKERS.get(term, "*"))
    marker = "braille" if _colors else plain
    kwargs.setdefault("color", COLORS.get(term))
    if kwargs["color"] is None:
        del kwargs["color"]
    if label is not None:
        _legend.append((plain, kwargs.get("color"), label))
    plt.plot([p[0] for p in points], [p[1] for p in points], marker=marker, **kwargs)
    return True


def _begin(width: int, height: int, colors: bool, legend_rows: int) -> None:
    global _colors, _legend, _missing, _size
    _colors = colors
    _legend, _missing = [], []
    plt.clf()
    # The size asked for, not the size of the terminal the process runs in (plotext caps to it by default: the
    # figure came out shorter than the panel, and the ticks placed for the asked size fell between rows).
    plt.limit_size(False, False)
    _size = (width, max(height - legend_rows, FRAME_ROWS + 1))
    plt.plotsize(*_size)
    plt.theme("pro" if colors else "clear")


def _figure(width: int, height: int, colors: bool, draw: Callable[[], None]) -> str:
    """The figure ``draw`` builds, ``height`` rows in all: its legend's lines under the x label.

    The legend's rows come out of the plot's, so the figure is drawn again when its legend takes more
    lines than were kept for it (a narrow figure, long labels, several models): ``draw`` only records
    the series, plotext builds the picture once, at the end.
    """
    most = max(1, height - FRAME_ROWS - MIN_CANVAS_ROWS)
    rows = 1
    while True:
        _begin(width, height, colors, rows)
        draw()
        if _missing:        # named with the others, not written over the plot
            _legend.append(("", None, f"{', '.join(_missing)}: no scores yet"))
        lines = _legend_lines(width)
        if len(lines) <= rows or rows == most:
            break
        rows = min(len(lines), most)
    if len(lines) > rows:   # no room for every line (a figure a few rows tall): the last one says so
        lines = lines[:rows - 1] + [plt.uncolorize(lines[rows - 1])[:width - 1] + "…"]
    text = plt.build().rstrip("\n")
    if lines:
        text += "\n" + "\n".join(lines)
    return text if colors else plt.uncolorize(text)


def _legend_lines(width: int) -> list[str]:
    """``⣿ S_set  ⣿ S_vis …`` in the lines' colours (``o S_set  x S_vis …`` without colour), in lines of at most
    ``width`` columns: every series named, in full unless the compact labels take fewer lines."""
    marks = [("⣿" if _colors and plain else plain, color) for plain, color, _ in _legend]
    room = width - 3                    # the leading space, the character and the space after it
    fit = lambda label: label if len(label) <= room else label[:max(room - 1, 0)] + "…"  # noqa: E731
    ways = [(LEGEND_GAP, [fit(label) for _, _, label in _legend]),
            (" ", [fit(_compact(label)) for _, _, label in _legend])]
    packed = [(gap, labels, _pack([len(m) + 1 + len(label) if m else len(label) for (m, _), label in zip(marks, labels)],
                                  len(gap), width))
              for gap, labels in ways]
    gap, labels, lines = min(packed, key=lambda way: len(way[2]))     # the first, full labels, on a tie
    paint = lambda m, c: plt.colorize(m, c) if _colors and c else m  # noqa: E731
    entry = lambda i: f"{paint(*marks[i])} {labels[i]}" if marks[i][0] else labels[i]  # noqa: E731
    return [" " + gap.join(entry(i) for i in line) for line in lines]


def _pack(sizes: list[int], gap: int, width: int) -> list[list[int]]:
    """The entries of these ``sizes`` (indices) in lines of at most ``width`` columns with one leading space,
    as many to a line as fit, in order."""
    lines: list[list[int]] = []
    used = 0
    for i, size in enumerate(sizes):
        if lines and used + gap + size <= width:
            lines[-1].append(i)
            used += gap + size
        else:
            lines.append([i])
            used = 1 + size
    return lines


# Tick steps an axis may use: each tick then reads as a short, even number (0.00, 0.25, 0.50 …).
STEPS = (0.05, 0.1, 0.2, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class Axis:
    """A y axis whose ``n`` intervals of ``step`` from ``lo`` each span the same number of canvas rows."""

    lo: float
    step: float
    n: int

    @property
    def hi(self) -> float:
        return self.lo + self.n * self.step

    def ticks(self) -> tuple[list[float], list[str]]:
        values = [round(self.lo + i * self.step, 6) for i in range(self.n + 1)]
        digits = 3 if any(round(v * 100) != v * 100 for v in values) else 2
        return values, [f"{v:.{digits}f}" for v in values]


def _axis_for(values: Sequence[float], n: int) -> Axis:
    """The narrowest axis of ``n`` even steps from 0 (or below, for negative values) that holds ``values``."""
    lo, hi = min([0.0, *values]), max([0.0, *values])
    for step in STEPS:
        start = math.floor(lo / step + 1e-9) * step
        if start + n * step >= hi - 1e-9:
            return Axis(start, step, n)
    return Axis(math.floor(lo), max(1.0, math.ceil((hi - math.floor(lo)) / n)), n)


def _row_axis(values: Sequence[float], unit: bool = True) -> Axis:
    """The left axis, its ticks each on a row of the canvas and evenly spaced.

    plotext spreads its own ticks over whatever rows there are and drops one that does not fit (0.83,
    0.67, 0.33 with 0.50 gone, at 80×24). Four, five or two intervals are used, the most that stay at
    least two rows apart; the figure loses up to three rows when that makes them land on rows. ``unit``:
    0 to 1 (rates); else the narrowest even axis that holds ``values`` (a difference may be negative).
    """
    width, height = _size
    gaps = height - FRAME_ROWS - 1        # between the canvas's first and last rows
    fits = [(drop, n) for n in (4, 5, 2) for drop in range(4)
            if gaps - drop >= (2 * n if n > 2 else 2) and (gaps - drop) % n == 0]
    drop, n = min(fits, key=lambda f: (f[1] == 2, f[0])) if fits else (0, 1)
    if drop:
        plt.plotsize(width, height - drop)
    axis = Axis(0.0, 1.0 / n, n) if unit else _axis_for(values, n)
    _set_axis(axis, "left")
    return axis


def _set_axis(axis: Axis, side: str) -> None:
    plt.ylim(axis.lo, axis.hi, yside=side)
    plt.yticks(*axis.ticks(), yside=side)


def _hidden(series: dict[str, list[float | None]], axis: Axis) -> dict[str, str]:
    """Each series drawn over by a later one on every row it has (term → the series over it), for the legend to
    name: a curve under another is otherwise not on the figure at all."""
    rows = max(1, (_size[1] - FRAME_ROWS - 1)) * 4      # braille: four dots a row
    same = lambda a, b: abs(a - b) <= (axis.hi - axis.lo) / rows  # noqa: E731
    names = list(series)
    out = {}
    for i, term in enumerate(names):
        for later in names[i + 1:]:
            pairs = [(a, b) for a, b in zip(series[term], series[later]) if a is not None and b is not None]
            if pairs and len(pairs) == sum(v is not None for v in series[term]) and all(same(a, b) for a, b in pairs):
                out[term] = later
    return out


def _label(term: str, hidden: dict[str, str]) -> str | None:
    """The legend's label of ``term``: none for a curve hidden under another, which names it instead (and the
    curves hidden under it: S_set under S_vis under S_llm reads "S_llm (over S_set, S_vis)")."""
    if term in hidden:
        return None
    under = [t for t in hidden if _on_top(t, hidden) == term]
    return f"{term} (over {', '.join(under)})" if under else term


def _on_top(term: str, hidden: dict[str, str]) -> str:
    """The series drawn over ``term`` that nothing hides (``term`` itself when nothing hides it)."""
    while term in hidden:
        term = hidden[term]
    return term


def _compact(label: str) -> str:
    """A legend label in fewer columns: ``D_rate(r)``, ``Acc_linear=Acc_struct`` (drawn over it: equal)."""
    label = label.replace(" (right)", "(r)")
    if " (over " in label:
        term, under = label[:-1].split(" (over ")
        label = "=".join([term, *under.split(", ")])
    return label


def main_plot(rows: Sequence[dict[str, Any]], *, budget: int, fmt: str, width: int = 78, height: int = 20,
              colors: bool = False, title: str | None = None) -> str:
    """Sweep K at fixed ``budget`` and ``fmt``; rows are ledger rows (cell dicts).

    D_rate is on the right axis, with as many intervals as the left one: its ticks sit on the same rows.
    Rows of a run of several models (each names its ``model``) give one S_llm curve per model, named in
    the legend, over the S_set and S_vis every model shares; D_rate is then left to the ledger.
    """
    picked = sorted((r for r in rows if r["budget"] == budget and r["format"] == fmt), key=lambda r: r["k"])
    if not picked:
        raise ValueError(f"no cells with budget {budget} and format {fmt!r} in this ledger")
    models = list(dict.fromkeys(r["model"] for r in picked if "model" in r))
    if models:
        return _models_plot(picked, models, budget=budget, fmt=fmt, width=width, height=height, colors=colors,
                            title=title)
    ks = [r["k"] for r in picked]
    xs = list(range(1, len(ks) + 1))  # evenly spaced K positions: K grids are usually geometric
    series = {term: [_value(r[term]) for r in picked] for term in MAIN_LEFT}
    d_rate = [_value(r["D_rate"]) for r in picked]

    def draw() -> None:
        left = _row_axis([])
        hidden = _hidden(series, left)
        for term, ys in series.items():
            _line(xs, ys, term, label=_label(term, hidden))
        if _line(xs, d_rate, "D_rate", label="D_rate (right)", yside="right"):
            _set_axis(_axis_for([v for v in d_rate if v is not None], left.n), "right")
        plt.xticks(xs, [str(k) for k in ks])
        plt.xlabel("K (top-K retrieved)")
        # plotext drops a title wider than the plot: a narrow plot gets the short one.
        long = f"Dissipation ledger: B={budget} tokens, format={fmt}"
        plt.title(title or _one_point(long if width >= 60 else f"B={budget}, {fmt}", "K", ks, width))

    return _figure(width, height, colors, draw)


def _models_plot(picked: Sequence[dict[str, Any]], models: list[str], *, budget: int, fmt: str, width: int,
                 height: int, colors: bool, title: str | None) -> str:
    """The K sweep of a run of several models: S_set and S_vis once, then each model's S_llm."""
    by_model = {m: [r for r in picked if r["model"] == m] for m in models}
    first = by_model[models[0]]
    ks = [r["k"] for r in first]
    xs = list(range(1, len(ks) + 1))
    series = {term: [_value(r[term]) for r in first] for term in ("S_set", "S_vis")}
    for m in models:
        series[f"S_llm {m}"] = [_value(r["S_llm"]) for r in sorted(by_model[m], key=lambda r: r["k"])]

    def draw() -> None:
        hidden = _hidden(series, _row_axis([]))
        for i, (name, ys) in enumerate(series.items()):
            term, model_at = name.split(" ", 1)[0], i - 2
            style = {} if model_at < 0 else {"color": MODEL_COLORS[model_at % len(MODEL_COLORS)],
                                             "marker": MODEL_MARKERS[model_at % len(MODEL_MARKERS)]}
            _line(xs, ys, term, label=_label(name, hidden), **style)
        plt.xticks(xs, [str(k) for k in ks])
        plt.xlabel("K (top-K retrieved)")
        long = f"Dissipation ledger: B={budget} tokens, format={fmt}, {len(models)} models"
        plt.title(title or _one_point(long if width >= 60 else f"B={budget}, {fmt}", "K", ks, width))

    return _figure(width, height, colors, draw)


def _one_point(title: str, name: str, xs: Sequence[int], width: int) -> str:
    """``title``, saying so when the sweep has one point only (a dot per term, no curve to read)."""
    if len(xs) != 1:
        return title
    note = f"{title} · one {name} ({xs[0]}): dots, no curves"
    return note if len(note) <= width - 4 else f"one {name} ({xs[0]}): dots, no curves"


def oracle_plot(oracle_rows: Sequence[dict[str, Any]], *, width: int = 78, height: int = 20, colors: bool = False,
                title: str | None = None) -> str:
    """Sweep B over the oracle controls: Acc_struct, Acc_linear, L_struct (a difference: it may be negative)."""
    picked = sorted(oracle_rows, key=lambda r: r["budget"])
    if not picked:
        raise ValueError("this run has no oracle cells (plan it with --oracle)")
    budgets = [r["budget"] for r in picked]
    xs = list(range(1, len(budgets) + 1))
    series = {term: [_value(r.get(term)) for r in picked] for term in ("Acc_struct", "Acc_linear", "L_struct")}

    def draw() -> None:
        axis = _row_axis([v for ys in series.values() for v in ys if v is not None], unit=False)
        hidden = _hidden(series, axis)
        drawn = [_line(xs, ys, term, label=_label(term, hidden)) for term, ys in series.items()]
        if not any(drawn):
            # Nothing to draw: blank points keep the axes and their ticks (plotext draws none without data).
            plt.scatter(xs, [axis.lo] * len(xs), marker=" ")
        plt.xticks(xs, [str(b) for b in budgets])
        plt.xlabel("B (evidence token budget)")
        long = "Oracle controls: only p*, struct vs shuffled"
        plt.title(title or _one_point(long if width >= 60 else "Oracle: only p*", "B", budgets, width))

    return _figure(width, height, colors, draw)


#: Image files ``plot --out`` writes with matplotlib (:mod:`workbench.figures`) instead of text.
IMAGE_FORMATS = ("svg", "png")


def image_format(path: str | Path) -> str | None:
    """``svg`` or ``png`` when ``path`` names an image file, else None (a text or HTML plot)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in IMAGE_FORMATS else None


def file_text(figure: str, path: str | Path, title: str = "Dissipation Workbench") -> str:
    """A figure as the file ``path`` holds it: ``.html``/``.htm`` a standalone page, else plain text (no colours)."""
    text = plt.uncolorize(figure)
    if Path(path).suffix.lower() in (".html", ".htm"):
        text = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(title)
                + "</title></head>\n<body><pre style=\"font-family: monospace; line-height: 1.1\">\n"
                + html.escape(text) + "\n</pre></body></html>\n")
    return text


def retrieval_plot(ks: Sequence[int], series: dict[str, Sequence[float | None]], *, width: int = 78,
                   height: int = 16, colors: bool = False, title: str = "Retrieval at k") -> str:
    """Metric curves over k (e.g. doc-level Recall@k and MRR@k); a curve drawn over another is named in the legend."""
    xs = list(range(1, len(ks) + 1))
    values = {label: list(ys) for label, ys in series.items()}

    def draw() -> None:
        hidden = _hidden(values, _row_axis([]))
        for i, (label, ys) in enumerate(values.items()):
            style = {"marker": RETRIEVAL_MARKERS[i % len(RETRIEVAL_MARKERS)],
                     "color": RETRIEVAL_COLORS[i % len(RETRIEVAL_COLORS)]}
            _line(xs, ys, label, label=_label(label, hidden), **style)
        plt.xticks(xs, [str(k) for k in ks])
        plt.xlabel("k")
        plt.title(_one_point(title, "k", ks, width))

    return _figure(width, height, colors, draw)
