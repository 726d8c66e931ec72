"""Aggregation of verifier verdicts and the answer-level outputs (docs/design.md §6).

Three levels:

1. :func:`vote` — the verifiers' majority for one (claim, unit);
2. :func:`judge_claim` — a claim is supported when some unit's vote is; the best supporting
   unit is its attribution;
3. :func:`summarize` — support ratio, unsupported claims, and the filtered answer (supported
   claims only) or a rejection.

Every verifier's own verdicts are kept in :class:`ClaimResult` so they can be stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from workbench.claims.types import Claim, Verdict
from workbench.retrieval.text import _CJK_RE

TIES = ("unsupported", "supported")

# Stripped from the end of each supported claim before joining, so that the joiner is the
# only separator between two claims ("A。；B。" would read as a double stop).
_TRAILING = " \t\r\n。；;，,、."


def vote(verdicts: Sequence[Verdict], ties: str = "unsupported") -> bool:
    """The majority of ``verdicts`` (one per verifier) for one (claim, unit).

    An even split is resolved by ``ties``: ``"unsupported"`` (the cautious default) or
    ``"supported"``. Raises ``ValueError`` on no verdicts or an unknown ``ties``.
    """
    if ties not in TIES:
        raise ValueError(f"unknown tie policy {ties!r}; choose from {', '.join(TIES)}")
    if not verdicts:
        raise ValueError("vote needs at least one verdict")
    yes = sum(1 for v in verdicts if v.supported)
    no = len(verdicts) - yes
    if yes != no:
        return yes > no
    return ties == "supported"


def vote_label(verdicts: Sequence[Verdict], ties: str = "unsupported") -> str:
    """The three-way label of the vote: E when :func:`vote` supports, else C where more verifiers
    said contradiction than neutral, else N."""
    if vote(verdicts, ties):
        return "E"
    contradictions = sum(1 for v in verdicts if v.label == "C")
    neutral = sum(1 for v in verdicts if v.label == "N")
    return "C" if contradictions > neutral else "N"


@dataclass(frozen=True)
class ClaimResult:
    """One claim judged against the units of its context window.

    ``unit_votes[i]`` is the vote over verifiers for unit ``i`` (``unit_labels[i]`` its
    three-way label); ``verdicts`` maps each verifier to its own verdict per unit. ``best_unit`` (the attribution) and ``best_score``
    (that unit's mean score across verifiers) are ``None`` when the claim is unsupported.
    """

    claim: Claim
    supported: bool
    best_unit: int | None
    best_score: float | None
    unit_votes: list[bool]
    verdicts: dict[str, list[Verdict]]
    unit_labels: list[str] | None = None


def judge_claim(claim: Claim, verdicts: dict[str, list[Verdict]], ties: str = "unsupported") -> ClaimResult:
    """Vote per unit; the claim is supported iff some unit's vote is.

    Attribution: among the supported units, the one with the highest mean score across
    verifiers; on equal means the lowest index (the earlier unit in the window) wins. With
    no units the claim is unsupported. Raises ``ValueError`` when ``verdicts`` is empty or
    the verifiers disagree on the number of units.
    """
    if not verdicts:
        raise ValueError("judge_claim needs the verdicts of at least one verifier")
    lengths = {name: len(vs) for name, vs in verdicts.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"verifiers judged different numbers of units: {lengths}")
    n_units = next(iter(lengths.values()))
    unit_votes: list[bool] = []
    unit_labels: list[str] = []
    best_unit: int | None = None
    best_score: float | None = None
    for i in range(n_units):
        column = [vs[i] for vs in verdicts.values()]
        supported = vote(column, ties)
        unit_votes.append(supported)
        unit_labels.append(vote_label(column, ties))
        mean = sum(v.score for v in column) / len(column)
        # Strictly greater: an equal later unit never displaces an earlier one.
        if supported and (best_score is None or mean > best_score):
            best_unit, best_score = i, mean
    return ClaimResult(claim, best_unit is not None, best_unit, best_score, unit_votes,
                       {name: list(vs) for name, vs in verdicts.items()}, unit_labels)


@dataclass(frozen=True)
class AnswerVerdict:
    """The answer-level outcome.

    ``support_ratio`` is supported claims / claims (``None`` with no claims);
    ``unsupported`` lists the unsupported claims in answer order; ``filtered_answer`` is the
    supported claims joined, or ``None`` when the answer is ``rejected`` (or has no claims).
    """

    claims: list[ClaimResult]
    support_ratio: float | None
    unsupported: list[Claim]
    filtered_answer: str | None
    rejected: bool


def summarize(answer: str, results: Sequence[ClaimResult], *, reject_below: float = 0.5,
              joiner: str | None = None) -> AnswerVerdict:
    """Support ratio, unsupported claims, and the filtered answer or a rejection.

    - No claims: ``support_ratio`` ``None``, not rejected, ``filtered_answer`` ``None``
      (there is nothing to filter, and nothing was shown to be unsupported).
    - ``support_ratio < reject_below``: rejected, ``filtered_answer`` ``None``.
    - Otherwise ``filtered_answer`` is the supported claims' texts in order, each stripped of
      trailing whitespace and clause punctuation (``。；;，,、.``), joined by ``joiner``: by
      default ``"；"`` when ``answer`` contains CJK characters, else ``"; "``. With
      ``reject_below=0`` an answer with no supported claim gives ``""``.
    """
    results = list(results)
    if not results:
        return AnswerVerdict([], None, [], None, False)
    supported = [r for r in results if r.supported]
    ratio = len(supported) / len(results)
    unsupported = [r.claim for r in results if not r.supported]
    if ratio < reject_below:
        return AnswerVerdict(results, ratio, unsupported, None, True)
    if joiner is None:
        joiner = "；" if _CJK_RE.search(answer) else "; "
    filtered = joiner.join(r.claim.text.rstrip(_TRAILING) for r in supported)
    return AnswerVerdict(results, ratio, unsupported, filtered, False)
