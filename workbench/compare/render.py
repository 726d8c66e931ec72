"""A comparison as text: what differs between the runs, one table per term, then the flips by stage."""

from __future__ import annotations

import json

from workbench.compare.report import DIRECTIONS, STAGES, Comparison, TermDelta
from workbench.tables import DASH, table

SIGNIFICANT = "*"
ARROWS = {"fail_to_pass": "fail→pass", "pass_to_fail": "pass→fail"}
SHORT = {"fail_to_pass": "f→p", "pass_to_fail": "p→f"}


def fmt_delta(d: TermDelta) -> str:
    """``+0.150 [+0.050,+0.250]``, or — when undefined."""
    v = d.delta
    if v.value is None:
        return DASH
    if v.lo is None or v.hi is None:
        return f"{v.value:+.3f}"
    return f"{v.value:+.3f} [{v.lo:+.3f},{v.hi:+.3f}]"


def fmt_p(p: float | None) -> str:
    """A p-value to 3 decimals, ``<0.001`` below that, — when undefined."""
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _value(x: float | None) -> str:
    return DASH if x is None else f"{x:.3f}"


def differences_text(c: Comparison) -> str:
    """Every configuration key on which the runs differ, under the axes they make up."""
    if not c.differences:
        return "The runs' configurations are identical (a rerun): any difference below is noise or nondeterminism."
    head = (f"The runs differ in {len(c.axes)} axis: {c.axes[0]}" if len(c.axes) == 1 else
            f"The runs differ in {len(c.axes)} axes: {', '.join(c.axes)}. A difference below may come from any "
            "of them, not from one alone.")
    lines = [head]
    for d in c.differences:
        lines.append(f"  {d.axis}: {d.key}: {_short(d.a)} → {_short(d.b)}")
    return "\n".join(lines)


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "…\""


def render_comparison(c: Comparison, *, max_samples: int = 8) -> str:
    """The whole comparison as the CLI prints it (``max_samples`` flipped sample ids listed per stage and way)."""
    cells = len(c.cells)
    parts = [
        f"compare A = {c.run_a} with B = {c.run_b} · dataset {c.dataset} · {c.samples:,} samples in both · "
        f"score {c.score}",
        differences_text(c),
        *(f"{side.upper()} = {run} is a {line}; its cells are compared over the samples both runs answered"
          for side, run in (("a", c.run_a), ("b", c.run_b)) if (line := c.sequential.get(side))),
        f"B − A with a 95% paired bootstrap CI ({c.resamples:,} resamples, seed {c.seed}; each sample weighs "
        f"the same in both runs). p: exact McNemar for 0/1 terms, the paired bootstrap otherwise; p(Holm): "
        f"adjusted across the {cells} cell{'s' if cells != 1 else ''} of each term. {SIGNIFICANT} = significant "
        f"(p(Holm) < {c.alpha:g} and the CI excludes 0).",
    ]
    for term in c.terms:
        parts.append(_term_table(term, [(cell.cell_a, cell.cell_b, cell.n, cell.terms[term]) for cell in c.cells]))
    if c.claim_run_a is not None:
        metrics = list(c.cells[0].claims) if c.cells else []
        parts.append(f"Claim metrics (claim run {c.claim_run_a} of A, {c.claim_run_b} of B; the answers verified "
                     "in both)")
        for metric in metrics:
            parts.append(_term_table(metric, [(cell.cell_a, cell.cell_b, cell.claim_samples, cell.claims[metric])
                                              for cell in c.cells]))
    parts.append(flips_text(c, max_samples=max_samples))
    return "\n\n".join(parts)


def _term_table(term: str, rows) -> str:
    shown = [[_cell_label(ca, cb), str(n), _value(d.a), _value(d.b), fmt_delta(d), fmt_p(d.p), fmt_p(d.p_holm),
              SIGNIFICANT if d.significant else ""] for ca, cb, n, d in rows]
    grid = table(["cell", "n", "A", "B", "B − A [95% CI]", "p", "p(Holm)", ""], shown, left=1)
    return term + "\n" + "\n".join(line.rstrip() for line in grid.splitlines())


def _cell_label(a: str, b: str) -> str:
    return a if a == b else f"{a} → {b}"


def flips_text(c: Comparison, *, max_samples: int = 8) -> str:
    """Per cell, the samples whose score changed, by the stage that changed first and by direction."""
    header = ["cell", "changed"] + [f"{stage} {SHORT[d]}" for stage in STAGES for d in DIRECTIONS]
    rows = []
    listed = []
    for cell in c.cells:
        counts = [len(cell.flips[s][d]) for s in STAGES for d in DIRECTIONS]
        rows.append([_cell_label(cell.cell_a, cell.cell_b), str(sum(counts)), *map(str, counts)])
        for stage in STAGES:
            for d in DIRECTIONS:
                ids = cell.flips[stage][d]
                if ids:
                    more = f", … {len(ids) - max_samples} more" if len(ids) > max_samples else ""
                    listed.append(f"  {_cell_label(cell.cell_a, cell.cell_b)} {stage} {ARROWS[d]}: "
                                  f"{', '.join(ids[:max_samples])}{more}")
    text = ("Flips: samples whose score changed, by the first stage that differs (retrieval: H_set changed; "
            "interface: H_set equal, H_vis changed; reasoning: both equal). f→p = fail→pass (B better), "
            "p→f = pass→fail.\n" + table(header, rows, left=1))
    return text + ("\n" + "\n".join(listed) if listed else "\nNo sample changed its score.")
