"""Up to N calls in flight at once, their outcomes handed back on the calling thread.

A pass whose model is served (``--backend openai``) keeps ``--concurrency`` requests in
flight: each job's calls run on a worker thread, and the job's outcome comes back here, on
the thread that commits it. Runs and every resumable pass (:mod:`workbench.passes.driver`)
share this one loop. A width of 1 calls on the calling thread itself, in order, as a local
GGUF (one generation at a time) needs.

Each call runs in a copy of the calling thread's context: a wait for the model slot made on
a worker thread (a local embedder loading on a job's first call) is counted in the pass's
tally of waits (:func:`workbench.models.slot.counting_waits`), as one made on the pass's
own thread is.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterable, Iterator, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def _outcome(call: Callable[[Item], Result], item: Item) -> Result | Exception:
    try:
        return call(item)
    except Exception as exc:   # handed back as the item's outcome: the caller records it on the job
        return exc


def in_flight(items: Iterable[Item], call: Callable[[Item], Result], width: int,
              halted: Callable[[], bool]) -> Iterator[tuple[Item, Result | Exception]]:
    """``(item, call(item))`` for each item, with up to ``width`` calls running at once.

    A call's exception is its outcome (not raised). Outcomes come as calls finish (in order
    when ``width`` is 1). ``halted()`` is asked before each call starts: once it is true no
    further call starts, and those already running are still handed back.
    """
    if width <= 1:
        for item in items:
            if halted():
                return
            yield item, _outcome(call, item)
        return
    queue = iter(items)
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="in-flight") as pool:
        running: dict[Future, Item] = {}
        exhausted = False
        while True:
            while not exhausted and len(running) < width:
                item = next(queue, _END)
                if item is _END:
                    exhausted = True
                elif halted():
                    exhausted = True
                else:
                    running[pool.submit(contextvars.copy_context().run, _outcome, call, item)] = item
            if not running:
                return
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                yield running.pop(fut), fut.result()


_END = object()
