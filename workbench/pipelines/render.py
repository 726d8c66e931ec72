"""SearChain reports and trees as plain text, for the CLI and the TUI."""

from __future__ import annotations


def render_report(r: dict) -> str:
    """The report as text (the TUI shows the same lines)."""
    from workbench.tables import fmt_estimate as pct

    cfg = r["config"]
    lines = [f"SearChain {r['run']} · {r['done']:,} of {r['jobs']:,} samples done"
             + (f", {r['errors']} errors" if r["errors"] else "")
             + f" · reader {cfg['reader']}, threshold {cfg['threshold']}, max rounds {cfg['max_rounds']}"
             + " · 95% bootstrap CI over samples"]
    if not r["n"]:
        return lines[0] + "\nnothing finished yet"
    src = r["sources"]
    lines += [
        f"cover-EM            {pct(r['cover_em'])}",
        f"acc                 {pct(r['acc'])}",
        f"rounds per question {pct(r['rounds'], 2)}   histogram "
        + " ".join(f"{k}:{v}" for k, v in r["rounds_histogram"].items()),
        f"steps per question  {pct(r['steps'], 2)}",
        "outcomes            " + ", ".join(f"{k} {v}" for k, v in r["outcomes"].items()),
        "knowledge sources (share of final-chain steps)",
        f"  model's own (verified) {pct(src['model'])}",
        f"  corrected by retrieval {pct(src['corrected'])}",
        f"  completed by retrieval {pct(src['completed'])}",
        f"  never checked          {pct(src['unchecked'])}",
        f"citation coverage   {pct(r['citation_coverage'])}  (steps cited [n] in the final content, with a reference)",
    ]
    if "baseline" in r:
        b = r["baseline"]
        lines += [f"plain RAG, K={b['k']}, same samples and model",
                  f"  cover-EM          {pct(b['cover_em'])}",
                  f"  SearChain − RAG   {pct(b['cover_em_difference'])}  (paired bootstrap; "
                  f"wins {b['wins']}, losses {b['losses']}, ties {b['ties']})",
                  f"  acc difference    {pct(b['acc_difference'])}"]
    return "\n".join(lines)



def render_tree(t: dict) -> str:
    """A sample's tree as indented text: each node with its status, evidence and feedback."""
    lines = [f"{t['sample_id']}  {t['question']}", f"gold: {' | '.join(t['answers'])}",
             f"outcome {t['outcome']} · rounds {t['rounds']} · cover {t['cover']}"]
    children: dict[int, list[dict]] = {}
    for n in t["nodes"]:
        children.setdefault(n["parent"], []).append(n)

    def walk(parent: int, depth: int) -> None:
        for n in children.get(parent, []):
            answer = "[Unsolved]" if n["unsolved"] else n["answer"]
            mark = "*" if n["in_final"] else " "
            lines.append(f"{'  ' * depth}{mark}[{n['status']}] b{n['branch']} Q: {n['query']}  A: {answer}")
            if n["evidence"]:
                lines.append(f"{'  ' * depth}    reference {n['evidence']}  reader: {n['reader_answer']!r} "
                             f"({n['confidence']:.2f})")
            if n["feedback"]:
                lines.append(f"{'  ' * depth}    feedback: " + n["feedback"].splitlines()[0] + " …")
            walk(n["node"], depth + 1)

    walk(0, 1)
    lines.append(f"final content: {t['final_content']}")
    lines.append(f"prediction: {t['prediction']}   plain RAG: {t['baseline_prediction']!r} "
                 f"(cover {t['baseline_cover']})")
    for b in t["branches"]:
        if b["parse_error"]:
            lines.append(f"branch {b['branch']}: unparseable ({b['parse_error']})")
    return "\n".join(lines)
