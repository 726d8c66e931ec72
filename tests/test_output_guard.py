"""Every verb that writes a file goes through one guard (workbench.data.outfile).

It refuses, with one line and exit 2, the open database (directly, through a symbolic link, or
its -wal/-shm files, or its BM25 index cache), any other SQLite file, a link, a directory or a
device, an empty path, and an existing file without --force; with --force a plain file is
replaced atomically. ``-`` is stdout for every verb. Each writing verb is tried against each
refusal below, and the database must come out byte-identical and intact. A directory output
(dedup export) passes the same guard.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from conftest import copy_db, write_jsonl
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.cli.main import build_parser
from workbench.data.outfile import TargetExists, check_target, write_atomic
from workbench.data.importer import import_dataset
from workbench.errors import BadInput
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.triage import add_tag

# Every verb with --out FILE, as a user types it (the database and --out are added).
VERBS = {
    "export events": ["export", "events", "s"],
    "export ledger": ["export", "ledger", "s"],
    "export samples": ["export", "samples", "s"],
    "plot": ["plot", "s"],
    "report": ["report", "s", "--resamples", "50"],
    "retrieval export": ["retrieval", "export", "tiny"],
    "tags export": ["tags", "export", "--dataset", "tiny"],
    "prompts export": ["prompts", "export", "s"],
    "judge labels export": ["judge", "labels", "export"],
}


@pytest.fixture(scope="module")
def writer_template(tmp_path_factory):
    """The tiny dataset with a model-free sweep ``s`` and one tagged sample: every writing verb has something."""
    work = tmp_path_factory.mktemp("guard")
    directory = work / "tiny"
    directory.mkdir()
    _write_tiny(directory)
    store = open_store(work / "wb.db")
    import_dataset(store, directory, "tiny")
    plan_sweep(store, SweepConfig(ks=(1, 2), budgets=(64,), formats=("score",)), name="s")
    add_tag(store, store.conn.execute("SELECT id FROM datasets WHERE name = 'tiny'").fetchone()[0], 1, "annotation-error")
    store.close()
    return work / "wb.db"


def _write_tiny(directory: Path) -> None:
    kb = [["Kismet", "directed_by", "William Dieterle"], ["Kismet", "starred_actors", "Marlene Dietrich"],
          ["Rosetta", "in_language", "French"]]
    write_jsonl(directory / "kb.jsonl", [{"triple": t} for t in kb])
    write_jsonl(directory / "samples.jsonl", [
        {"id": "q1", "question": "who directed Kismet?", "answers": ["William Dieterle"], "gold_paths": [[kb[0]]]},
        {"id": "q2", "question": "what language is Rosetta in?", "answers": ["French"], "gold_paths": [[kb[2]]]}])
    write_jsonl(directory / "retrieval.jsonl", [
        {"sample_id": "q1", "retriever": "bm25", "results": [{"triple": kb[1], "score": 2.0}, {"triple": kb[0], "score": 1.0}]},
        {"sample_id": "q2", "retriever": "bm25", "results": [{"triple": kb[0], "score": 1.0}]}])


@pytest.fixture
def db(tmp_path, writer_template) -> Path:
    return copy_db(writer_template, tmp_path / "wb.db")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(db: Path, verb: str, out, *extra: str) -> int:
    return main(["--db", str(db), *VERBS[verb], "--out", str(out), *extra])


def assert_intact(db: Path, before: str) -> None:
    assert digest(db) == before
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


@pytest.mark.parametrize("verb", VERBS)
def test_no_verb_writes_onto_the_open_database(verb, db, capsys):
    before = digest(db)
    assert run(db, verb, db, "--force") == 2
    assert capsys.readouterr().err == f"error: {db}: is the open workbench database; refusing to write over it\n"
    assert_intact(db, before)


@pytest.mark.parametrize("verb", VERBS)
def test_no_verb_writes_through_a_link_to_the_database(verb, db, tmp_path, capsys):
    link = tmp_path / "innocent.jsonl"
    link.symlink_to(db)
    before = digest(db)

    assert run(db, verb, link, "--force") == 2

    assert capsys.readouterr().err.startswith(f"error: {link}: is a symbolic link; name the file itself")
    assert link.is_symlink()
    assert_intact(db, before)


@pytest.mark.parametrize("verb", VERBS)
def test_no_verb_writes_onto_another_sqlite_database(verb, db, tmp_path, capsys):
    other = copy_db(db, tmp_path / "other.db")
    before = digest(other)

    assert run(db, verb, other, "--force") == 2

    assert capsys.readouterr().err == f"error: {other}: is a SQLite database; refusing to write over it\n"
    assert digest(other) == before


@pytest.mark.parametrize("verb", VERBS)
def test_an_existing_file_needs_force_and_is_then_replaced_atomically(verb, db, tmp_path, capsys):
    out = tmp_path / "out.txt"
    out.write_text("the user's notes\n")
    out.chmod(0o640)

    assert run(db, verb, out) == 2
    assert capsys.readouterr().err == f"error: {out}: exists; pass --force to replace it\n"
    assert out.read_text() == "the user's notes\n"

    inode = out.stat().st_ino
    assert run(db, verb, out, "--force") == 0
    assert out.read_text() != "the user's notes\n"
    assert out.stat().st_ino != inode                     # a new file renamed over the old one
    assert stat.S_IMODE(out.stat().st_mode) == 0o640      # with the old one's permissions
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out.txt")) == []   # no temp left


@pytest.mark.parametrize("sidecar", ["-wal", "-shm"])
def test_the_databases_wal_and_shm_are_refused_even_before_they_exist(sidecar, db, capsys):
    assert run(db, "export ledger", f"{db}{sidecar}", "--force") == 2
    assert f"is the {sidecar[1:]} file of the open workbench database" in capsys.readouterr().err


def test_a_directory_and_a_device_are_refused(db, tmp_path, capsys):
    assert run(db, "export events", tmp_path, "--force") == 2
    assert "is a directory" in capsys.readouterr().err
    assert run(db, "export events", "/dev/null", "--force") == 2
    assert capsys.readouterr().err == "error: /dev/null: is a character device; name a regular file (or - for stdout)\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert run(db, "export events", fifo, "--force") == 2
    assert "is a FIFO" in capsys.readouterr().err


def test_stdout_is_still_the_way_to_stream(db, capsys):
    assert run(db, "export events", "-") == 0
    assert capsys.readouterr().out.startswith('{"sample_id": "q1"')


def test_dedup_export_refuses_the_kg_source_and_existing_files(judged_db, tmp_path, capsys):
    store = open_store(judged_db)
    source = Path(store.conn.execute("SELECT source FROM kgs").fetchone()[0])
    store.close()
    kb_before = (source / "kb.jsonl").read_bytes()
    out = tmp_path / "deduped"

    assert main(["--db", str(judged_db), "dedup", "export", "review", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["aliases.jsonl", "kb.jsonl", "merges.jsonl"]
    assert main(["--db", str(judged_db), "dedup", "export", "review", "--out", str(out)]) == 2
    assert "kb.jsonl: exists; pass --force to replace it" in capsys.readouterr().err
    assert main(["--db", str(judged_db), "dedup", "export", "review", "--out", str(out), "--force"]) == 0
    assert main(["--db", str(judged_db), "dedup", "export", "review", "--out", str(source), "--force"]) == 2
    assert "is where KG 'tiny' was imported from" in capsys.readouterr().err
    assert (source / "kb.jsonl").read_bytes() == kb_before


def test_the_guard_in_the_core_protects_a_database_this_process_opened(tmp_path):
    store = open_store(tmp_path / "here.db")
    try:
        with pytest.raises(BadInput, match="is the open workbench database"):
            write_atomic(tmp_path / "here.db", ["x"], force=True)
        with pytest.raises(BadInput, match="is the wal file of the open workbench database"):
            check_target(tmp_path / "here.db-wal", force=True)
    finally:
        store.close()
    plain = tmp_path / "plain.txt"
    plain.write_text("old")
    with pytest.raises(TargetExists):
        write_atomic(plain, ["new"])
    assert write_atomic(plain, ["new"], force=True) == 3 and plain.read_text() == "new"


def test_a_hard_link_to_the_open_database_is_refused_without_reading_it(tmp_path):
    """A hard link is the same file by another name. Its header is never read with open(): closing
    that descriptor would drop the open connection's locks (the suite's lockguard fails on it)."""
    store = open_store(tmp_path / "here.db")
    try:
        with store.transaction() as conn:           # the -wal exists now too
            conn.execute("CREATE TABLE scratch (x)")
        os.link(tmp_path / "here.db", tmp_path / "alias.csv")
        os.link(tmp_path / "here.db-wal", tmp_path / "alias-wal.csv")
        with pytest.raises(BadInput, match="alias.csv: is the database .*here.db, by another name"):
            check_target(tmp_path / "alias.csv", force=True)
        with pytest.raises(BadInput, match="is the wal file of the database .*here.db, by another name"):
            check_target(tmp_path / "alias-wal.csv", force=True)
    finally:
        store.close()


def test_a_target_replaced_by_a_link_while_the_export_ran_is_refused(tmp_path):
    out = tmp_path / "out.jsonl"

    def chunks():
        yield "first\n"
        (tmp_path / "elsewhere").write_text("precious")
        out.symlink_to(tmp_path / "elsewhere")     # someone swaps a link in mid-write
        yield "second\n"

    with pytest.raises(BadInput, match="is a symbolic link"):
        write_atomic(out, chunks())
    assert (tmp_path / "elsewhere").read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


async def test_the_tui_asks_before_replacing_an_export_and_replaces_on_y(db, tmp_path):
    """Samples, X: an existing file is left alone until the user answers y to "Replace it?"."""
    from tuikit import SIZE, until_loaded, wait_for
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.dialogs import ConfirmDialog, PromptDialog

    out = tmp_path / "tagged.jsonl"
    out.write_text("the user's file\n")
    app = WorkbenchApp(db)
    async with app.run_test(size=SIZE) as pilot:
        app.open_run("s")
        await wait_for(pilot, lambda: app.current_mode == "ledger" and app.screen.view is not None
                       and app.screen.query_one("#ledger").row_count > 0)
        await pilot.press("enter")
        await until_loaded(pilot, "samples")
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog))
        app.screen.query_one("Input").value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the replace question")
        assert out.read_text() == "the user's file\n"
        assert "tagged.jsonl exists. Replace it?" in str(app.screen.query_one("#question").render())
        await pilot.press("y")
        await wait_for(pilot, lambda: out.read_text().startswith('{"sample_id": "q1"'), what="the export")


# -- "-" is stdout, for every output ----------------------------------------------------------------

@pytest.mark.parametrize("verb", VERBS)
def test_dash_is_stdout_for_every_verb_and_dot_slash_dash_a_file_named_dash(verb, db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):        # a second call is not told that "-" exists
        assert run(db, verb, "-") == 0
        assert "error" not in capsys.readouterr().err
    assert not (tmp_path / "-").exists()

    assert run(db, verb, "./-") == 0
    assert (tmp_path / "-").is_file()


def test_an_empty_out_is_refused_with_a_line_that_says_so(db, judged_db, capsys):
    assert run(db, "export events", "") == 2
    assert capsys.readouterr().err == "error: the output path is empty; name a file (or - for stdout)\n"
    assert main(["--db", str(judged_db), "dedup", "export", "review", "--out", ""]) == 2
    assert capsys.readouterr().err == "error: the output path is empty; name a directory\n"


# -- a directory output (dedup export) passes the same guard ---------------------------------------

def dedup_export(db: Path, out) -> int:
    return main(["--db", str(db), "dedup", "export", "review", "--out", str(out)])


def test_a_directory_output_cannot_be_stdout(judged_db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert dedup_export(judged_db, "-") == 2
    assert capsys.readouterr().err == ("error: -: a directory output cannot be stdout; name a directory "
                                       "(it is created if missing)\n")
    assert not (tmp_path / "-").exists()


def test_a_directory_output_is_never_written_through_a_link(judged_db, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "deduped"
    link.symlink_to(elsewhere)

    assert dedup_export(judged_db, link) == 2

    assert capsys.readouterr().err.startswith(f"error: {link}: is a symbolic link; name the directory itself")
    assert list(elsewhere.iterdir()) == []


def test_a_directory_that_cannot_be_created_is_one_line_not_a_traceback(judged_db, tmp_path, monkeypatch, capsys):
    out = tmp_path / "deduped"
    real_mkdir = os.mkdir

    def read_only_mkdir(path, *args, **kwargs):
        if Path(path) == out:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", read_only_mkdir)
    assert dedup_export(judged_db, out) == 1
    assert capsys.readouterr().err == (f"error: cannot create directory {out}: Read-only file system; "
                                       "nothing was written\n")


def test_a_directory_output_whose_parent_is_missing_is_refused(judged_db, tmp_path, capsys):
    missing = tmp_path / "no" / "such"
    assert dedup_export(judged_db, missing) == 2
    assert capsys.readouterr().err == f"error: {missing.parent}: directory does not exist (for {missing})\n"


# -- the BM25 index cache beside the database --------------------------------------------------------

def test_no_output_goes_into_the_databases_bm25_index_cache(db, judged_db, capsys):
    cache = f"{db}.indexes"
    for out in (cache, f"{cache}/bm25-1-auto-0123456789abcdef"):
        assert run(db, "export events", out, "--force") == 2
        assert capsys.readouterr().err == (f"error: {out}: is in {cache}, the BM25 index cache of the open "
                                           "workbench database\n")
    assert not Path(cache).exists()
    assert dedup_export(judged_db, f"{judged_db}.indexes") == 2
    assert "the BM25 index cache of the open workbench database" in capsys.readouterr().err


def test_nor_into_the_index_cache_of_another_sqlite_database(db, tmp_path, capsys):
    other = copy_db(db, tmp_path / "other.db")
    out = tmp_path / "other.db.indexes" / "events.jsonl"
    out.parent.mkdir()
    assert run(db, "export events", out) == 2
    assert capsys.readouterr().err == (f"error: {out}: is in {out.parent}, the BM25 index cache of SQLite database "
                                       f"{other}\n")


def test_a_damaged_bm25_index_is_rebuilt_with_a_note_naming_it(db, capsys):
    retrieve = ["--db", str(db), "retrieve", "tiny", "--retriever", "bm25", "--name", "fresh"]
    assert main(retrieve) == 0
    [index] = Path(f"{db}.indexes").iterdir()
    meta = index / "workbench_bm25.json"
    meta.write_text(meta.read_text() + "\n{}\n")
    capsys.readouterr()

    assert main(retrieve) == 0

    err = capsys.readouterr().err
    assert err.startswith(f"note: the BM25 index {index} is damaged (Extra data: line 2 column 1")
    assert err.endswith("); rebuilding it\n") and err.count("\n") == 1
    assert main(retrieve) == 0
    assert capsys.readouterr().err == ""          # the rebuilt index loads


@pytest.mark.parametrize(("name", "how", "kind"), [
    ("data.bin", "a FIFO", "a FIFO"),
    ("vocab.json", "a link to /dev/zero", "a symbolic link"),
    ("workbench_bm25.json", "a link to /dev/zero", "a symbolic link"),
])
def test_a_bm25_index_file_that_is_not_a_file_is_never_read_the_index_is_rebuilt(name, how, kind, db, capsys):
    # A FIFO would block the load for ever; /dev/zero grew to 3.2 GB and ended in a MemoryError traceback.
    retrieve = ["--db", str(db), "retrieve", "tiny", "--retriever", "bm25", "--name", "fresh"]
    assert main(retrieve) == 0
    [index] = Path(f"{db}.indexes").iterdir()
    (index / name).unlink()
    if how == "a FIFO":
        os.mkfifo(index / name)
    else:
        (index / name).symlink_to("/dev/zero")
    capsys.readouterr()

    assert answered_without_blocking(retrieve, index / name) == 0

    assert capsys.readouterr().err == (f"note: the BM25 index {index} is damaged ({name} is {kind}, not a regular "
                                       "file); rebuilding it\n")
    assert main(retrieve) == 0
    assert capsys.readouterr().err == ""          # the rebuilt index loads


def test_an_index_cache_that_is_not_a_directory_costs_a_note_not_the_retrieval(db, capsys):
    cache = Path(f"{db}.indexes")
    cache.write_text("someone's notes\n")

    assert main(["--db", str(db), "retrieve", "tiny", "--retriever", "bm25", "--name", "fresh"]) == 0

    err = capsys.readouterr().err
    assert err.startswith(f"note: cannot save the BM25 index to {cache}/bm25-")
    assert err.endswith("; it will be built again next time\n") and err.count("\n") == 1
    assert cache.read_text() == "someone's notes\n"


# -- nothing probed blocks: a FIFO where a would-be database is looked for -----------------------------

def verbs_with_an_out() -> set[str]:
    """Every verb of the CLI with an --out (``export`` by its kinds): what the probes below must cover."""
    found = set()

    def walk(parser: argparse.ArgumentParser, verb: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*verb, name))
            elif verb == ("export",) and action.dest == "what":
                found.update(f"export {kind}" for kind in action.choices)
        if parser.get_default("out_target") is not None and verb != ("export",):
            found.add(" ".join(verb))

    walk(build_parser(), ())
    return found


# Beside VERBS: the verbs whose output needs what the writer template lacks (the run has no claim run:
# the export is refused after the --out probe, which is what is tried here).
PROBED = {**VERBS, "export claims": ["export", "claims", "s"], "dedup export": ["dedup", "export", "review"]}


def test_the_fifo_probes_cover_every_verb_with_an_out():
    assert verbs_with_an_out() == set(PROBED)


def answered_without_blocking(argv: list[str], fifo: Path) -> int:
    """Run the CLI in a thread; should it open ``fifo`` and wait on it, release it and fail the test."""
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("code", main(argv)))
    worker.start()
    worker.join(10)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join()
        pytest.fail(f"{argv}: opened the FIFO {fifo} and waited on it")
    return result["code"]


@pytest.mark.parametrize("beside", ["-wal", ".indexes"])
@pytest.mark.parametrize("verb", PROBED)
def test_an_output_beside_a_fifo_is_answered_without_opening_the_fifo(verb, beside, db, judged_db, tmp_path, capsys):
    # `--out X-wal` asks whether X is a SQLite database (its -wal would be its journal): X, a FIFO, is
    # looked at with stat and is no database; its header is never read (open() would wait for a writer).
    fifo = tmp_path / "X"
    os.mkfifo(fifo)
    out = f"{fifo}{beside}"
    database = judged_db if verb == "dedup export" else db
    code = answered_without_blocking(["--db", str(database), *PROBED[verb], "--out", out], fifo)
    if verb == "export claims":
        assert (code, capsys.readouterr().err) == (2, "error: run 's' has no claim run yet (`workbench claims run s`)\n")
    else:
        assert code == 0 and Path(out).exists()
    assert stat.S_ISFIFO(fifo.stat().st_mode)
