"""The cached LLM's token accounting (docs/design.md §4: prompt tokens evaluated against the naive sum).

The backend is a scripted stand-in reporting fixed token counts: what is under test is what the
cached LLM adds up, not what a model writes.
"""

from __future__ import annotations

import json

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
