"""The tiny dataset with the default model's sha256 already remembered, for modules that plan many runs with it.

Planning a run with a model records the model file's sha256 in its manifest, remembered per database in
``model_files`` (by path, size and mtime). A test's fresh database hashes the 98 MB SmolLM2 file again:
0.27 s of CPU each time, for a value every test of a module shares. The template below is built once per
module by the workbench's own ``cached_file_sha256``, so each copy finds it remembered, as a database that
planned one run before does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import copy_db, tiny_dir
from workbench.data.importer import import_dataset
from workbench.models.locate import cached_file_sha256, default_model_path
from workbench.store import Store, open_store


def hashed_tiny_template(directory: Path) -> Path:
    """conftest's tiny dataset imported as ``tiny`` into ``directory/wb.db``, the default model's sha256 remembered;
    closed."""
    path = directory / "wb.db"
    store = open_store(path)
    try:
        import_dataset(store, tiny_dir.__wrapped__(directory), "tiny")
        cached_file_sha256(store, default_model_path())
    finally:
        store.close()
    return path


def open_copy(template: Path, tmp_path: Path) -> Store:
    """This test's own store: a copy of ``template`` in ``tmp_path``."""
    return open_store(copy_db(template, tmp_path / "wb.db"))


@pytest.fixture(scope="module")
def tiny_template(tmp_path_factory) -> Path:
    """The tiny dataset with the default model's sha256 remembered, built once per module that imports this."""
    return hashed_tiny_template(tmp_path_factory.mktemp("tiny-hashed"))


@pytest.fixture
def tiny_store(tmp_path, tiny_template):
    """The tiny dataset imported as ``tiny`` (conftest's), in a copy of ``tiny_template``."""
    store = open_copy(tiny_template, tmp_path)
    yield store
    store.close()
