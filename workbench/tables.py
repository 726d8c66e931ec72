"""Plain-text tables of a ledger report, with 95% intervals; undefined is shown as —.

A table wider than the terminal is printed in groups of columns (:func:`fit_tables`), each repeating the
columns that name a row, as pandas and R print a frame too wide for the screen; the docs lay out a
program's output by the same rule at their page's width (scripts/console_layout.py).
"""

from __future__ import annotations

import re
import unicodedata
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
    """The first ``left`` columns left-aligned (labels), the rest right-aligned (numbers), one grid; widths in
    terminal columns (a Chinese dataset's names are two a character)."""
    widths = [max(columns(h), *(columns(r[i]) for r in rows)) if rows else columns(h) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(_pad(c, w, right=i >= left) for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def _pad(text: str, width: int, *, right: bool) -> str:
    fill = " " * (width - columns(text))
    return fill + text if right else text + fill


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


# The rule under a table's header: a run of dashes per column, two spaces or more between them.
_RULE = re.compile(r"^ *-+(?: {2,}-+)+ *$")


def columns(text: str) -> int:
    """How many terminal columns ``text`` takes: a wide (CJK) character two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


# Put after each wide character while a table is split, so that a character's index is its column.
_FILL = "\0"


def _spread(line: str) -> str:
    return "".join(char + _FILL if unicodedata.east_asian_width(char) in "WF" else char for char in line)


def fit_tables(text: str, width: int | None) -> str:
    """``text`` with every table (a header, a rule of dashes per column, rows) wider than ``width`` columns shown
    in groups of columns one under the other, each after the columns that name a row; None: as it is."""
    if width is None:
        return text
    return "\n".join(split_tables(text.split("\n"), width))


def split_tables(lines: Sequence[str], width: int) -> list[str]:
    """``lines`` with every table wider than ``width`` in groups of columns (see :func:`fit_tables`)."""
    out: list[str] = []
    at = 0
    while at < len(lines):
        if at + 1 < len(lines) and lines[at].strip() and _RULE.match(lines[at + 1]):
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[at + 1])]
            end = at + 2
            while end < len(lines) and _is_row(_spread(lines[end]), spans):
                end += 1
            grid = [_spread(line) for line in lines[at:end]]     # sliced by column, not by character
            if max(map(len, grid)) > width:
                out += [line.replace(_FILL, "") for line in _split(grid, spans, width)]
            else:
                out += lines[at:end]
            at = end
        else:
            out.append(lines[at])
            at += 1
    return out


def _is_row(line: str, spans: list[tuple[int, int]]) -> bool:
    """Whether ``line`` is a row of the table whose columns are ``spans``: blank between them, past the first."""
    return len(line.rstrip()) > spans[0][1] and all(
        not line[end:start].strip() for (_, end), (start, _) in zip(spans, spans[1:]))


def _label_columns(rows: Sequence[str], spans: list[tuple[int, int]], width: int) -> int:
    """How many leading columns name a row: left-aligned in the header and every row (as a table's labels are; a
    column of figures as wide as each other is told by its header), at least one, together at most a third of
    ``width``."""
    count, taken = 0, 0
    for start, end in spans[:-1]:
        cells = [row[start:end] for row in rows]
        taken += end - start + 2
        if count and (taken > width // 3 or any(cell.strip() and cell[0] == " " for cell in cells)):
            break
        count += 1
    return count


def column_groups(key: int, widths: Sequence[int], width: int) -> list[list[int]]:
    """The indexes of ``widths`` (each column's width with the gap before it) in the fewest groups that fit
    ``width`` after the ``key`` columns naming a row, of widths as even as that many groups allow."""
    def grouped(limit: int) -> list[list[int]]:
        groups, taken = [[]], key
        for column, added in enumerate(widths):
            if groups[-1] and taken + added > limit:
                groups.append([])
                taken = key
            groups[-1].append(column)
            taken += added
        return groups

    widest = grouped(width)
    return next((g for limit in range(key + -(-sum(widths) // len(widest)), width)
                 if len(g := grouped(limit)) <= len(widest)), widest)


def _split(grid: list[str], spans: list[tuple[int, int]], width: int) -> list[str]:
    """A table (its header, rule and rows) as groups of columns, each after the key columns, a blank line between."""
    key = _label_columns([grid[0], *grid[2:]], spans, width)
    widths = [end - previous for (_, previous), (_, end) in zip(spans[key - 1:], spans[key:])]
    out: list[str] = []
    for group in column_groups(spans[key - 1][1], widths, width):
        if out:
            out.append("")
        chosen = [*range(key), *(key + column for column in group)]
        # Each column with the gap before it as the table had it.
        out += ["".join(line[(spans[c - 1][1] if c else 0):spans[c][1]] for c in chosen).rstrip() for line in grid]
    return out
