"""Every model option is checked before anything is written, and a device is never read.

Each verb that takes a model file (a generator, an embedding model, an nli judge) is given
each kind of file that cannot serve: missing, empty, text, a real GGUF cut short (in its
header, or in its weights), a directory, ``/dev/zero``, a FIFO, a zip that is not one,
headers crafted to declare more than the file holds, and a real GGUF of the other kind (an
embedding model where a generator is due, and the reverse). Each is refused in one line
naming the option, with exit 2 and no traceback, before the store is written: every row of
every table is the same after. No model is loaded; the real GGUFs' headers are read.
"""

from __future__ import annotations

import argparse
import builtins
import io
import json
import os
import re
import shutil
import socket
import struct
import sys
import time
from pathlib import Path

import pytest

from conftest import SAMPLE_META, copy_db, every_row, write_jsonl, write_tiny_kg
from workbench.cli import main
from workbench.cli.main import build_parser
from workbench.data.corpus import import_corpus
from workbench.data.importer import import_dataset
from workbench.data.meta_import import import_meta
from workbench.data.predictions import export_prompts, import_predictions
from workbench.kg.importer import import_kg
from workbench.models.base import ModelError
from workbench.models.bert_gguf import minilm_model
from workbench.models.check import check_model
from workbench.models.gguf import GGUFError, check_gguf, read_header
from workbench.models.locate import default_model_path
from workbench.retrieval.evaluate import filename_questions
from workbench.retrieval.runs import retrieve
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run
from workbench.tui.screens.run_form import DEFAULTS, FormError, describe_plan

ANSWER = "Kismet was directed by William Dieterle."
CONTEXT = "Kismet is a 1944 film directed by William Dieterle."
CHECK = ["claims", "check", ANSWER, "--context", CONTEXT, "--decomposer", "rule"]

# (verb, option) → (role, the command that uses that option's model). Each command would
# otherwise write: a run, a claim run and its jobs, retrieval rows, a relevance run, a dedup
# run, a SearChain run (or, for `claims check`, cached vectors and model calls).
PROBES = {
    ("run", "--model"): ("generator", ["run", "films", "--k", "1", "--budget", "64", "--format", "linear",
                                       "--name", "probe"]),
    ("claims run", "--model"): ("generator", ["claims", "run", "answered", "--verifiers", "llm_judge"]),
    ("claims run", "--nli-model"): ("generator", ["claims", "run", "answered", "--verifiers", "nli",
                                                  "--decomposer", "rule"]),
    ("claims run", "--embedding-model"): ("embedding", ["claims", "run", "answered", "--verifiers", "embedding",
                                                        "--decomposer", "rule"]),
    ("claims check", "--model"): ("generator", [*CHECK, "--verifiers", "llm_judge"]),
    ("claims check", "--nli-model"): ("generator", [*CHECK, "--verifiers", "nli"]),
    ("claims check", "--embedding-model"): ("embedding", [*CHECK, "--verifiers", "embedding"]),
    ("retrieve", "--embedding-model"): ("embedding", ["retrieve", "films", "--retriever", "dense", "--name", "probe"]),
    ("retrieve", "--dense-model"): ("embedding", ["retrieve", "films", "--name", "probe"]),
    ("retrieval judge", "--model"): ("generator", ["retrieval", "judge", "notes", "--k", "1"]),
    ("questions generate", "--model"): ("generator", ["questions", "generate", "notes", "--strategy", "llm"]),
    ("dedup run", "--model"): ("generator", ["dedup", "run", "kg", "--name", "probe"]),
    ("dedup run", "--embedding-model"): ("embedding", ["dedup", "run", "kg", "--modes", "embedding",
                                                       "--name", "probe"]),
    ("searchain run", "--model"): ("generator", ["searchain", "run", "films", "--name", "probe"]),
    ("meta run", "--model"): ("generator", ["meta", "run", "pairs", "--verifiers", "llm_judge"]),
    ("meta run", "--nli-model"): ("generator", ["meta", "run", "pairs", "--verifiers", "nli"]),
    ("meta run", "--embedding-model"): ("embedding", ["meta", "run", "pairs"]),
}

BAD_FILES = ["missing", "empty", "text", "cut in its header", "cut in its weights", "directory", "/dev/zero",
             "FIFO", "fake zip", "a billion billion keys", "an array of 2^60 strings", "a 4 EiB string",
             "arrays nested 10,000 deep", "the other kind of model",
             # Whole headers that llama.cpp cannot load: only loading the model finds them.
             "a 96-byte llama header", "an unknown architecture", "a tensor-less bert header"]


def model_options() -> set[tuple[str, str]]:
    """Every (verb, option) of the CLI whose option names a model: what PROBES must cover."""
    found = set()

    def walk(parser: argparse.ArgumentParser, verb: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*verb, name))
            found.update((" ".join(verb), o) for o in action.option_strings if "model" in o)

    walk(build_parser(), ())
    return found


def crafted(n_tensors: int, n_kv: int, body: bytes) -> bytes:
    """A GGUF v3 header declaring ``n_tensors`` and ``n_kv``, then ``body`` and a little padding."""
    return struct.pack("<4sIQQ", b"GGUF", 3, n_tensors, n_kv) + body + b"\0" * 64


def key(name: str) -> bytes:
    return struct.pack("<Q", len(name)) + name.encode()


def architecture_only(architecture: str) -> bytes:
    """A whole GGUF v3 header of 96 bytes: no tensors, one key, ``general.architecture``."""
    return crafted(0, 1, key("general.architecture") + struct.pack("<IQ", 8, len(architecture)) + architecture.encode())


def renamed_architecture(gguf: bytes, new: bytes) -> bytes:
    """A real model's bytes with its architecture's name replaced by another of the same length."""
    at = gguf.index(b"general.architecture") + len("general.architecture") + 4 + 8
    old = gguf[at:at + len(new)]
    return gguf[:at] + new + gguf[at + len(old):]


def write_bad_files(root: Path, real: dict[str, Path]) -> dict[str, dict[str, str]]:
    """For each role, the path standing for each of BAD_FILES."""
    root.mkdir()
    (root / "empty.gguf").write_bytes(b"")
    (root / "notes.gguf").write_text("a model? no: a note.\n", encoding="utf-8")
    (root / "directory").mkdir()
    os.mkfifo(root / "pipe.gguf")
    (root / "model.zip").write_bytes(b"PK\x03\x04" + b"not a zip at all" * 8)
    (root / "keys.gguf").write_bytes(crafted(0, 2 ** 63, b""))
    (root / "strings.gguf").write_bytes(crafted(0, 1, key("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2 ** 60)))
    (root / "string.gguf").write_bytes(crafted(0, 1, struct.pack("<Q", 2 ** 62)))
    (root / "nested.gguf").write_bytes(crafted(0, 1, key("a") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 10_000))
    (root / "llama96.gguf").write_bytes(architecture_only("llama")[:96])
    (root / "bert0.gguf").write_bytes(architecture_only("bert")[:96])
    (root / "xyzzy.gguf").write_bytes(renamed_architecture(real["generator"].read_bytes(), b"xyzzy"))
    files = {}
    for role, other in (("generator", "embedding"), ("embedding", "generator")):
        whole = real[role].read_bytes()
        (root / f"{role}-header.gguf").write_bytes(whole[:4096])
        (root / f"{role}-weights.gguf").write_bytes(whole[:len(whole) // 2])
        files[role] = {"missing": str(root / "absent.gguf"), "empty": str(root / "empty.gguf"),
                       "text": str(root / "notes.gguf"), "cut in its header": str(root / f"{role}-header.gguf"),
                       "cut in its weights": str(root / f"{role}-weights.gguf"),
                       "directory": str(root / "directory"), "/dev/zero": "/dev/zero",
                       "FIFO": str(root / "pipe.gguf"), "fake zip": str(root / "model.zip"),
                       "a billion billion keys": str(root / "keys.gguf"),
                       "an array of 2^60 strings": str(root / "strings.gguf"),
                       "a 4 EiB string": str(root / "string.gguf"),
                       "arrays nested 10,000 deep": str(root / "nested.gguf"),
                       "the other kind of model": str(real[other]),
                       "a 96-byte llama header": str(root / "llama96.gguf"),
                       "an unknown architecture": str(root / "xyzzy.gguf"),
                       "a tensor-less bert header": str(root / "bert0.gguf")}
    return files


@pytest.fixture(scope="module", autouse=True)
def one_parser():
    """``main`` parses with one argparse tree for the module, built once: the CLI builds its ~70 verb parsers on
    every call (a tenth of a second), and this module calls it some 330 times. Parsing leaves a parser as it
    was, so each call parses as a fresh process's would."""
    parser = build_parser()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys.modules["workbench.cli.main"], "build_parser", lambda: parser)   # the module, not main()
        yield


@pytest.fixture(scope="module")
def template(tmp_path_factory, model_cache):
    """A small real database that every probed verb could write to (built once), and the bad files of each role."""
    root = tmp_path_factory.mktemp("model-options")
    with pytest.MonkeyPatch.context() as env:   # the session's model cache, as every test's
        env.setenv("WORKBENCH_MODEL_CACHE", str(model_cache))
        real = {"generator": default_model_path(), "embedding": minilm_model()}
    files = write_bad_files(root / "files", real)
    store = open_store(root / "probe.db")
    try:
        data = root / "films"
        data.mkdir()
        kb = [["Kismet", "directed_by", "William Dieterle"], ["Kismet", "release_year", "1944"],
              ["Rosetta", "in_language", "French"]]
        write_jsonl(data / "kb.jsonl", [{"triple": t} for t in kb])
        write_jsonl(data / "samples.jsonl", [
            {"id": "q1", "question": "who directed Kismet", "answers": ["William Dieterle"], "gold_paths": [[kb[0]]]},
            {"id": "q2", "question": "what language is Rosetta in", "answers": ["French"], "gold_paths": [[kb[2]]]}])
        write_jsonl(data / "retrieval.jsonl", [
            {"sample_id": "q1", "retriever": "bm25", "results": [{"triple": kb[0], "score": 2.0}]},
            {"sample_id": "q2", "retriever": "bm25", "results": [{"triple": kb[2], "score": 1.0}]}])
        import_dataset(store, data, "films")
        # A run with answers (brought, not generated): what `claims run` verifies.
        plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("linear",)), dataset="films", name="answered",
                   generation=GenerationConfig().as_dict())
        run = get_run(store, "answered")
        prompts = io.StringIO()
        export_prompts(store, run, prompts)
        write_jsonl(root / "answers.jsonl", [{"sample_id": r["sample_id"], "cell_id": r["cell_id"],
                                              "prediction": ANSWER} for r in map(json.loads, prompts.getvalue().splitlines())])
        import_predictions(store, run, root / "answers.jsonl")
        notes = root / "notes"
        notes.mkdir()
        (notes / "kismet.md").write_text(f"# Kismet\n\n{CONTEXT}\n", encoding="utf-8")
        (notes / "rosetta.md").write_text("# Rosetta\n\nRosetta is a film in French.\n", encoding="utf-8")
        import_corpus(store, notes, "notes")
        filename_questions(store, "notes", lang="en")
        retrieve(store, "notes", k=2)
        import_kg(store, write_tiny_kg(root / "kg"), "kg")
        # Two instances of RAGChecker's preference data: what `meta run` checks.
        human = json.loads((SAMPLE_META / "human_labeled_data.json").read_text(encoding="utf-8"))[:4]
        (root / "pairs.json").write_text(json.dumps(human), encoding="utf-8")
        import_meta(store, root / "pairs.json", "pairs")
    finally:
        store.close()
    return root / "probe.db", files


@pytest.fixture
def probe(template, tmp_path):
    """This test's copy of the database (a refusal that wrote would not hide the next one's), and the bad files."""
    db, files = template
    return copy_db(db, tmp_path / "probe.db"), files



class DeviceOpened(BaseException):
    """A device or FIFO was opened: raised past every ``except Exception`` so the test sees it."""


@pytest.fixture
def devices_never_opened(monkeypatch, template):
    """Make opening ``/dev/zero`` or the probe's FIFO (by any of Python's ways to open a file) fail the test.

    Without this, a FIFO blocks ``open()`` for ever and ``/dev/zero`` is read until memory runs out.
    """
    _, files = template
    forbidden = {os.path.realpath(files["generator"]["FIFO"]), os.path.realpath("/dev/zero")}

    def guarded(real):
        def opener(file, *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)) and os.path.realpath(os.fsdecode(file)) in forbidden:
                raise DeviceOpened(f"{file} was opened")
            return real(file, *args, **kwargs)
        return opener

    for module, name in ((builtins, "open"), (io, "open"), (os, "open")):
        monkeypatch.setattr(module, name, guarded(getattr(module, name)))


def test_the_probe_covers_every_model_option_of_every_verb():
    assert model_options() == set(PROBES)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs a FIFO and /dev/zero")
@pytest.mark.parametrize("bad", BAD_FILES)
@pytest.mark.parametrize(("verb", "option"), list(PROBES), ids=[f"{v} {o}" for v, o in PROBES])
def test_a_model_file_that_cannot_serve_is_refused_in_one_line_before_anything_is_written(
        verb, option, bad, probe, devices_never_opened, capsys):
    db, files = probe
    role, argv = PROBES[(verb, option)]
    path = files[role][bad]
    before = every_row(db)
    start = time.monotonic()
    code = main(["--db", str(db), *argv, option, path])
    seconds = time.monotonic() - start
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {option}: {path}: "), err
    assert "Traceback" not in err and out == ""
    assert every_row(db) == before
    assert seconds < 5   # read its header at most: a second is plenty (bench/ measures it)


@pytest.mark.parametrize(("bad", "why"), [
    ("missing", "model file not found"),
    ("empty", "an empty file (0 bytes), not a model file"),
    ("text", "not a GGUF file (starts with b'a mo', expected b'GGUF')"),
    ("cut in its weights", "truncated: its weights run to byte"),
    ("directory", "a directory, not a model file"),
    ("/dev/zero", "a character device, not a model file"),
    ("FIFO", "a FIFO, not a model file"),
    ("a billion billion keys", "truncated GGUF header: it declares 9,223,372,036,854,775,808 keys"),
    ("an array of 2^60 strings", "an array of 1,152,921,504,606,846,976 strings cannot fit in the rest of the file"),
    ("a 4 EiB string", "a string of 4,611,686,018,427,387,904 bytes runs past the end of the file"),
    ("arrays nested 10,000 deep", "array a nests arrays deeper than 4 levels"),
    ("the other kind of model", "an embedding model (architecture 'bert'), not one that generates text"),
    ("a 96-byte llama header", "llama.cpp cannot load it: error loading model hyperparameters: key not found in "
                               "model: llama.context_length"),
    ("an unknown architecture", "llama.cpp cannot load it: unknown model architecture: 'xyzzy'"),
    ("a tensor-less bert header", "an embedding model (architecture 'bert'), not one that generates text"),
])
def test_the_refusal_says_what_the_file_is(bad, why, probe, devices_never_opened, capsys):
    db, files = probe
    path = files["generator"][bad]
    assert main(["--db", str(db), "run", "films", "--k", "1", "--budget", "64", "--format", "linear",
                 "--model", path]) == 2
    assert capsys.readouterr().err.startswith(f"error: --model: {path}: {why}")


@pytest.mark.parametrize("bad", ["missing", "cut in its weights", "directory", "/dev/zero", "FIFO",
                                 "a billion billion keys", "the other kind of model", "an unknown architecture",
                                 "a 96-byte llama header"])
def test_the_tui_run_form_refuses_the_same_files_in_its_model_field(bad, template, devices_never_opened):
    # The form's summary resolves the model as it is typed: a file that cannot serve blocks Start.
    _, files = template
    path = files["generator"][bad]
    with pytest.raises(FormError) as refusal:
        describe_plan({**DEFAULTS, "dataset": "films", "model": path}, samples=2)
    assert refusal.value.field == "model" and f"{path}: " in str(refusal.value)


def test_a_generator_given_as_the_embedding_model_is_named_for_what_it_is(probe, capsys):
    db, files = probe
    path = files["embedding"]["the other kind of model"]
    assert main(["--db", str(db), *CHECK, "--verifiers", "embedding", "--embedding-model", path]) == 2
    assert capsys.readouterr().err == (f"error: --embedding-model: {path}: not an embedding model "
                                       "(architecture 'llama', not an encoder such as bert)\n")


def test_the_shipped_models_are_whole_by_their_own_headers(template):
    # The weights' sizes come from a table of ggml types: a wrong entry would call a whole file cut.
    for path, embedding in ((default_model_path(), False), (minilm_model(), True)):
        header = check_gguf(path, embedding=embedding)
        assert header.data_end == header.file_size == path.stat().st_size


@pytest.mark.parametrize(("content", "why"), [
    (b"GGUF", "truncated GGUF header (at byte 4)"),
    (struct.pack("<4sIQQ", b"GGUF", 3, 2 ** 40, 0), "truncated GGUF header: it declares 0 keys and 1,099,511,627,776 tensors"),
    (crafted(0, 1, key("a") + struct.pack("<IIQ", 9, 4, 2 ** 61)), "array a runs past the end of the file"),
    (crafted(0, 1, key("general.alignment") + struct.pack("<II", 4, 0)), "general.alignment 0 is not a positive"),
], ids=["the magic alone", "2^40 tensors", "an array of 2^61 uint32", "alignment 0"])
def test_a_header_is_read_within_the_files_own_size(content, why, tmp_path):
    path = tmp_path / "crafted.gguf"
    path.write_bytes(content)
    with pytest.raises(GGUFError, match=re.escape(why)):
        read_header(path)


@pytest.mark.real_model
@pytest.mark.budget(15)
def test_claims_check_with_the_embedding_verifier_counts_its_model_calls(tmp_path, capsys):
    # The shipped embedding model, loaded for real: 2 texts (the claim, the context) embedded,
    # then read back from the store. What the verifier concludes is the model's, not asserted.
    db = str(tmp_path / "wb.db")
    argv = ["--db", db, *CHECK, "--verifiers", "embedding", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["n_claims"], first["model_calls"], first["cache_hits"]) == (1, 2, 0)
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["model_calls"], again["cache_hits"]) == (0, 2)
    assert main(["--db", db, *CHECK, "--verifiers", "lexical,embedding"]) == 0
    assert capsys.readouterr().out.startswith("1 claims from 1 context units in ")


@pytest.mark.parametrize("role", ["generator", "embedding"])
def test_the_open_database_given_as_a_model_is_refused_without_opening_it(tmp_path, role):
    """The TUI's run form checks its model field while the app's connection is open: a database file
    (or a hard link to it) is named for what it is, and never opened (closing that descriptor would
    drop SQLite's locks; the suite's lockguard fails any such open)."""
    store = open_store(tmp_path / "wb.db")
    try:
        os.link(tmp_path / "wb.db", tmp_path / "model.gguf")
        for given in (tmp_path / "wb.db", tmp_path / "model.gguf"):
            with pytest.raises(ModelError, match=r"model.gguf|wb.db: is the database .*wb.db, not a model file"):
                check_model(str(given), role)
    finally:
        store.close()


# -- a server that never answers, a run's recorded model, the tokenizer: the same rules -----------------

@pytest.fixture
def silent_server():
    """``http://127.0.0.1:PORT/v1``: a server that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


@pytest.mark.parametrize(("verb", "option"), list(PROBES), ids=[f"{v} {o}" for v, o in PROBES])
def test_the_up_front_check_of_a_served_model_honours_the_timeout(verb, option, probe, silent_server, capsys):
    # Every model option of every verb, served: the check waits --timeout, not the default 120 s, and
    # refuses in one line (exit 1: the option may be right, the server is not answering), nothing written.
    # The smallest timeout the option takes (workbench/cli/ranges.py): each of the 17 probes waits it out.
    db, _ = probe
    role, argv = PROBES[(verb, option)]
    before = every_row(db)
    code = main(["--db", str(db), *argv, option, f"{silent_server}#m", "--timeout", "0.1"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err == f"error: {option}: {silent_server}/models: no answer within 0.1 s (1 attempt; --timeout sets it)\n"
    assert every_row(db) == before


def test_a_run_whose_server_is_down_is_refused_before_it_is_planned(probe, capsys):
    db, _ = probe
    before = every_row(db)
    assert main(["--db", str(db), "run", "films", "--k", "1", "--budget", "64", "--format", "linear",
                 "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "x"]) == 1
    assert capsys.readouterr().err.startswith("error: --model: http://127.0.0.1:9/v1/models: server unreachable")
    assert every_row(db) == before      # no run, cells, events or manifest


@pytest.mark.parametrize("bad", ["text", "FIFO", "/dev/zero", "directory", "the other kind of model",
                                 "an unknown architecture"])
def test_resume_refuses_a_run_whose_model_file_was_replaced_and_leaves_its_jobs_pending(bad, probe, tmp_path,
                                                                                       devices_never_opened, capsys):
    db, files = probe
    model = tmp_path / "model.gguf"
    model.symlink_to(default_model_path())      # the model, by a path of its own the test then replaces
    store = open_store(db)
    try:
        plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("linear",)), dataset="films", name="later",
                   generation=GenerationConfig(model=str(model)).as_dict())
    finally:
        store.close()
    model.unlink()
    replacement = Path(files["generator"][bad])
    if replacement.is_dir() or not replacement.is_file():
        model.symlink_to(replacement)            # a FIFO, a device, a directory in its place
    else:
        shutil.copyfile(replacement, model)
    before = every_row(db)
    assert main(["--db", str(db), "resume", "later"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"error: the run's model: {model}: "), err
    assert every_row(db) == before      # every job still pending, no error recorded on any


def test_a_tokenizer_that_cannot_be_built_is_a_bad_option(probe, capsys):
    db, files = probe
    for verb in (["sweep", "films"], ["run", "films", "--dry-run"], ["run", "films"]):
        assert main(["--db", str(db), *verb, "--k", "1", "--budget", "64", "--tokenizer",
                     f"llama:{files['generator']['missing']}"]) == 2
        assert capsys.readouterr().err == (f"error: --tokenizer: {files['generator']['missing']}: model file not "
                                           "found\n")


def test_a_dry_run_with_a_model_that_cannot_serve_is_a_bad_option_not_a_report(probe, capsys):
    db, files = probe
    path = files["generator"]["an unknown architecture"]
    assert main(["--db", str(db), "run", "films", "--k", "1", "--budget", "64", "--dry-run", "--model", path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: --model: {path}: llama.cpp cannot load it: unknown model architecture: 'xyzzy'\n"
