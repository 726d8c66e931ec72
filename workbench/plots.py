"""The ledger's figures (docs/design.md §3) drawn with plotext, returned as strings (no Textual here).

Main: budget B fixed, sweep K: S_set, S_vis and S_llm on the left axis, D_rate on the
right. Oracle: sweep B: Acc_struct, Acc_linear and L_struct. Undefined points (None)
are left out of a line rather than drawn as 0.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Sequence

import plotext as plt

MAIN_LEFT = ("S_set", "S_vis", "S_llm")
# Without colour, braille lines look alike: give each series its own character instead.
PLAIN_MARKERS = {"S_set": "o", "S_vis": "x", "S_llm": "+", "D_rate": ".", "Acc_struct": "o", "Acc_linear": "x",
                 "L_struct": "+"}
# Fixed colours (plotext's own sequence, but per term): a series with no points must not shift the
# colours of the others, and the legend drawn below a small plot must match the lines.
COLORS = {"S_set": "blue+", "S_vis": "green+", "S_llm": "red+", "D_rate": "cyan+", "Acc_struct": "blue+",
          "Acc_linear": "green+", "L_struct": "red+"}
# Below this size plotext's legend (drawn inside the plot, top left) hides the curves: put it underneath.
LEGEND_INSIDE_MIN = (60, 16)
_colors = False
_legend: list[tuple[str, str]] | None = None    # (term, label) to draw below the plot, or None: plotext's
_size = (0, 0)                                  # the plotsize of the figure being built
# Rows of a figure that are not the plot's canvas: the title, the two frame lines, the x ticks and the x label.
FRAME_ROWS = 5


def _value(est: Any) -> float | None:
    if est is None:
        return None
    value = est.value if hasattr(est, "value") else est["value"] if isinstance(est, dict) else est
    return None if value is None else float(value)


def _line(xs: Sequence[int], ys: Sequence[float | None], term: str, *, label: str, **kwargs) -> bool:
    points = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if not points:
        return False
    marker = "braille" if _colors else PLAIN_MARKERS.get(term, "*")
    if term in COLORS:
        kwargs["color"] = COLORS[term]
    if _legend is None:
        kwargs["label"] = label
    else:
        _legend.append((term, label))
    plt.plot([p[0] for p in points], [p[1] for p in points], marker=marker, **kwargs)
    return True


def _begin(width: int, height: int, colors: bool) -> None:
    global _colors, _legend, _size
    _colors = colors
    inside = width >= LEGEND_INSIDE_MIN[0] and height >= LEGEND_INSIDE_MIN[1]
    _legend = None if inside else []
    plt.clf()
    # One line of the height goes to the legend underneath.
    _size = (width, height if inside else max(height - 1, 5))
    plt.plotsize(*_size)
    plt.theme("pro" if colors else "clear")


def _unit_axis() -> None:
    """The left axis from 0 to 1 with ticks that each fall on a row of the canvas, evenly spaced.

    plotext spreads its own ticks over whatever rows there are and drops one that does not fit (0.83,
    0.67, 0.33 with 0.50 gone, at 80×24). Quarters, fifths or halves are used, the most that stay at
    least two rows apart; the figure loses up to three rows when that makes them land on rows.
    """
    width, height = _size
    gaps = height - FRAME_ROWS - 1        # between the canvas's first and last rows
    fits = [(drop, n) for n in (4, 5, 2) for drop in range(4)
            if gaps - drop >= (2 * n if n > 2 else 2) and (gaps - drop) % n == 0]
    drop, n = min(fits, key=lambda f: (f[1] == 2, f[0])) if fits else (0, 1)
    if drop:
        plt.plotsize(width, height - drop)
    ticks = [i / n for i in range(n + 1)]
    plt.ylim(0, 1)
    plt.yticks(ticks, [f"{t:.2f}" for t in ticks])


def _finish(colors: bool) -> str:
    text = plt.build()
    if _legend:
        text = text.rstrip("\n") + "\n" + _legend_line(plt.uncolorize(text).find("\n"))
    return text if colors else plt.uncolorize(text)


def _legend_line(width: int) -> str:
    """``⣿ S_set  ⣿ S_vis …`` in the lines' colours (``o S_set  x S_vis …`` without colour), in ``width``."""
    items = [("⣿" if _colors else PLAIN_MARKERS.get(term, "*"), term, label) for term, label in _legend or []]
    sep = "  "
    if len(" " + sep.join(f"{m} {label}" for m, _, label in items)) > width > 0:
        sep, items = " ", [(m, t, label.replace(" (right)", "(r)")) for m, t, label in items]
    parts = [f"{plt.colorize(m, COLORS[t]) if _colors and t in COLORS else m} {label}" for m, t, label in items]
    return " " + sep.join(parts)


def main_plot(rows: Sequence[dict[str, Any]], *, budget: int, fmt: str, width: int = 78, height: int = 20,
              colors: bool = False, title: str | None = None) -> str:
    """Sweep K at fixed ``budget`` and ``fmt``; rows are ledger rows (cell dicts)."""
    picked = sorted((r for r in rows if r["budget"] == budget and r["format"] == fmt), key=lambda r: r["k"])
    if not picked:
        raise ValueError(f"no cells with budget {budget} and format {fmt!r} in this ledger")
    ks = [r["k"] for r in picked]
    xs = list(range(1, len(ks) + 1))  # evenly spaced K positions: K grids are usually geometric
    _begin(width, height, colors)
    for term in MAIN_LEFT:
        _line(xs, [_value(r[term]) for r in picked], term, label=term)
    if not _line(xs, [_value(r["D_rate"]) for r in picked], "D_rate", label="D_rate (right)",
                 yside="right"):
        plt.text("S_llm, D_rate: no scores yet", x=xs[0], y=0.05)
    plt.xticks(xs, [str(k) for k in ks])
    _unit_axis()
    plt.xlabel("K (top-K retrieved)")
    # plotext drops a title wider than the plot: a narrow plot gets the short one.
    plt.title(title or (f"Dissipation ledger: B={budget} tokens, format={fmt}" if width >= 60
                        else f"B={budget}, {fmt}"))
    return _finish(colors)


def oracle_plot(oracle_rows: Sequence[dict[str, Any]], *, width: int = 78, height: int = 20, colors: bool = False,
                title: str | None = None) -> str:
    """Sweep B over the oracle controls: Acc_struct, Acc_linear, L_struct."""
    picked = sorted(oracle_rows, key=lambda r: r["budget"])
    if not picked:
        raise ValueError("this run has no oracle cells (plan it with --oracle)")
    budgets = [r["budget"] for r in picked]
    xs = list(range(1, len(budgets) + 1))
    _begin(width, height, colors)
    drawn = [_line(xs, [_value(r.get(term)) for r in picked], term, label=term)
             for term in ("Acc_struct", "Acc_linear", "L_struct")]
    if not any(drawn):
        plt.text("no oracle scores yet", x=xs[0], y=0.5)
    plt.xticks(xs, [str(b) for b in budgets])
    plt.xlabel("B (evidence token budget)")
    plt.title(title or ("Oracle controls: only p*, struct vs shuffled" if width >= 60 else "Oracle: only p*"))
    return _finish(colors)


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
    """Metric curves over k (e.g. doc-level Recall@k and MRR@k)."""
    xs = list(range(1, len(ks) + 1))
    _begin(width, height, colors)
    markers = iter("ox+*.#")
    colors_ = iter(("blue+", "green+", "red+", "cyan+", "magenta+", "yellow"))
    for label, ys in series.items():
        PLAIN_MARKERS.setdefault(label, next(markers))
        COLORS.setdefault(label, next(colors_))
        _line(xs, list(ys), label, label=label)
    plt.xticks(xs, [str(k) for k in ks])
    _unit_axis()
    plt.xlabel("k")
    plt.title(title)
    return _finish(colors)
