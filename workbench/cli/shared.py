"""What the verb handlers share when they run: the store, JSON and file output, tables fitted to the
terminal, a line on stderr, and driving a resumable pass with a progress bar and Ctrl-C."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, is_dataclass
from typing import Callable

from workbench.cli.exit_codes import OK, STOPPED
from workbench.tables import fit_tables
from workbench.terminal import output_width


def print_tables(text: str) -> None:
    """Print ``text``, each table wider than the terminal in groups of columns (``workbench.tables.fit_tables``);
    whole into a pipe or a file."""
    print(fit_tables(text, output_width()))


def store_of(args):
    """The database named by ``--db`` (or the default one).

    Verbs that only read declare it with ``set_defaults(readonly=True)``: they then work on
    a database this process cannot write (opened read-only) or one from a newer workbench
    (read with a warning), where the other verbs are refused with one line.
    """
    from workbench.store import open_store

    store = open_store(args.db, readonly=getattr(args, "readonly", False))
    # Closed by the entry point when the verb ends (close_stores): a verb called in-process,
    # as tests and the TUI's palette do, leaves no connection behind.
    args.__dict__.setdefault("opened_stores", []).append(store)
    if store.newer_schema:
        print(f"warning: {store.path} was written by a newer workbench (schema {store.newer_schema}); "
              "reading it read-only", file=sys.stderr)
    return store


def close_stores(args) -> None:
    """Close every store :func:`store_of` opened for this verb."""
    for store in args.__dict__.pop("opened_stores", []):
        store.close()


def json_default(value):
    """``json.dump``'s fallback: a dataclass becomes an object."""
    if is_dataclass(value):
        return asdict(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def emit_json(obj) -> None:
    """Pretty JSON on stdout (dataclasses become objects)."""
    json.dump(obj, sys.stdout, ensure_ascii=False, indent=2, default=json_default)
    sys.stdout.write("\n")


def write_out(out: str, content: str | bytes, what: str, *, force: bool = False) -> None:
    """Write ``content`` to exactly the path the user named (atomically), or to stdout for ``-``.

    Both through :func:`workbench.data.outfile.write_atomic`'s guard (``force`` replaces an
    existing file); a file written is said in one line, stdout holds the content alone.
    """
    from workbench.data.outfile import is_stdout, write_atomic

    write_atomic(out, [content], force=force)
    if not is_stdout(out):
        print(f"wrote {what} to {out}")


def say(line: str) -> None:
    """One line for the user on stderr (stdout stays for --json)."""
    print(line, file=sys.stderr, flush=True)


def say_dataset_replaced(report) -> None:
    """Say what an import's ``--replace`` deleted: on stderr, so even with --json (whose "replaced" holds it)."""
    from workbench.data.importer import describe_dataset_contents

    if report.replaced is not None:
        say(f"replaced dataset {report.dataset}: deleted {describe_dataset_contents(report.replaced)}")


def list_rows(rows: list[dict], *, as_json: bool, empty: str, line: Callable[[dict], str]) -> int:
    """A listing verb's output: the rows as JSON, or one ``line(row)`` each (``empty`` when there are none)."""
    if as_json:
        emit_json(rows)
        return OK
    if not rows:
        print(empty)
    for row in rows:
        print(line(row))
    return OK


def run_pass(label: str, items: str, execute: Callable, *, as_json: bool, resume_hint: str, llm=None,
             wait: bool = False) -> int:
    """Run ``execute(stop=, progress=, wait=, on_wait=)`` with a progress bar and Ctrl-C handling; print its summary.

    Returns the exit code: 0, 1 when the model could not be used, 130 when stopped early.
    Another process writing the same run raises ``LeaseHeld`` (exit 1), or with ``wait``
    is waited for, saying so in one line.
    """
    from workbench.models.slot import ModelSlotStopped
    from workbench.passes.summary import done_line, error_lines, exit_code, fatal_note
    from workbench.progress import ProgressBar, StopOnSigint

    bar = ProgressBar(label)

    def show(done, total, report):
        # The rate counts the pass's time worked (report.seconds: its waits for the model left out).
        bar(done, total, None, f" · {report.model_calls} model calls, {report.cache_hits} cached"
            + (f", {report.errors} errors" if report.errors else ""), seconds=report.seconds)

    try:
        with StopOnSigint() as interrupt:
            if llm is not None:  # the model loads on the first call: whoever holds the cores is named then
                llm.on_wait, llm.stop = bar.waiting, interrupt.stop
            report = execute(stop=interrupt.stop, progress=None if as_json else show, wait=wait, on_wait=say)
    except ModelSlotStopped:
        print(f"{label}: stopped while waiting for the model (`{resume_hint}` continues)", file=sys.stderr)
        return STOPPED
    finally:
        if llm is not None:
            llm.close()
    if as_json:
        emit_json(report)
    elif report.jobs == 0:
        print(f"{label} {report.run}: " + ("stopped while waiting, nothing done" if report.stopped
                                           else "nothing to do"), file=sys.stderr)
    else:
        for line in (done_line(report, f"{label} {report.run}", items, continues=resume_hint), *error_lines(report)):
            print(line, file=sys.stderr)
    if report.fatal:
        print(fatal_note(report, resume_hint), file=sys.stderr)
    return exit_code(report)
