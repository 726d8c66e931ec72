"""``workbench report``: one self-contained HTML page of a run (and its comparison with another)."""

from __future__ import annotations

import argparse

from workbench.cli.common import SharedParents, add_bootstrap, add_out
from workbench.cli.exit_codes import OK
from workbench.cli.shared import store_of, write_out

EPILOG = """\
examples:
  workbench report demo --out report.html
  workbench report demo --compare demo-gemma3-270m --out compare.html
  workbench report demo --cases 10 --exclude-tag annotation-error --out report.html

The page opens offline in any browser: inline CSS and SVG figures, nothing fetched. It holds
the run's configuration, its ledger with 95% CIs, the main and oracle figures, the claim
metrics when a claim run exists, the triaged samples (tags, notes), and per quadrant a few
cases of the highlighted cell (largest budget, linear, largest K) with their evidence window,
prompt and output, collapsed. With --compare, the comparison and its flips."""


def cmd_report(args) -> int:
    """Write the run's report as one HTML file."""
    from workbench.report import ReportOptions, build_report
    from workbench.store.queries import get_run

    store = store_of(args)
    run = get_run(store, args.run)
    options = ReportOptions(resamples=args.resamples, seed=args.seed, cases=args.cases,
                            exclude_tags=tuple(args.exclude_tag or ()))
    page = build_report(store, run, compare_with=args.compare, options=options)
    write_out(args.out, page, f"the report of run {run.name}", force=args.force)
    return OK


def register(subparsers, parents: SharedParents) -> None:
    """Add ``report`` to the CLI."""
    p = subparsers.add_parser("report", parents=[parents.db], epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              help="write one self-contained HTML report of a run (opens offline)")
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    add_out(p, "the HTML file to write (atomically), or - for stdout")
    p.add_argument("--compare", metavar="RUN_B", help="add the comparison of RUN_B against this run")
    p.add_argument("--cases", type=int, default=3, metavar="N",
                   help="cases shown per quadrant (dissipation, leakage, interface; default 3)")
    p.add_argument("--exclude-tag", action="append", metavar="TAG", help="leave out samples carrying TAG")
    add_bootstrap(p)
    p.set_defaults(func=cmd_report, readonly=True)
