"""The built-in BM25 retriever feeds the ledger like an imported retrieval.jsonl."""

import json
import shutil

from workbench.cli import main
from workbench.data.importer import import_dataset
from workbench.retrieval.runs import export_retrieval, retrieve
from workbench.runs.report import run_ledger
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store.queries import get_run

from conftest import SAMPLE_METAQA


def test_bm25_over_the_sample_kg_drives_a_ledger_run(store):
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    first = retrieve(store, "metaqa", k=20)
    assert first.index_built and first.queries == 300 and first.mode == "en"
    again = retrieve(store, "metaqa", k=20)
    assert again.unchanged and not again.index_built  # the persisted index is reused
    plan_sweep(store, SweepConfig(ks=(1, 5, 20), budgets=(512,), formats=("score",), retriever="bm25"), name="b")
    rows = {r["k"]: r for r in run_ledger(store, get_run(store, "b"), resamples=100).rows}
    s_set = [rows[k]["S_set"].value for k in (1, 5, 20)]
    assert s_set == sorted(s_set) and s_set[-1] > 0.5


def test_exported_results_import_back_as_a_dataset(store, tmp_path):
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    retrieve(store, "metaqa", k=5)
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in ("kb.jsonl", "samples.jsonl"):
        shutil.copy(SAMPLE_METAQA / f, copy / f)
    with open(copy / "retrieval.jsonl", "w", encoding="utf-8") as out:
        assert export_retrieval(store, out, "metaqa", "bm25") == 300
    line = json.loads((copy / "retrieval.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert line["retriever"] == "bm25" and len(line["results"]) <= 5 and "triple" in line["results"][0]
    report = import_dataset(store, copy, "roundtrip", strict=True)
    assert report.retrievers == ["bm25"] and report.retrievals == 300


def test_cli_retrieve_and_export(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert main(["--db", db, "import", str(SAMPLE_METAQA), "--name", "m"]) == 0
    assert main(["--db", db, "retrieve", "m", "--k", "10"]) == 0
    assert "300 questions stored" in capsys.readouterr().out
    assert main(["--db", db, "retrieval", "export", "m", "--retriever", "bm25", "--out", str(tmp_path / "r.jsonl")]) == 0
    assert len((tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()) == 300
