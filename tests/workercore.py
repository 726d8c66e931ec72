"""Under pytest-xdist (`just test` runs ``-n auto``), each worker process runs on one core of its own.

Imported by conftest before anything starts a thread. A worker pinned to one core sees one
usable core (``workbench.cores.usable_cores``), so the real model it loads runs one llama.cpp
thread, and the CLI processes it starts inherit the pin. Unpinned, two workers each gave
llama.cpp every core of a 2-core machine: its threads spun at their barriers against the
other worker's tests and the suite ran slower in parallel than alone.
"""

from __future__ import annotations

import os


def pin_this_worker() -> int | None:
    """Pin this xdist worker (``gwN``) to the N-th usable core, round robin; the core, or None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    core = cores[int(worker[2:]) % len(cores)]
    os.sched_setaffinity(0, {core})
    return core


PINNED_CORE = pin_this_worker()
