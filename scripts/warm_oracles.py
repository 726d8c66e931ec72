"""Compile the test oracle ranx's numba kernels once, when the environment is installed.

ranx compiles its numba code on first use, for each type it meets, and caches it on disk beside
the package (or in ``NUMBA_CACHE_DIR``): a fresh environment's first test run spent about 120 s
of CPU compiling, every run after it none. `just install` runs this once, as pip compiles a
package's .pyc files, so a fresh clone's tests start from the cache. The metrics are the ones
the suite compares (``workbench.metrics.ir``), at its k, and the ids have the one width
tests/test_ir_metrics.py gives ranx (``q0000``, ``d0000``): an id array's width is part of its type.
"""

from __future__ import annotations

import ranx

from workbench.metrics.ir import METRICS, ranx_name

KS = (1, 3, 5, 10)


def main() -> None:
    """Evaluate every metric at every k on a small set: each kernel compiles, and is cached."""
    qrels = ranx.Qrels.from_dict({"q0000": {"d0000": 1, "d0001": 2}, "q0001": {"d0002": 1}, "q0002": {"d0003": 1}})
    run = ranx.Run.from_dict({"q0000": {"d0000": 0.5, "d0004": 0.5, "d0001": 0.1}, "q0001": {"d0002": 1.0}})
    ranx.evaluate(qrels, run, [ranx_name(m, k) for m in METRICS for k in KS], make_comparable=True)


if __name__ == "__main__":
    main()
