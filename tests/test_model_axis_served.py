"""One decision across models: three served models of known quality in one sweep, K 1,20 × B 32,128.

The stand-in server (tests/llama_server.py's ``Canned``) answers as three models would that are right
90 %, 75 % and 60 % of the time when a gold answer is in the prompt they were shown (one draw per
question and model: a model's skill is the same in every cell). The grid is run in full, then in
another database through the same server with ``--stop-when best --alpha 0.01``: the sequential run
names exactly one winner across every (model, cell), the full run's best, every interval it reports
covers the full run's value, and it sends at most a fifth of the full run's requests.

It runs on the first 800 MetaQA questions (sample_data/metaqa-800): what a sequential sweep saves grows
with the number of questions, and the figure it is held to was measured on 800 (on the 300 of
sample_data/metaqa the same sweep needs 0.236 of the requests).
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from conftest import REPO, copy_db
from llama_server import Canned
from workbench.cli import main
from workbench.data.importer import import_dataset
from workbench.store import open_store

QUALITY = {"good": 0.90, "mid": 0.75, "weak": 0.60}
GRID = ["--k", "1,20", "--budget", "32,128", "--format", "linear", "--answer-format", "text"]
METAQA_800 = REPO / "sample_data" / "metaqa-800"
ANSWERS = {row["question"]: row["answers"] for row in map(json.loads, (METAQA_800 / "samples.jsonl").open())}


def answer(request: dict) -> dict:
    """What the model ``request["model"]`` writes for one prompt (see the module)."""
    user = request["messages"][-1]["content"]
    evidence, question = re.match(r"Evidence:\n(.*)\nQuestion: (.*?)\n", user, re.S).groups()
    gold = ANSWERS[question]
    seen = any(a.lower() in evidence.lower() for a in gold)
    draw = int(hashlib.sha256(f"{request['model']}:{question}".encode()).hexdigest()[:8], 16) % 1000
    text = gold[0] if seen and draw < 1000 * QUALITY[request["model"]] else "I do not know"
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": 4}}


@pytest.fixture(scope="module")
def metaqa_db(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("metaqa800") / "metaqa.db")
    try:
        import_dataset(store, METAQA_800, "metaqa")
        return store.path
    finally:
        store.close()


def ledger(db, run: str, capsys) -> list[dict]:
    assert main(["--db", str(db), "ledger", run, "--json", "--resamples", "50"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.budget(60)
def test_a_sequential_sweep_of_three_models_names_the_full_runs_best_with_a_fifth_of_its_requests(
        metaqa_db, tmp_path, capsys):
    server = Canned(answer=answer, models=tuple(QUALITY))
    try:
        served = ["--backend", "openai", "--base-url", server.url, "--model", ",".join(QUALITY),
                  "--concurrency", "4"]
        full_db = copy_db(metaqa_db, tmp_path / "full.db")
        assert main(["--db", str(full_db), "run", "metaqa", *served, *GRID, "--name", "full"]) == 0
        full_requests = len(server.requests)
        capsys.readouterr()
        seq_db = copy_db(metaqa_db, tmp_path / "seq.db")
        assert main(["--db", str(seq_db), "run", "metaqa", *served, *GRID, "--name", "seq",
                     "--stop-when", "best", "--alpha", "0.01"]) == 0
        seq_requests = len(server.requests) - full_requests
    finally:
        server.close()
    truth = {c["cell_id"]: c["S_llm"]["value"] for c in ledger(full_db, "full", capsys)}
    assert len(truth) == 3 * 4 and {cell.split("/")[0] for cell in truth} == set(QUALITY)
    best = max(truth, key=truth.get)
    cells = {c["cell_id"]: c["sequential"] for c in ledger(seq_db, "seq", capsys)}
    assert [cell for cell, s in cells.items() if s["stopped"] == "best"] == [best]
    for cell, s in cells.items():
        assert s["lo"] <= truth[cell] <= s["hi"], (cell, s, truth[cell])
        if s["versus"] is not None:
            v = s["versus"]
            assert v["lo"] <= truth[cell] - truth[v["cell"]] <= v["hi"], (cell, v)
    assert seq_requests <= 0.20 * full_requests, (seq_requests, full_requests)
