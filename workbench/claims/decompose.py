"""Claim decomposers: an answer becomes atomic claims, each with its source span (docs/design.md §6).

``rule`` (:func:`rule_claims`) is deterministic, for Chinese and English; ``llm``
(:func:`llm_claims`) is one call to the local model, constrained to :data:`CLAIMS_SCHEMA`
by a grammar; ``hybrid`` (:func:`hybrid_claims`) is rule first, then the model only for
the clauses that stay long (e.g. a relative clause: "一种由…创建的高级编程语言").

The rule decomposer:

1. Sentences end at 。！？!?, at a newline, and at "." before whitespace or the end (3.5 and
   v1.2 stay whole; so do e.g./Dr./vs. and initials, "J. R. R. Tolkien"). Bullets are trimmed.
2. A sentence with a clause that opens with a condition, cause or concession (如果 若 虽然
   因为 即使 除非 …, if/when/because/although/unless …) stays one claim: "它易于学习" on its
   own would drop the condition of "如果Python是高级语言，那么它易于学习".
3. Clauses split at ；; always, and at a comma (not a digit comma, 1,000) where a clause begins:
   - a Chinese comma (，, or , next to a Chinese character) ends a clause, as Chinese lists
     use 、: "主料是五花肉，辅料包括生姜" is two. It does not split after a leading time or place
     phrase ("1991年，", "在中国，"), nor before 或 (neither half of a disjunction is claimed);
   - an English comma splits only where a clause follows that opens with a conjunction (and/
     but/yet/so/whereas/while, followed by a clause rather than a list item), a condition or
     cause (rule 2), or an auxiliary (rule 4). Other commas join a list, an apposition or a
     leading phrase ("apples, pears and plums", "Paris, France", "In 1991, …"); ", or" does
     not split either.
   In English, " while " / " as well as " also split. A leading conjunction is dropped (和 以及
   并且 并 同时 而且 且 还, and / also / and also / as well as / while), with a comma after it
   ("Also, …"); a clause that is only one goes. The commas of an English list after a list
   word ("include a, b, and c") do not split.
4. Subject carry-over. Chinese: a later clause that opens with a predicate word (由 于 被 在
   广泛 可以 能 应该 是 用于 也 还 都 已 将 …), or followed 并/并且/且/还, gets the subject of
   the sentence's first clause (its text before the first 是 由 于 包括 应该 可以 能 会 有 在
   被 用于 广泛 …). Unlike the brief, other conjunctions (而且 同时 和 以及) carry nothing: they
   often bring their own subject ("而且Java也是语言"). English: a later clause that opens
   with an auxiliary (is/was/can/has …) gets the words before the first clause's first
   auxiliary. Pronouns ("it is …") are left as they are: resolving them is the LLM's job.
5. Enumeration: "PREFIX A、B和C" (also 及 以及, ", and", " as well as ") where PREFIX ends in
   a list word (包括 包含 有 用于 如 例如 应该 可以 …, include/including/such as/like/for;
   the last one before the first item separator) gives "PREFIX A", "PREFIX B", "PREFIX C",
   each with its item's span. No expansion without a list word ("Tom and Jerry"), for an
   "or"/或 list, or when an item looks like a clause (an auxiliary, a leading pronoun, 是).
6. A claim under ``min_chars`` (non-space, non-punctuation characters; a CJK character
   counts 1) is dropped unless it is the answer's only fragment ("42"). Exact duplicates go.

A rule claim's span is the clause or list item it came from: the claim text may add a
carried subject or a list prefix that the span does not contain.
"""

from __future__ import annotations

import json
import re
import unicodedata

from workbench.claims.types import LLM, Claim
from workbench.models.structured import string_list_schema

DECOMPOSERS = ("rule", "llm", "hybrid")

CLAIMS_SCHEMA = string_list_schema("claims")

_SYSTEM = (
    "Break the answer into short atomic factual claims, each understandable on its own: one fact "
    "per claim, a complete statement with its subject spelled out (replace a pronoun such as "
    "\"it\" or \"它\" with what it refers to). Write in the language of the answer and keep its "
    "wording. Add nothing the answer does not state: no explanations, no opinions. Keep a "
    "condition together with the statement it conditions. The user message is the answer. "
    'Reply with JSON: {"claims": ["...", "..."]}.'
)

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_SENT_END = re.compile(r"[。！？!?]+|\.+(?=\s|$)|\n+")
_ABBREVIATIONS = {"e.g", "i.e", "vs", "mr", "mrs", "ms", "dr", "prof", "jr", "sr", "cf"}
_BULLET = re.compile(r"(?:[-*]+\s+|[•·]\s*|[(（]?\d{1,2}[.)）、](?!\d)\s*)")
# The separator before each clause: ；; are hard, commas may be re-joined for an English list.
_CLAUSE_SEP = re.compile(r"(?P<semi>[；;])|(?P<comma>，|,(?!\d)|(?<!\d),)"
                         r"|\s+(?=(?P<aswell>as well as\s)|while\s)", re.I)
_CONDITIONAL = re.compile(r"(?:如果|假如|假设|若(?!干)|要是|虽然|尽管|即使|因为|由于|只要|除非|一旦)"
                          r"|(?:if|when|whenever|because|although|though|unless|even if|even though)\b", re.I)
_CONJ = re.compile(r"(?P<vp>并且|并(?![非不没无])|且|还)|以及|同时|而且|和(?![平谐睦])"
                   r"|(?:and\s+also|as\s+well\s+as|and|while|also)\b", re.I)
# An English conjunction that, after a comma, may open a clause; and a Chinese sentence's
# leading time or place phrase, which a comma does not make a clause of its own.
_EN_CLAUSE_CONJ = re.compile(r"(?:and|but|yet|so|whereas|while)(?=\s)", re.I)
_ZH_LEADING = re.compile(r"(?:在|于|从|自从|当|对于|关于|根据|随着|除了|作为|截至)[^是有\s]{1,10}"
                         r"|[^是有\s]{0,10}(?:年|月|日|时|后|以后|之后|以前|之前|期间|以来|时候)")
_ZH_SUBJECT_END = re.compile(r"是|由|于|包括|包含|应该|应|可以|可|能|会|有|在|被|用于|广泛|将|已|也|都")
_ZH_PREDICATE_START = re.compile(
    r"由|于|被|在|广泛|可以|可|能够|能|应该|应|是|用于|也|还|都|已经|已|将|会|主要|通常|常|具有|有|包括"
    r"|不|没有|需要|必须|同样|仍|一直|曾")
_EN_AUX = re.compile(r"\b(?:is|are|was|were|has|have|had|can|could|will|would|may|might|must|should|shall"
                     r"|does|do|did)\b", re.I)
_EN_PRONOUN = re.compile(r"(?:it|he|she|they|we|i|you|this|that|these|those|there)\b", re.I)
_EN_LIST = r"\b(?:includes?|included|including|such as|like|for)\b"
_EN_LIST_WORD = re.compile(_EN_LIST, re.I)
_LIST_WORD = re.compile(r"包括|包含|含有|涵盖|用于|用来|例如|比如|诸如|如|应该|应|可以|能够|能|需要|有|" + _EN_LIST, re.I)
_ITEM_SEP = re.compile(r"\s*(?:,(?!\d)|(?<!\d),)\s*(?:(?:and|as well as)\s+)?|\s+(?:and|as well as)\s+|、|以及"
                       r"|(?<![温总柔缓共饱调平融])和(?![平谐睦])|(?<![涉普波危提以])及(?![时其])", re.I)
_ITEM_TAIL = re.compile(r"(?:,?\s*etc\.?|等等|等)$", re.I)


def _size(text: str) -> int:
    """Non-space, non-punctuation characters: a CJK character and a Latin letter count 1."""
    return sum(1 for ch in text if not ch.isspace() and unicodedata.category(ch)[0] != "P")


def _join(head: str, tail: str) -> str:
    """``head`` + ``tail``, with a space only between two Latin/digit characters."""
    if not head:
        return tail
    gap = " " if head[-1].isascii() and head[-1].isalnum() and tail[:1].isascii() and tail[:1].isalnum() else ""
    return head + gap + tail


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (stops, line breaks, bullets), trimmed, as the rule decomposer splits them."""
    return [text[a:b] for a, b in _sentences(text)]


def _sentences(answer: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _SENT_END.finditer(answer):
        if m.group()[0] == ".":
            before = answer[start:m.start()]
            word = before.rsplit(None, 1)[-1].lstrip("([\"'") if before.strip() else ""
            # A bullet number ("1. ") or an abbreviation/initial does not end a sentence.
            if word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isupper()) or \
                    (m.end() < len(answer) and re.fullmatch(r"\s*\d{1,2}", before)):
                continue
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(answer)))
    out = []
    for a, b in spans:
        a, b = _trim(answer, a, b)
        if m := _BULLET.match(answer, a, b):
            a = m.end()
        if a < b:
            out.append((a, b))
    return out


def _item_like(text: str) -> bool:
    """A short English noun phrase, as in a comma list: no CJK, ≤ 4 words, no verb, no pronoun."""
    text = re.sub(r"^(?:and|or|as well as)\s+", "", text.strip(), flags=re.I)
    return (0 < len(text.split()) <= 4 and not re.search(f"[{_CJK}]", text)
            and not _EN_AUX.search(text) and not _EN_PRONOUN.match(text))


def _comma_splits(answer: str, i: int, e: int, lead: str | None) -> bool:
    """Whether the comma at ``i`` ends a clause (rule 3); ``lead`` is the sentence's text before it when
    no clause ended there yet, else ``None``. The sentence ends at ``e``."""
    after = answer[i + 1:e].lstrip()
    before = answer[:i].rstrip()[-1:]
    if answer[i] == "，" or re.search(f"[{_CJK}]", before + after[:1]):
        return not (after.startswith("或") or (lead is not None and _ZH_LEADING.fullmatch(lead.strip())))
    if m := _EN_CLAUSE_CONJ.match(after):
        return not _item_like(after[m.end():])     # ", and plums" ends a list; ", and it is" is a clause
    return bool(_CONDITIONAL.match(after) or _EN_AUX.match(after))


def _clauses(answer: str, s: int, e: int) -> list[tuple[int, int, bool]]:
    """The clauses of one sentence as (start, end, led by 并/并且/且/还), conjunctions dropped."""
    raw, pos, kind = [], s, None
    for m in _CLAUSE_SEP.finditer(answer, s, e):
        lead = answer[s:m.start()] if pos == s else None
        if m.lastgroup == "comma" and not _comma_splits(answer, m.start(), e, lead):
            continue                    # the comma stays inside its clause
        raw.append((pos, m.start(), kind))
        pos, kind = m.end(), m.lastgroup or "while"
    raw.append((pos, e, kind))
    merged, i = [], 0
    while i < len(raw):
        a, b, kind = raw[i]
        end = i
        if _EN_LIST_WORD.search(answer, a, b):
            # "include A, B, and C": the list's commas are not clause breaks.
            for j in range(i + 1, len(raw)):
                ja, jb, jkind = raw[j]
                item = answer[ja:jb].strip()
                if jkind not in ("comma", "aswell") or not _item_like(item):
                    break
                if jkind == "aswell" or re.match(r"(?:and|or)\s", item, re.I) or re.search(r"\s(?:and|or)\s", item):
                    end = j
                    break
        merged.append((a, raw[end][1]))
        i = end + 1
    out = []
    for a, b in merged:
        a, b = _trim(answer, a, b)
        m = _CONJ.match(answer, a, b)
        if m:                           # a clause that is only a conjunction ("Also,") goes
            a = m.end()
            while a < b and answer[a] in " \t,，":
                a += 1
            a, b = _trim(answer, a, b)
        if a < b:
            out.append((a, b, bool(m and m.group("vp"))))
    return out


def _subject(first: str, english: bool) -> str:
    """The subject of a sentence's first clause: its text before the first predicate marker."""
    m = (_EN_AUX if english else _ZH_SUBJECT_END).search(first)
    subject = first[:m.start()].strip() if m else ""
    if english:
        return subject if 0 < len(subject.split()) <= 6 and not re.search(f"[{_CJK}]", subject) else ""
    return subject if 0 < len(subject) <= 20 else ""


def _expand(answer: str, a: int, b: int) -> list[tuple[str, int, int]]:
    """The enumeration of one clause as ("PREFIX item", item span), or the clause itself."""
    text, whole = answer[a:b], [(answer[a:b], a, b)]
    first = _LIST_WORD.search(text)
    sep = _ITEM_SEP.search(text, first.end()) if first else None
    if not sep:
        return whole
    word = list(_LIST_WORD.finditer(text, 0, sep.start()))[-1]
    rest = text[word.end():]
    if re.search(r"\bor\b|或", rest, re.I):
        return whole                    # a disjunction is not a set of claims
    bounds, pos = [], word.end()
    for m in _ITEM_SEP.finditer(text, word.end()):
        bounds.append((pos, m.start()))
        pos = m.end()
    bounds.append((pos, len(text)))
    items = []
    for i, (ia, ib) in enumerate(bounds):
        ia, ib = _trim(text, ia, ib)
        if i == len(bounds) - 1 and (tail := _ITEM_TAIL.search(text, ia, ib)):
            ia, ib = _trim(text, ia, tail.start())
        item = text[ia:ib]
        if not item or _EN_AUX.search(item) or _EN_PRONOUN.match(item) or "是" in item:
            return whole
        items.append((item, a + ia, a + ib))
    prefix = text[:word.end()].rstrip(" ：:")
    return [(_join(prefix, item), ia, ib) for item, ia, ib in items]


def rule_claims(answer: str, *, min_chars: int = 4) -> list[Claim]:
    """Split ``answer`` into claims by the rules of this module's docstring (``source="rule"``)."""
    pieces: list[tuple[str, int, int]] = []
    for s, e in _sentences(answer):
        clauses = _clauses(answer, s, e)
        if not clauses:                 # only separators and conjunctions (",")
            continue
        if any(_CONDITIONAL.match(answer, a, b) for a, b, _ in clauses):
            pieces.append((answer[s:e], s, e))
            continue
        first = answer[clauses[0][0]:clauses[0][1]]
        for k, (a, b, vp_led) in enumerate(clauses):
            subject = ""
            if k and _EN_AUX.match(answer, a, b):
                subject = _subject(first, english=True)
            elif k and (vp_led or _ZH_PREDICATE_START.match(answer, a, b)):
                subject = _subject(first, english=False)
            pieces.extend((_join(subject, text), ia, ib) for text, ia, ib in _expand(answer, a, b))
    claims, seen = [], set()
    for text, a, b in pieces:
        if (len(pieces) > 1 and _size(text) < min_chars) or text in seen:
            continue
        seen.add(text)
        claims.append(Claim(text, a, b, "rule"))
    return claims


def claims_messages(text: str) -> list[dict[str, str]]:
    """The chat messages of one LLM decomposition: the instructions, then the text itself."""
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": text}]


def parse_claims(output: str) -> list[str]:
    """The claim strings of a model output: stripped, non-empty, deduplicated in order.

    Valid JSON ``{"claims": [...]}`` (or a bare list) is read as is, non-strings dropped.
    Output cut off by ``max_tokens`` is not valid JSON: the complete items of the list are
    kept and the item that was cut off is lost.
    """
    try:
        data = json.loads(output)
    except ValueError:
        data = None
    items = data.get("claims") if isinstance(data, dict) else data if isinstance(data, list) else \
        _complete_items(output)
    out: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str) and item.strip() and item.strip() not in out:
            out.append(item.strip())
    return out


def _complete_items(output: str) -> list:
    m = re.search(r'"claims"\s*:\s*\[', output) or re.search(r"\[", output)
    if not m:
        return []
    decoder, pos, items = json.JSONDecoder(), m.end(), []
    while True:
        while pos < len(output) and output[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(output) or output[pos] == "]":
            return items
        try:
            value, pos = decoder.raw_decode(output, pos)
        except ValueError:
            return items                # the item the cut-off interrupted
        items.append(value)


def _normalized(text: str) -> tuple[str, list[int]]:
    """NFKC + casefold of ``text``, with each output character's index in ``text``."""
    chars, index = [], []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch).casefold():
            chars.append(c)
            index.append(i)
    return "".join(chars), index


def _locate(needle: str, hay: str, after: int = 0) -> tuple[int, int] | None:
    """Where ``needle`` is in ``hay``: exactly (from ``after``, then from 0), else NFKC/case-insensitively."""
    for start in (after, 0):
        i = hay.find(needle, start)
        if i >= 0:
            return i, i + len(needle)
    norm, index = _normalized(hay)
    target = _normalized(needle)[0]
    i = norm.find(target) if target else -1
    return (index[i], index[i + len(target) - 1] + 1) if i >= 0 else None


def llm_claims(answer: str, llm: LLM, *, max_tokens: int = 160, window: int = 200) -> list[Claim]:
    """Decompose ``answer`` with grammar-constrained model calls (``source="llm"``): one call for an
    answer of up to ``window`` characters, else one per run of whole sentences of up to ``window``.

    A paragraph asked at once overruns ``max_tokens`` and a small model loses its way in it;
    a few sentences at a time it does neither (and a pronoun still finds its noun in the
    sentence before), and each call is cached on its own. A claim's span is where its text
    occurs in its part (searched forward from the previous claim first, so a repeated phrase
    maps to its next occurrence), else where it occurs up to NFKC and case, else ``None``. A
    part the model gives no usable claim for becomes one claim, the part itself; an empty
    answer gives ``[]`` without calling the model.
    """
    if not answer.strip():
        return []
    parts = [_trim(answer, 0, len(answer))] if len(answer) <= window else _windows(answer, window)
    claims: list[Claim] = []
    for a, b in parts:
        # A short answer is asked whole, as it always was (the same prompt, the same cache key).
        texts = _llm_texts(answer if len(parts) == 1 else answer[a:b], llm, max_tokens)
        if not texts:
            claims.append(Claim(answer[a:b], a, b, "llm"))
            continue
        after = a
        for text in texts:
            span = _locate(text, answer[:b], after)
            start, end = span or (None, None)
            after = end if end is not None else after
            claims.append(Claim(text, start, end, "llm"))
    return claims


def _windows(answer: str, window: int) -> list[tuple[int, int]]:
    """The answer's sentences (each with its full stop), consecutive ones merged into spans of up to
    ``window`` characters (a longer sentence alone)."""
    out: list[tuple[int, int]] = []
    for a, b in _sentences(answer):
        while b < len(answer) and answer[b] in "。！？!?.":
            b += 1
        if out and b - out[-1][0] <= window:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _llm_texts(text: str, llm: LLM, max_tokens: int) -> list[str]:
    call = llm.ask(claims_messages(text), max_tokens=max_tokens, schema=CLAIMS_SCHEMA)
    return parse_claims(call.text)


def _dedup_key(text: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold()
                   if not ch.isspace() and unicodedata.category(ch)[0] != "P")


def hybrid_claims(answer: str, llm: LLM, *, long_clause: int = 40, min_chars: int = 4,
                  max_tokens: int = 160) -> list[Claim]:
    """Rule claims, with each one longer than ``long_clause`` characters re-decomposed by the model.

    Length is ``len`` of the claim text (a CJK character and a Latin character, space
    included, count 1). The model's claims replace the long one, each with its own span
    when its text is found inside the long claim's span, else with the long claim's span.
    A long claim the model gives nothing usable for is kept. Finally duplicates are dropped
    in order, compared after NFKC, case folding and removing spaces and punctuation.
    """
    out: list[Claim] = []
    for claim in rule_claims(answer, min_chars=min_chars):
        texts = _llm_texts(claim.text, llm, max_tokens) if len(claim.text) > long_clause else []
        if not texts:
            out.append(claim)
            continue
        source = answer[claim.start:claim.end]
        for text in texts:
            span = _locate(text, source)
            start, end = (claim.start + span[0], claim.start + span[1]) if span else (claim.start, claim.end)
            out.append(Claim(text, start, end, "llm"))
    seen, unique = set(), []
    for claim in out:
        if (key := _dedup_key(claim.text)) not in seen:
            seen.add(key)
            unique.append(claim)
    return unique


def decompose(answer: str, method: str, llm: LLM | None = None, **kw) -> list[Claim]:
    """Decompose ``answer`` with ``method`` (one of :data:`DECOMPOSERS`); ``kw`` goes to that function.

    Raises ``ValueError`` for an unknown method, or for ``llm``/``hybrid`` without ``llm``.
    """
    if method not in DECOMPOSERS:
        raise ValueError(f"decomposer {method!r} is not one of {', '.join(DECOMPOSERS)}")
    if method == "rule":
        return rule_claims(answer, **kw)
    if llm is None:
        raise ValueError(f"the {method} decomposer needs an LLM")
    return (llm_claims if method == "llm" else hybrid_claims)(answer, llm, **kw)
