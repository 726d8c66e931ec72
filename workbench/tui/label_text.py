"""What the Labels screen shows, as Rich markup: an item's card and the live judge report (no widgets here)."""

from __future__ import annotations

from typing import Any

from workbench.judges.cards import AnswerCard, ClaimCard, PairCard, RelevanceCard
from workbench.judges.items import VOTE, JudgedItem
from workbench.judges.report import METRIC, JudgeReport
from workbench.tables import DASH, fmt_estimate, fmt_number
from workbench.tui.markup import esc

# What y and n mean for each kind.
ANSWERS = {"claims": ("supported", "unsupported"), "dedup": ("same entity", "different"),
           "answers": ("correct", "wrong"), "relevance": ("relevant", "not relevant")}
QUESTIONS = {"claims": "Supported by a unit shown to the model?", "dedup": "The same entity?",
             "answers": "Is the answer correct?",
             "relevance": "Is this passage relevant to answering the question?"}
#: A chunk longer than this is cut on the card unless e (more context) is on.
PASSAGE_CHARS = 600


def report_lines(report: JudgeReport | None, *, wide: bool) -> list[str]:
    """The live report as markup lines: per judge κ, accuracy and positive rates, then naive · human · PPI.

    ``wide``: one line per judge (below the item, ≥ 78 columns); else lines of ≤ 36 columns for a side panel.
    """
    if report is None:
        return ["[dim]report: computing …[/dim]"]
    # Every annotator's labels (the heading counts only yours): say so, and whose they are.
    whose = ", ".join(f"{esc(a)} {n}" for a, n in sorted(report.annotators.items()))
    by = f"{report.labelled_items} labelled by all annotators"
    uniform = f"{report.uniform_items} from the uniform queue"
    if wide:    # one line within 80 columns: "uniform" is short for the uniform queue here
        lines = [f"[b]Judges vs human labels[/b] [dim]{by}{f' ({whose})' if whose else ''} · "
                 f"{report.uniform_items} uniform[/dim]"]
    else:   # a side panel of 36 columns: whose labels on a line of their own
        lines = ["[b]Judges vs human labels[/b]", f"[dim]{by}[/dim]"] + ([f"[dim] {whose}[/dim]"] if whose else [])
        lines.append(f"[dim]{uniform}[/dim]")
    if report.ties:
        # κ's n counts the items with a majority label: one the annotators split evenly has no human label.
        lines += ([f"[dim]{report.ties} split evenly between annotators: left out of κ (n)[/dim]"] if wide else
                  [f"[dim]{report.ties} split evenly between[/dim]", "[dim] annotators: left out of κ (n)[/dim]"])
    if not report.labelled_items:
        lines.append("[dim]κ appears once items are labelled (y/n)[/dim]")
    width = max((len(j.judge) for j in report.agreement), default=0)
    for j in report.agreement:
        a = j.agreement
        kappa = fmt_estimate(a.kappa, 2)
        if wide:
            lines.append(f"{esc(j.judge):<{width}} κ {kappa} · acc {fmt_number(a.accuracy, 2)} · judge+ "
                         f"{fmt_number(a.judge_positive_rate, 2)} human+ {fmt_number(a.human_positive_rate, 2)} · n {a.n}")
        else:
            lines += [f"[b]{esc(j.judge)}[/b] n {a.n} · acc {fmt_number(a.accuracy, 2)}", f" κ {kappa}",
                      f" judge+ {fmt_number(a.judge_positive_rate, 2)} human+ {fmt_number(a.human_positive_rate, 2)}"]
    for p in report.annotator_agreement:    # two or more annotators: the human ceiling
        a = p.agreement
        pair = f"{esc(p.a)} ~ {esc(p.b)}"
        if wide:
            lines.append(f"annotators {pair} κ {fmt_estimate(a.kappa, 2)} · agree {fmt_number(a.accuracy, 2)} · n {a.n}")
        else:
            lines += [f"[b]annotators[/b] {pair} n {a.n}", f" κ {fmt_estimate(a.kappa, 2)} · agree "
                      f"{fmt_number(a.accuracy, 2)}"]
    # The vote for claims, every mode for dedup, the scorer for answers.
    shown = [e for e in report.estimates if report.kind != "claim" or e.judge == VOTE]
    metric = METRIC.get(report.kind, "")
    if not wide:
        lines.append(f"[b]{metric}[/b]")
    for e in shown:
        p = e.estimates
        label = f"{esc(e.judge)}, {p.n_labelled} labelled of {p.n_labelled + p.n_unlabelled}"
        if wide:
            lines.append(f"{metric} ({label}):")
            lines.append(f"  naive {fmt_estimate(p.naive, 2)} · human {fmt_estimate(p.human, 2)} · "
                         f"PPI {fmt_estimate(p.ppi, 2)}")
        else:
            lines += [f"{label}", f" naive {fmt_estimate(p.naive, 2)}", f" human {fmt_estimate(p.human, 2)}",
                      f"   PPI {fmt_estimate(p.ppi, 2)}"]
    return lines


def _mark(value: bool) -> str:
    return "[green]✔ yes[/green]" if value else "[red]✘ no[/red]"


def verdict_text(verdicts: dict[str, bool], *, compact: bool = False) -> str:
    if compact:
        marks = {True: "[green]✔[/green]", False: "[red]✘[/red]"}
        return " ".join(f"{esc(j)} {marks[v]}" for j, v in verdicts.items()) or DASH
    return " · ".join(f"{esc(j)} {_mark(v)}" for j, v in verdicts.items()) or DASH


def card_text(kind: str, item: JudgedItem, shown: Any, *, more: bool, verdicts: bool) -> str:
    """The item as markup: what the judge saw, the question put to the human, and (if asked) the verdicts."""
    lines: list[str] = []
    where = ""
    if isinstance(shown, ClaimCard):
        where = f"{shown.sample_id} · {shown.key.cell_id} · claim {shown.key.idx + 1}"
        lines += [f"[b]Question[/b] {esc(shown.question)}",
                  f"[b]Gold[/b] {esc(' · '.join(shown.gold) or DASH)}",
                  f"[b]Answer[/b] {esc(shown.answer or DASH)}",
                  f"[b]Claim[/b] [reverse]{esc(shown.claim)}[/reverse]"]
        if shown.best_unit:
            lines.append(f"[b]Best unit[/b] {esc(shown.best_label or '')} {esc(shown.best_unit)}")
        else:
            lines.append("[b]Best unit[/b] [dim]none scored[/dim]")
        n = len(shown.shown_units)
        if more:
            lines.append(f"[b]Shown units[/b] {n} visible to the model [dim](e hides)[/dim]")
            lines += [f"  {esc(u)}" for u in shown.shown_units] or ["  " + DASH]
        else:
            lines.append(f"[b]Shown units[/b] {n} visible to the model [dim](e shows them)[/dim]")
    elif isinstance(shown, PairCard):
        where = f"dedup run {shown.run} · candidate: {shown.reasons}"
        lines.append(f"[b]{esc(shown.name_a)}[/b]  ~  [b]{esc(shown.name_b)}[/b]")
        views = shown.views if more else shown.views[-1:]
        for v in views:
            lines.append(f"[b]Contexts[/b] [dim]as mode {esc(v.mode)} saw them"
                         f"{'' if more or len(shown.views) < 2 else ' (e: every mode)'}[/dim]")
            lines += [f"[b]A[/b] {esc(v.context_a)}", f"[b]B[/b] {esc(v.context_b)}"]
            if verdicts:
                lines.append(f"[dim]{esc(v.mode)}: {'same' if v.same else 'different'} "
                             f"({v.confidence:.2f}) {esc(v.rationale)}[/dim]")
    elif isinstance(shown, AnswerCard):
        gold = [g + (f" (also {', '.join(shown.aliases[g])})" if shown.aliases.get(g) else "") for g in shown.gold]
        where = f"{shown.sample_id} · {shown.key.cell_id}"
        lines += [f"[b]Question[/b] {esc(shown.question)}",
                  f"[b]Gold[/b] {esc(' · '.join(gold) or DASH)}",
                  f"[b]Answer[/b] [reverse]{esc(shown.answer or DASH)}[/reverse]"]
        if verdicts:
            lines.append(f"[dim]scorer {esc(shown.scorer)}: score "
                         f"{DASH if shown.score is None else f'{shown.score:.2f}'}[/dim]")
    elif isinstance(shown, RelevanceCard):
        ranks = ", ".join(f"{esc(r)} #{n}" for r, n in shown.ranks.items()) or DASH
        where = f"{shown.dataset} · {shown.sample_id} · {shown.chunk_id}"
        doc = f"{esc(shown.title)} · " if shown.title else ""
        text = shown.text if more or len(shown.text) <= PASSAGE_CHARS else (
            shown.text[:PASSAGE_CHARS] + " …")
        lines += [f"[b]Question[/b] {esc(shown.question)}",
                  f"[b]Passage[/b] {doc}{esc(shown.chunk_id)} [dim](ranked {ranks})[/dim]",
                  f"[reverse]{esc(text)}[/reverse]"]
        if len(shown.text) > PASSAGE_CHARS:
            lines.append(f"[dim]{len(shown.text):,} characters (e {'cuts' if more else 'shows all'})[/dim]")
    else:
        lines.append(f"[b]{esc(item.text)}[/b]")
        lines.append(f"[dim]{esc(shown) if isinstance(shown, str) else 'loading the item …'}[/dim]")
    yes, no = ANSWERS[kind]
    lines += ["", f"[b]{QUESTIONS[kind]}[/b]  y {yes} · n {no} · s skip"]
    if verdicts:
        lines.append(f"judges: {verdict_text(item.verdicts)}")
    else:
        lines.append("[dim]judges hidden until you label (w shows them)[/dim]")
    if where:
        lines.append(f"[dim]{esc(where)}[/dim]")
    return "\n".join(lines)


def short(text: str, width: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
