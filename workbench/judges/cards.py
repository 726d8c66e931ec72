"""What a human is shown to label one judged item: a card per claim, dedup pair or answer.

A card holds what the judge was shown, so the human judges the same question the judge did:

- a **claim**: the question, its gold answers, the model's answer, the claim, the unit that
  best supports it and every unit shown to the model in that cell (the window's visible
  units: a claim is *supported* when at least one of them supports it);
- a **dedup pair**: both names and, per mode, the two contexts exactly as that mode's judge
  saw them, with its verdict, confidence and rationale;
- an **answer**: the question, the gold answers with their aliases, the model's answer and
  the scorer's score;
- a **relevance** pair: the question and the retrieved chunk, as the judge read them, with the
  chunk's document and where each retriever ranked it (:class:`RelevanceCard`).

Each card also carries the judges' verdicts; a labelling screen hides them until the item is
labelled, so they cannot anchor the human.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.browse import sample_detail
from workbench.claims.report import answer_claims
from workbench.kg.merges import proposals
from workbench.kg.runner import dedup_run_by_id
from workbench.retrieval.relevance import JudgedPair, judged_pair
from workbench.store.db import Store
from workbench.store.labels import AnswerKey, ClaimKey, ItemKey, PairKey, RelevanceKey
from workbench.store.lookup import NotFound
from workbench.store.queries import run_by_id

__all__ = ["ClaimCard", "PairCard", "PairView", "AnswerCard", "RelevanceCard", "claim_card", "pair_card",
           "answer_card", "relevance_card", "card"]

#: A (question, retrieved chunk) pair as a human labelling its relevance sees it.
RelevanceCard = JudgedPair


@dataclass(frozen=True)
class ClaimCard:
    """One claim of one answer, with what the model was shown."""

    key: ClaimKey
    run: str
    sample_id: str
    question: str
    gold: tuple[str, ...]
    answer: str                         # the model's answer (as parsed; the raw output if none)
    claim: str
    best_unit: str | None               # the text of the unit that best supports the claim, if any
    best_label: str | None              # e.g. T123
    shown_units: tuple[str, ...]        # every unit visible to the model in that cell, in window order
    verdicts: dict[str, bool]           # each verifier ("supported on a shown unit") and the vote


@dataclass(frozen=True)
class PairView:
    """One mode's view of a pair: the contexts its judge saw and what it said."""

    mode: str
    context_a: str
    context_b: str
    same: bool
    confidence: float
    rationale: str


@dataclass(frozen=True)
class PairCard:
    """A candidate pair of a dedup run, as every mode's judge saw it."""

    key: PairKey
    run: str
    name_a: str
    name_b: str
    reasons: str                        # why the pair was a candidate
    views: tuple[PairView, ...]         # one per judged mode, in the run's mode order

    @property
    def verdicts(self) -> dict[str, bool]:
        return {v.mode: v.same for v in self.views}


@dataclass(frozen=True)
class AnswerCard:
    """One answer of a run, with the gold answers it was scored against."""

    key: AnswerKey
    run: str
    sample_id: str
    question: str
    gold: tuple[str, ...]
    aliases: dict[str, tuple[str, ...]]   # gold answer → its aliases
    answer: str
    score: float | None
    scorer: str

    @property
    def verdicts(self) -> dict[str, bool]:
        return {} if self.score is None else {self.scorer: self.score >= 0.5}


def _answer_text(event: dict, output: str | None) -> str:
    prediction = event.get("prediction")
    return prediction if prediction not in (None, "") else (output or "")


def claim_card(store: Store, key: ClaimKey) -> ClaimCard:
    """The card of claim ``key.idx`` of one answer (the run's newest claim run with finished jobs)."""
    run = run_by_id(store, key.run_id)
    detail = sample_detail(store, run, key.sid, key.cell_id)
    verified = answer_claims(store, run, key.cell_id, key.sid)
    claim = next((c for c in (verified or {}).get("claims", []) if c["idx"] == key.idx), None)
    if claim is None:
        raise NotFound(f"no claim {key.idx} of sample {detail.sample.id} in cell {key.cell_id} of run {run.name}")
    best = claim["best_unit"]
    verdicts = {v: bool(s["supported"]) for v, s in claim["verifiers"].items()}
    verdicts["vote"] = bool(claim["supported"])
    return ClaimCard(key, run.name, detail.sample.id, detail.sample.question, tuple(detail.sample.answers),
                     _answer_text(detail.event, detail.output), claim["text"],
                     None if best is None else best["text"], None if best is None else best["label"],
                     tuple(line.text for line in detail.evidence if line.state == "visible"), verdicts)


def pair_card(store: Store, key: PairKey) -> PairCard:
    """The card of a candidate pair: both names and each mode's contexts and verdict."""
    dedup = dedup_run_by_id(store, key.dedup_run_id)
    views, names, reasons = [], None, ""
    for mode in dedup.config.modes:
        # Any band and verdict: the pair is found whatever its confidence.
        found = next(iter(proposals(store, dedup.name, mode, only_coreferent=False, pair=(key.a, key.b))), None)
        if found is None:
            continue
        names, reasons = (found.name_a, found.name_b), found.reasons
        views.append(PairView(mode, found.context_a, found.context_b, found.is_coreferent, found.confidence,
                              found.rationale))
    if names is None:
        raise NotFound(f"({key.a}, {key.b}) is not a judged pair of dedup run {dedup.name}")
    return PairCard(key, dedup.name, names[0], names[1], reasons, tuple(views))


def answer_card(store: Store, key: AnswerKey) -> AnswerCard:
    """The card of one answer: question, gold answers and aliases, the answer and its score."""
    run = run_by_id(store, key.run_id)
    detail = sample_detail(store, run, key.sid, key.cell_id)
    sample = detail.sample
    aliases = {a: tuple(names) for a, names in sample.aliases.items() if names}
    return AnswerCard(key, run.name, sample.id, sample.question, tuple(sample.answers), aliases,
                      _answer_text(detail.event, detail.output), detail.event.get("score"),
                      run.config.get("score", "acc"))


def relevance_card(store: Store, key: RelevanceKey) -> RelevanceCard:
    """The card of a (question, chunk) pair: the question, the chunk, its ranks and the judges' verdicts."""
    return judged_pair(store, key)


def card(store: Store, key: ItemKey) -> ClaimCard | PairCard | AnswerCard | RelevanceCard:
    """The card of any item key."""
    if isinstance(key, ClaimKey):
        return claim_card(store, key)
    if isinstance(key, PairKey):
        return pair_card(store, key)
    if isinstance(key, RelevanceKey):
        return relevance_card(store, key)
    return answer_card(store, key)
