"""A stand-in reader for sequential runs: answers from the evidence it is shown, so cells differ as retrieval does.

The executor's round-by-round logic does not depend on the model, only on the scores it
commits; a real model's text depends on the CPU. :class:`Reader` answers with the tail of the
first visible triple whose head is in the question, "unknown" otherwise: a cell that shows the
gold triple scores 1, one that cut it away scores 0, and the cells of a sweep differ as their
windows do. ``python tests/seqkit.py DB RUN [DELAY]`` executes a run with it in a process of its
own (for kill -9), ``DELAY`` seconds per answer.
"""

from __future__ import annotations

import json
import re
import sys
import time

from workbench.models.base import Generation, Prompt

_LINE = re.compile(r"\[T\d+\] (.*) \| (.*) \| (.*)")


class Reader:
    """A backend that reads its answer off the prompt's evidence (see the module); counts what it generated."""

    name, model_id, chat_template, concurrency = "reader", "reader-model", "", 1

    def __init__(self, delay: float = 0.0, model_id: str = "reader-model"):
        self.delay, self.model_id = delay, model_id     # another id: answers the cache holds for none
        self.generated: list[str] = []

    def render(self, messages) -> Prompt:
        return Prompt(tuple((m["role"], m["content"]) for m in messages), json.dumps(messages), tokens=10)

    def generate(self, prompt, sampling, json_schema=None, grammar=None) -> Generation:
        if self.delay:
            time.sleep(self.delay)
        self.generated.append(prompt.text)
        user = prompt.messages[-1][1]
        question = user.split("Question:")[-1].lower()
        for line in user.splitlines():
            m = _LINE.match(line)
            if m and m.group(1).lower() in question:
                return Generation(m.group(3), 10, 4, 10, 0.001, "stop")
        return Generation("unknown", 10, 4, 10, 0.001, "stop")

    def close(self) -> None:
        pass


if __name__ == "__main__":
    from workbench.runs.executor import execute
    from workbench.store import open_store
    from workbench.store.queries import get_run

    db, run_name = sys.argv[1], sys.argv[2]
    store = open_store(db)
    report = execute(store, get_run(store, run_name), backend=Reader(float(sys.argv[3]) if len(sys.argv) > 3 else 0))
    print(json.dumps({"done": report.done, "skipped": report.skipped}))
