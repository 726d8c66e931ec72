"""Chain-of-Query (CoQ): the format SearChain's model writes, its prompts and a forgiving parser.

SearChain (Xu et al., WWW 2024; docs/design.md §7) has the model plan a whole chain of
sub-queries at once, answering the ones it knows and marking the rest unsolved. The
retrieval loop checks the chain step by step and sends :func:`feedback_message` back as the
next user turn. The format, one item per line::

    [Query 1]: Which film did Ridley Scott direct in 1982?
    [Answer 1]: Blade Runner
    [Query 2]: Who wrote Blade Runner?
    [Unsolved Query]
    [Final Content]: Ridley Scott directed Blade Runner in 1982 [1]. ... So the answer is X.

``[Unsolved Query]: q`` in place of a ``[Query n]`` line (the paper's form) is accepted too.

:func:`parse_chain` reads what a 135M-parameter model actually writes. Rules:

* Tags are case-insensitive and may carry markdown (``**[Query 1]:**``, backticks), spaces
  inside the brackets, a ``:`` or ``-`` separator, or no brackets (``Query 1: ...``; then the
  separator is required, so a prose line that starts with "Answer is" is not a tag).
* Step numbers are ignored for order: steps are renumbered by appearance. An ``[Answer n]``
  goes to the nearest preceding query that is still open, preferring one written with the
  same n; an answer with no open query before it is ignored.
* A query left without an answer is unsolved (answer ``None``), as is an answer such as
  "Unknown", "I don't know", "N/A" or an empty one. A bare ``[Unsolved Query]`` closes the
  nearest open query as unsolved; ``[Unsolved Query]: q`` opens a step whose query is q
  (unsolved unless an answer line follows it).
* Identical consecutive steps (small models loop) collapse into one.
* ``[Final Content]`` (also ``Final Content:``, ``[Final Answer]:``) runs over the following
  lines until the next tagged line; everything after that is ignored, because small models
  go on with an imagined next example. An empty final content counts as absent.
* Text before the first tag and untagged lines between steps are ignored; a last line cut
  off by ``max_tokens`` is kept if it parses (the caller, which knows the finish reason,
  may drop it) and ignored if its tag is incomplete.
* :class:`ChainParseError` is raised only when no query step exists at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CHAIN_MAX_TOKENS = 200
FEEDBACK_KINDS = ("correct", "complete")


@dataclass(frozen=True)
class Step:
    """One sub-query of a chain; ``unsolved`` is true exactly when ``answer`` is None."""

    n: int                  # 1-based position in the parsed chain (renumbered in order of appearance)
    query: str
    answer: str | None      # None when the step is unsolved
    unsolved: bool


@dataclass(frozen=True)
class Chain:
    """A parsed Chain-of-Query: its steps, the final content and the steps that content cites."""

    steps: tuple[Step, ...]
    final: str | None             # the [Final Content] text, None if absent
    citations: tuple[int, ...]    # [n] markers in the final content: first appearance, deduplicated, existing steps only


class ChainParseError(ValueError):
    """The model output holds no Chain-of-Query at all; the message says what was missing."""


# --- prompts ---------------------------------------------------------------------------

_SYSTEM = (
    "You answer questions about films and the people who make them by writing a Chain-of-Query. "
    "First plan the whole chain: split the question into simple sub-queries, one fact each, in order. "
    "Write each sub-query as [Query n]: ... on its own line. If you know its answer, write "
    "[Answer n]: ... on the next line. If you do not know it, write [Unsolved Query] instead of an "
    "answer; do not guess. Finish with [Final Content]: a short explanation that cites the steps it "
    'uses as [n] and ends with "So the answer is ...". Write only the chain.'
)

# Our own examples (not the paper's): a fully answered 2-hop chain, then one whose second
# hop the model does not know, so the few-shot shows both endings of a step.
_FEW_SHOT = (
    ("Question: In which year was the director of Alien born?",
     "[Query 1]: Who directed Alien?\n"
     "[Answer 1]: Ridley Scott\n"
     "[Query 2]: In which year was Ridley Scott born?\n"
     "[Answer 2]: 1937\n"
     "[Final Content]: Alien was directed by Ridley Scott [1], who was born in 1937 [2]. "
     "So the answer is 1937."),
    ("Question: In which town was the composer of the music for Jaws born?",
     "[Query 1]: Who composed the music for Jaws?\n"
     "[Answer 1]: John Williams\n"
     "[Query 2]: In which town was John Williams born?\n"
     "[Unsolved Query]\n"
     "[Final Content]: The music for Jaws was composed by John Williams [1]. "
     "His birthplace is not known yet [2]. So the answer is unknown."),
)

_CONTINUE = ('Keep the earlier steps, {what}, and continue the chain for the question "{question}" '
             "in the same format, ending with [Final Content].")


def coq_messages(question: str) -> list[dict[str, str]]:
    """The chat that asks for a Chain-of-Query: system prompt, two worked examples, the question."""
    messages = [{"role": "system", "content": _SYSTEM}]
    for user, assistant in _FEW_SHOT:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    messages.append({"role": "user", "content": f"Question: {question}"})
    return messages


def feedback_message(kind: str, query: str, answer: str, reference: str, question: str) -> str:
    """The user turn that sends retrieval's verdict on one step back to the model.

    ``correct``: the reference (the top-1 evidence) gives another answer to an answered step;
    ``complete``: it answers a step the model marked unsolved. Raises ValueError for any
    other kind.
    """
    if kind == "correct":
        head = f"[Query]: {query}\n[Answer]: {answer}\n[Reference]: {reference}\n"
        tail = ("The reference gives this answer to the query. "
                + _CONTINUE.format(what="correct this step with it", question=question))
    elif kind == "complete":
        head = f"[Unsolved Query]: {query}\n[Answer]: {answer}\n[Reference]: {reference}\n"
        tail = ("The reference answers this unsolved query. "
                + _CONTINUE.format(what="fill in this step with the answer", question=question))
    else:
        raise ValueError(f"unknown feedback kind {kind!r}: expected one of {FEEDBACK_KINDS}")
    return head + tail


def render_chain(chain: Chain) -> str:
    """The canonical text of ``chain``, in the format the model is asked to write."""
    lines: list[str] = []
    for step in chain.steps:
        lines.append(f"[Query {step.n}]: {step.query}")
        lines.append("[Unsolved Query]" if step.answer is None else f"[Answer {step.n}]: {step.answer}")
    if chain.final is not None:
        lines.append(f"[Final Content]: {chain.final}")
    return "\n".join(lines)


# --- parsing ---------------------------------------------------------------------------

# One tagged line. Decoration (markdown, bullets, list numbers) may surround the tag; a tag
# without brackets needs a separator, so prose such as "Answer is 5" or "Final thoughts" is
# not mistaken for one. "question" and "reference" are recognised only to end a final content
# (the model echoing a feedback turn or starting a new example) and are otherwise skipped.
_TAG = re.compile(
    r"""^[\s*`_>#•-]*(?:\d+[.)]\s*)?
    (?:(?P<open>[\[(【])\s*)?
    (?P<tag>final(?:\s+(?:content|answer))?|unsolved(?:\s+(?:sub[\s-]?)?query)?
           |(?:sub[\s-]?)?query|answer|question|reference)(?![a-z])
    \s*(?P<num>\d+)?\s*
    (?P<close>[\])】])?
    [\s*`_]*(?P<sep>[:：\-–—])?[\s*`_]*
    (?P<body>.*)$""",
    re.IGNORECASE | re.VERBOSE,
)
_EDGES = re.compile(r"^[\s*`_]+|[\s*`_]+$")
_CITATION = re.compile(r"\[\s*(\d+(?:\s*[,;]\s*\d+)*)\s*\]")
# Answers that mean "I cannot answer", compared after dropping case, spaces and punctuation.
_UNKNOWN = {"", "unknown", "idontknow", "idonotknow", "na", "notknown", "unsure", "notsure", "noanswer",
            "unanswerable", "unsolved", "unsolvedquery"}


@dataclass
class _Open:
    """A step while parsing: ``closed`` once it got an answer or was marked unsolved."""

    num: int | None
    query: str
    answer: str | None = None
    closed: bool = False


def _tag(line: str) -> tuple[str, int | None, str] | None:
    """(kind, written number, body) of a tagged line; None for untagged or incomplete tags."""
    m = _TAG.match(line)
    if m is None:
        return None
    bracketed = m["open"] is not None and m["close"] is not None
    if not bracketed and m["sep"] is None:
        return None
    word = m["tag"].lower()
    kind = ("final" if word.startswith("final") else "unsolved" if word.startswith("unsolved")
            else "query" if word.endswith("query") else word)
    return kind, int(m["num"]) if m["num"] else None, _clean(m["body"])


def _clean(body: str) -> str:
    # markdown emphasis or code marks around the whole text (a closing "**") are not part of it
    return _EDGES.sub("", body)


def _is_unknown(answer: str) -> bool:
    return re.sub(r"[\W_]+", "", answer.casefold()) in _UNKNOWN


def _key(text: str | None) -> str | None:
    return None if text is None else " ".join(text.casefold().split())


def _open_step(steps: list[_Open], num: int | None) -> _Open | None:
    """The nearest preceding open step, preferring one written with the same number."""
    open_steps = [s for s in reversed(steps) if not s.closed]
    same = [s for s in open_steps if num is not None and s.num == num]
    return (same or open_steps or [None])[0]


def parse_chain(text: str) -> Chain:
    """Parse a model's Chain-of-Query; raises :class:`ChainParseError` if it has no query step.

    See the module docstring for the tolerated slips.
    """
    steps: list[_Open] = []
    final_lines: list[str] | None = None
    for line in text.splitlines():
        tagged = _tag(line)
        if final_lines is not None:
            if tagged is not None:
                break  # the final content ends at the next tag: the rest is a new example or an echo
            final_lines.append(line)
            continue
        if tagged is None:
            continue
        kind, num, body = tagged
        if kind == "final":
            final_lines = [body]
        elif kind == "query" and body:
            steps.append(_Open(num, body))
        elif kind == "unsolved" and body and not _is_unknown(body):
            steps.append(_Open(num, body))  # the paper's form: the query itself tagged unsolved
        elif kind in ("unsolved", "answer"):
            target = _open_step(steps, num)
            if target is not None:
                target.closed = True
                if kind == "answer" and not _is_unknown(body):
                    target.answer = body
    chain_steps: list[Step] = []
    for s in steps:
        prev = chain_steps[-1] if chain_steps else None
        if prev and (_key(prev.query), _key(prev.answer)) == (_key(s.query), _key(s.answer)):
            continue  # a model stuck in a loop repeats the same step
        chain_steps.append(Step(len(chain_steps) + 1, s.query, s.answer, s.answer is None))
    final = _clean("\n".join(final_lines)) if final_lines is not None else ""
    if not chain_steps:
        found = "only a [Final Content]" if final else "the model answered without a Chain-of-Query"
        raise ChainParseError(f"no [Query] step found ({found})")
    return Chain(tuple(chain_steps), final or None, _citations(final, len(chain_steps)))


def _citations(final: str, n_steps: int) -> tuple[int, ...]:
    """Step numbers cited as [1], [1][2] or [1, 2]: first appearance, deduplicated, existing steps."""
    seen: list[int] = []
    for m in _CITATION.finditer(final):
        for part in re.split(r"\s*[,;]\s*", m[1]):
            n = int(part)
            if 1 <= n <= n_steps and n not in seen:
                seen.append(n)
    return tuple(seen)


# GBNF for the Chain-of-Query format (lines bounded by max_tokens): one to four steps, each answered or unsolved, then a
# final content that may cite steps as [n]. A small model held to it cannot drift into
# prose or repeat a tag forever (SmolLM2-135M does both when unconstrained); the parser
# still takes unconstrained chains from models run without a grammar.
CHAIN_GRAMMAR = r'''
root     ::= step step? step? step? final
step     ::= "[Query " [1-9] "]: " text "\n" (answer | unsolved)
answer   ::= "[Answer " [1-9] "]: " text "\n"
unsolved ::= "[Unsolved Query]\n"
final    ::= "[Final Content]: " text
text     ::= item+
item     ::= [^\n\[] | "[" [1-9] "]"
'''
