"""``claims check``: verify one answer against a context the user names, outside any run."""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from workbench.claims.decompose import decompose
from workbench.claims.runner import open_verifiers
from workbench.claims.vote import judge_claim, summarize
from workbench.store.db import Store
from workbench.store.queries import get_dataset


def context_units(store: Store, *, dataset: str | None = None, doc: str | None = None, units: str | None = None,
                  texts: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """(labels, texts) of the context: a corpus document's chunks, listed unit labels, and/or raw passages."""
    labels: list[str] = []
    out: list[str] = []
    if doc or units:
        ds = get_dataset(store, dataset)
        prefix = "T" if ds.unit_kind == "triple" else "C"
        rows = []
        if doc:
            rows = store.conn.execute("SELECT uid, head, relation, tail, text FROM units WHERE dataset_id = ?"
                                      " AND doc_id = ? ORDER BY uid", (ds.id, doc)).fetchall()
            if not rows:
                raise ValueError(f"--doc: {doc!r} is not a document of {ds.name!r}")
        for label in (units or "").split(","):
            label = label.strip()
            if not label:
                continue
            if not label[1:].isdigit() or label[0] not in "TC":
                raise ValueError(f"--units: {label!r} is not a unit label such as {prefix}12")
            row = store.conn.execute("SELECT uid, head, relation, tail, text FROM units WHERE dataset_id = ?"
                                     " AND uid = ?", (ds.id, int(label[1:]))).fetchone()
            if row is None:
                raise ValueError(f"--units: {label} is not in {ds.name!r}")
            rows.append(row)
        for uid, head, relation, tail, text in rows:
            labels.append(f"{prefix}{uid}")
            out.append(text if text is not None else f"{head} | {relation} | {tail}")
    for i, text in enumerate(texts or (), 1):
        labels.append(f"X{i}")
        out.append(text)
    if not out:
        raise ValueError("give a context: --doc or --units (with --dataset), or --context TEXT")
    return labels, out


def check_answer(store: Store, answer: str, labels: Sequence[str], texts: Sequence[str], config, *,
                 question: str = "", model_options: Mapping[str, Any] | None = None, llm=None) -> dict:
    """Decompose ``answer``, verify every claim against ``texts`` and summarize, as ``answer_claims`` does.

    ``model_options`` say how the models opened here run (:func:`~workbench.claims.runner.open_verifiers`).
    """
    from workbench.models.cached import default_llm

    config.validate()
    config.check_models(timeout=(model_options or {}).get("timeout"))
    config = config.resolved()
    own = llm is None and config.needs_llm
    if own:
        llm = default_llm(store, config.model, **(model_options or {}))
    start = time.perf_counter()
    opened: list = []
    try:
        verifiers, opened = open_verifiers(store, config, llm, model_options=model_options)
        kw = {"long_clause": config.long_clause} if config.decomposer == "hybrid" else {}
        claims = decompose(answer, config.decomposer, llm, **kw)
        results = [judge_claim(c, {v.name: v.verify(c.text, texts, question=question) for v in verifiers},
                               config.ties) for c in claims]
        summary = summarize(answer, results, reject_below=config.reject_below)
    finally:
        calls, hits = (llm.model_calls, llm.cache_hits) if llm is not None else (0, 0)
        for other in opened:
            calls, hits = calls + other.model_calls, hits + other.cache_hits
            other.close()
        if own:
            llm.close()
    rows = []
    for i, r in enumerate(results):
        best = None
        if r.best_unit is not None:
            best = {"label": labels[r.best_unit], "score": r.best_score, "text": texts[r.best_unit]}
        rows.append({"idx": i, "text": r.claim.text, "span": None if r.claim.start is None
                     else [r.claim.start, r.claim.end], "source": r.claim.source, "supported": r.supported,
                     "best_unit": best,
                     "verifiers": {name: {"supported": any(v.supported for v in vs),
                                          "score": max((v.score for v in vs), default=0.0)}
                                   for name, vs in r.verdicts.items()}})
    return {"answer": answer, "claims": rows, "n_claims": len(rows), "n_supported": sum(r.supported for r in results),
            "support_ratio": summary.support_ratio, "rejected": summary.rejected,
            "filtered_answer": summary.filtered_answer, "seconds": time.perf_counter() - start,
            "model_calls": calls, "cache_hits": hits}
