"""The evidence units of an imported dataset, read from the store."""

from __future__ import annotations

from workbench.evidence.units import Unit
from workbench.store.db import Store


def load_units(store: Store, dataset_id: int) -> dict[int, Unit]:
    """All units of a dataset keyed by uid."""
    units = {}
    for uid, head, rel, tail, doc_id, text in store.conn.execute(
            "SELECT uid, head, relation, tail, doc_id, text FROM units WHERE dataset_id = ?", (dataset_id,)):
        if head is not None:
            units[uid] = Unit(uid=uid, kind="triple", head=head, relation=rel, tail=tail)
        else:
            units[uid] = Unit(uid=uid, kind="chunk", doc_id=doc_id, text=text)
    return units
