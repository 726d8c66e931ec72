"""Run B against run A, cell by cell: every ledger term's paired difference, its p-value, and the flips by stage.

Pairing. Both runs' cells are put on the samples they share, and all of them are resampled
with the samples' Poisson weights (:class:`~workbench.metrics.stats.ResampledColumns`,
keyed by sid): resample r weighs each sample the same for A and for B — and as each run's
own ledger does — so ``B − A`` under resample r is a paired bootstrap draw of the
difference, and what A and B share (a sample's difficulty, the same evidence window)
cancels. Identical columns (the same retrieval and window in both runs) are stored once,
so their difference is exactly 0 in every resample.

Population. The reasoning terms need a score on both sides: a sample scored in one run
only is left out of both (the ledger's population rule, applied to the pair), so
``S_llm = Acc_hit·S_vis + Acc_miss·(1 − S_vis)`` still holds on each side of every cell.
If either cell has no score at all, the pair is compared on its retrieval and interface
terms only.

Tests. A term that is the mean of a 0/1 quantity per sample (``S_set``, ``S_vis``,
``L_iface``, ``truncated``, and ``S_llm``, ``D_mass``, ``L_leak`` when scores are 0/1) gets
the exact McNemar test; every other term (conditional accuracies, fractional scores,
claim metrics) the paired bootstrap's p-value. Across cells, each term's p-values are
Holm-adjusted; a difference is *significant* when its adjusted p is below α and its
interval excludes 0.

Flips. A sample whose score differs between the runs is attributed to the first stage
that differs: **retrieval** when ``H_set`` changed, **interface** when ``H_set`` is equal
but ``H_vis`` changed, **reasoning** when both are equal (the model saw the same gold
evidence and answered differently).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from workbench.claims.report import LEDGER_METRICS, claim_values, latest_claim_run
from workbench.compare.align import Difference, align_cells, axes_of, check_same_dataset, config_differences
from workbench.metrics.ledger import TERMS, CellArrays, ledger_bootstrap
from workbench.metrics.significance import bootstrap_p, holm, mcnemar_exact
from workbench.metrics.stats import RESAMPLES, SEED, Estimate, check_bootstrap_args, mean_and_resampled, percentile_interval
from workbench.runs.report import RunArrays, cell_sort_key, load_run_arrays, undefined_terms
from workbench.runs.sequential import sequential_status, summary_line
from workbench.store.db import Store
from workbench.store.queries import Run, get_run, load_samples

DEFAULT_TERMS: tuple[str, ...] = ("S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "Acc_miss", "D_rate")
COMPARABLE_TERMS: tuple[str, ...] = tuple(t for t in TERMS if t != "n")
CLAIM_METRICS: tuple[str, ...] = ("support_ratio", *LEDGER_METRICS)
#: +1 when more is better, −1 when less is; terms without a better direction cannot gate a regression.
BETTER: dict[str, int] = {"S_set": 1, "S_vis": 1, "S_llm": 1, "Acc_hit": 1, "L_iface": -1, "D_rate": -1,
                          "D_mass": -1, "support_ratio": 1, "faithfulness": 1, "context_utilization": 1,
                          "hallucination": -1, "noise_sensitivity_relevant": -1}
STAGES: tuple[str, ...] = ("retrieval", "interface", "reasoning")
DIRECTIONS: tuple[str, ...] = ("fail_to_pass", "pass_to_fail")


@dataclass
class TermDelta:
    """One term of one cell pair: A, B, B − A with its paired interval, and its test."""

    a: float | None
    b: float | None
    delta: Estimate
    p: float | None
    test: str | None               # "mcnemar" | "bootstrap" | None (undefined)
    p_holm: float | None = None
    significant: bool = False


@dataclass
class CellDelta:
    """A cell of A against its counterpart in B."""

    cell_a: str
    cell_b: str
    n: int                          # samples in the pair's population
    terms: dict[str, TermDelta]
    flips: dict[str, dict[str, list[str]]]  # stage → direction → sample ids
    claims: dict[str, TermDelta] = field(default_factory=dict)
    claim_samples: int = 0


@dataclass
class Comparison:
    """Run B against run A over their shared samples and aligned cells."""

    run_a: str
    run_b: str
    dataset: str
    score: str
    samples: int                    # samples both runs hold
    resamples: int
    seed: int
    alpha: float
    adjustment: str                 # how p-values are adjusted across cells
    differences: list[Difference]
    axes: list[str]
    terms: list[str]
    cells: list[CellDelta]
    claim_run_a: int | None = None
    claim_run_b: int | None = None
    # Per run (A, B) that is sequential: when its rule decided, and what (None for another run).
    sequential: dict[str, str | None] = field(default_factory=dict)


def compare_runs(store: Store, a: str, b: str, *, cells: Sequence[str] | None = None,
                 terms: Sequence[str] | None = None, cell_map: dict[str, str] | None = None,
                 score: str | None = None, resamples: int = RESAMPLES, seed: int = SEED,
                 alpha: float = 0.05) -> Comparison:
    """Compare run ``b`` against run ``a`` (both by name): see the module doc for what is computed.

    Both runs are scored by ``score`` (default: run A's scorer), re-scoring B's stored
    predictions if B was planned with another, so a scorer change is not mistaken for a
    better model.
    """
    resamples = check_bootstrap_args(resamples, alpha)
    terms = list(terms or DEFAULT_TERMS)
    unknown = [t for t in terms if t not in COMPARABLE_TERMS]
    if unknown:
        raise ValueError(f"--terms: {unknown[0]!r} is not a ledger term; choose from {', '.join(COMPARABLE_TERMS)}")
    (run_a, model_a), (run_b, model_b) = _run_part(store, a), _run_part(store, b)
    check_same_dataset(run_a, run_b)
    score = score or run_a.config.get("score", "acc")
    arrays_a = _model_part(load_run_arrays(store, run_a, score=score), model_a)
    arrays_b = _model_part(load_run_arrays(store, run_b, score=score), model_b)
    run_a, run_b = _as_one_model(run_a, model_a), _as_one_model(run_b, model_b)
    order_a, order_b = _ledger_order(arrays_a), _ledger_order(arrays_b)
    if not cells and not cell_map:   # by default the retrieval cells; oracle cells when asked for by name
        order_a = [c for c in order_a if arrays_a.cells[c].kind == "retrieval"]
    pairs = align_cells(order_a, order_b, only=cells, cell_map=cell_map, a_name=run_a.name, b_name=run_b.name)
    common, pos_a, pos_b = np.intersect1d(arrays_a.sids, arrays_b.sids, return_indices=True)
    if len(common) == 0:
        raise ValueError(f"runs {run_a.name!r} and {run_b.name!r} share no sample")
    ids = {s.sid: s.id for s in load_samples(store, run_a.dataset_id)}
    sample_ids = [ids[int(sid)] for sid in common]
    out = compare_cells({pair: (_take(arrays_a.arrays[pair[0]], pos_a), _take(arrays_b.arrays[pair[1]], pos_b))
                         for pair in pairs}, sample_ids, terms, resamples=resamples, seed=seed, alpha=alpha,
                        keys=common)
    for term in (undefined_terms(run_a) | undefined_terms(run_b)) & set(terms):
        for cell in out:  # e.g. S_vis of a run imported without gold paths: undefined, not a 0 delta
            cell.terms[term] = TermDelta(None, None, Estimate(None, None, None), None, None)
    claims_a, claims_b = latest_claim_run(store, run_a), latest_claim_run(store, run_b)
    if claims_a is not None and claims_b is not None:
        _attach_claims(store, out, claims_a.id, claims_b.id, common, resamples, seed, alpha,
                       prefixes=(f"{model_a}/" if model_a else "", f"{model_b}/" if model_b else ""))
        _adjust(out, alpha)
    differences = config_differences(run_a, run_b)
    sequential = {}
    for side, run in (("a", run_a), ("b", run_b)):
        status = sequential_status(store, run)
        sequential[side] = None if status is None else summary_line(status)
    return Comparison(run_a=run_a.name, run_b=run_b.name, dataset=run_a.dataset, score=arrays_a.score_name,
                      samples=len(common), resamples=resamples, seed=seed, alpha=alpha, adjustment="holm",
                      differences=differences, axes=axes_of(differences), terms=terms, cells=out,
                      claim_run_a=claims_a.id if claims_a and claims_b else None,
                      claim_run_b=claims_b.id if claims_a and claims_b else None, sequential=sequential)


def compare_cells(pairs: dict[tuple[str, str], tuple[CellArrays, CellArrays]], sample_ids: Sequence[str],
                  terms: Sequence[str] = DEFAULT_TERMS, *, resamples: int = RESAMPLES, seed: int = SEED,
                  alpha: float = 0.05, keys: np.ndarray | None = None) -> list[CellDelta]:
    """The term deltas (Holm-adjusted across the pairs) and flips of cell pairs already on the same samples.

    ``pairs`` maps (A cell id, B cell id) to the two cells' arrays, aligned on
    ``sample_ids``, whose sids are ``keys`` (default: positions): every pair is resampled
    with the samples' own weights, the ones the ledger of either run uses.
    """
    aligned = [_aligned_pair(a, b) for a, b in pairs.values()]
    deltas = _term_deltas(aligned, terms, resamples, seed, alpha, keys)
    ids = np.asarray(sample_ids, dtype=object)
    out = [CellDelta(ca, cb, int(_population(pa).sum()), deltas[i], _flips(pa, pb, ids))
           for i, ((ca, cb), (pa, pb)) in enumerate(zip(pairs, aligned))]
    _adjust(out, alpha)
    return out


def _run_part(store: Store, name: str) -> tuple[Run, str | None]:
    """``RUN`` (a run), or ``RUN/MODEL`` (one model's part of a run of several models): the run and the label."""
    run_name, _, label = name.partition("/")
    run = get_run(store, run_name)
    if not label:
        return run, None
    labels = list(run.config.get("generations") or ())
    if label not in labels:
        raise ValueError(f"{name!r}: run {run_name!r} has " + (f"no model {label!r} (its models: {', '.join(labels)})"
                                                               if labels else "one model: name the run alone"))
    return run, label


def _model_part(arrays: RunArrays, label: str | None) -> RunArrays:
    """The cells model ``label`` answers, by their ids without the label (aligned as another run's would be)."""
    if label is None:
        return arrays
    prefix = f"{label}/"
    keep = [cid for cid in arrays.cells if cid.startswith(prefix)]
    return RunArrays(arrays.run, {cid[len(prefix):]: arrays.cells[cid].for_model(None) for cid in keep},
                     {cid[len(prefix):]: arrays.arrays[cid] for cid in keep}, arrays.score_name, arrays.sids)


def _as_one_model(run: Run, label: str | None) -> Run:
    """``run`` as if it had been run with model ``label`` alone: named ``RUN/LABEL``, with that model's settings
    (so that the configurations' differences are the models')."""
    if label is None:
        return run
    config = {k: v for k, v in run.config.items() if k != "generations"}
    return replace(run, name=f"{run.name}/{label}", config={**config, "generation": run.config["generations"][label]})


def _ledger_order(arrays: RunArrays) -> list[str]:
    """Cell ids as the ledger lists them: retrieval cells by (format, budget, K), then oracle cells."""
    return sorted(arrays.cells, key=lambda c: (arrays.cells[c].kind != "retrieval", cell_sort_key(arrays.cells[c])))


def _take(cell: CellArrays, pos: np.ndarray) -> CellArrays:
    """The cell on the samples at ``pos`` (its arrays' positions), in that order."""
    return CellArrays(cell.h_set[pos], cell.h_vis[pos], cell.score[pos], cell.k_eff[pos], cell.evidence_tokens[pos],
                      cell.truncated[pos])


def _aligned_pair(a: CellArrays, b: CellArrays) -> tuple[CellArrays, CellArrays]:
    """Both cells on one population: samples scored on both sides (or, if either is unscored, none scored)."""
    both = ~np.isnan(a.score) & ~np.isnan(b.score)
    if not both.any():
        both = np.zeros(len(a), dtype=bool)
    return (CellArrays(a.h_set, a.h_vis, np.where(both, a.score, np.nan), a.k_eff, a.evidence_tokens, a.truncated),
            CellArrays(b.h_set, b.h_vis, np.where(both, b.score, np.nan), b.k_eff, b.evidence_tokens, b.truncated))


def _population(cell: CellArrays) -> np.ndarray:
    """The mask the terms are computed on (the ledger's rule: scored samples, if any are)."""
    scored = ~np.isnan(cell.score)
    return scored if scored.any() else np.ones(len(cell), dtype=bool)


def _per_sample(cell: CellArrays, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Over the population ``mask``: the per-sample quantity each mean term averages (ratio terms have none)."""
    s = np.nan_to_num(cell.score[mask])
    h_set, h_vis = cell.h_set[mask], cell.h_vis[mask]
    return {"S_set": h_set, "S_vis": h_vis, "L_iface": h_set - h_vis, "S_llm": s, "D_mass": (1 - s) * h_vis,
            "L_leak": s * (1 - h_vis), "truncated": cell.truncated[mask], "K_eff": cell.k_eff[mask],
            "evidence_tokens": cell.evidence_tokens[mask]}


def _term_deltas(aligned, terms, resamples: int, seed: int, alpha: float, keys=None) -> list[dict[str, TermDelta]]:
    cells = {(i, side): cell for i, pair in enumerate(aligned) for side, cell in zip("ab", pair)}
    points, boots = ledger_bootstrap(cells, resamples, seed, keys)
    out = []
    for i, (pa, pb) in enumerate(aligned):
        point_a, point_b = points[i, "a"], points[i, "b"]
        boot_a = boot_b = None
        if boots is not None:
            boot_a, boot_b = boots[i, "a"], boots[i, "b"]
        mask = _population(pa)
        per_a, per_b = _per_sample(pa, mask), _per_sample(pb, mask)
        cell = {}
        for term in terms:
            va, vb = point_a[term], point_b[term]
            point = None if va is None or vb is None else float(vb - va)
            boot = None if boot_a is None else boot_b[term] - boot_a[term]
            delta = percentile_interval(point, boot, alpha)
            p, test = None, None
            if point is not None:
                exact = mcnemar_exact(per_a[term], per_b[term]) if term in per_a else None
                if exact is not None:
                    p, test = exact, "mcnemar"
                else:
                    p = bootstrap_p(point, boot)
                    test = None if p is None else "bootstrap"
            cell[term] = TermDelta(va, vb, delta, p, test)
        out.append(cell)
    return out


def _flips(a: CellArrays, b: CellArrays, sample_ids: np.ndarray) -> dict[str, dict[str, list[str]]]:
    """Changed samples by the first stage that differs and by direction (vectorized: a run may hold 100k)."""
    changed = ~np.isnan(a.score) & ~np.isnan(b.score) & (a.score != b.score)
    retrieval = a.h_set != b.h_set
    interface = ~retrieval & (a.h_vis != b.h_vis)
    stage_masks = {"retrieval": retrieval, "interface": interface, "reasoning": ~retrieval & ~interface}
    up = b.score > a.score
    return {stage: {"fail_to_pass": sample_ids[changed & mask & up].tolist(),
                    "pass_to_fail": sample_ids[changed & mask & ~up].tolist()}
            for stage, mask in stage_masks.items()}


def _attach_claims(store: Store, cells: list[CellDelta], claim_a: int, claim_b: int, common: np.ndarray,
                   resamples: int, seed: int, alpha: float, prefixes: tuple[str, str] = ("", "")) -> None:
    """The claim metrics of each cell pair, on the samples verified in both runs (``prefixes``: the model labels
    that the cell ids of a model's part of a run lost, as ``label/``)."""
    values_a, values_b = claim_values(store, claim_a), claim_values(store, claim_b)
    shared = set(int(s) for s in common)
    for cell in cells:
        va, vb = values_a.get(prefixes[0] + cell.cell_a, {}), values_b.get(prefixes[1] + cell.cell_b, {})
        sids = sorted(shared & set(va) & set(vb))
        cell.claim_samples = len(sids)
        for metric in CLAIM_METRICS:
            pairs = [(s, va[s].get(metric), vb[s].get(metric)) for s in sids]
            pairs = [(s, x, y) for s, x, y in pairs if x is not None and y is not None]
            cell.claims[metric] = _mean_delta(np.array([x for _, x, _ in pairs], dtype=np.float64),
                                              np.array([y for _, _, y in pairs], dtype=np.float64),
                                              resamples, seed, alpha, np.array([s for s, _, _ in pairs], dtype=np.int64))


def _mean_delta(a: np.ndarray, b: np.ndarray, resamples: int, seed: int, alpha: float,
                keys: np.ndarray | None = None) -> TermDelta:
    """mean(b) − mean(a) over paired values (samples ``keys``), with the paired bootstrap's interval and p-value."""
    if len(a) == 0:
        return TermDelta(None, None, Estimate(None, None, None), None, None)
    point = float(b.mean() - a.mean())
    if len(a) < 2 or resamples == 0:
        return TermDelta(float(a.mean()), float(b.mean()), Estimate(point, None, None), None, None)
    _, boot = mean_and_resampled(b - a, resamples, seed, keys)
    p = bootstrap_p(point, boot)
    return TermDelta(float(a.mean()), float(b.mean()), percentile_interval(point, boot, alpha), p,
                     None if p is None else "bootstrap")


def _adjust(cells: list[CellDelta], alpha: float) -> None:
    """Holm across the cells, for each term (and each claim metric) separately; then mark significance."""
    for attr in ("terms", "claims"):
        names = {name for cell in cells for name in getattr(cell, attr)}
        for name in names:
            family = {i: getattr(cell, attr)[name].p for i, cell in enumerate(cells) if name in getattr(cell, attr)}
            for i, adjusted in holm(family).items():
                d = getattr(cells[i], attr)[name]
                d.p_holm = adjusted
                d.significant = (adjusted is not None and adjusted < alpha and d.delta.lo is not None
                                 and (d.delta.lo > 0 or d.delta.hi < 0))


def parse_gate(text: str) -> tuple[str, float]:
    """``TERM:DELTA`` (``--fail-on-regression``) → (term, delta ≥ 0); the term must have a better direction."""
    term, sep, amount = text.partition(":")
    try:
        delta = float(amount) if sep else float("nan")
    except ValueError:
        delta = float("nan")
    if not (delta >= 0):   # also refuses nan
        raise ValueError(f"--fail-on-regression: expected TERM:DELTA with DELTA ≥ 0 (e.g. S_llm:0.05), got {text!r}")
    if term not in BETTER:
        raise ValueError(f"--fail-on-regression: {term!r} has no better direction; choose from "
                         f"{', '.join(BETTER)}")
    return term, delta


def regressions(comparison: Comparison, gates: Sequence[tuple[str, float]]) -> list[str]:
    """One line per cell where B is worse than A on a gated term by more than its delta, the interval excluding 0."""
    lines = []
    for term, allowed in gates:
        sign = BETTER[term]
        for cell in comparison.cells:
            d = cell.terms.get(term) or cell.claims.get(term)
            if d is None or d.delta.value is None or d.delta.lo is None:
                continue
            worse = -sign * d.delta.value          # > 0 when B is worse
            excludes_zero = d.delta.hi < 0 if sign > 0 else d.delta.lo > 0
            if worse > allowed and excludes_zero:
                lines.append(f"{cell.cell_a}: {term} {d.a:.3f} → {d.b:.3f} (B − A {d.delta.value:+.3f}, "
                             f"95% CI [{d.delta.lo:+.3f}, {d.delta.hi:+.3f}]) is worse by more than {allowed:g}")
    return lines


__all__ = ["BETTER", "CLAIM_METRICS", "COMPARABLE_TERMS", "DEFAULT_TERMS", "DIRECTIONS", "STAGES", "CellDelta",
           "Comparison", "TermDelta", "compare_runs", "parse_gate", "regressions"]
