"""A ledger's sums by group of cells: which rows of a sample make its contribution, and the sums they add to.

A *group* is a cell (its terms and job counts), an oracle budget (struct + linear shuffles),
or a real linear cell paired with the oracle shuffles (the noise loss). Each sample
contributes one vector to each group it has rows in (:func:`contributions`, from the formulas
of :mod:`workbench.metrics.ledger` and :mod:`workbench.metrics.oracle`); a group keeps the
plain sums (the point estimates) and the Poisson replicate sums (the intervals) of those
vectors (:class:`GroupSums`). :mod:`workbench.runs.aggregate` keeps them up to date.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from workbench.metrics.ledger import STATE_COLUMNS, row_contributions
from workbench.metrics.oracle import NOISE_COLUMNS, ORACLE_STATE_COLUMNS, noise_contributions, oracle_contributions
from workbench.runs.cells import Cell
from workbench.store.ledger_state import ROW_COLUMNS

_WIDTHS = {"cell": len(STATE_COLUMNS), "oracle": len(ORACLE_STATE_COLUMNS), "noise": len(NOISE_COLUMNS)}
SCORE = ROW_COLUMNS.index("score")
H_VIS = ROW_COLUMNS.index("h_vis")


@dataclass(frozen=True)
class Group:
    """Cells whose rows of one sample make that sample's contribution: ``cell:…``, ``oracle:B``, ``noise:…``."""

    key: str
    kind: str
    cells: tuple[str, ...]

    @property
    def width(self) -> int:
        return _WIDTHS[self.kind]


def run_groups(cells: Mapping[str, Cell]) -> list[Group]:
    """The groups of a run's grid: every cell; per oracle budget, the oracle and each real linear cell's noise."""
    groups = [Group(f"cell:{cid}", "cell", (cid,)) for cid in sorted(cells)]
    for budget in sorted({c.budget for c in cells.values() if c.kind == "oracle"}):
        at = {cid: c for cid, c in cells.items() if c.budget == budget}
        struct = sorted(cid for cid, c in at.items() if c.kind == "oracle" and c.format == "struct")
        linear = [cid for _, cid in sorted((c.shuffle, cid) for cid, c in at.items()
                                           if c.kind == "oracle" and c.format == "linear")]
        if not struct:
            continue
        groups.append(Group(f"oracle:{budget}", "oracle", (struct[0], *linear)))
        groups += [Group(f"noise:{cid}", "noise", (cid, *linear))
                   for cid in sorted(cid for cid, c in at.items() if c.kind == "retrieval" and c.format == "linear")]
    return groups


@dataclass
class Rows:
    """One cell's rows aligned on some samples: present or not, and the values of :data:`ROW_COLUMNS`."""

    present: np.ndarray  # bool (n,)
    values: np.ndarray   # float64 (n, 6); absent rows: zeros and a NaN score

    @classmethod
    def absent(cls, n: int) -> "Rows":
        values = np.zeros((n, len(ROW_COLUMNS)))
        values[:, SCORE] = np.nan
        return cls(np.zeros(n, dtype=bool), values)

    def score(self) -> np.ndarray:
        return np.where(self.present, self.values[:, SCORE], np.nan)


def contributions(group: Group, rows: Mapping[str, Rows]) -> np.ndarray:
    """Each sample's contribution to ``group`` (n × width) from its rows in the group's cells."""
    first = rows[group.cells[0]]
    if group.kind == "cell":
        v = first.values
        return row_contributions(v[:, 0], v[:, 1], v[:, 5], v[:, 2], v[:, 3], v[:, 4], present=first.present)
    linear = np.array([rows[c].score() for c in group.cells[1:]]).reshape(len(group.cells) - 1, len(first.present))
    if group.kind == "oracle":
        present = np.logical_or.reduce([rows[c].present for c in group.cells])
        return oracle_contributions(first.score(), linear, present, first.values[:, H_VIS] * first.present)
    return noise_contributions(first.values[:, H_VIS] * first.present, first.score(), linear)


_NSUM = len(STATE_COLUMNS) // 2
_SAME_IN_BOTH = (STATE_COLUMNS.index("scored.m_s"), STATE_COLUMNS.index("scored.m_s_hvis"))


def copied_columns(group: Group, aligned: Mapping[str, Rows]) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """For a build: the group's columns to compute, and (column, equal column) pairs to copy instead.

    A cell's two populations share the score columns (an unscored row's score counts as 0),
    and every column when all its rows are scored (the usual state of a finished run): the
    product over samples, the build's main cost, is then half as wide.
    """
    if group.kind != "cell":
        return np.arange(group.width), []
    rows = aligned[group.cells[0]]
    if not np.isnan(rows.values[rows.present, SCORE]).any():
        return np.arange(_NSUM), [(_NSUM + j, j) for j in range(_NSUM)]
    copies = [(_NSUM + j, j) for j in _SAME_IN_BOTH]
    return np.array([j for j in range(group.width) if j not in {d for d, _ in copies}]), copies


@dataclass
class GroupSums:
    """A group's point sums (width,) and replicate sums (resamples × width)."""

    sums: np.ndarray
    reps: np.ndarray

    @classmethod
    def zeros(cls, width: int, resamples: int) -> "GroupSums":
        return cls(np.zeros(width), np.zeros((resamples, width)))

    def add(self, block: np.ndarray, weights: np.ndarray) -> None:
        """Add samples' contributions (n × width) under their weights (n × resamples)."""
        self.sums += block.sum(axis=0)
        self.reps += weights.T @ block
