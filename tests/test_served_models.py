"""A model named ``<base-url>#<name>`` is called over an OpenAI-compatible API wherever a verb takes a model.

``--backend openai --base-url URL --model NAME`` is another way to write ``URL#NAME``, the same
on every model-calling verb. The reference is the model's identity in the cache and in a config's
key, so a served model and a local one never share an answer. How a choice reads what a server
sends, and a server failing mid-pass, are checked against canned servers here; what goes through a
real ``llama_cpp.server`` (a choice, a vector, a pass) is tests/test_served_pipelines.py, which shares
its servers; requests in flight and faults, tests/test_served_passes.py.
"""

from __future__ import annotations

import argparse
import json
import math

import pytest

from llama_server import Canned, first_token, free_port
from workbench.cli import main
from workbench.cli.main import build_parser
from workbench.cli.common import chosen_model
from workbench.errors import BadInput
from workbench.models.base import ModelError
from workbench.models.registry import backend_spec, served_model, served_ref
from workbench.store import open_store


def args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"backend": "llamacpp", "base_url": None, **kw})


# ---------------------------------------------------------------- naming a served model

def test_a_served_model_is_its_base_url_and_name():
    assert served_model("http://gpu-box:8000/v1#qwen2.5-7b") == ("http://gpu-box:8000/v1", "qwen2.5-7b")
    assert served_model("https://h/v1/#m#1") == ("https://h/v1/#m", "1")        # the name is after the last '#'
    for local in (None, "default", "gemma3-270m", "/models/x.gguf", "models/http.gguf"):
        assert served_model(local) is None
    with pytest.raises(ModelError, match="a served model is <base-url>#<model>"):
        served_model("http://gpu-box:8000/v1")
    assert served_ref("http://127.0.0.1:8000/v1/", "smollm2") == "http://127.0.0.1:8000/v1#smollm2"
    spec = backend_spec("http://127.0.0.1:8000/v1#smollm2", n_ctx=1024, seed=3)
    assert (spec.backend, spec.base_url, spec.model, spec.n_ctx, spec.seed) == (
        "openai", "http://127.0.0.1:8000/v1", "smollm2", 1024, 3)
    assert (backend_spec(None).backend, backend_spec(None).model) == ("llamacpp", "default")


def test_backend_openai_and_base_url_spell_the_same_reference():
    assert chosen_model(args(backend="openai", base_url="http://h:8000/v1"), "m") == "http://h:8000/v1#m"
    assert chosen_model(args(), "http://h:8000/v1#m") == "http://h:8000/v1#m"
    assert chosen_model(args(), "default") == "default"
    for bad, message in ((args(backend="openai"), "--backend openai needs --base-url"),
                         (args(base_url="http://h:8000/v1"), "--base-url needs --backend openai"),
                         (args(backend="openai", base_url="http://h:8000/v1"), "--model: a served model needs its name"),
                         (args(backend="openai", base_url="ftp://h/v1"), "base URL must look like")):
        with pytest.raises(BadInput, match=message):
            chosen_model(bad, "default" if "needs its name" in message else "m")


def test_a_served_model_whose_server_is_down_is_refused_before_anything_is_written(tiny_swept_db, capsys):
    down = f"http://127.0.0.1:{free_port()}/v1"
    before = tiny_swept_db.read_bytes()
    code = main(["--db", str(tiny_swept_db), "claims", "run", "s", "--backend", "openai", "--base-url", down,
                 "--model", "smollm2", "--decomposer", "llm", "--verifiers", "lexical"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "--model: " in err and "unreachable" in err and down in err
    assert tiny_swept_db.read_bytes() == before


MODEL_OPTIONS = ("--threads", "--n-gpu-layers", "--backend", "--base-url", "--concurrency", "--timeout")


def verb_options(*verb: str) -> dict[str, tuple]:
    """Each option of a verb (as its --help shows it): its choices, default and help."""
    parser = build_parser()
    for word in verb:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {s: (a.choices, a.default, a.help) for a in parser._actions for s in a.option_strings}


def test_every_model_choosing_verb_has_the_same_model_options(capsys):
    run = verb_options("run")
    for verb in (["claims", "run"], ["claims", "check"], ["meta", "run"], ["dedup", "run"], ["searchain", "run"],
                 ["retrieval", "judge"], ["questions", "generate"]):
        options = verb_options(*verb)
        assert {o: options.get(o) for o in MODEL_OPTIONS} == {o: run[o] for o in MODEL_OPTIONS}, verb
        with pytest.raises(SystemExit):
            main([*verb, "--help"])
        shown = capsys.readouterr().out
        assert all(o in shown for o in MODEL_OPTIONS), (verb, shown[:300])
    # A verb that continues a stored run keeps its model, and takes how a served one is called.
    for verb in (["resume"], ["dedup", "resume"], ["searchain", "resume"]):
        options = verb_options(*verb)
        assert {o: options.get(o) for o in ("--concurrency", "--timeout")} == {
            o: run[o] for o in ("--concurrency", "--timeout")}, verb


# ---------------------------------------------------------------- how a choice reads what a server sends

def test_a_choice_reads_the_first_tokens_log_probabilities_as_the_local_path_reads_logits():
    from workbench.models.openai_http import OpenAIBackend

    server = Canned(first_token(("Ent", -0.2), (" Ent", -1.0), ("N", -2.0), ("Neutral", -1.5), ("E", -3.0), ("x", -4.0)))
    backend = OpenAIBackend(server.url, "m")
    try:
        prompt = backend.render([{"role": "user", "content": "premise / hypothesis"}])
        choice = backend.choose(prompt, ("Entailment", "Neutral", "Contradiction"))
        # " Ent" begins no option; each option's best token decides; Contradiction has none listed.
        assert choice.index == 0 and choice.scores == (-0.2, -1.5, float("-inf")) and choice.prompt_tokens == 42
        p = choice.probabilities
        assert p[2] == 0.0 and p[0] == pytest.approx(1 / (1 + math.exp(-1.3)))
        sent = server.requests[0]
        assert (sent["max_tokens"], sent["temperature"], sent["logprobs"], sent["top_logprobs"]) == (1, 0.0, True, 20)
    finally:
        backend.close()
        server.close()


def test_without_log_probabilities_one_label_is_generated_under_a_grammar_of_the_options():
    from workbench.models.openai_http import OpenAIBackend

    plain = {"choices": [{"message": {"content": "Yes"}}], "usage": {"prompt_tokens": 7}}
    server = Canned(plain, {"choices": [{"message": {"content": "No"}}], "usage": {"prompt_tokens": 7}},
                    plain, {"choices": [{"message": {"content": "Maybe"}}]})
    backend = OpenAIBackend(server.url, "m")
    try:
        prompt = backend.render([{"role": "user", "content": "relevant?"}])
        choice = backend.choose(prompt, ("Yes", "No"))
        assert choice.index == 1 and choice.probabilities == (0.0, 1.0)
        assert server.requests[1]["grammar"] == 'root ::= "Yes" | "No"'
        assert server.requests[1]["guided_choice"] == ["Yes", "No"]
        with pytest.raises(ModelError, match="gave no log-probabilities, and its answer 'Maybe' is none of"):
            backend.choose(prompt, ("Yes", "No"))
    finally:
        backend.close()
        server.close()


def test_a_server_that_fails_mid_pass_ends_it_in_one_line_and_the_run_resumes_without_asking_twice(
        tiny_swept_db, tmp_path, capsys):
    """The judge's server answers twice, then 500: the pass ends with exit 1 and one line naming the URL and
    the status; what was judged is kept. With the server back, a rerun asks only what was never answered."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"sample_id": q, "cell_id": "k1-b64-linear", "prediction": text}) + "\n"
                               for q, text in (("q1", "William Dieterle. Kismet."), ("q2", "Dieterle."),
                                               ("q3", "French."))), encoding="utf-8")
    db = str(tiny_swept_db)
    assert main(["--db", db, "predictions", "import", str(answers), "s"]) == 0
    supported = {"choices": [{"message": {"content": '{"verdict": "supported"}'}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 30, "completion_tokens": 5}}
    failing = Canned(supported, supported, (500, {"error": {"message": "the GPU fell off the bus"}}))
    argv = ["--db", db, "claims", "run", "s", "--decomposer", "rule", "--verifiers", "llm_judge",
            "--backend", "openai", "--base-url", failing.url, "--model", "m", "--concurrency", "1", "--json"]
    capsys.readouterr()
    try:
        assert main(argv) == 1
    finally:
        failing.close()
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert "500" in report["fatal"] and failing.url in report["fatal"] and "GPU fell off" in report["fatal"]
    assert len(failing.requests) == 3 and report["model_calls"] == 2
    store = open_store(db)
    jobs = dict(store.conn.execute("SELECT status, count(*) FROM claim_jobs GROUP BY status").fetchall())
    store.close()
    assert jobs == {"done": 1, "error": 1, "pending": 1}
    back = Canned(*[supported] * 10, port=failing.port)
    try:
        assert main([*argv, "--retry-errors"]) == 0
    finally:
        back.close()
    again = json.loads(capsys.readouterr().out)
    # q1's two claims were answered and committed; q2's failed, q3's never started: only those two are asked.
    assert (again["jobs"], again["errors"], again["model_calls"], len(back.requests)) == (2, 0, 2, 2)
    store = open_store(db)
    assert store.conn.execute("SELECT count(*) FROM claim_jobs WHERE status != 'done'").fetchone()[0] == 0
    store.close()
