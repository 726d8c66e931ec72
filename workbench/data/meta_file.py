"""Reading RAGChecker's meta-evaluation files: its human preference labels and its baselines' scores,
parsed strictly and checked, every problem named as ``file:line: field: reason`` (the line where
the offending entry starts). Pure: :mod:`workbench.data.meta_import` stores what is read here.

The human file (RAGChecker's ``data/meta_evaluation/human_labeled_data.json``) is a JSON array
with one entry per (instance, annotator)::

    [{"instance_id": int | str, "dataset": str, "query_id": str, "query": str, "gt_answer": str,
      "model1": {"model_name": str, "response": str}, "model2": {...},
      "correctness_label": int, "completeness_label": int, "overall_label": int}, ...]

each label an integer from -2 (model1's response much better) to 2 (model2's much better). An
instance's annotators are told apart by their order among its entries (RAGChecker's
``meta_eval.py`` reads entries 2i and 2i+1 as instance i's two annotators), so an instance has
an even number of entries, and they agree on the query, the reference, the systems and the
responses. ``instance_id`` is compared as a string: ``0`` and ``"0"`` are one instance.

A baseline file (``baseline_ragchecker.json``, ``baseline_bertscore.json``...) is an array with
one entry per instance: its ``instance_id`` and, under ``model1`` and ``model2``, one object per
evaluator holding that evaluator's scores of the response (``model1.ragchecker.overall_label``).
A score is a number, or null (or NaN, which Python's ``json`` writes) for one that is undefined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.data.errors import InputRejected, Problem, ProblemLog
from workbench.data.fields import check_label_name, check_str, json_type
from workbench.data.json_document import entry_lines, parse_document

LABELS = ("correctness", "completeness", "overall")
#: The scorer name `meta run` stores its whole-answer similarity under (workbench.meta.run.SIMILARITY).
RESERVED_EVALUATOR = "similarity"
SIDES = ("model1", "model2")
#: What the entries of one instance must agree on (the labels are each annotator's own).
SHARED_FIELDS = ("query", "gt_answer", "dataset", "query_id", "model1.model_name", "model1.response",
                 "model2.model_name", "model2.response")
HUMAN_SHAPE = ("expected RAGChecker's human_labeled_data.json: [{instance_id, query, gt_answer, model1, model2, "
               "correctness_label, completeness_label, overall_label}, ...]")
BASELINE_SHAPE = "expected a baseline's scores: [{instance_id, model1: {EVALUATOR: {METRIC: score}}, model2: ...}, ...]"

_BAD = object()   # a field found bad (already reported): left out of the comparisons


@dataclass(frozen=True)
class Annotation:
    """One annotator's labels of an instance: the entry ``$[index]``, starting at ``line``."""

    index: int
    line: int
    labels: tuple[int, int, int]      # the values of LABELS, each -2..2


@dataclass(frozen=True)
class Instance:
    """A query, its reference answer, two systems' responses and every annotator's labels of the pair."""

    instance_id: str
    index: int                        # its first entry, $[index]
    line: int
    dataset: str | None
    query_id: str | None
    query: str
    gt_answer: str
    systems: tuple[str | None, str | None]    # model1's and model2's model_name
    responses: tuple[str, str]
    annotations: tuple[Annotation, ...]


Metric = tuple[str, str]              # (evaluator, metric), e.g. ("ragchecker", "overall_label")


@dataclass(frozen=True)
class Baseline:
    """One baseline file's scores: per instance id and metric, model1's and model2's (None: undefined)."""

    file: str
    metrics: tuple[Metric, ...]       # in order of first appearance
    scores: dict[str, dict[Metric, tuple[float | None, float | None]]] = field(default_factory=dict)


@dataclass(frozen=True)
class MetaFiles:
    """A human file's instances (in order of first appearance) and the baselines that score them."""

    instances: list[Instance]
    baselines: list[Baseline]


def read_meta(human: tuple[bytes, str], baselines: Sequence[tuple[bytes, str]] = ()) -> MetaFiles:
    """Parse and check a human file and its baseline files, each given as ``(content, name shown)``.

    Raises :class:`InputRejected` naming ``file:line: field: reason`` for every problem found
    (up to the importers' limit): the human file's first, then every baseline's together.
    """
    instances = read_human(*human)
    by_id = {inst.instance_id: inst for inst in instances}
    log = ProblemLog()
    taken: dict[Metric, str] = {}
    read = []
    for data, display in baselines:
        try:
            read.append(read_baseline(data, display, by_id, human[1], taken=taken))
        except InputRejected as exc:
            for p in exc.problems:
                log.add(p.file, p.line, p.field, p.reason)
    log.raise_if_any()
    return MetaFiles(instances, read)


# -- the human file -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    index: int
    line: int
    instance_id: str
    shared: dict[str, Any]                # SHARED_FIELDS' values (_BAD where bad)
    labels: tuple[int, int, int] | None   # None when any is bad


def read_human(data: bytes, display: str) -> list[Instance]:
    """The instances of a human file, in order of first appearance; :class:`InputRejected` if bad."""
    text, doc = parse_document(data, display)
    entries = _entries(doc, display, HUMAN_SHAPE)
    lines = entry_lines(text)
    log = ProblemLog()
    groups: dict[str, list[_Entry]] = {}
    unknown = 0                 # entries of no known instance (their problems logged)
    for i, rec in enumerate(entries):
        entry = _human_entry(log, display, i, lines[i], rec)
        if entry is None:
            unknown += 1
        else:
            groups.setdefault(entry.instance_id, []).append(entry)
    for iid, group in groups.items():
        first = group[0]
        for e in group[1:]:
            for fld in SHARED_FIELDS:
                mine, theirs = e.shared[fld], first.shared[fld]
                if mine is not _BAD and theirs is not _BAD and mine != theirs:
                    log.add(display, e.line, f"$[{e.index}].{fld}", f"differs from instance {iid}'s first entry "
                                                                     f"($[{first.index}], line {first.line})")
        if len(group) % 2 and not unknown:     # an entry of unknown instance may be its pair
            last = group[-1]
            log.add(display, last.line, f"$[{last.index}].instance_id",
                    f"instance {iid} has {len(group)} entries ({', '.join(f'$[{e.index}]' for e in group[:4])}"
                    f"{', ...' if len(group) > 4 else ''}): annotators come in pairs, entries 2i and 2i+1 "
                    "(an even number of entries per instance)")
    log.raise_if_any()
    return [_instance(iid, group) for iid, group in groups.items()]


def _instance(iid: str, group: list[_Entry]) -> Instance:
    s = group[0].shared
    return Instance(iid, group[0].index, group[0].line, s["dataset"], s["query_id"], s["query"], s["gt_answer"],
                    (s["model1.model_name"], s["model2.model_name"]), (s["model1.response"], s["model2.response"]),
                    tuple(Annotation(e.index, e.line, e.labels) for e in group))


def _human_entry(log: ProblemLog, display: str, i: int, line: int, rec: Any) -> _Entry | None:
    """One ``$[i]``, checked field by field; None when its instance is unknown (the problems logged)."""
    base = f"$[{i}]"
    if not isinstance(rec, dict):
        log.add(display, line, base, f"expected an object, got {json_type(rec)}")
        return None
    ok = True

    def bad(fld: str, reason: str) -> object:
        nonlocal ok
        log.add(display, line, f"{base}.{fld}", reason)
        ok = False
        return _BAD

    iid = _instance_id(rec, bad)
    shared: dict[str, Any] = {}
    for fld in ("query", "gt_answer"):
        shared[fld] = bad(fld, "missing") if fld not in rec else \
            bad(fld, found[1]) if (found := check_str(rec[fld])) else rec[fld]
    shared["dataset"] = _optional_str(rec, "dataset", bad)
    shared["query_id"] = _optional_str(rec, "query_id", bad, ints=True)
    for side in SIDES:
        shared[f"{side}.model_name"], shared[f"{side}.response"] = _side(rec, side, bad)
    labels = []
    for label in LABELS:
        fld = f"{label}_label"
        value = rec.get(fld)
        if fld not in rec:
            bad(fld, "missing")
        elif isinstance(value, bool) or not isinstance(value, int):
            bad(fld, f"expected an integer from -2 to 2, got {value!r}" if isinstance(value, float)
                else f"expected an integer from -2 to 2, got {json_type(value)}")
        elif not -2 <= value <= 2:
            bad(fld, f"expected an integer from -2 to 2, got {value}")
        else:
            labels.append(value)
    if iid is _BAD:
        return None
    return _Entry(i, line, iid, shared, tuple(labels) if ok else None)


def _side(rec: dict, side: str, bad) -> tuple[Any, Any]:
    """``(model_name, response)`` of ``model1`` or ``model2`` (``_BAD`` for what is bad)."""
    if side not in rec:
        return bad(side, "missing"), _BAD
    model = rec[side]
    if not isinstance(model, dict):
        return bad(side, f'expected an object {{"model_name", "response"}}, got {json_type(model)}'), _BAD
    name = _optional_str(model, "model_name", lambda fld, reason: bad(f"{side}.{fld}", reason))
    if "response" not in model:
        return name, bad(f"{side}.response", "missing")
    if not isinstance(model["response"], str):
        # An empty response is a legitimate (wrong) answer, as in `predictions import`.
        return name, bad(f"{side}.response", f"expected a string, got {json_type(model['response'])}")
    return name, model["response"]


def _optional_str(rec: dict, fld: str, bad, *, ints: bool = False) -> Any:
    """A string field that may be missing or null (None); an integer too (as its string) with ``ints``."""
    value = rec.get(fld)
    if value is None:
        return None
    if ints and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if found := check_str(value):
        return bad(fld, found[1].replace("a string", "a string (or null)"))
    return value


def _instance_id(rec: dict, bad) -> Any:
    """The entry's ``instance_id`` as a string (an integer is its decimal string)."""
    if "instance_id" not in rec:
        return bad("instance_id", "missing")
    value = rec["instance_id"]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and not check_str(value):
        return value
    return bad("instance_id", "expected an integer or a non-blank string, got "
               + (repr(value) if isinstance(value, str) else json_type(value)))


def _entries(doc: Any, display: str, shape: str) -> list:
    if not isinstance(doc, list):
        raise InputRejected([Problem(display, 1, "$", f"{shape}, got {json_type(doc)}")])
    if not doc:
        raise InputRejected([Problem(display, 1, "$", "must not be empty")])
    return doc


# -- a baseline file ----------------------------------------------------------------------------
def read_baseline(data: bytes, display: str, instances: dict[str, Instance], human: str, *,
                  taken: dict[Metric, str] | None = None) -> Baseline:
    """A baseline file's scores of the ``instances`` (by id) read from the human file ``human``.

    ``taken`` maps each (evaluator, metric) already given by another baseline file to that
    file's name: a metric comes from one file (this one's are added to it once it is read).
    """
    text, doc = parse_document(data, display, constants_as_null=True)
    entries = _entries(doc, display, BASELINE_SHAPE)
    lines = entry_lines(text)
    log = ProblemLog()
    taken = {} if taken is None else taken
    first_at: dict[str, int] = {}
    metrics: dict[Metric, tuple[int, str]] = {}     # each metric -> (line, field) where first seen
    read: list[tuple[int, str, list[dict[Metric, float | None]]]] = []
    for i, rec in enumerate(entries):
        line, base = lines[i], f"$[{i}]"
        if not isinstance(rec, dict):
            log.add(display, line, base, f"expected an object, got {json_type(rec)}")
            continue
        ok = True

        def bad(fld: str, reason: str, line=line, base=base) -> object:
            nonlocal ok
            log.add(display, line, f"{base}.{fld}", reason)
            ok = False
            return _BAD

        iid = _instance_id(rec, bad)
        inst = None
        if iid is not _BAD:
            inst = instances.get(iid)
            if inst is None:
                bad("instance_id", f"instance {iid} is not in {human} (no human labels for it)")
            elif iid in first_at:
                j = first_at[iid]
                bad("instance_id", f"duplicate instance {iid} (first at $[{j}], line {lines[j]})")
                inst = None
            else:
                first_at[iid] = i
        sides = []
        for s, side in enumerate(SIDES):
            model = rec.get(side)
            if not isinstance(model, dict):
                bad(side, "missing" if side not in rec else
                    f"expected an object {{EVALUATOR: {{METRIC: score}}}}, got {json_type(model)}")
                continue
            if inst is not None:
                _same_response(model, side, inst, s, human, bad)
            got = _scores(model, side, bad)
            for m in got:
                metrics.setdefault(m, (line, f"{base}.{side}.{m[0]}.{m[1]}"))
            sides.append(got)
        if ok and inst is not None:
            read.append((i, iid, sides))
    for m, (line, fld) in metrics.items():
        if m in taken:
            log.add(display, line, fld, f"also scored by {taken[m]} (an evaluator's metric comes from one "
                                        "baseline file)")
    for i, iid, sides in read:
        for side, got in zip(SIDES, sides):
            for m in metrics:
                if m not in got:
                    log.add(display, lines[i], f"$[{i}].{side}.{m[0]}.{m[1]}",
                            f"missing (this file scores it elsewhere, first at {metrics[m][1]}, line {metrics[m][0]})")
    log.raise_if_any()
    taken.update(dict.fromkeys(metrics, display))
    return Baseline(display, tuple(metrics), {iid: {m: (sides[0][m], sides[1][m]) for m in metrics}
                                              for _, iid, sides in read})


def _same_response(model: dict, side: str, inst: Instance, s: int, human: str, bad) -> None:
    """A baseline scores the human file's responses: a response or system it names must be the same."""
    for fld, mine in (("response", inst.responses[s]), ("model_name", inst.systems[s])):
        value = model.get(fld)
        if value is not None and value != mine:
            bad(f"{side}.{fld}", f"differs from instance {inst.instance_id}'s in {human} (line {inst.line}): "
                                 "these scores would be of another response")


def _scores(model: dict, side: str, bad) -> dict[Metric, float | None]:
    """Every ``side.EVALUATOR.METRIC`` score of one response (None: undefined)."""
    out: dict[Metric, float | None] = {}
    evaluators = 0
    for evaluator, scores in model.items():
        if not isinstance(scores, dict):
            continue            # model_name, response, critiques...
        evaluators += 1
        if found := check_label_name(evaluator):
            bad(f"{side}[{evaluator!r}]", f"an evaluator's name: {found[1]}")
        elif evaluator == RESERVED_EVALUATOR:
            bad(f"{side}[{evaluator!r}]", "a name `meta run` keeps for its whole-answer similarity: rename the "
                                          "evaluator")
            continue
        for metric, value in scores.items():
            if found := check_label_name(metric):
                bad(f"{side}.{evaluator}[{metric!r}]", f"a metric's name: {found[1]}")
            elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                bad(f"{side}.{evaluator}.{metric}", f"expected a number or null (undefined), got {json_type(value)}")
            else:
                out[evaluator, metric] = None if value is None or not math.isfinite(value) else float(value)
    if not evaluators:
        bad(side, f"no scores (expected {side}.EVALUATOR.METRIC: a number or null)")
    return out
