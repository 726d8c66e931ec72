"""Cells of a sweep grid and their stable string ids."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.store.db import Store


@dataclass(frozen=True, order=True)
class Cell:
    """One point of the grid: retrieval (K, B, format) or oracle (B, format, shuffle m)."""

    kind: str            # "retrieval" | "oracle"
    budget: int
    format: str
    k: int | None = None
    shuffle: int | None = None

    @property
    def cell_id(self) -> str:
        """``k5-b128-linear``; oracle: ``oracle-b128-struct`` / ``oracle-b128-linear-m2``."""
        if self.kind == "retrieval":
            return f"k{self.k}-b{self.budget}-{self.format}"
        suffix = f"-m{self.shuffle}" if self.shuffle is not None else ""
        return f"oracle-b{self.budget}-{self.format}{suffix}"


def grid(ks, budgets, formats, *, oracle: bool, shuffles: int) -> list[Cell]:
    """The retrieval cells K×B×format, then (if ``oracle``) struct and M linear oracle cells per B."""
    cells = [Cell("retrieval", b, f, k=k) for f in formats for b in budgets for k in ks]
    if oracle:
        for b in budgets:
            cells.append(Cell("oracle", b, "struct"))
            cells.extend(Cell("oracle", b, "linear", shuffle=m) for m in range(shuffles))
    return cells


def run_cells(store: Store, run_id: int) -> dict[str, Cell]:
    """The cells a run was planned with, by cell id."""
    return {cid: Cell(kind, budget, fmt, k=k, shuffle=m) for cid, kind, k, budget, fmt, m in store.conn.execute(
        "SELECT cell_id, kind, k, budget, format, shuffle FROM cells WHERE run_id = ?", (run_id,))}
