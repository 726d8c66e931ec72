"""Verbs reading a run's ledger: the ledger table (or a paired difference of two cells), the
plots, and the export of events or the ledger as CSV or JSONL."""

from __future__ import annotations

import argparse
import json
import sys

from workbench.cli.common import SCORES, SharedParents, add_bootstrap, add_out
from workbench.cli.exit_codes import FAILURE, OK
from workbench.cli.sequential import add_replay, replay_ledger
from workbench.cli.shared import emit_json, say, store_of, write_out
from workbench.cli.shared import print_tables
from workbench.terminal import write_control
from workbench.tables import fmt_estimate, ledger_tables


LEDGER_EPILOG = """\
examples:
  workbench ledger demo
  workbench ledger demo --exclude-tag annotation-error --json > ledger.json
  workbench ledger demo --diff k5-b128-linear k20-b128-linear --term S_llm
  workbench ledger demo --verify

The ledger is incremental: the first read of a run builds its state (the sums behind every
term and interval; seconds on a 5M-event run) and saves it in the database. Later reads
apply only the events changed since, logged by SQLite triggers. --verify recomputes the
ledger from scratch and compares. Exit codes: 0 printed (or --verify found no difference);
1 --verify found a difference; 2 no such run, cell or term."""


def _report(args, store):
    """The ledger of ``args.run`` with the report options (score, bootstrap, excluded tags)."""
    from workbench.runs.report import run_ledger
    from workbench.store.queries import get_run

    return run_ledger(store, get_run(store, args.run), score=args.score, resamples=args.resamples, seed=args.seed,
                      exclude_tags=getattr(args, "exclude_tag", None) or ())


def cmd_ledger(args) -> int:
    """Print the dissipation ledger, or with --diff the paired difference of two cells."""
    from workbench.data.exports import ledger_records

    store = store_of(args)
    if args.verify:
        return _verify(args, store)
    if args.replay:
        return replay_ledger(args, store)
    if args.diff:
        from workbench.runs.report import cell_difference
        from workbench.store.queries import get_run

        a, b = args.diff
        est = cell_difference(store, get_run(store, args.run), a, b, args.term, score=args.score,
                              resamples=args.resamples, seed=args.seed, exclude_tags=args.exclude_tag or ())
        from workbench.runs.sequential import sequential_status

        status = sequential_status(store, get_run(store, args.run))
        decided = None if status is None else status.pair_line(a, b)
        if args.json:
            emit_json({"a": a, "b": b, "term": args.term, "difference": est, "sequential": decided})
        else:
            print(f"{args.term}({a}) − {args.term}({b}) = {fmt_estimate(est)}  (paired bootstrap, 95%"
                  + (", over the samples both answered; not valid under stopping)" if decided else ")"))
            if decided:
                print(decided)
        return OK
    report = _report(args, store)
    if args.json:
        # The JSON stays one object per cell; what the table's header warns of is said on stderr.
        for warning in report.warnings:
            say(f"warning: {warning}")
        emit_json(ledger_records(report))
    else:
        print_tables(ledger_tables(report))
    return OK


def _verify(args, store) -> int:
    """Compare the run's incremental ledger state with a from-scratch build; exit 1 on any difference."""
    from workbench.runs.report import verify_ledger
    from workbench.store.queries import get_run

    run = get_run(store, args.run)
    check = verify_ledger(store, run, score=args.score, seed=args.seed)
    if args.json:
        emit_json({"run": run.name, "ok": check.ok, "watermark": check.watermark, "groups": check.groups,
                   "resamples": check.resamples, "max_point_diff": check.max_point_diff,
                   "max_replicate_diff": check.max_replicate_diff, "differences": check.differences})
    else:
        what = (f"run {run.name}: the incremental ledger state ({check.groups} groups, {check.resamples:,} resamples,"
                f" up to change {check.watermark:,})")
        if check.ok:
            print(f"{what} equals a from-scratch computation: no difference (largest relative difference"
                  f" {check.max_point_diff:.1g} in point sums, {check.max_replicate_diff:.1g} in replicate sums)")
        else:
            print(f"{what} differs from a from-scratch computation:")
            for line in check.differences:
                print(f"  {line}")
    return OK if check.ok else FAILURE


def cmd_plot(args) -> int:
    """Draw the main (K sweep) or the oracle (B sweep) plot, on the terminal or to a file."""
    from workbench import plots

    store = store_of(args)
    report = _report(args, store)
    colors = args.out is None and sys.stdout.isatty()
    if args.oracle:
        figure = plots.oracle_plot(report.oracle, colors=colors, width=args.width,
                                   height=args.height)
    else:
        budgets = sorted({r["budget"] for r in report.rows})
        formats = list(dict.fromkeys(r["format"] for r in report.rows))
        budget = args.budget or budgets[-1]
        fmt = args.format or ("linear" if "linear" in formats else formats[0])
        figure = plots.main_plot(report.rows, budget=budget, fmt=fmt, colors=colors,
                                 width=args.width, height=args.height)
    if args.out and plots.image_format(args.out):
        _write_image(args, report)
    elif args.out:
        write_out(args.out, plots.file_text(figure, args.out), "the plot", force=args.force)
    elif colors:
        write_control(sys.stdout, figure + "\n")   # plotext's colours: the terminal is to obey them
    else:
        print(figure)
    return OK


def _write_image(args, report) -> None:
    """``plot --out FILE.svg|png``: the same figure drawn by matplotlib, with the intervals as error bars."""
    from workbench import figures, plots

    fmt = plots.image_format(args.out)
    if args.oracle:
        fig = figures.oracle_figure(report.oracle)
    else:
        budgets = sorted({r["budget"] for r in report.rows})
        formats = list(dict.fromkeys(r["format"] for r in report.rows))
        fig = figures.main_figure(report.rows, budget=args.budget or budgets[-1],
                                  fmt=args.format or ("linear" if "linear" in formats else formats[0]))
    write_out(args.out, figures.image_bytes(fig, fmt), f"the plot ({fmt})", force=args.force)


EXPORT_EPILOG = """\
examples:
  workbench export events demo --out events.parquet
  workbench export ledger demo --out ledger.csv
  workbench export samples demo --cell k5-b128-linear --quadrant dissipation --out dissipation.jsonl
  workbench export claims demo --out claims.parquet
  workbench export claims rc --to ragchecker --out checking_outputs.json   (RAGChecker's own format)
  duckdb -c "SELECT format, avg(S_llm) FROM 'ledger.parquet' WHERE kind = 'retrieval' GROUP BY 1"

--format defaults to the file's extension: .csv, .parquet or .pq, and jsonl for anything else.
A Parquet file holds the frame of the same name in workbench.analysis. Its columns are typed,
undefined values are nulls, and it has no index column, so DuckDB, polars and pandas read it
as it is. A Parquet ledger has a kind column: a retrieval row per cell, an oracle row per oracle
budget and a noise row per linear cell paired with it (the CSV and JSONL exports nest those). The file is written to a temp file beside it and renamed over it; an existing
file is replaced only with --force, and the database, any SQLite file, a link, a directory or a
device is refused (exit 2)."""


def cmd_export(args) -> int:
    """Write a run's events, ledger, one cell's samples or its verified claims as CSV, JSONL or Parquet."""
    from workbench.analysis.export import ExportOptions, check_export, export_parquet, export_records
    from workbench.data.exports import parquet_chunks, render
    from workbench.data.outfile import is_stdout, write_atomic
    from workbench.store.queries import get_run

    store = store_of(args)
    run = get_run(store, args.run)
    fmt = args.format or _format_of(args.out)
    if fmt == "ragchecker":
        return _export_ragchecker(args, store, run)
    options = ExportOptions(score=args.score, resamples=args.resamples, seed=args.seed,
                            exclude_tags=args.exclude_tag or (), cell=args.cell, quadrant=args.quadrant or "all",
                            claim_run=args.claim_run)
    check_export(store, args.what, run, options)
    chunks = (parquet_chunks(*export_parquet(store, args.what, run, options)) if fmt == "parquet"
              else render(export_records(store, args.what, run, options), fmt))
    size = write_atomic(args.out, chunks, force=args.force)
    if not is_stdout(args.out):
        print(f"wrote {args.out} ({size:,} bytes, {fmt})")
    return OK


def _export_ragchecker(args, store, run) -> int:
    """``export claims --to ragchecker``: one cell's checked answers as RAGChecker's checking-outputs JSON."""
    from workbench.analysis.claims import chosen_claim_run
    from workbench.claims.ragchecker_doc import checking_outputs
    from workbench.data.outfile import is_stdout, write_atomic
    from workbench.runs.report import first_cell

    if args.what != "claims":
        raise ValueError(f"--to ragchecker writes claims (`workbench export claims {run.name} --to ragchecker`), "
                         f"not {args.what}")
    if args.quadrant:
        raise ValueError("--quadrant applies to `export samples` only")
    claim_run = chosen_claim_run(store, run, args.claim_run)
    if claim_run is None:
        raise ValueError(f"run {run.name!r} has no claim run yet (`workbench claims run {run.name}`)")
    cell = args.cell or first_cell(store, run)
    document, left_out = checking_outputs(store, run, claim_run, cell)
    data = json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"
    write_atomic(args.out, [data], force=args.force)
    if not is_stdout(args.out):
        print(f"wrote {args.out} ({len(data):,} bytes, ragchecker): claim run {claim_run}, cell {cell}, "
              f"{len(document['results']):,} answers")
    if left_out:
        print(f"warning: {left_out:,} answers of cell {cell} are not verified (or failed) and are not in the file",
              file=sys.stderr)
    return OK


def _format_of(out: str) -> str:
    """The export format the file name implies: csv, parquet, or else jsonl."""
    suffix = str(out).lower().rsplit(".", 1)[-1] if "." in str(out) else ""
    return {"csv": "csv", "parquet": "parquet", "pq": "parquet"}.get(suffix, "jsonl")


def _report_parent() -> argparse.ArgumentParser:
    """How a ledger is computed: the answer score, the bootstrap, samples left out by tag."""
    report = argparse.ArgumentParser(add_help=False)
    report.add_argument("--score", choices=SCORES, default=None, help="answer score (default: the run's own)")
    add_bootstrap(report)
    report.add_argument("--exclude-tag", action="append", metavar="TAG",
                        help="leave out samples carrying TAG (repeatable), e.g. annotation-error")
    return report


def register(subparsers, parents: SharedParents) -> None:
    """Add ``ledger``, ``plot`` and ``export`` to the CLI."""
    report = _report_parent()

    p = subparsers.add_parser("ledger", parents=[parents.db, report], help="print the dissipation ledger with 95%% CIs",
                              epilog=LEDGER_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    p.add_argument("--json", action="store_true",
                   help="one object per cell, every term with lo/hi (warnings go to stderr)")
    p.add_argument("--diff", nargs=2, metavar=("CELL_A", "CELL_B"), help="paired-bootstrap difference of two cells")
    p.add_argument("--term", default="S_vis", help="term for --diff (default S_vis)")
    p.add_argument("--verify", action="store_true",
                   help="recompute the ledger from scratch and report any difference from its incremental "
                        "state (exit 1 if there is one)")
    add_replay(p)
    p.set_defaults(func=cmd_ledger, readonly=True)

    p = subparsers.add_parser("plot", parents=[parents.db, report],
                              help="draw the main (K sweep) or oracle (B sweep) plot")
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    p.add_argument("--budget", type=int, help="B for the main plot (default: the largest)")
    p.add_argument("--format", help="format for the main plot (default: linear, else the first)")
    p.add_argument("--oracle", action="store_true", help="draw the oracle plot instead")
    add_out(p, "write to a file instead (atomically): .svg or .png as an image drawn with matplotlib (with the "
               "95%% CIs as error bars), .html or .htm as a standalone page, anything else as plain text (no "
               "terminal colours)", required=False)
    p.add_argument("--width", type=int, default=78, help="columns (default 78)")
    p.add_argument("--height", type=int, default=20, help="rows (default 20)")
    p.set_defaults(func=cmd_plot, readonly=True)

    p = subparsers.add_parser("export", parents=[parents.db, report], epilog=EXPORT_EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              help="write events, the ledger, a cell's samples or verified claims as CSV, JSONL "
                                   "or Parquet")
    p.add_argument("what", choices=("events", "ledger", "samples", "claims"))
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    add_out(p, "file to write, or - for stdout")
    p.add_argument("--format", "--to", dest="format", choices=("csv", "jsonl", "parquet", "ragchecker"),
                   help="default: from the file extension (.csv, .parquet, .pq), else jsonl; ragchecker (claims "
                        "only): RAGChecker's checking-outputs JSON of one cell, which its metric code reads")
    p.add_argument("--cell", help="samples, and claims --to ragchecker: the cell (default: the run's first)")
    p.add_argument("--quadrant", help="samples: only this quadrant of the samples view: dissipation, leakage, "
                                      "interface, retrieval-miss, right, unscored, error, unsupported (default: all)")
    p.add_argument("--claim-run", type=int, help="claims: the claim run id (default: the latest)")
    p.set_defaults(func=cmd_export, readonly=True)
