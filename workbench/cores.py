"""How many CPU cores this process may use: the default thread count of every local model.

``os.cpu_count()`` counts the machine's cores, but a process confined to fewer (``taskset``,
a container's cpuset, a test worker pinned to one core) that starts a thread per machine core
oversubscribes its share: llama.cpp's threads spin at their barriers, and a run on a 2-core
share of a 64-core machine crawls. The affinity mask is what the kernel will actually schedule
this process on.
"""

from __future__ import annotations

import os

__all__ = ["usable_cores"]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):   # macOS and Windows have no affinity mask to read
        return os.cpu_count() or 1
