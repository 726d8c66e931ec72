"""Importing RAGChecker's input JSON: ``workbench import --from ragchecker FILE``.

RAGChecker (amazon-science/RAGChecker, ``ragchecker/container.py``) reads one JSON document::

    {"results": [{"query_id": str, "query": str, "gt_answer": str, "response": str,
                  "retrieved_context": [{"doc_id": str (optional), "text": str}, ...]}, ...]}

It becomes, in one transaction:

- a dataset of chunk units: the distinct retrieved texts, keyed by ``doc_id`` (a doc_id seen
  with several texts gives ``doc_id#1``, ``doc_id#2``, ... in order of first appearance, all
  with that doc_id as their parent; a context without doc_id is keyed by its text's hash);
- samples: ``query_id`` → id, ``query`` → question, ``gt_answer`` → the one answer; no gold
  paths (RAGChecker has none);
- the retrieval run ``ragchecker``: each query's contexts in the file's order (RAGChecker has
  no retrieval scores; they are stored as n, n−1, …, 1 so any sort by score keeps that order);
- a run of the same name with one cell: K = the most contexts of any query, B = the longest
  rendered evidence (so no window is cut), format ``score`` (the file's order); every event
  is done, its prediction the ``response``, scored with the run's scorer against gt_answer.

Without gold paths H_set and H_vis are 0 for every sample, so the ledger terms built on them
(:data:`NO_GOLD_TERMS`) say nothing about this run: the run's config names them
(``undefined_terms``) and carries a warning that the ledger prints. What does not need gold
paths is real: S_llm, K_eff, the evidence tokens, and every claim metric over the retrieved
contexts (``workbench claims run``).

Other fields (a RAGChecker *output* file's ``response_claims``, ``retrieved2response``,
``metrics``, ...) are ignored: the workbench does its own claim checking. A ``query_id`` that is
null or missing (RAGChecker's LlamaIndex integration writes null) is the result's 0-based
position, with a warning. Bad input is refused as ``file:line: field: reason``, the line being
where the offending ``results[i]`` entry starts, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench.data.errors import InputRejected, Problem, ProblemLog
from workbench.data.fields import check_name, check_source_path, check_str, json_type
from workbench.data.importer import ImportReport, claim_dataset_name, count_noun, name_taken
from workbench.data.jsonl import RecordRefused, decode_record
from workbench.errors import BadInput
from workbench.evidence import DEFAULT_TOKENIZER
from workbench.evidence.units import Unit, normalize_text
from workbench.metrics.scoring import get_scorer
from workbench.passes import canonical_json
from workbench.runs.manifest import plan_manifest
from workbench.runs.sweep import SweepConfig, uncut_evidence, write_uncut_run
from workbench.store.manifests import insert_manifest
from workbench.store.db import Store, utcnow
from workbench.store.queries import Sample

RETRIEVER = "ragchecker"
FORMAT = "score"
DEFAULT_SCORE = "cover"      # RAG responses are sentences: the gold answer contained in them (cover-EM)
MAX_FILE_BYTES = 512 * 1024 * 1024   # one JSON document is held in memory whole
#: Ledger terms that need gold paths (H_set, H_vis): undefined for a run imported from RAGChecker.
NO_GOLD_TERMS = ("S_set", "S_vis", "L_iface", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak")
NO_GOLD_WARNING = ("no gold paths (RAGChecker data has none): S_set, S_vis, L_iface, Acc_hit, Acc_miss, D_rate, "
                   "D_mass and L_leak cannot be computed for this run (H_set and H_vis are stored as 0, meaning "
                   "unknown); S_llm, K_eff, tokens, trunc and the claim metrics (`workbench claims run`) are computed")

_RESULT_PATH = re.compile(r"^\$\.results\[(\d+)\]")
_WS = re.compile(r"[ \t\n\r]*")


@dataclass
class RagCheckerReport(ImportReport):
    """What ``import --from ragchecker`` did: the dataset's counts, plus the run holding the responses."""

    run: str = ""
    cells: int = 0
    events: int = 0
    scored: int = 0
    score: str = DEFAULT_SCORE
    k: int = 0
    budget: int = 0
    run_warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Result:
    """One checked ``results[i]`` entry."""

    index: int
    lines: "_EntryLines"          # where results[index] starts, looked up only for a message
    query_id: str | None          # None only until read_results names it by position
    query: str
    gt_answer: str
    response: str
    contexts: list[tuple[str | None, str]]   # (doc_id or None, text), in the file's order

    @property
    def line(self) -> int:
        return self.lines[self.index]


def import_ragchecker(store: Store, path: str | Path, name: str, *, score: str = DEFAULT_SCORE,
                      replace: bool = False, tokenizer: str = DEFAULT_TOKENIZER) -> RagCheckerReport:
    """Import a RAGChecker input file as dataset ``name`` and a run ``name`` holding its responses.

    One transaction: bad input raises :class:`InputRejected` (``file:line: field: reason``) and
    nothing is written. Re-importing the same file with the same ``score`` is a no-op; other
    content under an existing name raises :class:`~workbench.data.importer.DatasetExists`
    unless ``replace``, which deletes the old dataset and its runs in the same transaction.
    A run of that name belonging to another dataset is refused (:class:`BadInput`).
    """
    check_name(name, "dataset name")
    check_source_path(path, "the file's path")
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"{path}: not found (expected RAGChecker's JSON: {{\"results\": [...]}})")
    scorer = get_scorer(score)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise BadInput(f"{path}: {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit for one JSON document")
    data = path.read_bytes()
    # The score is part of the identity: the same file scored otherwise is other content.
    sha = hashlib.sha256(f"ragchecker\0score={score}\0tokenizer={tokenizer}\0".encode() + data).hexdigest()

    existing = store.conn.execute("SELECT id, content_sha256 FROM datasets WHERE name = ?", (name,)).fetchone()
    if existing and existing[1] == sha:
        return _unchanged(store, name, existing[0])
    if existing and not replace:
        raise name_taken(store.conn, name, existing[0])
    _check_run_name(store.conn, name, existing)

    display = str(path)
    results, warnings = read_results(data, display)
    plan = _Plan(results, display)
    # B: the longest rendered evidence, so that no window is cut (the file says what was shown).
    budget, evidence = uncut_evidence(SweepConfig(ks=(plan.k,), budgets=(1,), formats=(FORMAT,), tokenizer=tokenizer),
                                      plan.samples, plan.units, plan.ranked)
    config = SweepConfig(ks=(plan.k,), budgets=(budget,), formats=(FORMAT,), retriever=RETRIEVER,
                         tokenizer=tokenizer, score=score)
    run_warnings = [NO_GOLD_WARNING, *warnings]
    stored_config = {**asdict(config), "generation": None, "undefined_terms": list(NO_GOLD_TERMS),
                     "source": {"format": "ragchecker", "file": display, "sha256": hashlib.sha256(data).hexdigest()},
                     "warnings": run_warnings}

    # The responses are this run's predictions, scored as `predictions import` scores them.
    answers = {sid: (r.response, scorer(r.response, [r.gt_answer], {})) for sid, r in enumerate(results, start=1)}

    with store.transaction() as conn:
        replaced = claim_dataset_name(conn, name, existing, sha)
        if isinstance(replaced, int):   # another process imported this very file meanwhile
            return _unchanged(store, name, replaced)
        _check_run_name(conn, name, None)   # again under the write lock
        ds_id = conn.execute(
            "INSERT INTO datasets (name, unit_kind, source, content_sha256, created_at) VALUES (?, 'chunk', ?, ?, ?)",
            (name, display, sha, utcnow())).lastrowid
        plan.insert_dataset(conn, ds_id)
        run_id = conn.execute(
            "INSERT INTO runs (name, dataset_id, retriever, config, model, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (name, ds_id, RETRIEVER, canonical_json(stored_config), "external", utcnow())).lastrowid
        events = write_uncut_run(conn, run_id, config, evidence, answers)
        # What the run was made from (`runs show`): the imported file's content, hashed like any run's inputs.
        insert_manifest(conn, run_id, plan_manifest(store, name=name, dataset_id=ds_id, dataset_name=name,
                                                    identity=stored_config, recorded="when imported"))
    return RagCheckerReport(
        dataset=name, dataset_id=ds_id, unit_kind="chunk", units=len(plan.units), samples=len(results),
        retrievals=len(results), retrievers=[RETRIEVER], warnings=warnings, replaced=replaced,
        run=name, cells=1, events=events, scored=len(results), score=score, k=plan.k, budget=budget,
        run_warnings=run_warnings)


def _check_run_name(conn, name: str, own_dataset: tuple | None) -> None:
    """The run is named like the dataset: refuse a name a run of another dataset holds.

    A run of the dataset being replaced (``own_dataset``) goes with it, so it is no obstacle.
    """
    row = conn.execute("SELECT r.dataset_id, d.name FROM runs r JOIN datasets d ON d.id = r.dataset_id"
                       " WHERE r.name = ?", (name,)).fetchone()
    if row and not (own_dataset and row[0] == own_dataset[0]):
        raise BadInput(f"run {name!r} already exists (over dataset {row[1]!r}); the imported run takes the "
                       "dataset's name: choose another --name")


def _unchanged(store: Store, name: str, dataset_id: int) -> RagCheckerReport:
    q = lambda sql, *a: store.conn.execute(sql, (dataset_id, *a)).fetchone()  # noqa: E731
    run = q("SELECT name, config FROM runs WHERE dataset_id = ? AND retriever = ? ORDER BY id LIMIT 1", RETRIEVER)
    config = json.loads(run[1]) if run else {}
    report = RagCheckerReport(
        dataset=name, dataset_id=dataset_id, unit_kind="chunk", unchanged=True,
        units=q("SELECT count(*) FROM units WHERE dataset_id = ?")[0],
        samples=q("SELECT count(*) FROM samples WHERE dataset_id = ?")[0],
        retrievals=q("SELECT count(*) FROM retrievals WHERE dataset_id = ?")[0], retrievers=[RETRIEVER],
        run=run[0] if run else "", score=config.get("score", DEFAULT_SCORE),
        k=(config.get("ks") or [0])[0], budget=(config.get("budgets") or [0])[0],
        run_warnings=config.get("warnings", []))
    if run:
        row = store.conn.execute("SELECT count(*), count(score), count(DISTINCT cell_id) FROM events e"
                                 " JOIN runs r ON r.id = e.run_id WHERE r.name = ?", (run[0],)).fetchone()
        report.events, report.scored, report.cells = row
    return report


# -- reading the document ---------------------------------------------------------------------
def read_results(data: bytes, display: str) -> tuple[list[_Result], list[str]]:
    """Parse and check a RAGChecker document; return its results and the warnings.

    Raises :class:`InputRejected` naming ``file:line: field: reason`` for every problem found
    (up to the importers' limit). The JSON is decoded strictly as the JSONL importers decode a
    line: no repeated key, no lone surrogate, no nesting past the depth limit.
    """
    text = _decode(data, display)
    try:
        doc = decode_record(text)
    except json.JSONDecodeError as exc:
        raise InputRejected([Problem(display, exc.lineno, "$", f"malformed JSON: {exc.msg} (column {exc.colno})")])
    except RecordRefused as exc:
        raise InputRejected([Problem(display, _line_of(text, exc.field), exc.field, exc.reason)]) from None
    if not isinstance(doc, dict):
        raise InputRejected([Problem(display, 1, "$", f'expected an object {{"results": [...]}}, got {json_type(doc)}')])
    if "results" not in doc:
        raise InputRejected([Problem(display, 1, "$.results", 'missing (RAGChecker\'s input is {"results": [...]})')])
    entries = doc["results"]
    if not isinstance(entries, list):
        raise InputRejected([Problem(display, 1, "$.results", f"expected an array, got {json_type(entries)}")])
    if not entries:
        raise InputRejected([Problem(display, 1, "$.results", "must not be empty")])
    lines = _EntryLines(text)
    log = ProblemLog()
    results: list[_Result] = []
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
    log.raise_if_any()
    warnings = []
    if unnamed:
        warnings.append(f"{count_noun(unnamed, 'result')} of {display} had no query_id: "
                        "named by position in results (0-based)")
    return results, warnings


def _decode(data: bytes, display: str) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputRejected([Problem(display, line, "$", f"not valid UTF-8 (byte {exc.start} of the file: "
                                                          f"{data[exc.start:exc.start + 1]!r})")]) from None
    if not text.strip():
        raise InputRejected([Problem(display, 1, "$", "file is empty (no JSON document)")])
    return text


def _entry_lines(text: str) -> list[int]:
    """The 1-based line where each element of the top-level ``results`` array starts.

    ``text`` is known to be valid JSON by now; this walks its top-level object with
    ``raw_decode`` to find where each entry starts (``json`` itself keeps no positions).
    """
    # Only skips values: numbers are not converted (a 5,000-digit integer would raise).
    decoder = json.JSONDecoder(parse_int=len, parse_float=len, parse_constant=len)
    lines: list[int] = []
    pos, line = 0, 1

    def at(i: int) -> int:
        nonlocal pos, line
        line += text.count("\n", pos, i)
        pos = i
        return line

    def skip(i: int) -> int:
        return _WS.match(text, i).end()

    i = skip(0) + 1                                   # past "{"
    while True:
        i = skip(i)
        if text[i] == "}":
            return lines
        key, i = decoder.raw_decode(text, i)
        i = skip(skip(i) + 1)                         # past ":"
        if key == "results":
            i = skip(i + 1)                           # past "["
            while text[i] != "]":
                lines.append(at(i))
                _, i = decoder.raw_decode(text, i)
                i = skip(i)
                if text[i] == ",":
                    i = skip(i + 1)
            return lines
        _, i = decoder.raw_decode(text, i)
        i = skip(i)
        if text[i] == ",":
            i += 1


class _EntryLines:
    """``lines[i]``: the line where ``results[i]`` starts, found (by :func:`_entry_lines`) on first use.

    Only a message needs a line, and finding them walks the whole document a second time.
    """

    def __init__(self, text: str):
        self.text, self._lines = text, None

    def __getitem__(self, i: int) -> int:
        if self._lines is None:
            self._lines = _entry_lines(self.text)
        return self._lines[i]


def _line_of(text: str, fld: str) -> int:
    """The line of the ``results[i]`` entry a refused field lies in (1 when it lies elsewhere)."""
    m = _RESULT_PATH.match(fld)
    if not m:
        return 1
    try:
        lines = _entry_lines(text)
    except (ValueError, RecursionError):   # too deep for the walk: the top of the file will do
        return 1
    i = int(m.group(1))
    return lines[i] if i < len(lines) else 1


def _check_entry(log: ProblemLog, display: str, i: int, lines: _EntryLines, rec: Any) -> _Result | None:
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
    if not ok:
        return None
    return _Result(i, lines, qid, rec["query"], rec["gt_answer"], rec["response"], contexts)


# -- what gets written --------------------------------------------------------------------------
class _Plan:
    """The units, samples and ranked lists of the checked results, and the run's K (the most contexts)."""

    def __init__(self, results: list[_Result], display: str):
        self.unit_rows: list[tuple] = []      # (uid, key, chunk_id, doc_id, text)
        self.units: dict[int, Unit] = {}
        self.ranked: dict[int, list[int]] = {}
        self.samples: list[Sample] = []
        log = ProblemLog()
        doc_key = _DocKeys()
        ids = self._assign_ids(results, doc_key)
        by_key: dict[str, int] = {}
        uid_of: dict[tuple[str, str], int] = {}      # (doc key, text) -> uid, for contexts seen before
        first: dict[int, tuple[tuple[str, str], str]] = {}   # uid -> its (doc key, text) and where it was first seen
        for sid, r in enumerate(results, start=1):
            uids: list[int] = []
            for j, (doc_id, text) in enumerate(r.contexts):
                here = f"results[{r.index}].retrieved_context[{j}]"
                identity = (doc_key(doc_id, text), text)
                uid = uid_of.get(identity)
                if uid is not None:     # the context recurs: its unit is known
                    if uid in uids:
                        log.add(display, r.line, f"$.{here}", f"the same context as retrieved_context"
                                                              f"[{uids.index(uid)}] (a context may appear once)")
                        continue
                    uids.append(uid)
                    continue
                chunk_id, parent = ids[identity]
                key = normalize_text(chunk_id)
                uid = by_key.get(key)
                if uid is None:
                    uid = by_key[key] = len(by_key) + 1
                    first[uid] = (identity, here)
                    self.unit_rows.append((uid, key, chunk_id, parent, text))
                    self.units[uid] = Unit(uid=uid, kind="chunk", doc_id=parent, text=text)
                    uid_of[identity] = uid
                elif first[uid][0] != identity:
                    # Only a literal doc_id such as "a#2" beside a doc "a" that has several texts gets here.
                    log.add(display, r.line, f"$.{here}.doc_id",
                            f"chunk id {chunk_id!r} also names another context (first at {first[uid][1]})")
                    continue
                if uid in uids:
                    log.add(display, r.line, f"$.{here}",
                            f"the same context as retrieved_context[{uids.index(uid)}] (a context may appear once)")
                    continue
                uids.append(uid)
            self.ranked[sid] = uids
            self.samples.append(Sample(sid, r.query_id, r.query, [r.gt_answer], {}, [], {}))
        log.raise_if_any()
        self.results = results
        self.k = max(1, max(len(u) for u in self.ranked.values()))

    @staticmethod
    def _assign_ids(results: list[_Result], doc_key) -> dict[tuple[str, str], tuple[str, str | None]]:
        """``(chunk id, parent doc_id)`` of each distinct (doc key, text).

        The chunk id is the doc_id itself, or ``doc_id#n`` when that doc_id comes with several
        texts (numbered by first appearance), or ``text:<sha256 prefix>`` for a context
        without doc_id (whose parent is then None).
        """
        texts: dict[str, list[str]] = {}
        raw: dict[str, str | None] = {}
        for r in results:
            for doc_id, text in r.contexts:
                doc = doc_key(doc_id, text)
                raw.setdefault(doc, doc_id)
                seen = texts.setdefault(doc, [])
                if text not in seen:
                    seen.append(text)
        ids = {}
        for doc, seen in texts.items():
            name = raw[doc] if raw[doc] is not None else doc
            for n, text in enumerate(seen, start=1):
                ids[(doc, text)] = (name if len(seen) == 1 else f"{name}#{n}", raw[doc])
        return ids

    def insert_dataset(self, conn, dataset_id: int) -> None:
        """Units, samples and the ``ragchecker`` retrieval rows, into the open transaction."""
        conn.executemany("INSERT INTO units (dataset_id, uid, key, chunk_id, doc_id, text) VALUES (?, ?, ?, ?, ?, ?)",
                         [(dataset_id, *row) for row in self.unit_rows])
        dumps = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
        conn.executemany(
            "INSERT INTO samples (dataset_id, sid, id, question, answers, aliases, gold_paths, meta)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(dataset_id, s.sid, s.id, s.question, dumps(s.answers), "{}", "[]",
              dumps({"source": "ragchecker", "results_index": r.index}))
             for s, r in zip(self.samples, self.results)])
        # No retrieval scores in RAGChecker: n, n-1, ..., 1 keeps the file's order under any sort by score.
        conn.executemany(
            "INSERT INTO retrievals (dataset_id, retriever, sid, uids, scores) VALUES (?, ?, ?, ?, ?)",
            [(dataset_id, RETRIEVER, sid, json.dumps(uids), json.dumps([float(len(uids) - j) for j in range(len(uids))]))
             for sid, uids in self.ranked.items()])


class _DocKeys(dict):
    """What a context is keyed by: its doc_id (normalized), or a hash of its text when it has none.

    Called as ``keys(doc_id, text)``; each doc_id is normalized once (it recurs in many queries).
    """

    def __call__(self, doc_id: str | None, text: str) -> str:
        if doc_id is None:
            return "text:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        key = self.get(doc_id)
        if key is None:
            key = self[doc_id] = normalize_text(doc_id)
        return key
