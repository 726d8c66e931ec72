"""`claims run` over real runs: every answer verified, verdicts stored, resumable, in the ledger.

The answers are the real default model's (SmolLM2-135M), generated once per session
(tests/model_shared.py). The claim run with the ``llm`` decomposer and the ``llm_judge`` verifier
runs it too; a resume, a ledger, the CLI's reports and refusals are not about what it writes:
they verify with rule + lexical, or with a stand-in judge.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from workbench.claims.report import answer_claims, claims_by_cell
from workbench.claims.reference import check_reference, reference_claims
from workbench.claims.runner import ClaimsConfig, list_answer, run_claims

from workbench.cli import main
from workbench.claims.decompose import CLAIMS_SCHEMA
from workbench.claims.verify import JUDGE_SCHEMA
from workbench.models.base import Generation, Prompt
from workbench.models.cached import CachedLLM
from workbench.models.locate import default_model_path
from workbench.runs.report import run_ledger
from workbench.store import open_store
from workbench.store.queries import Sample, get_run

from conftest import copy_db
from model_shared import tiny_answered


@pytest.fixture(scope="module")
def answered_template(shared_outputs) -> Path:
    """The tiny dataset answered by SmolLM2 once per session (tests/model_shared.py), as three runs the tests take
    copies of: ``gen`` (free text, at most 12 tokens: a few claims each keep decomposing and judging them short),
    ``json-run`` (JSON lists) and ``r`` (``gen``'s answers again)."""
    return tiny_answered(shared_outputs)


@pytest.fixture
def answered(tmp_path, answered_template):
    """This test's copy of the answered tiny dataset (the model's answers are generated once per session)."""
    store = open_store(copy_db(answered_template, tmp_path / "wb.db"))
    yield store
    store.close()


@pytest.fixture
def text_run(answered):
    """The tiny dataset answered in free text by SmolLM2 at K = 1, 2: the run ``gen`` of 6 answers."""
    return answered, get_run(answered, "gen")


class StandInJudge:
    """A backend for the claim pass's bookkeeping (a test double: what it answers does not matter): every claim is
    supported, and a clause the hybrid decomposer sends it is one claim, itself. ``calls``: what it answered."""

    name, model_id, chat_template, concurrency = "stand-in", "stand-in:judge", "", 1

    def __init__(self):
        self.calls = 0

    def render(self, messages) -> Prompt:
        pairs = tuple((m["role"], m["content"]) for m in messages)
        return Prompt(pairs, json.dumps(pairs, ensure_ascii=False), tokens=10)

    def generate(self, prompt, sampling, json_schema=None, grammar=None) -> Generation:
        self.calls += 1
        assert json_schema in (JUDGE_SCHEMA, CLAIMS_SCHEMA), json_schema
        text = ('{"verdict": "supported"}' if json_schema == JUDGE_SCHEMA
                else json.dumps({"claims": [prompt.messages[-1][1].rsplit("\n", 1)[-1]]}))
        return Generation(text, 10, 4, 10, 0.001, "stop")

    def close(self) -> None:
        pass


def stand_in_llm(store) -> CachedLLM:
    """The real cached LLM (its cache, its counters) over :class:`StandInJudge`."""
    backend = StandInJudge()
    return CachedLLM(store, lambda **_slot: backend)


def test_a_list_answer_is_its_items_each_with_its_span():
    text, claims = list_answer('["William Dieterle", "Kismet", "William Dieterle"]')
    assert text == "William Dieterle; Kismet"
    assert [(c.text, text[c.start:c.end], c.source) for c in claims] == [
        ("William Dieterle", "William Dieterle", "item"), ("Kismet", "Kismet", "item")]
    assert list_answer("Dieterle directed it.") == ("Dieterle directed it.", None)


def test_the_verdict_table_of_one_answer_follows_the_ragchecker_layout():
    """A short gold answer: containment checks the three relations beside claim × unit, as it always did."""
    sample = Sample(1, "q", "who directed Kismet", ["William Dieterle"], {"William Dieterle": ["W. Dieterle"]},
                    [[10]], {})
    units = ["Kismet | directed_by | William Dieterle", "Kismet | release_year | 1944"]
    reference = reference_claims(sample, lambda text: [])
    assert [(c.text, c.source) for c in reference] == [("William Dieterle", "item")]
    checks = check_reference(sample, reference, ["Kismet was directed by W. Dieterle", "Kismet is from 1950"],
                             "Kismet was directed by W. Dieterle. Kismet is from 1950.", units, judge=None)
    table = checks.table(np.array([[True, False], [False, False]]), np.array([True, False]))
    assert table.claim_unit.tolist() == [[True, False], [False, False]]
    assert table.claim_correct.tolist() == [True, False]      # the alias counts as the gold answer
    assert table.gold_unit.tolist() == [[True, False]]
    assert table.gold_in_response.tolist() == [True]
    assert table.relevant.tolist() == [True, False]           # T10 is on the gold path
    assert checks.answer2response[0] == {"containment": "E", "vote": "E"}


@pytest.mark.real_model
@pytest.mark.budget(25)
def test_llm_decomposer_and_llm_judge_verify_every_answer_and_store_every_verdict(text_run):
    store, run = text_run
    config = ClaimsConfig(decomposer="llm", verifiers=("llm_judge",))
    cell = "k2-b256-score"   # two answers that saw two units each keep the model's work short
    report = run_claims(store, run, config, cells=[cell], limit=2)
    assert (report.jobs, report.done, report.errors) == (2, 2, 0)
    # Each answer with text was decomposed by the model (what it wrote, even an empty answer, is the CPU's).
    answered = store.conn.execute("SELECT count(*) FROM events WHERE run_id = ? AND cell_id = ? AND sid IN"
                                  " (SELECT sid FROM samples WHERE dataset_id = ? ORDER BY sid LIMIT 2)"
                                  " AND trim(prediction) != ''", (run.id, cell, run.dataset_id)).fetchone()[0]
    assert report.model_calls + report.cache_hits >= answered
    jobs = store.conn.execute("SELECT cell_id, sid, n_claims, n_supported, support_ratio, metrics FROM claim_jobs"
                              " WHERE claim_run_id = ? AND status = 'done'", (report.claim_run,)).fetchall()
    assert len(jobs) == 2
    for cell_id, sid, n_claims, n_supported, ratio, metrics in jobs:
        visible = json.loads(store.conn.execute("SELECT visible FROM events WHERE run_id = ? AND cell_id = ? AND"
                                                " sid = ?", (run.id, cell_id, sid)).fetchone()[0])
        stored = store.conn.execute("SELECT count(*) FROM claim_verdicts WHERE claim_run_id = ? AND cell_id = ?"
                                    " AND sid = ?", (report.claim_run, cell_id, sid)).fetchone()[0]
        # One verdict per (claim, shown unit) from the judge, plus the vote.
        assert stored == n_claims * len(visible) * 2
        assert ratio == (n_supported / n_claims if n_claims else None)
        assert set(json.loads(metrics)) >= {"faithfulness", "hallucination", "self_knowledge"}
    sources = {s for (s,) in store.conn.execute("SELECT DISTINCT source FROM claims WHERE claim_run_id = ?",
                                                (report.claim_run,))}
    assert sources <= {"llm"}
    again = run_claims(store, run, config, cells=[cell], limit=2)
    assert (again.jobs, again.model_calls) == (0, 0)


def test_an_interrupted_claim_run_resumes_without_recomputing_anything(text_run):
    """The resume's bookkeeping, whatever the judge says: a stand-in judge under the real cache."""
    store, run = text_run
    config = ClaimsConfig(decomposer="hybrid", verifiers=("lexical", "llm_judge"))
    stop = threading.Event()
    llm = stand_in_llm(store)
    first = run_claims(store, run, config, llm=llm, stop=stop,
                       progress=lambda done, total, r: stop.set() if done == 2 else None)
    assert first.stopped and first.done == 2
    finished = dict(((c, s), t) for c, s, t in store.conn.execute(
        "SELECT cell_id, sid, finished_at FROM claim_jobs WHERE claim_run_id = ? AND status = 'done'",
        (first.claim_run,)))
    calls_before = llm.model_calls
    generations_before = store.conn.execute("SELECT count(*) FROM generations").fetchone()[0]

    second = run_claims(store, run, config, llm=stand_in_llm(store))
    assert (second.jobs, second.done) == (4, 4)
    # Finished jobs were not redone, and no model call was repeated: every call made a new cache row.
    assert dict(((c, s), t) for c, s, t in store.conn.execute(
        "SELECT cell_id, sid, finished_at FROM claim_jobs WHERE claim_run_id = ? AND (cell_id, sid) IN"
        " (SELECT cell_id, sid FROM claim_jobs WHERE claim_run_id = ?)", (first.claim_run, first.claim_run))
        if (c, s) in finished) == finished
    generations_after = store.conn.execute("SELECT count(*) FROM generations").fetchone()[0]
    assert generations_after - generations_before == second.model_calls
    assert calls_before == first.model_calls  # the counters are per pass


def test_the_ledger_shows_faithfulness_per_cell_once_claims_are_verified(text_run, capsys):
    store, run = text_run
    assert run_ledger(store, run, resamples=50).claims is None
    run_claims(store, run, ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
    report = run_ledger(store, run, resamples=50)
    assert report.claims["config"]["verifiers"] == ["lexical"]
    by_cell = claims_by_cell(store, run, resamples=50)
    for row in report.rows:
        expected = by_cell[row["cell_id"]]["faithfulness"].mean
        assert row["faithfulness"].value == expected
        assert row["claims_n"] == 3
    from workbench.tables import ledger_tables

    text = ledger_tables(report)
    assert "Claims (claim run" in text and "faithful" in text


def test_the_cli_runs_reports_and_shows_claims_and_the_samples_filter_finds_unsupported_ones(answered, capsys):
    from workbench.browse import list_samples

    tiny_store, run = answered, get_run(answered, "json-run")
    db = str(tiny_store.path)
    assert main(["--db", db, "claims", "run", "json-run", "--decomposer", "rule", "--verifiers", "lexical"]) == 0
    assert main(["--db", db, "claims", "report", "json-run", "--json", "--resamples", "50"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["cells"]) == {"k1-b256-score", "k2-b256-score"} and out["done"] == 6
    assert main(["--db", db, "claims", "show", "json-run", "q1", "--cell", "k1-b256-score", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == answer_claims(tiny_store, run, "k1-b256-score", 1)
    unsupported = tiny_store.conn.execute(
        "SELECT count(*) FROM claim_jobs WHERE cell_id = 'k1-b256-score' AND n_supported < n_claims").fetchone()[0]
    assert list_samples(tiny_store, run, "k1-b256-score", quadrant="unsupported").total == unsupported


def test_claims_check_decomposes_and_verifies_a_chinese_answer(store, capsys):
    context = "感冒的常见症状包括流鼻涕、咳嗽、发热和喉咙痛。"
    assert main(["--db", str(store.path), "claims", "check", "感冒的症状包括流鼻涕、咳嗽和发热。患者应该多喝水。",
                 "--context", context, "--decomposer", "rule", "--verifiers", "lexical", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(c["text"], c["supported"]) for c in out["claims"]] == [
        ("感冒的症状包括流鼻涕", True), ("感冒的症状包括咳嗽", True), ("感冒的症状包括发热", True),
        ("患者应该多喝水", False)]
    assert out["support_ratio"] == 0.75 and out["claims"][0]["best_unit"]["label"] == "X1"
    assert out["filtered_answer"] == "感冒的症状包括流鼻涕；感冒的症状包括咳嗽；感冒的症状包括发热"


def test_bad_claims_options_are_refused_by_name(answered, capsys):
    tiny_store = answered
    db = str(tiny_store.path)
    assert main(["--db", db, "claims", "run", "r", "--verifiers", "lexical,telepathy"]) == 2
    assert "--verifiers: 'telepathy'" in capsys.readouterr().err
    assert main(["--db", db, "claims", "run", "r", "--verifiers", "embedding", "--embedding-model", "nope.gguf"]) == 2
    assert "--embedding-model: " in capsys.readouterr().err
    smollm2 = str(default_model_path())             # a chat model: it writes, it does not embed
    assert main(["--db", db, "claims", "run", "r", "--verifiers", "embedding", "--embedding-model", smollm2]) == 2
    assert "not an embedding model" in capsys.readouterr().err
    assert main(["--db", db, "claims", "run", "r", "--verifiers", "nli", "--nli-model", "missing.gguf"]) == 2
    assert "missing.gguf" in capsys.readouterr().err
    assert main(["--db", db, "claims", "run", "r", "--cell", "k9-b1-score", "--verifiers", "lexical"]) == 2
    assert "--cell: k9-b1-score not in run 'r'" in capsys.readouterr().err
    assert tiny_store.conn.execute("SELECT count(*) FROM claim_jobs").fetchone()[0] == 0
