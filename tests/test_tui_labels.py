"""Labelling judged items by keyboard: the Labels screen, Dedup's labels, the ledger's PPI lines."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from conftest import SAMPLE_METAQA, write_jsonl
from relevancekit import DATASET, build_tiny, scripted_llm
from tui_shared_c import restoring, snap
from tuikit import SIZE, SMALL, heading, screen_text, settled_after, until_loaded, wait_for
from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.data.importer import import_dataset
from workbench.data.predictions import import_predictions
from workbench.judges.items import population
from workbench.judges.queue import label_queue
from workbench.judges.report import judge_report
from workbench.retrieval.relevance import judge_relevance
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run, load_samples
from workbench.tables import fmt_estimate
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens import label_loads

ANNOTATOR = "ana"
CELL = "k5-b256-score"


@pytest.fixture(autouse=True)
def annotator(monkeypatch):
    """Every label of these tests is by ``ana`` (default_annotator reads the variable)."""
    monkeypatch.setenv("WORKBENCH_ANNOTATOR", ANNOTATOR)


def _answer_imported(store, run_name: str, directory: Path) -> None:
    """Answer every sample of the run through the predictions import: every third one wrong, every
    second one with an extra sentence the window does not support (a second, unsupported claim)."""
    run = get_run(store, run_name)
    sids = [r[0] for r in store.conn.execute("SELECT DISTINCT sid FROM events WHERE run_id = ? ORDER BY sid",
                                             (run.id,))]
    samples = {s.sid: s for s in load_samples(store, run.dataset_id)}
    rows = []
    for i, sid in enumerate(sids):
        prediction = samples[sid].answers[0] if i % 3 else "no idea"
        if i % 2:
            prediction += ". It won an Oscar in 1999"
        rows.append({"sample_id": samples[sid].id, "cell_id": CELL, "prediction": prediction})
    import_predictions(store, run, write_jsonl(directory / f"{run_name}.jsonl", rows))


@pytest.fixture(scope="module")
def claims_template(tmp_path_factory) -> Path:
    """MetaQA with two one-cell runs and no model: ``plain`` (3 questions, planned only) and ``talk`` (30
    questions answered through the predictions import, their claims verified by rule + lexical)."""
    directory = tmp_path_factory.mktemp("labels")
    store = open_store(directory / "labels.db")
    try:
        import_dataset(store, SAMPLE_METAQA, "metaqa")
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=3), name="plain")
        plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=30), name="talk")
        _answer_imported(store, "talk", directory)
        verified = run_claims(store, get_run(store, "talk"), ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
        assert verified.done == 30
    finally:
        store.close()
    return store.path


@pytest.fixture(scope="module")
def labelling(tmp_path_factory, claims_template):
    """One app for the tests on the claims database (tests/tui_shared_c.py's ``Restoring``): each writes labels."""
    yield from restoring(claims_template, tmp_path_factory.mktemp("labels-app") / "labels.db")


@pytest.fixture
def claims_app(labelling):
    """The shared app, its database back to the template's content before the test reads it: the test's to write."""
    labelling.restore()
    return labelling


def _rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _queue(db, kind, run="talk", order="uniform"):
    store = open_store(db)
    try:
        return label_queue(store.conn, population(store, kind, run), ANNOTATOR, order=order).items
    finally:
        store.close()


def _expected(items, keys):
    """What the keys should store, by the screen's rules: y/n label the item shown and move on, s moves on,
    z clears the last label and shows its item next."""
    shown, pos, history, labels = list(items), 0, [], {}
    for key in keys:
        if key in "yn":
            labels[shown[pos].key] = (key == "y", shown[pos].text)
            history.append(shown[pos])
            pos += 1
        elif key == "s":
            pos += 1
        elif key == "z":
            item = history.pop()
            del labels[item.key]
            shown.insert(pos, item)
    return labels


def _claim_labels(db):
    return {(cell, sid, idx): (bool(label), claim, annotator, via) for cell, sid, idx, annotator, label, claim, via
            in _rows(db, "SELECT cell_id, sid, idx, annotator, label, claim, via FROM claim_labels")}


async def _open_labels(pilot):
    await until_loaded(pilot, "ledger")
    await pilot.press("T")
    return await until_loaded(pilot, "labels")


def _report(app) -> str:
    return str(app.screen.query_one("#report").render())


def test_claims_are_labelled_by_keyboard_and_the_report_follows(claims_app):
    claims_db = claims_app.db
    items = _queue(claims_db, "claims")
    keys = ["y", "n", "s", "y", "z", "n"]
    expected = _expected(items, keys)

    async def walk(pilot):
        app = pilot.app
        screen = await _open_labels(pilot)
        assert screen.view.kind == "claims" and screen.order == "uniform"
        total = len(items)
        assert f"claims (t) · run talk · annotator {ANNOTATOR} · you labelled 0 of {total} (uniform)" in heading(app)
        assert "uniform random order: these labels give unbiased estimates" in screen_text(app)
        card = str(screen.query_one("#card").render())
        assert items[0].text in card and "judges hidden until you label" in card
        assert "lexical" not in card                                  # no anchoring
        await wait_for(pilot, lambda: "Best unit" in str(screen.query_one("#card").render()), what="the card")
        await pilot.press("w")                                        # the verdicts on demand
        assert "judges: lexical" in str(screen.query_one("#card").render())
        await pilot.press("w")
        for key in keys:
            await pilot.press(key)
        await until_loaded(pilot, "labels")
        assert f"labelled 3 of {total} (uniform)" in heading(app)
        assert "saved:" in str(screen.query_one("#last").render())
        # (e) the report shows each judge's κ against the labels, and the vote's PPI line.
        store = open_store(claims_db)
        report = judge_report(store, "claims", "talk", resamples=1000)
        store.close()
        panel = _report(app)
        assert f"κ {fmt_estimate(report.agreement[0].agreement.kappa, 2)}" in panel and "n 3" in panel
        vote = next(e for e in report.estimates if e.judge == "vote").estimates
        assert f"naive {fmt_estimate(vote.naive, 2)}" in panel and f"PPI {fmt_estimate(vote.ppi, 2)}" in panel
        assert "3 labelled of" in panel
        # One verifier: the disagreement order has nothing to disagree on; it says so and stays uniform.
        await pilot.press("o")
        await until_loaded(pilot, "labels")
        assert screen.order == "uniform" and "one judge" in screen.view.note

    claims_app.walk(walk, SIZE)
    stored = _claim_labels(claims_db)
    assert stored == {(k.cell_id, k.sid, k.idx): (label, text, ANNOTATOR, "uniform")
                      for k, (label, text) in expected.items()}
    assert len(stored) == 3 and [v[0] for v in stored.values()].count(True) == 1


def test_forty_quick_keys_store_exactly_the_labels_pressed(claims_app, monkeypatch):
    claims_db = claims_app.db
    # Six items a window: the screen asks for the next window while keys keep coming.
    monkeypatch.setattr(label_loads, "WINDOW", 6)
    items = _queue(claims_db, "claims")
    keys = (["y", "n", "s", "y", "n", "y", "z", "n", "s", "y"] * 4)[:40]
    assert len(items) >= 40
    expected = _expected(items, keys)

    async def walk(pilot):
        app = pilot.app
        await _open_labels(pilot)
        await pilot.press(*keys)                # no wait between keys: the writes queue up behind the screen
        await until_loaded(pilot, "labels")
        assert f"labelled {len(expected)} of" in heading(app)

    claims_app.walk(walk, SMALL)
    assert _claim_labels(claims_db) == {(k.cell_id, k.sid, k.idx): (label, text, ANNOTATOR, "uniform")
                                        for k, (label, text) in expected.items()}


def test_a_second_annotator_sees_everyones_count_then_the_human_ceiling_in_the_report(claims_app):
    claims_db = claims_app.db
    """bo labelled the first four claims of the uniform queue (the same order for everyone), ana none: the heading
    (ana's queue) says 0 are hers, the panel 4 by everyone, bo's. Then ana labels them by keyboard, disagreeing
    once: the panel shows the two annotators' agreement, as judge report does."""
    from workbench.store.labels import put_label

    queue = _queue(claims_db, "claims")
    items = queue[:4]
    store = open_store(claims_db)
    for item in items:
        put_label(store, item.key, True, "bo", via="uniform", claim=item.text)
    store.close()

    async def walk(pilot):
        app = pilot.app
        screen = await _open_labels(pilot)
        assert f"annotator {ANNOTATOR} · you labelled 0 of {len(queue)} (uniform)" in heading(app)
        await wait_for(pilot, lambda: "4 labelled by all annotators" in _report(app),
                       what=lambda: f"the panel's count of every annotator's labels (it shows {_report(app)!r})")
        assert "bo 4" in _report(app)
        assert str(screen.current().key) == str(items[0].key)        # ana's queue starts where bo's did
        for key in ("y", "y", "y", "n"):
            await pilot.press(key)
        await until_loaded(pilot, "labels")
        store = open_store(claims_db)
        ceiling = judge_report(store, "claims", "talk", resamples=1000).annotator_agreement
        store.close()
        assert [(p.a, p.b, p.agreement.n, p.agreement.accuracy) for p in ceiling] == [("ana", "bo", 4, 0.75)]
        await wait_for(pilot, lambda: "annotators ana ~ bo" in _report(app), what="the annotators' line")
        panel = _report(app)
        assert f"κ {fmt_estimate(ceiling[0].agreement.kappa, 2)}" in panel and "agree 0.75" in panel

    claims_app.walk(walk, SIZE)


def test_m_picks_the_run_to_label_and_the_last_line_goes_with_the_old_run(claims_app):
    async def walk(pilot):
        app = pilot.app
        screen = await _open_labels(pilot)
        assert screen.view.run == "talk"
        await pilot.press("y", "z")
        await until_loaded(pilot, "labels")
        last = screen.query_one("#last")
        assert "undone:" in str(last.render())
        await pilot.press("m")
        await wait_for(pilot, lambda: screen.loaded and screen.view.run == "plain" and app.run_name == "plain",
                       what="m choosing the dataset's other run")
        assert "run plain" in heading(app) and str(last.render()) == ""
        await pilot.press("m")
        await wait_for(pilot, lambda: screen.loaded and screen.view.run == "talk" and screen.view.kind == "claims")

    claims_app.walk(walk, SIZE)


def test_answers_are_labelled_and_the_ledger_shows_their_ppi_line(claims_app):
    claims_db = claims_app.db
    items = _queue(claims_db, "answers")

    async def walk(pilot):
        app = pilot.app
        screen = await _open_labels(pilot)
        await pilot.press("t")                  # claims → dedup: this database has no dedup run
        await until_loaded(pilot, "labels")
        assert screen.view.kind == "dedup" and "No dedup runs yet" in str(screen.query_one("#card").render())
        await pilot.press("t")                  # → answers
        await until_loaded(pilot, "labels")
        assert screen.view.kind == "answers" and "answers (t) · run talk" in heading(app)
        await wait_for(pilot, lambda: "Gold" in str(screen.query_one("#card").render()), what="the answer's card")
        assert "scorer" not in str(screen.query_one("#card").render())
        await pilot.press("o")                  # one scorer: no disagreement order
        await until_loaded(pilot, "labels")
        assert screen.order == "uniform" and "one judge" in screen.view.note
        await pilot.press("y", "n", "s", "n")
        await until_loaded(pilot, "labels")
        assert "labelled 3 of" in heading(app) and "acc" in _report(app)
        # The ledger's side panel: the cell's accuracy, naive · human · PPI.
        await pilot.press("l")
        await until_loaded(pilot, "ledger")
        side = str(app.screen.query_one("#side").render())
        assert "Human labels" in side and "accuracy (acc, 3 labelled)" in side
        assert "naive" in side and "PPI" in side

    claims_app.walk(walk, SIZE)
    stored = {(cell, sid): (bool(label), annotator, via) for cell, sid, annotator, label, via
              in _rows(claims_db, "SELECT cell_id, sid, annotator, label, via FROM answer_labels")}
    assert stored == {(items[0].key.cell_id, items[0].key.sid): (True, ANNOTATOR, "uniform"),
                      (items[1].key.cell_id, items[1].key.sid): (False, ANNOTATOR, "uniform"),
                      (items[3].key.cell_id, items[3].key.sid): (False, ANNOTATOR, "uniform")}
    assert _rows(claims_db, "SELECT count(*) FROM claim_labels") == [(0,)]


def test_the_end_of_the_queue_offers_the_skipped_items_again(claims_app, monkeypatch):
    claims_db = claims_app.db
    monkeypatch.setattr(label_loads, "WINDOW", 6)
    total = len(_queue(claims_db, "answers"))

    async def walk(pilot):
        app = pilot.app
        screen = await _open_labels(pilot)
        # Typed ahead, without waiting: claims → dedup → answers, then every answer but the skipped first.
        await pilot.press("t", "t", "s", *["y"] * (total - 1))
        await until_loaded(pilot, "labels")
        assert screen.view.kind == "answers"
        card = str(screen.query_one("#card").render())
        assert "End of the queue. 1 left unlabelled (1 skipped this pass)" in card and "s: go through them" in card
        await pilot.press("s")                  # the skipped one again
        await until_loaded(pilot, "labels")
        await pilot.press("n")
        await until_loaded(pilot, "labels")
        assert f"All {total} answers labelled" in str(screen.query_one("#card").render())
        assert f"labelled {total} of {total} (uniform)" in heading(app)

    claims_app.walk(walk, SMALL)
    assert _rows(claims_db, "SELECT count(*), sum(label) FROM answer_labels") == [(total, total - 1)]


def test_empty_states_say_what_to_do(claims_app, tmp_path):
    async def walk(pilot):
        app = pilot.app
        await until_loaded(pilot, "ledger")
        app.open_run("plain")                   # planned, never answered: no claims, no scores
        await until_loaded(pilot, "ledger")
        await pilot.press("T")
        screen = await until_loaded(pilot, "labels")
        assert screen.view.kind == "answers"
        assert "no scored answers yet" in str(screen.query_one("#card").render())
        await pilot.press("t")                  # answers → relevance: no chunk relevance judged here
        await until_loaded(pilot, "labels")
        assert screen.view.kind == "relevance"
        assert "No chunk relevance judged yet" in str(screen.query_one("#card").render())
        # No corpus in this database: every step, from the import on (tests/test_tui_labels_hints.py: only the missing).
        assert "`workbench corpus import sample_data/howtocook --name hc`" in str(screen.query_one("#card").render())
        assert "then `workbench retrieval judge hc --retriever bm25 --k 5`" in str(screen.query_one("#card").render())
        await pilot.press("t")                  # → claims
        await until_loaded(pilot, "labels")
        assert screen.view.kind == "claims"
        assert "run `workbench claims run plain` first" in str(screen.query_one("#card").render())
        await pilot.press("t")                  # → dedup
        await until_loaded(pilot, "labels")
        assert screen.view.kind == "dedup" and "No dedup runs yet" in str(screen.query_one("#card").render())
        assert _report(app) == ""

    claims_app.walk(walk, SMALL)

    async def empty():
        async with WorkbenchApp(tmp_path / "empty.db").run_test(size=SMALL) as pilot:
            await until_loaded(pilot)
            await pilot.press("T")
            screen = await until_loaded(pilot, "labels")
            assert "No run selected" in str(screen.query_one("#card").render())

    asyncio.run(empty())


async def test_dedup_pairs_are_labelled_in_the_labels_screen_by_disagreement(judged_db):
    items = _queue(judged_db, "dedup", run=None, order="disagreement")
    app = WorkbenchApp(judged_db)
    async with app.run_test(size=SIZE) as pilot:
        await until_loaded(pilot)
        await pilot.press("T")
        screen = await until_loaded(pilot, "labels")
        assert screen.view.kind == "dedup" and "dedup run review" in heading(app)
        await wait_for(pilot, lambda: "Contexts" in str(screen.query_one("#card").render()), what="the pair's card")
        await pilot.press("o")
        await until_loaded(pilot, "labels")
        assert screen.order == "disagreement" and "judges disagree" in screen_text(app)
        if not items:
            assert "All 0" in str(screen.query_one("#card").render())
            return
        await pilot.press("y")
        await until_loaded(pilot, "labels")
        assert "graph" in _report(app) and "pair precision of merges" in _report(app)
    rows = _rows(judged_db, "SELECT a, b, annotator, label, via FROM pair_labels")
    assert rows == [(items[0].key.a, items[0].key.b, ANNOTATOR, 1, "disagreement")]


def _pair_labels(db):
    return {(a, b): (bool(label), annotator, via) for a, b, annotator, label, via
            in _rows(db, "SELECT a, b, annotator, label, via FROM pair_labels")}


def _decisions(db):
    return {(a, b, mode): decision for a, b, mode, decision
            in _rows(db, "SELECT a, b, mode, decision FROM dedup_decisions")}


async def test_dedup_review_labels_pairs_apart_from_the_decisions(judged_db):
    app = WorkbenchApp(judged_db)
    async with app.run_test(size=SIZE) as pilot:
        await until_loaded(pilot)
        await pilot.press("D")
        screen = await until_loaded(pilot, "dedup")
        pairs = list(screen.items)
        assert len(pairs) >= 3, "the tiny KG has three candidate pairs"
        mode = screen.mode
        await pilot.press("a", "x", "y")        # accept, reject, label same: one row each, the cursor moving on
        await until_loaded(pilot, "dedup")
        p = [(q.a, q.b) for q in pairs[:3]]
        assert _decisions(judged_db) == {(*p[0], mode): "accepted", (*p[1], mode): "rejected"}
        assert _pair_labels(judged_db) == {p[0]: (True, ANNOTATOR, "browse"), p[1]: (False, ANNOTATOR, "browse"),
                                           p[2]: (True, ANNOTATOR, "browse")}
        table = screen.query_one("#pairs")
        marks = ["✔ same", "✘ diff", "✔ same"]
        await wait_for(pilot, lambda: [str(table.get_row_at(i)[3]) for i in range(3)] == marks,
                       what="the labels in the list")
        # n labels the accepted pair "different" without touching its decision …
        table.move_cursor(row=0)
        await pilot.press("n")
        await until_loaded(pilot, "dedup")
        assert _decisions(judged_db) == {(*p[0], mode): "accepted", (*p[1], mode): "rejected"}
        assert _pair_labels(judged_db)[p[0]] == (False, ANNOTATOR, "browse")
        # … and clearing a decision keeps the label.
        table.move_cursor(row=0)
        await pilot.press("u")
        await until_loaded(pilot, "dedup")
        assert _decisions(judged_db) == {(*p[1], mode): "rejected"}
        assert _pair_labels(judged_db) == {p[0]: (False, ANNOTATOR, "browse"), p[1]: (False, ANNOTATOR, "browse"),
                                           p[2]: (True, ANNOTATOR, "browse")}


@pytest.fixture
def relevance_db(tmp_path) -> Path:
    """A small chunk dataset whose bm25 top 3 a scripted judge judged (tests/relevancekit.py): no run, no dedup run."""
    store = open_store(tmp_path / "relevance.db")
    try:
        import_dataset(store, build_tiny(tmp_path / "tiny"), DATASET)
        assert judge_relevance(store, DATASET, "bm25", k=3, llm=scripted_llm(store)).done == 8
    finally:
        store.close()
    return store.path


async def test_chunk_relevance_is_labelled_by_keyboard_and_the_report_follows(relevance_db):
    items = _queue(relevance_db, "relevance", run=DATASET)
    keys = ["y", "n", "s", "y", "z", "n"]
    expected = _expected(items, keys)
    app = WorkbenchApp(relevance_db)
    async with app.run_test(size=SIZE) as pilot:
        await until_loaded(pilot)
        await pilot.press("T")
        screen = await until_loaded(pilot, "labels")
        assert screen.view.kind == "relevance"              # no run, no dedup run: the judged chunks
        assert f"retrieved chunks (t) · dataset {DATASET} · annotator {ANNOTATOR} · you labelled 0 of 8" in heading(app)
        first = items[0]
        await wait_for(pilot, lambda: "Passage" in str(screen.query_one("#card").render()), what="the pair's card")
        card = str(screen.query_one("#card").render())
        question, chunk = first.text.split(" → ")
        assert f"Question {question}" in card and chunk in card and "bm25 #" in card
        assert "Is this passage relevant to answering the question?" in card
        assert "judges hidden until you label" in card and "smollm2-135m" not in card
        await pilot.press("w")
        assert "judges: smollm2-135m" in str(screen.query_one("#card").render())
        await pilot.press("w")
        for key in keys:
            await pilot.press(key)
        await until_loaded(pilot, "labels")
        assert "labelled 3 of 8" in heading(app)
        assert "relevant" in str(screen.query_one("#last").render())
        panel = _report(app)
        assert "smollm2-135m" in panel and "κ" in panel and "precision of retrieved chunks" in panel
        assert "3 labelled of 8" in panel
    stored = {(sid, uid): (bool(label), annotator, via) for sid, uid, annotator, label, via
              in _rows(relevance_db, "SELECT sid, uid, annotator, label, via FROM relevance_labels")}
    assert stored == {(k.sid, k.uid): (label, ANNOTATOR, "uniform") for k, (label, _) in expected.items()}
    assert len(stored) == 3


def test_snapshot_labels_at_80x24(snapshot, request, claims_app):
    assert snap(snapshot, request, claims_app, SMALL, settled_after(("T", "labels"), ("y", "labels"), ("n", "labels")))


def test_snapshot_labels_at_120x40(snapshot, request, claims_app):
    assert snap(snapshot, request, claims_app, SIZE,
                settled_after(("T", "labels"), ("y", "labels"), ("n", "labels"), ("e", "labels")))
