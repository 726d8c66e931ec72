"""Every model-calling pass through real model servers stores what the same models store in-process.

``python -m llama_cpp.server`` serves SmolLM2 (``smollm2``) and multilingual-e5-small side by side on
loopback; each pass runs once in-process and once through ``--backend openai`` / ``URL#NAME`` on
the same GGUFs. Both sides run on this CPU, so they compute the same: the tests assert equality
of what the two store (labels, vectors, scores), never what the model writes. A second run asks
the servers nothing: their own access logs count the requests.
"""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLE_METAQA, import_films_kg
from llama_server import same_logits
from relevancekit import DATASET, tiny_db
from workbench.cli import main
from workbench.data.importer import import_dataset
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
    db = str(tiny_db(tmp_path / "wb.db"))
    judge = ["--db", db, "retrieval", "judge", DATASET, "--retriever", "bm25", "--k", "2", "--json"]
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
    assert len(remote) == 6 and [r[:3] for r in remote] == [r[:3] for r in local]
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


def test_searchain_stores_the_same_chains(smollm2_server, store):
    import_dataset(store, SAMPLE_METAQA, "metaqa")
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
