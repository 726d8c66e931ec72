"""The DESIGN §3 figures drawn with plotext, returned as strings (no Textual here).

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
_colors = False


def _value(est: Any) -> float | None:
    if est is None:
        return None
    value = est.value if hasattr(est, "value") else est["value"] if isinstance(est, dict) else est
    return None if value is None else float(value)


def _line(xs: Sequence[int], ys: Sequence[float | None], term: str, **kwargs) -> bool:
    points = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if not points:
        return False
    marker = "braille" if _colors else PLAIN_MARKERS.get(term, "*")
    plt.plot([p[0] for p in points], [p[1] for p in points], marker=marker, **kwargs)
    return True


def _begin(width: int, height: int, colors: bool) -> None:
    global _colors
    _colors = colors
    plt.clf()
    plt.plotsize(width, height)
    plt.theme("pro" if colors else "clear")


def _finish(colors: bool) -> str:
    text = plt.build()
    return text if colors else plt.uncolorize(text)


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
    plt.ylim(0, 1)
    plt.xlabel("K (top-K retrieved)")
    plt.title(title or f"Dissipation ledger: B={budget} tokens, format={fmt}")
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
    plt.title(title or "Oracle controls: only p*, struct vs shuffled")
    return _finish(colors)


def save(figure: str, path: str | Path, title: str = "Dissipation Workbench") -> None:
    """Write a figure to exactly ``path``: ``.html``/``.htm`` as a standalone page, else plain text."""
    path = Path(path)
    text = plt.uncolorize(figure)
    if path.suffix.lower() in (".html", ".htm"):
        text = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(title)
                + "</title></head>\n<body><pre style=\"font-family: monospace; line-height: 1.1\">\n"
                + html.escape(text) + "\n</pre></body></html>\n")
    path.write_text(text, encoding="utf-8")


def retrieval_plot(ks: Sequence[int], series: dict[str, Sequence[float | None]], *, width: int = 78,
                   height: int = 16, colors: bool = False, title: str = "Retrieval at k") -> str:
    """Metric curves over k (e.g. doc-level Recall@k and MRR@k)."""
    xs = list(range(1, len(ks) + 1))
    _begin(width, height, colors)
    markers = iter("ox+*.#")
    for label, ys in series.items():
        PLAIN_MARKERS.setdefault(label, next(markers))
        _line(xs, list(ys), label, label=label)
    plt.xticks(xs, [str(k) for k in ks])
    plt.ylim(0, 1)
    plt.xlabel("k")
    plt.title(title)
    return _finish(colors)
