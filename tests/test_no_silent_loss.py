"""No silent loss: every verb that deletes or replaces refuses without an explicit flag and,
with it, says what went; exports never write through a link or into a device; a corpus stays
under its root; two imports of one name at once end in one dataset and a clear message.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SAMPLE_METAQA, copy_db, write_jsonl
from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.cli import main
from workbench.data.corpus import import_corpus
from workbench.data.outfile import write_atomic
from workbench.data.importer import ChangedMeanwhile, DatasetExists, import_dataset
from workbench.data.predictions import import_predictions
from workbench.errors import BadInput, EnvironmentFault
from workbench.kg.importer import import_kg
from workbench.retrieval.runs import retrieve
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import delete_run, get_run

HOWTOCOOK = REPO / "sample_data" / "howtocook"


def run_cli(*argv: str) -> int:
    return main([str(a) for a in argv])


def dataset_rows(db: Path) -> dict[str, int]:
    store = open_store(db)
    try:
        return dict(store.conn.execute(
            "SELECT d.name, (SELECT count(*) FROM samples s WHERE s.dataset_id = d.id) FROM datasets d").fetchall())
    finally:
        store.close()


@pytest.fixture(scope="module")
def swept_once(tmp_path_factory):
    """sample_data/metaqa imported as ``m`` with a 5-question sweep planned on it (the issue's repro), built once."""
    db = tmp_path_factory.mktemp("swept") / "x.db"
    assert run_cli("--db", db, "import", SAMPLE_METAQA, "--name", "m") == 0
    assert run_cli("--db", db, "sweep", "m", "--k", "1", "--budget", "128", "--format", "linear",
                   "--limit", "5", "--name", "r") == 0
    return db


@pytest.fixture
def swept(swept_once, tmp_path):
    """That database: this test's copy."""
    return copy_db(swept_once, tmp_path / "x.db")


# -- 1. corpus import over an existing dataset ------------------------------------------------
def test_corpus_import_over_an_existing_dataset_is_refused_and_deletes_nothing(swept, capsys):
    capsys.readouterr()
    assert run_cli("--db", swept, "corpus", "import", HOWTOCOOK, "--name", "m") == 2

    err = capsys.readouterr().err.strip()
    assert err.startswith("error: dataset 'm' already exists with different content; pass --replace")
    assert "300 samples" in err and "1 run (5 events, 0 answered)" in err
    assert dataset_rows(swept) == {"m": 300}
    store = open_store(swept)
    assert get_run(store, "r").dataset == "m"
    store.close()


def test_corpus_import_with_replace_says_what_it_deleted(swept, capsys):
    capsys.readouterr()
    assert run_cli("--db", swept, "corpus", "import", HOWTOCOOK, "--name", "m", "--replace", "--json") == 0

    out, err = capsys.readouterr()
    assert err.startswith("replaced dataset m: deleted 300 samples, ")
    assert "1 run (5 events, 0 answered), 0 claim runs, 0 SearChain runs" in err
    replaced = json.loads(out)["replaced"]
    assert (replaced["samples"], replaced["runs"], replaced["events"]) == (300, 1, 5)
    assert dataset_rows(swept) == {"m": 0}   # now the corpus, without questions yet


def test_reimporting_the_same_corpus_is_still_a_no_op(tmp_path, capsys):
    db = tmp_path / "c.db"
    assert run_cli("--db", db, "corpus", "import", HOWTOCOOK, "--name", "hc") == 0
    capsys.readouterr()
    assert run_cli("--db", db, "corpus", "import", HOWTOCOOK, "--name", "hc") == 0   # no --replace needed
    out, err = capsys.readouterr()
    assert "hc: unchanged (already imported): 65 documents" in out and "replaced" not in err


# -- 2. the other verbs that delete or replace --------------------------------------------------
def test_import_replace_says_what_it_deleted(swept, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(SAMPLE_METAQA, other)
    lines = (other / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    (other / "samples.jsonl").write_text("\n".join(lines[:10]) + "\n", encoding="utf-8")
    (other / "retrieval.jsonl").unlink()
    capsys.readouterr()

    assert run_cli("--db", swept, "import", other, "--name", "m") == 2
    assert "that deletes 300 samples" in capsys.readouterr().err
    assert run_cli("--db", swept, "import", other, "--name", "m", "--replace") == 0

    err = capsys.readouterr().err
    assert "replaced dataset m: deleted 300 samples, " in err and "300 retrieval rows, 1 run (5 events" in err
    assert dataset_rows(swept) == {"m": 10}


def test_dedup_import_replace_says_what_it_deleted(tmp_path, capsys):
    kg = tmp_path / "kg"
    kg.mkdir()
    write_jsonl(kg / "kb.jsonl", [{"triple": ["Kismet", "directed_by", "William Dieterle"]},
                                  {"triple": ["Juarez", "directed_by", "W. Dieterle"]}])
    db = tmp_path / "kg.db"
    assert run_cli("--db", db, "dedup", "import", kg, "--name", "films") == 0
    write_jsonl(kg / "kb.jsonl", [{"triple": ["Kismet", "directed_by", "William Dieterle"]}])
    capsys.readouterr()

    assert run_cli("--db", db, "dedup", "import", kg, "--name", "films") == 2
    assert "that deletes 2 triples, 4 entities, 0 chunks, 0 dedup runs" in capsys.readouterr().err
    assert run_cli("--db", db, "dedup", "import", kg, "--name", "films", "--replace") == 0
    assert "replaced KG films: deleted 2 triples, 4 entities" in capsys.readouterr().err


def test_retrieve_over_other_results_is_refused_and_replace_counts_them(tiny_store, capsys):
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), name="s")

    with pytest.raises(BadInput, match=r"retriever 'bm25' .* replace its 3 rows \(1 run planned on them"):
        retrieve(tiny_store, "tiny", k=2)   # the imported bm25 results differ from the built-in BM25's
    report = retrieve(tiny_store, "tiny", k=2, replace=True)

    assert report.replaced == {"retrieval_rows": 3, "runs_planned_on_them": 1}


@pytest.fixture
def verified_run(tiny_store, tmp_path):
    """A 3-question run answered by imported predictions, its claims verified without a model."""
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), name="s")
    run = get_run(tiny_store, "s")
    rows = [{"sample_id": s, "cell_id": "k1-b64-score", "prediction": p}
            for s, p in (("q1", "William Dieterle"), ("q2", "Marlene Dietrich"), ("q3", "French"))]
    import_predictions(tiny_store, run, write_jsonl(tmp_path / "p.jsonl", rows))
    run_claims(tiny_store, run, ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
    return tiny_store, run, rows


def test_replacing_a_prediction_resets_the_claims_verified_on_it(verified_run, tmp_path):
    store, run, rows = verified_run
    rows[1]["prediction"] = "William Dieterle"

    report = import_predictions(store, run, write_jsonl(tmp_path / "p2.jsonl", rows), replace=True)

    assert (report.scored, report.overwritten, report.claims_reset) == (1, 1, 1)
    jobs = dict(store.conn.execute("SELECT sid, status FROM claim_jobs").fetchall())
    assert jobs == {1: "done", 2: "pending", 3: "done"}
    assert store.conn.execute("SELECT count(*) FROM claims WHERE sid = 2").fetchone()[0] == 0


def test_deleting_a_run_returns_what_went_with_it(verified_run):
    store, run, _ = verified_run
    assert delete_run(store, "s") == {"cells": 1, "events": 3, "answered_events": 3, "claim_runs": 1}
    assert store.count("events") == store.count("claim_runs") == 0


# -- 3. export --out: what the output guard refuses is tested verb by verb in test_output_guard.py -----
@pytest.fixture
def export_db(tiny_store):
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), name="s")
    return tiny_store.path


def export_events(db: Path, out, *extra: str) -> int:
    return run_cli("--db", db, "export", "events", "s", "--out", out, "--format", "csv", *extra)


def test_a_link_or_a_device_is_never_written_through_not_even_with_force(export_db, tmp_path, capsys):
    (tmp_path / "real").mkdir()
    link = tmp_path / "events.csv"
    link.symlink_to(tmp_path / "real" / "events.csv")   # dangling: an export would once have created it
    assert export_events(export_db, link, "--force") == 2
    assert link.is_symlink() and not (tmp_path / "real" / "events.csv").exists()
    assert export_events(export_db, "/dev/full", "--force") == 2
    assert "is a character device" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_an_existing_export_is_replaced_only_with_force_and_keeps_its_permissions(export_db, tmp_path, capsys):
    out = tmp_path / "events.csv"
    out.write_text("old\n")
    out.chmod(0o644)
    assert export_events(export_db, out) == 2 and out.read_text() == "old\n"
    assert export_events(export_db, out, "--force") == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o644 and out.read_text().startswith("sample_id,cell_id,")
    assert export_events(export_db, tmp_path) == 2
    assert "is a directory" in capsys.readouterr().err


def test_write_atomic_reports_a_failed_write_as_an_environment_fault(tmp_path):
    tmp_path.chmod(0o500)
    try:
        if os.access(tmp_path, os.W_OK):
            pytest.skip("running as root: a read-only directory is still writable")
        with pytest.raises(EnvironmentFault, match="cannot write .*out.csv: Permission denied"):
            write_atomic(tmp_path / "out.csv", ["x"])
    finally:
        tmp_path.chmod(0o700)


# -- 4. corpus links leaving the root ---------------------------------------------------------
@pytest.fixture
def linked_corpus(tmp_path):
    """A corpus with a real file, a link inside it, and two links out of it (a file and a folder)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# secret\nnot part of the corpus", encoding="utf-8")
    root = tmp_path / "corpus"
    (root / "dishes").mkdir(parents=True)
    (root / "dishes" / "soup.md").write_text("# soup\nboil water", encoding="utf-8")
    (root / "dishes" / "also-soup.md").symlink_to("soup.md")
    (root / "passwd.md").symlink_to(outside / "secret.md")
    (root / "dishes" / "more").symlink_to(outside)
    return root


def test_corpus_links_out_of_the_root_are_skipped_and_named(store, linked_corpus):
    report = import_corpus(store, linked_corpus, "c")

    docs = [r[0] for r in store.conn.execute("SELECT doc_id FROM documents ORDER BY doc_id")]
    assert docs == ["dishes/also-soup.md", "dishes/soup.md"]
    outside = linked_corpus.parent / "outside"
    assert report.skipped_links == [f"dishes/more -> {outside}", f"passwd.md -> {outside / 'secret.md'}"]
    assert "secret" not in " ".join(r[0] for r in store.conn.execute("SELECT text FROM units"))


def test_corpus_import_warns_per_skipped_link_and_counts_them(tmp_path, linked_corpus, capsys):
    assert run_cli("--db", tmp_path / "c.db", "corpus", "import", linked_corpus, "--name", "c") == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.startswith("warning: symbolic link leaves the corpus root")]
    assert len(warnings) == 2 and "passwd.md ->" in warnings[1]
    assert "c: imported: 2 documents" in out and "2 links leaving the root skipped" in out


# -- 5. the same name imported twice at once --------------------------------------------------
def another_process_before_the_write(monkeypatch, store, act):
    """Run ``act(other_store)`` on a second connection just before ``store`` opens its write
    transaction: between the import's name check and its insert, where another process can land."""
    real = store.transaction

    def transaction():
        other = open_store(store.path)
        try:
            act(other)
        finally:
            other.close()
        return real()

    monkeypatch.setattr(store, "transaction", transaction)


def other_tiny(tiny_dir: Path, to: Path, genre: str = "Drama") -> Path:
    """A copy of ``tiny_dir`` at ``to`` with one more triple: other content for the same name."""
    shutil.copytree(tiny_dir, to)
    with open(to / "kb.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"triple": ["Kismet", "genre", genre]}) + "\n")
    return to


def test_import_finding_its_name_taken_meanwhile_writes_nothing_and_says_so(store, tiny_dir, tmp_path, monkeypatch):
    other = other_tiny(tiny_dir, tmp_path / "other")
    another_process_before_the_write(monkeypatch, store, lambda s: import_dataset(s, other, "m"))

    with pytest.raises(ChangedMeanwhile, match="dataset 'm' was created by another process while this import "
                                               "ran; nothing was written by this one"):
        import_dataset(store, tiny_dir, "m")
    assert store.conn.execute("SELECT count(*) FROM units").fetchone()[0] == 6   # the other's 6 triples only


def test_import_of_the_same_files_meanwhile_is_simply_unchanged(store, tiny_dir, monkeypatch):
    another_process_before_the_write(monkeypatch, store, lambda s: import_dataset(s, tiny_dir, "m"))
    report = import_dataset(store, tiny_dir, "m")
    assert report.unchanged and store.count("datasets") == 1 and store.count("samples") == 3


def test_replace_refuses_when_another_process_replaced_the_dataset_meanwhile(store, tiny_dir, tmp_path,
                                                                             monkeypatch):
    import_dataset(store, tiny_dir, "m")
    other = other_tiny(tiny_dir, tmp_path / "other")
    third = other_tiny(other, tmp_path / "third", genre="War")
    another_process_before_the_write(monkeypatch, store, lambda s: import_dataset(s, third, "m", replace=True))

    with pytest.raises(ChangedMeanwhile, match="replaced or deleted by another process"):
        import_dataset(store, other, "m", replace=True)
    assert store.count("units") == 7


def test_corpus_and_kg_imports_finding_their_name_taken_meanwhile_say_so(store, tmp_path, monkeypatch):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# a\ntext", encoding="utf-8")
    other_corpus = tmp_path / "other-corpus"     # the other process's: another corpus under the same name
    other_corpus.mkdir()
    (other_corpus / "b.md").write_text("# b\nother text", encoding="utf-8")
    another_process_before_the_write(monkeypatch, store, lambda s: import_corpus(s, other_corpus, "c"))
    with pytest.raises(ChangedMeanwhile, match="dataset 'c' was created by another process"):
        import_corpus(store, corpus, "c")

    kg = tmp_path / "kg"
    kg.mkdir()
    write_jsonl(kg / "kb.jsonl", [{"triple": ["a", "r", "b"]}])
    other = tmp_path / "kg2"
    other.mkdir()
    write_jsonl(other / "kb.jsonl", [{"triple": ["a", "r", "c"]}])
    monkeypatch.undo()
    another_process_before_the_write(monkeypatch, store, lambda s: import_kg(s, other, "k"))
    with pytest.raises(ChangedMeanwhile, match="KG 'k' was created by another process"):
        import_kg(store, kg, "k")
    assert isinstance(ChangedMeanwhile("KG", "k", None), DatasetExists)   # exit 2, like any taken name


def test_two_processes_importing_one_name_at_once_end_in_one_dataset_and_a_clear_message(tmp_path):
    db = tmp_path / "race.db"
    open_store(db).close()   # migrated once, so both processes start on the same footing
    other = tmp_path / "other"
    shutil.copytree(SAMPLE_METAQA, other)
    with open(other / "kb.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"triple": ["Kismet", "genre", "Drama"]}) + "\n")
    procs = [subprocess.Popen([sys.executable, "-m", "workbench.cli", "--db", str(db), "import", str(d),
                               "--name", "m"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for d in (SAMPLE_METAQA, other)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]

    assert sorted(code for code, _, _ in results) == [0, 2], results
    loser_err = next(err for code, _, err in results if code == 2)
    assert "Traceback" not in loser_err and loser_err.startswith("error: dataset 'm' ")
    assert len(loser_err.strip().splitlines()) == 1
    assert list(dataset_rows(db)) == ["m"]
