"""Trusting the judges: the judged populations, the label queue, the stored labels and
the judge report, on a real model-free run whose claims were verified by the lexical verifier."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.cli import main
from workbench.data.predictions import import_predictions
from workbench.judges.items import VOTE, population, uniform_rank
from workbench.judges.queue import label_queue
from workbench.judges.report import cell_estimates, judge_report, labelled_estimates
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.labels import ClaimKey, PairKey, clear_label, labels_of, put_label, stored_label
from workbench.store.queries import get_run, load_samples

from conftest import copy_db, new_template


@pytest.fixture(scope="module")
def verified_template(tmp_path_factory) -> Path:
    """MetaQA, 12 questions at K = 5 and K = 20 (one budget), each answered by "<gold answer>. Paris is in
    France." (imported predictions: no model), claims split by the rule decomposer and verified by the
    lexical verifier; the first claim is often supported by the window, the second never."""
    with new_template(tmp_path_factory, "judged.db") as store:
        plan_sweep(store, SweepConfig(ks=(5, 20), budgets=(256,), formats=("linear",), limit=12, score="cover"),
                   name="talk",
                   generation=GenerationConfig(answer_format="text").as_dict())
        run = get_run(store, "talk")
        samples = load_samples(store, run.dataset_id)[:12]
        preds = tmp_path_factory.mktemp("preds") / "preds.jsonl"
        preds.write_text("".join(
            json.dumps({"sample_id": s.id, "cell_id": cell, "prediction": f"{s.answers[0]}. Paris is in France."}) + "\n"
            for s in samples for cell in ("k5-b256-linear", "k20-b256-linear")), encoding="utf-8")
        import_predictions(store, run, preds)
        assert run_claims(store, run, ClaimsConfig(decomposer="rule", verifiers=("lexical",))).done == 24
    return store.path


@pytest.fixture
def db(tmp_path, verified_template) -> Path:
    return copy_db(verified_template, tmp_path / "judged.db")


def test_a_verifiers_verdict_on_a_claim_is_supported_on_at_least_one_shown_unit(db):
    store = open_store(db)
    pop = population(store, "claims", "talk")
    n_claims = store.conn.execute("SELECT count(*) FROM claims").fetchone()[0]
    assert pop.judges == ("lexical", VOTE) and len(pop.items) == n_claims >= 48   # 24 answers, 2+ claims each
    for item in pop.items:
        k = item.key
        any_unit = store.conn.execute(
            "SELECT coalesce(max(supported), 0) FROM claim_verdicts WHERE cell_id = ? AND sid = ? AND idx = ?"
            " AND verifier = 'lexical'", (k.cell_id, k.sid, k.idx)).fetchone()[0]
        vote = store.conn.execute("SELECT supported FROM claims WHERE cell_id = ? AND sid = ? AND idx = ?",
                                  (k.cell_id, k.sid, k.idx)).fetchone()[0]
        assert item.verdicts == {"lexical": bool(any_unit), VOTE: bool(vote)}
    supported = {item.text for item in pop.items if item.verdicts["lexical"]}
    assert supported and not any("Paris" in text for text in supported), "the window supports gold answers only"


def test_the_uniform_queue_is_one_random_order_for_every_annotator_and_skips_what_each_labelled(db):
    store = open_store(db)
    pop = population(store, "claims", "talk")
    ana, bo = label_queue(store.conn, pop, "ana"), label_queue(store.conn, pop, "bo")
    assert [i.key for i in ana.items] == [i.key for i in bo.items]        # the same order: overlap for κ
    assert [i.key for i in ana.items] == sorted((i.key for i in pop.items), key=lambda k: uniform_rank(0, k))
    assert [i.key for i in ana.items] != [i.key for i in pop.items]        # shuffled, not table order
    first = ana.items[0]
    put_label(store, first.key, True, "ana", via="uniform", claim=first.text)
    again = label_queue(store.conn, pop, "ana")
    assert (again.labelled, again.total) == (1, len(pop.items)) and again.items[0].key == ana.items[1].key
    assert label_queue(store.conn, pop, "bo").items[0].key == first.key    # bo has not labelled it
    assert [i.key for i in label_queue(store.conn, pop, "ana", seed=1).items] != [i.key for i in again.items]


def test_the_disagreement_queue_needs_two_judges_and_says_so(db):
    store = open_store(db)
    with pytest.raises(ValueError, match="one judge"):
        label_queue(store.conn, population(store, "claims", "talk"), "ana", order="disagreement")
    with pytest.raises(ValueError, match="one judge"):
        label_queue(store.conn, population(store, "answers", "talk"), "ana", order="disagreement")


def test_labelling_again_replaces_the_verdict_and_keeps_how_the_item_was_first_chosen(db):
    store = open_store(db)
    run = get_run(store, "talk")
    key = population(store, "answers", "talk").items[0].key
    put_label(store, key, False, "ana", via="uniform")
    put_label(store, key, True, "ana", via="browse")
    stored = stored_label(store.conn, key, "ana")
    assert (stored.label, stored.via) == (True, "uniform")
    assert clear_label(store, key, "ana") and stored_label(store.conn, key, "ana") is None
    with pytest.raises(ValueError, match="a < b"):
        PairKey(1, 3, 2)
    with pytest.raises(ValueError, match="claim's text"):
        put_label(store, ClaimKey(run.id, key.cell_id, key.sid, 0), True, "ana", via="uniform")


def test_the_report_counts_the_confusion_matrix_kappa_and_ppi_from_the_labels(db):
    """Labels that contradict the lexical verifier on a known set of claims give exactly the
    confusion matrix they imply; the PPI estimate uses the uniform labels only."""
    store = open_store(db)
    pop = population(store, "claims", "talk")
    queue = label_queue(store.conn, pop, "ana").items
    # The first 20 of the uniform queue: the human agrees with the verifier except on 4 items.
    flipped = {item.key for item in queue[:4]}
    for item in queue[:20]:
        truth = item.verdicts["lexical"] != (item.key in flipped)
        put_label(store, item.key, truth, "ana", via="uniform", claim=item.text)
    # 5 more from "disagreement" browsing, all saying supported: agreement sees them, PPI does not.
    for item in queue[20:25]:
        put_label(store, item.key, True, "ana", via="browse", claim=item.text)
    report = judge_report(store, "claims", "talk", resamples=200)
    lexical = next(j.agreement for j in report.agreement if j.judge == "lexical")
    labelled = queue[:25]
    human = {i.key: (i.verdicts["lexical"] != (i.key in flipped)) if n < 20 else True for n, i in enumerate(labelled)}
    expect = [[0, 0], [0, 0]]
    for i in labelled:
        expect[int(human[i.key])][int(i.verdicts["lexical"])] += 1
    assert lexical.confusion == expect and lexical.n == 25
    assert lexical.accuracy == pytest.approx((expect[0][0] + expect[1][1]) / 25)
    assert lexical.kappa.lo <= lexical.kappa.value <= lexical.kappa.hi
    assert (report.labelled_items, report.uniform_items, report.labels) == (25, 20, 25)
    est = next(e.estimates for e in report.estimates if e.judge == "lexical")
    assert (est.n_labelled, est.n_unlabelled) == (20, len(pop.items) - 20)
    uniform_truth = [human[i.key] for i in queue[:20]]
    assert est.human.value == pytest.approx(sum(uniform_truth) / 20)
    assert est.naive.value == pytest.approx(sum(i.verdicts["lexical"] for i in pop.items) / len(pop.items))
    assert labelled_estimates(store, "claims", "talk")[0] == report.estimates[0]


def test_two_annotators_give_the_human_ceiling_and_a_tie_is_left_out(db):
    store = open_store(db)
    pop = population(store, "claims", "talk")
    items = label_queue(store.conn, pop, "ana").items[:10]
    for n, item in enumerate(items):
        put_label(store, item.key, True, "ana", via="uniform", claim=item.text)
        put_label(store, item.key, n < 8, "bo", via="uniform", claim=item.text)   # bo disagrees twice
    report = judge_report(store, "claims", "talk", resamples=200)
    assert report.ties == 2 and report.annotators == {"ana": 10, "bo": 10}
    ceiling = report.annotator_agreement[0]
    assert (ceiling.a, ceiling.b, ceiling.agreement.n, ceiling.agreement.accuracy) == ("ana", "bo", 10, 0.8)
    assert all(j.agreement.n == 8 for j in report.agreement)


def test_a_claim_label_whose_claim_text_changed_is_not_matched(db):
    store = open_store(db)
    item = population(store, "claims", "talk").items[0]
    put_label(store, item.key, True, "ana", via="uniform", claim=item.text + " (old wording)")
    report = judge_report(store, "claims", "talk", resamples=50)
    assert (report.stale, report.labelled_items) == (1, 0)


def test_answer_labels_override_the_scorer_in_the_estimate_and_the_ledger_cell(db):
    """Answers the scorer marks right are labelled wrong by a human: the PPI accuracy of the cell
    moves down from the scorer's, and the events' scores are untouched."""
    store = open_store(db)
    pop = population(store, "answers", "talk")
    assert pop.judges == ("cover",) and len(pop.items) == 24
    before = store.conn.execute("SELECT sum(score) FROM events").fetchone()[0]
    for item in label_queue(store.conn, pop, "ana").items[:10]:
        put_label(store, item.key, False, "ana", via="uniform")
    assert store.conn.execute("SELECT sum(score) FROM events").fetchone()[0] == before
    report = judge_report(store, "answers", "talk", resamples=100)
    acc = report.estimates[0].estimates
    assert before == 24, "every answer starts with a gold answer: the scorer marks all right"
    assert acc.naive.value == 1.0 and acc.human.value == 0.0
    assert acc.ppi.value < acc.naive.value
    cell = cell_estimates(store, "talk", "k5-b256-linear")
    assert [e.metric for e in cell] == ["accuracy"]
    assert cell[0].estimates.n_labelled + cell[0].estimates.n_unlabelled == 12


def test_no_labels_means_no_estimates_not_zeros(db):
    store = open_store(db)
    assert labelled_estimates(store, "claims", "talk") is None and cell_estimates(store, "talk", "k5-b256-linear") == []
    report = judge_report(store, "claims", "talk", resamples=50)
    assert report.labelled_items == 0 and all(j.agreement.kappa.value is None for j in report.agreement)
    assert all(e.estimates.ppi.value is None and e.estimates.human.value is None for e in report.estimates)


def test_judge_report_cli_prints_kappa_per_judge_and_the_naive_and_ppi_faithfulness(db, capsys):
    store = open_store(db)
    pop = population(store, "claims", "talk")
    for item in label_queue(store.conn, pop, "ana").items[:16]:
        put_label(store, item.key, item.verdicts["lexical"], "ana", via="uniform", claim=item.text)
    store.close()
    assert main(["--db", str(db), "judge", "report", "claims", "talk", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "lexical" in out and "vote" in out and "κ" in out and "PPI" in out and "naive (judged)" in out
    assert main(["--db", str(db), "judge", "report", "claims", "talk", "--resamples", "100", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["judges"]) == {"lexical", "vote"}
    assert data["judges"]["lexical"]["kappa"]["value"] == 1.0 and data["judges"]["lexical"]["confusion"][0][1] == 0
    assert data["estimates"]["vote"]["metric"] == "faithfulness over claims"
    assert main(["--db", str(db), "claims", "report", "talk", "--resamples", "50"]) == 0
    assert "with human labels" in capsys.readouterr().out


_WRITER = """
import sys
from workbench.judges.items import population
from workbench.judges.queue import label_queue
from workbench.store import open_store
from workbench.store.labels import put_label
store = open_store(sys.argv[1])
pop = population(store, "claims", "talk")
for n, item in enumerate(label_queue(store.conn, pop, "ana").items):
    put_label(store, item.key, n % 2 == 0, "ana", via="uniform", claim=item.text)
    print(n, flush=True)   # after the commit: this label is saved
"""


def test_labels_survive_kill_9_each_is_its_own_transaction(db):
    """A labelling process is killed with SIGKILL mid-stream: every label it reported saved is
    in the store, nothing else is, and the database is intact."""
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(db)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    saved = -1
    while saved < 5:
        line = proc.stdout.readline()
        assert line, "the writer stopped before labelling 6 claims"
        saved = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = max([saved] + [int(x) for x in proc.stdout.read().split()])
    store = open_store(db)
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = labels_of(store.conn, "claim", get_run(store, "talk").id)
    assert saved + 1 <= len(rows) <= saved + 2      # every reported label; at most one more committed unreported
    order = {i.key: n for n, i in enumerate(label_queue(store.conn, population(store, "claims", "talk"), "bo").items)}
    assert all(r.label == (order[r.key] % 2 == 0) for r in rows)
    assert sorted(order[r.key] for r in rows) == list(range(len(rows)))   # the queue's prefix, no gap


def test_dedup_pairs_are_judged_by_each_mode_and_labels_correct_its_merge_precision(judged_db, capsys):
    """Every candidate pair labelled by the gold clusters (as a careful human would): each mode's
    confusion matrix is its verdicts against gold, and the pair precision of its merges, judged by
    its stated probability, is corrected to the gold share. The merge decisions are untouched."""
    from conftest import KG_GOLD

    store = open_store(judged_db)
    pop = population(store, "dedup", "review")
    assert pop.judges == ("graph", "graph+text") and pop.items
    names = dict(store.conn.execute("SELECT eid, name FROM kg_entities"))
    same = {}
    for item in label_queue(store.conn, pop, "ana").items:
        k = item.key
        same[k] = KG_GOLD[names[k.a]] == KG_GOLD[names[k.b]]
        put_label(store, k, same[k], "ana", via="uniform")
        for mode, said in item.verdicts.items():
            confidence = store.conn.execute("SELECT confidence FROM dedup_verdicts WHERE a = ? AND b = ? AND mode = ?",
                                            (k.a, k.b, mode)).fetchone()[0]
            assert item.scores[mode] == pytest.approx(confidence if said else 1 - confidence)
            assert item.merges[mode] == (said and confidence >= 0.5)
    assert store.count("dedup_decisions") == 0
    report = judge_report(store, "dedup", "review", resamples=100)
    for j in report.agreement:
        expect = [[0, 0], [0, 0]]
        for item in pop.items:
            expect[int(same[item.key])][int(item.verdicts[j.judge])] += 1
        assert j.agreement.confusion == expect
    for e in report.estimates:
        merged = [item for item in pop.items if item.merges[e.judge]]
        assert e.metric == "pair precision of merges" and e.estimates.n_labelled == len(merged)
        if merged:
            assert e.estimates.human.value == pytest.approx(sum(same[i.key] for i in merged) / len(merged))
    store.close()
    assert main(["--db", str(judged_db), "dedup", "eval", "review", "--resamples", "50"]) == 0
    assert "with human labels" in capsys.readouterr().out


def test_the_analysis_api_reads_the_labels_as_a_typed_frame(db):
    from workbench import analysis

    store = open_store(db)
    pop = population(store, "claims", "talk")
    items = label_queue(store.conn, pop, "ana").items[:3]
    for n, item in enumerate(items):
        put_label(store, item.key, n == 0, "ana", via="uniform", claim=item.text)
    put_label(store, population(store, "answers", "talk").items[0].key, False, "bo", via="browse")
    store.close()
    frame = analysis.labels(db)
    assert list(frame.columns) == list(analysis.LABEL_DTYPES)
    assert frame["kind"].tolist() == ["claim"] * 3 + ["answer"]
    claims = frame[frame["kind"] == "claim"]
    assert sorted(claims["label"].tolist()) == [False, False, True] and claims["claim"].notna().all()
    assert claims[claims["label"]]["text"].tolist() == [items[0].text]
    assert frame[frame["kind"] == "answer"]["label"].tolist() == [False]
    answers = analysis.labels(db, kind="answer")
    assert answers[["annotator", "via", "cell_id"]].values.tolist() == [["bo", "browse", "k20-b256-linear"]]
    assert answers["claim"].isna().all() and answers["text"].isna().all()


def test_answer_scores_are_read_exactly_whatever_they_are(db):
    """Scores are read in bulk as score · 2^60; a cell holding a score that cannot be (1/3) is read
    row by row, so every score is the stored float exactly."""
    store = open_store(db)
    run = get_run(store, "talk")
    with store.transaction() as conn:
        conn.execute("UPDATE events SET score = 1.0 / 3 WHERE run_id = ? AND cell_id = 'k5-b256-linear' AND sid ="
                     " (SELECT min(sid) FROM events WHERE cell_id = 'k5-b256-linear')", (run.id,))
        conn.execute("UPDATE events SET score = 0.5 WHERE run_id = ? AND cell_id = 'k20-b256-linear' AND sid ="
                     " (SELECT min(sid) FROM events WHERE cell_id = 'k20-b256-linear')", (run.id,))
    pop = population(store, "answers", "talk")
    stored = store.conn.execute("SELECT score FROM events WHERE run_id = ? ORDER BY cell_id, sid", (run.id,)).fetchall()
    assert pop.scores["cover"].tolist() == [s for (s,) in stored]
    assert 1 / 3 in pop.scores["cover"].tolist() and 0.5 in pop.scores["cover"].tolist()


def test_the_html_report_shows_the_judges_only_once_there_are_labels(db):
    from workbench.report import ReportOptions, build_report

    store = open_store(db)
    run = get_run(store, "talk")
    options = ReportOptions(resamples=50, cases=0)
    assert "Judges against human labels" not in build_report(store, run, options=options)
    pop = population(store, "claims", "talk")
    for item in label_queue(store.conn, pop, "ana").items[:12]:
        put_label(store, item.key, item.verdicts["lexical"], "ana", via="uniform", claim=item.text)
    page = build_report(store, run, options=options)
    section = page[page.index("Judges against human labels"):]
    assert "12 of" in section and "faithfulness over claims" in section and "PPI" in section
    kappa = judge_report(store, "claims", "talk", resamples=50).agreement[0].agreement.kappa
    assert f"{kappa.value:.3f}" in section


def test_judge_queue_cli_lists_the_next_answers_with_their_text(db, capsys):
    """Answers are held without their texts; the queue's listing reads the next ones' from their events."""
    assert main(["--db", str(db), "judge", "queue", "answers", "talk", "--limit", "2", "--annotator", "ana"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "labelled 0 of 24" in lines[0] and len(lines) == 3
    assert all(line.rstrip().endswith("Paris is in France.") for line in lines[1:])
    assert main(["--db", str(db), "judge", "queue", "answers", "talk", "--limit", "2", "--json"]) == 0
    assert all(i["text"].endswith("Paris is in France.") for i in json.loads(capsys.readouterr().out)["items"])
