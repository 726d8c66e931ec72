"""Importing RAGChecker's meta-evaluation data: ``workbench import --from ragchecker-meta HUMAN.json
[--baselines FILE ...] --name NAME``: how far each checker agrees with people.

The files are read and checked by :mod:`workbench.data.meta_file`; they become, in one
transaction:

- a dataset ``NAME`` (chunk units, none of them: nothing was retrieved) whose samples are the
  instances in order of first appearance: ``instance_id`` → id, ``query`` → question,
  ``gt_answer`` → the one answer, the instance's ``dataset`` and ``query_id`` kept in its meta;
- two runs over it, ``NAME.model1`` and ``NAME.model2``, each one uncut cell whose events are
  the responses of that side, done, as imported answers scored (``cover``) against gt_answer,
  written through the same seam as ``import --from ragchecker`` (so ``claims run`` decomposes
  and verifies them like any answer);
- the meta set ``NAME`` (migration 0017): which system wrote each response (``meta_systems``),
  every annotator's three labels (``meta_labels``, annotator = the entry's order within its
  instance) and every baseline score (``meta_scores``: scorer = the evaluator, metric = its
  metric, NULL where undefined or where the baseline does not score the instance).

Bad input is refused as ``file:line: field: reason`` and nothing is written. Re-importing the
same files (same content, same order) under the same name is a no-op; other content under an
existing name is refused unless ``replace``, which deletes the old dataset, its runs and its
meta set in the same transaction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.data.fields import check_name, check_source_path
from workbench.data.importer import ImportReport, claim_dataset_name, name_taken
from workbench.data.infile import check_input, read_input
from workbench.data.meta_file import LABELS, SIDES, Baseline, Instance, read_meta
from workbench.data.ragchecker import DEFAULT_SCORE, FORMAT, MAX_FILE_BYTES, NO_GOLD_TERMS
from workbench.errors import BadInput
from workbench.evidence import DEFAULT_TOKENIZER
from workbench.metrics.scoring import get_scorer
from workbench.runs.sweep import SweepConfig, insert_imported_run, uncut_evidence
from workbench.store.db import Store, utcnow
from workbench.store.queries import Sample

SOURCE = "ragchecker-meta"
HUMAN_HINT = "expected RAGChecker's human_labeled_data.json: a JSON array of labelled response pairs"
BASELINE_HINT = "expected a RAGChecker baseline file: a JSON array of scored response pairs"
NO_CONTEXT_WARNING = ("no retrieved contexts and no gold paths (a meta set holds responses only): S_set, S_vis, "
                      "L_iface, Acc_hit, Acc_miss, D_rate, D_mass and L_leak cannot be computed for this run; "
                      "S_llm and the claim metrics against the reference answer (`workbench meta run`) are")


@dataclass
class MetaBaseline:
    """One imported baseline file: the instances it scores and its evaluators' metrics."""

    file: str
    instances: int                                               # of the set's, the ones it scores
    scorers: dict[str, list[str]] = field(default_factory=dict)  # evaluator -> its metrics
    undefined: int = 0                                           # scores stored as NULL (of instances × 2 each)


@dataclass
class MetaImportReport(ImportReport):
    """What ``import --from ragchecker-meta`` did: the dataset's counts, its two runs and the meta set."""

    set_id: int = 0
    runs: list[str] = field(default_factory=list)        # NAME.model1, NAME.model2
    events: int = 0                                      # of both runs: one per instance and side
    scored: int = 0
    score: str = DEFAULT_SCORE
    annotators: list[int] = field(default_factory=list)  # the distinct numbers of annotators of an instance
    annotations: int = 0                                 # (instance, annotator) entries
    labels: int = 0                                      # label values: annotations × 3
    systems: list[str] = field(default_factory=list)     # the distinct model names, sorted
    baselines: list[MetaBaseline] = field(default_factory=list)
    scores: int = 0                                      # baseline scores stored (instances × 2 per metric)


def import_meta(store: Store, human_path: str | Path, name: str, *, baselines: Sequence[str | Path] = (),
                replace: bool = False) -> MetaImportReport:
    """Import a human preference file (and its baselines' scores) as meta set ``name``.

    One transaction: bad input raises :class:`~workbench.data.errors.InputRejected`
    (``file:line: field: reason``) and nothing is written. Re-importing the same files is a
    no-op; other content under an existing name raises
    :class:`~workbench.data.importer.DatasetExists` unless ``replace``. Runs ``name.model1`` or
    ``name.model2`` over another dataset are refused (:class:`BadInput`).
    """
    check_name(name, "dataset name")
    paths = [_checked_path(human_path, HUMAN_HINT), *(_checked_path(b, BASELINE_HINT) for b in baselines)]
    datas = [_read(path) for path in paths]
    displays = [str(path) for path in paths]
    # The files' contents in order, and what scores the responses: together the set's identity.
    digest = hashlib.sha256(f"{SOURCE}\0score={DEFAULT_SCORE}\0tokenizer={DEFAULT_TOKENIZER}\0"
                            f"files={len(datas)}\0".encode())
    for data in datas:
        digest.update(f"{len(data)}\0".encode() + data)
    sha = digest.hexdigest()

    existing = store.conn.execute("SELECT id, content_sha256 FROM datasets WHERE name = ?", (name,)).fetchone()
    if existing and existing[1] == sha:
        return _unchanged(store, name, existing[0])
    if existing and not replace:
        raise name_taken(store.conn, name, existing[0])
    _check_names(store.conn, name, existing)

    files = read_meta((datas[0], displays[0]), list(zip(datas[1:], displays[1:])))
    instances = files.instances
    samples = [Sample(sid, inst.instance_id, inst.query, [inst.gt_answer], {}, [], {})
               for sid, inst in enumerate(instances, start=1)]
    budget, evidence = uncut_evidence(SweepConfig(ks=(1,), budgets=(1,), formats=(FORMAT,),
                                                  tokenizer=DEFAULT_TOKENIZER), samples, {}, {})
    config = SweepConfig(ks=(1,), budgets=(budget,), formats=(FORMAT,), tokenizer=DEFAULT_TOKENIZER,
                         score=DEFAULT_SCORE)
    summaries = [_summary(b, instances) for b in files.baselines]
    source = {"format": SOURCE, "file": displays[0], "sha256": hashlib.sha256(datas[0]).hexdigest(),
              "baselines": [{"file": d, "sha256": hashlib.sha256(data).hexdigest(),
                             "instances": len(b.scores), "metrics": [list(m) for m in b.metrics]}
                            for d, data, b in zip(displays[1:], datas[1:], files.baselines)]}
    scorer = get_scorer(DEFAULT_SCORE)
    answers = [{sid: (inst.responses[s], scorer(inst.responses[s], [inst.gt_answer], {}))
                for sid, inst in enumerate(instances, start=1)} for s in range(len(SIDES))]

    with store.transaction() as conn:
        replaced = claim_dataset_name(conn, name, existing, sha)
        if isinstance(replaced, int):   # another process imported these very files meanwhile
            return _unchanged(store, name, replaced)
        _check_names(conn, name, None)  # again under the write lock
        ds_id = conn.execute(
            "INSERT INTO datasets (name, unit_kind, source, content_sha256, created_at) VALUES (?, 'chunk', ?, ?, ?)",
            (name, displays[0], sha, utcnow())).lastrowid
        _insert_samples(conn, ds_id, instances)
        run_ids, events = [], 0
        for s, side in enumerate(SIDES):
            run = f"{name}.{side}"
            stored = {**asdict(config), "generation": None, "undefined_terms": list(NO_GOLD_TERMS),
                      "source": {**source, "side": side}, "warnings": [NO_CONTEXT_WARNING]}
            run_id, written = insert_imported_run(conn, store, name=run, dataset_id=ds_id, dataset_name=name,
                                                  retriever=None, stored=stored, config=config, evidence=evidence,
                                                  answers=answers[s])
            events += written
            run_ids.append(run_id)
        set_id = conn.execute(
            "INSERT INTO meta_sets (name, dataset_id, run1_id, run2_id, source, content_sha256, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)", (name, ds_id, *run_ids, displays[0], sha, utcnow())).lastrowid
        labels, scores = _insert_meta(conn, set_id, instances, files.baselines)

    return MetaImportReport(
        dataset=name, dataset_id=ds_id, unit_kind="chunk", samples=len(instances), replaced=replaced,
        warnings=_coverage_warnings(summaries, len(instances)), set_id=set_id,
        runs=[f"{name}.{side}" for side in SIDES], events=events,
        scored=sum(score is not None for side in answers for _, score in side.values()),
        annotators=sorted({len(inst.annotations) for inst in instances}),
        annotations=sum(len(inst.annotations) for inst in instances), labels=labels,
        systems=sorted({s for inst in instances for s in inst.systems if s is not None}),
        baselines=summaries, scores=scores)


def _checked_path(path: str | Path, hint: str) -> Path:
    check_source_path(path, "the file's path")
    return check_input(path, hint=hint)


def _read(path: Path) -> bytes:
    return read_input(path, limit=MAX_FILE_BYTES, what="JSON document")


def _check_names(conn, name: str, own_dataset: tuple | None) -> None:
    """The runs are ``name.model1`` and ``name.model2`` and the meta set is ``name``: refuse any of
    these held over another dataset (those of the dataset being replaced go with it)."""
    for run in (f"{name}.{side}" for side in SIDES):
        row = conn.execute("SELECT r.dataset_id, d.name FROM runs r JOIN datasets d ON d.id = r.dataset_id"
                           " WHERE r.name = ?", (run,)).fetchone()
        if row and not (own_dataset and row[0] == own_dataset[0]):
            raise BadInput(f"run {run!r} already exists (over dataset {row[1]!r}); a meta set's runs are "
                           "NAME.model1 and NAME.model2: choose another --name")
    row = conn.execute("SELECT m.dataset_id, d.name FROM meta_sets m JOIN datasets d ON d.id = m.dataset_id"
                       " WHERE m.name = ?", (name,)).fetchone()
    if row and not (own_dataset and row[0] == own_dataset[0]):
        raise BadInput(f"meta set {name!r} already exists (over dataset {row[1]!r}): choose another --name")


def _insert_samples(conn, dataset_id: int, instances: list[Instance]) -> None:
    dumps = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    conn.executemany(
        "INSERT INTO samples (dataset_id, sid, id, question, answers, aliases, gold_paths, meta)"
        " VALUES (?, ?, ?, ?, ?, '{}', '[]', ?)",
        [(dataset_id, sid, inst.instance_id, inst.query, dumps([inst.gt_answer]),
          dumps({"source": SOURCE, "dataset": inst.dataset, "query_id": inst.query_id}))
         for sid, inst in enumerate(instances, start=1)])


def _insert_meta(conn, set_id: int, instances: list[Instance], baselines: list[Baseline]) -> tuple[int, int]:
    """The systems, the labels and the baseline scores of meta set ``set_id``; returns (labels, scores) written."""
    conn.executemany("INSERT INTO meta_systems (set_id, sid, side, system) VALUES (?, ?, ?, ?)",
                     [(set_id, sid, side, system) for sid, inst in enumerate(instances, start=1)
                      for side, system in enumerate(inst.systems, start=1)])
    labels = [(set_id, sid, annotator, label, value, a.line)
              for sid, inst in enumerate(instances, start=1) for annotator, a in enumerate(inst.annotations)
              for label, value in zip(LABELS, a.labels)]
    conn.executemany("INSERT INTO meta_labels (set_id, sid, annotator, label, value, line) VALUES (?, ?, ?, ?, ?, ?)",
                     labels)
    scores = [(set_id, evaluator, metric, sid, side, value)
              for b in baselines for evaluator, metric in b.metrics
              for sid, inst in enumerate(instances, start=1)
              for side, value in enumerate(b.scores.get(inst.instance_id, {}).get((evaluator, metric), (None, None)),
                                           start=1)]
    conn.executemany("INSERT INTO meta_scores (set_id, scorer, metric, sid, side, value) VALUES (?, ?, ?, ?, ?, ?)",
                     scores)
    return len(labels), len(scores)


def _summary(b: Baseline, instances: list[Instance]) -> MetaBaseline:
    scorers: dict[str, list[str]] = {}
    for evaluator, metric in b.metrics:
        scorers.setdefault(evaluator, []).append(metric)
    defined = sum(v is not None for per in b.scores.values() for pair in per.values() for v in pair)
    return MetaBaseline(b.file, len(b.scores), scorers, len(b.metrics) * len(instances) * len(SIDES) - defined)


def _coverage_warnings(baselines: list[MetaBaseline], instances: int) -> list[str]:
    return [f"{b.file} scores {b.instances:,} of the {instances:,} instances: the others' scores are undefined"
            for b in baselines if b.instances < instances]


def _unchanged(store: Store, name: str, dataset_id: int) -> MetaImportReport:
    """The report of a re-import of the same files: what the store holds for them."""
    conn = store.conn
    report = MetaImportReport(dataset=name, dataset_id=dataset_id, unit_kind="chunk", unchanged=True,
                              samples=conn.execute("SELECT count(*) FROM samples WHERE dataset_id = ?",
                                                   (dataset_id,)).fetchone()[0])
    row = conn.execute("SELECT id, run1_id, run2_id FROM meta_sets WHERE dataset_id = ?", (dataset_id,)).fetchone()
    if row is None:
        return report
    set_id, *run_ids = row
    names = dict(conn.execute("SELECT id, name FROM runs WHERE id IN (?, ?)", run_ids).fetchall())
    report.set_id, report.runs = set_id, [names[r] for r in run_ids]
    report.events, report.scored = conn.execute("SELECT count(*), count(score) FROM events WHERE run_id IN (?, ?)",
                                                run_ids).fetchone()
    (config,) = conn.execute("SELECT config FROM runs WHERE id = ?", (run_ids[0],)).fetchone()
    report.score = json.loads(config).get("score", DEFAULT_SCORE)
    one = lambda sql: conn.execute(sql, (set_id,)).fetchall()  # noqa: E731
    report.annotators = [n for (n,) in one("SELECT DISTINCT n FROM (SELECT count(DISTINCT annotator) AS n FROM"
                                           " meta_labels WHERE set_id = ? GROUP BY sid) ORDER BY n")]
    report.annotations, report.labels = one("SELECT count(DISTINCT sid || ':' || annotator), count(*)"
                                            " FROM meta_labels WHERE set_id = ?")[0]
    report.systems = [s for (s,) in one("SELECT DISTINCT system FROM meta_systems WHERE set_id = ?"
                                        " AND system IS NOT NULL ORDER BY system")]
    for b in json.loads(config).get("source", {}).get("baselines", []):
        scorers: dict[str, list[str]] = {}
        undefined = 0
        for evaluator, metric in b["metrics"]:
            scorers.setdefault(evaluator, []).append(metric)
            n, nulls = conn.execute("SELECT count(*), count(*) - count(value) FROM meta_scores"
                                    " WHERE set_id = ? AND scorer = ? AND metric = ?", (set_id, evaluator, metric)
                                    ).fetchone()
            report.scores += n
            undefined += nulls
        report.baselines.append(MetaBaseline(b["file"], b["instances"], scorers, undefined))
    return report
