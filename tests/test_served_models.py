"""A model named ``<base-url>#<name>`` is called over an OpenAI-compatible API wherever a verb takes a model.

``--backend openai --base-url URL --model NAME`` is another way to write ``URL#NAME``, the same
on every model-calling verb. The reference is the model's identity in the cache and in a config's
key, so a served model and a local one never share an answer. A real ``llama_cpp.server`` serving
SmolLM2 checks that a claim run through it stores the same claims and verdicts as the same model
in-process (both sides run on this CPU, so they compute the same; what either writes is not
asserted), and that a second run asks the server nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os

import pytest

from llama_server import free_port, serve
from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.cli import main
from workbench.cli.common import chosen_model
from workbench.errors import BadInput
from workbench.models.base import ModelError
from workbench.models.llamacpp import PERTURB_ENV
from workbench.models.locate import default_model_path
from workbench.models.registry import backend_spec, served_model, served_ref
from workbench.runs.executor import execute
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run


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


def test_every_model_choosing_verb_has_the_same_model_options(capsys):
    for verb in (["run"], ["claims", "run"], ["claims", "check"], ["meta", "run"], ["dedup", "run"],
                 ["searchain", "run"], ["retrieval", "judge"], ["questions", "generate"]):
        with pytest.raises(SystemExit):
            main([*verb, "--help"])
        out = capsys.readouterr().out
        assert "--backend {llamacpp,openai}" in out and "--base-url BASE_URL" in out, verb


# ---------------------------------------------------------------- through a real server

@pytest.fixture(scope="module")
def served(tmp_path_factory) -> str:
    """SmolLM2 served by ``llama_cpp.server`` as ``smollm2``: its reference ``URL#smollm2``."""
    try:
        model = default_model_path()
    except ModelError as exc:
        pytest.skip(str(exc))
    with serve(model, tmp_path_factory.mktemp("llama_server"), alias="smollm2") as base:
        yield f"{base}#smollm2"


#: The server computes the model's own logits; `just test-perturbed` perturbs only the in-process path's.
same_logits = pytest.mark.skipif(bool(os.environ.get(PERTURB_ENV)), reason=(
    "the in-process logits are perturbed (just test-perturbed) and the server's are not: the two paths "
    "compute the same only unperturbed"))


def _verdicts(store, claim_run: int) -> tuple[list, list]:
    claims = store.conn.execute("SELECT cell_id, sid, idx, text, source, supported FROM claims WHERE claim_run_id = ?"
                                " ORDER BY cell_id, sid, idx", (claim_run,)).fetchall()
    verdicts = store.conn.execute("SELECT cell_id, sid, idx, uid, verifier, supported FROM claim_verdicts"
                                  " WHERE claim_run_id = ? ORDER BY cell_id, sid, idx, uid, verifier",
                                  (claim_run,)).fetchall()
    return claims, verdicts


@pytest.mark.real_model
@same_logits
def test_a_claim_run_through_a_served_model_stores_what_the_same_model_in_process_stores(served, tiny_store):
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(256,), formats=("score",)), name="gen",
               generation=GenerationConfig(max_tokens=16, n_ctx=1024, answer_format="text").as_dict())
    run = get_run(tiny_store, "gen")
    assert execute(tiny_store, run).errors == 0
    local = run_claims(tiny_store, run, ClaimsConfig(decomposer="hybrid", verifiers=("lexical", "llm_judge")))
    remote = run_claims(tiny_store, run, ClaimsConfig(decomposer="hybrid", verifiers=("lexical", "llm_judge"),
                                                      model=served))
    assert remote.claim_run != local.claim_run and (remote.done, remote.errors) == (3, 0)
    claims, verdicts = _verdicts(tiny_store, remote.claim_run)
    assert (claims, verdicts) == _verdicts(tiny_store, local.claim_run) and verdicts
    served_calls = tiny_store.conn.execute("SELECT count(*) FROM generations WHERE model_id = ?",
                                           (served,)).fetchone()[0]
    assert served_calls == remote.model_calls > 0
    again = run_claims(tiny_store, run, ClaimsConfig(decomposer="hybrid", verifiers=("lexical", "llm_judge"),
                                                     model=served))
    assert (again.jobs, again.model_calls) == (0, 0)


@pytest.mark.real_model
@same_logits
def test_nli_and_relevance_choices_through_a_served_model_equal_the_in_process_ones(served, store):
    """One request per pair, no free generation: the label and its probability are the local path's."""
    from workbench.claims.verify import NLI_OPTIONS, nli_messages
    from workbench.models.cached import default_llm
    from workbench.retrieval.relevance import OPTIONS, relevance_messages

    pairs = [("Kismet was directed by William Dieterle.", "William Dieterle directed Kismet."),
             ("Kismet was released in 1944.", "Kismet is a film from 1950."),
             ("红烧肉要先焯水。", "The recipe says nothing about the oven.")]
    local, remote = default_llm(store), default_llm(store, served)
    try:
        for premise, claim in pairs:
            for messages, options in ((nli_messages(premise, claim), NLI_OPTIONS),
                                      (relevance_messages(claim, premise), OPTIONS)):
                here, there = local.choose(messages, options), remote.choose(messages, options)
                assert here.text == there.text and not there.cached
                assert sum(there.probabilities) == pytest.approx(1.0)
                if all(p > 0 for p in there.probabilities):       # every option among the 20 tokens listed
                    assert there.probabilities == pytest.approx(here.probabilities, abs=1e-3)
                else:                                              # an unlisted option's share goes to the others
                    chosen = options.index(there.text)
                    assert there.probabilities[chosen] >= here.probabilities[chosen] - 1e-3
        calls = remote.model_calls
        again = remote.choose(nli_messages(*pairs[0]), NLI_OPTIONS)
        assert again.cached and remote.model_calls == calls      # the cache answers: no request
    finally:
        local.close()
        remote.close()


# ---------------------------------------------------------------- how a choice reads what a server sends

class Canned:
    """A loopback server answering each POST with the next canned ``(status, JSON body)`` (a dict alone is a 200),
    ``GET /models`` with one model, and recording the requests. ``port`` 0 picks a free one."""

    def __init__(self, *bodies, port: int = 0):
        import http.server
        import json
        import threading

        self.bodies, self.requests = list(bodies), []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self, status: int, body) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                self.answer(200, {"data": [{"id": "m"}]})

            def do_POST(self):
                outer.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                reply = outer.bodies.pop(0)
                self.answer(*(reply if isinstance(reply, tuple) else (200, reply)))

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _top(*tokens: tuple[str, float]) -> dict:
    first = {"token": tokens[0][0], "logprob": tokens[0][1],
             "top_logprobs": [{"token": t, "logprob": lp} for t, lp in tokens]}
    return {"choices": [{"message": {"content": tokens[0][0]}, "logprobs": {"content": [first]}}],
            "usage": {"prompt_tokens": 42, "completion_tokens": 1}}


def test_a_choice_reads_the_first_tokens_log_probabilities_as_the_local_path_reads_logits():
    from workbench.models.openai_http import OpenAIBackend

    server = Canned(_top(("Ent", -0.2), (" Ent", -1.0), ("N", -2.0), ("Neutral", -1.5), ("E", -3.0), ("x", -4.0)))
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


# ---------------------------------------------------------------- embeddings over HTTP

@pytest.fixture(scope="module")
def served_e5(tmp_path_factory, model_cache) -> str:
    """multilingual-e5-small (the converted GGUF) served for /v1/embeddings under its own name."""
    from workbench.models.embedders import resolve_embedding_model

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_MODEL_CACHE", str(model_cache))
        try:
            path = resolve_embedding_model(None)
        except ModelError as exc:
            pytest.skip(str(exc))
    with serve(path, tmp_path_factory.mktemp("llama_server"), alias="multilingual-e5-small", n_ctx=512,
               extra=("--embedding", "true", "--n_batch", "512", "--n_ubatch", "512")) as base:
        yield f"{base}#multilingual-e5-small"


@pytest.mark.real_model
@same_logits
def test_vectors_from_a_served_embedding_model_equal_the_in_process_ones_and_are_kept_by_reference(served_e5, store):
    from workbench.models.embedder import CachedEmbedder
    from workbench.models.embedders import E5

    texts = ["how do I braise pork belly", "红烧肉要先焯水，再用冰糖炒出糖色。", "Kismet | directed_by | William Dieterle"]
    local, remote = CachedEmbedder(store), CachedEmbedder(store, served_e5)
    try:
        assert remote.spec is E5 and remote.model_id == served_e5          # its prefixes by its name
        for role in ("query", "passage"):
            here, there = local.vectors(texts, role=role), remote.vectors(texts, role=role)
            assert min(float(a @ b) for a, b in zip(here, there)) >= 0.9999
        assert remote.embedded == 6
        remote.vectors(texts, role="query")
        assert remote.embedded == 6 and remote.cached == 3                   # a second call asks nothing
        kept = dict(store.conn.execute("SELECT model, count(*) FROM embeddings GROUP BY model").fetchall())
        assert kept == {local.model_id: 6, served_e5: 6}
    finally:
        local.close()
        remote.close()


@pytest.mark.real_model
@same_logits
def test_dense_retrieval_through_a_served_embedding_model(served_e5, tiny_store, capsys):
    db = str(tiny_store.path)
    tiny_store.close()
    assert main(["--db", db, "retrieve", "tiny", "--retriever", "dense", "--k", "3", "--name", "served",
                 "--embedding-model", served_e5]) == 0
    out = capsys.readouterr().out
    assert "retriever served (dense)" in out and f"({served_e5})" in out and "0 from the cache" in out
    assert main(["--db", db, "retrieve", "tiny", "--retriever", "dense", "--k", "3", "--name", "served",
                 "--embedding-model", served_e5]) == 0
    assert "embedded 0 texts" in capsys.readouterr().out


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
            "--backend", "openai", "--base-url", failing.url, "--model", "m", "--json"]
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
