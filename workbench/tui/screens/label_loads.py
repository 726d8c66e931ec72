"""What the Labels screen's workers load and write: a label queue's window, cards, labels and the live report.

Each function runs in a worker thread with its own connection (:meth:`WorkbenchScreen.load`) and
returns plain data for :mod:`workbench.tui.screens.labels` to draw.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from workbench.metrics.stats import RESAMPLES as SHOWN_RESAMPLES
from workbench.claims.report import latest_claim_run
from workbench.judges.cards import card
from workbench.judges.items import JudgedItem, Population, population
from workbench.judges.queue import label_queue
from workbench.judges.report import JudgeReport, report_on
from workbench.kg.runner import get_dedup_run
from workbench.meta.report import MetaRow, preference_rows
from workbench.retrieval.relevance import latest_relevance_dataset
from workbench.retrieval.steps import relevance_steps
from workbench.store.labels import clear_label, put_label
from workbench.store.lookup import NotFound
from workbench.store.queries import get_run, run_names
from workbench.tui import meta_view

KINDS = ("claims", "dedup", "answers", "relevance")
KIND_TITLES = {"claims": "claims", "dedup": "dedup pairs", "answers": "answers", "relevance": "retrieved chunks"}
#: The kinds whose items do not belong to the current run: the newest dedup run's, the latest judged dataset's.
RUNLESS = ("dedup", "relevance")
WINDOW = 100        # items of the queue materialized at a time (a queue of 5M answers is never listed whole)
# κ's bootstrap in the live report: the judge reports' (`workbench judge report`, the HTML report), so κ reads
# the same interval here as there. (κ over the labelled items costs milliseconds, even at a thousand labels.)
RESAMPLES = SHOWN_RESAMPLES   # the CLI's interval


@dataclass(frozen=True)
class QueueView:
    """What a queue worker returns: the population and its queue, or what to do when there is none."""

    kind: str
    run: str | None                 # the run labelled (the dedup run for dedup pairs, the dataset for relevance)
    order: str
    population: Population | None = None
    items: tuple[JudgedItem, ...] = ()   # the next items to label, with their texts (a window of the queue)
    more: bool = False              # the queue goes on after the window
    labelled: int = 0               # items of the queue's population this annotator has labelled
    total: int = 0                  # items the order can ever show
    empty: str = ""                 # nothing to label: what to do
    note: str = ""                  # e.g. why the disagreement order was refused
    runs: tuple[str, ...] = ()      # the runs of the selected run's dataset (what m cycles through)

    @property
    def has_queue(self) -> bool:
        return self.population is not None and not self.empty


def default_kind(store, run_name: str | None) -> str:
    """Claims when the run has verified claims, else its answers (with no run: dedup when there is a dedup
    run, else chunk relevance when some was judged)."""
    if run_name is None:
        for kind, latest in (("dedup", get_dedup_run), ("relevance", latest_relevance_dataset)):
            try:
                latest(store)
                return kind
            except NotFound:
                pass
        return "claims"
    try:
        return "claims" if latest_claim_run(store, get_run(store, run_name)) else "answers"
    except NotFound:
        return "answers"


def load_queue(store, kind: str | None, run_name: str | None, order: str, annotator: str,
               skip: frozenset = frozenset(), window: int | None = None, pop: Population | None = None) -> QueueView:
    """The population of ``kind`` (None: the default kind) and the next ``window`` items of the annotator's
    queue in ``order``, leaving out the keys in ``skip`` (skipped, labelled or already listed on screen).
    ``pop``: the population already read (the next window of the same queue), not read again."""
    view = _load_queue(store, kind, run_name, order, annotator, skip, window, pop)
    try:
        # Read with the queue, so m can pick the next run at once (no key waits on a separate load).
        runs = tuple(run_names(store, get_run(store, run_name).dataset_id)) if run_name else ()
    except NotFound:
        runs = ()
    return replace(view, runs=runs)


def _load_queue(store, kind, run_name, order, annotator, skip, window, pop) -> QueueView:
    kind = kind or default_kind(store, run_name)
    window = window or WINDOW
    if kind == "dedup":
        try:
            run = get_dedup_run(store).name
        except NotFound:
            return QueueView(kind, None, order, empty=(
                "No dedup runs yet: in a shell, `workbench dedup import DIR`, then `workbench dedup run KG` "
                "(e.g. `workbench dedup import sample_data/dedup`, `workbench dedup run dedup`)."))
    elif kind == "relevance":
        try:
            run = latest_relevance_dataset(store)
        except NotFound:
            # Only the steps still missing: a corpus already imported and retrieved is not imported again.
            return QueueView(kind, None, order, empty=f"No chunk relevance judged yet: {relevance_steps(store).sentence()}")
    else:
        if run_name is None:
            return QueueView(kind, None, order, empty="No run selected: open one in Runs (r, then enter).")
        run = run_name
    try:
        pop = pop if pop is not None else population(store, kind, run)
    except NotFound as exc:
        if kind == "claims":
            return QueueView(kind, run, order, empty=(
                f"Run {run} has no verified claims yet: run `workbench claims run {run}` first."))
        return QueueView(kind, run, order, empty=str(exc))
    if not len(pop):
        what = {"claims": "no claims", "dedup": "no judged pairs", "answers": "no scored answers",
                "relevance": "no judged chunks"}[kind]
        todo = {"claims": f"`workbench claims run {run}`", "dedup": f"`workbench dedup resume {run}`",
                "answers": f"the run (r, then u to resume) or `workbench predictions import FILE {run}`",
                "relevance": f"`workbench retrieval judge {run}`"}[kind]
        return QueueView(kind, run, order, pop, empty=f"{KIND_TITLES[kind].capitalize()} of {run}: {what} yet. "
                                                      f"Finish it first: {todo}.")
    note = ""
    try:
        queue = label_queue(store.conn, pop, annotator, order=order)
    except ValueError as exc:
        note, order = str(exc), "uniform"
        queue = label_queue(store.conn, pop, annotator, order=order)
    head = queue.head(store, window + len(skip))
    fresh = [item for item in head if item.key not in skip]
    items = tuple(fresh[:window])
    more = len(queue.positions) > len(head) or len(fresh) > window
    return QueueView(kind, run, order, pop, items, more, queue.labelled, queue.total, note=note)


def load_cards(store, keys) -> dict:
    """The card of each item key (a string saying why, when one cannot be read)."""
    out = {}
    for key in keys:
        try:
            out[key] = card(store, key)
        except (NotFound, ValueError) as exc:
            out[key] = f"no card: {exc}"
    return out


def write_label(store, key, label: bool, annotator: str, via: str, claim: str | None):
    put_label(store, key, label, annotator, via=via, claim=claim)
    return key, label


def undo_label(store, key, annotator: str):
    return key, clear_label(store, key, annotator)


@dataclass(frozen=True)
class ReportView:
    """What a report worker returns: the judge report and, when asked for, how far each checker of every
    meta set agrees with people's preferences (the overall label), shown beside κ."""

    report: JudgeReport
    preferences: tuple[tuple[str, MetaRow], ...] | None = None   # None: not read this time (the last stands)


def load_report(store, pop: Population, preferences: bool = False) -> ReportView:
    """The judge report of ``pop``; with ``preferences``, every meta set's scorers against the overall label
    too (they change with a meta run, not with a label: read when the screen loads a queue, not per label)."""
    report = report_on(store, pop, resamples=RESAMPLES)
    if not preferences:
        return ReportView(report)
    # The Meta screen's statistic, not a cheaper copy of it: the same resamples and seed (meta_view's).
    return ReportView(report, tuple(preference_rows(store, resamples=meta_view.RESAMPLES, seed=meta_view.SEED)))
