"""Another process holding the machine-wide model slot, for tests that need a model busy elsewhere.

The holder is a real Python process taking the slot (the test's private lock file, see the
``private_model_slot`` fixture), so what waits on it waits as it would on a real pass.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from contextlib import contextmanager

HOLDER = """
import sys
from workbench.models import slot
hold = slot.acquire(sys.argv[1])
print("held", flush=True)
sys.stdin.readline()   # the test says when to let go
hold.release()
print("released", flush=True)
"""

@contextmanager
def holder(what: str = "workbench claims run demo"):
    """A child Python process that holds the slot until a line arrives on its stdin (or it is killed)."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, what], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


def let_go(child, after: float = 0.0) -> None:
    """Tell the holder to release the slot, ``after`` seconds from now (from another thread)."""
    def send():
        child.stdin.write("\n")
        child.stdin.flush()

    threading.Timer(after, send).start()
