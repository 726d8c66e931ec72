"""The pass engine: plan-or-find and the driver of every resumable pass (runs, claims, SearChain, dedup).

``plan`` finds a plan by its config (or writes it once, with its jobs); ``driver`` runs its
pending jobs under the run's lease, one committed transaction per job, and keeps the
``report`` true at every progress tick; ``summary`` says what it did and its exit code.
"""

from workbench.passes.driver import Driver, PassWork, drive, job_statuses
from workbench.passes.plan import (CLAIMS_KEY_DIGITS, PIPELINE_NAME_DIGITS, RUN_NAME_DIGITS, canonical_json,
                                   config_diff, config_hash, default_name, plan_or_find, refuse_changed)
from workbench.passes.report import CallTally, PassReport
from workbench.passes.summary import done_line, error_lines, exit_code, fatal_note

__all__ = ["CLAIMS_KEY_DIGITS", "PIPELINE_NAME_DIGITS", "RUN_NAME_DIGITS", "CallTally", "Driver", "PassReport",
           "PassWork", "canonical_json", "config_diff", "config_hash", "default_name", "done_line", "drive",
           "error_lines", "exit_code", "fatal_note", "job_statuses", "plan_or_find", "refuse_changed"]
