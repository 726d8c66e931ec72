"""Loading a model file for real, before a verb writes anything.

The header check (:mod:`workbench.models.gguf`) is the fast first answer, but a header can be
whole and still not load: a 96-byte GGUF declaring ``general.architecture = llama`` and no
tensors, SmolLM2 with its architecture renamed, a tensor-less ``bert`` header. llama.cpp finds
those only when it loads the model, and a verb that loads its model on the first call has by
then written its run, its jobs and a ``model_files`` row. So every model a verb will use is
loaded here first (:func:`check_loads`): llama.cpp reads the hyperparameters, the vocabulary and
every tensor's shape, memory-mapping the weights (no context is made, no core is kept busy, so
the machine-wide model slot is not taken, only checked: :func:`~workbench.models.slot.check_slot`); then it is freed. What llama.cpp says of a failure
(its own error line, e.g. "unknown model architecture: 'xyzzy'") becomes one
:class:`~workbench.models.base.ModelError` line.

A file that loaded once in this process is not loaded again while its size, mtime and inode stay
the same: the TUI and the test suite check the same model many times.
"""

from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from workbench.models.base import ModelError
from workbench.models.slot import check_slot

__all__ = ["check_loads", "llama_errors", "llama_reason"]

# Files that loaded, by (real path, size, mtime_ns, inode).
_LOADED: set[tuple[str, int, int, int]] = set()
# llama.cpp's log callback is process-wide: one load at a time swaps it.
_LOCK = threading.Lock()
_GGML_LOG_LEVEL_ERROR = 4
_ERROR_MARK = "error loading model: "


def check_loads(path: str | Path) -> None:
    """Load the GGUF at ``path`` with llama.cpp (weights mapped, no context) and free it.

    Raises :class:`ModelError` naming the path and llama.cpp's reason when it cannot be loaded.
    """
    # The load a run makes later takes the machine-wide slot: a slot that cannot be taken is said now too.
    check_slot()
    path = Path(path)
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if key in _LOADED:
        return
    reason = _load_and_free(path)
    if reason is not None:
        raise ModelError(f"{path}: llama.cpp cannot load it: {reason}")
    _LOADED.add(key)


def _load_and_free(path: Path) -> str | None:
    """None if llama.cpp loads ``path``; else its reason, in one line."""
    from llama_cpp import llama_cpp as lib

    with llama_errors() as errors:
        params = lib.llama_model_default_params()
        params.n_gpu_layers = 0      # a check, not a run: nothing goes to a GPU
        params.use_mmap = True       # the weights are mapped, not read
        model = lib.llama_model_load_from_file(os.fsencode(path), params)
        if model:
            lib.llama_model_free(model)
    return None if model else llama_reason(errors)


@contextmanager
def llama_errors() -> Iterator[list[str]]:
    """While in it, llama.cpp's log goes to the yielded list (its error lines) instead of stderr.

    llama-cpp-python prints every warning of llama.cpp (it maps the levels of an older ggml,
    so WARN reads as ERROR): a vocabulary-only load says "n_ctx_seq (512) > n_ctx_train (0)",
    which is noise to a user. An error line is kept, for :func:`llama_reason`. One load at a
    time: the callback is the process's.
    """
    import llama_cpp
    from llama_cpp import _logger, llama_cpp as lib

    errors: list[str] = []

    @llama_cpp.llama_log_callback
    def capture(level, text, user_data):
        if level == _GGML_LOG_LEVEL_ERROR:
            errors.append(text.decode("utf-8", errors="replace"))

    with _LOCK:
        lib.llama_log_set(capture, ctypes.c_void_p(0))
        try:
            yield errors
        finally:
            lib.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


def llama_reason(errors: list[str]) -> str:
    """llama.cpp's own reason for a failed load, in one line, from the error lines it logged."""
    said = " ".join("".join(errors).split())
    if _ERROR_MARK in said:
        said = said.split(_ERROR_MARK)[-1].split(" llama_model_load_from_file")[0]
    return said.rstrip(". ") or "llama.cpp gave no reason"
