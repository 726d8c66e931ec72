"""Verifiers: one :class:`~workbench.claims.types.Verdict` per (claim, context unit) (docs/design.md §6).

Every verifier has a ``name`` and ``verify(claim, units, *, question="") -> list[Verdict]``,
one verdict per unit, in the units' order. Aggregation across verifiers is in
:mod:`workbench.claims.vote`.

- ``lexical``: a token-overlap entailment proxy, see :func:`lexical_score`.
- ``embedding``: cosine similarity of llama.cpp embeddings (multilingual-e5-small, shipped; all-MiniLM-L6-v2 by
  name, seed 003's; or a model the user names).
- ``llm_judge``: one grammar-constrained yes/no call to the local model per (claim, unit).
- ``nli``: a three-way checker (entailment, neutral, contradiction) read from the local
  model's next-token logits in one forward pass, premise first so checks share a KV prefix.

Nothing here ever downloads a model.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Protocol, Sequence

import numpy as np

from workbench.claims.decompose import sentences
from workbench.claims.types import LLM, Verdict
from workbench.retrieval.text import tokenize

VERIFIERS = ("lexical", "embedding", "llm_judge", "nli")

# Function words only: they would let any two English sentences "overlap".
LEXICAL_STOPWORDS = frozenset("a an the of is are was were to in on for and or by with as at it its".split())


class VerifierUnavailable(ValueError):
    """A requested verifier cannot be built (missing model option, missing runtime)."""


class Verifier(Protocol):
    name: str

    def verify(self, claim: str, units: Sequence[str], *, question: str = "") -> list[Verdict]:
        """One verdict per unit, in the units' order."""
        ...


# ---------------------------------------------------------------- lexical

def lexical_tokens(text: str) -> set[str]:
    """The content tokens of ``text`` as a set: CJK character bigrams plus Latin/digit words.

    NFKC, lower-case; punctuation and symbols (``|`` included) become spaces so that they
    separate tokens (a CJK bigram never spans ``、`` or ``。``); ``_`` separates words
    (``starred_actors`` → ``starred``, ``actors``); a lone CJK character is a unigram;
    :data:`LEXICAL_STOPWORDS` are dropped.

    >>> sorted(lexical_tokens("Forrest Gump | starred_actors | Tom Hanks"))
    ['actors', 'forrest', 'gump', 'hanks', 'starred', 'tom']
    >>> sorted(lexical_tokens("多喝水。"))
    ['喝水', '多喝']
    """
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in text)
    return {t for t in tokenize(text, "bigram") if t not in LEXICAL_STOPWORDS}


def lexical_score(claim: str, unit: str) -> float:
    """Coverage of the claim by the unit: ``|claim ∩ unit| / |claim|`` over :func:`lexical_tokens`.

    Asymmetric on purpose (entailment-like): the unit must contain the claim's content, while
    extra content in the unit costs nothing. A claim without tokens scores 0.
    """
    claim_tokens = lexical_tokens(claim)
    if not claim_tokens:
        return 0.0
    return len(claim_tokens & lexical_tokens(unit)) / len(claim_tokens)


class LexicalVerifier:
    """Supported when :func:`lexical_score` is at least ``threshold``."""

    name = "lexical"

    def __init__(self, threshold: float = 0.6):
        self.threshold = threshold

    def verify(self, claim: str, units: Sequence[str], *, question: str = "") -> list[Verdict]:
        """One verdict per unit; ``question`` is not used (the claim alone must be covered)."""
        claim_tokens = lexical_tokens(claim)
        out = []
        for unit in units:
            score = len(claim_tokens & lexical_tokens(unit)) / len(claim_tokens) if claim_tokens else 0.0
            out.append(Verdict(self.name, bool(claim_tokens) and score >= self.threshold, score))
        return out


# ---------------------------------------------------------------- embedding

class EmbeddingVerifier:
    """Cosine similarity of an embedding model's vectors (multilingual-e5-small by default); supported when ≥ ``threshold``.

    The vectors come from a :class:`~workbench.models.embedder.CachedEmbedder`: kept in the
    store by text, so a unit shared by many claims, or a re-run, is embedded once. The score
    is the cosine clipped to ``[0, 1]`` (a negative cosine is no support at all). Both sides are
    embedded as queries (a symmetric comparison). The threshold is the caller's: each model's
    default is in :mod:`workbench.models.embedders` (0.75 for all-MiniLM-L6-v2 is seed 003's).
    """

    name = "embedding"

    def __init__(self, embedder, threshold: float = 0.75):
        self.embedder = embedder
        self.threshold = threshold

    def vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Unit-length vectors of ``texts``."""
        return list(self.embedder.vectors(list(texts)))

    def verify(self, claim: str, units: Sequence[str], *, question: str = "") -> list[Verdict]:
        """One verdict per unit; ``question`` is not used."""
        if not units:
            return []
        parts = [_premise_parts(u) for u in units]
        claim_vec, *vecs = self.vectors([claim, *(p for ps in parts for p in ps)])
        out, at = [], 0
        for ps in parts:
            # A long premise (a paragraph, a reference answer) holds a claim in one of its sentences:
            # its best sentence decides, as the whole text's vector dilutes any one statement in it.
            score = min(1.0, max(0.0, max(float(claim_vec @ v) for v in vecs[at:at + len(ps)])))
            at += len(ps)
            out.append(Verdict(self.name, score >= self.threshold, score))
        return out


def _premise_parts(unit: str) -> list[str]:
    """What a claim is compared with: the unit, and each of its sentences when it has several."""
    split = sentences(unit)
    return [unit, *split] if len(split) > 1 else [unit]


# ---------------------------------------------------------------- llm_judge

JUDGE_SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["supported", "unsupported"]}},
                "required": ["verdict"]}

_JUDGE_SYSTEM = (
    "You check a claim against one line of evidence. Decide only from the evidence: ignore what you "
    "know yourself. The claim is supported only if the evidence states it or directly implies it. "
    'Reply with JSON: {"verdict": "supported"} or {"verdict": "unsupported"}.'
)
_VERDICT_RE = re.compile(r'"verdict"\s*:\s*"(supported|unsupported)"', re.IGNORECASE)


def judge_messages(claim: str, unit: str, question: str = "") -> list[dict[str, str]]:
    """The chat messages of one judge call: the question as background, the evidence, the claim."""
    parts = []
    if question:
        parts.append(f"Background question (not evidence): {question}")
    parts.append(f"Evidence: {unit}")
    parts.append(f"Claim: {claim}")
    parts.append("Does the evidence alone support the claim?")
    return [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def parse_judgement(text: str) -> bool | None:
    """``True`` for supported, ``False`` for unsupported, ``None`` when the output says neither.

    Accepts the schema's JSON, a ``"verdict": "..."`` fragment inside other text, or the bare word.
    """
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("verdict"), str):
        word = data["verdict"].strip().lower()
    else:
        m = _VERDICT_RE.search(text or "")
        word = m.group(1).lower() if m else (text or "").strip().strip("\"'.。").lower()
    return {"supported": True, "unsupported": False}.get(word)


class LLMJudgeVerifier:
    """One ``llm.ask`` per (claim, unit), constrained by :data:`JUDGE_SCHEMA`.

    Score 1.0 for supported, 0.0 for unsupported. An output that :func:`parse_judgement`
    cannot read (e.g. cut off by ``max_tokens``) counts as unsupported with score 0.0: the
    judge did not vouch for the claim. ``unparsed`` counts those outputs.
    """

    name = "llm_judge"

    def __init__(self, llm: LLM, max_tokens: int = 12):
        self.llm = llm
        self.max_tokens = max_tokens
        self.unparsed = 0

    def verify(self, claim: str, units: Sequence[str], *, question: str = "") -> list[Verdict]:
        """One judge call per unit (served from the generation cache when already made)."""
        out = []
        for unit in units:
            call = self.llm.ask(judge_messages(claim, unit, question), max_tokens=self.max_tokens,
                                schema=JUDGE_SCHEMA)
            verdict = parse_judgement(call.text)
            if verdict is None:
                self.unparsed += 1
            out.append(Verdict(self.name, bool(verdict), 1.0 if verdict else 0.0))
        return out


# ---------------------------------------------------------------- nli

#: What the NLI checker chooses among, in this order (their first tokens differ in the models we know;
#: :meth:`~workbench.models.llamacpp.LlamaCppBackend.choose` refuses a model where they do not).
#: The checker's labels, as RefChecker and RAGChecker write them (each starts with its own token).
NLI_OPTIONS = ("Entailment", "Neutral", "Contradiction")
_NLI_LABEL = {"Entailment": "E", "Neutral": "N", "Contradiction": "C"}
_NLI_SYSTEM = (
    "You check whether a premise entails a hypothesis, as a natural language inference model does. "
    "Entailment: the premise states or directly implies the hypothesis. Contradiction: the premise "
    "states or implies that it is false. Neutral: the premise does not say. Decide from the premise "
    "alone, ignoring what you know yourself. Reply with one word: Entailment, Neutral or Contradiction."
)


def nli_messages(premise: str, hypothesis: str) -> list[dict[str, str]]:
    """The chat messages of one check; the premise comes first, so checks of one premise share a prefix."""
    return [{"role": "system", "content": _NLI_SYSTEM},
            {"role": "user", "content": f"Premise: {premise}\n\nHypothesis: {hypothesis}"}]


class NLIVerifier:
    """A three-way checker (RefChecker/RAGChecker's): Entailment, Neutral or Contradiction per (claim, premise).

    The local GGUF (``llm``: SmolLM2 by default, or the GGUF ``--nli-model`` names) reads the
    premise and the hypothesis; the label is the one of the three whose first token has the
    highest next-token logit: one forward pass, no generation
    (:meth:`~workbench.models.cached.CachedLLM.choose`), cached like every model call.
    :meth:`verify_pairs` checks premise by premise, so each premise is evaluated once and every
    claim about it reuses its KV prefix. Score: the probability of the label chosen, among the three.
    """

    name = "nli"

    def __init__(self, llm: LLM):
        self.llm = llm

    def check(self, premise: str, hypothesis: str) -> Verdict:
        """The three-way verdict on one pair."""
        call = self.llm.choose(nli_messages(premise, hypothesis), NLI_OPTIONS)
        label = _NLI_LABEL[call.text]
        return Verdict(self.name, label == "E", call.probabilities[NLI_OPTIONS.index(call.text)], label)

    def verify(self, claim: str, units: Sequence[str], *, question: str = "") -> list[Verdict]:
        """One verdict per unit, the unit being the premise."""
        return [self.check(unit, claim) for unit in units]

    def verify_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
        """The verdicts of ``(claim, premise)`` pairs, in their order, checked premise by premise."""
        out: list[Verdict | None] = [None] * len(pairs)
        for i in sorted(range(len(pairs)), key=lambda i: (pairs[i][1], i)):
            claim, premise = pairs[i]
            out[i] = self.check(premise, claim)
        return out


# ---------------------------------------------------------------- factory

def make_verifiers(names: Sequence[str], *, llm: LLM | None = None, embedder=None,
                   nli_llm: LLM | None = None, lexical_threshold: float = 0.6,
                   embedding_threshold: float = 0.75) -> list:
    """Build the named verifiers, in order.

    Raises ``ValueError`` for an unknown or repeated name (a repeat would count twice in the
    vote) or an empty list, and :class:`VerifierUnavailable` when ``embedding`` has no embedder,
    ``llm_judge`` no LLM, or ``nli`` no model (``nli_llm``, else ``llm``). Every name is checked
    before any verifier is built.
    """
    names = list(names)
    if not names:
        raise ValueError(f"no verifiers requested; choose from {', '.join(VERIFIERS)}")
    for name in names:
        if name not in VERIFIERS:
            raise ValueError(f"unknown verifier {name!r}; choose from {', '.join(VERIFIERS)}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"verifier {repeated[0]!r} is listed more than once")
    if "embedding" in names and embedder is None:
        raise VerifierUnavailable("embedding: no embedding model given")
    if "llm_judge" in names and llm is None:
        raise VerifierUnavailable("llm_judge: no LLM given")
    if "nli" in names and (nli_llm or llm) is None:
        raise VerifierUnavailable("nli: no LLM given")
    out = []
    for name in names:
        if name == "lexical":
            out.append(LexicalVerifier(lexical_threshold))
        elif name == "embedding":
            out.append(EmbeddingVerifier(embedder, embedding_threshold))
        elif name == "llm_judge":
            out.append(LLMJudgeVerifier(llm))
        elif name == "nli":
            out.append(NLIVerifier(nli_llm or llm))
    return out
