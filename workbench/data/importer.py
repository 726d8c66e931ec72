"""Importing a dataset directory (``kb.jsonl``, ``samples.jsonl``, ``retrieval.jsonl``).

The import is one transaction: every line is validated while rows are streamed into the
open transaction, and any problem rolls the whole import back. Problems are reported as
``file:line: field: reason``. Re-importing identical files is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.data.errors import ProblemLog
from workbench.data.fields import (check_label_name, check_list, check_name, check_object, check_required, check_score,
                                   check_source_path, check_str, check_str_list, check_triple)
from workbench.data.infile import check_input, check_optional, open_input
from workbench.data.jsonl import read_jsonl
from workbench.errors import BadInput
from workbench.evidence.units import normalize_text, triple_key
from workbench.store.db import Store, utcnow

FILES = ("kb.jsonl", "samples.jsonl", "retrieval.jsonl")
_BATCH = 20_000


@dataclass
class ImportReport:
    """What an import did."""

    dataset: str
    dataset_id: int
    unit_kind: str
    units: int = 0
    samples: int = 0
    retrievals: int = 0
    retrievers: list[str] = field(default_factory=list)
    unknown_units: int = 0
    warnings: list[str] = field(default_factory=list)
    unchanged: bool = False
    replaced: dict[str, int] | None = None   # what replacing the old dataset deleted (see dataset_contents)


class DatasetExists(BadInput):
    """A dataset (or KG) of that name holds different content and ``replace`` was not asked for."""


class ChangedMeanwhile(DatasetExists):
    """Another process created, replaced or deleted the name between our check and our write."""

    def __init__(self, kind: str, name: str, before: object):
        what = "created" if before is None else "replaced or deleted"
        super().__init__(f"{kind} {name!r} was {what} by another process while this import ran; "
                         "nothing was written by this one (rerun to see it)")


def count_noun(n: int, singular: str, plural: str | None = None) -> str:
    """``1 run``, ``1,234 units``."""
    return f"{n:,} {singular if n == 1 else plural or singular + 's'}"


def dataset_contents(conn, dataset_id: int) -> dict[str, int]:
    """What deleting a dataset removes with it (every table cascades from ``datasets``)."""
    one = lambda sql: conn.execute(sql, (dataset_id,)).fetchone()[0]  # noqa: E731
    runs = "SELECT id FROM runs WHERE dataset_id = ?"
    return {
        "samples": one("SELECT count(*) FROM samples WHERE dataset_id = ?"),
        "units": one("SELECT count(*) FROM units WHERE dataset_id = ?"),
        "documents": one("SELECT count(*) FROM documents WHERE dataset_id = ?"),
        "retrieval_rows": one("SELECT count(*) FROM retrievals WHERE dataset_id = ?"),
        "runs": one("SELECT count(*) FROM runs WHERE dataset_id = ?"),
        "events": one(f"SELECT count(*) FROM events WHERE run_id IN ({runs})"),
        "answered_events": one(f"SELECT count(*) FROM events WHERE run_id IN ({runs}) AND prediction IS NOT NULL"),
        "claim_runs": one(f"SELECT count(*) FROM claim_runs WHERE run_id IN ({runs})"),
        "searchain_runs": one("SELECT count(*) FROM pipeline_runs WHERE dataset_id = ?"),
        "tags": one("SELECT count(*) FROM tags WHERE dataset_id = ?"),
        "notes": one("SELECT count(*) FROM notes WHERE dataset_id = ?"),
        "relevance_runs": one("SELECT count(*) FROM relevance_runs WHERE dataset_id = ?"),
        "relevance_labels": one("SELECT count(*) FROM relevance_labels WHERE dataset_id = ?"),
        "preference_labels": one("SELECT count(*) FROM meta_labels l JOIN meta_sets m ON m.id = l.set_id"
                                 " WHERE m.dataset_id = ?"),
    }


def name_taken(conn, name: str, dataset_id: int) -> DatasetExists:
    """The refusal to import over dataset ``name`` without ``replace``, saying what replacing would delete."""
    return DatasetExists(f"dataset {name!r} already exists with different content; pass --replace to replace it "
                         f"(that deletes {describe_dataset_contents(dataset_contents(conn, dataset_id))})")


def describe_dataset_contents(c: dict[str, int]) -> str:
    """``20 samples, 1,234 units, 1 run (5 events, 5 answered), 0 claim runs, 0 SearChain runs``.

    Runs and what hangs on them are always named, even at zero: they are what a user would
    miss; documents, retrieval rows, tags, notes and chunk relevance (judged runs, human
    labels) only when there are some.
    """
    parts = [count_noun(c["samples"], "sample"), count_noun(c["units"], "unit")]
    if c["documents"]:
        parts.append(count_noun(c["documents"], "document"))
    if c["retrieval_rows"]:
        parts.append(count_noun(c["retrieval_rows"], "retrieval row"))
    runs = count_noun(c["runs"], "run")
    if c["runs"]:
        runs += f" ({count_noun(c['events'], 'event')}, {c['answered_events']:,} answered)"
    parts += [runs, count_noun(c["claim_runs"], "claim run"), count_noun(c["searchain_runs"], "SearChain run")]
    parts += [count_noun(c[k], k[:-1]) for k in ("tags", "notes") if c[k]]
    if c.get("relevance_runs"):
        parts.append(count_noun(c["relevance_runs"], "relevance run"))
    if c.get("relevance_labels"):
        parts.append(count_noun(c["relevance_labels"], "human relevance label"))
    if c.get("preference_labels"):
        parts.append(count_noun(c["preference_labels"], "human preference label"))
    return ", ".join(parts)


def content_sha256(paths: list[Path]) -> str:
    """sha256 over the files' names and bytes, read in slices."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0")
        with open_input(path) as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def check_directory(directory: str | Path) -> Path:
    """``directory`` as a Path if it can be imported as a dataset; ValueError says what is missing.

    Cheap (no file is read), so an interface can check a typed path before asking anything else.
    """
    directory = check_input(directory, directory=True, hint=f"expected a directory holding {', '.join(FILES)}")
    for required in FILES[:2]:
        check_input(directory / required, hint=f"a dataset directory holds {', '.join(FILES)}")
    check_optional(directory / FILES[2])
    for fname in FILES:
        # As a corpus import does: what is imported lies in the directory named (a link within it is fine).
        path = directory / fname
        if not path.is_symlink():
            continue
        try:
            inside = path.resolve(strict=True).is_relative_to(directory.resolve())
        except (OSError, RuntimeError):      # a loop, or a link to nothing
            raise BadInput(f"{path}: is a symbolic link that leads nowhere ({os.readlink(path)})") from None
        if not inside:
            raise BadInput(f"{path}: is a symbolic link to {os.readlink(path)}, outside {directory}; an import "
                           "reads only the directory's own files (copy the file in)")
    return directory


def import_dataset(store: Store, directory: str | Path, name: str, *, strict: bool = False,
                   replace: bool = False) -> ImportReport:
    """Import ``directory`` as dataset ``name`` in one transaction.

    ``strict`` turns gold/retrieved triples missing from the KB into errors (otherwise
    they are added as units with ``in_kb=0`` and counted in a warning). ``replace``
    swaps out an existing dataset of that name (and its runs) in the same transaction;
    the report's ``replaced`` counts what went with it.
    Raises :class:`InputRejected` on bad input, :class:`DatasetExists` when the name holds
    other content (and :class:`ChangedMeanwhile` when another process took the name while
    this one read its files), with nothing written.
    """
    check_name(name, "dataset name")
    check_source_path(directory, "the directory's path")
    directory = check_directory(directory)
    paths = [directory / f for f in FILES if (directory / f).is_file()]
    sha = content_sha256(paths)

    existing = _dataset_row(store.conn, name)
    if existing and existing[1] == sha:
        return _unchanged_report(store, name, existing[0], existing[2])
    if existing and not replace:
        raise name_taken(store.conn, name, existing[0])

    with store.transaction() as conn:
        replaced = claim_dataset_name(conn, name, existing, sha)
        if isinstance(replaced, int):   # another process imported these very files meanwhile
            return _unchanged_report(store, name, replaced, _dataset_row(conn, name)[2])
        report = _Importer(conn, directory, name, sha, strict).run()
        report.replaced = replaced
        return report


def _dataset_row(conn, name: str) -> tuple | None:
    return conn.execute("SELECT id, content_sha256, unit_kind FROM datasets WHERE name = ?", (name,)).fetchone()


def claim_dataset_name(conn, name: str, seen: tuple | None, sha: str) -> dict[str, int] | int | None:
    """Inside the import's write transaction: make way for dataset ``name``.

    ``seen`` is the row (id, sha, ...) looked up before the files were read. The check is
    repeated under the write lock because another process may have imported the same name
    meanwhile: if it holds the same content, its id is returned (nothing to do); any other
    change raises :class:`ChangedMeanwhile`. Otherwise the old dataset, if any, is deleted
    and its counted contents returned (None when there was none).
    """
    now = _dataset_row(conn, name)
    if (now and now[:2]) != (seen and seen[:2]):
        if now and now[1] == sha:
            return now[0]
        raise ChangedMeanwhile("dataset", name, seen)
    if now is None:
        return None
    contents = dataset_contents(conn, now[0])
    conn.execute("DELETE FROM datasets WHERE id = ?", (now[0],))
    return contents


def _unchanged_report(store: Store, name: str, dataset_id: int, kind: str) -> ImportReport:
    q = store.conn.execute
    retrievers = [r[0] for r in q("SELECT DISTINCT retriever FROM retrievals WHERE dataset_id = ? ORDER BY 1", (dataset_id,))]
    return ImportReport(
        dataset=name, dataset_id=dataset_id, unit_kind=kind,
        units=q("SELECT count(*) FROM units WHERE dataset_id = ?", (dataset_id,)).fetchone()[0],
        samples=q("SELECT count(*) FROM samples WHERE dataset_id = ?", (dataset_id,)).fetchone()[0],
        retrievals=q("SELECT count(*) FROM retrievals WHERE dataset_id = ?", (dataset_id,)).fetchone()[0],
        retrievers=retrievers, unchanged=True,
    )


class _Importer:
    """Streams the three files into an open transaction; raises on any problem."""

    def __init__(self, conn, directory: Path, name: str, sha: str, strict: bool):
        self.conn, self.dir, self.name, self.strict = conn, directory, name, strict
        self.log = ProblemLog()
        self.keys: dict[str, int] = {}           # normalized unit key -> uid
        self.key_lines: dict[str, int] = {}      # kb line of each key, for duplicate messages
        self.unknown: dict[str, int] = {}        # key -> uid for units added with in_kb=0
        self.unit_rows: list[tuple] = []
        self.kind: str | None = None
        cur = conn.execute(
            "INSERT INTO datasets (name, unit_kind, source, content_sha256, created_at) VALUES (?, 'triple', ?, ?, ?)",
            (name, str(directory), sha, utcnow()))
        self.dataset_id = cur.lastrowid

    def display(self, filename: str) -> str:
        return str(self.dir / filename)

    def run(self) -> ImportReport:
        self._import_kb()
        self.log.raise_if_any()
        self.conn.execute("UPDATE datasets SET unit_kind = ? WHERE id = ?", (self.kind, self.dataset_id))
        sids = self._import_samples()
        # Stop here if samples.jsonl has problems: a rejected sample would show up again in
        # retrieval.jsonl as a misleading "unknown sample id" (problems are reported file by file).
        self.log.raise_if_any()
        report = ImportReport(dataset=self.name, dataset_id=self.dataset_id, unit_kind=self.kind or "triple",
                              samples=len(sids))
        if (self.dir / "retrieval.jsonl").is_file():
            report.retrievals, report.retrievers = self._import_retrieval(sids)
        else:
            report.warnings.append(f"{self.display('retrieval.jsonl')}: not present; the dataset has no retrieval runs yet")
        self._flush_units(force=True)
        self.log.raise_if_any()
        report.units = len(self.keys)
        report.unknown_units = len(self.unknown)
        if self.unknown:
            report.warnings.append(
                f"{len(self.unknown)} gold or retrieved triples are not in {self.display('kb.jsonl')}; "
                "they were added as units outside the KB (use --strict to reject them)")
        return report

    # -- kb.jsonl ---------------------------------------------------------------------
    def _import_kb(self) -> None:
        fname = self.display("kb.jsonl")
        for lineno, rec in read_jsonl(self.dir / "kb.jsonl", self.log, display=fname):
            kind = "triple" if "triple" in rec else "chunk" if ("chunk_id" in rec or "text" in rec) else None
            if "triple" in rec and "chunk_id" in rec:
                self.log.add(fname, lineno, "$", "both triple and chunk_id: a KB line is one unit, a triple or a chunk")
                continue
            if kind is None:
                self.log.add(fname, lineno, "$", 'expected {"triple": [h, r, t]} or {"chunk_id", "doc_id", "text"}')
                continue
            if self.kind is None:
                self.kind = kind
            elif kind != self.kind:
                self.log.add(fname, lineno, "$", f"a {kind} record in a KB of {self.kind}s (a dataset holds one kind)")
                continue
            if kind == "triple":
                found = check_triple(rec["triple"])
                if found:
                    self.log.add(fname, lineno, "$.triple" + found[0], found[1])
                    continue
                h, r, t = rec["triple"]
                key = triple_key(h, r, t)
                row = (h, r, t, None, None, None)
                dup_field = "$.triple"
            else:
                if not check_required(self.log, fname, lineno, rec,
                                      [(f, check_str) for f in ("chunk_id", "doc_id", "text")]):
                    continue
                key = normalize_text(rec["chunk_id"])
                row = (None, None, None, rec["chunk_id"], rec["doc_id"], rec["text"])
                dup_field = "$.chunk_id"
            if key in self.keys:
                self.log.add(fname, lineno, dup_field, f"duplicate of line {self.key_lines[key]}")
                continue
            self._add_unit(key, row, in_kb=1)
            self.key_lines[key] = lineno

    def _add_unit(self, key: str, row: tuple, in_kb: int) -> int:
        uid = len(self.keys) + 1
        self.keys[key] = uid
        if not self.log:
            self.unit_rows.append((self.dataset_id, uid, key, *row, in_kb))
            self._flush_units()
        return uid

    def _flush_units(self, force: bool = False) -> None:
        if self.unit_rows and (force or len(self.unit_rows) >= _BATCH) and not self.log:
            self.conn.executemany(
                "INSERT INTO units (dataset_id, uid, key, head, relation, tail, chunk_id, doc_id, text, in_kb)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self.unit_rows)
            self.unit_rows = []

    def _resolve(self, unit: Any, fname: str, lineno: int, fld: str) -> int | None:
        """The uid of a gold/retrieved unit reference, adding unknown triples when allowed."""
        if self.kind == "chunk":
            if found := check_str(unit):
                self.log.add(fname, lineno, fld + found[0], found[1].replace("a string", "a chunk id string"))
                return None
            uid = self.keys.get(normalize_text(unit))
            if uid is None:
                self.log.add(fname, lineno, fld, f"chunk id {unit!r} is not in kb.jsonl")
            return uid
        if found := check_triple(unit):
            self.log.add(fname, lineno, fld + found[0], found[1])
            return None
        key = triple_key(*unit)
        uid = self.keys.get(key)
        if uid is not None:
            return uid
        if self.strict:
            self.log.add(fname, lineno, fld, f"triple {unit!r} is not in kb.jsonl (--strict)")
            return None
        uid = self._add_unit(key, (unit[0], unit[1], unit[2], None, None, None), in_kb=0)
        self.unknown[key] = uid
        return uid

    # -- samples.jsonl ----------------------------------------------------------------
    def _import_samples(self) -> dict[str, int]:
        fname = self.display("samples.jsonl")
        sids: dict[str, int] = {}
        id_lines: dict[str, int] = {}
        rows: list[tuple] = []
        for lineno, rec in read_jsonl(self.dir / "samples.jsonl", self.log, display=fname):
            row = self._sample_row(rec, fname, lineno, sids, id_lines)
            if row is None or self.log:
                continue
            rows.append(row)
            if len(rows) >= _BATCH:
                self._insert_samples(rows)
        if not self.log:
            self._insert_samples(rows)
        return sids

    def _sample_row(self, rec: dict, fname: str, lineno: int, sids: dict, id_lines: dict) -> tuple | None:
        ok = check_required(self.log, fname, lineno, rec, (
            ("id", check_str), ("question", check_str), ("answers", check_str_list), ("gold_paths", check_list)))
        for fld in ("aliases", "meta"):
            if fld in rec and (found := check_object(rec[fld])):
                self.log.add(fname, lineno, f"$.{fld}", found[1])
                ok = False
        aliases = rec.get("aliases") or {}
        for answer, names in aliases.items() if isinstance(aliases, dict) else ():
            if found := check_str_list(names):
                self.log.add(fname, lineno, f"$.aliases[{json.dumps(answer, ensure_ascii=False)}]{found[0]}", found[1])
                ok = False
        if not ok:
            return None
        sample_id = rec["id"]
        if sample_id in sids:
            self.log.add(fname, lineno, "$.id", f"duplicate id {sample_id!r} (first on line {id_lines[sample_id]})")
            return None
        paths = []
        for p, path in enumerate(rec["gold_paths"]):
            if not isinstance(path, list) or not path:
                self.log.add(fname, lineno, f"$.gold_paths[{p}]", "expected a non-empty array of units")
                ok = False
                continue
            uids = [self._resolve(u, fname, lineno, f"$.gold_paths[{p}][{j}]") for j, u in enumerate(path)]
            if None in uids:
                ok = False
            paths.append(uids)
        if not ok:
            return None
        sid = len(sids) + 1
        sids[sample_id] = sid
        id_lines[sample_id] = lineno
        dumps = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
        return (self.dataset_id, sid, sample_id, rec["question"], dumps(rec["answers"]), dumps(aliases),
                dumps(paths), dumps(rec.get("meta") or {}))

    def _insert_samples(self, rows: list[tuple]) -> None:
        self._flush_units(force=True)  # units added by gold paths must exist first
        if rows:
            self.conn.executemany(
                "INSERT INTO samples (dataset_id, sid, id, question, answers, aliases, gold_paths, meta)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            rows.clear()

    # -- retrieval.jsonl --------------------------------------------------------------
    def _import_retrieval(self, sids: dict[str, int]) -> tuple[int, list[str]]:
        fname = self.display("retrieval.jsonl")
        seen: dict[tuple[str, str], int] = {}
        rows: list[tuple] = []
        count = 0
        for lineno, rec in read_jsonl(self.dir / "retrieval.jsonl", self.log, display=fname):
            row = self._retrieval_row(rec, fname, lineno, sids, seen)
            if row is None or self.log:
                continue
            rows.append(row)
            count += 1
            if len(rows) >= _BATCH:
                self._insert_retrievals(rows)
        if not self.log:
            self._insert_retrievals(rows)
        return count, sorted({r for r, _ in seen})

    def _retrieval_row(self, rec: dict, fname: str, lineno: int, sids: dict, seen: dict) -> tuple | None:
        ok = check_required(self.log, fname, lineno, rec, (
            ("sample_id", check_str), ("retriever", check_label_name), ("results", check_list)))
        if not ok:
            return None
        sample_id, retriever = rec["sample_id"], rec["retriever"]
        if sample_id not in sids:
            self.log.add(fname, lineno, "$.sample_id", f"unknown sample id {sample_id!r} (not in samples.jsonl)")
            return None
        if (retriever, sample_id) in seen:
            self.log.add(fname, lineno, "$.sample_id",
                         f"duplicate results for ({sample_id!r}, {retriever!r}) (first on line {seen[(retriever, sample_id)]})")
            return None
        seen[(retriever, sample_id)] = lineno
        uids, scores, ranks = [], [], {}
        unit_field = "chunk_id" if self.kind == "chunk" else "triple"
        for j, res in enumerate(rec["results"]):
            base = f"$.results[{j}]"
            if found := check_object(res):
                self.log.add(fname, lineno, base, found[1])
                ok = False
                continue
            if "triple" in res and "chunk_id" in res:
                self.log.add(fname, lineno, base, f"both triple and chunk_id: a result names one unit (this dataset's "
                                                  f"units are {self.kind}s: {unit_field})")
                ok = False
                continue
            if unit_field not in res:
                self.log.add(fname, lineno, f"{base}.{unit_field}", "missing")
                ok = False
                continue
            if "score" not in res:
                self.log.add(fname, lineno, f"{base}.score", "missing")
                ok = False
            elif found := check_score(res["score"]):
                self.log.add(fname, lineno, f"{base}.score", found[1])
                ok = False
            uid = self._resolve(res[unit_field], fname, lineno, f"{base}.{unit_field}")
            if uid is None:
                ok = False
                continue
            if uid in ranks:
                self.log.add(fname, lineno, f"{base}.{unit_field}", f"duplicate of results[{ranks[uid]}]")
                ok = False
                continue
            ranks[uid] = j
            uids.append(uid)
            scores.append(res.get("score"))
        if not ok:
            return None
        return (self.dataset_id, retriever, sids[sample_id], json.dumps(uids), json.dumps(scores))

    def _insert_retrievals(self, rows: list[tuple]) -> None:
        self._flush_units(force=True)
        if rows:
            self.conn.executemany(
                "INSERT INTO retrievals (dataset_id, retriever, sid, uids, scores) VALUES (?, ?, ?, ?, ?)", rows)
            rows.clear()
