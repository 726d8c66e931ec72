"""The ledger's figures as image files (SVG or PNG), drawn with matplotlib — the plots of :mod:`workbench.plots`
for a report, a paper or a pull request rather than a terminal.

Main: budget B fixed, sweep K: S_set, S_vis and S_llm on the left axis (0–1), D_rate on the
right. Oracle: sweep B: Acc_struct, Acc_linear and L_struct. Each point carries its 95 %
interval as an error bar; undefined points (None) are left out of a line rather than drawn
as 0. The SVG is self-contained (text drawn as paths, no fonts or links to fetch) and
reproducible (fixed ids, no date), so a report embeds it inline and works offline.
"""

from __future__ import annotations

import io
import re
from typing import Any, Sequence

import matplotlib
from matplotlib.figure import Figure

from workbench.plots import IMAGE_FORMATS, MAIN_LEFT
# The terminal plots' colours, as matplotlib names.
COLORS = {"S_set": "tab:blue", "S_vis": "tab:green", "S_llm": "tab:red", "D_rate": "tab:cyan",
          "Acc_struct": "tab:blue", "Acc_linear": "tab:green", "L_struct": "tab:red"}
# Overlapping curves (Acc_struct = Acc_linear is common) stay visible: each term its own dash and a small sideways offset.
STYLES = {"S_vis": "--", "Acc_linear": "--", "L_struct": ":", "D_rate": "-."}
DODGE = {"S_set": -0.06, "S_vis": -0.02, "S_llm": 0.02, "D_rate": 0.06, "Acc_struct": -0.04, "Acc_linear": 0.0,
         "L_struct": 0.04}
_SVG_RC = {"svg.fonttype": "path", "svg.hashsalt": "dissipation-workbench", "svg.id": None}


def _estimate(est: Any) -> tuple[float | None, float | None, float | None]:
    if est is None:
        return None, None, None
    if isinstance(est, dict):
        return est.get("value"), est.get("lo"), est.get("hi")
    if hasattr(est, "value"):
        return est.value, est.lo, est.hi
    return float(est), None, None


def _series(ax, xs: Sequence[int], ests: Sequence[Any], term: str, label: str, *, color: str | None = None,
            dodge: float | None = None) -> bool:
    """One line with its interval bars; False if the term has no defined point (the legend then says so, naming it:
    a note written over the axes could hide a curve)."""
    points = [(x, *_estimate(e)) for x, e in zip(xs, ests)]
    points = [(x, v, lo, hi) for x, v, lo, hi in points if v is not None]
    if not points:
        # An empty errorbar, not a line: the legend lists containers after lines, and this one keeps its place.
        ax.errorbar([], [], linestyle="none", marker="", label=f"{label.replace(' (right)', '')}: no scores yet")
        return False
    x = [p[0] + (DODGE.get(term, 0.0) if dodge is None else dodge) for p in points]
    y = [p[1] for p in points]
    low = [p[1] - p[2] if p[2] is not None else 0.0 for p in points]
    high = [p[3] - p[1] if p[3] is not None else 0.0 for p in points]
    ax.errorbar(x, y, yerr=[low, high], label=label, color=color or COLORS.get(term), marker="o", markersize=3,
                capsize=3, linewidth=1.5, linestyle=STYLES.get(term, "-"))
    return True


def main_figure(rows: Sequence[dict[str, Any]], *, budget: int, fmt: str, title: str | None = None) -> Figure:
    """Sweep K at fixed ``budget`` and ``fmt`` (ledger rows: cell dicts with Estimates or {value, lo, hi})."""
    picked = sorted((r for r in rows if r["budget"] == budget and r["format"] == fmt), key=lambda r: r["k"])
    if not picked:
        raise ValueError(f"no cells with budget {budget} and format {fmt!r} in this ledger")
    models = list(dict.fromkeys(r["model"] for r in picked if "model" in r))
    if models:
        return _models_figure(picked, models, budget=budget, fmt=fmt, title=title)
    xs = list(range(1, len(picked) + 1))  # evenly spaced K positions: K grids are usually geometric
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for term in MAIN_LEFT:
        _series(ax, xs, [r[term] for r in picked], term, term)
    right = ax.twinx()
    _series(right, xs, [r["D_rate"] for r in picked], "D_rate", "D_rate (right)")
    for axis in (ax, right):
        axis.set_ylim(0, 1.02)
    ax.set_xticks(xs, [str(r["k"]) for r in picked])
    ax.set_xlabel("K (top-K retrieved)")
    ax.set_ylabel("share of samples")
    right.set_ylabel("D_rate")
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    ax.grid(alpha=0.25)
    ax.set_title(title or f"Dissipation ledger: B={budget} tokens, format={fmt} (95% CI)", fontsize=11)
    return fig


# Each model's S_llm in a run of several models, in the run's model order.
MODEL_COLORS = ("tab:red", "tab:purple", "tab:orange", "tab:brown", "tab:pink", "tab:olive", "tab:gray", "black")


def _models_figure(picked: Sequence[dict[str, Any]], models: list[str], *, budget: int, fmt: str,
                   title: str | None) -> Figure:
    """The K sweep of a run of several models: S_set and S_vis (every model's) once, then each model's S_llm."""
    first = [r for r in picked if r["model"] == models[0]]
    xs = list(range(1, len(first) + 1))
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for term in ("S_set", "S_vis"):
        _series(ax, xs, [r[term] for r in first], term, term)
    for i, model in enumerate(models):
        ests = [r["S_llm"] for r in sorted((r for r in picked if r["model"] == model), key=lambda r: r["k"])]
        _series(ax, xs, ests, "S_llm", f"S_llm {model}", color=MODEL_COLORS[i % len(MODEL_COLORS)],
                dodge=0.02 + 0.03 * i)
    ax.set_ylim(0, 1.02)
    ax.set_xticks(xs, [str(r["k"]) for r in first])
    ax.set_xlabel("K (top-K retrieved)")
    ax.set_ylabel("share of samples")
    fig.legend(handles=ax.get_legend_handles_labels()[0], loc="outside lower center", ncols=4, fontsize=8,
               frameon=False)
    ax.grid(alpha=0.25)
    ax.set_title(title or f"Dissipation ledger: B={budget} tokens, format={fmt}, {len(models)} models (95% CI)",
                 fontsize=11)
    return fig


def oracle_figure(oracle_rows: Sequence[dict[str, Any]], *, title: str | None = None) -> Figure:
    """Sweep B over the oracle controls: Acc_struct, Acc_linear, L_struct."""
    picked = sorted(oracle_rows, key=lambda r: r["budget"])
    if not picked:
        raise ValueError("this run has no oracle cells (plan it with --oracle)")
    xs = list(range(1, len(picked) + 1))
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    drawn = [_series(ax, xs, [r.get(term) for r in picked], term, term)
             for term in ("Acc_struct", "Acc_linear", "L_struct")]
    if not any(drawn):      # no data to scale to: each budget's tick in its place
        ax.set_xlim(0.5, len(xs) + 0.5)
    ax.set_xticks(xs, [str(r["budget"]) for r in picked])
    ax.set_xlabel("B (evidence token budget)")
    ax.axhline(0, color="0.6", linewidth=0.8)
    fig.legend(handles=ax.get_legend_handles_labels()[0], loc="outside lower center", ncols=3, fontsize=8,
               frameon=False)
    ax.grid(alpha=0.25)
    ax.set_title(title or "Oracle controls: only p*, struct vs shuffled (95% CI)", fontsize=11)
    return fig


def image_bytes(fig: Figure, fmt: str) -> bytes:
    """The figure as an SVG or PNG file's bytes (reproducible: no date, fixed ids)."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"unknown image format {fmt!r}; choose one of: {', '.join(IMAGE_FORMATS)}")
    buf = io.BytesIO()
    with matplotlib.rc_context(_SVG_RC):
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(buf, format=fmt, metadata=metadata, dpi=150 if fmt == "png" else None)
    return buf.getvalue()


def inline_svg(fig: Figure) -> str:
    """The figure as an ``<svg>`` element for an HTML page: no XML prolog, DOCTYPE, metadata or namespace URLs.

    An HTML parser puts inline ``<svg>`` in the SVG namespace by itself (and reads
    ``xlink:href``), so the page references no address at all.
    """
    text = image_bytes(fig, "svg").decode("utf-8")
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
