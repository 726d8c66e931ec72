"""Plain-text tables of a ledger report, with 95% intervals; undefined is shown as —."""

from __future__ import annotations

from typing import Any, Sequence

DASH = "—"


def fmt_estimate(est: Any, digits: int = 3) -> str:
    """``0.523 [0.471,0.580]``, or ``—`` when undefined."""
    value = getattr(est, "value", est)
    if value is None:
        return DASH
    lo, hi = getattr(est, "lo", None), getattr(est, "hi", None)
    if lo is None or hi is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{lo:.{digits}f},{hi:.{digits}f}]"


def fmt_number(est: Any, digits: int = 1) -> str:
    """A mean such as K_eff or tokens, without interval (the interval is in --json)."""
    value = getattr(est, "value", est)
    return DASH if value is None else f"{value:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 3) -> str:
    """The first ``left`` columns left-aligned (labels), the rest right-aligned (numbers), one grid."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(c.rjust(w) if i >= left else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def ledger_tables(report) -> str:
    """The interface table, the reasoning table (when anything is scored) and the oracle table."""
    parts = [f"run {report.run} · dataset {report.dataset} · score {report.score} · "
             f"95% bootstrap CI, {report.resamples} resamples, seed {report.seed}"]
    for warning in getattr(report, "warnings", ()):
        parts[0] += f"\nwarning: {warning}"
    if report.excluded:
        parts[0] += f"\nexcluded: {report.excluded:,} samples tagged {', '.join(report.exclude_tags)}"
    sequential = getattr(report, "sequential", None)
    if sequential is not None:
        parts[0] += (f"\nsequential run ({sequential.config.describe()}): the bootstrap CIs and every term below "
                     f"are over each cell's answered samples (n, a uniform random subset of the {sequential.population:,})"
                     " and do not hold under stopping; the sequential table's intervals do, for the full run's S_llm")
    elif 0 < report.jobs_done < report.jobs_total:
        parts[0] += (f"\npartial: {report.jobs_done:,} of {report.jobs_total:,} jobs done; a cell with any "
                     "score reports every term over its scored samples (n)")
    head = ["K", "B", "format", "n"]
    several = any("model" in r for r in report.rows)
    windows = _one_row_per_window(report.rows) if several else report.rows
    shared = ""
    if windows is None:      # the models answered different samples (a sequential run): a row each
        windows, shared = report.rows, " (per model: each cell's terms are over the samples it answered)"
    elif several:
        shared = " (shared by every model: each was shown the same evidence in a cell of the same K, B and format)"
    by = ["model"] if windows is report.rows and several else []
    parts.append(f"Retrieval and interface{shared}\n" + table(
        by + head + ["S_set", "S_vis", "L_iface", "K_eff", "tokens", "trunc"],
        [([r["model"]] if by else []) + [str(r["k"]), str(r["budget"]), r["format"], fmt_number(r["n"], 0),
          fmt_estimate(r["S_set"]), fmt_estimate(r["S_vis"]), fmt_estimate(r["L_iface"]), fmt_number(r["K_eff"]),
          fmt_number(r["evidence_tokens"]), fmt_number(r["truncated"], 2)] for r in windows], left=len(by) + 3))
    if any(getattr(r["S_llm"], "value", None) is not None for r in report.rows):
        by = ["model"] if several else []
        parts.append("Reasoning, dissipation and leakage\n" + table(
            by + head + ["S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak"],
            [([r["model"]] if several else []) + [str(r["k"]), str(r["budget"]), r["format"], fmt_number(r["n"], 0)]
             + [fmt_estimate(r[t]) for t in ("S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak")]
             for r in report.rows], left=len(by) + 3))
    else:
        parts.append("Reasoning terms (S_llm, Acc_hit, Acc_miss, D_rate, D_mass, L_leak): — until predictions "
                     "exist (`workbench prompts export` → your generator → `workbench predictions import`).")
    if report.oracle:
        parts.append("Oracle controls (only p*; p*_vis = share of samples whose p* fits in B)\n" + table(
            ["B", "", "", "n", "p*_vis", "Acc_struct", "Acc_linear", "L_struct"],
            [[str(o["budget"]), "", "", fmt_number(o["n"], 0), f"{o['p_star_visible']:.3f}",
              fmt_estimate(o["Acc_struct"]), fmt_estimate(o["Acc_linear"]), fmt_estimate(o["L_struct"])]
             for o in report.oracle]))
        noise = [(o["budget"], r) for o in report.oracle for r in o["L_noise"]]
        if noise and any(getattr(r["L_noise"], "value", None) is not None for _, r in noise):
            parts.append("Noise loss L_noise = Acc_linear(B) − Acc_hit(K,B,linear)\n" + table(
                ["K", "B", "", "n paired", "L_noise (paired)", "L_noise (unpaired)"],
                [[str(r["k"]), str(b), "", fmt_number(r["n"], 0), fmt_estimate(r["L_noise"]), fmt_estimate(r["L_noise_unpaired"])]
                 for b, r in noise]))
    if sequential is not None:
        parts.append(sequential_table(report))
    if getattr(report, "claims", None):
        parts.append(claims_table(report))
    return "\n\n".join(parts)


def _one_row_per_window(rows: list[dict]) -> list[dict] | None:
    """The first row of each (K, B, format) of a run of several models, whose retrieval and interface terms do
    not depend on the model answering it; None when the models' cells of one window were scored over different
    samples (a sequential run), so that their terms differ."""
    first: dict[tuple, dict] = {}
    for row in rows:
        window = (row["k"], row["budget"], row["format"])
        seen = first.setdefault(window, row)
        if any(_value(seen[t]) != _value(row[t]) for t in ("n", "S_set", "S_vis", "K_eff", "evidence_tokens")):
            return None
    return list(first.values())


def _value(est: Any):
    return getattr(est, "value", est)


def sequential_table(report) -> str:
    """A sequential run's cells: samples answered, the interval for the full run's S_llm valid at any stopping
    time, why each stopped and when, and (``best``) the difference it was settled on."""
    s = report.sequential
    best = s.config.rule == "best"
    several = any("model" in r for r in report.rows)
    rows = []
    for r in report.rows:
        seq = r["sequential"]
        interval = DASH if seq["lo"] is None else f"[{seq['lo']:.3f},{seq['hi']:.3f}]"
        stopped = seq["stopped"] or "asked"
        if seq["stopped_at_round"] is not None:
            stopped += f" (round {seq['stopped_at_round']:,})"
        if seq.get("same_as"):
            stopped += f" = {seq['same_as']}"
        rows.append(([r["model"]] if several else []) + [str(r["k"]), str(r["budget"]), r["format"],
                     f"{seq['answered']:,}/{seq['of']:,}", interval, stopped]
                    + ([s.versus_cell(r["cell_id"])] if best else []))
    head = (["model"] * several + ["K", "B", "format", "answered", "full-run S_llm", "stopped"]
            + (["settled on (this − that)"] if best else []))
    state = f"decided at round {s.rounds:,}" if s.done else f"round {s.rounds:,}, still asking"
    winner = f"; best {s.winner}" if s.winner else ""
    calls = f"{s.calls_used:,} of {s.calls_full:,} model calls" + (f" ({s.calls_used / s.calls_full:.2f})"
                                                                   if s.calls_full else "")
    levels = (f"each cell's at level 1 − {s.cell_alpha:.2g}, each difference at 1 − {s.pair_alpha:.2g}; the winner "
              f"within {s.config.tolerance:g} of the best and every cell's interval, all at once at 1 − "
              f"{s.config.alpha:g}" if best else f"each at level 1 − {s.cell_alpha:.2g}, so all at once at 1 − "
              f"{s.config.alpha:g}")
    return (f"Sequential: {state}{winner}; {calls}. Confidence sequences for the full run's values over all "
            f"{s.population:,} samples, valid at any stopping time ({levels})\n" + table(head, rows, left=3 + several))


def claims_table(report) -> str:
    """Per cell, how much of the answers the shown evidence supports (the latest claim run)."""
    cfg = report.claims["config"]
    title = (f"Claims (claim run {report.claims['claim_run']}: {cfg['decomposer']} + {','.join(cfg['verifiers'])}, "
             f"ties → {cfg['ties']}; {report.claims['done']:,} of {report.claims['jobs']:,} answers verified)")
    return title + "\n" + table(
        ["K", "B", "format", "answers", "faithful", "halluc", "self_know", "noise_rel", "ctx_util"],
        [[str(r["k"]), str(r["budget"]), r["format"], str(r.get("claims_n", 0))]
         + [fmt_estimate(r.get(t)) for t in ("faithfulness", "hallucination", "self_knowledge",
                                             "noise_sensitivity_relevant", "context_utilization")]
         for r in report.rows])
