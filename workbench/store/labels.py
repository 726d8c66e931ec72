"""Human labels of judged items (migrations 0013, 0016): claims, dedup pairs, answers and the relevance of
retrieved chunks, with who and when.

An item is named by a typed key (:class:`ClaimKey`, :class:`PairKey`, :class:`AnswerKey`,
:class:`RelevanceKey`);
a :class:`Label` is one annotator's verdict on one item. Each label is written in its own
transaction, so a labelling session killed at any instant keeps every label it showed as
saved. Labelling an item again (same annotator) replaces the verdict and its time and keeps
``via``, how the item was first chosen: an item drawn by the uniform queue stays uniformly
drawn however often it is revisited.
"""

from __future__ import annotations

import getpass
import os
import sqlite3
from dataclasses import dataclass, fields
from typing import Iterator, Union

from workbench.store.db import Store, utcnow

__all__ = ["KINDS", "VIAS", "ANNOTATOR_ENV", "ClaimKey", "PairKey", "AnswerKey", "RelevanceKey", "ItemKey", "Label",
           "kind_of", "owner_of",
           "put_label", "write_label", "clear_label", "stored_label", "labels_of", "all_labels", "label_count",
           "default_annotator"]

#: The kinds of labelled items, as named in label files.
KINDS = ("claim", "dedup_pair", "answer", "relevance")
#: How an item came to its annotator; only ``uniform`` labels may feed a prediction-powered estimate.
VIAS = ("uniform", "disagreement", "browse", "import")
ANNOTATOR_ENV = "WORKBENCH_ANNOTATOR"


@dataclass(frozen=True)
class ClaimKey:
    """Claim ``idx`` of the answer of sample ``sid`` in cell ``cell_id`` of run ``run_id``."""

    run_id: int
    cell_id: str
    sid: int
    idx: int


@dataclass(frozen=True)
class PairKey:
    """The candidate pair (a, b), a < b, of dedup run ``dedup_run_id``."""

    dedup_run_id: int
    a: int
    b: int

    def __post_init__(self):
        if self.a >= self.b:
            raise ValueError(f"a dedup pair is (a, b) with a < b, not ({self.a}, {self.b})")


@dataclass(frozen=True)
class AnswerKey:
    """The answer of sample ``sid`` in cell ``cell_id`` of run ``run_id``."""

    run_id: int
    cell_id: str
    sid: int


@dataclass(frozen=True)
class RelevanceKey:
    """Chunk ``uid`` as an answer to question ``sid`` of dataset ``dataset_id`` (whichever retriever ranked it)."""

    dataset_id: int
    sid: int
    uid: int


ItemKey = Union[ClaimKey, PairKey, AnswerKey, RelevanceKey]


@dataclass(frozen=True)
class Label:
    """One annotator's verdict on one item (True: supported / the same entity / correct / relevant)."""

    key: ItemKey
    annotator: str
    label: bool
    via: str
    labelled_at: str
    claim: str | None = None     # claims only: the claim's text as labelled


_KIND = {ClaimKey: "claim", PairKey: "dedup_pair", AnswerKey: "answer", RelevanceKey: "relevance"}
_KEY = {kind: cls for cls, kind in _KIND.items()}
_TABLE = {"claim": "claim_labels", "dedup_pair": "pair_labels", "answer": "answer_labels",
          "relevance": "relevance_labels"}
#: What the labels of each kind hang on: a run, a dedup run, or (relevance) a dataset.
_OWNER = {"claim": "run_id", "dedup_pair": "dedup_run_id", "answer": "run_id", "relevance": "dataset_id"}


def _key_columns(kind: str) -> list[str]:
    return [f.name for f in fields(_KEY[kind])]


def kind_of(key: ItemKey) -> str:
    """The kind of item a key names: ``claim``, ``dedup_pair``, ``answer`` or ``relevance``."""
    return _KIND[type(key)]


def owner_of(key: ItemKey) -> int:
    """The id of what the item's labels hang on: its run, dedup run or (relevance) dataset."""
    return getattr(key, _OWNER[kind_of(key)])


def _check(label: Label) -> None:
    if label.via not in VIAS:
        raise ValueError(f"via {label.via!r} is not one of {', '.join(VIAS)}")
    if not label.annotator.strip():
        raise ValueError("an annotator name must not be empty")
    if (kind_of(label.key) == "claim") != (label.claim is not None):
        raise ValueError("a claim label keeps the claim's text, and only a claim label does")


def write_label(conn: sqlite3.Connection, label: Label) -> bool:
    """Upsert one label inside the caller's transaction; True when it changed the store.

    An identical verdict already stored is left alone (its time too), which makes
    re-importing a label file a no-op.
    """
    _check(label)
    kind = kind_of(label.key)
    table, cols = _TABLE[kind], _key_columns(kind)
    key = [getattr(label.key, c) for c in cols]
    where = " AND ".join(f"{c} = ?" for c in cols) + " AND annotator = ?"
    row = conn.execute(f"SELECT label{', claim' if kind == 'claim' else ''} FROM {table} WHERE {where}",
                       (*key, label.annotator)).fetchone()
    if row is not None and bool(row[0]) == label.label and (kind != "claim" or row[1] == label.claim):
        return False
    extra = ["claim"] if kind == "claim" else []
    values = [*key, label.annotator, int(label.label), *([label.claim] if extra else []), label.via,
              label.labelled_at]
    names = [*cols, "annotator", "label", *extra, "via", "labelled_at"]
    update = ", ".join(f"{c} = excluded.{c}" for c in ("label", *extra, "labelled_at"))
    conn.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
                 f" ON CONFLICT DO UPDATE SET {update}", values)
    return True


def put_label(store: Store, key: ItemKey, label: bool, annotator: str, *, via: str,
              claim: str | None = None) -> Label:
    """Store one annotator's verdict on one item, in its own transaction; returns the label written."""
    written = Label(key, annotator, bool(label), via, utcnow(), claim)
    with store.transaction() as conn:
        write_label(conn, written)
    return written


def clear_label(store: Store, key: ItemKey, annotator: str) -> bool:
    """Remove one annotator's label of one item (an undo); True if there was one."""
    kind = kind_of(key)
    cols = _key_columns(kind)
    with store.transaction() as conn:
        cur = conn.execute(f"DELETE FROM {_TABLE[kind]} WHERE " + " AND ".join(f"{c} = ?" for c in cols)
                           + " AND annotator = ?", (*[getattr(key, c) for c in cols], annotator))
    return cur.rowcount > 0


def _rows(conn: sqlite3.Connection, kind: str, where: str = "", params: tuple = ()) -> Iterator[Label]:
    cols = _key_columns(kind)
    extra = ", claim" if kind == "claim" else ", NULL"
    order = ", ".join(cols[1:] + ["annotator"])
    for row in conn.execute(f"SELECT {', '.join(cols)}, annotator, label, via, labelled_at{extra}"
                            f" FROM {_TABLE[kind]} {where} ORDER BY {cols[0]}, {order}", params):
        n = len(cols)
        yield Label(_KEY[kind](*row[:n]), row[n], bool(row[n + 1]), row[n + 2], row[n + 3], row[n + 4])


def stored_label(conn: sqlite3.Connection, key: ItemKey, annotator: str) -> Label | None:
    """The annotator's label of one item, or None."""
    kind = kind_of(key)
    cols = _key_columns(kind)
    where = "WHERE " + " AND ".join(f"{c} = ?" for c in cols) + " AND annotator = ?"
    return next(_rows(conn, kind, where, (*[getattr(key, c) for c in cols], annotator)), None)


def labels_of(conn: sqlite3.Connection, kind: str, owner_id: int) -> list[Label]:
    """Every label of one kind on one run (a dedup run for ``dedup_pair``, a dataset for ``relevance``),
    every annotator."""
    return list(_rows(conn, kind, f"WHERE {_OWNER[kind]} = ?", (owner_id,)))


def all_labels(conn: sqlite3.Connection) -> Iterator[Label]:
    """Every label in the store, kind by kind, in key order (what an export writes)."""
    for kind in KINDS:
        yield from _rows(conn, kind)


def label_count(conn: sqlite3.Connection, kind: str, owner_id: int, annotator: str | None = None) -> int:
    """How many labels of ``kind`` a run (dedup run, dataset) holds (by one annotator when given)."""
    sql = f"SELECT count(*) FROM {_TABLE[kind]} WHERE {_OWNER[kind]} = ?"
    params: tuple = (owner_id,)
    if annotator is not None:
        sql, params = sql + " AND annotator = ?", (owner_id, annotator)
    return conn.execute(sql, params).fetchone()[0]


def default_annotator() -> str:
    """Who is labelling: ``$WORKBENCH_ANNOTATOR``, else the login name."""
    name = os.environ.get(ANNOTATOR_ENV, "").strip()
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):    # no passwd entry (some containers)
        return "annotator"
