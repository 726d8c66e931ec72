"""Retrieval metrics at k (workbench.metrics.ir), cross-checked against ranx.

Every number our metrics produce must equal what ``ranx.evaluate`` gives on the same
qrels and run — per query and in the mean — to 1e-9: on a hand-made set, on random ones, and
on BM25's doc-level results for HowToCook's filename questions as ``retrieval eval`` reports them.

Every use of ranx in the suite is in this module. ranx compiles its numba code for each type it
meets, and an id array's type is its width: ``Qrels`` and ``Run`` of 2-character ids and of
37-character ids compile separately (about 40 s of CPU each). So ranx is given every set with its
ids renamed to one width (``for_ranx``), in the ids' own order: a metric does not depend on what an
id is called, and ranx's order for tied scores follows the input's, not the names'. That one width
is what `just install` compiles and caches (scripts/warm_oracles.py); the typed containers are
still compiled again in each process that uses them (about 15 s of CPU): one module runs in one
process.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import ranx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.data.corpus import import_corpus
from workbench.metrics.ir import (
    METRICS,
    aggregate,
    doc_level,
    evaluate,
    rank,
    ranx_name,
)
from workbench.retrieval.evaluate import evaluate_retrieval, filename_questions
from workbench.retrieval.runs import retrieve

from conftest import REPO

KS = (1, 3, 5, 10)
NAMES = [ranx_name(m, k) for m in METRICS for k in KS]


def for_ranx(qrels, run):
    """``qrels`` ({q: {d: grade}}) and ``run`` ({q: [(d, score)]}) as ranx's ``Qrels`` and ``Run``, every
    id renamed to the one width ranx's compiled code is cached for (``q0000``, ``d0000``: see the module's
    docstring), in sorted order; and the renaming of the queries, to read ranx's per-query scores back."""
    queries = {q: f"q{i:04d}" for i, q in enumerate(sorted(set(qrels) | set(run)))}
    items = {d: f"d{i:04d}" for i, d in enumerate(sorted({d for v in qrels.values() for d in v}
                                                          | {d for r in run.values() for d, _ in r}))}
    assert len(queries) <= 10_000 and len(items) <= 10_000, "one width: at most 10,000 ids of each kind"
    ranx_qrels = ranx.Qrels.from_dict({queries[q]: {items[d]: g for d, g in v.items()} for q, v in qrels.items()})
    ranx_run = ranx.Run.from_dict({queries[q]: {items[d]: float(s) for d, s in r} for q, r in run.items()})
    return ranx_qrels, ranx_run, queries


def ranx_scores(qrels, run) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """ranx's per-query scores ({"recall@5": {qid: v}}) and means for our (qrels, run).

    Our run is a ranked list of (item, score); ranx takes {item: score} and sorts by score
    itself. ``make_comparable=True`` gives queries absent from the run an empty result.
    """
    ranx_qrels, ranx_run, queries = for_ranx(qrels, run)
    means = ranx.evaluate(ranx_qrels, ranx_run, NAMES, make_comparable=True)
    named = {renamed: q for q, renamed in queries.items()}
    return ({m: {named[q]: v for q, v in ranx_run.scores[m].items()} for m in NAMES},
            {m: float(v) for m, v in means.items()})


def assert_agrees_with_ranx(qrels, run) -> None:
    ours = evaluate(qrels, run, KS)
    per_query, means = ranx_scores(qrels, run)
    for name in NAMES:
        for q, value in zip(ours.query_ids, ours[name]):
            assert value == pytest.approx(per_query[name][q], abs=1e-9), (name, q)
        assert ours.mean()[tuple_key(name)] == pytest.approx(means[name], abs=1e-9), name


def tuple_key(name: str) -> tuple[str, int]:
    m, _, k = name.partition("@")
    return m, int(k)


# A hand-made set covering the awkward cases.
QRELS = {
    "ties": {"d03": 1, "d07": 2},             # relevant items sit inside a block of tied scores
    "short": {"d01": 1, "d02": 1, "d09": 1},  # only 2 results, fewer than every k > 2
    "miss": {"d05": 1},                       # nothing relevant retrieved
    "graded": {"d01": 3, "d02": 1, "d04": 2, "d08": 1},  # graded relevance for nDCG
    "absent": {"d01": 1},                     # no run entry at all
}
RUN = {
    "ties": [("d09", 0.9), ("d08", 0.5), ("d07", 0.5), ("d03", 0.5), ("d01", 0.5),
             ("d02", 0.1), ("d04", 0.1)],
    "short": [("d02", 2.0), ("d06", 1.0)],
    "miss": [("d01", 3.0), ("d02", 2.0), ("d03", 1.0)],
    "graded": [("d02", 0.9), ("d01", 0.8), ("d03", 0.7), ("d08", 0.6), ("d04", 0.2),
               ("d05", 0.1), ("d06", 0.05), ("d07", 0.04), ("d09", 0.03), ("d10", 0.02),
               ("d11", 0.01)],
}


def test_every_metric_and_k_equals_ranx_on_the_hand_made_set():
    assert_agrees_with_ranx(QRELS, RUN)


def test_hand_checked_values():
    pq = evaluate(QRELS, RUN, KS)
    i = {q: n for n, q in enumerate(pq.query_ids)}
    # ties: rank = d09, d08, d07, d03, d01, ... (tied 0.5s keep their input order)
    assert pq["mrr@5"][i["ties"]] == pytest.approx(1 / 3)
    assert pq["recall@3"][i["ties"]] == pytest.approx(1 / 2)
    # short: precision divides by k even though only 2 items were retrieved
    assert pq["precision@10"][i["short"]] == pytest.approx(1 / 10)
    assert pq["recall@10"][i["short"]] == pytest.approx(1 / 3)
    # miss and absent score 0 everywhere
    for name in NAMES:
        assert pq[name][i["miss"]] == 0.0 and pq[name][i["absent"]] == 0.0
    # graded nDCG@1: gain is the grade (1) over the ideal grade (3): Järvelin, not 2^g − 1
    assert pq["ndcg@1"][i["graded"]] == pytest.approx(1 / 3)


def test_ties_keep_input_order_like_ranx_and_can_break_by_id():
    items = [("b", 1.0), ("c", 1.0), ("a", 1.0), ("z", 2.0)]
    assert rank(items) == ["z", "b", "c", "a"]
    assert rank(items, ties="id") == ["z", "a", "b", "c"]
    # the relevant item's rank among ties follows the input order, as in ranx
    for pos in range(4):
        order = ["d00", "d01", "d02"]
        order.insert(pos, "d09")
        run = {"q": [(d, 1.0) for d in order]}
        qrels = {"q": {"d09": 1}}
        assert evaluate(qrels, run, [5])["mrr@5"][0] == pytest.approx(1 / (pos + 1))
        assert_agrees_with_ranx(qrels, run)


def test_a_repeated_item_keeps_its_best_rank():
    assert rank([("a", 3.0), ("b", 2.0), ("a", 1.0)]) == ["a", "b"]


def test_query_only_in_the_run_is_ignored_and_order_is_that_of_qrels():
    pq = evaluate({"q2": {"x": 1}, "q1": {"y": 1}}, {"q1": [("y", 1.0)], "extra": [("x", 1.0)]}, [1])
    assert pq.query_ids == ("q2", "q1")
    assert list(pq["hit_rate@1"]) == [0.0, 1.0]


@pytest.fixture
def howtocook(store):
    """HowToCook imported as ``hc``, with its filename questions and BM25's top 10."""
    import_corpus(store, REPO / "sample_data" / "howtocook", "hc")
    filename_questions(store, "hc")
    retrieve(store, "hc", k=10)
    return store


def test_doc_level_metrics_of_retrieval_eval_agree_with_ranx(howtocook):
    """What ``retrieval eval`` reports at the document level, at every metric and k, is ranx's mean over the
    same questions: the chunks' ranking folded to documents (each at its best rank), one gold document each."""
    report = evaluate_retrieval(howtocook, "hc", ks=KS, resamples=50)
    samples = howtocook.conn.execute("SELECT id, sid, meta FROM samples").fetchall()
    chunk_of = dict(howtocook.conn.execute("SELECT uid, chunk_id FROM units"))
    parent = dict(howtocook.conn.execute("SELECT chunk_id, doc_id FROM units"))
    ranked = {sid: list(zip(json.loads(u), json.loads(s))) for sid, u, s in
              howtocook.conn.execute("SELECT sid, uids, scores FROM retrievals")}
    runs = doc_level({i: [(chunk_of[u], x) for u, x in ranked[sid]] for i, sid, _ in samples}, parent)
    qrels, run, _ = for_ranx({i: {json.loads(m)["doc_id"]: 1} for i, _, m in samples},
                             {q: r for q, r in runs.items() if r})
    expected = ranx.evaluate(qrels, run, NAMES, make_comparable=True)
    for name in NAMES:
        assert report.levels["doc"]["overall"][tuple_key(name)].value == pytest.approx(expected[name], abs=1e-9), name


# Property test: random small qrels/runs agree with ranx. Run lists are kept at ≤ 15 items:
# above that ranx orders tied scores by an unstable quicksort (see the module doc).
IDS = [f"d{i:02d}" for i in range(15)]


@st.composite
def qrels_and_run(draw):
    nq = draw(st.integers(1, 5))
    qrels, run = {}, {}
    for q in (f"q{i}" for i in range(nq)):
        rel = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=6, unique=True))
        qrels[q] = {d: draw(st.integers(1, 3)) for d in rel}
        if draw(st.booleans()) or q == "q0":  # some queries are absent from the run
            ret = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=12, unique=True))
            run[q] = [(d, draw(st.sampled_from([0.1, 0.2, 0.3, 0.5]))) for d in ret]  # many ties
    return qrels, run


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qrels_and_run())
def test_random_qrels_and_runs_agree_with_ranx(data):
    qrels, run = data
    assert_agrees_with_ranx(qrels, run)


def test_seed_002_doc_level_example():
    """Question from 红烧肉.md; one of its chunks is in the top 5 → Recall@5 = 1, P@5 = 0.2."""
    parent = {
        "红烧肉#1": "meat_dish/红烧肉.md", "红烧肉#2": "meat_dish/红烧肉.md",
        "宫保鸡丁#1": "meat_dish/宫保鸡丁.md", "麻婆豆腐#1": "vegetable_dish/麻婆豆腐.md",
        "地三鲜#1": "vegetable_dish/地三鲜.md", "西红柿鸡蛋#1": "meat_dish/西红柿鸡蛋.md",
    }
    chunks = {"如何做红烧肉？": [("宫保鸡丁#1", 0.9), ("红烧肉#2", 0.8), ("麻婆豆腐#1", 0.7),
                                ("地三鲜#1", 0.6), ("西红柿鸡蛋#1", 0.5), ("红烧肉#1", 0.4)]}
    docs = doc_level(chunks, parent)
    assert [d for d, _ in docs["如何做红烧肉？"]] == [
        "meat_dish/宫保鸡丁.md", "meat_dish/红烧肉.md", "vegetable_dish/麻婆豆腐.md",
        "vegetable_dish/地三鲜.md", "meat_dish/西红柿鸡蛋.md"]  # 红烧肉 kept at its best rank
    pq = evaluate({"如何做红烧肉？": {"meat_dish/红烧肉.md": 1}}, docs, [5])
    assert pq["recall@5"][0] == 1.0
    assert pq["precision@5"][0] == pytest.approx(0.2)
    assert pq["mrr@5"][0] == pytest.approx(0.5)


def test_doc_level_rejects_a_chunk_without_parent():
    with pytest.raises(KeyError):
        doc_level({"q": [("orphan", 1.0)]}, {})


# Bootstrap aggregate.
def _per_query():
    rng = np.random.default_rng(7)
    n = 40
    qrels = {f"q{i}": {f"d{j}": 1 for j in rng.choice(20, 2, replace=False)} for i in range(n)}
    run = {f"q{i}": [(f"d{j}", float(-r)) for r, j in enumerate(rng.permutation(20)[:10])]
           for i in range(n)}
    groups = {f"q{i}": ("template" if i % 3 else "llm") for i in range(n)}
    return evaluate(qrels, run, KS), groups


def test_aggregate_is_seeded_and_brackets_the_mean():
    pq, groups = _per_query()
    a = aggregate(pq, resamples=500, seed=3, groups=groups)
    b = aggregate(pq, resamples=500, seed=3, groups=groups)
    c = aggregate(pq, resamples=500, seed=4, groups=groups)
    assert a == b
    assert a.overall != c.overall
    for key, est in a.overall.items():
        assert est.value == pytest.approx(pq[key].mean())
        assert est.lo <= est.value <= est.hi
    assert a.n == 40 and a.n_by_group == {"llm": 14, "template": 26}


def test_per_group_means_are_the_plain_means_of_the_group_rows():
    pq, groups = _per_query()
    a = aggregate(pq, resamples=200, seed=0, groups=groups)
    labels = np.array([groups[q] for q in pq.query_ids])
    for g, ests in a.by_group.items():
        for key, est in ests.items():
            assert est.value == pytest.approx(pq[key][labels == g].mean(), abs=1e-12)
            assert est.lo <= est.value <= est.hi


def test_aggregate_edge_cases():
    empty = evaluate({}, {}, [5])
    assert all(e.value is None for e in aggregate(empty, resamples=10).overall.values())
    pq, _ = _per_query()
    with pytest.raises(ValueError):
        aggregate(pq, resamples=10, groups={"q0": "a"})
