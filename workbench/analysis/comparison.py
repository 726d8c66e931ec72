"""Run B against run A as a frame: one row per aligned cell pair and term, with the paired difference and its test."""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from workbench.analysis.source import Db, reading
from workbench.analysis.typed import BOOL, FLOAT, INT, STR, typed_frame
from workbench.compare.report import Comparison, TermDelta, compare_runs
from workbench.metrics.stats import RESAMPLES, SEED

#: The columns of :func:`compare`. ``kind`` is ``"term"`` for a ledger term, with ``n`` the
#: pair's samples, or ``"claim"`` for a claim metric, with ``n`` the samples verified in
#: both runs. ``delta`` is B − A, and ``delta_lo`` and ``delta_hi`` its paired 95% interval.
#: ``test`` is ``"mcnemar"`` or ``"bootstrap"`` (NaN when undefined). ``p_holm`` is Holm-adjusted
#: across cells.
COMPARE_DTYPES: dict[str, object] = {
    "cell_a": STR, "cell_b": STR, "kind": STR, "term": STR, "n": INT, "a": FLOAT, "b": FLOAT, "delta": FLOAT,
    "delta_lo": FLOAT, "delta_hi": FLOAT, "p": FLOAT, "test": STR, "p_holm": FLOAT, "significant": BOOL,
}


def compare(db: Db, run_a: str, run_b: str, *, cells: Sequence[str] | None = None,
            terms: Sequence[str] | None = None, cell_map: dict[str, str] | None = None, score: str | None = None,
            resamples: int = RESAMPLES, seed: int = SEED, alpha: float = 0.05) -> pd.DataFrame:
    """``workbench compare RUN_A RUN_B`` as a frame typed by :data:`COMPARE_DTYPES`.

    The arguments are those of :func:`workbench.compare.compare_runs`. The rows follow the
    comparison's cells in ledger order, each cell's terms in the order asked for, and then
    its claim metrics when both runs have a claim run.
    """
    with reading(db) as store:
        return comparison_frame(compare_runs(store, run_a, run_b, cells=cells, terms=terms, cell_map=cell_map,
                                             score=score, resamples=resamples, seed=seed, alpha=alpha))


def comparison_frame(comparison: Comparison) -> pd.DataFrame:
    """A :class:`Comparison` as one typed row per cell pair × term (and claim metric)."""
    def row(cell, kind: str, term: str, n: int, d: TermDelta) -> dict[str, Any]:
        return {"cell_a": cell.cell_a, "cell_b": cell.cell_b, "kind": kind, "term": term, "n": n, "a": d.a,
                "b": d.b, "delta": d.delta.value, "delta_lo": d.delta.lo, "delta_hi": d.delta.hi, "p": d.p,
                "test": d.test, "p_holm": d.p_holm, "significant": d.significant}

    return typed_frame([r for cell in comparison.cells for r in (
        *(row(cell, "term", t, cell.n, d) for t, d in cell.terms.items()),
        *(row(cell, "claim", m, cell.claim_samples, d) for m, d in cell.claims.items()))], COMPARE_DTYPES)
