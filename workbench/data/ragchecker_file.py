"""Reading RAGChecker's JSON document: parsed strictly, each ``results[i]`` checked, every problem
named as ``file:line: field: reason`` (the line where that entry starts).

RAGChecker (amazon-science/RAGChecker, ``ragchecker/container.py``) reads one JSON document::

    {"results": [{"query_id": str, "query": str, "gt_answer": str, "response": str,
                  "retrieved_context": [{"doc_id": str (optional), "text": str}, ...]}, ...]}

Its *output* (a checking-outputs file) adds, per result, the claims and the checks RAGChecker
made (:data:`CHECK_FIELDS`): ``response_claims`` and ``gt_answer_claims`` (each claim a
triplet, a list of strings, or a string), ``answer2response`` (per response claim, its label
against the reference answer), ``response2answer`` (per reference claim, against the response),
``retrieved2response`` and ``retrieved2answer`` (per claim, one label per retrieved context),
labels being ``Entailment``, ``Neutral`` or ``Contradiction``; and ``metrics``, per result and
for the whole file. A result holds all six check fields or none, and so does every result of a
file; the shapes must agree with the claims and the contexts.

:mod:`workbench.data.ragchecker` imports what is read here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from workbench.data.errors import InputRejected, Problem, ProblemLog
from workbench.data.fields import check_str, json_type
from workbench.data.importer import count_noun
from workbench.data.json_document import EntryLines, parse_document


#: The fields of a RAGChecker output file that hold its claims and checks, all or none per result.
CHECK_FIELDS = ("response_claims", "gt_answer_claims", "answer2response", "response2answer", "retrieved2response",
                "retrieved2answer")
#: RAGChecker's labels and the workbench's letter of each.
CHECK_LABELS = {"Entailment": "E", "Neutral": "N", "Contradiction": "C"}


@dataclass(frozen=True)
class Checks:
    """The claims and checks of one result of a RAGChecker output file; labels as letters (E, N, C)."""

    response_claims: list[str]            # each triplet joined by spaces
    gt_answer_claims: list[str]
    answer2response: list[str]            # (I,)
    response2answer: list[str]            # (G,)
    retrieved2response: list[list[str]]   # (I, J)
    retrieved2answer: list[list[str]]     # (G, J)


@dataclass(frozen=True)
class Result:
    """One checked ``results[i]`` entry of a RAGChecker file."""

    index: int
    lines: EntryLines             # where results[index] starts, looked up only for a message
    query_id: str | None          # None only until read_results names it by position
    query: str
    gt_answer: str
    response: str
    contexts: list[tuple[str | None, str]]   # (doc_id or None, text), in the file's order
    checks: Checks | None = None             # an output file's claims and checks
    metrics: dict[str, float] | None = None  # an output file's own per-result figures (those that are numbers)

    @property
    def line(self) -> int:
        return self.lines[self.index]


def read_results(data: bytes, display: str) -> tuple[list[Result], list[str], dict[str, float]]:
    """Parse and check a RAGChecker document; return its results, the warnings and the file's own
    overall figures (``{metric: value}`` from its ``metrics`` groups, numbers only; empty if none).

    Raises :class:`InputRejected` naming ``file:line: field: reason`` for every problem found
    (up to the importers' limit). The JSON is decoded strictly as the JSONL importers decode a
    line: no repeated key, no lone surrogate, no nesting past the depth limit.
    """
    text, doc = parse_document(data, display, "results")
    if not isinstance(doc, dict):
        raise InputRejected([Problem(display, 1, "$", f'expected an object {{"results": [...]}}, got {json_type(doc)}')])
    if "results" not in doc:
        raise InputRejected([Problem(display, 1, "$.results", 'missing (RAGChecker\'s input is {"results": [...]})')])
    entries = doc["results"]
    if not isinstance(entries, list):
        raise InputRejected([Problem(display, 1, "$.results", f"expected an array, got {json_type(entries)}")])
    if not entries:
        raise InputRejected([Problem(display, 1, "$.results", "must not be empty")])
    lines = EntryLines(text, "results")
    log = ProblemLog()
    results: list[Result] = []
    first: dict[str, int] = {}
    unnamed = 0
    for i, rec in enumerate(entries):
        result = _check_entry(log, display, i, lines, rec)
        if result is None:
            continue
        unnamed += result.query_id is None
        qid = str(i) if result.query_id is None else result.query_id
        if qid in first:
            j = first[qid]
            log.add(display, lines[i], f"$.results[{i}].query_id",
                    f"duplicate query id {qid!r} (first at results[{j}], line {lines[j]})")
            continue
        first[qid] = i
        results.append(replace(result, query_id=qid))
    checked = [r for r in results if r.checks is not None]
    if checked and len(checked) < len(results):
        for r in results:
            if r.checks is None:
                log.add(display, r.line, f"$.results[{r.index}].{CHECK_FIELDS[0]}",
                        f"missing: {len(checked)} other results hold RAGChecker's claims and checks (all or none)")
    log.raise_if_any()
    warnings = []
    if unnamed:
        warnings.append(f"{count_noun(unnamed, 'result')} of {display} had no query_id: "
                        "named by position in results (0-based)")
    return results, warnings, _overall(doc.get("metrics"))


def _overall(metrics: Any) -> dict[str, float]:
    """The file's overall figures, flattened over RAGChecker's groups; anything not a number is left out."""
    out: dict[str, float] = {}
    if isinstance(metrics, dict):
        for group in metrics.values():
            if isinstance(group, dict):
                out.update({k: float(v) for k, v in group.items() if _number(v)})
    return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_entry(log: ProblemLog, display: str, i: int, lines: EntryLines, rec: Any) -> Result | None:
    """One ``results[i]``, checked field by field; None (with the problems logged) when bad."""
    base = f"$.results[{i}]"
    if not isinstance(rec, dict):
        log.add(display, lines[i], base, f"expected an object, got {json_type(rec)}")
        return None
    ok = True

    def bad(fld: str, reason: str) -> None:
        nonlocal ok
        log.add(display, lines[i], f"{base}.{fld}", reason)
        ok = False

    qid = rec.get("query_id")
    if qid is not None:
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        elif found := check_str(qid):
            bad("query_id", found[1].replace("a string", "a string (or null)"))
    for fld in ("query", "gt_answer"):
        if fld not in rec:
            bad(fld, "missing")
        elif found := check_str(rec[fld]):
            bad(fld, found[1])
    if "response" not in rec:
        bad("response", "missing")
    elif not isinstance(rec["response"], str):
        # An empty response is a legitimate (wrong) answer, as in `predictions import`.
        bad("response", f"expected a string, got {json_type(rec['response'])}")
    contexts: list[tuple[str | None, str]] = []
    ctx = rec.get("retrieved_context")
    if ctx is not None and not isinstance(ctx, list):
        bad("retrieved_context", f"expected an array of {{\"doc_id\", \"text\"}} (or null), got {json_type(ctx)}")
        ctx = None
    for j, item in enumerate(ctx or ()):
        where = f"retrieved_context[{j}]"
        if not isinstance(item, dict):
            bad(where, f'expected an object {{"doc_id", "text"}}, got {json_type(item)}')
            continue
        doc_id = item.get("doc_id")
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        elif doc_id is not None and (found := check_str(doc_id)):
            bad(f"{where}.doc_id", found[1].replace("a string", "a string (or null)"))
            continue
        if "text" not in item:
            bad(f"{where}.text", "missing")
            continue
        if found := check_str(item["text"]):
            bad(f"{where}.text", found[1])
            continue
        contexts.append((doc_id, item["text"]))
    checks = _check_checks(rec, len(contexts), bad) if ok else None
    if not ok:
        return None
    metrics = rec.get("metrics")
    metrics = {k: float(v) for k, v in metrics.items() if _number(v)} if isinstance(metrics, dict) else None
    return Result(i, lines, qid, rec["query"], rec["gt_answer"], rec["response"], contexts, checks, metrics)


def _check_checks(rec: dict, n_contexts: int, bad) -> Checks | None:
    """An output file's claims and checks of one result, their shapes checked; None when it has none."""
    present = [f for f in CHECK_FIELDS if rec.get(f) is not None]
    if not present:
        return None
    if len(present) < len(CHECK_FIELDS):
        missing = [f for f in CHECK_FIELDS if f not in present]
        bad(missing[0], f"missing: RAGChecker's checks come as {len(CHECK_FIELDS)} fields, this result has "
                        f"{', '.join(present)} but not {', '.join(missing)}")
        return None
    ok = True

    def fail(fld: str, reason: str) -> None:
        nonlocal ok
        bad(fld, reason)
        ok = False

    claims = {f: _claims(rec[f], f, fail) for f in ("response_claims", "gt_answer_claims")}
    n_claims = {"response_claims": len(claims["response_claims"]), "gt_answer_claims": len(claims["gt_answer_claims"])}
    flat = {}
    for fld, of in (("answer2response", "response_claims"), ("response2answer", "gt_answer_claims")):
        flat[fld] = _labels(rec[fld], fld, n_claims[of], f"one label per claim of {of}", fail)
    grid = {}
    for fld, of in (("retrieved2response", "response_claims"), ("retrieved2answer", "gt_answer_claims")):
        rows = rec[fld]
        if not isinstance(rows, list) or len(rows) != n_claims[of]:
            fail(fld, f"expected an array of {n_claims[of]} rows (one per claim of {of}), got "
                      + (f"{len(rows)}" if isinstance(rows, list) else json_type(rows)))
            continue
        grid[fld] = [_labels(row, f"{fld}[{g}]", n_contexts, "one label per retrieved context", fail)
                     for g, row in enumerate(rows)]
    if not ok:
        return None
    return Checks(claims["response_claims"], claims["gt_answer_claims"], flat["answer2response"],
                  flat["response2answer"], grid["retrieved2response"], grid["retrieved2answer"])


def _claims(value: Any, fld: str, fail) -> list[str]:
    """Claims as text: a triplet (or any list of strings) joined by spaces, or a string as it is."""
    if not isinstance(value, list):
        fail(fld, f"expected an array of claims, got {json_type(value)}")
        return []
    out = []
    for g, claim in enumerate(value):
        if isinstance(claim, str):
            parts = [claim]
        elif isinstance(claim, list) and all(isinstance(x, str) for x in claim):
            parts = claim
        else:
            fail(f"{fld}[{g}]", f"expected a claim (a triplet of strings, or a string), got {json_type(claim)}")
            continue
        text = " ".join(p.strip() for p in parts if p.strip())
        if not text:
            fail(f"{fld}[{g}]", "must not be empty")
            continue
        out.append(text)
    return out


def _labels(value: Any, fld: str, n: int, what: str, fail) -> list[str]:
    """``n`` RAGChecker labels as letters."""
    if not isinstance(value, list) or len(value) != n:
        fail(fld, f"expected an array of {n} labels ({what}), got "
                  + (f"{len(value)}" if isinstance(value, list) else json_type(value)))
        return []
    out = []
    for j, label in enumerate(value):
        letter = CHECK_LABELS.get(label) if isinstance(label, str) else None
        if letter is None:
            fail(f"{fld}[{j}]", f"expected one of {', '.join(CHECK_LABELS)}, got {label!r}"[:200])
            return []
        out.append(letter)
    return out
