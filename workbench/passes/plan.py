"""Plan or find: a pass's plan is written once and found again by the same command.

A plan (a run, a claim run, a SearChain or a dedup run) is written whole, with its jobs,
in one transaction. Asked for again it is found, not planned twice: by its name (runs,
SearChain, dedup: the default name ends in a hash of the config) or by the hash itself
(claim runs). A name reused with another config is refused with every difference named,
so the jobs of two configs are never mixed under one name.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any, Callable, Mapping, TypeVar

from workbench.store.db import Store

# The hash is one function. The identifiers that keep a prefix of it keep the length they
# were first written with: they are stored and printed, and a plan made by an earlier
# version must be found again, under the same name, by the command that made it.
RUN_NAME_DIGITS = 8          # runs.name "{dataset}-{hash}"
PIPELINE_NAME_DIGITS = 10    # pipeline_runs.name "searchain-{dataset}-{hash}", dedup_runs.name "dedup-{kg}-{hash}"
CLAIMS_KEY_DIGITS = 16       # claim_runs.config_key

Row = TypeVar("Row")
Written = TypeVar("Written")
Prepared = TypeVar("Prepared")


def canonical_json(config: Mapping[str, Any]) -> str:
    """A config as JSON with sorted keys (tuples as lists): the text its hash is taken of."""
    return json.dumps(config, sort_keys=True)


def config_hash(config: Mapping[str, Any]) -> str:
    """The sha256 (64 hex digits) of a config's canonical JSON: what identifies a plan."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def default_name(prefix: str, config: Mapping[str, Any], digits: int) -> str:
    """``{prefix}-{hash}``, the hash cut to ``digits``: running the same command again finds the plan."""
    return f"{prefix}-{config_hash(config)[:digits]}"


def as_stored(config: Any) -> Any:
    """A config as it reads back from the database (tuples become lists)."""
    return json.loads(json.dumps(config))


def config_diff(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> str:
    """``key: old → new`` for every key that differs (nested keys dotted, values as JSON), ``; ``-joined."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            inner = config_diff(a, b, f"{prefix}{key}.")
            if inner:
                diffs.append(inner)
        elif a != b:
            diffs.append(f"{prefix}{key}: {json.dumps(a)} → {json.dumps(b)}")
    return "; ".join(diffs)


def refuse_changed(what: str, name: str, stored: Mapping[str, Any], wanted: Mapping[str, Any], *,
                   resume: str) -> None:
    """Raise ``ValueError`` (exit 2 in the CLI) when the plan stored as ``name`` has another config.

    ``stored`` and ``wanted`` hold the config with what it runs over (e.g. the dataset's
    name), so a plan of another dataset under the same name is refused too.
    """
    stored, wanted = as_stored(stored), as_stored(wanted)
    if stored != wanted:
        raise ValueError(f"{what} {name!r} exists with a different config; it is not mixed in. Choose another "
                         f"--name, or resume it with `{resume}`. Differences: {config_diff(stored, wanted)}")


def plan_or_find(store: Store, find: Callable[[sqlite3.Connection], Row | None],
                 write: Callable[[sqlite3.Connection, Prepared], Written],
                 prepare: Callable[[], Prepared] = lambda: None) -> tuple[Row | None, Written | None]:
    """The stored plan ``(row, None)``, or a new one written here ``(None, what write returned)``.

    ``find(conn)`` looks the plan up; ``prepare()`` computes what writing it needs once a
    first look found nothing, outside the write lock; ``write(conn, prepared)`` inserts the
    plan and its jobs in one transaction. The look is repeated under the write lock:
    another process may have planned the same plan since, and its plan is then found (for
    the caller to check) instead of tripping a UNIQUE constraint.
    """
    row = find(store.conn)
    if row is not None:
        return row, None
    prepared = prepare()
    with store.transaction() as conn:
        row = find(conn)
        if row is None:
            return None, write(conn, prepared)
    return row, None
