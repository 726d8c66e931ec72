"""The CLI of sequential runs: ``run``'s stopping options and ``ledger --replay``'s what-if (docs/sequential.md)."""

from __future__ import annotations

import argparse

from workbench.cli.exit_codes import OK
from workbench.cli.shared import emit_json
from workbench.runs.sequential import DEFAULT_ALPHA, DEFAULT_PRECISION, DEFAULT_TOLERANCE

# The defaults of --alpha, --tolerance (best) and --precision, for a run and for a replay alike (the core's).
SEQUENTIAL_ALPHA, SEQUENTIAL_TOLERANCE, SEQUENTIAL_PRECISION = DEFAULT_ALPHA, DEFAULT_TOLERANCE, DEFAULT_PRECISION


def add_stop_when(parser: argparse.ArgumentParser) -> None:
    """``--stop-when``, ``--alpha``, ``--tolerance``, ``--precision``: a sequential run (docs/sequential.md)."""
    group = parser.add_argument_group(
        "stop when decided", "answer the samples in a seeded random order (--seed), in rounds across the cells "
        "still asked, and stop asking a cell once what is said of it is proved; every interval holds at any "
        "stopping time, for the full dataset's values")
    group.add_argument("--stop-when", choices=("best", "precision"),
                       help="best: ask until the winner is proved within --tolerance of the best cell (each other "
                            "cell proved worse, or unable to beat it by more); precision: ask each cell until its "
                            "interval is within ±--precision")
    group.add_argument("--alpha", type=float, metavar="A",
                       help=f"the chance that anything the run proves is wrong (the winner further than E from "
                            f"the best, a cell's interval missing), however long it ran (default {SEQUENTIAL_ALPHA:g})")
    group.add_argument("--tolerance", type=float, metavar="E",
                       help=f"best: a cell that cannot beat the leader by more than E pauses, and is asked again "
                            f"if the leader changes (default {SEQUENTIAL_TOLERANCE:g})")
    group.add_argument("--precision", type=float, metavar="E",
                       help=f"precision: the half-width each cell's interval is asked until (default "
                            f"{SEQUENTIAL_PRECISION:g})")



def sequential_of(args):
    """The :class:`~workbench.runs.sequential.SequentialConfig` the options ask for, or None; a stopping option
    without the rule it belongs to is refused, naming it."""
    from workbench.errors import BadInput
    from workbench.runs.sequential import SequentialConfig

    rule = args.stop_when
    for option, value, belongs in (("--alpha", args.alpha, ("best", "precision")),
                                   ("--tolerance", args.tolerance, ("best",)),
                                   ("--precision", args.precision, ("precision",))):
        if value is not None and rule not in belongs:
            raise BadInput(f"{option}: only with --stop-when {' or '.join(belongs)}")
    if rule is None:
        return None
    if args.oracle:
        raise BadInput("--stop-when: a sequential run weighs its grid cells; the oracle controls (--oracle) would "
                       "be asked on every sample: run them in a run of their own")
    width = args.tolerance if rule == "best" else args.precision
    default = SEQUENTIAL_TOLERANCE if rule == "best" else SEQUENTIAL_PRECISION
    config = SequentialConfig(rule, alpha=args.alpha if args.alpha is not None else SEQUENTIAL_ALPHA,
                              tolerance=width if width is not None else default, seed=args.seed)
    config.validate()
    return config



def add_replay(parser: argparse.ArgumentParser) -> None:
    """``ledger``'s ``--replay`` and its settings (``--seed`` is the ledger's)."""
    replay = parser.add_argument_group(
        "what-if", "--replay applies a stopping rule (as `run --stop-when` would) to a complete run's recorded answers "
        "in R seeded random orders (--seed): the share of model calls it would have used, how often it named the "
        "full run's best cell, how often every interval covered the full run's value")
    replay.add_argument("--replay", choices=("best", "precision"), help="the rule to replay")
    replay.add_argument("--alpha", type=float, default=SEQUENTIAL_ALPHA, metavar="A",
                        help=f"the chance that any interval misses, over the whole run (default {SEQUENTIAL_ALPHA:g})")
    replay.add_argument("--tolerance", type=float, default=SEQUENTIAL_TOLERANCE, metavar="E",
                        help=f"best: the tie tolerance (default {SEQUENTIAL_TOLERANCE:g})")
    replay.add_argument("--precision", type=float, default=SEQUENTIAL_PRECISION, metavar="E",
                        help=f"precision: the target half-width (default {SEQUENTIAL_PRECISION:g})")
    replay.add_argument("--replays", type=int, default=200, metavar="R",
                        help="random orders replayed (default 200; the benchmark uses 1000)")


def replay_ledger(args, store) -> int:
    """``ledger RUN --replay best|precision``: what the rule would have done on this complete run."""
    from workbench.runs.replay import replay
    from workbench.runs.sequential import complete_answers
    from workbench.store.queries import get_run

    run = get_run(store, args.run)
    cells, scores, groups = complete_answers(store, run)
    width = args.tolerance if args.replay == "best" else args.precision
    summary = replay(scores, groups, args.replay, args.alpha, width, args.seed, args.replays)
    if args.json:
        emit_json({"run": run.name, "cell_ids": cells, **summary.as_dict()})
        return OK
    s = summary
    what = "tolerance" if s.rule == "best" else "half-width"
    lo, mid, hi = s.call_share_quantiles
    lines = [f"replay of --stop-when {s.rule} (α {s.alpha:g}, {what} {s.tolerance:g}) over {s.replays:,} random "
             f"orders (seed {s.seed}) of run {run.name}: {s.population:,} samples × {s.cells} cells",
             f"  model calls used   {s.call_share_mean:.3f} of the full run's {s.full_calls:,} (mean; median {mid:.3f}, "
             f"5–95% {lo:.3f}–{hi:.3f})"]
    if s.named_best is not None:
        lines.append(f"  named the best     {s.named_best:,} of {s.replays:,} ({s.named_best_share:.3f}): a cell within "
                     f"{s.tolerance:g} of the full run's best S_llm")
    if s.labels_right is not None:
        lines.append(f"  words proved true  {s.labels_right:,} of {s.replays:,}: every worse cell below the cell it "
                     f"names and every tied one at most {s.tolerance:g} above it, in the full run")
    clo, chi = s.coverage_interval
    lines.append(f"  intervals covered  {s.covered:,} of {s.replays:,} ({s.coverage:.3f} [{clo:.3f}, {chi:.3f}], "
                 f"Wilson 95%): every cell's interval at its stop held its full-run S_llm (promised ≥ {1 - s.alpha:g})")
    if s.differences_covered is not None:
        lines.append(f"  differences held   {s.differences_covered:,} of {s.replays:,}: every stop's versus interval "
                     f"held the full run's difference")
    lines.append("  per cell (mean answered, how it stopped):")
    wide = max(map(len, cells), default=0)
    for cell, answered, stopped in zip(cells, s.answered_mean, s.stopped):
        lines.append(f"    {cell:<{wide}}  {answered:,.1f} of {s.population:,}  "
                     + ", ".join(f"{why} {n:,}" for why, n in stopped.items()))
    print("\n".join(lines))
    return OK
