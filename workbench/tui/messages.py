"""Typed messages that workers post back to screens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class DataChanged(Message):
    """Another connection (a CLI run, a worker) committed to the database."""

    version: int


@dataclass
class Loaded(Message):
    """A worker finished loading ``what``; ``payload`` is a core result object."""

    what: str
    payload: Any


@dataclass
class RunProgress(Message):
    """Progress of a run executing in this app."""

    run: str
    progress: Any


@dataclass
class RunFinished(Message):
    """A run executing in this app stopped: finished, paused or failed."""

    run: str
    report: Any
