"""The options verb groups share, each defined once: ``--db``, ``--json``, the bootstrap's
``--resamples`` and ``--seed``, and the execution options of a resumable pass with a model.

Most are functions adding the options where the caller is, not parent parsers: argparse
lists a parent's options before the verb's own, and every verb's ``--help`` keeps its order.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from workbench.errors import BadInput
from workbench.metrics.stats import RESAMPLES
from workbench.models.base import ModelError
from workbench.models.openai_http import DEFAULT_TIMEOUT
from workbench.models.registry import BACKENDS, served_model, served_ref

DB_HELP = "SQLite database path (default: $WORKBENCH_DB or the per-user data dir)"
JSON_HELP = "machine-readable output"
WAIT_HELP = "if another process is writing this run, wait for it to finish (default: refuse, exit 1)"
SCORES = ("acc", "cover", "set_f1")


def top_db_parent() -> argparse.ArgumentParser:
    """``--db`` before the verb (``workbench --db X VERB``)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--db", help=DB_HELP)
    return parent


def db_parent() -> argparse.ArgumentParser:
    """``--db`` after the verb (``workbench VERB --db X``); every verb and sub-verb takes it."""
    parent = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a subparser default would otherwise overwrite a --db given before the verb.
    parent.add_argument("--db", default=argparse.SUPPRESS, help=DB_HELP)
    return parent


def add_json(parser: argparse.ArgumentParser, help: str | None = JSON_HELP) -> None:
    """``--json``: machine-readable output on stdout."""
    parser.add_argument("--json", action="store_true", help=help)


FORCE_HELP = "replace FILE if it exists (atomically, by rename); without --force an existing file is refused"


def add_out(parser: argparse.ArgumentParser, help: str, *, required: bool = True, metavar: str = "FILE") -> None:
    """``--out FILE`` and ``--force``: a file the verb writes, guarded by ``workbench.data.outfile``.

    ``main`` checks the target before the verb does any work (the open database, any SQLite
    file, a link, a directory or device, an existing file without ``--force`` are refused);
    the write checks it again and renames a finished temp file over it. ``-`` is stdout: the
    guard's rule, so the verb writes to it as to any file.
    """
    parser.add_argument("--out", required=required, metavar=metavar, help=help)
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)
    parser.set_defaults(out_target="file")


def add_resamples(parser: argparse.ArgumentParser,
                  help: str | None = f"bootstrap resamples (default {RESAMPLES})") -> None:
    """``--resamples``: how many bootstrap resamples an interval is drawn from."""
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help=help)


def add_seed(parser: argparse.ArgumentParser, help: str) -> None:
    """``--seed``: a seed llama.cpp can take (32 bits), default 0; ``help`` says what it seeds."""
    parser.add_argument("--seed", type=int, default=0, help=help)


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    """``--resamples`` and ``--seed`` of a bootstrap, worded alike in every verb."""
    add_resamples(parser)
    add_seed(parser, "bootstrap seed (default 0)")


def add_model_threads(parser: argparse.ArgumentParser) -> None:
    """``--threads`` and ``--n-gpu-layers`` of llama.cpp."""
    parser.add_argument("--threads", type=int, help="llama.cpp n_threads (default: every core this process may use)")
    parser.add_argument("--n-gpu-layers", type=int, default=0,
                        help="layers offloaded to a GPU (CUDA build; -1 = all)")


def add_served(parser: argparse.ArgumentParser) -> None:
    """``--concurrency`` and ``--timeout``: how a served model is called."""
    parser.add_argument("--concurrency", type=int, default=4,
                        help="requests in flight at once to a served model: that many items prepared at once, "
                             "each still committed whole (default 4; a local GGUF runs one call at a time)")
    add_timeout(parser, "then the pass ends, exit 1, resumable")


def add_timeout(parser: argparse.ArgumentParser, then: str = "then exit 1") -> None:
    """``--timeout``: how long a served model may take to answer; the up-front check waits as long."""
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"seconds a served model may take to answer one request before it is tried again "
                             f"(3 attempts; {then}) (default {DEFAULT_TIMEOUT:g})")


def model_options(args: argparse.Namespace) -> dict:
    """How the verb's models run, as :func:`~workbench.models.cached.default_llm` takes it: llama.cpp threads and
    GPU layers for a local GGUF; requests in flight and the timeout for a served one."""
    return dict(n_threads=getattr(args, "threads", None), n_gpu_layers=getattr(args, "n_gpu_layers", 0),
                concurrency=getattr(args, "concurrency", 1), timeout=getattr(args, "timeout", DEFAULT_TIMEOUT))


def add_model_choice(parser: argparse.ArgumentParser) -> None:
    """Where the verb's ``--model`` runs (``--backend``, ``--base-url``) and how a served one is called (:func:`add_served`)."""
    parser.add_argument("--backend", choices=BACKENDS, default="llamacpp",
                        help="llamacpp: --model is a local GGUF run in this process (default); openai: --model is "
                             "the name of a model served at --base-url (any OpenAI-compatible server)")
    parser.add_argument("--base-url", help="with --backend openai: the server's API root, e.g. "
                                           "http://127.0.0.1:8000/v1 (a per-role model option takes URL#NAME)")
    add_served(parser)


def chosen_model(args: argparse.Namespace, model: str | None) -> str | None:
    """What ``--model`` means under ``--backend``/``--base-url``: a local model as given, a served one as ``URL#NAME``.

    A model already written ``URL#NAME`` is taken as it is. Refuses (:class:`BadInput`, exit 2)
    ``--backend openai`` without ``--base-url`` or a model name, and ``--base-url`` without it.
    """
    backend, base_url = getattr(args, "backend", "llamacpp"), getattr(args, "base_url", None)
    try:
        if served_model(model) is not None:
            return model
        if backend == "openai":
            if not base_url:
                raise BadInput("--backend openai needs --base-url, the server's API root (e.g. http://127.0.0.1:8000/v1)")
            return served_ref(base_url, model or "")
    except ModelError as exc:
        raise BadInput(f"--model: {exc}") from None
    if base_url:
        raise BadInput("--base-url needs --backend openai")
    return model


def add_retry_errors(parser: argparse.ArgumentParser, help: str) -> None:
    """``--retry-errors``: also redo what failed the last time."""
    parser.add_argument("--retry-errors", action="store_true", help=help)


def add_wait(parser: argparse.ArgumentParser) -> None:
    """``--wait``: wait for another process writing the same run instead of refusing."""
    parser.add_argument("--wait", action="store_true", help=WAIT_HELP)


def model_pass_parent() -> argparse.ArgumentParser:
    """Options of a resumable pass with a model (claims, SearChain, dedup, relevance): how it runs."""
    parent = argparse.ArgumentParser(add_help=False)
    add_model_threads(parent)
    add_retry_errors(parent, "also redo items that failed")
    add_wait(parent)
    add_json(parent)
    return parent


@dataclass(frozen=True)
class SharedParents:
    """The parent parsers handed to every group's ``register(subparsers, parents)``."""

    db: argparse.ArgumentParser          # --db after the verb
    model_pass: argparse.ArgumentParser  # threads, GPU layers, --retry-errors, --wait, --json
    model_choice: argparse.ArgumentParser  # --backend, --base-url: where --model runs


def shared_parents() -> SharedParents:
    """One of each shared parent, for one parser tree."""
    choice = argparse.ArgumentParser(add_help=False)
    add_model_choice(choice)
    return SharedParents(db=db_parent(), model_pass=model_pass_parent(), model_choice=choice)
