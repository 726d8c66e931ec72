"""Retrieval evaluation on the HowToCook sample: filename questions, BM25, and questions a real model writes.

That the metrics agree with ranx on this corpus is checked in tests/test_ir_metrics.py, beside the other
ranx cross-checks: ranx compiles its numba containers in each process that uses it (about 15 s), so every
use of it is in one module, one process.
"""

import json

import pytest

from workbench.data.corpus import import_corpus
from workbench.retrieval.evaluate import evaluate_retrieval, filename_questions
from workbench.retrieval.runs import open_index, retrieve
from workbench.store import open_store

from conftest import REPO


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """HowToCook imported as ``hc`` with its filename questions and BM25's top 10, built once: the tests only read it."""
    store = open_store(tmp_path_factory.mktemp("hc") / "wb.db")
    try:
        import_corpus(store, REPO / "sample_data" / "howtocook", "hc")
        assert filename_questions(store, "hc") == 65
        assert filename_questions(store, "hc") == 0  # idempotent
        retrieve(store, "hc", k=10)
        yield store
    finally:
        store.close()


def test_filename_questions_find_their_documents(corpus):
    report = evaluate_retrieval(corpus, "hc", ks=(1, 5, 10), resamples=200)
    doc = report.levels["doc"]["overall"]
    assert doc[("recall", 10)].value >= 0.9
    # precision@k divides by k: one relevant document can give at most 1/k.
    assert doc[("precision", 5)].value <= 0.2 + 1e-12
    assert set(report.levels["doc"]["by_category"]) >= {"meat_dish", "staple"}


def test_hongshaorou_is_retrieved_first(corpus):
    index, built, _ = open_index(corpus, 1)
    assert not built  # persisted by retrieve(): the corpus has not changed
    top_uid = index.search("如何做红烧肉？", 1)[0][0]
    doc = corpus.conn.execute("SELECT doc_id FROM units WHERE uid = ?", (int(top_uid),)).fetchone()[0]
    assert "红烧肉" in doc


@pytest.mark.real_model
@pytest.mark.budget(15)
def test_llm_questions_from_the_real_default_model_parse(store, tmp_path):
    """What holds whatever the model writes on this CPU: every stored question is a well-formed llm
    sample, at most n per document, and a second pass asks the model nothing (a document that got
    no question is asked again, and the cache answers; the text itself is the CPU's: never asserted).

    The corpus is one short recipe: the model reads a short prompt (HowToCook's first document is
    1,200 characters of it), and what is tested does not depend on the document's length."""
    from workbench.models.cached import default_llm
    from workbench.retrieval.evaluate import llm_questions

    recipe = tmp_path / "corpus" / "dishes" / "meat_dish" / "红烧肉.md"
    recipe.parent.mkdir(parents=True)
    recipe.write_text("# 红烧肉的做法\n\n五花肉切块焯水，冰糖炒出糖色，加老抽和清水炖煮一小时。\n", encoding="utf-8")
    import_corpus(store, tmp_path / "corpus", "hc")
    llm = default_llm(store)
    try:
        added = llm_questions(store, "hc", n=3, limit=1, max_tokens=48, llm=llm)
        rows = store.conn.execute("SELECT question, meta FROM samples WHERE id LIKE 'llm:%'").fetchall()
        assert added == len(rows) <= 3 and llm.model_calls == 1
        assert all(q.strip() and json.loads(m)["strategy"] == "llm" for q, m in rows)
        again = llm_questions(store, "hc", n=3, limit=1, max_tokens=48, llm=llm)
        assert llm.model_calls == 1 and llm.cache_hits == (0 if rows else 1)
        assert again == store.conn.execute("SELECT count(*) FROM samples WHERE id LIKE 'llm:%'").fetchone()[0] - added
    finally:
        llm.close()
