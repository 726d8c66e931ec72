"""Human labels as JSON Lines: ``judge labels export`` writes them, ``judge labels import`` reads them back.

A label file names its items by what a person can read and another machine also has: the
run's name, the dataset's sample id, the cell id, a dedup run's entities by their names, a
dataset's name and chunk id. Ids are this database's own and never appear in a file. One JSON
object per line::

    {"kind": "claim", "run": R, "sample_id": S, "cell_id": C, "claim": 0, "text": T, "label": true,
     "annotator": "ana", "via": "uniform", "labelled_at": "2026-11-24T02:00:00+00:00"}
    {"kind": "dedup_pair", "run": DEDUP_RUN, "a": NAME, "b": NAME, "label": true, "annotator": ..., ...}
    {"kind": "answer", "run": R, "sample_id": S, "cell_id": C, "label": true, "annotator": ..., ...}
    {"kind": "relevance", "dataset": D, "sample_id": S, "chunk_id": C, "label": true, "annotator": ..., ...}

A relevance label is of a (question, chunk) pair of a dataset, whichever retriever ranked it.

``via`` (default ``import``) and ``labelled_at`` (default: the time of the import) may be
left out; any other key is refused, so a misspelt one cannot pass unnoticed. A claim label
carries the claim's text: it is bound to the text labelled, not just to the claim's index.

An import is all or nothing, like the dataset importers: every line is read and resolved
first, problems are reported as ``file:line: field: reason`` (nothing written), then every
label is written in one transaction. A label that the store already holds with the same
verdict is left alone (its time too), so importing a file twice changes nothing; one that
the same annotator gave differently is refused unless ``replace``.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Sequence

from workbench.data.errors import Problem, ProblemLog
from workbench.data.outfile import write_atomic
from workbench.data.fields import check_name, check_str, json_type
from workbench.data.infile import check_input
from workbench.data.jsonl import read_jsonl
from workbench.errors import BadInput
from workbench.evidence.units import normalize_text
from workbench.store.db import Store, utcnow
from workbench.store.labels import (KINDS, VIAS, AnswerKey, ClaimKey, Label, PairKey, RelevanceKey, all_labels, kind_of,
                                    labels_of, stored_label, write_label)
from workbench.store.lookup import NotFound

__all__ = ["FIELDS", "LabelImport", "export_labels", "import_labels", "label_records"]

#: The keys of each kind of line, in the order an export writes them.
FIELDS: dict[str, tuple[str, ...]] = {
    "claim": ("kind", "run", "sample_id", "cell_id", "claim", "text", "label", "annotator", "via", "labelled_at"),
    "dedup_pair": ("kind", "run", "a", "b", "label", "annotator", "via", "labelled_at"),
    "answer": ("kind", "run", "sample_id", "cell_id", "label", "annotator", "via", "labelled_at"),
    "relevance": ("kind", "dataset", "sample_id", "chunk_id", "label", "annotator", "via", "labelled_at"),
}
_OPTIONAL = ("via", "labelled_at")
_DEFAULT_VIA = "import"
_NOUN = {"claim": "claim", "dedup_pair": "pair", "answer": "answer", "relevance": "question and chunk"}
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class LabelImport:
    """What an import did: labels new to the store, labels replaced (``replace`` only), labels the
    store already held with the same verdict (a line repeating an earlier line of the file counts
    here too), and the label lines read (blank lines not counted)."""

    added: int
    changed: int
    unchanged: int
    lines: int


# -- export ---------------------------------------------------------------------------------------

def export_labels(store: Store, out: str | Path, *, kinds: Sequence[str] | None = None,
                  run: str | None = None, force: bool = False) -> int:
    """Write every label (of ``kinds``, of the run or dedup run named ``run``) to ``out`` (``-``: stdout) as JSONL.

    Written atomically (a reader never sees half a file) where the output guard allows
    (``force`` replaces an existing file); returns the number of labels
    written. Labels come kind by kind in key order, as :func:`all_labels` gives them.
    An unknown kind is :class:`BadInput`; a ``run`` that names neither a run nor a dedup
    run is ``NotFound``.
    """
    count = 0
    with store.snapshot() as conn:
        records = label_records(conn, kinds=kinds, run=run)

        def lines() -> Iterator[str]:
            nonlocal count
            for record in records:
                count += 1
                yield json.dumps(record, ensure_ascii=False) + "\n"

        write_atomic(out, lines(), force=force)
    return count


def label_records(conn: sqlite3.Connection, *, kinds: Sequence[str] | None = None,
                  run: str | None = None) -> Iterator[dict[str, Any]]:
    """The labels (of ``kinds``, of the run, dedup run or dataset ``run``) as the objects a label file holds.

    Checks its arguments at once (an unknown kind is :class:`BadInput`, an unknown run
    ``NotFound``); the records come lazily, to be read inside one snapshot. A dataset's name
    selects its relevance labels.
    """
    wanted = tuple(KINDS if kinds is None else kinds)
    for kind in wanted:
        if kind not in KINDS:
            raise BadInput(f"--kind: {kind!r} is not one of {', '.join(KINDS)}")
    labels = _selected(conn, wanted, run)
    names = _Names(conn)
    return (names.record(label) for label in labels)


def _selected(conn: sqlite3.Connection, kinds: tuple[str, ...], run: str | None) -> Iterator[Label]:
    if run is None:
        return (label for label in all_labels(conn) if kind_of(label.key) in kinds)
    run_row = conn.execute("SELECT id FROM runs WHERE name = ?", (run,)).fetchone()
    dedup_row = conn.execute("SELECT id FROM dedup_runs WHERE name = ?", (run,)).fetchone()
    dataset_row = conn.execute("SELECT id FROM datasets WHERE name = ?", (run,)).fetchone()
    if run_row is None and dedup_row is None and dataset_row is None:
        known = [n for (n,) in conn.execute("SELECT name FROM runs UNION SELECT name FROM dedup_runs ORDER BY 1")]
        datasets = [n for (n,) in conn.execute("SELECT name FROM datasets ORDER BY 1")]
        raise NotFound(f"no run, dedup run or dataset named {run!r} (known: {', '.join(known) or 'none'}; "
                       f"datasets: {', '.join(datasets) or 'none'})")
    owners = {"claim": run_row, "answer": run_row, "dedup_pair": dedup_row, "relevance": dataset_row}

    def gen() -> Iterator[Label]:
        for kind in KINDS:      # the order of all_labels
            if kind in kinds and owners[kind] is not None:
                yield from labels_of(conn, kind, owners[kind][0])
    return gen()


class _Names:
    """This database's ids back to the names a label file uses (each looked up once)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.runs: dict[int, tuple[str, int]] = {}
        self.dedup_runs: dict[int, tuple[str, int]] = {}
        self.samples: dict[tuple[int, int], str] = {}
        self.entities: dict[tuple[int, int], str] = {}
        self.datasets: dict[int, tuple[str]] = {}
        self.chunks: dict[tuple[int, int], tuple[str]] = {}

    def _one(self, cache: dict, key, sql: str, params: tuple):
        if key not in cache:
            cache[key] = self.conn.execute(sql, params).fetchone()
        return cache[key]

    def run(self, run_id: int) -> tuple[str, int]:
        return self._one(self.runs, run_id, "SELECT name, dataset_id FROM runs WHERE id = ?", (run_id,))

    def sample_id(self, run_id: int, sid: int) -> str:
        return self.dataset_sample(self.run(run_id)[1], sid)

    def dataset_sample(self, dataset_id: int, sid: int) -> str:
        return self._one(self.samples, (dataset_id, sid), "SELECT id FROM samples WHERE dataset_id = ? AND sid = ?",
                         (dataset_id, sid))[0]

    def dataset(self, dataset_id: int) -> str:
        return self._one(self.datasets, dataset_id, "SELECT name FROM datasets WHERE id = ?", (dataset_id,))[0]

    def chunk_id(self, dataset_id: int, uid: int) -> str:
        return self._one(self.chunks, (dataset_id, uid), "SELECT chunk_id FROM units WHERE dataset_id = ? AND uid = ?",
                         (dataset_id, uid))[0]

    def dedup_run(self, dedup_run_id: int) -> tuple[str, int]:
        return self._one(self.dedup_runs, dedup_run_id, "SELECT name, kg_id FROM dedup_runs WHERE id = ?",
                         (dedup_run_id,))

    def entity(self, dedup_run_id: int, eid: int) -> str:
        kg_id = self.dedup_run(dedup_run_id)[1]
        return self._one(self.entities, (kg_id, eid), "SELECT name FROM kg_entities WHERE kg_id = ? AND eid = ?",
                         (kg_id, eid))[0]

    def record(self, label: Label) -> dict[str, Any]:
        key, kind = label.key, kind_of(label.key)
        rec: dict[str, Any] = {"kind": kind}
        if isinstance(key, PairKey):
            rec.update(run=self.dedup_run(key.dedup_run_id)[0], a=self.entity(key.dedup_run_id, key.a),
                       b=self.entity(key.dedup_run_id, key.b))
        elif isinstance(key, RelevanceKey):
            rec.update(dataset=self.dataset(key.dataset_id), sample_id=self.dataset_sample(key.dataset_id, key.sid),
                       chunk_id=self.chunk_id(key.dataset_id, key.uid))
        else:
            rec.update(run=self.run(key.run_id)[0], sample_id=self.sample_id(key.run_id, key.sid), cell_id=key.cell_id)
            if isinstance(key, ClaimKey):
                rec.update(claim=key.idx, text=label.claim)
        rec.update(label=label.label, annotator=label.annotator, via=label.via, labelled_at=label.labelled_at)
        return rec


# -- import ---------------------------------------------------------------------------------------

def import_labels(store: Store, path: str | Path, *, replace: bool = False) -> LabelImport:
    """Import a label file in one transaction; all or nothing.

    Raises :class:`InputRejected` (``file:line: field: reason``, nothing written) on any bad
    line: bad JSON or UTF-8, a missing, misspelt or mistyped key, a run, dataset, sample, cell,
    chunk, entity or candidate pair that does not exist here, one item labelled twice differently by the
    same annotator, or a label the store holds differently (unless ``replace``: then the
    file's verdict, text and time win, and how the item was first chosen, ``via``, is kept).
    """
    path = check_input(path, hint="expected a label file, JSON Lines")
    display = str(path)
    log = ProblemLog()
    now = utcnow()
    resolver = _Resolver(store.conn)
    seen: dict[tuple, tuple[int, Label]] = {}       # item + annotator -> (first line, label)
    planned: list[tuple[int, Label, Label | None]] = []     # (line, label, what the store held)
    lines = unchanged = 0
    for lineno, rec in read_jsonl(path, log, display=display):
        lines += 1
        label = _parse(rec, log, display, lineno, resolver, now)
        if label is None:
            continue
        ident = (label.key, label.annotator)
        if ident in seen:
            first, earlier = seen[ident]
            if _same_verdict(earlier, label):
                unchanged += 1          # the same label twice: it changes nothing the second time
            else:
                fld, what = _difference(earlier, label)
                log.add(display, lineno, fld, f"{what} here, but {_show(earlier, fld)} on line {first} "
                                              f"(the same {_NOUN[kind_of(label.key)]} by {label.annotator!r})")
            continue
        seen[ident] = (lineno, label)
        held = stored_label(store.conn, label.key, label.annotator)
        if held is not None and not _same_verdict(held, label) and not replace:
            fld, what = _difference(held, label)
            log.add(display, lineno, fld, f"{what} here, but {label.annotator!r} already labelled this "
                                          f"{_NOUN[kind_of(label.key)]} {_show(held, fld)} (at {held.labelled_at}) "
                                          "in this database; pass --replace to overwrite")
            continue
        planned.append((lineno, label, held))
    _say_no_labels(log, lines, display)
    log.raise_if_any()

    added = changed = 0
    if all(held is not None and _same_verdict(held, label) for _, label, held in planned):
        # Nothing to write (a file imported again): no write lock, and a read-only database is fine.
        return LabelImport(added=0, changed=0, unchanged=unchanged + len(planned), lines=lines)
    try:
        with store.transaction() as conn:
            for lineno, label, held in planned:
                if stored_label(conn, label.key, label.annotator) != held:
                    raise BadInput(f"{display}:{lineno}: the label it names was changed by another process "
                                   f"while {display} was read; nothing was written (rerun)")
                wrote = write_label(conn, label)
                if held is None:
                    added += 1
                elif wrote:
                    changed += 1
                else:
                    unchanged += 1
    except sqlite3.IntegrityError:      # a run, sample or dedup run deleted meanwhile
        raise BadInput(f"what {display} labels was deleted by another process while it was read; "
                       "nothing was written") from None
    return LabelImport(added=added, changed=changed, unchanged=unchanged, lines=lines)


def _same_verdict(held: Label, new: Label) -> bool:
    """What :func:`write_label` counts as the same label: the verdict and, for a claim, its text."""
    return held.label == new.label and held.claim == new.claim


def _difference(held: Label, new: Label) -> tuple[str, str]:
    """The field in which two labels of one item differ, and the new one's value of it, for a message."""
    if held.claim != new.claim:
        return "$.text", f"claim text {new.claim!r}"
    return "$.label", json.dumps(new.label)


def _show(label: Label, fld: str) -> str:
    return f"with text {label.claim!r}" if fld == "$.text" else json.dumps(label.label)


def _say_no_labels(log: ProblemLog, lines: int, display: str) -> None:
    """An empty (or all blank) file is "no labels", said in the house form ``file:1: $: ...``."""
    if lines == 0 and log.problems and log.problems[-1].reason.startswith("file is empty"):
        log.problems[-1] = Problem(display, 1, "$", "no labels: the file is empty")


def _field(key: str) -> str:
    return f"$.{key}" if _PLAIN_KEY.fullmatch(key) else f"$[{json.dumps(key, ensure_ascii=False)}]"


def _check_bool(value: Any):
    return None if isinstance(value, bool) else ("", f"expected true or false, got {json_type(value)}")


def _check_index(value: Any):
    if isinstance(value, bool) or not isinstance(value, int):
        return "", f"expected a claim index (an integer ≥ 0), got {json_type(value)}"
    if value < 0:
        return "", f"expected a claim index (an integer ≥ 0), got {value}"
    return None


def _check_annotator(value: Any):
    if found := check_str(value):
        return found
    try:
        check_name(value, "an annotator name")
    except BadInput as exc:
        return "", str(exc)
    return None


def _check_via(value: Any):
    if not isinstance(value, str):
        return "", f"expected one of {', '.join(VIAS)}, got {json_type(value)}"
    if value not in VIAS:
        return "", f"{value!r} is not one of {', '.join(VIAS)}"
    return None


def _check_time(value: Any):
    example = "e.g. 2026-11-24T02:00:00+00:00"
    if not isinstance(value, str):
        return "", f"expected an ISO-8601 time ({example}), got {json_type(value)}"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return "", f"{value!r} is not an ISO-8601 time ({example})"
    if when.tzinfo is None:
        return "", f"{value!r} has no UTC offset ({example})"
    return None


_CHECKS = {"kind": check_str, "run": check_str, "dataset": check_str, "chunk_id": check_str,
           "sample_id": check_str, "cell_id": check_str, "claim": _check_index,
           "text": check_str, "a": check_str, "b": check_str, "label": _check_bool, "annotator": _check_annotator,
           "via": _check_via, "labelled_at": _check_time}


def _parse(rec: dict, log: ProblemLog, display: str, lineno: int, resolver: _Resolver, now: str) -> Label | None:
    """The label a line states, its names resolved to this database's ids; None after logging problems."""
    kind = rec.get("kind")
    if "kind" not in rec:
        log.add(display, lineno, "$.kind", f"missing (one of {', '.join(KINDS)})")
        return None
    if kind not in KINDS:
        shown = repr(kind) if isinstance(kind, str) else json_type(kind)
        log.add(display, lineno, "$.kind", f"{shown} is not one of {', '.join(KINDS)}")
        return None
    ok = True
    for key in rec:
        if key not in FIELDS[kind]:
            log.add(display, lineno, _field(key),
                    f"unknown key in a {kind} label (its keys: {', '.join(FIELDS[kind])})")
            ok = False
    for key in FIELDS[kind]:
        if key not in rec:
            if key not in _OPTIONAL:
                log.add(display, lineno, f"$.{key}", "missing")
                ok = False
        elif found := _CHECKS[key](rec[key]):
            log.add(display, lineno, f"$.{key}{found[0]}", found[1])
            ok = False
    if not ok:
        return None
    key = resolver.key(kind, rec, lambda fld, reason: log.add(display, lineno, fld, reason))
    if key is None:
        return None
    return Label(key, rec["annotator"], rec["label"], rec.get("via", _DEFAULT_VIA), rec.get("labelled_at", now),
                 rec["text"] if kind == "claim" else None)


class _Resolver:
    """Names in a label file to this database's ids (each looked up once)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.cache: dict[tuple, Any] = {}

    def _one(self, key: tuple, sql: str, params: tuple):
        if key not in self.cache:
            self.cache[key] = self.conn.execute(sql, params).fetchone()
        return self.cache[key]

    def key(self, kind: str, rec: dict, problem) -> ClaimKey | PairKey | AnswerKey | RelevanceKey | None:
        if kind == "dedup_pair":
            return self._pair(rec, problem)
        if kind == "relevance":
            return self._relevance(rec, problem)
        run = self._one(("run", rec["run"]), "SELECT r.id, r.dataset_id, d.name FROM runs r"
                        " JOIN datasets d ON d.id = r.dataset_id WHERE r.name = ?", (rec["run"],))
        if run is None:
            also = (" (that is a dedup run: its labels are dedup_pair labels)"
                    if self._dedup_run(rec["run"]) is not None else "")
            problem("$.run", f"unknown run {rec['run']!r}{also}")
            return None
        run_id, dataset_id, dataset = run
        ok = True
        sample = self._one(("sample", dataset_id, rec["sample_id"]),
                           "SELECT sid FROM samples WHERE dataset_id = ? AND id = ?", (dataset_id, rec["sample_id"]))
        if sample is None:
            problem("$.sample_id", f"unknown sample id {rec['sample_id']!r} in dataset {dataset!r} (of run {rec['run']!r})")
            ok = False
        cell = self._one(("cell", run_id, rec["cell_id"]), "SELECT 1 FROM cells WHERE run_id = ? AND cell_id = ?",
                         (run_id, rec["cell_id"]))
        if cell is None:
            problem("$.cell_id", f"unknown cell {rec['cell_id']!r} in run {rec['run']!r}")
            ok = False
        if not ok:
            return None
        if kind == "claim":
            key = ClaimKey(run_id, rec["cell_id"], sample[0], rec["claim"])
            return key if self._claim_exists(key, rec, problem) else None
        if self._one(("event", run_id, rec["cell_id"], sample[0]),
                     "SELECT 1 FROM events WHERE run_id = ? AND cell_id = ? AND sid = ?",
                     (run_id, rec["cell_id"], sample[0])) is None:
            problem("$.sample_id", f"run {rec['run']!r} has no answer to {rec['sample_id']!r} in cell {rec['cell_id']!r} "
                                   "(the run was planned over other samples)")
            return None
        return AnswerKey(run_id, rec["cell_id"], sample[0])

    def _claim_exists(self, key: ClaimKey, rec: dict, problem) -> bool:
        """Whether some claim run of the run holds that claim of that answer (else say what it holds)."""
        n = self._one(("claims", key.run_id, key.cell_id, key.sid),
                      "SELECT count(c.idx), max(c.idx) FROM claims c JOIN claim_runs r ON r.id = c.claim_run_id"
                      " WHERE r.run_id = ? AND c.cell_id = ? AND c.sid = ?", (key.run_id, key.cell_id, key.sid))
        if n[0] and self._one(("claim", key.run_id, key.cell_id, key.sid, key.idx), "SELECT 1 FROM claims c JOIN claim_runs r ON r.id = c.claim_run_id"
                              " WHERE r.run_id = ? AND c.cell_id = ? AND c.sid = ? AND c.idx = ? LIMIT 1",
                              (key.run_id, key.cell_id, key.sid, key.idx)):
            return True
        answer = f"the answer to {rec['sample_id']!r} in cell {rec['cell_id']!r} of run {rec['run']!r}"
        if not n[0]:
            problem("$.claim", f"{answer} has no verified claims (run `workbench claims run {rec['run']}` first)")
        else:
            problem("$.claim", f"no claim {key.idx}: {answer} has claims 0 to {n[1]}")
        return False

    def _relevance(self, rec: dict, problem) -> RelevanceKey | None:
        """A (question, chunk) pair of a dataset: both must be in it (no verdict is needed: a human may label
        a pair no judge has judged yet)."""
        dataset = self._one(("dataset", rec["dataset"]), "SELECT id, unit_kind FROM datasets WHERE name = ?",
                            (rec["dataset"],))
        if dataset is None:
            also = (" (that is a run: relevance labels name a dataset)" if self._one(
                ("run-name", rec["dataset"]), "SELECT 1 FROM runs WHERE name = ?", (rec["dataset"],)) else "")
            problem("$.dataset", f"unknown dataset {rec['dataset']!r}{also}")
            return None
        dataset_id = dataset[0]
        sample = self._one(("sample", dataset_id, rec["sample_id"]),
                           "SELECT sid FROM samples WHERE dataset_id = ? AND id = ?", (dataset_id, rec["sample_id"]))
        if sample is None:
            problem("$.sample_id", f"unknown sample id {rec['sample_id']!r} in dataset {rec['dataset']!r}")
        unit = self._one(("chunk", dataset_id, rec["chunk_id"]),   # by the units' key (an index), then exactly
                         "SELECT uid FROM units WHERE dataset_id = ? AND key = ? AND chunk_id = ?",
                         (dataset_id, normalize_text(rec["chunk_id"]), rec["chunk_id"]))
        if unit is None:
            problem("$.chunk_id", f"unknown chunk id {rec['chunk_id']!r} in dataset {rec['dataset']!r}"
                    + (" (it holds triples)" if dataset[1] == "triple" else ""))
        if sample is None or unit is None:
            return None
        return RelevanceKey(dataset_id, sample[0], unit[0])

    def _dedup_run(self, name: str):
        return self._one(("dedup_run", name), "SELECT r.id, r.kg_id, k.name FROM dedup_runs r"
                         " JOIN kgs k ON k.id = r.kg_id WHERE r.name = ?", (name,))

    def _pair(self, rec: dict, problem) -> PairKey | None:
        run = self._dedup_run(rec["run"])
        if run is None:
            also = " (that is a run: dedup_pair labels name a dedup run)" if self._one(
                ("run", rec["run"]), "SELECT 1 FROM runs WHERE name = ?", (rec["run"],)) is not None else ""
            problem("$.run", f"unknown dedup run {rec['run']!r}{also}")
            return None
        run_id, kg_id, kg = run
        eids = []
        for side in ("a", "b"):
            row = self._one(("entity", kg_id, rec[side]), "SELECT eid FROM kg_entities WHERE kg_id = ? AND name = ?",
                            (kg_id, rec[side]))
            if row is None:
                problem(f"$.{side}", f"unknown entity {rec[side]!r} in KG {kg!r} (of dedup run {rec['run']!r})")
            eids.append(None if row is None else row[0])
        a, b = eids
        if a is None or b is None:
            return None
        if a == b:
            problem("$.b", f"the same entity as $.a ({rec['a']!r}): a pair is two entities")
            return None
        a, b = min(a, b), max(a, b)
        if self._one(("pair", run_id, a, b), "SELECT 1 FROM dedup_pairs WHERE run_id = ? AND a = ? AND b = ?",
                     (run_id, a, b)) is None:
            problem("$", f"({rec['a']!r}, {rec['b']!r}) is not a candidate pair of dedup run {rec['run']!r}")
            return None
        return PairKey(run_id, a, b)
