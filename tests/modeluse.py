"""Which tests run a real model: the ``real_model`` marker, kept complete by watching every test.

`just test-perturbed` runs only the tests marked ``real_model`` with the model's logits perturbed
(what another CPU's float sums may do to greedy text). A test that runs the model without the
marker would escape that check, so every test is watched, and one that used a real model
unmarked fails with the line to add. A test used it when, during its own run:

- this process asked llama.cpp to decode a batch (``LlamaContext.decode``: every generation step
  and every embedding goes through it), counted here by wrapping it; or
- a model slot was taken under the test's private slot path (``tmp_path/model.lock``,
  conftest's ``private_model_slot``): any llama.cpp load, in this process or in a CLI process
  the test started.
"""

from __future__ import annotations

import functools
from pathlib import Path

from llama_cpp._internals import LlamaContext

MARKER = "real_model"
CALLS = [0]


def _counted(method):
    @functools.wraps(method)
    def counting(self, *args, **kwargs):
        CALLS[0] += 1
        return method(self, *args, **kwargs)

    return counting


def install() -> None:
    """Count every batch llama.cpp decodes in this process (once per process)."""
    if not getattr(LlamaContext.decode, "__wrapped__", None):
        LlamaContext.decode = _counted(LlamaContext.decode)


def used_a_model(calls_before: int, slot_file: Path) -> bool:
    """Whether the model ran since ``calls_before`` here, or a process took the slot at ``slot_file``."""
    return CALLS[0] > calls_before or slot_file.exists()
