"""A model option checked before a command writes anything: one check for every verb.

A verb that takes a model file (``run --model``, ``claims … --nli-model``, ``retrieve
--embedding-model`` …) hands what it was given to :func:`check_model_options` before it opens
a run, plans a job or hashes the file into ``model_files``. What a model of each role must be:

- ``generator``: a known name (``default``, ``gemma3-270m``) or a whole GGUF file whose
  architecture generates text (:func:`~workbench.models.locate.resolve_model`); or a served
  model, ``<base-url>#<model>``, whose server lists it (``GET /models``) and answers a chat
  completion of one token (a server that is down, or answers something else, is refused here,
  before anything is written);
- ``embedding``: a known name, a BERT checkpoint (a directory with ``config.json`` or a
  ``.zip`` of one, converted once), or a whole GGUF of an encoder
  (:func:`~workbench.models.embedders.resolve_embedding_model`); or a served model whose server
  lists it and answers ``POST /embeddings`` for one short text.

Either way a directory where a file is due, a device or a FIFO is refused from ``stat``,
never opened; a file's header is read within its own size, the fast first answer. Then the
file is loaded for real by llama.cpp and freed (:func:`~workbench.models.loadcheck.check_loads`):
a header that is whole but that llama.cpp cannot load (an unknown architecture, no tensors) is
refused here too, before the verb writes its run or a ``model_files`` row. A refusal is one line
naming the option (:class:`~workbench.errors.BadInput`: exit 2), a server's wrong answer too; a
server that does not answer within ``timeout`` (the verb's ``--timeout``, for the whole check:
:meth:`~workbench.models.openai_http.OpenAIBackend.check`) is
:class:`~workbench.errors.EnvironmentFault` (exit 1).
"""

from __future__ import annotations

from pathlib import Path

from workbench.errors import BadInput, EnvironmentFault
from workbench.models.base import ModelError
from workbench.models.embedders import resolve_embedding_model
from workbench.models.loadcheck import check_loads
from workbench.models.locate import resolve_model
from workbench.models.openai_http import EMBEDDING, GENERATOR, OpenAIBackend, ServerUnreachable
from workbench.models.registry import served_model

ROLES = (GENERATOR, EMBEDDING)
__all__ = ["EMBEDDING", "GENERATOR", "ROLES", "check_model", "check_model_options"]


def check_model(spec: str | None, role: str, *, timeout: float | None = None) -> Path | str:
    """The GGUF file ``spec`` names for ``role`` (see the module), its header checked and the model
    loaded once and freed; a served model's reference as given, once its server listed it and
    answered one request in ``role``, all within ``timeout`` seconds (the backend's default when None).

    Raises :class:`ModelError` (one line naming the path or URL) when it cannot serve the role.
    """
    if role not in ROLES:
        raise ValueError(f"unknown model role {role!r} (one of {', '.join(ROLES)})")
    served = served_model(spec)
    if served is not None:
        backend = OpenAIBackend(*served, retries=1, **({} if timeout is None else {"timeout": timeout}))
        try:
            backend.check(role)   # one line naming the URL when it cannot serve the role
        finally:
            backend.close()
        return spec
    path = resolve_model(spec) if role == GENERATOR else resolve_embedding_model(spec)
    check_loads(path)
    return path


def check_model_options(*options: tuple[str, str | None, str], timeout: float | None = None) -> None:
    """Check each ``(option, spec, role)`` in turn; the first that cannot serve is refused as
    :class:`BadInput` ``"OPTION: PATH: why"`` (exit 2), or, for a served model whose server
    does not answer, :class:`EnvironmentFault` (exit 1: the option may be right, the server is down).
    ``timeout`` bounds each server's whole check (the verb's ``--timeout``)."""
    for option, spec, role in options:
        try:
            check_model(spec, role, timeout=timeout)
        except ServerUnreachable as exc:
            raise EnvironmentFault(f"{option}: {exc}") from None
        except ModelError as exc:
            raise BadInput(f"{option}: {exc}") from None
