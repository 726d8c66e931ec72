"""Which item to label next (issue 18): a uniform random queue, or the items the judges disagree on.

- ``uniform`` (the default) walks a fixed random permutation of the population
  (:func:`~workbench.judges.items.uniform_rank`). The items labelled from it are a uniform
  random sample, which is what an unbiased human-only or prediction-powered estimate needs.
  Skipping an item leaves it for later; an annotator who skips the hard ones makes the
  sample less uniform, so the report counts the uniform labels it uses.
- ``disagreement`` shows only the items whose judges disagree (claims: the verifiers; dedup
  pairs: the modes), the most split first. It finds a judge's failures fast and makes κ
  look worse than it is; its labels are kept out of every prediction-powered estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.judges.items import VOTE, JudgedItem, Population, uniform_rank
from workbench.store.labels import ItemKey, labels_of

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
    items: list[JudgedItem]     # unlabelled by this annotator, next first
    labelled: int               # items of the queue's population this annotator has labelled
    total: int                  # items the order can ever show (the population, or its disagreements)

    @property
    def describe(self) -> str:
        return describe_order(self.order)


def _split(item: JudgedItem) -> float | None:
    """How split the judges are on an item (0.5: evenly), None when they agree."""
    votes = [v for judge, v in item.verdicts.items() if judge != VOTE]
    if len(set(votes)) < 2:
        return None
    return abs(sum(votes) / len(votes) - 0.5)


def label_queue(conn, population: Population, annotator: str, *, order: str = "uniform", seed: int = 0) -> Queue:
    """The population's items ``annotator`` has not labelled yet, in ``order``."""
    if order not in ORDERS:
        raise ValueError(f"queue order {order!r} is not one of {', '.join(ORDERS)}")
    judges = [j for j in population.judges if j != VOTE]
    if order == "disagreement" and len(judges) < 2:
        raise ValueError(f"{population.source} has one judge ({', '.join(judges)}): nothing to disagree on; "
                         "use the uniform queue")
    done: set[ItemKey] = {lab.key for lab in labels_of(conn, population.kind, population.owner_id)
                          if lab.annotator == annotator}
    if order == "uniform":
        candidates = sorted(population.items, key=lambda item: uniform_rank(seed, item.key))
    else:
        split = [(s, uniform_rank(seed, item.key), item) for item in population.items
                 if (s := _split(item)) is not None]
        candidates = [item for _, _, item in sorted(split, key=lambda t: (t[0], t[1]))]
    todo = [item for item in candidates if item.key not in done]
    return Queue(order, todo, len(candidates) - len(todo), len(candidates))
