"""Progress of a resumable pass tells the truth at every tick: the model calls and cache hits so far.

``claims run`` used to show "0 model calls, 0 cached" on every tick while it made hundreds
of calls (only the final summary was right). Each pass here runs over a real store with a
real ``CachedLLM`` whose backend is a scripted stand-in (the counts, not the model's
wording, are under test). At each tick the report must account for every ``ask`` made so
far: ``model_calls`` the ones the backend ran, ``cache_hits`` the ones the cache served.
A second pass under another config asks the same prompts, so the cache side is shown too.
"""

from __future__ import annotations

import json

from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.kg.runner import DedupConfig, execute_dedup, plan_dedup
from workbench.models.base import Generation, Prompt
from workbench.models.cached import CachedLLM
from workbench.runs.generation import GenerationConfig
from workbench.pipelines.runner import SearChainConfig, execute_searchain, plan_searchain
from workbench.runs.executor import execute
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store.queries import get_run

from conftest import import_films_kg

CHAIN = ("[Query 1]: Who directed Kismet?\n[Answer 1]: William Dieterle\n"
         "[Final Content]: William Dieterle directed Kismet [1]. So the answer is William Dieterle.")


class ScriptedBackend:
    """A backend that answers by the shape of the request and counts what it generated."""

    name, model_id, chat_template, concurrency = "scripted", "scripted-model", "", 1

    def __init__(self):
        self.generated = 0

    def render(self, messages) -> Prompt:
        return Prompt(tuple((m["role"], m["content"]) for m in messages), json.dumps(messages), tokens=10)

    def generate(self, prompt, sampling, json_schema=None, grammar=None) -> Generation:
        self.generated += 1
        props = (json_schema or {}).get("properties", {})
        if "claims" in props:
            text = json.dumps({"claims": ["Kismet was directed by William Dieterle"]})
        elif "verdict" in props:
            text = json.dumps({"verdict": "supported"})
        elif "is_coreferent" in props:
            text = json.dumps({"is_coreferent": True, "confidence": 0.9, "rationale": "same name"})
        elif grammar is not None:
            text = CHAIN
        else:
            text = "Kismet was directed by William Dieterle."
        return Generation(text, 10, 8, 10, 0.001, "stop")

    def close(self) -> None:
        pass


class CountingLLM(CachedLLM):
    """The real cached LLM, counting every ``ask`` (the calls a pass made, served either way)."""

    def __init__(self, store, backend):
        super().__init__(store, lambda **_slot: backend)  # the factory hears on_wait/stop
        self.asked = 0

    def ask(self, *args, **kwargs):
        self.asked += 1
        return super().ask(*args, **kwargs)


class Ticks:
    """A progress callback recording, at each tick, the report's counts beside the true ones."""

    def __init__(self, llm: CountingLLM, backend: ScriptedBackend):
        self.llm, self.backend = llm, backend
        self.asked0, self.generated0 = llm.asked, backend.generated
        self.seen: list[dict] = []

    def __call__(self, done, total, report):
        self.seen.append({"done": done, "model_calls": report.model_calls, "cache_hits": report.cache_hits,
                          "asked": self.llm.asked - self.asked0, "generated": self.backend.generated - self.generated0})

    def assert_true_at_every_tick(self):
        assert self.seen, "the pass never reported progress"
        for tick in self.seen:
            assert tick["model_calls"] + tick["cache_hits"] == tick["asked"], tick
            assert tick["model_calls"] == tick["generated"], tick
        assert self.seen[0]["asked"] > 0  # the first tick already has calls to show


def _pass_twice(llm, backend, run_pass):
    """The same prompts in two passes: the first all generated, the second all from the cache."""
    first = Ticks(llm, backend)
    run_pass(1, first)
    second = Ticks(llm, backend)
    run_pass(2, second)
    for ticks in (first, second):
        ticks.assert_true_at_every_tick()
    assert first.seen[-1]["model_calls"] > 0 and first.seen[-1]["cache_hits"] == 0
    assert second.seen[-1]["model_calls"] == 0 and second.seen[-1]["cache_hits"] > 0
    return first, second


def test_claims_progress_counts_the_calls_made_so_far(tiny_store):
    backend = ScriptedBackend()
    plan_sweep(tiny_store, SweepConfig(ks=(1, 2), budgets=(256,), formats=("score",)), name="gen",
               generation=GenerationConfig(answer_format="text").as_dict())
    run = get_run(tiny_store, "gen")
    assert execute(tiny_store, run, backend=backend).done == 6
    llm = CountingLLM(tiny_store, backend)

    def claims_pass(n, ticks):
        # ties differs, so each pass is its own claim run over the same answers and prompts.
        config = ClaimsConfig(decomposer="llm", verifiers=("llm_judge",),
                              ties="unsupported" if n == 1 else "supported")
        report = run_claims(tiny_store, run, config, llm=llm, progress=ticks)
        assert report.done == 6 and report.errors == 0

    first, _ = _pass_twice(llm, backend, claims_pass)
    assert [t["done"] for t in first.seen] == [1, 2, 3, 4, 5, 6]


def test_searchain_progress_counts_the_calls_made_so_far(tiny_store):
    backend = ScriptedBackend()
    llm = CountingLLM(tiny_store, backend)

    def searchain_pass(n, ticks):
        name, _ = plan_searchain(tiny_store, "tiny", SearChainConfig(baseline_k=2), f"sc{n}")
        report = execute_searchain(tiny_store, name, llm=llm, progress=ticks)
        assert report.jobs == 3 and report.done + report.errors == 3

    _pass_twice(llm, backend, searchain_pass)


def test_dedup_progress_counts_the_calls_made_so_far(store, tmp_path):
    import_films_kg(store, tmp_path)
    backend = ScriptedBackend()
    llm = CountingLLM(store, backend)

    def dedup_pass(n, ticks):
        name, _, stats = plan_dedup(store, "films", DedupConfig(), f"dd{n}")
        report = execute_dedup(store, name, llm=llm, progress=ticks)
        assert report.done == stats["candidate_pairs"] * 2 > 0

    _pass_twice(llm, backend, dedup_pass)
