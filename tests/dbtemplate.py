"""Databases built once per process, then copied: each test still gets its own file.

Fixtures such as ``tiny_swept_db`` build their database for every test that asks (a new store
and its migrations, an import, a sweep: a third of a second), and the tests that only run a verb
against it and throw it away pay that each time. :func:`copy_of` asks the fixture once, keeps what
it built as a template, and hands each test a private copy (tests/conftest.py ``copy_db``), so
what a test sees is what the fixture builds, and no test sees another's writes. (An empty migrated database is conftest's
``empty_template``.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import copy_db

_TEMPLATES: dict[str, Path] = {}


def copy_of(request: pytest.FixtureRequest, fixture: str, dst: Path) -> Path:
    """A copy at ``dst`` of the closed database the function-scoped ``fixture`` builds, built once per process."""
    if fixture not in _TEMPLATES:
        built = request.getfixturevalue(fixture)
        keep = request.getfixturevalue("tmp_path_factory").mktemp(f"template-{fixture}") / Path(built).name
        _TEMPLATES[fixture] = copy_db(built, keep)
    return copy_db(_TEMPLATES[fixture], dst)

