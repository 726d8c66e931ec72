"""A small chunk dataset and a scripted relevance judge, for the tests of LLM-judged chunk relevance.

The scripted judge is a backend with a one-pass ``choose`` (the test's verdicts, not a model's) under the
real :class:`~workbench.models.cached.CachedLLM` and its cache: for logic that does not depend on the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from conftest import write_jsonl
from workbench.data.importer import import_dataset
from workbench.models.base import Choice, Prompt
from workbench.models.cached import CachedLLM
from workbench.store import Store, open_store

DATASET = "tinyc"

# Nine chunks of three documents; three questions; two retrievers.
CHUNKS = {
    "c1": ("kismet", "Kismet is a 1944 American film in Technicolor."),
    "c2": ("kismet", "Kismet was directed by William Dieterle for MGM."),
    "c3": ("kismet", "William Dieterle also produced parts of Kismet."),
    "c4": ("rosetta", "Rosetta is a 1999 film by the Dardenne brothers."),
    "c5": ("rosetta", "The film won the Palme d'Or at Cannes."),
    "c6": ("rosetta", "Rosetta's mother lives in a trailer park."),
    "c7": ("juarez", "Juarez is a 1939 historical drama."),
    "c8": ("juarez", "Bette Davis plays Empress Carlota in Juarez."),
    "c9": ("rosetta", "Luc and Jean-Pierre Dardenne directed Rosetta."),
}
QUESTIONS = {"q1": "who directed Kismet", "q2": "who directed Rosetta", "q3": "what language is Juarez in"}
RANKED = {"bm25": {"q1": ["c1", "c2", "c3", "c9"], "q2": ["c4", "c5", "c6"], "q3": ["c7", "c8"]},
          "alt": {"q2": ["c9", "c4"]}}
# The scripted judge's verdicts on every pair any test asks about.
VERDICTS = {("q1", "c1"): "No", ("q1", "c2"): "Yes", ("q1", "c3"): "Yes", ("q1", "c9"): "No",
            ("q2", "c4"): "Yes", ("q2", "c5"): "No", ("q2", "c6"): "No", ("q2", "c9"): "Yes",
            ("q3", "c7"): "No", ("q3", "c8"): "No"}


class ScriptedChooser:
    """A backend with a one-pass ``choose``: the scripted verdict of the (question, passage) in the prompt."""

    name, chat_template, concurrency = "scripted", "", 1

    def __init__(self, verdicts=VERDICTS, fail_on: str | None = None):
        self.model_id = "scripted:relevance"
        text = {c: t for c, (_, t) in CHUNKS.items()}
        self.answers = {(QUESTIONS[q], text[c]): v for (q, c), v in verdicts.items()}
        self.fail_on = fail_on
        self.calls = 0

    def render(self, messages) -> Prompt:
        pairs = tuple((m["role"], m["content"]) for m in messages)
        return Prompt(pairs, json.dumps(pairs, ensure_ascii=False))

    def choose(self, prompt: Prompt, options) -> Choice:
        user = prompt.messages[-1][1]
        question = user.split("Question: ", 1)[1].split("\n\nPassage: ", 1)[0]
        passage = user.split("\n\nPassage: ", 1)[1].split("\n\n", 1)[0]
        if self.fail_on is not None and self.fail_on in passage:
            raise RuntimeError(f"scripted failure on {passage!r}")
        self.calls += 1
        return scripted_choice(list(options).index(self.answers[(question, passage)]), len(options))

    def close(self) -> None:
        pass


def scripted_llm(store, **kw) -> CachedLLM:
    backend = ScriptedChooser(**kw)
    llm = CachedLLM(store, lambda **_slot: backend)
    llm.scripted = backend
    return llm


def build_tiny(directory: Path) -> Path:
    """The tiny chunk dataset as an import directory (kb, samples, retrieval of two retrievers)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_jsonl(directory / "kb.jsonl", [{"chunk_id": c, "doc_id": d, "text": t} for c, (d, t) in CHUNKS.items()])
    write_jsonl(directory / "samples.jsonl", [
        {"id": q, "question": text, "answers": ["x"], "gold_paths": [[RANKED["bm25"][q][0]]]}
        for q, text in QUESTIONS.items()])
    write_jsonl(directory / "retrieval.jsonl", [
        {"sample_id": q, "retriever": r, "results": [{"chunk_id": c, "score": 10.0 - i} for i, c in enumerate(cs)]}
        for r, per in RANKED.items() for q, cs in per.items()])
    return directory


def tiny_db(db: Path, then: Callable[[Store], object] | None = None) -> Path:
    """A new database at ``db`` with the tiny chunk dataset imported as ``tinyc`` (its files beside it);
    ``then(store)`` runs before it is closed."""
    store = open_store(db)
    try:
        import_dataset(store, build_tiny(db.parent / "tiny"), DATASET)
        if then is not None:
            then(store)
    finally:
        store.close()
    return db


def scripted_choice(index: int, n: int) -> Choice:
    """The scripted judge's choice: the chosen option's first token 2 logits above the others'."""
    return Choice(index, tuple(2.0 if i == index else 0.0 for i in range(n)), 10, 10, 0.0)


def p_yes(verdict: str) -> float:
    """The score stored for a scripted Yes or No: the judge's P(Yes), as the pass computes it."""
    return scripted_choice(0 if verdict == "Yes" else 1, 2).probabilities[0]
