"""Bring-your-own generator: prompts export → any generator → predictions import → full ledger."""

import json

import pytest

from workbench.cli import main
from workbench.data.errors import InputRejected
from workbench.data.predictions import export_prompts, import_predictions
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store.queries import get_run

from conftest import write_jsonl


def _extractive_reader(record, answers_by_id):
    """A stand-in for an external system: answers when a gold answer is in the prompt's evidence."""
    evidence = record["messages"][1]["content"].split("Question:")[0]
    hits = [a for a in answers_by_id[record["sample_id"]] if a in evidence]
    return hits[0] if hits else "I don't know"


def _round_trip(tmp_path, db, run):
    prompts = tmp_path / "prompts.jsonl"
    assert main(["--db", str(db), "prompts", "export", run, "--out", str(prompts)]) == 0
    records = [json.loads(line) for line in prompts.open(encoding="utf-8")]
    return prompts, records


def test_round_trip_fills_the_whole_ledger_and_the_identity_holds(tmp_path, tiny_store, capsys):
    plan_sweep(tiny_store, SweepConfig(ks=(1, 2, 3), budgets=(12, 1000), formats=("score", "struct")), name="s")
    db = tiny_store.path
    prompts, records = _round_trip(tmp_path, db, "s")
    assert len(records) == 3 * 3 * 2 * 2
    first = records[0]
    assert set(first) == {"sample_id", "cell_id", "prompt_style", "messages", "prompt"}
    assert first["messages"][0]["role"] == "system" and "Question:" in first["prompt"]
    answers = {"q1": ["William Dieterle"], "q2": ["William Dieterle"], "q3": ["French"]}
    write_jsonl(tmp_path / "pred.jsonl", [{"sample_id": r["sample_id"], "cell_id": r["cell_id"],
                                           "prediction": _extractive_reader(r, answers)} for r in records])
    assert main(["--db", str(db), "predictions", "import", str(tmp_path / "pred.jsonl"), "s"]) == 0
    capsys.readouterr()
    assert main(["--db", str(db), "ledger", "s", "--json", "--resamples", "300"]) == 0
    cells = json.loads(capsys.readouterr().out)
    assert len(cells) == 12
    for cell in cells:
        v = {t: cell[t]["value"] for t in ("S_llm", "Acc_hit", "Acc_miss", "S_vis")}
        assert v["S_llm"] is not None
        hit = (v["Acc_hit"] or 0.0) * v["S_vis"]
        miss = (v["Acc_miss"] or 0.0) * (1 - v["S_vis"])
        assert abs(v["S_llm"] - (hit + miss)) < 1e-12
        for term in ("S_llm", "S_vis", "D_mass", "L_leak"):
            assert set(cell[term]) == {"value", "lo", "hi"}
    # The reader is evidence-driven: when the gold path is visible it answers (Acc_hit = 1),
    # and it never leaks an answer it cannot see (L_leak = 0).
    wide = next(c for c in cells if c["cell_id"] == "k3-b1000-score")
    assert wide["Acc_hit"]["value"] == 1.0 and wide["L_leak"]["value"] == 0.0
    assert wide["S_llm"]["value"] == pytest.approx(2 / 3)


def test_reimporting_the_same_predictions_changes_nothing_and_different_ones_need_replace(tmp_path, tiny_store):
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), name="s")
    run = get_run(tiny_store, "s")
    rows = [{"sample_id": s, "cell_id": "k1-b64-score", "prediction": "French"} for s in ("q1", "q2", "q3")]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    assert import_predictions(tiny_store, run, path).scored == 3
    again = import_predictions(tiny_store, run, path)
    assert (again.scored, again.unchanged) == (0, 3)
    rows[0]["prediction"] = "William Dieterle"
    path = write_jsonl(tmp_path / "p2.jsonl", rows)
    with pytest.raises(InputRejected, match=r"p2.jsonl:1: \$.prediction: .*--replace"):
        import_predictions(tiny_store, run, path)
    assert import_predictions(tiny_store, run, path, replace=True).scored == 1
    scores = dict(tiny_store.conn.execute("SELECT sid, score FROM events WHERE run_id = ?", (run.id,)).fetchall())
    assert scores == {1: 1.0, 2: 0.0, 3: 1.0}


BAD_PREDICTIONS = [
    ("malformed JSON", ['{"sample_id": "q1", "cell_id": '], r"p.jsonl:1: \$: malformed JSON"),
    ("missing field", [{"sample_id": "q1", "cell_id": "k1-b64-score"}], r"p.jsonl:1: \$.prediction: missing"),
    ("mistyped field", [{"sample_id": "q1", "cell_id": "k1-b64-score", "prediction": ["x"]}],
     r"p.jsonl:1: \$.prediction: expected a string, got array"),
    ("unknown sample", [{"sample_id": "nope", "cell_id": "k1-b64-score", "prediction": "x"}],
     r"p.jsonl:1: \$.sample_id: unknown sample id 'nope'"),
    ("unknown cell", [{"sample_id": "q1", "cell_id": "k9-b1-score", "prediction": "x"}],
     r"p.jsonl:1: \$.cell_id: unknown cell 'k9-b1-score'"),
    ("duplicate", [{"sample_id": "q1", "cell_id": "k1-b64-score", "prediction": "x"}] * 2,
     r"p.jsonl:2: \$: duplicate prediction .* \(first on line 1\)"),
    ("empty file", [], r"p.jsonl:1: \$: file is empty"),
]


@pytest.mark.parametrize("rows, pattern", [(r, p) for _, r, p in BAD_PREDICTIONS],
                         ids=[name for name, _, _ in BAD_PREDICTIONS])
def test_bad_predictions_are_rejected_and_nothing_is_scored(tmp_path, tiny_store, rows, pattern):
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), name="s")
    good = write_jsonl(tmp_path / "good.jsonl",
                       [{"sample_id": "q3", "cell_id": "k1-b64-score", "prediction": "French"}])
    import_predictions(tiny_store, get_run(tiny_store, "s"), good)
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    with pytest.raises(InputRejected, match=pattern):
        import_predictions(tiny_store, get_run(tiny_store, "s"), path)
    scored = tiny_store.conn.execute("SELECT count(*) FROM events WHERE score IS NOT NULL").fetchone()[0]
    assert scored == 1


def test_non_utf8_predictions_are_rejected(tmp_path, tiny_store):
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(64,), formats=("score",)), name="s")
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"sample_id": "q1", "cell_id": "k1-b64-score", "prediction": "caf\xe9"}\n')
    with pytest.raises(InputRejected, match=r"p.jsonl:1: \$: not valid UTF-8"):
        import_predictions(tiny_store, get_run(tiny_store, "s"), path)
    assert tiny_store.conn.execute("SELECT count(*) FROM events WHERE score IS NOT NULL").fetchone()[0] == 0


def test_prompts_carry_the_exact_truncated_window(tmp_path, tiny_store):
    import io

    plan_sweep(tiny_store, SweepConfig(ks=(2,), budgets=(5,), formats=("score",)), name="s")
    buf = io.StringIO()
    export_prompts(tiny_store, get_run(tiny_store, "s"), buf)
    q1 = next(json.loads(line) for line in buf.getvalue().splitlines() if '"q1"' in line)
    evidence = tiny_store.conn.execute(
        "SELECT v.text FROM events e JOIN evidence v ON v.sha256 = e.evidence_sha256 WHERE e.sid = 1").fetchone()[0]
    # The 5-token window is a cut-off part of the first line, and that is what the model sees.
    assert "\n" not in evidence and evidence.startswith("[T3]")
    assert evidence in q1["messages"][1]["content"]


def test_a_completion_runs_prompts_end_with_the_answer_cue_its_model_saw(tiny_store):
    """Once the export flattened the chat messages for every run: a base model's prompt lacked its
    answer cue, so a generator fed the export saw other text than the workbench's model had."""
    import io

    from workbench.runs.generation import GenerationConfig
    from workbench.runs.prompt import ANSWER_CUE

    sweep = SweepConfig(ks=(2,), budgets=(64,), formats=("score",))
    for name, style in (("chat", "chat"), ("base", "completion")):
        plan_sweep(tiny_store, sweep, name=name,
                   generation=GenerationConfig(max_tokens=8, prompt_style=style).as_dict())
    lines = {}
    for name in ("chat", "base"):
        buf = io.StringIO()
        export_prompts(tiny_store, get_run(tiny_store, name), buf)
        lines[name] = [json.loads(line) for line in buf.getvalue().splitlines()]
    chat, base = lines["chat"][0], lines["base"][0]
    assert (chat["prompt_style"], base["prompt_style"]) == ("chat", "completion")
    assert base["prompt"] == chat["prompt"] + ANSWER_CUE and not chat["prompt"].endswith(ANSWER_CUE)
    assert base["messages"] == chat["messages"]
