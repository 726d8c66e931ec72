"""A run's ledger: events from the store turned into per-cell arrays, then the ledger's terms (docs/design.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from workbench.metrics.ledger import (
    STATE_COLUMNS,
    TERMS,
    CellArrays,
    Estimate,
    difference_from_states,
    ledger_from_states,
    point_values,
    state_scored,
    terms_from_state,
)
from workbench.metrics.oracle import oracle_estimates
from workbench.metrics.scoring import get_scorer
from workbench.metrics.stats import RESAMPLES, SEED, check_bootstrap_args
from workbench.runs.aggregate import LedgerReader, Verification, verify
from workbench.runs.cells import Cell, run_cells
from workbench.runs.sequential import SequentialStatus, sequential_status
from workbench.store.db import Store
from workbench.store.ledger_state import state_header
from workbench.store.queries import Run, load_samples
from workbench.triage import sids_with_tags

_SCORED_ROWS = STATE_COLUMNS.index("scored.m")
_ALL_ROWS = STATE_COLUMNS.index("all.m")


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
    # A sequential run's standing (rows then carry each cell's "sequential" block); None for another run.
    sequential: SequentialStatus | None = None


def load_run_arrays(store: Store, run: Run, score: str | None = None, exclude: set[int] = frozenset()) -> RunArrays:
    """Load a run's events as per-cell arrays aligned on the run's samples (sid order), by one scan.

    For a caller that needs the samples themselves (``compare`` pairs two runs sample by
    sample); the ledger reads its incremental state instead (:mod:`workbench.runs.aggregate`).
    ``score`` other than the run's own re-scores stored predictions. ``exclude`` drops
    samples (by sid) from every cell, e.g. those tagged annotation-error.
    """
    score_name = score or run.config.get("score", "acc")
    cells = run_cells(store, run.id)
    if score_name != run.config.get("score", "acc"):
        sids, raw = _rescored(store, run, cells, get_scorer(score_name))
    else:
        sids, raw = _scan(store, run, cells)
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


def _model_rank(models: list[str], cell: Cell) -> int:
    """Where ``cell``'s model comes in the run's ``--model`` order (0 in a run of one model)."""
    return models.index(cell.model) if cell.model in models else 0


def ledger_reader(store: Store, run: Run, *, score: str | None = None, resamples: int = RESAMPLES,
                  seed: int = SEED, persist_every: int = 1, persist: bool = True) -> LedgerReader:
    """A reader of the run's incremental ledger state keeping at least ``resamples`` replicates.

    ``persist_every=1`` (a one-shot reader: the CLI) saves the state after any change it
    applied; a long-lived reader (the TUI) passes more. ``persist=False``: a throwaway
    reader (a quick preview) with ``resamples`` exactly, that saves nothing.
    """
    if not persist:
        return LedgerReader(store, run, score=score, seed=seed, resamples=resamples, persist=False)
    return LedgerReader(store, run, score=score, seed=seed, resamples=max(resamples, RESAMPLES),
                        persist_every=persist_every)


def saved_state_exists(store: Store, run: Run, *, score: str | None = None, seed: int = SEED) -> bool:
    """Whether the run has a saved ledger state (its ledger then reads in O(cells × resamples))."""
    head = state_header(store.conn, run.id, score or run.config.get("score", "acc"), seed)
    return head is not None and head.watermark is not None


def run_ledger(store: Store, run: Run, *, score: str | None = None, resamples: int = RESAMPLES,
               seed: int = SEED, exclude_tags: Sequence[str] = (), reader: LedgerReader | None = None) -> LedgerReport:
    """Compute the ledger of every retrieval cell and the oracle controls of every budget.

    Samples tagged with any of ``exclude_tags`` are left out of every term. The terms come
    from the run's incremental state (``reader``, or a one-shot one): a read costs the
    events changed since the state was saved, not a scan of the run.
    """
    check_bootstrap_args(resamples, 0.05)
    excluded = sids_with_tags(store, run.dataset_id, exclude_tags)
    reader = reader or ledger_reader(store, run, score=score, resamples=resamples, seed=seed)
    state = reader.refresh(excluded, store=store)
    cells = reader.cells
    report = LedgerReport(run.name, run.dataset, reader.score_name, resamples, seed)
    report.warnings = list(run.config.get("warnings", []))
    # Terms the run's data cannot give are undefined, not 0: e.g. a run imported without gold
    # paths (`import --from ragchecker`) stores H_set = H_vis = 0 meaning "unknown".
    undefined = undefined_terms(run)

    def cell_state(cid: str) -> tuple[np.ndarray, np.ndarray | None]:
        sums = state.sums[f"cell:{cid}"]
        return sums.sums, (sums.reps[:resamples] if resamples else None)

    every = [cell_state(cid)[0] for cid in cells]
    # From the sums, not a count over events (5M rows on a large run): a done job has a score.
    report.jobs_total = int(round(sum(p[_ALL_ROWS] for p in every)))
    report.jobs_done = int(round(sum(p[_SCORED_ROWS] for p in every)))
    report.excluded = len(excluded)
    report.exclude_tags = list(exclude_tags)
    retrieval = {cid: c for cid, c in cells.items() if c.kind == "retrieval"}
    ledger = ledger_from_states({cid: cell_state(cid) for cid in retrieval})
    models = list(run.config.get("generations") or ())
    for cid, cell in sorted(retrieval.items(), key=lambda kv: (cell_sort_key(kv[1]), _model_rank(models, kv[1]))):
        # A run of several models names each cell's model; a run of one keeps its rows as they were.
        named = {"model": cell.model} if cell.model is not None else {}
        report.rows.append({"cell_id": cid, **named, "k": cell.k, "budget": cell.budget, "format": cell.format,
                            **{t: Estimate(None, None, None) if t in undefined else ledger[cid][t]
                               for t in TERMS}})
    report.sequential = sequential_status(store, run)
    if report.sequential is not None:
        for row in report.rows:
            row["sequential"] = report.sequential.cell_record(row["cell_id"])
    _attach_claims(store, run, report, excluded, resamples, seed)
    for key, group in state.groups.items():
        if group.kind != "oracle":
            continue
        sums = state.sums[key]
        noise = {g.cells[0]: (state.sums[k].sums, state.sums[k].reps[:resamples] if resamples else None)
                 for k, g in state.groups.items() if g.kind == "noise" and g.cells[1:] == group.cells[1:]}
        acc_hit = {}
        for cid in noise:
            point, reps = cell_state(cid)
            scored = state_scored(point)
            acc_hit[cid] = (point_values(terms_from_state(point, scored))["Acc_hit"],
                            None if reps is None else terms_from_state(reps, scored)["Acc_hit"])
        terms = oracle_estimates((sums.sums, sums.reps[:resamples] if resamples else None), noise, acc_hit)
        rows = sums.sums[0]
        noise_rows = [{"cell_id": cid, "k": retrieval[cid].k, "n": terms["n_noise"][cid], "L_noise": terms["L_noise"][cid],
                       "L_noise_unpaired": terms["L_noise_unpaired"][cid]}
                      for cid in sorted(noise, key=lambda c: retrieval[c].k)]
        report.oracle.append({"budget": cells[group.cells[0]].budget,
                              "p_star_visible": float(sums.sums[3] / rows) if rows else None,
                              **{t: terms[t] for t in ("n", "Acc_struct", "Acc_linear", "L_struct")},
                              "L_noise": noise_rows})
    report.oracle.sort(key=lambda o: o["budget"])
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
                    resamples: int = RESAMPLES, seed: int = SEED, exclude_tags: Sequence[str] = (),
                    reader: LedgerReader | None = None) -> Estimate:
    """Paired-bootstrap difference term(a) − term(b) between two cells of one run (from the ledger state)."""
    reader = reader or ledger_reader(store, run, score=score, resamples=resamples, seed=seed)
    state = reader.refresh(sids_with_tags(store, run.dataset_id, exclude_tags), store=store)
    for cid in (a, b):
        if f"cell:{cid}" not in state.sums:
            raise ValueError(f"no cell {cid!r} in run {run.name!r} (e.g. {next(iter(reader.cells), 'none')})")
    if term not in TERMS:
        raise ValueError(f"unknown term {term!r}; choose from {', '.join(TERMS)}")
    if term in undefined_terms(run):
        return Estimate(None, None, None)
    pick = lambda cid: (state.sums[f"cell:{cid}"].sums, state.sums[f"cell:{cid}"].reps[:resamples] if resamples else None)  # noqa: E731
    return difference_from_states(pick(a), pick(b), term)


def undefined_terms(run: Run) -> set[str]:
    """Terms the run's data cannot give (e.g. no gold paths in an imported run): undefined, never 0."""
    return set(run.config.get("undefined_terms", ()))


def verify_ledger(store: Store, run: Run, *, score: str | None = None, seed: int = SEED) -> Verification:
    """``ledger --verify``: the saved state as found, caught up from the log, against a from-scratch build.

    A run with no saved state (never read, or its builder was killed) gets one built first.
    """
    if not saved_state_exists(store, run, score=score, seed=seed):
        ledger_reader(store, run, score=score, seed=seed).refresh(store=store)
    return verify(store, run, score=score, seed=seed)


def cell_order(store: Store, run: Run) -> list[str]:
    """The run's cell ids in ledger order: retrieval cells by (format, budget, K), then oracle cells."""
    cells = list(run_cells(store, run.id).values())
    return [c.cell_id for c in sorted(cells, key=lambda c: (c.kind != "retrieval", cell_sort_key(c)))]


def first_cell(store: Store, run: Run) -> str:
    """The run's first retrieval cell in ledger order (format, budget, K): the samples view's default."""
    order = cell_order(store, run)
    if not order:
        raise ValueError(f"run {run.name!r} has no cells")
    return order[0]
