"""Run manifests (``run_manifests``), and the content digests and cache reads a manifest or a dry run needs.

A manifest is one JSON document per run, written with the run's plan (in the same
transaction) and extended by every execution. Runs planned before manifests existed have
none: :func:`get_manifest` raises :class:`~workbench.store.lookup.NotFound` for them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from workbench.store.db import Store, utcnow
from workbench.store.lookup import NotFound

NO_MANIFEST = "no manifest (planned before manifests were recorded)"


def insert_manifest(conn: sqlite3.Connection, run_id: int, manifest: dict[str, Any]) -> None:
    """Store a new run's manifest inside the caller's transaction (the one that writes the plan)."""
    now = utcnow()
    conn.execute("INSERT INTO run_manifests (run_id, manifest, created_at, updated_at) VALUES (?, ?, ?, ?)",
                 (run_id, _dumps(manifest), now, now))


def update_manifest(store: Store, run_id: int, change: Callable[[dict[str, Any] | None], dict[str, Any]]) -> dict:
    """Read, change and write a run's manifest in one transaction; returns what was written.

    ``change`` gets the stored manifest (``None`` when the run has none yet) and returns the
    new one. One transaction, so two executions of one run never lose each other's entry.
    """
    with store.transaction() as conn:
        row = conn.execute("SELECT manifest FROM run_manifests WHERE run_id = ?", (run_id,)).fetchone()
        manifest = change(None if row is None else json.loads(row[0]))
        now = utcnow()
        if row is None:
            conn.execute("INSERT INTO run_manifests (run_id, manifest, created_at, updated_at) VALUES (?, ?, ?, ?)",
                         (run_id, _dumps(manifest), now, now))
        else:
            conn.execute("UPDATE run_manifests SET manifest = ?, updated_at = ? WHERE run_id = ?",
                         (_dumps(manifest), now, run_id))
    return manifest


def get_manifest(store: Store, run_id: int, run_name: str = "") -> dict[str, Any]:
    """The run's manifest; :class:`NotFound` (saying it was planned before manifests) when it has none."""
    row = store.conn.execute("SELECT manifest FROM run_manifests WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFound(f"run {run_name}: {NO_MANIFEST}" if run_name else NO_MANIFEST)
    return json.loads(row[0])


def _dumps(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, sort_keys=True, ensure_ascii=False)


# -- content digests: what a run was planned over ------------------------------------------------
def _digest(rows: Iterable[tuple]) -> tuple[str, int]:
    """sha256 over rows of stored column texts (one JSON array per line) and how many rows."""
    digest, n = hashlib.sha256(), 0
    for row in rows:
        digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
        n += 1
    return digest.hexdigest(), n


def samples_digest(store: Store, dataset_id: int, limit: int | None) -> tuple[str, int, list[int]]:
    """The sha256 and count of the samples a run uses (the first ``limit`` in sid order), and their sids.

    Taken over the stored columns (id, question, answers, aliases, gold paths, meta), so the
    same samples imported into another database give the same digest.
    """
    sql = ("SELECT sid, id, question, answers, aliases, gold_paths, meta FROM samples WHERE dataset_id = ?"
           " ORDER BY sid" + (" LIMIT ?" if limit is not None else ""))
    rows = store.conn.execute(sql, (dataset_id, limit) if limit is not None else (dataset_id,)).fetchall()
    sha, n = _digest(row[1:] for row in rows)
    return sha, n, [row[0] for row in rows]


def retrieval_digest(store: Store, dataset_id: int, retriever: str, sids: list[int]) -> tuple[str, int]:
    """The sha256 and count of one retriever's rows (sample id, ranked uids, scores) for the samples ``sids``."""
    wanted = set(sids)
    rows = store.conn.execute(
        "SELECT r.sid, s.id, r.uids, r.scores FROM retrievals r JOIN samples s ON s.dataset_id = r.dataset_id"
        " AND s.sid = r.sid WHERE r.dataset_id = ? AND r.retriever = ? ORDER BY r.sid", (dataset_id, retriever))
    return _digest(row[1:] for row in rows if row[0] in wanted)


def units_digest(store: Store, dataset_id: int) -> tuple[str, int]:
    """The sha256 and count of a dataset's units (what evidence lines are made of), in uid order."""
    rows = store.conn.execute(
        "SELECT uid, key, head, relation, tail, chunk_id, doc_id, text, in_kb FROM units WHERE dataset_id = ?"
        " ORDER BY uid", (dataset_id,))
    return _digest(rows)


def dataset_content_sha256(store: Store, dataset_id: int) -> str | None:
    """The sha256 of the files the dataset was imported from (recorded by the import)."""
    row = store.conn.execute("SELECT content_sha256 FROM datasets WHERE id = ?", (dataset_id,)).fetchone()
    return row[0] if row else None


# -- reads for a dry run: nothing here writes ------------------------------------------------------
@contextmanager
def writes_refused(store: Store) -> Iterator[None]:
    """Within the block, any write to the database fails (SQLite's ``query_only``) instead of landing.

    A dry run promises to write nothing; this makes a write that slipped in an error, not a change.
    """
    store.conn.execute("PRAGMA query_only = ON")
    try:
        yield
    finally:
        store.conn.execute("PRAGMA query_only = OFF")


def known_file_sha256(store: Store, path: str | Path) -> str | None:
    """The sha256 ``model_files`` remembers for ``path`` at its current size and mtime, or None.

    The read half of :func:`workbench.models.locate.cached_file_sha256`, for callers that
    must not write (a dry run hashes the file itself when this is None).
    """
    path = Path(path).resolve()
    st = path.stat()
    row = store.conn.execute("SELECT size, mtime_ns, sha256 FROM model_files WHERE path = ?", (str(path),)).fetchone()
    return row[2] if row and row[0] == st.st_size and row[1] == st.st_mtime_ns else None


def cached_keys(store: Store, keys: Iterable[str]) -> set[str]:
    """Which of ``keys`` the generation cache already holds."""
    keys = list(dict.fromkeys(keys))
    found: set[str] = set()
    for i in range(0, len(keys), 500):
        part = keys[i:i + 500]
        found.update(k for (k,) in store.conn.execute(
            f"SELECT key FROM generations WHERE key IN ({','.join('?' * len(part))})", part))
    return found


def model_timings(store: Store, model_id: str) -> list[tuple[int, int, float]]:
    """``(prompt tokens evaluated, tokens generated, seconds)`` of every model call of runs on ``model_id``.

    From the jobs that ran the model (``source = 'model'``): their ``eval_tokens`` count the
    prompt tokens really evaluated after the KV-cache prefix reuse, which the cached
    generation row alone does not know.
    """
    return [(e, c, s) for e, c, s in store.conn.execute(
        # CROSS JOIN keeps events the outer loop: generations are looked up by their primary key,
        # where the other order would scan the events (no index on gen_key) once per generation.
        "SELECT e.eval_tokens, g.completion_tokens, g.seconds FROM events e CROSS JOIN generations g"
        " ON g.key = e.gen_key WHERE g.model_id = ? AND e.source = 'model' AND e.status = 'done'"
        " AND e.eval_tokens IS NOT NULL",
        (model_id,))]
