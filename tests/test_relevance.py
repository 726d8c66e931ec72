"""LLM-judged chunk relevance: the resumable, cached judging pass; judged precision and nDCG against
hand-computed values; the judges' side (labels, κ, PPI) for relevance.

The logic is tested on a small hand-made chunk dataset whose verdicts a scripted one-pass chooser gives
(tests/relevancekit.py: a test double of the backend, under the real CachedLLM and its cache: the
verdicts are the test's, not a model's). Tests with the real model (SmolLM2) assert only what holds on
every CPU: jobs done, rows written, cache hits, valid verdicts; never which verdict the model gave.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import copy_db, write_jsonl
from relevancekit import DATASET, QUESTIONS, RANKED, VERDICTS, build_tiny, p_yes, scripted_llm, tiny_db
from workbench.data.errors import InputRejected
from workbench.data.importer import import_dataset
from workbench.data.labels import export_labels, import_labels
from workbench.judges.items import population, uniform_rank
from workbench.judges.queue import label_queue
from workbench.judges.report import judge_report, labelled_estimates
from workbench.models.locate import cached_file_sha256, resolve_model
from workbench.retrieval.relevance import (OPTIONS, judge_relevance, judged_metrics, judged_pair,
                                           relevance_messages)
from workbench.store import open_store
from workbench.store.labels import RelevanceKey, labels_of, put_label
from workbench.store.lease import LeaseRecovered

@pytest.fixture(scope="module")
def tiny_template(tmp_path_factory) -> Path:
    # The judge's sha256 is read once, for every copy.
    return tiny_db(tmp_path_factory.mktemp("relevance") / "wb.db",
                   then=lambda store: cached_file_sha256(store, resolve_model("default")))


@pytest.fixture
def tiny(tmp_path, tiny_template):
    store = open_store(copy_db(tiny_template, tmp_path / "wb.db"))
    yield store
    store.close()


def ids(store):
    q = store.conn.execute
    sids = dict(q("SELECT id, sid FROM samples"))
    uids = dict(q("SELECT chunk_id, uid FROM units"))
    return sids, uids


def verdict_rows(store):
    sids, uids = ids(store)
    sample, chunk = {v: k for k, v in sids.items()}, {v: k for k, v in uids.items()}
    return {(run, sample[s], chunk[u]): (status, relevant, score)
            for run, s, u, status, relevant, score in store.conn.execute(
                "SELECT r.retriever || '@' || r.k, v.sid, v.uid, v.status, v.relevant, v.score"
                " FROM relevance_verdicts v JOIN relevance_runs r ON r.id = v.run_id")}


# -- the pass -------------------------------------------------------------------------------------------

def test_the_pass_judges_each_top_k_pair_once_and_a_second_run_calls_no_model(tiny):
    llm = scripted_llm(tiny)
    first = judge_relevance(tiny, DATASET, "bm25", k=3, llm=llm)
    assert (first.jobs, first.done, first.errors, first.model_calls, first.cache_hits) == (8, 8, 0, 8, 0)
    assert first.relevant == 3 and first.run == f"{DATASET}:bm25@3"
    rows = verdict_rows(tiny)
    assert rows == {("bm25@3", q, c): ("done", int(VERDICTS[(q, c)] == "Yes"), p_yes(VERDICTS[(q, c)]))
                    for q, cs in RANKED["bm25"].items() for c in cs[:3]}
    again = judge_relevance(tiny, DATASET, "bm25", k=3, llm=llm)
    assert (again.jobs, again.done, again.model_calls, again.cache_hits) == (0, 0, 0, 0)
    # Another depth is another run: its pairs replay from the cache (the same prompts), no model call.
    shallow = judge_relevance(tiny, DATASET, "bm25", k=2, llm=llm)
    assert (shallow.jobs, shallow.done, shallow.model_calls, shallow.cache_hits) == (6, 6, 0, 6)
    assert llm.scripted.calls == 8
    assert tiny.count("relevance_runs") == 2 and tiny.count("relevance_verdicts") == 14
    keys = {k for (k,) in tiny.conn.execute("SELECT gen_key FROM relevance_verdicts")}
    choices = "SELECT count(*) FROM generations WHERE finish_reason = 'choice' AND output IN ('Yes', 'No')"
    assert len(keys) == 8 and tiny.conn.execute(choices).fetchone()[0] == 8


def test_the_prompt_puts_the_question_before_the_passage_so_a_question_shares_a_prefix():
    a, b = relevance_messages("who directed Kismet", "one"), relevance_messages("who directed Kismet", "two")
    assert a[0] == b[0] and a[1]["content"].startswith("Question: who directed Kismet\n\nPassage: ")
    assert "Is this passage relevant to answering the question?" in a[1]["content"]
    assert len({o[0] for o in OPTIONS}) == len(OPTIONS)      # a one-pass choice needs distinct first characters


def test_a_stopped_pass_resumes_with_only_what_is_left(tiny):
    llm = scripted_llm(tiny)
    stop = threading.Event()

    def progress(done, total, report):
        if done == 3:
            stop.set()

    first = judge_relevance(tiny, DATASET, "bm25", k=3, llm=llm, stop=stop, progress=progress)
    assert first.stopped and (first.jobs, first.done) == (8, 3)
    rest = judge_relevance(tiny, DATASET, "bm25", k=3, llm=llm)
    assert not rest.stopped and (rest.jobs, rest.done, rest.model_calls) == (5, 5, 5)
    assert llm.scripted.calls == 8 and tiny.conn.execute(
        "SELECT count(*), sum(status = 'done') FROM relevance_verdicts").fetchone() == (8, 8)


def test_limit_judges_the_first_questions_and_a_later_run_adds_the_rest(tiny):
    llm = scripted_llm(tiny)
    assert judge_relevance(tiny, DATASET, "bm25", k=3, limit=1, llm=llm).done == 3
    assert {q for (_, q, _) in verdict_rows(tiny)} == {"q1"}
    assert judged_metrics(tiny, DATASET, "bm25", (1, 3), resamples=0).at[1].judged == 1
    rest = judge_relevance(tiny, DATASET, "bm25", k=3, llm=llm)
    assert (rest.jobs, rest.model_calls) == (5, 5)


def test_a_failed_pair_is_recorded_and_retried_on_request(tiny):
    broken = scripted_llm(tiny, fail_on="Palme d'Or")
    report = judge_relevance(tiny, DATASET, "bm25", k=3, llm=broken)
    assert (report.done, report.errors) == (7, 1)
    assert report.error_samples[0].startswith("q2 / c5: scripted failure")
    assert verdict_rows(tiny)[("bm25@3", "q2", "c5")][0] == "error"
    assert judge_relevance(tiny, DATASET, "bm25", k=3, llm=scripted_llm(tiny)).jobs == 0   # errors wait for a retry
    retried = judge_relevance(tiny, DATASET, "bm25", k=3, llm=scripted_llm(tiny), retry_errors=True)
    assert (retried.jobs, retried.done, retried.model_calls) == (1, 1, 1)
    assert verdict_rows(tiny)[("bm25@3", "q2", "c5")] == ("done", 0, p_yes("No"))


def test_bad_options_are_refused_before_anything_is_written(tiny):
    with pytest.raises(ValueError, match="--retriever: no results of 'nope'.*known: bm25, alt"):
        judge_relevance(tiny, DATASET, "nope", llm=scripted_llm(tiny))
    with pytest.raises(ValueError, match="--k must be an integer ≥ 1"):
        judge_relevance(tiny, DATASET, "bm25", k=0, llm=scripted_llm(tiny))
    with pytest.raises(ValueError, match="--model: .*not found"):
        judge_relevance(tiny, DATASET, "bm25", model="/no/such.gguf", llm=scripted_llm(tiny))
    assert tiny.count("relevance_runs") == 0


_KILLED = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from relevancekit import scripted_llm, DATASET
from workbench.retrieval.relevance import judge_relevance
from workbench.store import open_store
store = open_store(sys.argv[1])
llm = scripted_llm(store)
choose = llm.scripted.choose
def slow(prompt, options):
    time.sleep(0.15)
    return choose(prompt, options)
llm.scripted.choose = slow
judge_relevance(store, DATASET, "bm25", k=3, llm=llm,
                progress=lambda done, total, report: print(done, flush=True))
"""


def test_kill_9_loses_at_most_the_pair_in_progress_and_a_rerun_finishes_the_rest(tiny):
    path = tiny.path
    tiny.close()
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(path), str(Path(__file__).parent)],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    reported = 0
    while reported < 3:
        line = proc.stdout.readline()
        assert line, "the judging process ended before it could be killed"
        reported = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = open_store(path)
    try:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        done = store.conn.execute("SELECT count(*) FROM relevance_verdicts WHERE status = 'done'").fetchone()[0]
        assert 3 <= done < 8
        with pytest.warns(LeaseRecovered, match=f"recovered the lease of pid {proc.pid}, which died"):
            rest = judge_relevance(store, DATASET, "bm25", k=3, llm=scripted_llm(store))
        assert rest.done == rest.jobs == 8 - done and rest.model_calls + rest.cache_hits == 8 - done
        assert store.conn.execute("SELECT count(*), sum(status = 'done') FROM relevance_verdicts").fetchone() == (8, 8)
        assert verdict_rows(store) == {("bm25@3", q, c): ("done", int(VERDICTS[(q, c)] == "Yes"),
                                                          p_yes(VERDICTS[(q, c)]))
                                       for q, cs in RANKED["bm25"].items() for c in cs[:3]}
    finally:
        store.close()


# -- judged metrics ---------------------------------------------------------------------------------------

def _ndcg(gains, ideal_count):
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    idcg = sum(1 / math.log2(i + 2) for i in range(ideal_count))
    return dcg / idcg if idcg else 0.0


def test_judged_precision_and_ndcg_equal_the_hand_computed_values(tiny):
    assert judged_metrics(tiny, DATASET, "bm25", resamples=0) is None      # never judged: nothing, not zeros
    judge_relevance(tiny, DATASET, "bm25", k=3, llm=scripted_llm(tiny))
    j = judged_metrics(tiny, DATASET, "bm25", (1, 3, 5), resamples=300)
    assert (j.questions, j.pairs, j.relevant, j.judge) == (3, 8, 3, "smollm2-135m")
    at = {a.k: a for a in j.at}
    # q1: No Yes Yes (+ c9 unjudged at rank 4); q2: Yes No No; q3: No No.
    assert (at[1].judged, at[1].unjudged, at[3].judged) == (3, 0, 3)
    assert at[1].precision.value == pytest.approx(1 / 3)
    assert at[3].precision.value == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert at[3].ndcg.value == pytest.approx((_ndcg([0, 1, 1], 2) + _ndcg([1, 0, 0], 1) + 0.0) / 3)
    # @5: q1's top 5 holds c9, never judged: q1 is left out and counted, not scored as a miss.
    assert (at[5].judged, at[5].unjudged) == (2, 1)
    assert at[5].precision.value == pytest.approx((1 / 5 + 0) / 2)
    assert at[5].ndcg.value == pytest.approx((1.0 + 0.0) / 2)
    for a in j.at:
        for est in (a.precision, a.ndcg):
            assert est.lo <= est.value <= est.hi


def test_verdicts_pool_over_retrievers_under_one_judge(tiny):
    """alt finds c9 for q2, judged relevant: bm25's ideal ranking for q2 now holds two relevant chunks."""
    llm = scripted_llm(tiny)
    judge_relevance(tiny, DATASET, "bm25", k=3, llm=llm)
    judge_relevance(tiny, DATASET, "alt", k=2, llm=llm)
    j = judged_metrics(tiny, DATASET, "bm25", (3,), resamples=0)
    assert j.pairs == 9 and j.relevant == 4
    assert j.at[0].ndcg.value == pytest.approx((_ndcg([0, 1, 1], 2) + _ndcg([1, 0, 0], 2) + 0.0) / 3)
    assert j.at[0].precision.value == pytest.approx(1 / 3)       # precision needs no pool
    alt = judged_metrics(tiny, DATASET, "alt", (1, 2), resamples=0)
    assert [(a.judged, a.precision.value) for a in alt.at] == [(1, 1.0), (1, 1.0)]
    assert alt.at[1].ndcg.value == pytest.approx(1.0)


def test_no_question_judged_at_k_is_undefined_not_zero(tiny):
    judge_relevance(tiny, DATASET, "bm25", k=1, limit=1, llm=scripted_llm(tiny))
    j = judged_metrics(tiny, DATASET, "bm25", (1, 2), resamples=100)
    assert (j.at[0].judged, j.at[0].unjudged) == (1, 2) and j.at[0].precision.value == 0.0
    assert j.at[1].judged == 0 and j.at[1].precision.value is None and j.at[1].ndcg.value is None


# -- the judges' side: population, labels, report ----------------------------------------------------------

def test_the_relevance_population_is_the_judged_pairs_keyed_by_dataset_question_and_chunk(tiny):
    llm = scripted_llm(tiny)
    judge_relevance(tiny, DATASET, "bm25", k=3, llm=llm)
    judge_relevance(tiny, DATASET, "alt", k=2, llm=llm)
    sids, uids = ids(tiny)
    pop = population(tiny, "relevance", DATASET)
    dataset_id = tiny.conn.execute("SELECT id FROM datasets WHERE name = ?", (DATASET,)).fetchone()[0]
    assert pop.kind == "relevance" and pop.owner_id == dataset_id and pop.judges == ("smollm2-135m",)
    assert len(pop) == 9 and pop.run == DATASET
    expected = {RelevanceKey(dataset_id, sids[q], uids[c]): v == "Yes" for (q, c), v in VERDICTS.items()
                if c in RANKED["bm25"][q][:3] or c in RANKED["alt"].get(q, [])}
    assert {i.key: i.verdicts["smollm2-135m"] for i in pop.items} == expected
    assert "who directed Rosetta → c9" in [i.text for i in pop.items]
    only_alt = population(tiny, "relevance", DATASET, retriever="alt")
    assert len(only_alt) == 2 and "alt" in only_alt.source
    keys = [i.key for i in pop.items]
    assert (pop.positions(keys) == list(range(9))).all()
    assert pop.positions([RelevanceKey(dataset_id + 1, *[keys[0].sid, keys[0].uid])]).tolist() == [-1]
    queue = label_queue(tiny.conn, pop, "ana")
    assert [i.key for i in queue.items] == sorted(keys, key=lambda k: uniform_rank(0, k))
    card = judged_pair(tiny, RelevanceKey(dataset_id, sids["q2"], uids["c4"]))
    assert (card.question, card.chunk_id, card.ranks, card.verdicts) == (
        QUESTIONS["q2"], "c4", {"alt": 2, "bm25": 1}, {"smollm2-135m": True})


def _label_file(path: Path, labels: dict, via="uniform", annotator="ana") -> Path:
    return write_jsonl(path, [{"kind": "relevance", "dataset": DATASET, "sample_id": q, "chunk_id": c, "label": v,
                               "annotator": annotator, "via": via} for (q, c), v in labels.items()])


# The humans disagree with the judge on q1-c1 (relevant) and q1-c3 (not relevant).
HUMAN = {("q1", "c1"): True, ("q1", "c2"): True, ("q1", "c3"): False, ("q2", "c4"): True,
         ("q2", "c5"): False, ("q3", "c7"): False}


def _kappa(pairs):
    n = len(pairs)
    po = sum(h == j for h, j in pairs) / n
    ph, pj = sum(h for h, _ in pairs) / n, sum(j for _, j in pairs) / n
    pe = ph * pj + (1 - ph) * (1 - pj)
    return (po - pe) / (1 - pe)


def test_judge_report_relevance_gives_kappa_and_ppi_from_imported_labels(tiny, tmp_path, capsys):
    from workbench.cli import main

    judge_relevance(tiny, DATASET, "bm25", k=3, llm=scripted_llm(tiny))
    path = _label_file(tmp_path / "labels.jsonl", HUMAN)
    assert import_labels(tiny, path).added == 6
    assert import_labels(tiny, path).unchanged == 6                      # re-import: a no-op
    report = judge_report(tiny, "relevance", DATASET, resamples=200)
    judged = [(HUMAN[p], VERDICTS[p] == "Yes") for p in HUMAN]
    a = report.agreement[0].agreement
    expect = [[0, 0], [0, 0]]
    for h, j in judged:
        expect[int(h)][int(j)] += 1
    assert a.confusion == expect == [[2, 1], [1, 2]]
    assert a.kappa.value == pytest.approx(_kappa(judged)) and a.kappa.lo <= a.kappa.value <= a.kappa.hi
    est = report.estimates[0]
    assert est.metric == "precision of retrieved chunks"
    assert (est.estimates.n_labelled, est.estimates.n_unlabelled) == (6, 2)
    assert est.estimates.human.value == pytest.approx(3 / 6)
    # The judge's estimate over every pair: its mean P(Yes) (3 of the 8 pairs judged Yes).
    assert est.estimates.naive.value == pytest.approx((3 * p_yes("Yes") + 5 * p_yes("No")) / 8)
    assert labelled_estimates(tiny, "relevance", DATASET)[0] == est
    tiny.close()
    db = str(tiny.path)
    assert main(["--db", db, "judge", "report", "relevance", DATASET, "--resamples", "100", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "relevance" and data["labelled_items"] == 6 and data["items"] == 8
    assert data["judges"]["smollm2-135m"]["confusion"] == [[2, 1], [1, 2]]
    assert data["estimates"]["smollm2-135m"]["metric"] == "precision of retrieved chunks"
    assert main(["--db", db, "judge", "report", "relevance", DATASET, "--retriever", "bm25", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "judged (question, chunk) pairs" in out and "κ" in out and "PPI" in out
    assert "precision of retrieved chunks" in out
    assert main(["--db", db, "judge", "queue", "relevance", DATASET, "--limit", "2", "--annotator", "bo"]) == 0
    assert "bo has labelled 0 of 8" in capsys.readouterr().out
    assert main(["--db", db, "judge", "report", "claims", "--retriever", "bm25"]) == 2


def test_relevance_labels_export_and_import_by_names(tiny, tmp_path):
    judge_relevance(tiny, DATASET, "bm25", k=3, llm=scripted_llm(tiny))
    sids, uids = ids(tiny)
    dataset_id = tiny.conn.execute("SELECT id FROM datasets").fetchone()[0]
    put_label(tiny, RelevanceKey(dataset_id, sids["q2"], uids["c9"]), True, "bo", via="browse")  # never judged
    assert export_labels(tiny, tmp_path / "out.jsonl", kinds=["relevance"]) == 1
    line = json.loads((tmp_path / "out.jsonl").read_text())
    assert {k: line[k] for k in ("kind", "dataset", "sample_id", "chunk_id", "label", "annotator", "via")} == {
        "kind": "relevance", "dataset": DATASET, "sample_id": "q2", "chunk_id": "c9", "label": True,
        "annotator": "bo", "via": "browse"}
    assert export_labels(tiny, tmp_path / "by-dataset.jsonl", run=DATASET) == 1
    other = open_store(tmp_path / "other.db")
    try:
        import_dataset(other, build_tiny(tmp_path / "again"), DATASET)
        assert import_labels(other, tmp_path / "out.jsonl").added == 1
        other_id = other.conn.execute("SELECT id FROM datasets").fetchone()[0]
        assert [(lab.key, lab.label, lab.via) for lab in labels_of(other.conn, "relevance", other_id)] == [
            (RelevanceKey(other_id, sids["q2"], uids["c9"]), True, "browse")]
    finally:
        other.close()
    from workbench import analysis

    frame = analysis.labels(tiny.path, kind="relevance")
    assert frame[["dataset", "sample_id", "chunk_id", "annotator"]].values.tolist() == [[DATASET, "q2", "c9", "bo"]]
    assert frame["run"].isna().all()


def test_bad_relevance_label_lines_are_refused_with_file_line_field_and_nothing_written(tiny, tmp_path):
    ok = {"annotator": "ana"}
    path = write_jsonl(tmp_path / "labels.jsonl", [
        {"kind": "relevance", "dataset": DATASET, "sample_id": "q1", "chunk_id": "c1", "label": True, **ok},  # fine
        {"kind": "relevance", "dataset": "nope", "sample_id": "q1", "chunk_id": "c1", "label": True, **ok},
        {"kind": "relevance", "dataset": DATASET, "sample_id": "q9", "chunk_id": "c99", "label": True, **ok},
        {"kind": "relevance", "dataset": DATASET, "sample_id": "q1", "chunk_id": "c1", "label": "yes", **ok},
        {"kind": "relevance", "dataset": DATASET, "sample_id": "q1", "label": True, **ok},
        {"kind": "relevance", "run": DATASET, "dataset": DATASET, "sample_id": "q1", "chunk_id": "c2", "label": True,
         **ok},
    ])
    with pytest.raises(InputRejected) as refused:
        import_labels(tiny, path)
    assert str(refused.value).splitlines() == [
        f"{path}:2: $.dataset: unknown dataset 'nope'",
        f"{path}:3: $.sample_id: unknown sample id 'q9' in dataset {DATASET!r}",
        f"{path}:3: $.chunk_id: unknown chunk id 'c99' in dataset {DATASET!r}",
        f"{path}:4: $.label: expected true or false, got string",
        f"{path}:5: $.chunk_id: missing",
        f"{path}:6: $.run: unknown key in a relevance label (its keys: kind, dataset, sample_id, chunk_id, label, "
        "annotator, via, labelled_at)",
    ]
    assert tiny.count("relevance_labels") == 0


# -- the command line ----------------------------------------------------------------------------------

def _main_with_judge(monkeypatch):
    """``workbench.cli.main`` with ``retrieval judge`` in its parser, whether or not the retrieval group adds it yet."""
    from workbench.cli.common import shared_parents
    from workbench.cli.relevance import register_relevance

    cli = importlib.import_module("workbench.cli.main")
    build = cli.build_parser

    def build_parser():
        parser = build()
        verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        actions = next(a for a in verbs.choices["retrieval"]._actions if isinstance(a, argparse._SubParsersAction))
        if "judge" not in actions.choices:
            register_relevance(actions, shared_parents())
            cli._own_errors(parser)
        return parser

    monkeypatch.setattr(cli, "build_parser", build_parser)
    return cli.main


def test_judged_rows_are_what_retrieval_eval_prints_beside_the_gold_figures(tiny):
    from workbench.cli.relevance import judged_json, judged_rows

    assert judged_rows(tiny, DATASET, "bm25", (1, 3), resamples=0) is None
    judge_relevance(tiny, DATASET, "bm25", k=3, llm=scripted_llm(tiny))
    title, rows = judged_rows(tiny, DATASET, "bm25", (1, 3, 5), resamples=0)
    assert "LLM-judged" in title and "8 pairs judged, 3 relevant" in title
    assert rows == [["judged precision", "", "", "0.333", "0.333", "0.100"],
                    ["judged ndcg", "", "", "0.333", f"{(_ndcg([0, 1, 1], 2) + 1) / 3:.3f}", "0.500"],
                    ["n judged questions", "", "", "3 of 3", "3 of 3", "2 of 3"]]
    data = judged_json(tiny, DATASET, "bm25", (1, 5), resamples=0)
    assert data["@5"]["judged"] == 2 and data["@5"]["unjudged"] == 1 and data["pairs"] == 8


# -- the real model: what holds on every CPU -------------------------------------------------------------

@pytest.mark.real_model
@pytest.mark.budget(25)
def test_the_real_model_judges_resumably_and_replays_from_the_cache(corpus_db, monkeypatch, capsys):
    """SmolLM2 through llama.cpp on one HowToCook question × top 2: jobs done, rows written, cache hits;
    which chunks it calls relevant is not asserted (greedy output differs between CPUs)."""
    main = _main_with_judge(monkeypatch)
    db = str(corpus_db)
    assert main(["--db", db, "retrieval", "judge", "hc", "--retriever", "bm25", "--k", "2", "--limit", "1",
                 "--threads", "2"]) == 0
    captured = capsys.readouterr()
    assert "relevance hc:bm25@2: 2 of 2 pairs done" in captured.err
    assert "2 model calls, 0 from the cache" in captured.err
    store = open_store(corpus_db)
    try:
        # A question BM25 found nothing for is judged at every k (precision 0): two of the 130 here.
        empty = store.conn.execute("SELECT count(*) FROM retrievals WHERE uids = '[]'").fetchone()[0]
        assert "hc · bm25: 2 pairs judged by smollm2-135m" in captured.out
        assert f"over {1 + empty} of 130 questions" in captured.out
        rows = store.conn.execute("SELECT status, relevant, score, gen_key FROM relevance_verdicts").fetchall()
        # The score is the judge's P(Yes) between the two answers: above one half exactly when it said Yes.
        assert len(rows) == 2 and all(s == "done" and r in (0, 1) and 0 <= sc <= 1 and (sc > 0.5) == bool(r) and k
                                      for s, r, sc, k in rows)
        outputs = [o for (o,) in store.conn.execute("SELECT output FROM generations WHERE finish_reason = 'choice'")]
        assert len(outputs) == 2 and set(outputs) <= set(OPTIONS)
        again = judge_relevance(store, "hc", "bm25", k=2, limit=1)
        assert (again.jobs, again.model_calls) == (0, 0)
        shallow = judge_relevance(store, "hc", "bm25", k=1, limit=1)   # a new run of a pair already judged
        assert (shallow.jobs, shallow.done, shallow.model_calls, shallow.cache_hits) == (1, 1, 0, 1)
        j = judged_metrics(store, "hc", "bm25", (1, 2, 5), resamples=100)
        assert [a.judged for a in j.at] == [1 + empty, 1 + empty, empty]
        assert all(0.0 <= a.precision.value <= 1.0 for a in j.at)
    finally:
        store.close()
