"""Tokenizers for lexical retrieval (BM25).

These are *not* the evidence-budget tokenizers in ``workbench.evidence``: they
exist only to turn corpus text and queries into index terms.

Modes
-----
``"jieba"``
    Chinese word segmentation with ``jieba.lcut_for_search`` (search mode).
    Search mode emits the precise-mode words *plus* their in-dictionary
    sub-words (``湖南家常红烧肉`` → ``湖南 家常 红烧 烧肉 红烧肉``), so a query
    for ``红烧肉`` still matches a document titled with a longer compound and
    vice versa.  The same mode is used for documents and queries, so the extra
    terms are symmetric.  Latin is lower-cased; whitespace/punctuation tokens
    are dropped.
``"bigram"``
    Dictionary-free: every run of CJK characters becomes its overlapping
    character bigrams (a run of one character becomes that unigram); Latin /
    digit words are kept whole and lower-cased.
``"en"``
    Lower-cased ``\\w+`` word tokens; optional small English stopword list.
``"auto"``
    ``detect_mode`` on the text(s): ``"jieba"`` when most letters are CJK,
    else ``"en"``.  An index resolves ``auto`` once, over the whole corpus,
    and then uses the resolved mode for queries too.

All modes apply Unicode NFKC first (full-width Latin/digits, compatibility
ideographs), matching how the workbench normalizes triples.
"""

from __future__ import annotations

import logging
import re
import unicodedata
import warnings
from typing import Iterable, Sequence

MODES = ("jieba", "bigram", "en", "auto")

# Han ideographs: CJK Unified (+ Ext. A), Compatibility, Ext. B-F and beyond.
_CJK_CLASS = (
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002ebef\U00030000-\U0003134f"
)
_CJK_RE = re.compile(f"[{_CJK_CLASS}]")
_CJK_RUN_OR_WORD_RE = re.compile(f"([{_CJK_CLASS}]+)|([^\\W{_CJK_CLASS}]+)")
_WORD_RE = re.compile(r"\w+")

EN_STOPWORDS = frozenset(
    """a an and are as at be by did do does for from had has have how i in is it
    its of on or that the their this to was were what when where which who whom
    whose why will with""".split()
)

_jieba = None


def _get_jieba():
    """Import jieba lazily, silence its startup logging, load the dictionary."""
    global _jieba
    if _jieba is None:
        # jieba imports pkg_resources, whose deprecation notice would be printed on every BM25
        # run: it is about jieba's packaging, not the user's data. Only that notice, only from jieba.
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning,
                                module="jieba")
        import jieba  # noqa: PLC0415 - heavy import, only when needed

        jieba.setLogLevel(logging.WARNING)
        logging.getLogger("jieba").setLevel(logging.WARNING)
        jieba.initialize()  # bundled dict.txt; no network access
        _jieba = jieba
    return _jieba


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _is_term(tok: str) -> bool:
    return any(ch.isalnum() for ch in tok)


def _tok_jieba(text: str) -> list[str]:
    jieba = _get_jieba()
    return [t.lower() for t in (s.strip() for s in jieba.lcut_for_search(text)) if t and _is_term(t)]


def _tok_bigram(text: str) -> list[str]:
    out: list[str] = []
    for m in _CJK_RUN_OR_WORD_RE.finditer(text):
        run, word = m.group(1), m.group(2)
        if run:
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            # \w minus CJK: Latin/digit/underscore and other scripts' letters
            for w in word.split("_"):
                if w:
                    out.append(w.lower())
    return out


def _tok_en(text: str, stopwords: bool) -> list[str]:
    toks = [t for w in _WORD_RE.findall(text.lower()) for t in w.split("_") if t]
    if stopwords:
        toks = [t for t in toks if t not in EN_STOPWORDS]
    return toks


def detect_mode(texts: Iterable[str] | str, *, sample: int = 2000, threshold: float = 0.5) -> str:
    """Return ``"jieba"`` if CJK characters are at least ``threshold`` of the
    letters (alphabetic characters) in the first ``sample`` texts, else ``"en"``."""
    if isinstance(texts, str):
        texts = [texts]
    cjk = letters = 0
    for i, t in enumerate(texts):
        if i >= sample:
            break
        for ch in t:
            if ch.isalpha():
                letters += 1
                if _CJK_RE.match(ch):
                    cjk += 1
    if letters == 0:
        return "en"
    return "jieba" if cjk / letters >= threshold else "en"


def tokenize(text: str, mode: str = "auto", *, stopwords: bool = False) -> list[str]:
    """Tokenize ``text`` for retrieval; see the module docstring for modes.

    ``stopwords`` drops a small English stopword list (``en`` mode only).
    """
    if mode not in MODES:
        raise ValueError(f"unknown tokenizer mode {mode!r}; expected one of {MODES}")
    text = _normalize(text)
    if mode == "auto":
        mode = detect_mode([text])
    if mode == "jieba":
        return _tok_jieba(text)
    if mode == "bigram":
        return _tok_bigram(text)
    return _tok_en(text, stopwords)


def tokenize_many(texts: Sequence[str], mode: str, *, stopwords: bool = False) -> list[list[str]]:
    """Tokenize many texts with one already-resolved mode (``auto`` resolved once)."""
    if mode == "auto":
        mode = detect_mode(texts)
    return [tokenize(t, mode, stopwords=stopwords) for t in texts]
