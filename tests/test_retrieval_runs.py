"""The built-in BM25 retriever feeds the ledger like an imported retrieval.jsonl."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.data.importer import import_dataset
from workbench.retrieval.runs import export_retrieval, retrieve
from workbench.runs.report import run_ledger
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run

from conftest import SAMPLE_METAQA, copy_db


@pytest.fixture
def metaqa_store(tmp_path, metaqa_template):
    """sample_data/metaqa imported as ``metaqa`` (conftest's template, copied), open."""
    store = open_store(copy_db(metaqa_template, tmp_path / "wb.db"))
    yield store
    store.close()


def test_bm25_over_the_sample_kg_drives_a_ledger_run(metaqa_store):
    store = metaqa_store
    first = retrieve(store, "metaqa", k=20)
    assert first.index_built and first.queries == 300 and first.mode == "en"
    again = retrieve(store, "metaqa", k=20)
    assert again.unchanged and not again.index_built  # the persisted index is reused
    plan_sweep(store, SweepConfig(ks=(1, 5, 20), budgets=(512,), formats=("score",), retriever="bm25"), name="b")
    rows = {r["k"]: r for r in run_ledger(store, get_run(store, "b"), resamples=100).rows}
    s_set = [rows[k]["S_set"].value for k in (1, 5, 20)]
    assert s_set == sorted(s_set) and s_set[-1] > 0.5


def test_exported_results_import_back_as_a_dataset(metaqa_store, tmp_path):
    store = metaqa_store
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


def test_bm25_retrieve_prints_no_third_party_warning(tmp_path):
    # Once: every BM25 retrieve printed jieba's two-line pkg_resources deprecation warning.
    corpus = tmp_path / "菜谱"
    corpus.mkdir()
    (corpus / "红烧肉.md").write_text("# 红烧肉的做法\n\n五花肉切块，加糖炒色，再加酱油焖煮。", encoding="utf-8")
    (corpus / "番茄炒蛋.md").write_text("# 番茄炒蛋的做法\n\n鸡蛋打散炒熟，加入番茄翻炒。", encoding="utf-8")
    db = str(tmp_path / "r.db")
    assert main(["--db", db, "corpus", "import", str(corpus), "--name", "cook"]) == 0
    assert main(["--db", db, "questions", "generate", "cook"]) == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    done = subprocess.run([sys.executable, "-m", "workbench.cli", "--db", db, "retrieve", "cook", "--retriever", "bm25",
                           "--mode", "jieba"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "2 questions stored" in done.stdout
    assert "Warning" not in done.stderr, done.stderr
