"""The reference (ground-truth) answer of a sample as claims, and the checks that do not need a model.

A short gold answer (KG QA: an entity, a year) is one claim per answer with its aliases, and
containment is its checker, as it always was: a response claim is correct when it contains a
normalized answer or alias; a reference claim is in the response (or a unit) when one of its
names is. A long reference answer (a paragraph, as RAGChecker's ``gt_answer``) is decomposed
like a response, and its claims are checked by the claim run's verifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from workbench.claims.metrics import SampleClaims
from workbench.claims.types import Claim
from workbench.metrics.scoring import normalize_answer
from workbench.retrieval.text import tokenize
from workbench.store.queries import Sample

#: A single answer longer than this many words (tokens of the CJK-aware tokenizer) reads as text.
LONG_WORDS = 12
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


def is_long(sample: Sample) -> bool:
    """Whether the sample's reference is long-form text rather than an entity: one answer of more than
    :data:`LONG_WORDS` words, or of two sentences of four words or more. A list of answers (KG QA)
    never is, nor a title with a stop in it ("Dr. Strangelove")."""
    if len(sample.answers) != 1:
        return False
    answer = sample.answers[0]
    if len(tokenize(answer)) > LONG_WORDS:
        return True
    sentences = [s for s in _SENTENCE_END.split(answer.strip()) if len(tokenize(s)) >= 4]
    return len(sentences) >= 2


def reference_claims(sample: Sample, decompose: Callable[[str], list[Claim]]) -> list[Claim]:
    """The reference's claims: decomposed (``decompose``) when long, else one per gold answer."""
    if is_long(sample):
        return decompose(sample.answers[0])
    return [Claim(answer, None, None, "item") for answer in sample.answers]


def gold_names(sample: Sample) -> list[list[str]]:
    """Each gold answer with its aliases, normalized: what containment looks for, per reference claim."""
    return [[x for x in (normalize_answer(a), *(normalize_answer(al) for al in sample.aliases.get(a, []))) if x]
            for a in sample.answers]


def contains(haystack: str, needles: Sequence[str]) -> bool:
    """Whether the normalized ``haystack`` contains one of the (normalized) ``needles``."""
    hay = normalize_answer(haystack)
    return any(n and n in hay for n in needles)


#: A checker of one claim against premises: per premise, each checker's label and the vote's (``"vote"``).
Judge = Callable[[str, Sequence[str]], list[dict[str, str]]]


@dataclass(frozen=True)
class ReferenceChecks:
    """One answer's checks against its reference, per claim (and per unit): each checker's label and the vote's.

    ``answer2response[i]``: response claim i against the reference answer (is it correct);
    ``response2answer[g]``: reference claim g against the response (is it recalled);
    ``retrieved2answer[g][j]``: reference claim g against unit j (does the unit hold it).
    """

    answer2response: list[dict[str, str]]
    response2answer: list[dict[str, str]]
    retrieved2answer: list[list[dict[str, str]]]

    def table(self, claim_unit: np.ndarray, relevant: np.ndarray | None) -> SampleClaims:
        """The answer's four boolean matrices (an E of the vote is true), with response claim × unit given."""
        e = lambda checks: [c["vote"] == "E" for c in checks]  # noqa: E731
        n_units = claim_unit.shape[1]
        return SampleClaims(claim_unit=claim_unit, claim_correct=np.array(e(self.answer2response), dtype=bool),
                            gold_unit=np.array([e(row) for row in self.retrieved2answer], dtype=bool).reshape(
                                len(self.retrieved2answer), n_units),
                            gold_in_response=np.array(e(self.response2answer), dtype=bool), relevant=relevant)


def _contained(found: bool) -> dict[str, str]:
    label = "E" if found else "N"
    return {"containment": label, "vote": label}


def check_reference(sample: Sample, reference: Sequence[Claim], response_claims: Sequence[str], answer: str,
                    units: Sequence[str], judge: Judge) -> ReferenceChecks:
    """The three checks of one answer against the reference.

    A short gold answer is checked by containment of its names (a claim is correct when it
    contains a gold answer or alias; a reference claim is in a text that contains one of its
    names). A long reference is checked by ``judge`` (the claim run's verifiers and their vote),
    the reference answer, the response or the unit being the premise.
    """
    if not is_long(sample):
        names = gold_names(sample)
        every = [n for item in names for n in item]
        return ReferenceChecks([_contained(contains(c, every)) for c in response_claims],
                               [_contained(contains(answer, item)) for item in names],
                               [[_contained(contains(u, item)) for u in units] for item in names])
    text = sample.answers[0]
    return ReferenceChecks([judge(c, [text])[0] for c in response_claims],
                           [judge(g.text, [answer])[0] for g in reference],
                           [judge(g.text, units) for g in reference])
