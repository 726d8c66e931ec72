"""How far each judge can be trusted, from human labels: agreement and corrected estimates.

For a population (:mod:`workbench.judges.items`) and its labels:

- **The human label of an item** is the majority of its annotators; an item they split
  evenly is left out of agreement (counted in ``ties``).
- **Agreement per judge** (and for the vote): :func:`~workbench.metrics.agreement.agreement`
  on the labelled items: confusion matrix, accuracy, Cohen's κ with a bootstrap CI, the
  judge's positive rate against the humans', and the majority-class baseline. Every judge
  is resampled on the same item keys, so their intervals are paired.
- **Annotator agreement** (the human ceiling), with two or more annotators: κ of each pair
  on the items both labelled.
- **Prediction-powered estimates** (:func:`~workbench.metrics.ppi.ppi_mean`) of the judged
  metric, per judge: the naive judged mean over all items, the human-only mean over the
  labelled ones, and PPI. Only items labelled from the *uniform* queue count (an item's
  human value is the mean of its annotators' labels); the metric is
  - claims: **faithfulness over claims**, the share of all claims supported by a shown unit
    (the claims report's faithfulness is the mean over answers of each answer's share);
  - dedup pairs: **pair precision** of each mode's own merges (coreferent at confidence ≥ the
    threshold): the share of merged pairs that are the same entity; the judge's estimate is
    its mean stated probability of "same" over those pairs;
  - answers: **accuracy**, the share of answers that are correct (the scorer's score);
  - relevance: **precision of the retrieved chunks**, the share of the judged (question, retrieved
    chunk) pairs that are relevant (the judge's estimate: its verdicts).

  Every metric is a share, so its estimates are clipped to [0, 1].
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Callable

import numpy as np

from workbench.claims.report import latest_claim_run
from workbench.judges.items import (POPULATION_KINDS, VOTE, Population, answer_population, claim_population,
                                    population)
from workbench.kg.runner import get_dedup_run
from workbench.metrics.agreement import Agreement, agreement
from workbench.metrics.ppi import PPIEstimates, ppi_mean
from workbench.retrieval.relevance import latest_relevance_dataset
from workbench.store.db import Store
from workbench.store.labels import ClaimKey, Label, label_count, labels_of
from workbench.store.queries import get_dataset, get_run
from workbench.tables import fmt_estimate, fmt_number
from workbench.metrics.stats import RESAMPLES, SEED

__all__ = ["JudgeAgreement", "AnnotatorAgreement", "MetricEstimate", "JudgeReport", "judge_report",
           "report_on", "report_json", "estimates_json", "cell_estimates", "labelled_estimates", "METRIC",
           "AGREEMENT_COLUMNS", "ESTIMATE_COLUMNS", "agreement_cells", "estimate_cells"]

BINARY = (False, True)
#: The judged metric a prediction-powered estimate corrects, per label kind.
METRIC = {"claim": "faithfulness over claims", "dedup_pair": "pair precision of merges", "answer": "accuracy",
          "relevance": "precision of retrieved chunks"}


@dataclass(frozen=True)
class JudgeAgreement:
    judge: str
    agreement: Agreement


@dataclass(frozen=True)
class AnnotatorAgreement:
    a: str
    b: str
    agreement: Agreement


@dataclass(frozen=True)
class MetricEstimate:
    """One judge's metric: naive (judged), human-only and PPI, over the items it covers."""

    judge: str
    metric: str
    estimates: PPIEstimates


@dataclass(frozen=True)
class JudgeReport:
    kind: str
    run: str
    source: str
    judges: tuple[str, ...]
    items: int                      # the population
    labelled_items: int             # items with at least one label
    labels: int
    annotators: dict[str, int]      # annotator → labels
    uniform_items: int              # labelled items drawn by the uniform queue (the estimates' n)
    ties: int                       # items the annotators split evenly (left out of agreement)
    stale: int                      # claim labels whose claim text changed since (not matched)
    unmatched: int                  # labels of items no longer judged (e.g. an unscored answer)
    agreement: list[JudgeAgreement]
    annotator_agreement: list[AnnotatorAgreement]
    estimates: list[MetricEstimate]
    threshold: float | None = None


def _matched(pop: Population, labels: list[Label]) -> tuple[dict[int, list[Label]], int, int]:
    """Labels by item position; and how many are stale (claim text changed) or of no item of the population."""
    by_pos: dict[int, list[Label]] = defaultdict(list)
    stale = unmatched = 0
    for lab, at in zip(labels, pop.positions([lab.key for lab in labels]).tolist()):
        if at < 0:
            unmatched += 1
        elif isinstance(lab.key, ClaimKey) and lab.claim != pop.texts[at]:
            stale += 1
        else:
            by_pos[at].append(lab)
    return by_pos, stale, unmatched


def _majority(labels: list[Label]) -> bool | None:
    yes = sum(lab.label for lab in labels)
    return None if 2 * yes == len(labels) else 2 * yes > len(labels)


def _estimates(pop: Population, by_pos: dict[int, list[Label]]) -> list[MetricEstimate]:
    uniform = {at: sum(lab.label for lab in labs) / len(labs)
               for at, labs in by_pos.items() if any(lab.via == "uniform" for lab in labs)}
    labelled_at = np.array(sorted(uniform), dtype=np.int64)
    is_labelled = np.zeros(len(pop), dtype=bool)
    is_labelled[labelled_at] = True
    out = []
    for judge in pop.judges:
        covered = pop.judged[judge] & (pop.merges[judge] if pop.kind == "dedup_pair" else True)
        mine = labelled_at[covered[labelled_at]]
        out.append(MetricEstimate(judge, METRIC[pop.kind], ppi_mean(
            pop.scores[judge][mine], [uniform[int(at)] for at in mine], pop.scores[judge][covered & ~is_labelled],
            bounds=(0.0, 1.0))))
    return out


def report_on(store: Store, pop: Population, *, resamples: int = RESAMPLES, seed: int = SEED) -> JudgeReport:
    """The judge report of one population against every label of its items."""
    labels = labels_of(store.conn, pop.kind, pop.owner_id)
    by_pos, stale, unmatched = _matched(pop, labels)
    human: dict[int, bool] = {}
    ties = 0
    for at, labs in by_pos.items():
        verdict = _majority(labs)
        if verdict is None:
            ties += 1
        else:
            human[at] = verdict
    keys = sorted(human)
    per_judge = []
    for judge in pop.judges:
        judged = [at for at in keys if pop.judged[judge][at]]
        per_judge.append(JudgeAgreement(judge, agreement(
            [human[at] for at in judged], [bool(pop.verdicts[judge][at]) for at in judged],
            keys=judged, categories=BINARY, resamples=resamples, seed=seed)))
    by_annotator: dict[str, dict[int, bool]] = defaultdict(dict)
    for at, labs in by_pos.items():
        for lab in labs:
            by_annotator[lab.annotator][at] = lab.label
    pairs = []
    for a, b in combinations(sorted(by_annotator), 2):
        common = sorted(set(by_annotator[a]) & set(by_annotator[b]))
        pairs.append(AnnotatorAgreement(a, b, agreement(
            [by_annotator[a][k] for k in common], [by_annotator[b][k] for k in common],
            keys=common, categories=BINARY, resamples=resamples, seed=seed)))
    return JudgeReport(
        kind=pop.kind, run=pop.run, source=pop.source, judges=pop.judges, items=len(pop),
        labelled_items=len(by_pos), labels=sum(len(labs) for labs in by_pos.values()),
        annotators={a: len(items) for a, items in sorted(by_annotator.items())},
        uniform_items=sum(any(lab.via == "uniform" for lab in labs) for labs in by_pos.values()),
        ties=ties, stale=stale, unmatched=unmatched, agreement=per_judge, annotator_agreement=pairs,
        estimates=_estimates(pop, by_pos), threshold=pop.threshold)


def judge_report(store: Store, kind: str, run: str | None = None, *, claim_run: int | None = None,
                 threshold: float = 0.5, retriever: str | None = None, resamples: int = RESAMPLES,
                 seed: int = SEED) -> JudgeReport:
    """The judge report of ``kind`` (``claims``, ``dedup``, ``answers`` or ``relevance``) in ``run`` (for relevance:
    the dataset, ``retriever``'s pairs only if given)."""
    return report_on(store, population(store, kind, run, claim_run=claim_run, threshold=threshold,
                                       retriever=retriever), resamples=resamples, seed=seed)


def cell_estimates(store: Store, run: str, cell_id: str) -> list[MetricEstimate]:
    """The prediction-powered estimates of one cell (the ledger's side panel): its accuracy (the
    scorer against answer labels) and its faithfulness over claims (the vote against claim labels).

    Empty when the run has no label of either kind, without reading the cell's items.
    """
    r = get_run(store, run)
    out = []
    if label_count(store.conn, "answer", r.id):
        answers = answer_population(store, run, cell_id=cell_id)
        out += _estimates(answers, _matched(answers, labels_of(store.conn, "answer", r.id))[0])
    if label_count(store.conn, "claim", r.id) and latest_claim_run(store, r):
        claims = claim_population(store, run, cell_id=cell_id)
        out += [e for e in _estimates(claims, _matched(claims, labels_of(store.conn, "claim", r.id))[0])
                if e.judge == VOTE]
    return out


#: The columns of an agreement table (:func:`agreement_cells`) and of an estimates table (:func:`estimate_cells`).
AGREEMENT_COLUMNS = ("judge", "n", "TN", "FP", "FN", "TP", "accuracy", "κ", "judge+", "human+", "baseline")
ESTIMATE_COLUMNS = ("judge", "labelled", "of", "naive (judged)", "human only", "PPI", "λ")


def agreement_cells(j: JudgeAgreement, *, estimate: Callable = fmt_estimate, text: Callable = str) -> list[str]:
    """One judge's row of an agreement table (:data:`AGREEMENT_COLUMNS`); ``estimate`` formats κ with its
    interval and ``text`` the judge's name (the HTML page passes its own, which escape)."""
    a = j.agreement
    (tn, fp), (fn, tp) = a.confusion
    return [text(j.judge), str(a.n), str(tn), str(fp), str(fn), str(tp), fmt_number(a.accuracy, 3), estimate(a.kappa),
            fmt_number(a.judge_positive_rate, 3), fmt_number(a.human_positive_rate, 3),
            fmt_number(a.majority_baseline, 3)]


def estimate_cells(e: MetricEstimate, *, estimate: Callable = fmt_estimate, text: Callable = str) -> list[str]:
    """One judge's row of an estimates table (:data:`ESTIMATE_COLUMNS`): naive, human-only and PPI, with n and λ."""
    p = e.estimates
    return [text(e.judge), str(p.n_labelled), str(p.n_labelled + p.n_unlabelled), estimate(p.naive),
            estimate(p.human), estimate(p.ppi), fmt_number(p.lam, 3)]


def estimates_json(estimates: list[MetricEstimate]) -> dict:
    """Per judge: the metric, and its naive, human-only and PPI estimates with n and λ (every JSON output's shape)."""
    return {e.judge: {"metric": e.metric, **asdict(e.estimates)} for e in estimates}


def report_json(report: JudgeReport) -> dict:
    """The report as plain JSON: per judge (and the vote) its confusion matrix and ``kappa`` with its CI."""
    return {
        "kind": report.kind, "run": report.run, "source": report.source, "items": report.items,
        "labelled_items": report.labelled_items, "labels": report.labels, "annotators": report.annotators,
        "uniform_items": report.uniform_items, "ties": report.ties, "stale": report.stale,
        "unmatched": report.unmatched, "threshold": report.threshold,
        "confusion_axes": "rows: human label, columns: judge label; each in the order of `labels`, [false, true]",
        "judges": {j.judge: asdict(j.agreement) for j in report.agreement},
        "annotator_agreement": [{"a": p.a, "b": p.b, **asdict(p.agreement)} for p in report.annotator_agreement],
        "estimates": estimates_json(report.estimates),
    }


def labelled_estimates(store: Store, kind: str, run: str | None = None, *, claim_run: int | None = None,
                       threshold: float = 0.5, retriever: str | None = None) -> list[MetricEstimate] | None:
    """The prediction-powered estimates of ``kind`` in ``run`` (the dataset for relevance); None when it has
    no label of that kind (checked first, so a report without labels reads nothing more)."""
    pop_kind = POPULATION_KINDS[kind]
    if kind == "relevance" and run is None:
        run = latest_relevance_dataset(store)
    owner = (get_dedup_run(store, run).id if kind == "dedup" else get_dataset(store, run).id if kind == "relevance"
             else get_run(store, run).id)
    if not label_count(store.conn, pop_kind, owner):
        return None
    pop = population(store, kind, run, claim_run=claim_run, threshold=threshold, retriever=retriever)
    return _estimates(pop, _matched(pop, labels_of(store.conn, pop.kind, pop.owner_id))[0])
