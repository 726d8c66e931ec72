"""What to run before a corpus's retrieved chunks can be judged for relevance, read from what the database holds.

Judging chunk relevance (``workbench retrieval judge``) needs a dataset of chunks (a Markdown corpus, or an
imported directory of chunks), questions about it and a retriever's results for them. A hint that always starts from ``corpus import`` asks a user who has done the
first steps to do them again (the Labels screen once asked to import HowToCook when it was imported);
:func:`relevance_steps` names only the steps still missing, for the corpus that is furthest along.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.retrieval.evaluate import stored_retrievers
from workbench.store.db import Store

__all__ = ["EXAMPLE_CORPUS", "RelevanceSteps", "relevance_steps"]

#: The corpus a database without one is pointed at, and the name the example gives it.
EXAMPLE_CORPUS = ("sample_data/howtocook", "hc")
JUDGE_K = 5


@dataclass(frozen=True)
class RelevanceSteps:
    """The corpus the steps are for (None: no corpus is imported) and the shell commands still to run, in order."""

    dataset: str | None
    commands: tuple[str, ...]

    def sentence(self) -> str:
        """The commands as one line of prose: ``in a shell, `a`, `b`, then `c`.``"""
        quoted = [f"`{c}`" for c in self.commands]
        listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])}, then {quoted[-1]}"
        return f"in a shell, {listed}."


def _corpora(store: Store) -> list[tuple[str, int]]:
    """Every dataset of chunks (what the judge reads; a meta set's has none), newest first, with its questions."""
    return [(name, questions) for name, questions in store.conn.execute(
        "SELECT d.name, (SELECT count(*) FROM samples s WHERE s.dataset_id = d.id) FROM datasets d"
        " WHERE d.unit_kind = 'chunk' AND EXISTS (SELECT 1 FROM units u WHERE u.dataset_id = d.id)"
        " ORDER BY d.id DESC")]


def relevance_steps(store: Store) -> RelevanceSteps:
    """The commands still needed before ``workbench retrieval judge`` has chunks to judge.

    The corpus is the newest one with retrieved chunks, else the newest with questions, else the newest:
    the one the fewest steps away. Its first stored retriever (bm25 when there is one) is judged.
    """
    corpora = _corpora(store)
    if not corpora:
        path, name = EXAMPLE_CORPUS
        return RelevanceSteps(None, (f"workbench corpus import {path} --name {name}",
                                     f"workbench questions generate {name}", f"workbench retrieve {name}",
                                     f"workbench retrieval judge {name} --retriever bm25 --k {JUDGE_K}"))
    for name, _ in corpora:
        retrievers = stored_retrievers(store, name)
        if retrievers:
            return RelevanceSteps(name, (f"workbench retrieval judge {name} --retriever {retrievers[0]} --k {JUDGE_K}",))
    name = next((name for name, questions in corpora if questions), corpora[0][0])
    questions = dict(corpora)[name]
    return RelevanceSteps(name, (() if questions else (f"workbench questions generate {name}",))
                          + (f"workbench retrieve {name}", f"workbench retrieval judge {name} --retriever bm25 "
                                                           f"--k {JUDGE_K}"))
