"""Which item to label next: a uniform random queue, or the items the judges disagree on.

- ``uniform`` (the default) walks a fixed random permutation of the population
  (:func:`~workbench.judges.items.uniform_rank`). The items labelled from it are a uniform
  random sample, which is what an unbiased human-only or prediction-powered estimate needs.
  Skipping an item leaves it for later; an annotator who skips the hard ones makes the
  sample less uniform, so the report counts the uniform labels it uses.
- ``disagreement`` shows only the items whose judges disagree (claims: the verifiers; dedup
  pairs: the modes; relevance: the judging models), the most split first. It finds a judge's failures fast and makes κ
  look worse than it is; its labels are kept out of every prediction-powered estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.judges.items import VOTE, ItemView, JudgedItem, Population, uniform_ranks
from workbench.store.db import Store
from workbench.store.labels import labels_of

__all__ = ["ORDERS", "Queue", "label_queue", "describe_order"]

ORDERS = ("uniform", "disagreement")
_DESCRIBE = {
    "uniform": "uniform random order: these labels give unbiased estimates",
    "disagreement": "judges disagree, most split first: for finding failures, kept out of the estimates",
}


def describe_order(order: str) -> str:
    """What a queue order means, in one line (the TUI and the CLI say it next to the queue)."""
    return _DESCRIBE[order]


@dataclass(frozen=True)
class Queue:
    """The items still to label, in order, with how many the annotator has labelled already."""

    order: str
    population: Population
    positions: np.ndarray       # the population positions still to label, next first
    labelled: int               # items of the queue's population this annotator has labelled
    total: int                  # items the order can ever show (the population, or its disagreements)

    @property
    def describe(self) -> str:
        return describe_order(self.order)

    @property
    def items(self) -> ItemView:
        """The items still to label, next first, made on access (answers without their text)."""
        return ItemView(self.population, self.positions)

    def head(self, store: Store, n: int) -> list[JudgedItem]:
        """The next ``n`` items with their texts (an answer's read from ``store`` now)."""
        return self.population.materialize(store, self.positions[:n])


def _split(population: Population) -> np.ndarray:
    """How split the judges are on each item (0: evenly), NaN where they agree or fewer than two judged."""
    judges = [j for j in population.judges if j != VOTE]
    yes = sum(population.verdicts[j] & population.judged[j] for j in judges).astype(np.float64)
    judged = sum(population.judged[j].astype(np.int64) for j in judges).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        split = np.abs(yes / judged - 0.5)
    return np.where((judged >= 2) & (yes > 0) & (yes < judged), split, np.nan)


def label_queue(conn, population: Population, annotator: str, *, order: str = "uniform", seed: int = 0) -> Queue:
    """The population's items ``annotator`` has not labelled yet, in ``order``."""
    if order not in ORDERS:
        raise ValueError(f"queue order {order!r} is not one of {', '.join(ORDERS)}")
    judges = [j for j in population.judges if j != VOTE]
    if order == "disagreement" and len(judges) < 2:
        raise ValueError(f"{population.source} has one judge ({', '.join(judges)}): nothing to disagree on; "
                         "use the uniform queue")
    ranks = uniform_ranks(population, seed)
    if order == "uniform":
        candidates = np.argsort(ranks, kind="stable")
    else:
        split = _split(population)
        split_at = np.flatnonzero(~np.isnan(split))
        candidates = split_at[np.lexsort((ranks[split_at], split[split_at]))]
    done = np.zeros(len(population), dtype=bool)
    mine = [lab.key for lab in labels_of(conn, population.kind, population.owner_id) if lab.annotator == annotator]
    at = population.positions(mine)
    done[at[at >= 0]] = True
    todo = candidates[~done[candidates]]
    return Queue(order, population, todo, len(candidates) - len(todo), len(candidates))
