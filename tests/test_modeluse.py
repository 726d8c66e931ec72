"""The ``real_model`` marker stays complete (tests/modeluse.py): what counts as a test running a real model.

`just test-perturbed` runs only the marked tests with the model's output perturbed; conftest's
``real_model_is_marked`` fails any test that ran a model unmarked, by these two signs.
"""

from __future__ import annotations

import pytest

import modeluse
from outputcache import SharedOutputs
from workbench.models import slot
from workbench.models.embedder import CachedEmbedder
from workbench.store import open_store


def test_a_model_slot_taken_under_the_tests_own_path_counts_as_running_a_model(tmp_path):
    """A CLI process the test started took the slot at the test's path: it loaded a model."""
    slot = tmp_path / "cli" / "model.lock"   # not this test's own slot: the watcher would take it for a real load
    slot.parent.mkdir()
    assert not modeluse.used_a_model(modeluse.CALLS[0], slot)
    slot.touch()
    assert modeluse.used_a_model(modeluse.CALLS[0], slot)


@pytest.mark.real_model
def test_an_embedding_in_this_process_is_counted(store, tmp_path):
    before = modeluse.CALLS[0]
    embedder = CachedEmbedder(store, None)
    try:
        assert embedder.vectors(["a recipe for braised pork"]).shape[0] == 1
    finally:
        embedder.close()
    assert modeluse.CALLS[0] > before
    assert modeluse.used_a_model(before, tmp_path / "elsewhere.lock")


def test_building_a_shared_scenario_is_not_the_calling_tests_model_use(tmp_path):
    """A scenario's build (tests/outputcache.py) takes its own model slot and its decodes are not counted for the
    test that asked for it: the pool's real pass does not make that test a real-model test."""
    pool = SharedOutputs(tmp_path / "pool")
    pool.root.mkdir()
    before = modeluse.CALLS[0]
    seen = {}

    def build(db):
        open_store(db).close()
        with slot.acquire("a scenario's pass"):   # a real take of the slot, as a model load makes
            seen["slot"] = slot.slot_path()
        modeluse.CALLS[0] += 3                     # what three decodes add (counted as the test above shows)

    pool.scenario("decodes", build)
    assert seen["slot"].parent == pool.root / "scenario-decodes" and seen["slot"].exists()
    assert slot.slot_path() == tmp_path / "model.lock" and not slot.slot_path().exists()   # the test's own, restored
    assert modeluse.CALLS[0] == before and not modeluse.used_a_model(before, tmp_path / "model.lock")
