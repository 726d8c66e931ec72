"""A model option checked before a command writes anything: one check for every verb.

A verb that takes a model file (``run --model``, ``claims … --nli-model``, ``retrieve
--embedding-model`` …) hands what it was given to :func:`check_model_options` before it opens
a run, plans a job or hashes the file into ``model_files``. What a model of each role must be:

- ``generator``: a known name (``default``, ``gemma3-270m``) or a whole GGUF file whose
  architecture generates text (:func:`~workbench.models.locate.resolve_model`); or a served
  model, ``<base-url>#<model>``, whose server answers ``GET /models`` (a server that is down is
  refused here, before anything is written);
- ``embedding``: a known name, a BERT checkpoint (a directory with ``config.json`` or a
  ``.zip`` of one, converted once), or a whole GGUF of an encoder
  (:func:`~workbench.models.embedders.resolve_embedding_model`).

Either way a directory where a file is due, a device or a FIFO is refused from ``stat``,
never opened; a file's header is read within its own size and its weights never. A refusal
is one line naming the option (:class:`~workbench.errors.BadInput`: exit 2).
"""

from __future__ import annotations

from pathlib import Path

from workbench.errors import BadInput, EnvironmentFault
from workbench.models.base import ModelError
from workbench.models.embedders import resolve_embedding_model
from workbench.models.locate import resolve_model
from workbench.models.openai_http import OpenAIBackend, ServerUnreachable
from workbench.models.registry import served_model

GENERATOR = "generator"
EMBEDDING = "embedding"
ROLES = (GENERATOR, EMBEDDING)


def check_model(spec: str | None, role: str) -> Path | str:
    """The GGUF file ``spec`` names for ``role`` (see the module), checked without loading it; a
    served model's reference as given, once its server answered ``GET /models``.

    Raises :class:`ModelError` (one line naming the path or URL) when it cannot serve the role.
    """
    if role not in ROLES:
        raise ValueError(f"unknown model role {role!r} (one of {', '.join(ROLES)})")
    served = served_model(spec)
    if served is not None:
        backend = OpenAIBackend(*served, retries=1)
        try:
            backend.check()   # reachable: one line naming the URL when it is not
        finally:
            backend.close()
        return spec
    return resolve_model(spec) if role == GENERATOR else resolve_embedding_model(spec)


def check_model_options(*options: tuple[str, str | None, str]) -> None:
    """Check each ``(option, spec, role)`` in turn; the first that cannot serve is refused as
    :class:`BadInput` ``"OPTION: PATH: why"`` (exit 2), or, for a served model whose server
    does not answer, :class:`EnvironmentFault` (exit 1: the option may be right, the server is down)."""
    for option, spec, role in options:
        try:
            check_model(spec, role)
        except ServerUnreachable as exc:
            raise EnvironmentFault(f"{option}: {exc}") from None
        except ModelError as exc:
            raise BadInput(f"{option}: {exc}") from None
