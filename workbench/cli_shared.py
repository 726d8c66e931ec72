"""What every group of CLI verbs shares: the store, JSON output, file output, and resumable passes."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from workbench.cli_types import MAX_THREADS, count


def store_of(args):
    """The database named by ``--db`` (or the default one).

    Verbs that only read declare it with ``set_defaults(readonly=True)``: they then work on
    a database this process cannot write (opened read-only) or one from a newer workbench
    (read with a warning), where the other verbs are refused with one line.
    """
    from workbench.store import open_store

    store = open_store(args.db, readonly=getattr(args, "readonly", False))
    if store.newer_schema:
        print(f"warning: {store.path} was written by a newer workbench (schema {store.newer_schema}); "
              "reading it read-only", file=sys.stderr)
    return store


def json_default(value):
    from dataclasses import asdict, is_dataclass

    if is_dataclass(value):
        return asdict(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def emit_json(obj) -> None:
    """Pretty JSON on stdout (dataclasses become objects)."""
    json.dump(obj, sys.stdout, ensure_ascii=False, indent=2, default=json_default)
    sys.stdout.write("\n")


def write_out(out: str, text: str, what: str) -> None:
    """Write ``text`` to exactly the path the user named (atomically), or to stdout for ``-``."""
    from workbench.data.exports import write_atomic

    if str(out) == "-":
        sys.stdout.write(text)
    else:
        write_atomic(out, [text])
        print(f"wrote {what} to {out}")


WAIT_HELP = "if another process is writing this run, wait for it to finish (default: refuse, exit 1)"


def say(line: str) -> None:
    """One line for the user on stderr (stdout stays for --json)."""
    print(line, file=sys.stderr, flush=True)


def pass_parent() -> argparse.ArgumentParser:
    """Options of a resumable pass with the local model (claims, SearChain, dedup)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--threads", type=count(1, MAX_THREADS), help="llama.cpp n_threads (default: all cores)")
    parent.add_argument("--n-gpu-layers", type=int, default=0, help="layers offloaded to a GPU (CUDA build)")
    parent.add_argument("--retry-errors", action="store_true", help="also redo items that failed")
    parent.add_argument("--wait", action="store_true", help=WAIT_HELP)
    parent.add_argument("--json", action="store_true", help="machine-readable output")
    return parent


def run_pass(label: str, items: str, execute: Callable, *, as_json: bool, resume_hint: str, llm=None,
             wait: bool = False) -> int:
    """Run ``execute(stop=, progress=, wait=, on_wait=)`` with a progress bar and Ctrl-C handling; print its summary.

    Returns the exit code: 0, 1 when the model could not be used, 130 when stopped early.
    Another process writing the same run raises ``LeaseHeld`` (exit 1), or with ``wait``
    is waited for, saying so in one line.
    """
    from workbench.models.slot import ModelSlotStopped
    from workbench.progress import ProgressBar, StopOnSigint

    bar = ProgressBar(label)

    def show(done, total, report):
        bar(done, total, None, f" · {report.model_calls} model calls, {report.cache_hits} cached"
            + (f", {report.errors} errors" if report.errors else ""))

    try:
        with StopOnSigint() as interrupt:
            if llm is not None:  # the model loads on the first call: whoever holds the cores is named then
                llm.on_wait, llm.stop = bar.waiting, interrupt.stop
            report = execute(stop=interrupt.stop, progress=None if as_json else show, wait=wait, on_wait=say)
    except ModelSlotStopped:
        print(f"{label}: stopped while waiting for the model (`{resume_hint}` continues)", file=sys.stderr)
        return 130
    finally:
        if llm is not None:
            llm.close()
    if as_json:
        emit_json(report)
    elif report.jobs == 0:
        print(f"{label} {report.run}: " + ("stopped while waiting, nothing done" if report.stopped
                                           else "nothing to do"), file=sys.stderr)
    else:
        print(f"{label} {report.run}: {report.done:,} of {report.jobs:,} {items} done in {report.seconds:,.1f}s: "
              f"{report.model_calls:,} model calls, {report.cache_hits:,} from the cache, {report.errors:,} errors"
              + (f" (stopped early; `{resume_hint}` continues)" if report.stopped else ""), file=sys.stderr)
        for line in report.error_samples:
            print(f"  error: {line}", file=sys.stderr)
    if report.fatal:
        print(f"error: {report.fatal}\nIt stays resumable: fix the model, then `{resume_hint} --retry-errors`.",
              file=sys.stderr)
        return 1
    return 130 if report.stopped else 0
