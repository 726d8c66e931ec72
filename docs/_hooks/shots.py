"""The docs' pictures of the app, put into the site as ``shots/`` by every build, never committed.

A committed screenshot goes stale as soon as a screen changes. `just docs` takes them from the running app
(scripts/docs_shots.py, on the demo database) into ``build/docs-shots/``, or the folder ``$WORKBENCH_DOCS_SHOTS``
names, and this hook adds every picture there to the site's files before mkdocs checks the pages' links: a
page that shows a picture the build did not take fails the strict build, naming it.
"""

from __future__ import annotations

import os
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ENV = "WORKBENCH_DOCS_SHOTS"
PICTURE_SUFFIXES = (".png", ".svg")


def shots_dir(config) -> Path:
    """Where the build finds the pictures: ``$WORKBENCH_DOCS_SHOTS``, else ``build/docs-shots`` beside mkdocs.yml."""
    return Path(os.environ.get(ENV) or Path(config.config_file_path).parent / "build" / "docs-shots")


def on_files(files: Files, config) -> Files:
    folder = shots_dir(config)
    pictures = sorted(p for p in folder.iterdir() if p.suffix in PICTURE_SUFFIXES) if folder.is_dir() else []
    if not pictures:
        raise PluginError(f"no pictures of the app in {folder}: `just docs` takes them (after `just demo`)")
    for picture in pictures:
        files.append(File.generated(config, f"shots/{picture.name}", abs_src_path=str(picture)))
    return files
