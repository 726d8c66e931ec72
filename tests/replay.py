"""Recorded calls of the real model, replayed: what SmolLM2 writes, the same on every CPU.

llama.cpp's greedy text depends on the CPU (its SIMD kernels sum floats in another order), so
a test that needs what the model really writes (a SearChain tree with a corrected step, judged
dedup pairs, a screenshot of either) cannot generate it: it replays a trace recorded once on
one machine. ``tests/recorded/NAME.jsonl`` holds one call a line: the chat messages, the JSON
schema or GBNF grammar, ``max_tokens`` and the output. :class:`ReplayBackend` answers exactly
those calls, through the real :class:`~workbench.models.cached.CachedLLM` and its cache, and
refuses any other: a prompt the code now writes differently means the trace is recorded again,
with the real model::

    .venv/bin/python tests/replay.py record chains     # or: judged

The tests that check the model really runs (``test_generation``, ``test_searchain_run``,
``test_kg_dedup``, ...) use the real backend and assert only what holds on every CPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

from workbench.models.base import Generation, Prompt
from workbench.models.cached import CachedLLM

RECORDED = Path(__file__).resolve().parent / "recorded"


def _key(messages, schema: dict | None, grammar: str | None, max_tokens: int) -> str:
    return json.dumps({"messages": [list(m) for m in messages], "schema": schema, "grammar": grammar,
                       "max_tokens": max_tokens}, sort_keys=True, ensure_ascii=False)


class ReplayBackend:
    """A backend that answers the recorded calls of one trace, and only those."""

    name, chat_template, concurrency = "replay", "", 1

    def __init__(self, trace: str):
        self.trace = trace
        self.model_id = f"recorded:{trace}"
        self.outputs: dict[str, str] = {}
        for line in (RECORDED / f"{trace}.jsonl").read_text(encoding="utf-8").splitlines():
            call = json.loads(line)
            self.outputs[_key(call["messages"], call["schema"], call["grammar"], call["max_tokens"])] = call["output"]
        self.replayed = 0

    def render(self, messages) -> Prompt:
        pairs = tuple((m["role"], m["content"]) for m in messages)
        return Prompt(pairs, json.dumps(pairs, ensure_ascii=False), tokens=None)

    def generate(self, prompt: Prompt, sampling, json_schema=None, grammar=None) -> Generation:
        key = _key(prompt.messages, json_schema, grammar, sampling.max_tokens)
        if key not in self.outputs:
            raise AssertionError(f"tests/recorded/{self.trace}.jsonl has no call with these messages "
                                 f"({prompt.messages[-1][1][:80]!r}…): the code prompts differently now; record it "
                                 f"again: .venv/bin/python tests/replay.py record {self.trace}")
        self.replayed += 1
        return Generation(self.outputs[key], 0, 0, 0, 0.0, "stop")

    def close(self) -> None:
        pass


def replay_llm(store, trace: str) -> CachedLLM:
    """The real cached LLM over :class:`ReplayBackend` of ``trace``."""
    backend = ReplayBackend(trace)
    return CachedLLM(store, lambda **_slot: backend)


class _Recording:
    """The real backend, writing down every call it answers."""

    def __init__(self, backend):
        self.backend = backend
        self.calls: list[dict] = []
        self.name, self.model_id, self.concurrency = backend.name, backend.model_id, backend.concurrency
        self.chat_template = backend.chat_template

    def render(self, messages):
        prompt = self.backend.render(messages)
        self._messages = [[m["role"], m["content"]] for m in messages]
        self._last = prompt
        return prompt

    def generate(self, prompt, sampling, json_schema=None, grammar=None):
        out = (self.backend.generate(prompt, sampling, json_schema, grammar=grammar) if grammar is not None
               else self.backend.generate(prompt, sampling, json_schema))
        assert prompt is self._last, "a render and its generate are one call"
        self.calls.append({"messages": self._messages, "schema": json_schema, "grammar": grammar,
                           "max_tokens": sampling.max_tokens, "output": out.text})
        return out

    def close(self) -> None:
        self.backend.close()


def record(trace: str, build: Callable) -> Path:
    """Build ``trace``'s database with the real default model, and write down every call it made."""
    import tempfile

    from workbench.models.cached import default_llm
    from workbench.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "record.db")
        real = default_llm(store, n_ctx=2048)
        recording: list[_Recording] = []

        def factory(**slot):
            recording.append(_Recording(real._factory(**slot)))
            return recording[0]

        build(store, CachedLLM(store, factory))
        store.close()
    RECORDED.mkdir(exist_ok=True)
    out = RECORDED / f"{trace}.jsonl"
    out.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in recording[0].calls), encoding="utf-8")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "record":
        raise SystemExit("usage: python tests/replay.py record chains|judged")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import conftest

    builders = {"chains": conftest.build_chains, "judged": conftest.build_judged}
    print(record(sys.argv[2], builders[sys.argv[2]]))
