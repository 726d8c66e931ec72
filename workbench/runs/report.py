"""A run's ledger: events from the store turned into per-cell arrays, then DESIGN §3 terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from workbench.metrics.ledger import TERMS, CellArrays, Estimate, compute_ledger, oracle_terms, paired_difference
from workbench.metrics.scoring import get_scorer
from workbench.runs.cells import Cell
from workbench.store.db import Store
from workbench.store.queries import Run, load_samples


@dataclass
class RunArrays:
    """Every cell of a run as arrays aligned on the run's samples (in sid order)."""

    run: Run
    cells: dict[str, Cell]
    arrays: dict[str, CellArrays]
    score_name: str


@dataclass
class LedgerReport:
    """The ledger of a run: one row per retrieval cell, plus oracle rows per budget."""

    run: str
    dataset: str
    score: str
    resamples: int
    seed: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    oracle: list[dict[str, Any]] = field(default_factory=list)
    jobs_done: int = 0
    jobs_total: int = 0
    excluded: int = 0
    exclude_tags: list[str] = field(default_factory=list)


def load_run_arrays(store: Store, run: Run, score: str | None = None, exclude: set[int] = frozenset()) -> RunArrays:
    """Load a run's events. ``score`` other than the run's own re-scores stored predictions.

    ``exclude`` drops samples (by sid) from every cell, e.g. those tagged annotation-error.
    """
    score_name = score or run.config.get("score", "acc")
    # The run's samples (a --limit run covers only the first N), aligned by position.
    kept = [sid for (sid,) in store.conn.execute(
        "SELECT DISTINCT sid FROM events WHERE run_id = ? ORDER BY sid", (run.id,)) if sid not in exclude]
    index = {sid: i for i, sid in enumerate(kept)}
    n = len(index)
    cells = {cid: Cell(kind, budget, fmt, k=k, shuffle=m) for cid, kind, k, budget, fmt, m in store.conn.execute(
        "SELECT cell_id, kind, k, budget, format, shuffle FROM cells WHERE run_id = ?", (run.id,))}
    raw = {cid: np.zeros((6, n)) for cid in cells}
    for a in raw.values():
        a[5] = np.nan
    rescore = score_name != run.config.get("score", "acc")
    scorer = get_scorer(score_name) if rescore else None
    samples = {s.sid: s for s in load_samples(store, run.dataset_id)} if rescore else {}
    for cid, sid, h_set, h_vis, k_eff, tokens, trunc, value, prediction in store.conn.execute(
            "SELECT cell_id, sid, h_set, h_vis, k_eff, evidence_tokens, truncated, score, prediction"
            " FROM events WHERE run_id = ?", (run.id,)):
        if rescore and prediction is not None:
            s = samples[sid]
            value = scorer(prediction, s.answers, s.aliases)
        if sid in exclude:
            continue
        raw[cid][:, index[sid]] = (h_set, h_vis, k_eff, tokens, trunc, np.nan if value is None else value)
    arrays = {cid: CellArrays(h_set=a[0], h_vis=a[1], k_eff=a[2], evidence_tokens=a[3], truncated=a[4], score=a[5])
              for cid, a in raw.items()}
    return RunArrays(run, cells, arrays, score_name)


def _cell_sort_key(cell: Cell):
    return (cell.format, cell.budget, cell.k or 0, cell.shuffle if cell.shuffle is not None else -1)


def run_ledger(store: Store, run: Run, *, score: str | None = None, resamples: int = 2000,
               seed: int = 0, exclude_tags: Sequence[str] = ()) -> LedgerReport:
    """Compute the ledger of every retrieval cell and the oracle controls of every budget.

    Samples tagged with any of ``exclude_tags`` are left out of every term.
    """
    from workbench.triage import sids_with_tags

    excluded = sids_with_tags(store, run.dataset_id, exclude_tags)
    ra = load_run_arrays(store, run, score, excluded)
    report = LedgerReport(run.name, run.dataset, ra.score_name, resamples, seed)
    report.excluded = len(excluded)
    report.exclude_tags = list(exclude_tags)
    report.jobs_total, report.jobs_done = store.conn.execute(
        "SELECT count(*), coalesce(sum(status = 'done'), 0) FROM events WHERE run_id = ?", (run.id,)).fetchone()
    retrieval = {cid: c for cid, c in ra.cells.items() if c.kind == "retrieval"}
    ledger = compute_ledger({cid: ra.arrays[cid] for cid in retrieval}, resamples=resamples, seed=seed)
    for cid, cell in sorted(retrieval.items(), key=lambda kv: _cell_sort_key(kv[1])):
        report.rows.append({"cell_id": cid, "k": cell.k, "budget": cell.budget, "format": cell.format,
                            **{t: ledger[cid][t] for t in TERMS}})
    for budget in sorted({c.budget for c in ra.cells.values() if c.kind == "oracle"}):
        struct = next(cid for cid, c in ra.cells.items() if c.kind == "oracle" and c.budget == budget
                      and c.format == "struct")
        linear = sorted((c.shuffle, cid) for cid, c in ra.cells.items()
                        if c.kind == "oracle" and c.budget == budget and c.format == "linear")
        real = {cid: ra.arrays[cid] for cid, c in retrieval.items() if c.budget == budget and c.format == "linear"}
        terms = oracle_terms(ra.arrays[struct].score, np.vstack([ra.arrays[cid].score for _, cid in linear]),
                             real or None, resamples=resamples, seed=seed)
        noise = [{"cell_id": cid, "k": retrieval[cid].k, "n": terms["n_noise"][cid], "L_noise": terms["L_noise"][cid],
                  "L_noise_unpaired": terms["L_noise_unpaired"][cid]}
                 for cid in sorted(real, key=lambda c: retrieval[c].k)]
        report.oracle.append({"budget": budget, "p_star_visible": float(np.mean(ra.arrays[struct].h_vis)),
                              **{t: terms[t] for t in ("n", "Acc_struct", "Acc_linear", "L_struct")},
                              "L_noise": noise})
    return report


def cell_difference(store: Store, run: Run, a: str, b: str, term: str, *, score: str | None = None,
                    resamples: int = 2000, seed: int = 0) -> Estimate:
    """Paired-bootstrap difference term(a) − term(b) between two cells of one run."""
    ra = load_run_arrays(store, run, score)
    for cid in (a, b):
        if cid not in ra.arrays:
            raise ValueError(f"no cell {cid!r} in run {run.name!r} (e.g. {next(iter(ra.arrays), 'none')})")
    if term not in TERMS:
        raise ValueError(f"unknown term {term!r}; choose from {', '.join(TERMS)}")
    return paired_difference(ra.arrays, a, b, term, resamples=resamples, seed=seed)


def first_cell(store: Store, run: Run) -> str:
    """The run's first retrieval cell in ledger order (format, budget, K): the samples view's default."""
    cells = [Cell(kind, budget, fmt, k=k, shuffle=m) for kind, k, budget, fmt, m in store.conn.execute(
        "SELECT kind, k, budget, format, shuffle FROM cells WHERE run_id = ?", (run.id,))]
    retrieval = [c for c in cells if c.kind == "retrieval"] or cells
    if not retrieval:
        raise ValueError(f"run {run.name!r} has no cells")
    return min(retrieval, key=_cell_sort_key).cell_id
