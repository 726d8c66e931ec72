"""Triage: tags and notes on samples, stored in SQLite, and the export of tagged samples.

Tags are free strings; :data:`COMMON_TAGS` are the ones the TUI binds to keys. The
ledger can exclude samples carrying given tags (``run_ledger(..., exclude_tags=...)``).
"""

from __future__ import annotations

import json
import re
from typing import Iterable, TextIO

from workbench.store.db import Store, utcnow

COMMON_TAGS = ("annotation-error", "alias-miss", "reasoning-fail", "format-fail")
_TAG = re.compile(r"^[\w][\w.:-]{0,63}$")


def _check_tag(tag: str) -> str:
    tag = tag.strip()
    if not _TAG.match(tag):
        raise ValueError(f"tag {tag!r}: use 1–64 letters, digits, '-', '_', '.' or ':' (no spaces)")
    return tag


def add_tag(store: Store, dataset_id: int, sid: int, tag: str) -> None:
    """Tag a sample (idempotent)."""
    with store.transaction() as conn:
        conn.execute("INSERT OR IGNORE INTO tags (dataset_id, sid, tag, created_at) VALUES (?, ?, ?, ?)",
                     (dataset_id, sid, _check_tag(tag), utcnow()))


def remove_tag(store: Store, dataset_id: int, sid: int, tag: str) -> None:
    """Remove a tag from a sample (no error if absent)."""
    with store.transaction() as conn:
        conn.execute("DELETE FROM tags WHERE dataset_id = ? AND sid = ? AND tag = ?", (dataset_id, sid, tag))


def toggle_tag(store: Store, dataset_id: int, sid: int, tag: str) -> bool:
    """Add the tag if absent, remove it if present; return whether it is now set."""
    present = store.conn.execute("SELECT 1 FROM tags WHERE dataset_id = ? AND sid = ? AND tag = ?",
                                 (dataset_id, sid, tag)).fetchone()
    (remove_tag if present else add_tag)(store, dataset_id, sid, tag)
    return not present


def datasets_with_sample(store: Store, sample_id: str) -> list[str]:
    """The names of the datasets holding a sample with this id, oldest import first."""
    return [r[0] for r in store.conn.execute(
        "SELECT d.name FROM samples s JOIN datasets d ON d.id = s.dataset_id WHERE s.id = ? ORDER BY d.id",
        (sample_id,))]


def tags_of(store: Store, dataset_id: int, sid: int) -> list[str]:
    """A sample's tags, sorted."""
    return [r[0] for r in store.conn.execute(
        "SELECT tag FROM tags WHERE dataset_id = ? AND sid = ? ORDER BY tag", (dataset_id, sid))]


def tag_counts(store: Store, dataset_id: int) -> dict[str, int]:
    """How many samples carry each tag."""
    return dict(store.conn.execute(
        "SELECT tag, count(*) FROM tags WHERE dataset_id = ? GROUP BY tag ORDER BY tag", (dataset_id,)).fetchall())


def set_note(store: Store, dataset_id: int, sid: int, note: str) -> None:
    """Set (or, with an empty note, clear) a sample's free-text note."""
    with store.transaction() as conn:
        if note.strip():
            conn.execute("INSERT INTO notes (dataset_id, sid, note, updated_at) VALUES (?, ?, ?, ?)"
                         " ON CONFLICT (dataset_id, sid) DO UPDATE SET note = excluded.note,"
                         " updated_at = excluded.updated_at", (dataset_id, sid, note, utcnow()))
        else:
            conn.execute("DELETE FROM notes WHERE dataset_id = ? AND sid = ?", (dataset_id, sid))


def note_of(store: Store, dataset_id: int, sid: int) -> str:
    row = store.conn.execute("SELECT note FROM notes WHERE dataset_id = ? AND sid = ?", (dataset_id, sid)).fetchone()
    return row[0] if row else ""


def sids_with_tags(store: Store, dataset_id: int, tags: Iterable[str]) -> set[int]:
    """Samples carrying any of ``tags``."""
    tags = list(tags)
    if not tags:
        return set()
    marks = ",".join("?" * len(tags))
    return {r[0] for r in store.conn.execute(
        f"SELECT DISTINCT sid FROM tags WHERE dataset_id = ? AND tag IN ({marks})", (dataset_id, *tags))}


def tagged_samples(store: Store, dataset_id: int, tags: Iterable[str] | None = None) -> list[dict]:
    """Tagged samples (all tags, or only ``tags``) in sid order: sid, sample_id, question, answers, tags, note."""
    tags = list(tags or [])
    where = ""
    params: list = [dataset_id]
    if tags:
        where = f" AND t.tag IN ({','.join('?' * len(tags))})"
        params += tags
    rows = store.conn.execute(
        "SELECT s.sid, s.id, s.question, s.answers, group_concat(t.tag, char(31)), n.note"
        " FROM tags t JOIN samples s ON s.dataset_id = t.dataset_id AND s.sid = t.sid"
        " LEFT JOIN notes n ON n.dataset_id = s.dataset_id AND n.sid = s.sid"
        f" WHERE t.dataset_id = ?{where} GROUP BY s.sid ORDER BY s.sid", params).fetchall()
    return [{"sid": sid, "sample_id": sample_id, "question": question, "answers": json.loads(answers),
             "tags": sorted(tag_list.split("\x1f")), "note": note or ""}
            for sid, sample_id, question, answers, tag_list, note in rows]


def export_tagged(store: Store, dataset_id: int, out: TextIO, tags: Iterable[str] | None = None) -> int:
    """Write tagged samples (all tags, or only ``tags``) as JSONL with their tags and note."""
    rows = tagged_samples(store, dataset_id, tags)
    for row in rows:
        out.write(json.dumps({k: row[k] for k in ("sample_id", "question", "answers", "tags", "note")},
                             ensure_ascii=False) + "\n")
    return len(rows)
