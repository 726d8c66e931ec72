"""Compare's text: the cells of its table, the line of what differs between the runs, a cell's flips.

Pure functions of ``workbench.compare``'s comparison (no screen state), shared by the Compare screen and its tests.
"""

from __future__ import annotations

import json

from rich.text import Text

from workbench.compare.render import fmt_p
from workbench.compare.report import BETTER, DIRECTIONS, STAGES, CellDelta, Comparison, TermDelta
from workbench.tables import DASH
from workbench.tui.markup import esc
from workbench.tui.screens.compare_flip import WAYS

# The flips list holds at most this many rows (design §9: a table holds a page, not every row).
FLIP_ROWS = 1000
# Colour for the eye, a symbol for everyone (colour-blind users, a monochrome terminal, the cursor row).
BETTER_MARK, WORSE_MARK, NO_DIRECTION_MARK = ("▲", "bold green"), ("▼", "bold red"), ("•", "bold yellow")


def sentence(text: str) -> str:
    """``text`` ending with a full stop (a core message is a clause; the screen adds a sentence after it)."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def differences_lines(c: Comparison) -> str:
    """What differs between the runs, one paragraph per axis (``i``): every key with A's and B's value."""
    if not c.differences:
        return "The runs' configurations are identical (a rerun): any difference is noise or nondeterminism."
    axes = list(dict.fromkeys(d.axis for d in c.differences))
    out = [f"The runs differ in {len(axes)} ax{'is' if len(axes) == 1 else 'es'}: {', '.join(axes)}."
           + (" A delta may come from any of them, not from one alone." if len(axes) > 1 else "")]
    for axis in axes:
        keys = "; ".join(f"{d.key} {_short(d.a)} → {_short(d.b)}" for d in c.differences if d.axis == axis)
        extra = f" ({c.samples:,} samples in both runs are compared)" if axis == "samples" else ""
        out.append(f"{axis}: {keys}{extra}")
    return "\n\n".join(out)


def cell_label(cell: CellDelta) -> str:
    """A's cell id, or ``A cell → B cell`` when they differ (a mapped pair)."""
    return cell.cell_a if cell.cell_a == cell.cell_b else f"{cell.cell_a}→{cell.cell_b}"


def mark(d: TermDelta, term: str) -> tuple[str, str]:
    """(symbol, style) of a delta: ▲ significantly better, ▼ significantly worse, • significant without a
    better direction, a space when not significant."""
    if not d.significant or d.delta.value is None:
        return " ", ""
    sign = BETTER.get(term)
    if sign is None:
        return NO_DIRECTION_MARK
    return BETTER_MARK if d.delta.value * sign > 0 else WORSE_MARK


def term_cell(d: TermDelta, term: str, view: str) -> Text:
    """One table cell, two lines, right-aligned: the view's numbers with the significance mark and ``*``."""
    symbol, style = mark(d, term)
    star = "*" if d.significant else " "
    if view == "values":
        first, second = f"{_num(d.a)}→{_num(d.b)}", ""
    elif view == "p":
        first, second = f"p {fmt_p(d.p)}", f"Holm {fmt_p(d.p_holm)}"
    else:
        v = d.delta
        first = DASH if v.value is None else f"{v.value:+.3f}"
        second = "" if v.lo is None or v.hi is None else f"[{v.lo:+.3f},{v.hi:+.3f}]"
    return Text.assemble((f"{symbol} {first}{star}", style), "\n", (second, style or "dim"), justify="right")


def _num(x: float | None) -> str:
    return DASH if x is None else f"{x:.3f}"


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 24 else text[:21] + "…\""


def axes_line(c: Comparison) -> str:
    """What differs between the runs, as markup: a warning when more than one axis does."""
    if not c.differences:
        return "[b]Configurations identical[/b] (a rerun): any difference is noise or nondeterminism."
    if len(c.axes) == 1:
        keys = ", ".join(f"{esc(d.key)} {esc(_short(d.a))}→{esc(_short(d.b))}" for d in c.differences[:2])
        more = f", +{len(c.differences) - 2} more" if len(c.differences) > 2 else ""
        return f"Differs in 1 axis: [b]{esc(c.axes[0])}[/b] ({keys}{more})"
    return f"[reverse] ⚠ {len(c.axes)} axes differ ({esc(', '.join(c.axes))}): a delta may come from any [/reverse]"


def flips_line(cell: CellDelta) -> str:
    """The highlighted cell's flips counted by stage, ▲ fail→pass and ▼ pass→fail, as markup."""
    counts = {(s, d): len(cell.flips[s][d]) for s in STAGES for d in DIRECTIONS}
    changed = sum(counts.values())
    head = f"[b]Flips[/b] {esc(cell_label(cell))} {changed:,}/{cell.n:,}"
    scores = cell.terms.get("S_llm")
    if scores is not None and (scores.a is None or scores.b is None):
        return head + ": none can be seen, as a flip needs a score in both runs (import predictions or run a model)"
    stages = " · ".join(f"{s} " + " ".join(f"{WAYS[d][0]}{counts[s, d]:,}" for d in DIRECTIONS) for s in STAGES)
    shown = f" [dim](the first {FLIP_ROWS:,} listed)[/dim]" if changed > FLIP_ROWS else ""
    return f"{head}: {stages}{shown}"


def flip_rows(cell: CellDelta) -> list[tuple[str, str, str]]:
    """(stage, direction, sample id) of every flip of a cell, by stage then direction."""
    return [(stage, way, sid) for stage in STAGES for way in DIRECTIONS for sid in cell.flips[stage][way]]
