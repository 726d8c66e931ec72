"""A RAM disk for test files that only live for a test, where the machine has one.

On this project's 2-core machine ``/tmp`` is ext4 mounted with online discard: each rmdir costs about
3 ms and each fsync (SQLite's checkpoints, a closed database) about 4 ms, against microseconds on tmpfs.
A module that makes and removes hundreds of directories, or writes tens of megabytes it reads once, spends
more time in the filesystem than in what it tests; on ``/dev/shm`` it does not. Elsewhere (no writable
``/dev/shm``) the system's temporary directory is used, as before.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterator

SCRATCH: str | None = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def scratch_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory on :data:`SCRATCH`, removed with everything in it when the generator is closed."""
    with tempfile.TemporaryDirectory(dir=SCRATCH, prefix=prefix) as directory:
        yield Path(directory)
