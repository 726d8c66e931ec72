"""One self-contained HTML file for a run: what produced it, its ledger with CIs, the figures, the triage and cases.

``workbench report RUN [--compare RUN_B] --out report.html``. The page opens offline with no
server and references no address: inline CSS, figures as inline SVG (:mod:`workbench.figures`),
every case collapsible (``<details>``), nothing fetched. It is meant to be attached to a pull
request or a paper, so it carries the run's configuration next to its numbers.

Sections: the run (dataset, model, its manifest — model sha256, GGUF metadata, builds, host — and
configuration), the main figure per format at the largest
budget and the oracle figure, the ledger (retrieval and interface terms, reasoning terms, claim
metrics when a claim run exists), the oracle controls, each judge against the human labels
when there are labels (agreement and the corrected metrics), the triaged samples (tags and notes),
and per quadrant a few cases of the highlighted cell with their evidence window, prompt and
output; with ``--compare``, the comparison of the two runs and its flips.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Iterable, Sequence

from workbench import figures
from workbench.browse import QUADRANTS, SampleDetail, list_samples, sample_detail
from workbench.claims.report import LEDGER_METRICS, latest_claim_run
from workbench.compare.render import render_comparison
from workbench.compare.report import compare_runs
from workbench.judges.report import (AGREEMENT_COLUMNS, ESTIMATE_COLUMNS, METRIC, agreement_cells, estimate_cells,
                                     judge_report)
from workbench.meta.report import PREFERENCE_COLUMNS, preference_cells, preference_rows
from workbench.runs.generation import stored_generations
from workbench.runs.manifest import manifest_lines
from workbench.runs.report import LedgerReport, run_ledger
from workbench.runs.sequential import summary_line, versus_words
from workbench.store.db import Store
from workbench.store.labels import label_count
from workbench.store.lookup import NotFound
from workbench.store.manifests import NO_MANIFEST, get_manifest
from workbench.store.queries import Run
from workbench.tables import DASH
from workbench.triage import tagged_samples
from workbench.metrics.stats import RESAMPLES, SEED

#: The quadrants a report shows cases of, in this order.
CASE_QUADRANTS = ("dissipation", "leakage", "interface")
RETRIEVAL_TERMS = ("n", "S_set", "S_vis", "L_iface", "K_eff", "evidence_tokens", "truncated")
REASONING_TERMS = ("S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak")

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1180px;
       padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
.meta { color: #555; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f6f6f6; } td.l, th.l { text-align: left; white-space: normal; }
.ci { color: #666; font-size: 12px; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
details { border: 1px solid #e4e4e4; border-radius: 4px; margin: 0.4em 0; padding: 0.3em 0.6em; }
summary { cursor: pointer; } pre { background: #f8f8f8; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
.gold { font-weight: 600; } .cut { color: #b35900; } .hidden { color: #999; }
"""


@dataclass(frozen=True)
class ReportOptions:
    """How much the page holds: resamples of the intervals, cases per quadrant, excluded tags."""

    resamples: int = RESAMPLES
    seed: int = SEED
    cases: int = 3
    exclude_tags: tuple[str, ...] = ()


def _e(text: Any) -> str:
    return html.escape("" if text is None else str(text))


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], left: int = 1) -> str:
    """An HTML table; the first ``left`` columns are text (left-aligned), the rest numbers."""
    head = "".join(f'<th class="l">{_e(h)}</th>' if i < left else f"<th>{_e(h)}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="l">{c}</td>' if i < left else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _est(est: Any, digits: int = 3) -> str:
    """A value with its interval below it (— when undefined)."""
    if est is None or getattr(est, "value", None) is None:
        return DASH
    value = f"{est.value:.{digits}f}"
    if est.lo is None:
        return value
    return f'{value}<br><span class="ci">[{est.lo:.{digits}f}, {est.hi:.{digits}f}]</span>'


def _count(est: Any) -> str:
    value = getattr(est, "value", est)
    return DASH if value is None else f"{int(value):,}"


def _run_section(run: Run, report: LedgerReport, manifest: str) -> str:
    gens = stored_generations(run.config)
    models = (", ".join(f"{label} ({g['model']})" if label else g["model"] for label, g in gens.items())
              if gens else "no model (a sweep without generation)")
    facts = [("dataset", run.dataset), ("retriever", run.retriever or DASH),
             ("model" if len(gens) < 2 else "models", models),
             ("score", report.score), ("jobs", f"{report.jobs_done:,} of {report.jobs_total:,} done"),
             ("intervals", f"95% Poisson bootstrap, {report.resamples:,} resamples, seed {report.seed}"),
             ("planned", run.created_at)]
    if report.excluded:
        facts.append(("excluded", f"{report.excluded} samples tagged {', '.join(report.exclude_tags)}"))
    if report.sequential is not None:
        facts.append(("sequential", summary_line(report.sequential)))
        facts.append(("intervals", "the sequential table's: confidence sequences for each cell's S_llm over all "
                                   f"{report.sequential.population:,} samples, valid at any stopping time; the "
                                   "bootstrap intervals are over each cell's answered samples and do not hold "
                                   "under stopping"))
    rows = "".join(f'<tr><th class="l">{_e(k)}</th><td class="l">{_e(v)}</td></tr>' for k, v in facts)
    config = json.dumps(run.config, indent=2, ensure_ascii=False, sort_keys=True)
    warnings = "".join(f"<p>⚠ {_e(w)}</p>" for w in report.warnings)
    return (f"<h2>The run</h2><table>{rows}</table>{warnings}{manifest}"
            f"<details><summary>Full configuration</summary><pre>{_e(config)}</pre></details>")


def _manifest_block(store: Store, run: Run) -> str:
    """What the run was made with (``runs show``): open, since a reader of a number should see it."""
    try:
        lines = manifest_lines(get_manifest(store, run.id))
    except NotFound:
        return f'<p class="meta">Manifest: {_e(NO_MANIFEST)}.</p>'
    return f"<details open><summary>Manifest</summary><pre>{_e(chr(10).join(lines))}</pre></details>"


def _ledger_section(report: LedgerReport) -> str:
    key = lambda r: (r["format"], r["budget"], r["k"])  # noqa: E731
    rows = sorted(report.rows, key=key)
    several = any("model" in r for r in rows)      # a run of several models: a row per (model, cell)
    head = ["model", "K", "B", "format"] if several else ["K", "B", "format"]
    cells = lambda r: ([_e(r["model"])] if several else []) + [_e(r["k"]), _e(r["budget"]), _e(r["format"])]  # noqa: E731
    out = ["<h2>Ledger</h2>", "<h3>Retrieval and interface</h3>",
           _table([*head, *RETRIEVAL_TERMS],
                  [cells(r) + [_count(r["n"])] + [_est(r[t], 1 if t in ("K_eff", "evidence_tokens") else 3)
                                                  for t in RETRIEVAL_TERMS[1:]] for r in rows], left=len(head)),
           "<h3>Reasoning, dissipation and leakage</h3>",
           _table([*head, *REASONING_TERMS], [cells(r) + [_est(r[t]) for t in REASONING_TERMS]
                                                         for r in rows], left=len(head))]
    if report.sequential is not None:
        s = report.sequential
        best = s.config.rule == "best"
        seq = []
        for r in rows:
            q = r["sequential"]
            seq.append(cells(r) + [f"{q['answered']:,} of {q['of']:,}",
                                   DASH if q["lo"] is None else f"[{q['lo']:.3f}, {q['hi']:.3f}]",
                                   _e((q["stopped"] or "asked")
                                      + ("" if q["stopped_at_round"] is None else f" (round {q['stopped_at_round']:,})")
                                      + (f" = {q['same_as']}" if q.get("same_as") else ""))]
                       + ([_e(versus_words(s, r["cell_id"]) or DASH)] if best else []))
        out += [f"<h3>Sequential ({_e(s.config.describe())})</h3><p class=\"meta\">{_e(summary_line(s))}</p>",
                _table([*head, "answered", "full-run S_llm", "stopped"]
                       + (["settled on"] if best else []), seq, left=len(head))]
    if report.claims:
        cfg = report.claims["config"]
        out += [f"<h3>Claims</h3><p class=\"meta\">claim run {report.claims['claim_run']}: "
                f"{_e(cfg.get('decomposer'))} decomposer, verifiers {_e(', '.join(cfg.get('verifiers', [])))}; "
                f"{report.claims['done']} of {report.claims['jobs']} answers verified</p>",
                _table([*head, "answers", *LEDGER_METRICS],
                       [cells(r) + [_e(r.get("claims_n", 0))] + [_est(r.get(m)) for m in LEDGER_METRICS]
                        for r in rows], left=len(head))]
    if report.oracle:
        out += ["<h3>Oracle controls (only p*)</h3>",
                _table(["B", "n", "Acc_struct", "Acc_linear", "L_struct", "p* visible"],
                       [[_e(o["budget"]), _count(o["n"]), _est(o["Acc_struct"]), _est(o["Acc_linear"]),
                         _est(o["L_struct"]), DASH if o["p_star_visible"] is None else f"{o['p_star_visible']:.3f}"]
                        for o in report.oracle], left=1)]
    return "\n".join(out)


def _figures_section(report: LedgerReport) -> str:
    out = ["<h2>Figures</h2>"]
    if report.rows:
        budget = max(r["budget"] for r in report.rows)
        for fmt in dict.fromkeys(r["format"] for r in report.rows):
            out.append(f"<figure>{figures.inline_svg(figures.main_figure(report.rows, budget=budget, fmt=fmt))}"
                       "</figure>")
    if report.oracle:
        out.append(f"<figure>{figures.inline_svg(figures.oracle_figure(report.oracle))}</figure>")
    return "\n".join(out)


def _triage_section(store: Store, run: Run) -> str:
    tagged = tagged_samples(store, run.dataset_id)
    if not tagged:
        return "<h2>Triage</h2><p class=\"meta\">No sample of this dataset is tagged.</p>"
    return "<h2>Triage</h2>" + _table(
        ["sample", "tags", "note", "question", "answers"],
        [[_e(t["sample_id"]), _e(", ".join(t["tags"])), _e(t["note"]), _e(t["question"]),
          _e(" | ".join(t["answers"]))] for t in tagged], left=5)


def _highlighted_cell(report: LedgerReport) -> str | None:
    """The cell whose cases the page shows: the largest budget, linear if there is one, the largest K."""
    if not report.rows:
        return None
    budget = max(r["budget"] for r in report.rows)
    at = [r for r in report.rows if r["budget"] == budget]
    fmt = "linear" if any(r["format"] == "linear" for r in at) else at[0]["format"]
    return max((r for r in at if r["format"] == fmt), key=lambda r: r["k"])["cell_id"]


def _case(detail: SampleDetail) -> str:
    s, ev = detail.sample, detail.event
    score = DASH if ev["score"] is None else f"{ev['score']:g}"
    lines = []
    for line in detail.evidence:
        cls = "gold" if line.gold else ""
        cls += " " + line.state if line.state != "visible" else ""
        lines.append(f'<span class="{cls.strip()}">{_e(line.label)} {_e(line.text)}</span>')
    prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in detail.messages)
    tags = f" · tags: {_e(', '.join(detail.tags))}" if detail.tags else ""
    return (f"<details><summary><b>{_e(s.id)}</b> · {_e(s.question)} · H_set {ev['h_set']} · H_vis {ev['h_vis']}"
            f" · score {score}{tags}</summary>"
            f"<p>answers: {_e(' | '.join(s.answers))}</p>"
            f"<p>Evidence in window order (gold in bold; <span class=\"cut\">cut</span>, "
            f"<span class=\"hidden\">past the budget</span>):</p><pre>{'<br>'.join(lines) or DASH}</pre>"
            f"<p>Prompt:</p><pre>{_e(prompt)}</pre>"
            f"<p>Output:</p><pre>{_e(detail.output if detail.output is not None else ev['prediction'])}</pre>"
            "</details>")


def _cases_section(store: Store, run: Run, report: LedgerReport, per_quadrant: int) -> str:
    cell = _highlighted_cell(report)
    if cell is None or per_quadrant <= 0:
        return ""
    out = [f"<h2>Cases</h2><p class=\"meta\">Cell {_e(cell)}: up to {per_quadrant} samples per quadrant.</p>"]
    for quadrant in CASE_QUADRANTS:
        page = list_samples(store, run, cell, quadrant=quadrant, limit=per_quadrant)
        out.append(f"<h3>{_e(quadrant)} <span class=\"meta\">({_e(QUADRANTS[quadrant][1])}; "
                   f"{page.total:,} samples)</span></h3>")
        out += [_case(sample_detail(store, run, row.sid, cell)) for row in page.rows] or [f"<p>{DASH}</p>"]
    return "\n".join(out)


def _judges_section(store: Store, run: Run, options: ReportOptions) -> str:
    """Each judge of the run against the human labels, and the judged metrics corrected (only with labels)."""
    parts = []
    for kind, label_kind in (("claims", "claim"), ("answers", "answer")):
        if not label_count(store.conn, label_kind, run.id):
            continue
        if kind == "claims" and latest_claim_run(store, run) is None:
            continue
        r = judge_report(store, kind, run.name, resamples=options.resamples, seed=options.seed)
        who = ", ".join(f"{_e(a)} {n}" for a, n in r.annotators.items())
        parts += [f"<h3>{_e(kind.capitalize())}: {_e(r.source)}</h3>",
                  f'<p class="meta">{r.labelled_items} of {r.items} labelled ({r.uniform_items} from the uniform '
                  f"queue) by {who}. Confusion: the human label as the truth; κ with its 95% bootstrap CI.</p>",
                  _table(AGREEMENT_COLUMNS, [agreement_cells(j, estimate=_est, text=_e) for j in r.agreement]),
                  f'<p class="meta">{_e(METRIC[r.kind])}: naive (the judge alone), human-only and '
                  "prediction-powered (PPI++), 95% CLT intervals, uniform labels only.</p>",
                  _table(ESTIMATE_COLUMNS, [estimate_cells(e, estimate=_est, text=_e) for e in r.estimates])]
    preferences = preference_rows(store, resamples=options.resamples, seed=options.seed)
    if preferences:
        parts += ["<h3>Checkers against people's preferences</h3>",
                  '<p class="meta">Each meta set\'s scorers (<code>workbench meta report</code>): the score of '
                  "response 2 minus response 1 against each annotator's overall preference, Pearson and Spearman "
                  "×100 with 95% bootstrap CIs over instances.</p>",
                  _table(PREFERENCE_COLUMNS, [preference_cells(name, r, estimate=lambda e: _est(e, 2), text=_e)
                                              for name, r in preferences])]
    return "<h2>Judges against human labels</h2>" + "\n".join(parts) if parts else ""


def _compare_section(store: Store, run: Run, other: str, options: ReportOptions) -> str:
    comparison = compare_runs(store, run.name, other, resamples=options.resamples, seed=options.seed)
    return f"<h2>Compared with {_e(other)}</h2><pre>{_e(render_comparison(comparison))}</pre>"


def build_report(store: Store, run: Run, *, compare_with: str | None = None,
                 options: ReportOptions = ReportOptions()) -> str:
    """The run's report as one HTML document (a string) that references nothing outside itself."""
    report = run_ledger(store, run, resamples=options.resamples, seed=options.seed,
                        exclude_tags=list(options.exclude_tags))
    try:
        workbench_version = version("dissipation-workbench")
    except PackageNotFoundError:
        workbench_version = "unknown"
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    parts = [f"<h1>Run {_e(run.name)}</h1>",
             f'<p class="meta">Dissipation Workbench {_e(workbench_version)} · generated {_e(stamp)}</p>',
             _run_section(run, report, _manifest_block(store, run)), _figures_section(report),
             _ledger_section(report), _judges_section(store, run, options),
             _triage_section(store, run), _cases_section(store, run, report, options.cases)]
    if compare_with:
        parts.append(_compare_section(store, run, compare_with, options))
    body = "\n".join(p for p in parts if p)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>Dissipation Workbench · {_e(run.name)}</title><style>{_CSS}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")
