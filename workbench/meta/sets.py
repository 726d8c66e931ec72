"""Typed access to an imported meta set (``import --from ragchecker-meta``): its instances, labels and scores.

A meta set's queries and references are the samples of a dataset, its two responses the
answers of two runs (``NAME.model1``, ``NAME.model2``); the human labels and imported
baseline scores are rows of its own tables (``0017_meta_evaluation.sql``).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.data.meta_file import LABELS
from workbench.store.db import Store
from workbench.store.lookup import named_or_latest
from workbench.store.queries import Run, run_by_id

__all__ = ["LABELS", "MetaSet", "get_meta_set", "meta_set_names", "responses", "human_labels", "stored_scores"]



@dataclass(frozen=True)
class MetaSet:
    """One imported meta set and the two runs holding its responses."""

    id: int
    name: str
    dataset_id: int
    run1: Run
    run2: Run
    source: str

    def runs(self) -> tuple[Run, Run]:
        return self.run1, self.run2


def get_meta_set(store: Store, name: str | None = None) -> MetaSet:
    """The meta set ``name`` (the newest when None); ``NotFound`` names the sets there are."""
    row = named_or_latest(store.conn, "meta_sets", "id, name, dataset_id, run1_id, run2_id, source", name,
                          what="meta set", none_yet="no meta set yet: import one with `workbench import --from "
                                                    "ragchecker-meta HUMAN.json --name NAME`")
    set_id, set_name, dataset_id, run1, run2, source = row
    return MetaSet(set_id, set_name, dataset_id, run_by_id(store, run1), run_by_id(store, run2), source)


def meta_set_names(store: Store) -> list[str]:
    """The names of the database's meta sets, oldest first."""
    return [name for (name,) in store.conn.execute("SELECT name FROM meta_sets ORDER BY id")]


def responses(store: Store, meta: MetaSet) -> dict[int, tuple[str, str]]:
    """Each instance's two responses by sid: ``{sid: (response 1, response 2)}``."""
    out: dict[int, list[str]] = {}
    for side, run in enumerate(meta.runs()):
        for sid, prediction in store.conn.execute("SELECT sid, prediction FROM events WHERE run_id = ?", (run.id,)):
            out.setdefault(sid, ["", ""])[side] = prediction or ""
    return {sid: (a, b) for sid, (a, b) in out.items()}


def human_labels(store: Store, meta: MetaSet) -> dict[str, list[tuple[int, int, int]]]:
    """Per label, every ``(sid, annotator, value)``, ordered by instance then annotator."""
    out: dict[str, list[tuple[int, int, int]]] = {label: [] for label in LABELS}
    for label, sid, annotator, value in store.conn.execute(
            "SELECT label, sid, annotator, value FROM meta_labels WHERE set_id = ? ORDER BY sid, annotator",
            (meta.id,)):
        out[label].append((sid, annotator, value))
    return out


def stored_scores(store: Store, meta: MetaSet) -> dict[tuple[str, str], dict[int, list[float | None]]]:
    """Each stored scorer's scores (imported baselines, whole-answer similarity):
    ``{(scorer, metric): {sid: [score of response 1, score of response 2]}}``."""
    out: dict[tuple[str, str], dict[int, list[float | None]]] = {}
    for scorer, metric, sid, side, value in store.conn.execute(
            "SELECT scorer, metric, sid, side, value FROM meta_scores WHERE set_id = ? ORDER BY scorer, metric, sid",
            (meta.id,)):
        out.setdefault((scorer, metric), {}).setdefault(sid, [None, None])[side - 1] = value
    return out
