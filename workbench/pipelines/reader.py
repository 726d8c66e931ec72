"""Readers for SearChain's verification step (docs/design.md §7).

SearChain (Xu et al. 2024) sends each sub-query of the Chain-of-Query to a retriever (top-1
unit) and a *reader* answers it from that unit with a confidence. A confident reader answer
that disagrees with the model's answer corrects the step; for an unsolved step it completes it.

- :class:`ExtractiveReader` (``"extractive"``) — no model. For a KG triple it picks the side
  of the triple the query does *not* name and scores how well the query names the other side
  and the relation; for a text chunk it returns the sentence that best overlaps the query.
- :class:`LLMReader` (``"llm"``) — one schema-constrained call that answers from the unit
  only and states a confidence.

:func:`answer_agrees` is SearChain's "the reader's answer is contained in the model's answer".
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass

from workbench.evidence.units import Unit, render_line
from workbench.metrics.scoring import normalize_answer
from workbench.retrieval.text import EN_STOPWORDS, tokenize

__all__ = ["Reading", "READERS", "READER_SCHEMA", "RELATION_SYNONYMS", "ExtractiveReader", "LLMReader",
           "make_reader", "answer_agrees", "stem", "relation_score", "unit_evidence", "reader_messages",
           "parse_reading"]

READERS = ("extractive", "llm")

READER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
                 "required": ["answer", "confidence"]}


@dataclass(frozen=True)
class Reading:
    """A reader's answer to one sub-query from one unit."""

    answer: str          # "" when the reader finds nothing
    confidence: float    # in [0, 1]


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


_CJK_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


def _named(name: str, query: str) -> bool:
    """Whether the normalized ``name`` occurs in the normalized ``query``.

    Latin names must match whole words (all tokens present), so a one-letter title such as
    "M" is not found inside "kismet"; Chinese has no spaces, so a CJK name may match as a
    plain substring.
    """
    if not name:
        return False
    return set(name.split()) <= set(query.split()) or (bool(_CJK_RE.search(name)) and name in query)


# ---------------------------------------------------------------- relation matching

# Words that carry no relation meaning ("directed_by", "in_language", "has_genre").
_RELATION_FILLER = frozenset({"by", "in", "of", "the", "has", "have"})

# Irregular forms and near-synonyms, mapped to one base word before the suffix stripper runs:
# MetaQA queries say "wrote", "actor" or "spoken" where the relation says written_by,
# starred_actors or in_language.
_IRREGULAR = {
    "wrote": "write", "written": "write", "writer": "write", "writers": "write", "screenwriter": "write",
    "screenplay": "write", "author": "write",
    "actor": "star", "actors": "star", "actress": "star", "actresses": "star", "acted": "star",
    "acting": "star", "act": "star", "acts": "star", "cast": "star", "appeared": "star", "appear": "star",
    "year": "release", "years": "release",
    "type": "genre", "types": "genre", "kind": "genre", "kinds": "genre",
    "spoken": "language", "speak": "language", "spoke": "language",
    "score": "rate", "scored": "rate",
}

# Phrases that name a MetaQA relation outright (taken from MetaQA's question templates): any
# of them in the query → relation score 1.
RELATION_SYNONYMS: dict[str, tuple[str, ...]] = {
    "directed_by": ("directed", "director", "directs", "direct", "filmmaker"),
    "written_by": ("wrote", "writer", "written", "screenplay", "screenwriter", "script", "author"),
    "starred_actors": ("actor", "actors", "actress", "acted", "star", "stars", "starred", "starring",
                       "cast", "appear", "appears", "appeared"),
    "release_year": ("year", "when", "released", "release", "come out", "came out"),
    "in_language": ("language", "languages", "spoken"),
    "has_genre": ("genre", "genres", "type of", "kind of", "sort of"),
    "has_tags": ("tags", "tagged", "described", "describe", "describing", "about", "words", "terms", "topics"),
    "has_imdb_rating": ("rating", "rated", "imdb rating"),
    "has_imdb_votes": ("votes", "voted", "popularity", "popular"),
}

_SUFFIXES = ("ing", "ion", "ed", "er", "or")


def stem(word: str) -> str:
    """A crude stem: irregular table, then one plural "s", one suffix, a final "e", a doubled letter.

    >>> [stem(w) for w in ("directed", "director", "directors", "starring", "wrote", "released", "year")]
    ['direct', 'direct', 'direct', 'star', 'writ', 'releas', 'releas']
    """
    w = _IRREGULAR.get(word.lower(), word.lower())
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        w = w[:-1]
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]                      # "release" and "released" must meet at "releas"
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]                      # "starr" (from starred/starring) → "star"
    return w


def relation_score(relation: str, query: str) -> float:
    """How well ``query`` names ``relation``, in [0, 1].

    1.0 when the query holds a phrase of :data:`RELATION_SYNONYMS` for the relation; else the
    share of the relation's word stems (fillers such as "by", "has" dropped) that are among the
    query's stems. A CJK relation word also counts when it is a substring of the query.
    """
    q = normalize_answer(query)
    rel = relation.strip()
    for phrase in RELATION_SYNONYMS.get(rel, ()):
        if f" {phrase} " in f" {q} ":
            return 1.0
    # Split before normalizing: normalize_answer deletes "_" (a punctuation character).
    words = [w for w in normalize_answer(rel.replace("_", " ")).split() if w not in _RELATION_FILLER]
    stems = {stem(w) for w in words if not _CJK_RE.search(w)}
    cjk = {w for w in words if _CJK_RE.search(w)}
    if not stems and not cjk:
        return 0.0
    query_stems = {stem(w) for w in q.split()}
    hits = len(stems & query_stems) + sum(1 for w in cjk if w in q)
    return hits / (len(stems) + len(cjk))


# ---------------------------------------------------------------- extractive reader

# Sentence ends: Chinese and ASCII ! ?, a "." only before whitespace (keeps "8.5" whole), newlines.
_SENTENCE_SPLIT = re.compile(r"(?<=[。！？!?])|(?<=\.)(?=\s)|\n+")
_MAX_SENTENCE = 200


def _query_terms(text: str) -> set[str]:
    # English function words would make every sentence overlap every question.
    return {t for t in tokenize(text, "bigram") if t not in EN_STOPWORDS}


class ExtractiveReader:
    """A model-free reader: triple side selection, or best-overlap sentence of a chunk."""

    name = "extractive"

    def read(self, query: str, unit: Unit) -> Reading:
        """Answer ``query`` from ``unit`` (see :meth:`read_triple` and :meth:`read_chunk`)."""
        if unit.kind == "triple":
            return self.read_triple(query, unit)
        return self.read_chunk(query, unit)

    def read_triple(self, query: str, unit: Unit) -> Reading:
        """The side of the triple the query does not name; confidence 0.5·mention + 0.5·relation.

        Head named (tail not) → tail; tail named (head not) → head; both named (the query
        checks the fact) → tail; mention is 1 in these cases. Neither named → tail, mention 0.
        """
        head, tail = (unit.head or "").strip(), (unit.tail or "").strip()
        q = normalize_answer(query)
        head_named = _named(normalize_answer(head), q)
        tail_named = _named(normalize_answer(tail), q)
        answer = head if tail_named and not head_named else tail
        mention = 1.0 if head_named or tail_named else 0.0
        confidence = 0.5 * mention + 0.5 * relation_score(unit.relation or "", query)
        return Reading(answer, _clip(confidence) if answer else 0.0)

    def read_chunk(self, query: str, unit: Unit) -> Reading:
        """The sentence sharing most query terms (CJK bigrams, Latin words); confidence = share.

        The share is over the query's distinct terms; ties go to the earlier sentence. No
        shared term → ``Reading("", 0.0)``.
        """
        terms = _query_terms(query)
        text = unicodedata.normalize("NFKC", unit.text or "")
        best, best_hits = "", 0
        for sentence in _SENTENCE_SPLIT.split(text):
            sentence = " ".join(sentence.split())
            if not sentence:
                continue
            hits = len(terms & _query_terms(sentence))
            if hits > best_hits:
                best, best_hits = sentence, hits
        if not best_hits:
            return Reading("", 0.0)
        return Reading(best[:_MAX_SENTENCE], _clip(best_hits / len(terms)))


# ---------------------------------------------------------------- LLM reader

_READER_SYSTEM = (
    "You answer a question from one piece of evidence. Use only the evidence, not what you know "
    "yourself. Give a short answer (a name, a title, a year or a short phrase). If the evidence does "
    'not answer the question, give an empty answer with confidence 0. Reply with JSON: '
    '{"answer": "...", "confidence": <a number between 0 and 1>}.'
)


def unit_evidence(unit: Unit) -> str:
    """The unit as the reader sees it: ``h | r | t`` for a triple, the text for a chunk (one line)."""
    line = render_line(unit)
    return line[len(f"[{unit.label}] "):]


def reader_messages(query: str, unit: Unit) -> list[dict[str, str]]:
    """The chat messages of one reader call: the evidence line, then the query."""
    user = (f"Evidence: {unit_evidence(unit)}\n\nQuestion: {query}\n\n"
            "Answer from the evidence only, with your confidence between 0 and 1.")
    return [{"role": "system", "content": _READER_SYSTEM}, {"role": "user", "content": user}]


def parse_reading(text: str) -> Reading:
    """Read the model's JSON; anything unreadable (cut off, not an object) → ``Reading("", 0.0)``.

    JSON inside chatter is found between the first "{" and the last "}". A numeric answer
    (a year) becomes a string; a non-number confidence counts as 0; the confidence is clipped
    into [0, 1]; an empty answer always has confidence 0 (nothing found, nothing vouched for).
    """
    text = (text or "").strip()
    data = None
    for candidate in (text, text[text.find("{"): text.rfind("}") + 1]):
        try:
            data = json.loads(candidate)
            break
        except (ValueError, TypeError):
            continue
    if not isinstance(data, dict):
        return Reading("", 0.0)
    answer = data.get("answer")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    answer = answer.strip() if isinstance(answer, str) else ""
    conf = data.get("confidence")
    # bool is an int subclass, and NaN survives min/max: neither is a confidence.
    if isinstance(conf, bool) or not isinstance(conf, (int, float)) or math.isnan(conf):
        conf = 0.0
    return Reading(answer, _clip(float(conf)) if answer else 0.0)


class LLMReader:
    """One ``llm.ask`` per (query, unit), constrained by :data:`READER_SCHEMA`."""

    name = "llm"

    def __init__(self, llm, max_tokens: int = 32):
        self.llm = llm
        self.max_tokens = max_tokens

    def read(self, query: str, unit: Unit) -> Reading:
        """Ask the model to answer ``query`` from ``unit`` only (replayed from the cache when made)."""
        call = self.llm.ask(reader_messages(query, unit), max_tokens=self.max_tokens, schema=READER_SCHEMA)
        return parse_reading(call.text)


def make_reader(name: str, llm=None):
    """The reader called ``name`` (one of :data:`READERS`); the ``llm`` reader needs ``llm``."""
    if name == "extractive":
        return ExtractiveReader()
    if name == "llm":
        if llm is None:
            raise ValueError("llm reader needs a model")
        return LLMReader(llm)
    raise ValueError(f"unknown reader {name!r}; expected one of {', '.join(READERS)}")


def answer_agrees(model_answer: str | None, reader_answer: str) -> bool:
    """SearChain's agreement test: the reader's answer is contained in the model's answer.

    Both are normalized (:func:`normalize_answer`). True when the reader answer is a substring
    of the model answer, or when every reader token is among the model's tokens (entity lists
    in another order). An empty reader answer agrees with anything, ``None`` included (nothing
    to contradict); otherwise a ``None`` model answer (an unsolved step) does not agree.
    """
    reader = normalize_answer(reader_answer or "")
    if not reader:
        return True
    if model_answer is None:
        return False
    model = normalize_answer(model_answer)
    return reader in model or set(reader.split()) <= set(model.split())
