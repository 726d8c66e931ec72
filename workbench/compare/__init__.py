"""Comparing two runs: paired differences of every ledger term, tests, and flips attributed to a stage.

``align`` finds what the runs share (samples, cells) and how their configurations differ;
``report`` computes the comparison; ``render`` prints it.
"""

from workbench.compare.render import render_comparison
from workbench.compare.report import Comparison, compare_runs, parse_gate, regressions

__all__ = ["Comparison", "compare_runs", "parse_gate", "regressions", "render_comparison"]
