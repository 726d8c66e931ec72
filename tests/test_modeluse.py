"""The ``real_model`` marker stays complete (tests/modeluse.py): what counts as a test running a real model.

`just test-perturbed` runs only the marked tests with the model's output perturbed; conftest's
``real_model_is_marked`` fails any test that ran a model unmarked, by these two signs.
"""

from __future__ import annotations

import pytest

import modeluse
from workbench.models.embedder import CachedEmbedder


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
