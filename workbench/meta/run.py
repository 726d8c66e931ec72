"""``meta run``: score both responses of every instance as RAGChecker scores them against the reference.

Each response is a claim-checked answer of its run (``NAME.model1``, ``NAME.model2``): the same
decomposer, verifiers, vote, cache and resume as ``claims run``, through :func:`run_claims`
itself. With no retrieved units, what a claim run computes of an answer against its long
reference is what RAGChecker's meta-evaluation correlates with people:

- correctness = claim precision: the response's claims entailed by the reference;
- completeness = claim recall: the reference's claims entailed by the response;
- overall = their F1.

Beside them, a baseline every user can afford: the whole-answer similarity, the cosine of the
embedding of each response with that of its reference (RAGAS's answer similarity), stored as
the ``similarity`` scorer. Every vector is cached by model, so a second run embeds nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from workbench.claims.runner import ClaimsConfig, ClaimsReport, run_claims
from workbench.data.meta_file import RESERVED_EVALUATOR
from workbench.meta.sets import MetaSet, responses
from workbench.models.cached import default_llm
from workbench.models.embedder import CachedEmbedder
from workbench.models.embedders import LONG_ANSWERS
from workbench.models.locate import model_label
from workbench.models.openai_http import DEFAULT_TIMEOUT
from workbench.models.registry import served_model
from workbench.store.db import Store
from workbench.store.queries import load_samples

__all__ = ["MetaRunReport", "run_meta", "score_similarity", "SIMILARITY"]

#: The ``meta_scores.scorer`` of the whole-answer similarity (its metric: the embedding model's name); the
#: import refuses a baseline evaluator of this name.
SIMILARITY = RESERVED_EVALUATOR


@dataclass
class MetaRunReport(ClaimsReport):
    """What one ``meta run`` did: both responses' claim passes summed, and the similarity's embeddings."""

    claim_runs: list[int] = field(default_factory=list)
    similarity_model: str | None = None


def _add(total: MetaRunReport, part: ClaimsReport) -> None:
    total.jobs += part.jobs
    total.done += part.done
    total.errors += part.errors
    total.model_calls += part.model_calls
    total.cache_hits += part.cache_hits
    total.claims += part.claims
    total.seconds += part.seconds
    total.error_samples += part.error_samples
    total.stopped = total.stopped or part.stopped
    total.fatal = total.fatal or part.fatal
    total.claim_runs.append(part.claim_run)
    if part.embedded is not None:
        total.embedded = (total.embedded or 0) + part.embedded
        total.embeddings_cached = (total.embeddings_cached or 0) + (part.embeddings_cached or 0)


def _so_far(report: MetaRunReport, part: ClaimsReport) -> MetaRunReport:
    """``report`` with the part in progress added, for a progress tick (``report`` itself is left as it is)."""
    shown = replace(report, error_samples=list(report.error_samples), claim_runs=list(report.claim_runs))
    _add(shown, part)
    return shown


def run_meta(store: Store, meta: MetaSet, config: ClaimsConfig, *, llm=None, similarity: bool = True,
             retry_errors: bool = False, stop: threading.Event | None = None,
             progress: Callable[[int, int, MetaRunReport], None] | None = None, wait: bool = False,
             on_wait: Callable[[str], None] | None = None,
             model_options: Mapping[str, Any] | None = None) -> MetaRunReport:
    """Claim-check both runs of ``meta`` under ``config``, then (``similarity``) the whole-answer cosines.

    ``model_options`` say how the models opened here run (as :func:`~workbench.claims.runner.run_claims`).

    Resumable and cached as ``claims run`` is: a second call does no model work, and a stopped
    one (``stop``) continues where it ended. ``progress`` hears (done, total, report) over both
    responses' jobs.
    """
    config.validate()
    config.check_models(timeout=(model_options or {}).get("timeout"))
    config = config.resolved(LONG_ANSWERS)   # a long answer's claims: the embedder's threshold for them
    report = MetaRunReport(meta.name)
    own_llm = llm is None and config.needs_llm
    if own_llm:
        llm = default_llm(store, config.model, **(model_options or {}))   # loads on first call; both passes
    try:
        before = (0, 0)
        for run in meta.runs():
            offset = before

            def tick(done, total, part, offset=offset):
                if progress is not None:
                    # The responses before this one and this one's so far: its time worked (the rate's) included.
                    progress(offset[0] + done, offset[1] + total, _so_far(report, part))

            part = run_claims(store, run, config, llm=llm, retry_errors=retry_errors, stop=stop, progress=tick,
                              wait=wait, on_wait=on_wait, model_options=model_options)
            _add(report, part)
            before = (report.done + report.errors, report.jobs)
            if part.stopped or part.fatal:
                return report
    finally:
        if own_llm:
            llm.close()
    if similarity and not (stop is not None and stop.is_set()):
        embedded, cached, name = score_similarity(store, meta, config.embedding_model,
                                                  timeout=(model_options or {}).get("timeout", DEFAULT_TIMEOUT))
        report.embedded = (report.embedded or 0) + embedded
        report.embeddings_cached = (report.embeddings_cached or 0) + cached
        report.similarity_model = name
    return report


def score_similarity(store: Store, meta: MetaSet, model: str | None = None,
                     timeout: float = DEFAULT_TIMEOUT) -> tuple[int, int, str]:
    """Store each response's cosine with its reference under ``model`` (the default embedder when None).

    Returns (texts embedded now, texts read from the cache, the model's name as stored).
    """
    references = {s.sid: s.answers[0] if s.answers else "" for s in load_samples(store, meta.dataset_id)}
    pairs = responses(store, meta)
    sids = sorted(sid for sid in pairs if sid in references)
    embedder = CachedEmbedder(store, model, timeout=timeout)
    try:
        name = model_label(embedder.path) if served_model(embedder.path) else Path(str(embedder.path)).stem
        texts = [references[sid] for sid in sids] + [pairs[sid][0] for sid in sids] + [pairs[sid][1] for sid in sids]
        vectors = embedder.vectors(texts)
        embedded, cached = embedder.embedded, embedder.cached
    finally:
        embedder.close()
    n = len(sids)
    if n:
        ref, first, second = vectors[:n], vectors[n:2 * n], vectors[2 * n:]
        cosines = (np.einsum("ij,ij->i", ref, first), np.einsum("ij,ij->i", ref, second))
    rows = [(meta.id, SIMILARITY, name, sid, side + 1, float(cosines[side][i]))
            for i, sid in enumerate(sids) for side in (0, 1)]
    with store.transaction() as conn:
        conn.execute("DELETE FROM meta_scores WHERE set_id = ? AND scorer = ? AND metric = ?",
                     (meta.id, SIMILARITY, name))
        conn.executemany("INSERT INTO meta_scores (set_id, scorer, metric, sid, side, value) VALUES (?, ?, ?, ?, ?, ?)",
                         rows)
    return embedded, cached, name
