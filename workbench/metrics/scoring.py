"""Answer scoring for English and Chinese answers (docs/design.md §3, "Score s").

Every per-sample scorer maps a raw model output and the sample's answer set (plus optional
aliases) to ``s`` in ``[0, 1]``:

- :func:`score_acc` — any-hit accuracy: the whole prediction, or any item of it, normalizes
  equal to an answer or an alias.
- :func:`score_cover` — cover-EM: a normalized answer or alias is a *substring* of the
  normalized prediction (useful for verbose small models; substring rather than word match
  so that Chinese, which has no spaces, works).
- :func:`score_set_f1` — F1 between the prediction parsed as a set and the answer set.

:func:`macro_f1` is corpus-level (multi-class tasks) and therefore not in :data:`SCORERS`.

Normalization (:func:`normalize_answer`) is NFKC (which also folds full-width forms such as
``ＡＢＣ１２３`` to ``ABC123``), lower-case, removal of every Unicode punctuation character
(categories ``P*``: ASCII punctuation and Chinese ``。，！？、「」《》`` alike), removal of the
English articles *a/an/the* as whole words, and whitespace collapsing. Answers or aliases that
normalize to the empty string never match anything.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from typing import Callable, Mapping, Sequence

__all__ = [
    "normalize_answer",
    "parse_prediction",
    "score_acc",
    "score_cover",
    "score_set_f1",
    "macro_f1",
    "SCORERS",
    "get_scorer",
]

_ARTICLES = frozenset({"a", "an", "the"})
# "|", ASCII and full-width semicolons, the Chinese enumeration comma, and line breaks.
# Commas are deliberately NOT separators: titles such as "Farewell, Home Sweet Home" hold them.
_SEPARATORS = re.compile(r"[|;；、\r\n]")


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def normalize_answer(s: str) -> str:
    """Normalize an answer or a prediction for comparison.

    >>> normalize_answer("The  Kismet!")
    'kismet'
    >>> normalize_answer("ＡＢＣ１２３")
    'abc123'
    >>> normalize_answer("《红烧肉》。")
    '红烧肉'
    """
    s = unicodedata.normalize("NFKC", s).lower()
    s = "".join(ch for ch in s if not _is_punct(ch))
    # Deleting punctuation can bring a letter and a combining mark together ("e.\u0301"),
    # and lower-casing can leave a non-NFKC string: normalize again so that the result is
    # a fixed point (normalize_answer(normalize_answer(x)) == normalize_answer(x)).
    s = unicodedata.normalize("NFKC", s).lower()
    return " ".join(w for w in s.split() if w not in _ARTICLES)


def parse_prediction(prediction: str) -> list[str]:
    """The prediction as a list of answers (order kept, duplicates dropped).

    A JSON list of strings (integers are accepted and turned into strings) is taken as is;
    anything else is split on ``|``, ``;``, ``；``, ``、`` and line breaks. Items are
    stripped and empty items dropped.

    >>> parse_prediction('["Paris", "Rome"]')
    ['Paris', 'Rome']
    >>> parse_prediction("Farewell, Home Sweet Home | Kismet\\nKismet")
    ['Farewell, Home Sweet Home', 'Kismet']
    """
    items: list[str] | None = None
    text = prediction.strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, list) and all(
            isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool)) for x in parsed
        ):
            items = [str(x) for x in parsed]
    if items is None:
        items = _SEPARATORS.split(prediction)
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        item = item.strip()
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _answer_groups(
    answers: Sequence[str], aliases: Mapping[str, Sequence[str]] | None
) -> list[frozenset[str]]:
    """One set of normalized surface forms per distinct answer (the answer and its aliases).

    Alias keys are matched to answers by normalized form. Empty normalized forms are dropped;
    an answer left with no form at all is still an answer (it counts in set-F1 recall) but
    can never be matched.
    """
    if isinstance(answers, str):
        raise TypeError("answers must be a sequence of strings, not a single string")
    alias_by_norm: dict[str, set[str]] = {}
    for key, values in (aliases or {}).items():
        if isinstance(values, str):
            values = [values]
        alias_by_norm.setdefault(normalize_answer(key), set()).update(
            normalize_answer(v) for v in values
        )
    groups: list[frozenset[str]] = []
    seen: set[str] = set()
    for answer in answers:
        norm = normalize_answer(answer)
        if norm in seen:
            continue
        seen.add(norm)
        forms = {norm} | alias_by_norm.get(norm, set())
        forms.discard("")
        groups.append(frozenset(forms))
    return groups


def score_acc(
    prediction: str,
    answers: Sequence[str],
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> float:
    """1.0 if the whole prediction or any parsed item equals an answer or alias (normalized)."""
    targets = set().union(*_answer_groups(answers, aliases))
    if not targets:
        return 0.0
    candidates = {normalize_answer(prediction)}
    candidates.update(normalize_answer(item) for item in parse_prediction(prediction))
    return 1.0 if candidates & targets else 0.0


def score_cover(
    prediction: str,
    answers: Sequence[str],
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> float:
    """1.0 if some normalized answer or alias is a substring of the normalized prediction."""
    pred = normalize_answer(prediction)
    for group in _answer_groups(answers, aliases):
        if any(form in pred for form in group):
            return 1.0
    return 0.0


def score_set_f1(
    prediction: str,
    answers: Sequence[str],
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> float:
    """F1 between the parsed prediction set and the answer set.

    A predicted item that matches an answer or one of its aliases counts as that answer, so
    ``"NYC | New York City"`` against ``["New York City"]`` with alias ``NYC`` is one correct
    item, not one correct plus one wrong. An empty prediction scores 0.0.
    """
    groups = _answer_groups(answers, aliases)
    predicted: set[object] = set()
    for item in parse_prediction(prediction):
        norm = normalize_answer(item)
        if not norm:
            continue
        match = next((j for j, g in enumerate(groups) if norm in g), None)
        predicted.add(("answer", match) if match is not None else ("other", norm))
    if not predicted or not groups:
        return 0.0
    tp = sum(1 for kind, _ in predicted if kind == "answer")  # type: ignore[misc]
    if tp == 0:
        return 0.0
    precision = tp / len(predicted)
    recall = tp / len(groups)
    return 2 * precision * recall / (precision + recall)


def macro_f1(predictions: Sequence[str], golds: Sequence[str]) -> float | None:
    """Corpus-level multi-class macro-F1.

    Labels are normalized with :func:`normalize_answer`. The classes are those appearing in
    the golds or the predictions; each class's F1 is ``2·TP / (2·TP + FP + FN)`` and the
    result is their unweighted mean. ``None`` for empty input.
    """
    if len(predictions) != len(golds):
        raise ValueError(
            f"macro_f1: {len(predictions)} predictions but {len(golds)} golds; they must align"
        )
    if not golds:
        return None
    preds = [normalize_answer(p) for p in predictions]
    gold = [normalize_answer(g) for g in golds]
    tp = Counter(p for p, g in zip(preds, gold) if p == g)
    n_pred = Counter(preds)
    n_gold = Counter(gold)
    classes = set(n_pred) | set(n_gold)
    # FP + FN = (n_pred - TP) + (n_gold - TP), so 2·TP + FP + FN = n_pred + n_gold.
    total = sum(2 * tp[c] / (n_pred[c] + n_gold[c]) for c in classes)
    return total / len(classes)


SCORERS: dict[str, Callable[..., float]] = {
    "acc": score_acc,
    "cover": score_cover,
    "set_f1": score_set_f1,
}


def get_scorer(name: str) -> Callable[..., float]:
    """The per-sample scorer called ``name``; ValueError naming the choices otherwise."""
    try:
        return SCORERS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown scorer {name!r}; choose one of: {', '.join(sorted(SCORERS))}"
        ) from None
