"""The ``compare`` verb: run B against run A, paired, cell by cell, with the flips attributed to a stage."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from workbench.cli.common import SCORES, SharedParents, add_bootstrap, add_json
from workbench.cli.exit_codes import FAILURE, OK
from workbench.cli.shared import emit_json, store_of
from workbench.cli.types import comma_separated
from workbench.cli.shared import print_tables

EPILOG = """\
examples:
  workbench compare demo demo-gemma3-270m
  workbench compare models/smollm2-135m models/gemma3-270m   # two models of one run
  workbench compare imported bm25 --cells k5-b128-linear --terms S_set,S_vis,S_llm
  workbench compare a b --map k5-b128-linear=k5-b256-linear
  workbench compare base candidate --fail-on-regression S_llm:0.05 --json > compare.json

Exit codes: 0 compared; 1 a --fail-on-regression gate failed; 2 the runs cannot be paired
(other datasets, no cell in common, an unknown cell or term)."""


def cmd_compare(args) -> int:
    """Compare run B with run A; exit 1 if a --fail-on-regression gate fails."""
    from workbench.compare import compare_runs, parse_gate, regressions, render_comparison
    from workbench.compare.align import parse_cell_map

    gates = [parse_gate(g) for g in args.fail_on_regression or ()]
    comparison = compare_runs(store_of(args), args.run_a, args.run_b, cells=args.cells, terms=args.terms,
                              cell_map=parse_cell_map(args.map or ()), score=args.score,
                              resamples=args.resamples, seed=args.seed)
    failed = regressions(comparison, gates)
    if args.json:
        emit_json({**asdict(comparison), "regressions": failed})
    else:
        print_tables(render_comparison(comparison, max_samples=args.show_samples))
    for line in failed:
        print(f"regression: {line}", file=sys.stderr)
    return FAILURE if failed else OK


def register(subparsers, parents: SharedParents) -> None:
    """Add ``compare`` to the CLI."""
    p = subparsers.add_parser("compare", parents=[parents.db], epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              help="compare run B with run A: paired differences, p-values, flips by stage")
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run, or RUN/MODEL: the part of a run of several "
                                                  "models that MODEL (its label) answers")
    p.add_argument("run_b", metavar="RUN_B", help="the run compared with it (B − A is reported), or RUN/MODEL")
    p.add_argument("--cells", type=comma_separated, help="only these cells of A (comma-separated; default: all "
                                                          "aligned)")
    p.add_argument("--terms", type=comma_separated,
                   help="ledger terms (default S_set,S_vis,L_iface,S_llm,Acc_hit,Acc_miss,D_rate)")
    p.add_argument("--map", action="append", metavar="A_CELL=B_CELL",
                   help="pair a cell of A with a cell of B of another id (repeatable)")
    p.add_argument("--score", choices=SCORES, default=None,
                   help="answer score for both runs (default: run A's; B's predictions are re-scored)")
    p.add_argument("--fail-on-regression", action="append", metavar="TERM:DELTA",
                   help="exit 1 if B is worse than A on TERM by more than DELTA in any cell with the 95%% CI "
                        "excluding 0 (repeatable), e.g. S_llm:0.05")
    p.add_argument("--show-samples", type=int, default=8, metavar="N",
                   help="flipped sample ids listed per cell, stage and direction (default 8; --json lists all)")
    add_bootstrap(p)
    add_json(p)
    p.set_defaults(func=cmd_compare, readonly=True)
