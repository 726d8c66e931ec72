"""A sequential run through a served model, on a ladder of cells: every word it says holds, against the full run.

The stand-in server (tests/llama_server.py's ``Canned``) answers MetaQA's questions as a model of known
quality would: right when a gold answer is in the evidence it was shown, with a chance that falls as
the evidence grows (0.9 − 0.024 per line; one draw per question, shared by every cell, as one model's
skill is). On K 1,2,3,5,10,20 at B 128 that makes a ladder: the top three cells' S_llm lie within 0.02
(0.787, 0.773, 0.767), then 0.72, 0.69, 0.64. The grid is run in full, then, in another database through
the same server, with ``--stop-when best --tolerance 0.02``: each stopped cell's versus interval holds
its label and covers the full run's difference, and the winner is within E of the full run's best.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from conftest import SAMPLE_METAQA, copy_db
from llama_server import Canned
from workbench.cli import main

E = 0.02
GRID = ["--k", "1,2,3,5,10,20", "--budget", "128", "--format", "linear", "--answer-format", "text"]
ANSWERS = {row["question"]: row["answers"] for row in map(json.loads, (SAMPLE_METAQA / "samples.jsonl").open())}


def answer(request: dict) -> dict:
    """What a model of known quality writes for one prompt (see the module)."""
    user = request["messages"][-1]["content"]
    evidence, question = re.match(r"Evidence:\n(.*)\nQuestion: (.*?)\n", user, re.S).groups()
    lines = [line for line in evidence.splitlines() if line.strip()]
    gold = ANSWERS[question]
    seen = any(a.lower() in evidence.lower() for a in gold)
    draw = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) % 1000
    text = gold[0] if seen and draw < 1000 * max(0.0, 0.9 - 0.024 * len(lines)) else "I do not know"
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": 4}}


def ledger(db, run: str, capsys) -> list[dict]:
    assert main(["--db", str(db), "ledger", run, "--json", "--resamples", "50"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.budget(30)
def test_a_sequential_run_on_a_ladder_says_only_what_its_intervals_prove_of_the_full_run(metaqa_template, tmp_path,
                                                                                         capsys):
    server = Canned(answer=answer)
    try:
        served = ["--backend", "openai", "--base-url", server.url, "--model", "m", "--concurrency", "4"]
        full_db = copy_db(metaqa_template, tmp_path / "full.db")
        assert main(["--db", str(full_db), "run", "metaqa", *served, *GRID, "--name", "full"]) == 0
        full_requests = len(server.requests)
        truth = {c["cell_id"]: c["S_llm"]["value"] for c in ledger(full_db, "full", capsys)}
        top = sorted(truth.values(), reverse=True)
        assert top[0] - top[2] <= E and top[0] > top[1]           # the ladder the test is about

        seq_db = copy_db(metaqa_template, tmp_path / "seq.db")
        assert main(["--db", str(seq_db), "run", "metaqa", *served, *GRID, "--stop-when", "best", "--tolerance",
                     str(E), "--name", "seq"]) == 0
        capsys.readouterr()
        asked = len(server.requests) - full_requests
    finally:
        server.close()
    cells = {c["cell_id"]: c["sequential"] for c in ledger(seq_db, "seq", capsys)}
    [winner] = [cell for cell, s in cells.items() if s["stopped"] == "best"]
    assert truth[winner] >= max(truth.values()) - E               # within E of the full run's best
    assert 0 < asked < full_requests                              # and it asked fewer than the full run did
    for cell, s in cells.items():
        if cell == winner:
            assert s["versus"] is None
            continue
        v = s["versus"]
        assert s["stopped"] in ("worse", "tied") and v["cell"] in cells
        assert v["hi"] < 0 if s["stopped"] == "worse" else v["hi"] <= E     # the word is what the interval shows
        assert v["lo"] <= truth[cell] - truth[v["cell"]] <= v["hi"]         # and it holds of the full run
        assert s["lo"] <= truth[cell] <= s["hi"]
