"""The cached LLM's token accounting (docs/design.md §4: prompt tokens evaluated against the naive sum).

The backend is a scripted stand-in reporting fixed token counts: what is under test is what the
cached LLM adds up, not what a model writes.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from workbench.models.base import Choice, Generation, Prompt
from workbench.models.cached import CachedLLM


class ScriptedBackend:
    """Reports 12 prompt tokens per call, of which 5 evaluated (the rest as if held by the KV cache)."""

    name, model_id, chat_template, concurrency = "scripted", "scripted-model", "", 1

    def render(self, messages) -> Prompt:
        return Prompt(tuple((m["role"], m["content"]) for m in messages), json.dumps(messages), tokens=12)

    def generate(self, prompt, sampling, json_schema=None, grammar=None) -> Generation:
        return Generation("scripted reply", prompt_tokens=12, completion_tokens=3, eval_tokens=5, seconds=0.001,
                          finish_reason="stop")

    def choose(self, prompt, options) -> Choice:
        return Choice(0, (0.0,) * len(options), prompt_tokens=12, eval_tokens=5)

    def close(self) -> None:
        pass


def _llm(store) -> CachedLLM:
    return CachedLLM(store, lambda **_slot: ScriptedBackend())


def ask(llm: CachedLLM, text: str):
    return llm.ask([{"role": "user", "content": text}], max_tokens=8)


def test_ask_counts_the_prompt_tokens_the_model_evaluated_beside_the_naive_sum(store):
    llm = _llm(store)
    ask(llm, "first")
    ask(llm, "second")
    assert (llm.model_calls, llm.prompt_tokens, llm.eval_tokens) == (2, 24, 10)


def test_a_replayed_ask_evaluates_nothing(store):
    llm = _llm(store)
    ask(llm, "first")
    assert ask(llm, "first").cached
    assert (llm.cache_hits, llm.prompt_tokens, llm.eval_tokens) == (1, 12, 5)


def test_ask_and_choose_add_to_the_same_counts(store):
    llm = _llm(store)
    ask(llm, "first")
    llm.choose([{"role": "user", "content": "pick"}], ["A", "B"])
    assert (llm.prompt_tokens, llm.eval_tokens) == (24, 10)


class SlowServedBackend(ScriptedBackend):
    """A served model taking 0.2 s per call, counting the calls running at once."""

    concurrency = 4

    def __init__(self):
        self.lock, self.running, self.most, self.calls = threading.Lock(), 0, 0, []

    def generate(self, prompt, sampling, json_schema=None, grammar=None) -> Generation:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.calls.append(prompt.text)
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
        return super().generate(prompt, sampling, json_schema, grammar)


def _ask_at_once(llm: CachedLLM, texts) -> list:
    with ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(lambda t: ask(llm, t), texts))


def test_a_served_model_answers_several_threads_at_once_and_each_answer_is_cached(store):
    backend = SlowServedBackend()
    llm = CachedLLM(store, lambda **_slot: backend, width=4)
    calls = _ask_at_once(llm, ["a", "b", "c", "d"])
    assert backend.most == 4 and not any(c.cached for c in calls)
    assert store.count("generations") == 4 and (llm.model_calls, llm.cache_hits) == (4, 0)


def test_the_same_question_asked_by_two_threads_at_once_reaches_the_model_once(store):
    backend = SlowServedBackend()
    llm = CachedLLM(store, lambda **_slot: backend, width=4)
    calls = _ask_at_once(llm, ["same", "same", "same"])
    assert len(backend.calls) == 1 and sorted(c.cached for c in calls) == [False, True, True]
    assert len({c.key for c in calls}) == 1 and (llm.model_calls, llm.cache_hits) == (1, 2)


def test_a_local_model_runs_one_call_at_a_time_whatever_the_threads(store):
    backend = SlowServedBackend()
    llm = CachedLLM(store, lambda **_slot: backend)   # width 1: a GGUF in this process
    _ask_at_once(llm, ["a", "b", "c"])
    assert backend.most == 1 and len(backend.calls) == 3
