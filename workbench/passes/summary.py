"""The closing summary of a pass, as the command line prints it, and its exit code."""

from __future__ import annotations

from workbench.passes.report import PassReport


def exit_code(report: PassReport) -> int:
    """0; 1 when the model could not be used (``fatal``); 130 when stopped early."""
    if report.fatal:
        return 1
    return 130 if report.stopped else 0


def done_line(report: PassReport, subject: str, items: str, *, calls: str = "model calls",
              continues: str) -> str:
    """``{subject}: N of M {items} done in S s: C {calls}, H from the cache, E errors`` (+ how to continue)."""
    return (f"{subject}: {report.done:,} of {report.jobs:,} {items} done in {report.seconds:,.1f}s: "
            f"{report.model_calls:,} {calls}, {report.cache_hits:,} from the cache, {report.errors:,} errors"
            + (f" (stopped early; `{continues}` continues)" if report.stopped else ""))


def error_lines(report: PassReport) -> list[str]:
    """The first failed jobs, one ``  error: …`` line each."""
    return [f"  error: {sample}" for sample in report.error_samples]


def fatal_note(report: PassReport, retry: str, *, what: str = "It") -> str:
    """What the user reads when the model could not be used: the error and how to redo the failed jobs."""
    return f"error: {report.fatal}\n{what} stays resumable: fix the model, then `{retry} --retry-errors`."
