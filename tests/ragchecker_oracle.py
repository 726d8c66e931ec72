"""RAGChecker's own metric code as a test oracle.

The ``ragchecker`` package (pinned in requirements-oracles.txt, installed without its
dependencies) imports its evaluator, and with it refchecker and torch, from its ``__init__``.
Its metric code needs neither: ``container.py`` (the document's dataclasses) and
``computation.py`` (one function per metric). This loads those two modules only, under a bare
package, and computes what RAGChecker's evaluator would: every metric per result, and the
overall figures as its ``evaluate`` aggregates them (the mean over all results × 100, which it
rounds to one decimal; unrounded here, ``round(x, 1)`` gives its printed figure).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import numpy as np


def _load():
    spec = importlib.util.find_spec("ragchecker")
    if spec is None:
        raise ImportError("the ragchecker package is missing: `just install` installs the test oracles "
                          "(requirements-oracles.txt)")
    name = "_ragchecker_oracle"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules[name] = package
    container = importlib.import_module(f"{name}.container")
    computation = importlib.import_module(f"{name}.computation")
    metrics = importlib.import_module(f"{name}.metrics")
    return container, computation, metrics


def ragchecker_figures(document: str) -> tuple[list[dict[str, float]], dict[str, dict[str, float]]]:
    """(per result: every metric, by RAGChecker's code; overall: per group, mean × 100, unrounded) of a
    checking-outputs JSON document, as RAGChecker reads it (``RAGResults.from_json``)."""
    container, computation, metrics = _load()
    results = container.RAGResults.from_json(document)
    per_result = []
    for result in results.results:
        result.metrics = {}
        for evaluate in computation.METRIC_FUNC_MAP.values():
            evaluate(result)
        per_result.append({k: float(v) for k, v in result.metrics.items()})
    overall = {group: {m: float(np.mean([r[m] for r in per_result]) * 100) for m in names}
               for group, names in metrics.METRIC_GROUP_MAP.items() if group != metrics.all_metrics}
    return per_result, overall
