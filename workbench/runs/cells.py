"""Cells of a sweep grid and their stable string ids."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.store.db import Store


@dataclass(frozen=True, order=True)
class Cell:
    """One point of the grid: retrieval (K, B, format) or oracle (B, format, shuffle m), and in a run of several
    models the model that answers it (its label; None in a run of one model)."""

    kind: str            # "retrieval" | "oracle"
    budget: int
    format: str
    k: int | None = None
    shuffle: int | None = None
    model: str | None = None

    @property
    def cell_id(self) -> str:
        """``k5-b128-linear``; oracle: ``oracle-b128-struct`` / ``oracle-b128-linear-m2``; with a model,
        its label first: ``smollm2/k5-b128-linear``."""
        prefix = f"{self.model}/" if self.model is not None else ""
        if self.kind == "retrieval":
            return f"{prefix}k{self.k}-b{self.budget}-{self.format}"
        suffix = f"-m{self.shuffle}" if self.shuffle is not None else ""
        return f"{prefix}oracle-b{self.budget}-{self.format}{suffix}"

    def for_model(self, model: str | None) -> "Cell":
        """This point of the grid answered by ``model``."""
        return Cell(self.kind, self.budget, self.format, k=self.k, shuffle=self.shuffle, model=model)


def grid(ks, budgets, formats, *, oracle: bool, shuffles: int, models: tuple[str, ...] = ()) -> list[Cell]:
    """The retrieval cells K×B×format, then (if ``oracle``) struct and M linear oracle cells per B; with
    ``models`` (two or more labels), that grid once per model, in their order."""
    cells = [Cell("retrieval", b, f, k=k) for f in formats for b in budgets for k in ks]
    if oracle:
        for b in budgets:
            cells.append(Cell("oracle", b, "struct"))
            cells.extend(Cell("oracle", b, "linear", shuffle=m) for m in range(shuffles))
    return [cell.for_model(model) for model in models for cell in cells] if models else cells


def run_cells(store: Store, run_id: int) -> dict[str, Cell]:
    """The cells a run was planned with, by cell id."""
    return {cid: Cell(kind, budget, fmt, k=k, shuffle=m, model=model)
            for cid, kind, k, budget, fmt, m, model in store.conn.execute(
                "SELECT cell_id, kind, k, budget, format, shuffle, model FROM cells WHERE run_id = ?", (run_id,))}
