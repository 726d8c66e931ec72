"""Shared fixtures: real SQLite stores and small real datasets written as JSONL."""

from __future__ import annotations

import workercore  # noqa: F401,I001 (first: an xdist worker is pinned to its core before any thread starts)
import importlib
import json
import os
import shutil
import sqlite3
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from workbench.data.corpus import import_corpus
from workbench.claims.runner import ClaimsConfig
from workbench.data.importer import import_dataset
from workbench.data.meta_import import import_meta
from workbench.kg.importer import import_kg
from workbench.kg.runner import DedupConfig, execute_dedup, plan_dedup
from workbench.meta.run import run_meta
from workbench.meta.sets import get_meta_set
from workbench.pipelines.runner import SearChainConfig, execute_searchain, plan_searchain
from workbench.retrieval.evaluate import filename_questions
from workbench.retrieval.runs import retrieve
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import Store, open_store
import lockguard
import modeluse
import parsedcss
from llama_server import Server, serve
from outputcache import SharedOutputs, shared_root
from replay import replay_llm

# The CLI fits its tables to COLUMNS when it is set (workbench.terminal.output_width): a shell that exports it
# would change what every test reads of the CLI's output. A test that means a width sets it.
os.environ.pop("COLUMNS", None)

# Fixtures kept beside the helpers that build their data: the demo-like database (tests/tuistates.py).
pytest_plugins = ["tuistates"]

REPO = Path(__file__).resolve().parents[1]
#: The database `just demo` writes (absent until it ran).
DEMO_DB = REPO / ".workbench" / "demo.db"
SAMPLE_METAQA = REPO / "sample_data" / "metaqa"
SCRIPTS = REPO / "scripts"
parsedcss.parse_once()


def load_script(name: str):
    """The script ``scripts/NAME.py`` as a module, imported as it runs: its folder on sys.path (so it
    imports its siblings, such as generated_doc) and the module registered under its name."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    return importlib.import_module(name)


def write_jsonl(path: Path, rows) -> Path:
    """Write rows (dicts, or raw strings for deliberately bad lines) as JSON Lines."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                            for r in rows), encoding="utf-8")
    return path


lockguard.install()


@pytest.fixture(autouse=True)
def no_lock_dropping_open():
    """No test, nor the workbench code it drives, opens with Python a file SQLite holds open in this
    process: closing that descriptor would drop SQLite's POSIX locks (tests/lockguard.py)."""
    seen = len(lockguard.hazards)
    yield
    new = lockguard.hazards[seen:]
    del lockguard.hazards[seen:]
    assert not new, f"a file SQLite holds open was opened with Python: {new[0]}"


@pytest.fixture(autouse=True)
def private_model_slot(tmp_path, monkeypatch):
    """Each test (and the CLI processes it starts) has its own model slot, not the machine's:
    a test never waits for a model held elsewhere on the machine or leaked by an earlier test."""
    monkeypatch.setenv("WORKBENCH_MODEL_SLOT", str(tmp_path / "model.lock"))


modeluse.install()


_CALLS_BEFORE = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    # Counted before any fixture is set up: a module's fixture that runs the model counts for the
    # test that first asked for it, so every test using such a fixture must be marked.
    item.stash[_CALLS_BEFORE] = modeluse.CALLS[0]
    marker = item.get_closest_marker("budget")
    if marker is not None:
        # Carried by the test's reports: under xdist the controller, which sums the times, collects nothing.
        item.user_properties.append(("budget", float(marker.args[0])))
    return (yield)


def pytest_collection_modifyitems(config, items):
    """The longest files first (their order within a file kept): those that run a real model or hold a test
    whose subject needs more than the usual budget (``@pytest.mark.budget``), then those that drive the TUI
    (a few seconds a test), then the rest, mostly short. Under `just test`'s one-worker-per-file scheduling a
    long file started last keeps one worker busy while the other has nothing left to do: with the TUI's files
    last, the suite's last 74 s on 2 workers ran on one."""
    heavy = {item.path for item in items
             if item.get_closest_marker(modeluse.MARKER) or item.get_closest_marker("budget")}
    items.sort(key=lambda item: (item.path not in heavy, not item.path.name.startswith("test_tui")))


@pytest.fixture(autouse=True)
def real_model_is_marked(request, tmp_path, private_model_slot):
    """A test that ran a real model carries the ``real_model`` marker (`just test-perturbed` runs those)."""
    before = request.node.stash.get(_CALLS_BEFORE, modeluse.CALLS[0])
    yield
    if modeluse.used_a_model(before, tmp_path / "model.lock") and not request.node.get_closest_marker(modeluse.MARKER):
        pytest.fail(f"{request.node.nodeid} ran a real model: mark it @pytest.mark.{modeluse.MARKER} "
                    "(tests/modeluse.py)", pytrace=False)


@pytest.fixture(scope="session")
def shared_outputs(tmp_path_factory) -> SharedOutputs:
    """The session's pool of model outputs, shared by the workers: real passes run once, reused by every test
    whose subject is not the model (tests/outputcache.py)."""
    pool = SharedOutputs(shared_root(tmp_path_factory))
    # `just demo` (the README's first command) embedded HowToCook and the demo's claims with the default model:
    # its vectors, keyed by the model file's sha256 and the text, are what the docs database would compute again.
    pool.adopt(DEMO_DB)
    return pool


# -- the suite's time: every test has a budget, and the summary names the tests over theirs -------------------
#: Seconds a test may take (setup, call and teardown) before the summary names it; `@pytest.mark.budget(S)` sets
#: another for one test, e.g. one whose subject is a real model's generation.
TIME_BUDGET = 5.0
_SPENT: dict[str, float] = {}
_BUDGETS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    _SPENT[report.nodeid] = _SPENT.get(report.nodeid, 0.0) + report.duration
    for name, value in report.user_properties:
        if name == "budget":
            _BUDGETS[report.nodeid] = value


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Reported, not asserted: a slow test is a cost to every change, named here so the next one is noticed."""
    over = sorted(((spent, nodeid) for nodeid, spent in _SPENT.items()
                   if spent > _BUDGETS.get(nodeid, TIME_BUDGET)), reverse=True)
    if not _SPENT:
        return
    total = sum(_SPENT.values())
    terminalreporter.section(f"the suite's time: {total:.0f} s summed over {len(_SPENT)} tests")
    if over:
        terminalreporter.write_line(f"{len(over)} tests over their budget ({TIME_BUDGET:g} s unless marked "
                                    f"budget), {sum(s for s, _ in over):.0f} s:")
    for spent, nodeid in over[:25]:
        budget = _BUDGETS.get(nodeid, TIME_BUDGET)
        terminalreporter.write_line(f"  {spent:6.1f} s (budget {budget:g} s)  {nodeid}")
    if len(over) > 25:
        terminalreporter.write_line(f"  … and {len(over) - 25} more")
    # A file is what a worker takes at once (`--dist loadfile`): the longest ones set how evenly two workers end.
    files: dict[str, float] = {}
    for nodeid, spent in _SPENT.items():
        files[nodeid.split("::")[0]] = files.get(nodeid.split("::")[0], 0.0) + spent
    longest = sorted(files.items(), key=lambda kv: -kv[1])[:12]
    terminalreporter.write_line("the longest files: " + ", ".join(f"{Path(f).name} {s:.0f} s" for f, s in longest))


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    """Where this test session converts embedding models, never the user's data dir: one folder for every
    worker, so a model converted by one is found by the others (a conversion is written under a temporary
    name and renamed into place: two workers converting at once never see a part of a file)."""
    cache = shared_root(tmp_path_factory) / "model-cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture(autouse=True)
def private_model_cache(model_cache, monkeypatch):
    """The embedding models every test (and the CLI processes it starts) converts go to the session's cache."""
    monkeypatch.setenv("WORKBENCH_MODEL_CACHE", str(model_cache))


@pytest.fixture(scope="session")
def empty_template(tmp_path_factory) -> Path:
    """An empty workbench database with every migration applied, closed: made once per worker, copied by tests."""
    path = tmp_path_factory.mktemp("template-empty") / "wb.db"
    open_store(path).close()
    return path


@pytest.fixture
def store(tmp_path, empty_template):
    """An empty, migrated workbench database in a temp dir (a copy of ``empty_template``)."""
    s = open_store(copy_db(empty_template, tmp_path / "wb.db"))
    yield s
    s.close()


@pytest.fixture(scope="session")
def metaqa_template(tmp_path_factory) -> Path:
    """sample_data/metaqa imported as ``metaqa``, nothing else, closed: made once per worker, copied by tests."""
    with new_template(tmp_path_factory, "metaqa.db") as store:
        path = store.path
    return path


@pytest.fixture
def tiny_dir(tmp_path) -> Path:
    """Three questions over a five-triple movie KB, with hand-checkable retrieval.

    q1 (1-hop): gold = [Kismet directed_by Dieterle]; retrieved at rank 2.
    q2 (2-hop): gold = [Kismet starred_actors Dietrich] + [Kismet directed_by Dieterle];
                retrieved at ranks 1 and 3.
    q3 (1-hop): gold = [Rosetta in_language French]; never retrieved.
    """
    d = tmp_path / "tiny"
    d.mkdir()
    kb = [["Kismet", "directed_by", "William Dieterle"], ["Kismet", "starred_actors", "Marlene Dietrich"],
          ["Kismet", "release_year", "1944"], ["Rosetta", "in_language", "French"],
          ["Rosetta", "directed_by", "Jean-Pierre Dardenne"]]
    write_jsonl(d / "kb.jsonl", [{"triple": t} for t in kb])
    write_jsonl(d / "samples.jsonl", [
        {"id": "q1", "question": "who directed Kismet", "answers": ["William Dieterle"],
         "gold_paths": [[kb[0]]], "meta": {"hops": 1}},
        {"id": "q2", "question": "who directed the films starring Marlene Dietrich",
         "answers": ["William Dieterle"], "gold_paths": [[kb[1], kb[0]]], "meta": {"hops": 2}},
        {"id": "q3", "question": "what language is Rosetta in", "answers": ["French"],
         "aliases": {"French": ["Français"]}, "gold_paths": [[kb[3]]]},
    ])
    write_jsonl(d / "retrieval.jsonl", [
        {"sample_id": "q1", "retriever": "bm25", "results": [{"triple": kb[2], "score": 3.0},
                                                              {"triple": kb[0], "score": 2.0}]},
        {"sample_id": "q2", "retriever": "bm25", "results": [{"triple": kb[1], "score": 3.0},
                                                              {"triple": kb[2], "score": 2.0},
                                                              {"triple": kb[0], "score": 1.0}]},
        {"sample_id": "q3", "retriever": "bm25", "results": [{"triple": kb[4], "score": 1.0}]},
    ])
    return d


@pytest.fixture
def tiny_store(store, tiny_dir):
    """The tiny dataset imported as ``tiny``."""
    import_dataset(store, tiny_dir, "tiny")
    return store


@pytest.fixture
def tiny_swept_db(tmp_path, tiny_dir) -> Path:
    """The tiny dataset imported as ``tiny`` and swept (K=1, B=64, linear) as run ``s``, closed."""
    path = tmp_path / "tiny-swept.db"
    store = open_store(path)
    import_dataset(store, tiny_dir, "tiny")
    plan_sweep(store, SweepConfig(ks=(1,), budgets=(64,), formats=("linear",)), dataset="tiny", name="s")
    store.close()
    return path


def copy_db(src: Path, dst: Path) -> Path:
    """A private copy of a closed workbench database: copying a small SQLite file costs
    milliseconds, building it (import, sweep, a model pass) costs seconds to minutes."""
    for suffix in ("", "-wal"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")
    return dst


def every_row(db: Path) -> dict[str, list[str]]:
    """Every row of every table: what a refused command must leave exactly as it was."""
    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                            " AND name NOT LIKE 'sqlite_%'")]
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    finally:
        con.close()


@contextmanager
def new_template(tmp_path_factory, filename: str, *, metaqa: bool = True) -> Iterator[Store]:
    """A session's database built once (tests take copies): open, with sample_data/metaqa imported
    as ``metaqa`` unless ``metaqa=False``, and closed when the block ends."""
    store = open_store(tmp_path_factory.mktemp(Path(filename).stem) / filename)
    try:
        if metaqa:
            import_dataset(store, SAMPLE_METAQA, "metaqa")
        yield store
    finally:
        store.close()


# The tiny KG of the dedup tests: near-duplicate director names, two films called Dark City.
KG_TRIPLES = [
    (["Kismet", "directed_by", "William Dieterle"], ["c1"]),
    (["Juarez", "directed_by", "W. Dieterle"], ["c2"]),
    (["Juarez", "release_year", "1939"], ["c2"]),
    (["Kismet", "release_year", "1944"], ["c1"]),
    (["Dark City", "directed_by", "william dieterle"], ["c3"]),
    (["Alex Proyas", "directed", "Dark City (1998)"], ["c4"]),
]
KG_CHUNKS = {"c1": "Kismet is a 1944 film directed by William Dieterle.",
             "c2": "Juarez (1939) was directed by W. Dieterle.",
             "c3": "Dark City (1950) is a film noir directed by william dieterle.",
             "c4": "Alex Proyas directed Dark City in 1998."}
KG_GOLD = {"Kismet": "kismet", "William Dieterle": "dieterle", "W. Dieterle": "dieterle",
           "william dieterle": "dieterle", "Juarez": "juarez", "1939": "1939", "1944": "1944",
           "Dark City": "dark-city-1950", "Alex Proyas": "proyas", "Dark City (1998)": "dark-city-1998"}


def write_tiny_kg(directory: Path) -> Path:
    """The tiny KG as a ``dedup import`` directory: kb.jsonl, chunks.jsonl and gold_clusters.jsonl."""
    directory.mkdir(parents=True, exist_ok=True)
    write_jsonl(directory / "kb.jsonl", [{"triple": t, "source_chunks": c} for t, c in KG_TRIPLES])
    write_jsonl(directory / "chunks.jsonl", [{"chunk_id": k, "text": v} for k, v in KG_CHUNKS.items()])
    write_jsonl(directory / "gold_clusters.jsonl", [{"entity": e, "cluster": c} for e, c in KG_GOLD.items()])
    return directory


def import_films_kg(store: Store, tmp_path: Path) -> str:
    """Three films by one director spelled three ways, one chunk: a KG imported as ``films`` (its name)."""
    kg = tmp_path / "kg"
    kg.mkdir()
    write_jsonl(kg / "kb.jsonl", [{"triple": t, "source_chunks": ["c1"]} for t in (
        ["Kismet", "directed_by", "William Dieterle"], ["Juarez", "directed_by", "W. Dieterle"],
        ["Dark City", "directed_by", "william dieterle"])])
    write_jsonl(kg / "chunks.jsonl", [{"chunk_id": "c1", "text": "Three films by Dieterle."}])
    import_kg(store, kg, "films")
    return "films"


@pytest.fixture(scope="session")
def metaqa_db(tmp_path_factory) -> Path:
    """sample_data/metaqa imported once per session and swept over K×B×format with oracle cells."""
    with new_template(tmp_path_factory, "wb.db") as store:
        plan_sweep(store, SweepConfig(ks=(1, 2, 5, 10, 20), budgets=(64, 128, 256),
                                      formats=("score", "linear", "struct"), oracle=True, shuffles=3), name="sweep")
    return store.path


@pytest.fixture(scope="session")
def swept_template(tmp_path_factory) -> Path:
    """sample_data/metaqa with a model-free sweep (300 samples, so paging has pages), built once."""
    with new_template(tmp_path_factory, "wb.db") as store:
        plan_sweep(store, SweepConfig(ks=(1, 5, 20), budgets=(64,), formats=("score",), oracle=True, shuffles=2),
                   name="sweep")
    return store.path


@pytest.fixture
def swept_db(tmp_path, swept_template):
    """sample_data/metaqa with a model-free sweep (300 samples, so paging has pages): this test's own copy."""
    return copy_db(swept_template, tmp_path / "wb.db")


@pytest.fixture(scope="session")
def live_template(tmp_path_factory) -> Path:
    """MetaQA with one planned one-cell run, ``live``, of 6 questions for the default model, built once."""
    with new_template(tmp_path_factory, "live.db") as store:
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=6), name="live",
                   generation=GenerationConfig(max_tokens=16).as_dict())
    return store.path


@pytest.fixture
def live_db(tmp_path, live_template):
    """MetaQA with one planned one-cell run, ``live``, of 6 questions for the default model: this test's copy."""
    return copy_db(live_template, tmp_path / "live.db")


def build_chains(store: Store, llm) -> None:
    """MetaQA imported as ``metaqa``, a model-free sweep, and two 2-hop questions through SearChain as ``chains``."""
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(5,), budgets=(64,), formats=("score",)), name="sweep")
    name, _ = plan_searchain(store, "metaqa", SearChainConfig(hops=2, limit=2), "chains")
    assert execute_searchain(store, name, llm=llm).done == 2


def build_judged(store: Store, llm) -> None:
    """The tiny KG (beside the database) judged in both modes as the dedup run ``review``."""
    import_kg(store, write_tiny_kg(store.path.parent / "kg"), "tiny")
    name, _, _ = plan_dedup(store, "tiny", DedupConfig(), "review")
    assert execute_dedup(store, name, llm=llm).errors == 0


@pytest.fixture(scope="session")
def chained_template(tmp_path_factory) -> Path:
    """Two MetaQA 2-hop questions through SearChain as SmolLM2 answered them (recorded: the same on every
    CPU, tests/replay.py), plus a model-free sweep, built once."""
    with new_template(tmp_path_factory, "chains.db", metaqa=False) as store:
        build_chains(store, replay_llm(store, "chains"))
    return store.path


@pytest.fixture
def chained_db(tmp_path, chained_template):
    """Two MetaQA 2-hop questions through SearChain as SmolLM2 answered them, plus a sweep: this test's copy."""
    return copy_db(chained_template, tmp_path / "chains.db")


@pytest.fixture(scope="session")
def judged_template(tmp_path_factory) -> Path:
    """The tiny KG judged in both modes as SmolLM2 judged it (recorded: the same on every CPU), built once."""
    with new_template(tmp_path_factory, "dedup.db", metaqa=False) as store:
        build_judged(store, replay_llm(store, "judged"))
    return store.path


@pytest.fixture
def judged_db(tmp_path, judged_template):
    """The tiny KG judged in both modes as SmolLM2 judged it: this test's copy."""
    return copy_db(judged_template, tmp_path / "dedup.db")


@pytest.fixture(scope="session")
def corpus_template(tmp_path_factory) -> Path:
    """sample_data/howtocook with Chinese and English filename questions (some misses) and BM25 results, once."""
    with new_template(tmp_path_factory, "hc.db", metaqa=False) as store:
        import_corpus(store, REPO / "sample_data" / "howtocook", "hc")
        filename_questions(store, "hc")
        filename_questions(store, "hc", lang="en")  # English questions over Chinese recipes: some misses
        retrieve(store, "hc", k=5)
    return store.path


@pytest.fixture
def corpus_db(tmp_path, corpus_template):
    """sample_data/howtocook with Chinese and English filename questions and BM25 results: this test's copy."""
    return copy_db(corpus_template, tmp_path / "hc.db")


SAMPLE_META = REPO / "sample_data" / "ragchecker-meta"


def build_meta(store: Store) -> None:
    """The shared half of RAGChecker's preference data imported as ``rc`` with its RAGChecker baseline, and
    both responses checked by rule + lexical (no model: every CPU gives the same verdicts)."""
    import_meta(store, SAMPLE_META / "human_labeled_data.json", "rc",
                baselines=[SAMPLE_META / "baseline_ragchecker.json"])
    report = run_meta(store, get_meta_set(store, "rc"), ClaimsConfig(decomposer="rule", verifiers=("lexical",)),
                      similarity=False)
    assert (report.done, report.errors) == (280, 0)


@pytest.fixture(scope="session")
def meta_template(tmp_path_factory) -> Path:
    """RAGChecker's shared-half preference data as meta set ``rc``, checked by rule + lexical, built once."""
    with new_template(tmp_path_factory, "meta.db", metaqa=False) as store:
        build_meta(store)
    return store.path


@pytest.fixture
def meta_db(tmp_path, meta_template):
    """Meta set ``rc`` (140 instances, 2 annotators, RAGChecker's baseline, a rule + lexical claim run): this
    test's copy."""
    return copy_db(meta_template, tmp_path / "meta.db")


class ScriptedLLM:
    """A test double of ``CachedLLM.ask`` for logic that does not depend on the model.

    Returns the scripted outputs in order (as objects with ``.text``) and records each call.
    """

    class Reply:
        def __init__(self, text: str):
            self.text = text

    def __init__(self, *outputs: str):
        self.outputs = list(outputs)
        self.calls: list[dict] = []

    def ask(self, messages, *, max_tokens, schema=None, grammar=None, temperature=0.0, repeat_penalty=1.0):
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "schema": schema})
        return self.Reply(self.outputs.pop(0))


def wait_for_rows(db: Path, sql: str, at_least: int, proc, timeout: float = 180) -> int:
    """Poll ``sql`` (a count) on ``db`` until it reaches ``at_least`` while ``proc`` runs; return the count.

    For kill -9 tests: a fresh connection each time, as another process is writing.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the process ended before it could be interrupted"
        try:
            con = sqlite3.connect(db, timeout=5)
            count = con.execute(sql).fetchone()[0]
            con.close()
        except sqlite3.OperationalError:
            count = 0
        if count >= at_least:
            return count
        time.sleep(0.05)
    raise AssertionError(f"no progress: {sql!r} stayed below {at_least}")


# -- real model servers (``python -m llama_cpp.server``), one of each per worker that needs it -----------------
@pytest.fixture(scope="session")
def smollm2_server(tmp_path_factory) -> Iterator[Server]:
    """SmolLM2 served as ``smollm2``: ``.ref`` is what a model option takes."""
    from workbench.models.base import ModelError
    from workbench.models.locate import default_model_path

    try:
        model = default_model_path()
    except ModelError as exc:
        pytest.skip(str(exc))
    with serve(model, tmp_path_factory.mktemp("llama_server"), alias="smollm2") as server:
        yield server


@pytest.fixture(scope="session")
def e5_server(tmp_path_factory, model_cache) -> Iterator[Server]:
    """multilingual-e5-small (the converted GGUF) served for /v1/embeddings under its own name."""
    from workbench.models.base import ModelError
    from workbench.models.embedders import resolve_embedding_model

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_MODEL_CACHE", str(model_cache))
        try:
            path = resolve_embedding_model(None)
        except ModelError as exc:
            pytest.skip(str(exc))
    with serve(path, tmp_path_factory.mktemp("llama_server"), alias="multilingual-e5-small", n_ctx=512,
               extra=("--embedding", "true", "--n_batch", "512", "--n_ubatch", "512")) as server:
        yield server
