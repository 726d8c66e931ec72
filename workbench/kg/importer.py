"""Importing a KG for deduplication: triples with provenance, their chunks, gold clusters.

A directory holds:
- ``kb.jsonl``: ``{"triple": [h, r, t], "source_chunks": ["c1", ...]}``, the dataset
  KB line (docs/design.md §2) with an optional ``source_chunks`` (the chunks the triple was extracted from);
- ``chunks.jsonl`` (optional): ``{"chunk_id": str, "text": str}``;
- ``gold_clusters.jsonl`` (optional): ``{"entity": str, "cluster": str}``, for evaluation.

Entities are the distinct head and tail strings (after Unicode NFC only: NFKC or case
folding would already merge some of the very duplicates the run is meant to find). The
import is one transaction; any bad line is reported as ``file:line: field: reason`` and
nothing is written.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from workbench.data.errors import ProblemLog
from workbench.data.fields import check_name, check_required, check_source_path, check_str, check_str_list, check_triple
from workbench.data.importer import ChangedMeanwhile, DatasetExists, content_sha256, count_noun
from workbench.data.infile import check_input, check_optional
from workbench.data.jsonl import read_jsonl
from workbench.store.db import Store, utcnow

FILES = ("kb.jsonl", "chunks.jsonl", "gold_clusters.jsonl")


@dataclass
class KGImportReport:
    kg: str
    triples: int
    entities: int
    chunks: int
    gold: int
    unchanged: bool = False
    replaced: dict[str, int] | None = None   # what replacing the old KG deleted (see kg_contents)


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def import_kg(store: Store, directory: str | Path, name: str, *, replace: bool = False) -> KGImportReport:
    """Import ``directory`` as KG ``name`` in one transaction (re-importing the same files is a no-op).

    A KG of that name holding other content raises :class:`DatasetExists` unless ``replace``,
    which deletes it (with its dedup runs) in the same transaction; the report counts what went.
    """
    check_name(name, "KG name")
    check_source_path(directory, "the directory's path")
    expected = "a KG directory holds kb.jsonl, optionally chunks.jsonl and gold_clusters.jsonl"
    directory = check_input(directory, directory=True, hint=expected)
    check_input(directory / "kb.jsonl", hint=expected)
    paths = [directory / f for f in FILES if check_optional(directory / f)]
    sha = content_sha256(paths)
    existing = store.conn.execute("SELECT id, content_sha256 FROM kgs WHERE name = ?", (name,)).fetchone()
    if existing and existing[1] == sha:
        return _counts(store, name, existing[0], unchanged=True)
    if existing and not replace:
        raise DatasetExists(f"KG {name!r} already exists with different content; pass --replace to replace it "
                            f"(that deletes {describe_kg_contents(kg_contents(store.conn, existing[0]))})")
    log = ProblemLog()
    chunks = _read_chunks(directory, log)
    triples, names = _read_kb(directory, log, chunks)
    gold = _read_gold(directory, log, names)
    log.raise_if_any()
    degree = [0] * len(names)
    for h, _, t, _ in triples:
        degree[h] += 1
        degree[t] += 1
    with store.transaction() as conn:
        # Checked again under the write lock: another process may have taken the name meanwhile.
        now = conn.execute("SELECT id, content_sha256 FROM kgs WHERE name = ?", (name,)).fetchone()
        if now != existing:
            if now and now[1] == sha:
                return _counts(store, name, now[0], unchanged=True)
            raise ChangedMeanwhile("KG", name, existing)
        replaced = None
        if existing:
            replaced = kg_contents(conn, existing[0])
            conn.execute("DELETE FROM kgs WHERE id = ?", (existing[0],))
        kg_id = conn.execute("INSERT INTO kgs (name, source, content_sha256, created_at) VALUES (?, ?, ?, ?)",
                             (name, str(directory), sha, utcnow())).lastrowid
        conn.executemany("INSERT INTO kg_entities VALUES (?, ?, ?, ?)",
                         [(kg_id, eid, n, degree[eid]) for n, eid in names.items()])
        conn.executemany("INSERT INTO kg_triples VALUES (?, ?, ?, ?, ?, ?)",
                         [(kg_id, tid, h, r, t, json.dumps(c)) for tid, (h, r, t, c) in enumerate(triples)])
        conn.executemany("INSERT INTO kg_chunks VALUES (?, ?, ?)", [(kg_id, c, t) for c, t in chunks.items()])
        conn.executemany("INSERT INTO kg_gold VALUES (?, ?, ?)", [(kg_id, eid, c) for eid, c in gold.items()])
    report = _counts(store, name, kg_id)
    report.replaced = replaced
    return report


def kg_contents(conn, kg_id: int) -> dict[str, int]:
    """What deleting a KG removes with it (every table cascades from ``kgs``)."""
    one = lambda sql: conn.execute(sql, (kg_id,)).fetchone()[0]  # noqa: E731
    runs = "SELECT id FROM dedup_runs WHERE kg_id = ?"
    return {
        "triples": one("SELECT count(*) FROM kg_triples WHERE kg_id = ?"),
        "entities": one("SELECT count(*) FROM kg_entities WHERE kg_id = ?"),
        "chunks": one("SELECT count(*) FROM kg_chunks WHERE kg_id = ?"),
        "gold": one("SELECT count(*) FROM kg_gold WHERE kg_id = ?"),
        "dedup_runs": one("SELECT count(*) FROM dedup_runs WHERE kg_id = ?"),
        "verdicts": one(f"SELECT count(*) FROM dedup_verdicts WHERE status = 'done' AND run_id IN ({runs})"),
        "decisions": one(f"SELECT count(*) FROM dedup_decisions WHERE run_id IN ({runs})"),
    }


def describe_kg_contents(c: dict[str, int]) -> str:
    """``120 triples, 80 entities, 12 chunks, 1 dedup run (40 judge verdicts, 3 decisions)``."""
    parts = [count_noun(c["triples"], "triple"), count_noun(c["entities"], "entity", "entities"),
             count_noun(c["chunks"], "chunk")]
    if c["gold"]:
        parts.append(count_noun(c["gold"], "gold cluster label"))
    runs = count_noun(c["dedup_runs"], "dedup run")
    if c["dedup_runs"]:
        runs += f" ({count_noun(c['verdicts'], 'judge verdict')}, {count_noun(c['decisions'], 'decision')})"
    return ", ".join(parts + [runs])


def _read_chunks(directory: Path, log: ProblemLog) -> dict[str, str]:
    path = directory / "chunks.jsonl"
    chunks: dict[str, str] = {}
    if not path.is_file():
        return chunks
    first: dict[str, int] = {}
    for lineno, rec in read_jsonl(path, log, display=str(path)):
        if not isinstance(rec, dict):
            log.add(str(path), lineno, "$", "expected an object {\"chunk_id\", \"text\"}")
            continue
        if not check_required(log, str(path), lineno, rec, [("chunk_id", check_str), ("text", check_str)]):
            continue
        cid = rec["chunk_id"]
        if cid in first:
            log.add(str(path), lineno, "$.chunk_id", f"duplicate chunk id {cid!r} (first on line {first[cid]})")
            continue
        first[cid] = lineno
        chunks[cid] = rec["text"]
    return chunks


def _read_kb(directory: Path, log: ProblemLog, chunks: dict[str, str]):
    path = directory / "kb.jsonl"
    names: dict[str, int] = {}
    triples: list[tuple[int, str, int, list[str]]] = []
    seen: dict[tuple[str, str, str], int] = {}
    for lineno, rec in read_jsonl(path, log, display=str(path)):
        if not isinstance(rec, dict):
            log.add(str(path), lineno, "$", "expected an object {\"triple\": [h, r, t], \"source_chunks\": [...]}")
            continue
        if "triple" not in rec:
            log.add(str(path), lineno, "$.triple", "missing (a dedup KG holds triples)")
            continue
        if found := check_triple(rec["triple"]):
            log.add(str(path), lineno, f"$.triple{found[0]}", found[1])
            continue
        source = rec.get("source_chunks", [])
        if found := check_str_list(source, allow_empty=True):
            log.add(str(path), lineno, f"$.source_chunks{found[0]}", found[1])
            continue
        missing = [c for c in source if c not in chunks]
        if missing:
            log.add(str(path), lineno, "$.source_chunks",
                    f"chunk {missing[0]!r} is not in chunks.jsonl" if chunks else "no chunks.jsonl to resolve it")
            continue
        h, r, t = (_nfc(x) for x in rec["triple"])  # exact: "John  Smith" may be another entity
        if (h, r, t) in seen:
            log.add(str(path), lineno, "$.triple", f"duplicate triple (first on line {seen[(h, r, t)]})")
            continue
        seen[(h, r, t)] = lineno
        for n in (h, t):
            names.setdefault(n, len(names))
        triples.append((names[h], r, names[t], list(dict.fromkeys(source))))
    return triples, names


def _read_gold(directory: Path, log: ProblemLog, names: dict[str, int]) -> dict[int, str]:
    path = directory / "gold_clusters.jsonl"
    gold: dict[int, str] = {}
    if not path.is_file():
        return gold
    first: dict[int, int] = {}
    for lineno, rec in read_jsonl(path, log, display=str(path)):
        if not isinstance(rec, dict):
            log.add(str(path), lineno, "$", "expected an object {\"entity\", \"cluster\"}")
            continue
        if not check_required(log, str(path), lineno, rec, [("entity", check_str), ("cluster", check_str)]):
            continue
        eid = names.get(_nfc(rec["entity"]))
        if eid is None:
            log.add(str(path), lineno, "$.entity", f"{rec['entity']!r} is not an entity of kb.jsonl")
            continue
        if eid in first:
            log.add(str(path), lineno, "$.entity", f"entity {rec['entity']!r} already has a cluster (line "
                                                   f"{first[eid]})")
            continue
        first[eid] = lineno
        gold[eid] = rec["cluster"]
    return gold


def _counts(store: Store, name: str, kg_id: int, unchanged: bool = False) -> KGImportReport:
    q = lambda sql: store.conn.execute(sql, (kg_id,)).fetchone()[0]  # noqa: E731
    return KGImportReport(name, q("SELECT count(*) FROM kg_triples WHERE kg_id = ?"),
                          q("SELECT count(*) FROM kg_entities WHERE kg_id = ?"),
                          q("SELECT count(*) FROM kg_chunks WHERE kg_id = ?"),
                          q("SELECT count(*) FROM kg_gold WHERE kg_id = ?"), unchanged)
