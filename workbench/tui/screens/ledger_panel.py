"""The Ledger's text: its heading's word on the run's answers, and its side panel line by line (a cell's terms with
their intervals, its human-label estimates, where a sequential run stands), kept apart from the screen's keys and
loads."""

from __future__ import annotations

import textwrap

from workbench.runs.sequential import cell_line, summary_line
from workbench.tables import fmt_estimate
from workbench.tui.markup import esc

CI_TERMS = ("S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak", "K_eff",
            "evidence_tokens", "truncated")
# The panel's text at its narrowest: 38 columns less its border, padding and scrollbar.
PANEL_WIDTH = 35


def progress_text(answered: str, done: int, total: int) -> str:
    """The heading's word on the run's answers: the jobs a model has done, the answers imported, or none yet."""
    if answered == "model":
        return f"{done:,}/{total:,} jobs"
    if answered == "import":
        return f"imported answers ({done:,}{'' if done == total else f' of {total:,} jobs'})"
    return "no model (sweep)"


def sequential_lines(status, cell: str) -> list[str]:
    """A sequential run in the side panel: the cell's interval valid at any stopping time (for the full dataset's
    S_llm), why it stopped, and the run's standing: its decision and the calls saved, or where it is."""
    return ["", "[b]Sequential[/b] [dim]S_llm over all samples, valid at any stopping time[/dim]",
            esc(cell_line(status, cell)), f"[dim]{esc(summary_line(status))}[/dim]"]


def ci_lines(terms, row) -> list[str]:
    """``term estimate [lo,hi]`` lines narrow enough for the side panel (≥ 35 columns inside).

    Token counts get no decimals and K_eff one; a name too long to right-align goes on its own line above
    its estimate, so no line wraps mid-interval.
    """
    lines = []
    for t in terms:
        est = fmt_estimate(row.get(t), {"evidence_tokens": 0, "K_eff": 1}.get(t, 3))
        lines += [f"{t:>15} {est}"] if len(t) <= 15 else [f"{t}", f"{'':>15} {est}"]
    return lines


def claims_lines(config, answers: int, width: int = PANEL_WIDTH) -> list[str]:
    """The claim metrics' heading: how many answers they are over, then the decomposer and verifiers, broken
    between names to fit ``width`` (left to the panel, "lexical,embedding,llm_judge, 3" wrapped mid-list)."""
    how = f"{config['decomposer']} + {', '.join(config['verifiers'])}"
    lines = textwrap.wrap(how, max(width, PANEL_WIDTH), initial_indent="  ", subsequent_indent="    ",
                          break_long_words=False, break_on_hyphens=False)
    return [f"[b]Claims[/b] [dim]over {answers:,} answer{'' if answers == 1 else 's'}[/dim]",
            *(f"[dim]{esc(line)}[/dim]" for line in lines)]


def label_lines(estimates) -> list[str]:
    """The cell's judged metrics corrected by human labels: naive, human-only and PPI, one per line."""
    if estimates is None:
        return ["[b]Human labels[/b] [dim]computing …[/dim]"]
    if not estimates:
        return []
    lines = ["[b]Human labels[/b] [dim]uniform queue, 95% CI[/dim]"]
    for e in estimates:
        p = e.estimates
        head = f"({e.judge}, {p.n_labelled} labelled)"
        lines += [f"{e.metric} {head}"] if len(e.metric) + len(head) < 36 else [e.metric, f"  {head}"]
        lines += [f"{name:>15} {fmt_estimate(est)}" for name, est in (("naive", p.naive), ("human", p.human),
                                                                       ("PPI", p.ppi))]
    return lines
