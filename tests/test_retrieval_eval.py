"""Retrieval evaluation on the HowToCook sample: filename questions, BM25, metrics that agree with ranx."""

import pytest

from workbench.data.corpus import import_corpus
from workbench.retrieval.evaluate import evaluate_retrieval, filename_questions
from workbench.retrieval.runs import retrieve

from conftest import REPO


@pytest.fixture
def corpus(store):
    import_corpus(store, REPO / "sample_data" / "howtocook", "hc")
    assert filename_questions(store, "hc") == 65
    assert filename_questions(store, "hc") == 0  # idempotent
    retrieve(store, "hc", k=10)
    return store


def test_filename_questions_find_their_documents(corpus):
    report = evaluate_retrieval(corpus, "hc", ks=(1, 5, 10), resamples=200)
    doc = report.levels["doc"]["overall"]
    assert doc[("recall", 10)].value >= 0.9
    # precision@k divides by k: one relevant document can give at most 1/k.
    assert doc[("precision", 5)].value <= 0.2 + 1e-12
    assert set(report.levels["doc"]["by_category"]) >= {"meat_dish", "staple"}


def test_hongshaorou_is_retrieved_first(corpus):
    from workbench.retrieval.runs import open_index

    index, built, _ = open_index(corpus, 1)
    assert not built  # persisted by retrieve(): the corpus has not changed
    top_uid = index.search("如何做红烧肉？", 1)[0][0]
    doc = corpus.conn.execute("SELECT doc_id FROM units WHERE uid = ?", (int(top_uid),)).fetchone()[0]
    assert "红烧肉" in doc


def test_doc_level_metrics_agree_with_ranx(corpus):
    import json

    from ranx import Qrels, Run, evaluate as ranx_evaluate

    from workbench.metrics.ir import doc_level

    report = evaluate_retrieval(corpus, "hc", ks=(1, 3, 5, 10), resamples=50)
    samples = corpus.conn.execute("SELECT id, sid, meta FROM samples").fetchall()
    chunk_of = dict(corpus.conn.execute("SELECT uid, chunk_id FROM units"))
    parent = dict(corpus.conn.execute("SELECT chunk_id, doc_id FROM units"))
    ranked = {sid: list(zip(json.loads(u), json.loads(s))) for sid, u, s in
              corpus.conn.execute("SELECT sid, uids, scores FROM retrievals")}
    runs = doc_level({i: [(chunk_of[u], x) for u, x in ranked[sid]] for i, sid, _ in samples}, parent)
    qrels = Qrels.from_dict({i: {json.loads(m)["doc_id"]: 1} for i, _, m in samples})
    run = Run.from_dict({q: {d: float(x) for d, x in r} for q, r in runs.items() if r})
    names = [f"{m}@{k}" for m in ("recall", "precision", "hit_rate", "mrr", "f1", "ndcg") for k in (1, 3, 5, 10)]
    expected = ranx_evaluate(qrels, run, names, make_comparable=True)
    for name in names:
        m, k = name.split("@")
        assert report.levels["doc"]["overall"][(m, int(k))].value == pytest.approx(expected[name], abs=1e-9), name


@pytest.mark.real_model
def test_llm_questions_from_the_real_default_model_parse(store):
    """What holds whatever the model writes on this CPU: every stored question is a well-formed llm
    sample, at most n per document, and a second pass asks the model nothing (a document that got
    no question is asked again, and the cache answers; the text itself is the CPU's: never asserted)."""
    import json

    from workbench.models.cached import default_llm
    from workbench.retrieval.evaluate import llm_questions

    import_corpus(store, REPO / "sample_data" / "howtocook", "hc")
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
