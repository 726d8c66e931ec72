"""Every model-calling pass through real model servers stores what the same models store in-process.

``python -m llama_cpp.server`` serves SmolLM2 (``smollm2``) and multilingual-e5-small side by side on
loopback (started once for this module: every test that talks to a real server is here); each pass,
choice or vector is computed once in-process and once through ``--backend openai`` / ``URL#NAME`` on
the same GGUFs. Both sides run on this CPU, so they compute the same: the tests assert equality
of what the two store (labels, vectors, scores), never what the model writes. A second run asks
the servers nothing: their own access logs count the requests.
"""

from __future__ import annotations

import json

import pytest

from conftest import copy_db, import_films_kg
from llama_server import same_logits
from relevancekit import DATASET, tiny_db
from workbench.cli import main
from workbench.kg.runner import DedupConfig, execute_dedup, plan_dedup
from workbench.models.cached import default_llm
from workbench.pipelines.runner import SearChainConfig, execute_searchain, plan_searchain
from workbench.store import open_store


pytestmark = [pytest.mark.real_model, same_logits]


def rows(store, sql: str, *params) -> list:
    return store.conn.execute(sql, params).fetchall()


ANSWERS = (("q1", "Kismet was directed by William Dieterle, who also made Juarez for Warner Bros."),
           ("q2", "Marlene Dietrich."))


def test_a_claim_run_with_every_verifier_stores_the_same_verdicts_and_scores(smollm2_server, e5_server,
                                                                            tiny_swept_db, tmp_path, capsys):
    """Hybrid decomposer (q1's long clause goes to the model); lexical + embedding + llm_judge + nli. nli's score
    is the label's probability among the server's 20 listed tokens, so only its label is compared here."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"sample_id": q, "cell_id": "k1-b64-linear", "prediction": text}) + "\n"
                               for q, text in ANSWERS), encoding="utf-8")
    db = str(tiny_swept_db)
    assert main(["--db", db, "predictions", "import", str(answers), "s"]) == 0
    claims = ["--db", db, "claims", "run", "s", "--decomposer", "hybrid",
              "--verifiers", "lexical,embedding,llm_judge,nli", "--json"]
    served = [*claims, "--backend", "openai", "--base-url", smollm2_server.base, "--model", "smollm2",
              "--embedding-model", e5_server.ref, "--concurrency", "3"]
    capsys.readouterr()
    assert main(claims) == 0
    local = json.loads(capsys.readouterr().out)
    asked = smollm2_server.requests(), e5_server.requests()
    assert main(served) == 0
    remote = json.loads(capsys.readouterr().out)
    assert (remote["done"], remote["errors"]) == (local["done"], local["errors"]) == (2, 0)
    assert smollm2_server.requests() > asked[0] and e5_server.requests() > asked[1]
    sql = ("SELECT cell_id, sid, idx, uid, verifier, supported, label, score FROM claim_verdicts"
           " WHERE claim_run_id = ? ORDER BY cell_id, sid, idx, uid, verifier")
    store = open_store(db)
    try:
        here, there = rows(store, sql, local["claim_run"]), rows(store, sql, remote["claim_run"])
        texts = rows(store, "SELECT claim_run_id, cell_id, sid, idx, text, source FROM claims ORDER BY 2, 3, 4, 1")
    finally:
        store.close()
    assert [t[1:] for t in texts[0::2]] == [t[1:] for t in texts[1::2]] and texts
    assert [r[:7] for r in there] == [r[:7] for r in here] and {r[4] for r in here} == {
        "lexical", "embedding", "llm_judge", "nli", "vote"}
    for a, b in zip(here, there):
        if a[4] != "nli":   # vectors agree to a cosine of 0.9999: their similarities to about 1e-4
            assert b[7] == pytest.approx(a[7], abs=1e-3), a
    asked = smollm2_server.requests(), e5_server.requests()
    assert main(served) == 0
    assert (smollm2_server.requests(), e5_server.requests()) == asked   # the rerun asked neither server


def test_the_relevance_judge_stores_the_same_verdicts_and_p_yes(smollm2_server, tmp_path, capsys):
    """Each question's top chunk (three pairs): the two paths agree pair by pair, as they would on more."""
    db = str(tiny_db(tmp_path / "wb.db"))
    judge = ["--db", db, "retrieval", "judge", DATASET, "--retriever", "bm25", "--k", "1", "--json"]
    assert main(judge) == 0
    served = [*judge, "--backend", "openai", "--base-url", smollm2_server.base, "--model", "smollm2"]
    assert main(served) == 0
    store = open_store(db)
    try:
        verdicts = rows(store, "SELECT r.model, v.sid, v.uid, v.relevant, v.score FROM relevance_verdicts v"
                               " JOIN relevance_runs r ON r.id = v.run_id ORDER BY v.sid, v.uid, r.model")
    finally:
        store.close()
    by_model: dict = {}
    for model, sid, uid, relevant, score in verdicts:
        by_model.setdefault(model == smollm2_server.ref, []).append((sid, uid, relevant, score))
    local, remote = by_model[False], by_model[True]
    assert len(remote) == 3 and [r[:3] for r in remote] == [r[:3] for r in local]
    assert [r[3] for r in remote] == pytest.approx([r[3] for r in local], abs=1e-3)
    asked = smollm2_server.requests()
    assert main(served) == 0 and smollm2_server.requests() == asked


def test_a_dedup_judge_stores_the_same_verdicts(smollm2_server, store, tmp_path):
    kg = import_films_kg(store, tmp_path)
    verdict_sql = ("SELECT d.a, d.b, d.mode, d.status, d.is_coreferent, d.confidence, d.rationale, d.context_a"
                   " FROM dedup_verdicts d JOIN dedup_runs r ON r.id = d.run_id WHERE r.name = ? ORDER BY 1, 2, 3")
    local, _, _ = plan_dedup(store, kg, DedupConfig(modes=("graph",)), "local")
    remote, _, _ = plan_dedup(store, kg, DedupConfig(modes=("graph",), model=smollm2_server.ref), "served")
    here_report = execute_dedup(store, local)
    llm = default_llm(store, smollm2_server.ref, concurrency=3)
    there_report = execute_dedup(store, remote, llm=llm)
    assert (there_report.done, there_report.errors) == (here_report.done, here_report.errors)
    here, there = rows(store, verdict_sql, local), rows(store, verdict_sql, remote)
    assert there == here and len(there) >= 2
    asked = smollm2_server.requests()
    plan_dedup(store, kg, DedupConfig(modes=("graph",), model=smollm2_server.ref), "again")
    assert execute_dedup(store, "again", llm=llm).model_calls == 0 and smollm2_server.requests() == asked


@pytest.fixture
def metaqa_store(tmp_path, metaqa_template):
    """A copy of the session's MetaQA import (importing it again costs seconds)."""
    store = open_store(copy_db(metaqa_template, tmp_path / "metaqa.db"))
    yield store
    store.close()


def test_searchain_stores_the_same_chains(smollm2_server, metaqa_store):
    store = metaqa_store
    config = dict(hops=2, limit=1, max_rounds=1, baseline_k=0)
    local, _ = plan_searchain(store, "metaqa", SearChainConfig(**config), "local")
    remote, _ = plan_searchain(store, "metaqa", SearChainConfig(**config, model=smollm2_server.ref), "served")
    here_report = execute_searchain(store, local)
    llm = default_llm(store, smollm2_server.ref, n_ctx=4096, concurrency=2)
    there_report = execute_searchain(store, remote, llm=llm)
    assert (there_report.done, there_report.errors) == (here_report.done, here_report.errors) == (1, 0)
    nodes = ("SELECT n.sid, n.node, n.parent, n.query, n.answer, n.status, n.in_final FROM chain_nodes n"
             " JOIN pipeline_runs p ON p.id = n.prun_id WHERE p.name = ? ORDER BY 1, 2")
    samples = ("SELECT s.sid, s.status, s.prediction, s.baseline_prediction FROM pipeline_samples s"
               " JOIN pipeline_runs p ON p.id = s.prun_id WHERE p.name = ? ORDER BY 1")
    assert rows(store, nodes, remote) == rows(store, nodes, local)
    assert rows(store, samples, remote) == rows(store, samples, local)
    asked = smollm2_server.requests()
    plan_searchain(store, "metaqa", SearChainConfig(**config, model=smollm2_server.ref), "again")
    assert execute_searchain(store, "again", llm=llm).model_calls == 0 and smollm2_server.requests() == asked


# ---------------------------------------------------------------- one choice, one vector

def test_nli_and_relevance_choices_through_a_served_model_equal_the_in_process_ones(smollm2_server, store):
    """One request per pair, no free generation: the label and its probability are the local path's (a pair in
    English, one across Chinese and English)."""
    served = smollm2_server.ref
    from workbench.claims.verify import NLI_OPTIONS, nli_messages
    from workbench.models.cached import default_llm
    from workbench.retrieval.relevance import OPTIONS, relevance_messages

    pairs = [("Kismet was directed by William Dieterle.", "William Dieterle directed Kismet."),
             ("红烧肉要先焯水。", "The recipe says nothing about the oven.")]
    local, remote = default_llm(store), default_llm(store, served)
    try:
        for premise, claim in pairs:
            for messages, options in ((nli_messages(premise, claim), NLI_OPTIONS),
                                      (relevance_messages(claim, premise), OPTIONS)):
                here, there = local.choose(messages, options), remote.choose(messages, options)
                assert here.text == there.text and not there.cached
                assert sum(there.probabilities) == pytest.approx(1.0)
                if all(p > 0 for p in there.probabilities):       # every option among the 20 tokens listed
                    assert there.probabilities == pytest.approx(here.probabilities, abs=1e-3)
                else:                                              # an unlisted option's share goes to the others
                    chosen = options.index(there.text)
                    assert there.probabilities[chosen] >= here.probabilities[chosen] - 1e-3
        calls = remote.model_calls
        again = remote.choose(nli_messages(*pairs[0]), NLI_OPTIONS)
        assert again.cached and remote.model_calls == calls      # the cache answers: no request
    finally:
        local.close()
        remote.close()


# ---------------------------------------------------------------- embeddings over HTTP

def test_vectors_from_a_served_embedding_model_equal_the_in_process_ones_and_are_kept_by_reference(e5_server, store):
    from workbench.models.embedder import CachedEmbedder
    from workbench.models.embedders import E5

    served_e5 = e5_server.ref
    texts = ["how do I braise pork belly", "红烧肉要先焯水，再用冰糖炒出糖色。", "Kismet | directed_by | William Dieterle"]
    local, remote = CachedEmbedder(store), CachedEmbedder(store, served_e5)
    try:
        assert remote.spec is E5 and remote.model_id == served_e5          # its prefixes by its name
        for role in ("query", "passage"):
            here, there = local.vectors(texts, role=role), remote.vectors(texts, role=role)
            assert min(float(a @ b) for a, b in zip(here, there)) >= 0.9999
        assert remote.embedded == 6
        remote.vectors(texts, role="query")
        assert remote.embedded == 6 and remote.cached == 3                   # a second call asks nothing
        kept = dict(store.conn.execute("SELECT model, count(*) FROM embeddings GROUP BY model").fetchall())
        assert kept == {local.model_id: 6, served_e5: 6}
    finally:
        local.close()
        remote.close()


def test_dense_retrieval_through_a_served_embedding_model(e5_server, tiny_store, capsys):
    """The served e5 ranks each question's units as e5 in-process does; a second run sends the server nothing."""
    served_e5 = e5_server.ref
    db = str(tiny_store.path)
    tiny_store.close()
    assert main(["--db", db, "retrieve", "tiny", "--retriever", "dense", "--k", "3", "--name", "local"]) == 0
    assert main(["--db", db, "retrieve", "tiny", "--retriever", "dense", "--k", "3", "--name", "served",
                 "--embedding-model", served_e5]) == 0
    out = capsys.readouterr().out
    assert "retriever served (dense)" in out and f"({served_e5})" in out and "0 from the cache" in out
    store = open_store(db)
    try:
        ranked = {name: [(sid, json.loads(uids)) for sid, uids in store.conn.execute(
            "SELECT sid, uids FROM retrievals WHERE retriever = ? ORDER BY sid", (name,))]
            for name in ("local", "served")}
    finally:
        store.close()
    assert ranked["served"] == ranked["local"] and len(ranked["served"]) == 3
    asked = e5_server.requests()
    assert main(["--db", db, "retrieve", "tiny", "--retriever", "dense", "--k", "3", "--name", "served",
                 "--embedding-model", served_e5]) == 0
    assert "embedded 0 texts" in capsys.readouterr().out and e5_server.requests() == asked
