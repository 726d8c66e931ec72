"""A run's ledger: events from the store turned into per-cell arrays, then the ledger's terms (docs/design.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from workbench.metrics.ledger import TERMS, CellArrays, Estimate, compute_ledger, paired_difference
from workbench.metrics.oracle import oracle_terms
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
    sids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # the samples, in array order


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
    claims: dict[str, Any] | None = None    # the claim run whose metrics the rows carry: id, config
    warnings: list[str] = field(default_factory=list)   # recorded when the run was planned


_CACHE_MIN_EVENTS = 20_000  # smaller runs scan faster than they would read and write the cache


def load_run_arrays(store: Store, run: Run, score: str | None = None, exclude: set[int] = frozenset()) -> RunArrays:
    """Load a run's events as per-cell arrays aligned on the run's samples (sid order).

    ``score`` other than the run's own re-scores stored predictions. ``exclude`` drops
    samples (by sid) from every cell, e.g. those tagged annotation-error. Large runs are
    read from ``run_arrays``, rebuilt whenever ``runs.events_version`` has moved.
    """
    score_name = score or run.config.get("score", "acc")
    cells = {cid: Cell(kind, budget, fmt, k=k, shuffle=m) for cid, kind, k, budget, fmt, m in store.conn.execute(
        "SELECT cell_id, kind, k, budget, format, shuffle FROM cells WHERE run_id = ?", (run.id,))}
    if score_name != run.config.get("score", "acc"):
        sids, raw = _rescored(store, run, cells, get_scorer(score_name))
    else:
        sids, raw = _cached_or_scanned(store, run, cells)
    keep = ~np.isin(sids, np.fromiter(exclude, dtype=np.int64)) if exclude else slice(None)
    arrays = {cid: CellArrays(h_set=ints[0][keep], h_vis=ints[1][keep], k_eff=ints[2][keep],
                              evidence_tokens=ints[3][keep], truncated=ints[4][keep], score=scores[keep])
              for cid, (ints, scores) in raw.items()}
    return RunArrays(run, cells, arrays, score_name, np.asarray(sids, dtype=np.int64)[keep])


def _scan(store: Store, run: Run, cells) -> tuple[np.ndarray, dict]:
    """Read every cell's events with one indexed query per cell, vectorized."""
    per_cell = {}
    for cid in cells:
        rows = store.conn.execute(
            "SELECT sid, h_set, h_vis, k_eff, evidence_tokens, truncated, ifnull(score, -1.0)"
            " FROM events WHERE run_id = ? AND cell_id = ? ORDER BY sid", (run.id, cid)).fetchall()
        per_cell[cid] = np.array(rows, dtype=np.float64).reshape(-1, 7)
    sids = np.unique(np.concatenate([a[:, 0] for a in per_cell.values()])) if per_cell else np.zeros(0)
    sids = sids.astype(np.int64)
    raw = {}
    for cid, a in per_cell.items():
        pos = np.searchsorted(sids, a[:, 0].astype(np.int64))
        ints = np.zeros((5, len(sids)), dtype=np.int32)
        ints[:, pos] = a[:, 1:6].T
        scores = np.full(len(sids), np.nan)
        scores[pos] = np.where(a[:, 6] < 0, np.nan, a[:, 6])  # -1 stands for NULL (scores are in [0, 1])
        raw[cid] = (ints, scores)
    return sids, raw


def _cached_or_scanned(store: Store, run: Run, cells) -> tuple[np.ndarray, dict]:
    version = store.conn.execute("SELECT events_version FROM runs WHERE id = ?", (run.id,)).fetchone()[0]
    rows = store.conn.execute("SELECT cell_id, version, n, sids, ints, scores FROM run_arrays WHERE run_id = ?",
                              (run.id,)).fetchall()
    if rows and len(rows) == len(cells) and all(r[1] == version for r in rows):
        sids = np.frombuffer(rows[0][3], dtype=np.int32).astype(np.int64)
        return sids, {cid: (np.frombuffer(ints, dtype=np.int32).reshape(5, n), np.frombuffer(scores, dtype=np.float64))
                      for cid, _, n, _, ints, scores in rows}
    sids, raw = _scan(store, run, cells)
    if len(sids) * len(cells) >= _CACHE_MIN_EVENTS and not store.readonly:  # a read-only file keeps no cache
        sid_blob = sids.astype(np.int32).tobytes()
        with store.transaction() as conn:
            # Built from data read at `version`: a write since then has moved the version on,
            # so a stale cache is never taken for fresh. Another reader may have written the
            # same version meanwhile: then there is nothing to do.
            current = conn.execute("SELECT count(*) FROM run_arrays WHERE run_id = ? AND version = ?",
                                   (run.id, version)).fetchone()[0]
            if current == len(cells):
                return sids, raw
            conn.execute("DELETE FROM run_arrays WHERE run_id = ?", (run.id,))
            conn.executemany(
                "INSERT INTO run_arrays (run_id, cell_id, version, n, sids, ints, scores) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(run.id, cid, version, len(sids), sid_blob, ints.tobytes(), scores.tobytes())
                 for cid, (ints, scores) in raw.items()])
    return sids, raw


def _rescored(store: Store, run: Run, cells, scorer) -> tuple[np.ndarray, dict]:
    """Like :func:`_scan`, with every stored prediction scored again by ``scorer``."""
    sids, raw = _scan(store, run, cells)
    samples = {s.sid: s for s in load_samples(store, run.dataset_id)}
    pos = {int(sid): i for i, sid in enumerate(sids)}
    for cid, sid, prediction in store.conn.execute(
            "SELECT cell_id, sid, prediction FROM events WHERE run_id = ? AND prediction IS NOT NULL", (run.id,)):
        s = samples[sid]
        raw[cid][1][pos[sid]] = scorer(prediction, s.answers, s.aliases)
    return sids, raw


def cell_sort_key(cell: Cell):
    """The ledger's order of cells: by format, budget, K, then shuffle."""
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
    report.warnings = list(run.config.get("warnings", []))
    # From the arrays, not a count over events (5M rows on a large run): a done job has a score.
    report.jobs_total = sum(len(a.score) for a in ra.arrays.values())
    report.jobs_done = int(sum(np.count_nonzero(~np.isnan(a.score)) for a in ra.arrays.values()))
    report.excluded = len(excluded)
    report.exclude_tags = list(exclude_tags)
    retrieval = {cid: c for cid, c in ra.cells.items() if c.kind == "retrieval"}
    ledger = compute_ledger({cid: ra.arrays[cid] for cid in retrieval}, resamples=resamples, seed=seed)
    for cid, cell in sorted(retrieval.items(), key=lambda kv: cell_sort_key(kv[1])):
        report.rows.append({"cell_id": cid, "k": cell.k, "budget": cell.budget, "format": cell.format,
                            **{t: ledger[cid][t] for t in TERMS}})
    _attach_claims(store, run, report, excluded, resamples, seed)
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


def _attach_claims(store: Store, run: Run, report: LedgerReport, excluded, resamples: int, seed: int) -> None:
    """Add the latest claim run's per-cell metrics (support ratio, faithfulness, ...) to the rows."""
    from workbench.claims.report import LEDGER_METRICS, claims_by_cell, latest_claim_run

    info = latest_claim_run(store, run)
    if info is None:
        return
    by_cell = claims_by_cell(store, run, info.id, exclude=excluded, resamples=resamples, seed=seed)
    report.claims = {"claim_run": info.id, "config": info.config, "jobs": info.jobs, "done": info.done}
    for row in report.rows:
        cell = by_cell.get(row["cell_id"])
        row["claims_n"] = cell["jobs"] if cell else 0
        for name in LEDGER_METRICS:
            m = cell.get(name) if cell else None
            row[name] = Estimate(m.mean, m.low, m.high) if m is not None else Estimate(None, None, None)


def cell_difference(store: Store, run: Run, a: str, b: str, term: str, *, score: str | None = None,
                    resamples: int = 2000, seed: int = 0, exclude_tags: Sequence[str] = ()) -> Estimate:
    """Paired-bootstrap difference term(a) − term(b) between two cells of one run."""
    from workbench.triage import sids_with_tags

    ra = load_run_arrays(store, run, score, sids_with_tags(store, run.dataset_id, exclude_tags))
    for cid in (a, b):
        if cid not in ra.arrays:
            raise ValueError(f"no cell {cid!r} in run {run.name!r} (e.g. {next(iter(ra.arrays), 'none')})")
    if term not in TERMS:
        raise ValueError(f"unknown term {term!r}; choose from {', '.join(TERMS)}")
    return paired_difference(ra.arrays, a, b, term, resamples=resamples, seed=seed)


def cell_order(store: Store, run: Run) -> list[str]:
    """The run's cell ids in ledger order: retrieval cells by (format, budget, K), then oracle cells."""
    cells = [Cell(kind, budget, fmt, k=k, shuffle=m) for kind, k, budget, fmt, m in store.conn.execute(
        "SELECT kind, k, budget, format, shuffle FROM cells WHERE run_id = ?", (run.id,))]
    return [c.cell_id for c in sorted(cells, key=lambda c: (c.kind != "retrieval", cell_sort_key(c)))]


def first_cell(store: Store, run: Run) -> str:
    """The run's first retrieval cell in ledger order (format, budget, K): the samples view's default."""
    order = cell_order(store, run)
    if not order:
        raise ValueError(f"run {run.name!r} has no cells")
    return order[0]
