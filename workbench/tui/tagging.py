"""Tagging a sample from any screen (Samples, Sample detail): the tag keys and the workers that write tags and notes."""

from __future__ import annotations

from textual.binding import Binding

from workbench.store import Store
from workbench.store.queries import get_run
from workbench.triage import set_note, toggle_tag

TAG_KEYS = {"A": "annotation-error", "L": "alias-miss", "R": "reasoning-fail", "F": "format-fail"}
TAG_GROUP = Binding.Group("Tag", compact=True)


def toggle_sample_tag(store: Store, run_name: str, sid: int, tag: str) -> tuple[str, bool]:
    """Tag or untag sample ``sid`` of the run's dataset; (tag, whether it is tagged now)."""
    return tag, toggle_tag(store, get_run(store, run_name).dataset_id, sid, tag)


def set_sample_note(store: Store, run_name: str, sid: int, text: str) -> int:
    """Set (empty: clear) the note of sample ``sid`` of the run's dataset; returns ``sid``."""
    set_note(store, get_run(store, run_name).dataset_id, sid, text)
    return sid
