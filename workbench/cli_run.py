"""The ``run`` and ``resume`` verbs: generation with progress, Ctrl-C and a summary."""

from __future__ import annotations

import sys


from workbench.cli_shared import emit_json as _emit_json
from workbench.cli_shared import say


def cmd_run(args) -> int:
    """Plan a run with a model (or find it) and generate its pending jobs."""
    from workbench.cli import _store, _sweep_config
    from workbench.models.registry import GenerationConfig
    from workbench.progress import ProgressBar
    from workbench.runs.prompt import load_template
    from workbench.runs.sweep import plan_sweep
    from workbench.store.queries import get_run

    template = load_template(args.prompt_file, args.answer_format) if args.prompt_file else None
    gen = GenerationConfig(backend=args.backend, model=args.model, base_url=args.base_url, n_ctx=args.n_ctx,
                           max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed,
                           answer_format=args.answer_format,
                           **({"system": template.system, "user": template.user} if template else {}))
    gen.validate()
    store = _store(args)
    result = plan_sweep(store, _sweep_config(args), dataset=args.dataset, name=args.name, generation=gen.as_dict(),
                        progress=None if args.json else ProgressBar("plan"))
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not args.json:
        state = "planned" if result.created else "found (same config): resuming"
        print(f"run {result.run}: {state}: {result.cells} cells, {result.events:,} jobs", file=sys.stderr)
    return _execute(args, store, get_run(store, result.run))


def cmd_resume(args) -> int:
    """Continue a run's pending jobs (and failed ones with --retry-errors)."""
    from workbench.cli import _store
    from workbench.store.queries import get_run

    store = _store(args)
    return _execute(args, store, get_run(store, args.run))


def _execute(args, store, run) -> int:
    from workbench.models.registry import ExecOptions
    from workbench.models.slot import ModelSlotStopped
    from workbench.progress import ProgressBar, StopOnSigint
    from workbench.runs.executor import execute, run_stats

    bar = ProgressBar("run")

    def show(p):
        # The run overall, as the TUI and `workbench runs` count it (errors are not done).
        bar(p.done, p.total, p.completion_tokens,
            f" · {p.model_calls} generated, {p.cache_hits} cached" + (f", {p.errors} errors" if p.errors else ""),
            already=p.run_done - p.done, overall=p.run_total)

    with StopOnSigint() as interrupt:
        try:
            report = execute(store, run, opts=ExecOptions(n_threads=args.threads, n_gpu_layers=args.n_gpu_layers,
                                                          concurrency=args.concurrency, on_wait=bar.waiting,
                                                          stop=interrupt.stop),
                             retry_errors=args.retry_errors, stop=interrupt.stop, progress=None if args.json else show,
                             wait=args.wait, on_wait=say)
        except ModelSlotStopped:
            print(f"run {run.name}: stopped while waiting for the model; nothing was generated "
                  f"(`workbench resume {run.name}` continues)", file=sys.stderr)
            return 130
    stats = run_stats(store, run)
    if args.json:
        _emit_json({"execution": report, "run": stats})
    else:
        print(_run_summary(report, stats), file=sys.stderr)
    if report.fatal:
        print(f"error: {report.fatal}\nThe run stays resumable: fix the model, then "
              f"`workbench resume {run.name} --retry-errors`.", file=sys.stderr)
        return 1
    return 130 if report.stopped else 0


def _run_summary(report, stats) -> str:
    lines = []
    if report.jobs == 0 and report.stopped:
        lines.append(f"run {report.run}: stopped while waiting for the other writer, nothing done")
    elif report.jobs == 0:
        failed = f", {stats['errors']:,} failed (--retry-errors re-runs them)" if stats["errors"] else ""
        lines.append(f"run {report.run}: nothing to do ({stats['done']:,} jobs done{failed})")
    else:
        lines.append(f"run {report.run}: {report.done:,} of {report.jobs:,} jobs done in {report.seconds:,.1f}s: "
                     f"{report.model_calls:,} generated, {report.cache_hits:,} from the cache, {report.errors:,} errors"
                     + (" (stopped early; `workbench resume` continues)" if report.stopped else ""))
    for sample in report.error_samples:
        lines.append(f"  error: {sample}")
    ratio = stats["prompt_eval_ratio"]
    lines.append(f"prompt tokens evaluated: {stats['prompt_tokens_evaluated']:,} of a naive "
                 f"{stats['prompt_tokens_naive']:,}" + (f" ({ratio:.2f}×)" if ratio is not None else ""))
    return "\n".join(lines)
