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

A RAGChecker *output* file (a checking-outputs file: with ``response_claims``,
``answer2response``, ``retrieved2response``, ...) keeps its claims and checks: in the same
transaction they become a claim run over the run (decomposer ``import``, verifier
``ragchecker``; :mod:`workbench.claims.imported`), so ``claims report`` gives RAGChecker's
figures without a model. The file's own ``metrics`` (per result and overall) are compared with
those recomputed from its labels, and any difference is reported. A ``query_id`` that is
null or missing (RAGChecker's LlamaIndex integration writes null) is the result's 0-based
position, with a warning. Bad input is refused as ``file:line: field: reason``, the line being
where the offending ``results[i]`` entry starts, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.data.errors import ProblemLog
from workbench.data.fields import check_name, check_source_path
from workbench.data.importer import ImportReport, claim_dataset_name, name_taken
from workbench.data.infile import check_input, read_input
from workbench.claims.imported import IMPORTED, CheckedAnswer, write_imported
from workbench.claims.metrics import RAGCHECKER_NAMES, ragchecker_overall
from workbench.data.ragchecker_file import Result, read_results
from workbench.errors import BadInput
from workbench.evidence import DEFAULT_TOKENIZER
from workbench.evidence.units import Unit, normalize_text
from workbench.metrics.scoring import get_scorer
from workbench.runs.sweep import SweepConfig, insert_imported_run, uncut_evidence
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
    claim_run: int | None = None      # an output file's checks, kept as this claim run
    checked: int = 0                  # answers whose claims and checks came with the file
    file_figures: int = 0             # the file's own metric values compared with the recomputed ones
    figure_mismatches: list[str] = field(default_factory=list)


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
    path = check_input(path, hint="expected RAGChecker's JSON: {\"results\": [...]}")
    scorer = get_scorer(score)
    data = read_input(path, limit=MAX_FILE_BYTES, what="JSON document")
    # The score is part of the identity: the same file scored otherwise is other content.
    sha = hashlib.sha256(f"ragchecker\0score={score}\0tokenizer={tokenizer}\0".encode() + data).hexdigest()

    existing = store.conn.execute("SELECT id, content_sha256 FROM datasets WHERE name = ?", (name,)).fetchone()
    if existing and existing[1] == sha:
        return _unchanged(store, name, existing[0])
    if existing and not replace:
        raise name_taken(store.conn, name, existing[0])
    _check_run_name(store.conn, name, existing)

    display = str(path)
    results, warnings, file_overall = read_results(data, display)
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
        run_id, events = insert_imported_run(conn, store, name=name, dataset_id=ds_id, dataset_name=name,
                                             retriever=RETRIEVER, stored=stored_config, config=config,
                                             evidence=evidence, answers=answers)
        claim_run, computed = _write_checks(conn, run_id, results) if results[0].checks is not None else (None, {})
    return RagCheckerReport(
        dataset=name, dataset_id=ds_id, unit_kind="chunk", units=len(plan.units), samples=len(results),
        retrievals=len(results), retrievers=[RETRIEVER], warnings=warnings, replaced=replaced,
        run=name, cells=1, events=events, scored=len(results), score=score, k=plan.k, budget=budget,
        run_warnings=run_warnings, claim_run=claim_run, checked=len(computed),
        **(_compare_figures(results, computed, file_overall) if computed else {}))


def _write_checks(conn, run_id: int, results: list[Result]) -> tuple[int, dict[int, dict[str, float]]]:
    """An output file's claims and checks as a claim run over the run's one cell (its visible units being
    the retrieved contexts in the file's order)."""
    (cell_id,) = conn.execute("SELECT cell_id FROM cells WHERE run_id = ?", (run_id,)).fetchone()
    visible = {sid: json.loads(v) for sid, v in conn.execute("SELECT sid, visible FROM events WHERE run_id = ?",
                                                               (run_id,))}
    answers = [CheckedAnswer(sid, r.response, visible[sid], *(getattr(r.checks, f) for f in (
        "response_claims", "gt_answer_claims", "answer2response", "response2answer", "retrieved2response",
        "retrieved2answer"))) for sid, r in enumerate(results, start=1)]
    return write_imported(conn, run_id, cell_id, answers)


def _compare_figures(results: list[Result], computed: dict[int, dict[str, float]],
                     file_overall: dict[str, float]) -> dict:
    """The file's own figures against those recomputed from its labels: per result to 1e-9, overall
    (RAGChecker prints ×100 rounded to one decimal) to its printed precision."""
    compared, mismatches = 0, []
    for sid, r in enumerate(results, start=1):
        for name, value in (r.metrics or {}).items():
            if name in RAGCHECKER_NAMES:
                compared += 1
                if abs(value - computed[sid][name]) > 1e-9:
                    mismatches.append(f"results[{r.index}] {name}: the file says {value!r}, its labels give "
                                      f"{computed[sid][name]!r}")
    overall = {k: v for group in ragchecker_overall([computed[sid] for sid in sorted(computed)]).values()
               for k, v in group.items()}
    for name, value in file_overall.items():
        if name in overall:
            compared += 1
            if abs(value - round(overall[name], 1)) > 1e-9:
                mismatches.append(f"overall {name}: the file says {value!r}, its labels give {overall[name]:.4f}")
    return {"file_figures": compared, "figure_mismatches": mismatches}


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
        checked = store.conn.execute(
            "SELECT c.id, count(j.sid) FROM claim_runs c JOIN runs r ON r.id = c.run_id JOIN claim_jobs j"
            " ON j.claim_run_id = c.id WHERE r.name = ? AND c.config_key = ? GROUP BY c.id", (run[0], IMPORTED.key())
        ).fetchone()
        if checked:
            report.claim_run, report.checked = checked
    return report


# -- what gets written --------------------------------------------------------------------------
class _Plan:
    """The units, samples and ranked lists of the checked results, and the run's K (the most contexts)."""

    def __init__(self, results: list[Result], display: str):
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
    def _assign_ids(results: list[Result], doc_key) -> dict[tuple[str, str], tuple[str, str | None]]:
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
