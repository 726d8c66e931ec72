"""A pass over a served model keeps ``--concurrency`` requests in flight, and survives the server and itself.

The server is canned (:class:`llama_server.Canned`): it answers the relevance judge's question
from the test's verdicts, after a delay, and counts what it was asked. What is under test is
the client: how many requests it keeps in flight, that each job is still committed whole, that
a kill -9 or a server that stops answering in time loses no answered call, and that a rerun
asks exactly what was never answered (the server's own count).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import copy_db, wait_for_rows
from llama_server import Canned, first_token, free_port, serve
from relevancekit import CHUNKS, DATASET, QUESTIONS, RANKED, VERDICTS, tiny_db
from tuikit import Turns
from workbench.cli import main
from workbench.models.base import ModelError
from workbench.models.locate import default_model_path
from workbench.store import open_store

ROOT = Path(__file__).resolve().parents[1]
K = 4
PAIRS = [(q, c) for q, cs in RANKED["bm25"].items() for c in cs[:K]]   # the 9 pairs judged at k 4
TEXT = {c: t for c, (_, t) in CHUNKS.items()}
ASKED = {(QUESTIONS[q], TEXT[c]): VERDICTS[(q, c)] for q, c in PAIRS}


def judge(request: dict) -> dict:
    """The served judge's answer: the test's verdict on the (question, passage) in the prompt, as a first token."""
    user = request["messages"][-1]["content"]
    question, rest = user.split("Question: ", 1)[1].split("\n\nPassage: ", 1)
    verdict = ASKED[(question, rest.split("\n\n", 1)[0])]
    other = "No" if verdict == "Yes" else "Yes"
    return first_token((verdict, -0.1), (other, -2.4))


P_WINNER = 1 / (1 + math.exp(-2.3))   # P(verdict) from logprobs -0.1 and -2.4


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return tiny_db(tmp_path_factory.mktemp("served-passes") / "wb.db")


@pytest.fixture
def db(tmp_path, template) -> str:
    return str(copy_db(template, tmp_path / "wb.db"))


def argv(db: str, server: Canned, *extra: str) -> list[str]:
    return ["--db", db, "retrieval", "judge", DATASET, "--retriever", "bm25", "--k", str(K),
            "--backend", "openai", "--base-url", server.url, "--model", "m", "--json", *extra]


def verdicts(db: str) -> dict:
    store = open_store(db)
    try:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return {(q, c): (status, relevant, score) for q, c, status, relevant, score in store.conn.execute(
            "SELECT s.id, u.chunk_id, v.status, v.relevant, v.score FROM relevance_verdicts v"
            " JOIN samples s ON s.sid = v.sid JOIN units u ON u.uid = v.uid")}
    finally:
        store.close()


def expected() -> dict:
    return {(q, c): ("done", int(VERDICTS[(q, c)] == "Yes"),
                     pytest.approx(P_WINNER if VERDICTS[(q, c)] == "Yes" else 1 - P_WINNER)) for q, c in PAIRS}


def cached_calls(db: str) -> int:
    store = open_store(db)
    try:
        return store.count("generations")
    finally:
        store.close()


@pytest.mark.parametrize("concurrency", [4, 1])
def test_concurrency_keeps_that_many_requests_in_flight_and_a_rerun_asks_nothing(db, capsys, concurrency):
    server = Canned(answer=judge, delay=0.3 if concurrency > 1 else 0.05)
    try:
        assert main(argv(db, server, "--concurrency", str(concurrency))) == 0
        report = json.loads(capsys.readouterr().out)
        assert server.most == concurrency and len(server.requests) == len(PAIRS) == report["model_calls"]
        assert verdicts(db) == expected()   # the same verdicts and scores, whatever the concurrency
        assert main(argv(db, server, "--concurrency", str(concurrency))) == 0
        assert len(server.requests) == len(PAIRS)   # the second run asked the server nothing
    finally:
        server.close()


def test_kill_9_with_requests_in_flight_loses_no_answered_call_and_the_rerun_asks_only_the_rest(db, capsys):
    turns = Turns()   # the server answers only as the test allows: "more in flight" holds however loaded the machine
    server = Canned(answer=judge, delay=lambda number: turns.take() or 0.0)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", *argv(db, server, "--concurrency", "3")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        # Killed once four answers are committed, while the next three wait in flight for a turn.
        turns.allow(4)
        wait_for_rows(Path(db), "SELECT count(*) FROM generations", 4, proc, timeout=60)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        turns.release()
        asked_before, kept = len(server.requests), cached_calls(db)
        assert 4 <= kept < len(PAIRS) and asked_before - kept <= 3   # at most the 3 in flight were lost
        assert main(argv(db, server, "--concurrency", "3")) == 0
        out, err = capsys.readouterr()
        rerun = json.loads(out)
        assert f"recovered the lease of pid {proc.pid}, which died" in err
        # Every call answered before the kill is replayed from the cache; only the others reach the server.
        assert rerun["model_calls"] == len(server.requests) - asked_before == len(PAIRS) - kept
        assert verdicts(db) == expected()
    finally:
        turns.release()
        server.close()


def test_a_server_that_stops_answering_in_time_ends_the_pass_in_one_line_and_a_rerun_finishes(db, capsys):
    """After two answers every request takes 2 s; with ``--timeout 0.3`` each of its 3 attempts gives up."""
    slow = Canned(answer=judge, delay=lambda number: 0.0 if number <= 2 else 2.0)
    try:
        assert main(argv(db, slow, "--concurrency", "1", "--timeout", "0.3")) == 1
    finally:
        slow.close()
    report = json.loads(capsys.readouterr().out)
    assert report["fatal"] == f"{slow.url}/chat/completions: no answer within 0.3 s (3 attempts; --timeout sets it)"
    assert (report["done"], report["errors"], len(slow.requests)) == (2, 1, 5)
    statuses = [v[0] for v in verdicts(db).values()]
    assert sorted(statuses) == ["done"] * 2 + ["error"] + ["pending"] * (len(PAIRS) - 3)
    back = Canned(answer=judge, port=slow.port)
    try:
        assert main(argv(db, back, "--retry-errors")) == 0
    finally:
        back.close()
    assert len(back.requests) == len(PAIRS) - 2 and verdicts(db) == expected()


@pytest.mark.real_model
def test_a_real_server_stopped_mid_pass_ends_it_in_one_line_and_started_again_the_rerun_finishes(
        db, tmp_path, capsys):
    """``llama_cpp.server`` serving SmolLM2 is killed after its second answer: the pass ends with exit 1 and
    the project's two-line note; every stored verdict is whole. Started again on the same port, the rerun
    judges exactly the pairs that have no answer in the cache. At k 2 (six pairs): room for a kill after two, with
    the rest to judge again, and no more real judging than that needs."""
    try:
        model = default_model_path()
    except ModelError as exc:
        pytest.skip(str(exc))
    port = free_port()
    pairs = sum(len(cs[:2]) for cs in RANKED["bm25"].values())
    cli = [sys.executable, "-m", "workbench.cli", "--db", db, "retrieval", "judge", DATASET, "--retriever", "bm25",
           "--k", "2", "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "smollm2",
           "--concurrency", "1"]
    with serve(model, tmp_path, alias="smollm2", port=port) as server:
        proc = subprocess.Popen(cli, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + 120
        while server.requests() < 3:   # the up-front check's one-token request, then two answers
            assert proc.poll() is None and time.monotonic() < deadline, "the pass ended before the server was stopped"
            time.sleep(0.05)
        server.proc.kill()
        assert proc.wait(timeout=60) == 1
    err = proc.stderr.read().strip().splitlines()
    errors = [line for line in err if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: http://127.0.0.1:{port}/v1/chat/completions: server unreachable after 3 attempts"), err
    assert "--retry-errors" in err[-1], err
    kept = cached_calls(db)
    rows = verdicts(db)
    assert pairs == 6 and 2 <= kept < pairs and sum(v[0] == "done" for v in rows.values()) == kept
    assert all(v[1:] == (None, None) for v in rows.values() if v[0] != "done")   # nothing half-written
    with serve(model, tmp_path, alias="smollm2", port=port) as again:
        assert main([*cli[3:], "--retry-errors", "--json"]) == 0
        assert again.requests() == 1 + pairs - kept   # the check's one token, and what was never answered
    assert [v[0] for v in verdicts(db).values()] == ["done"] * pairs
