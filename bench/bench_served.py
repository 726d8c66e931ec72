"""Benchmark: claim verdicts through a served model against the same model in-process, and requests in flight.

Issue 38's figures, side by side in one run, on one GGUF (SmolLM2-135M) and the same threads:
``python -m llama_cpp.server`` is started here on a free loopback port with the same ``--n_threads``
and ``--n_threads_batch`` as the in-process side. The (claim, premise) pairs are ``bench_nli``'s
(MetaQA film facts from ``sample_data/dedup``), checked claim-major. Each round runs every side on
a fresh temporary store (nothing from the cache), the order rotating from round to round; model
loads, the server's start and one warm-up pair are not timed. Reported per side: seconds per
verdict (median over rounds); per pair of sides: the ratio per round and its median.

1. ``llm_judge`` (the chat roles' path: a JSON-schema generation per pair): served ÷ in-process.
   Target ≤ 1.25: the client's overhead (HTTP, JSON) on a request the server computes as the
   in-process side does, i.e. a server started with ``--logits_all false`` (it then computes the
   last position's logits only, as llama.cpp in-process does). The same through a server left at
   its default ``--logits_all true`` (it computes the logits of every prompt position, which
   ``top_logprobs`` need) is timed too.
2. ``nli`` (one choice per pair). Served, the product reads the first token's 20 ``top_logprobs``;
   llama-cpp-python's server computes them by a log-softmax over every prompt position's logits
   (it keeps them all: ``logits_all``) and a Python sort of the whole vocabulary, so the same
   request with one token generated under a grammar of the labels, no log-probabilities, is
   timed too (``nli-grammar``, on the ``--logits_all false`` server): what the server's
   computation costs beside the client's.
3. ``--concurrency``: the relevance judge's pass (``judge_relevance``, one choice per pair) over
   the same served model at concurrency 1 and 4. llama-cpp-python's server answers one request at
   a time, so 4 in flight gain nothing there; a stand-in server that answers every request after
   a fixed 150 ms whatever else it holds (what a batching server with free slots does) shows what
   the client gains where the server batches: the pass at 4 ÷ at 1.

Run: ``python bench/bench_served.py [--premises 4] [--claims 4] [--rounds 3]`` (about 4 minutes on
2 quiet cores). Prints one JSON line, then a summary. Exits 1 if the served labels differ.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_nli import make_pairs, warmup_pair  # noqa: E402  (the pair maker of the nli bench)

LABELS = ("Entailment", "Neutral", "Contradiction")
STAND_IN_SECONDS = 0.15


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, threads: int, log: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port",
           str(port), "--n_ctx", "2048", "--n_threads", str(threads), "--n_threads_batch", str(threads),
           "--model_alias", "smollm2", "--verbose", "False", *extra]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 90
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited: {log.read_text(errors='replace')[-1000:]}")
        try:
            with urllib.request.urlopen(base + "/models", timeout=2) as resp:
                if resp.status == 200:
                    return proc, base
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("llama_cpp.server did not answer within 90 s")
        time.sleep(0.3)


def verdict_side(side: str, model: str, pairs, warm, work: Path, threads: int) -> tuple[float, list[str]]:
    """Seconds of the side's verdicts on ``pairs`` (not the load or the warm-up) and its labels, on a fresh store."""
    from workbench.claims.verify import LLMJudgeVerifier, NLIVerifier, nli_messages
    from workbench.models.base import Sampling
    from workbench.models.cached import default_llm
    from workbench.store import open_store

    grammar = "root ::= " + " | ".join(f'"{label}"' for label in LABELS)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        store = open_store(Path(tmp) / "wb.db")
        llm = default_llm(store, model, n_threads=threads)
        try:
            if side.startswith("judge"):
                judge = LLMJudgeVerifier(llm)

                def check(claim, premise):
                    return judge.verify(claim, [premise])[0].label
            elif side == "nli-grammar":
                backend = llm.backend

                def check(claim, premise):
                    prompt = backend.render(nli_messages(premise, claim))
                    return backend.generate(prompt, Sampling(max_tokens=1, temperature=0.0), grammar=grammar).text
            else:
                nli = NLIVerifier(llm)

                def check(claim, premise):
                    return nli.check(premise, claim).label
            check(*warm)
            start = time.perf_counter()
            labels = [check(claim, premise) for claim, premise in pairs]
            return time.perf_counter() - start, labels
        finally:
            llm.close()
            store.close()


# -- requests in flight ------------------------------------------------------------------------------
def stand_in_server() -> tuple[http.server.ThreadingHTTPServer, str, dict]:
    """Answers every chat request "Yes" (as a first token with its log-probabilities) after STAND_IN_SECONDS,
    however many it holds; ``most`` is the most it held at once."""
    state = {"running": 0, "most": 0, "lock": threading.Lock()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def send(self, body: dict) -> None:
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):
            self.send({"data": [{"id": "stand-in"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            with state["lock"]:
                state["running"] += 1
                state["most"] = max(state["most"], state["running"])
            time.sleep(STAND_IN_SECONDS)
            with state["lock"]:
                state["running"] -= 1
            top = [{"token": "Yes", "logprob": -0.1}, {"token": "No", "logprob": -2.4}]
            self.send({"choices": [{"message": {"content": "Yes"},
                                    "logprobs": {"content": [{"token": "Yes", "logprob": -0.1, "top_logprobs": top}]}}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 1}})

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1", state


def judged_pass(template: Path, work: Path, model: str, concurrency: int) -> tuple[float, int]:
    """Seconds of the relevance judge's pass over the template's pairs (a fresh copy: nothing cached), and its pairs."""
    import shutil

    from workbench.models.cached import default_llm
    from workbench.retrieval.relevance import judge_relevance
    from workbench.store import open_store

    with tempfile.TemporaryDirectory(dir=work) as tmp:
        db = Path(tmp) / "wb.db"
        shutil.copyfile(template, db)
        store = open_store(db)
        llm = default_llm(store, model, concurrency=concurrency)
        try:
            start = time.perf_counter()
            report = judge_relevance(store, "hc", "bm25", k=3, model=model, llm=llm)
            seconds = time.perf_counter() - start
            assert report.errors == 0 and report.done == report.jobs, report
            return seconds, report.done
        finally:
            llm.close()
            store.close()


def pass_template(work: Path, questions: int) -> Path:
    """The HowToCook sample, its filename questions (the first ``questions``) and BM25's top 3: the pass's pairs."""
    from workbench.data.corpus import import_corpus
    from workbench.retrieval.evaluate import filename_questions
    from workbench.retrieval.runs import retrieve
    from workbench.store import open_store

    db = work / "template.db"
    store = open_store(db)
    try:
        import_corpus(store, Path(__file__).resolve().parents[1] / "sample_data" / "howtocook", "hc")
        filename_questions(store, "hc")
        store.conn.execute("DELETE FROM samples WHERE sid > ?", (questions,))
        retrieve(store, "hc", retriever="bm25", k=3)
    finally:
        store.close()
    return db


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--premises", type=int, default=4)
    ap.add_argument("--claims", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--questions", type=int, default=8, help="questions of the concurrency pass (3 pairs each)")
    ap.add_argument("--threads", type=int, help="threads of both sides (default: the usable cores)")
    args = ap.parse_args(argv)
    from workbench.cores import usable_cores
    from workbench.models.locate import default_model_path

    threads = args.threads or usable_cores()
    premises, pairs = make_pairs(args.premises, args.claims)
    warm = warmup_pair(premises, 60, 120)
    sides = ("judge", "judge-served", "judge-served-all", "nli", "nli-served", "nli-grammar")
    seconds: dict[str, list[float]] = {s: [] for s in sides}
    passes: dict[str, list[float]] = {k: [] for k in ("server-1", "server-4", "stand-in-1", "stand-in-4")}
    same, pairs_judged = True, 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ.setdefault("WORKBENCH_MODEL_SLOT", str(work / "model.lock"))
        template = pass_template(work, args.questions)
        # The server as it starts by default keeps every prompt position's logits (--logits_all true: what
        # top_logprobs need); a chat-only server need not (the in-process side computes the last one only).
        proc, base = start_server(default_model_path(), threads, work / "server.log")
        chat_proc, chat_base = start_server(default_model_path(), threads, work / "chat.log", "--logits_all", "false")
        served, chat = f"{base}#smollm2", f"{chat_base}#smollm2"
        model_of = {"judge-served": chat, "nli-grammar": chat, "judge-served-all": served, "nli-served": served}
        stand_in, stand_in_base, state = stand_in_server()
        try:
            for r in range(args.rounds):
                labels = {}
                for side in sides[r % len(sides):] + sides[:r % len(sides)]:
                    model = model_of.get(side, "default")
                    s, labels[side] = verdict_side(side, model, pairs, warm, work, threads)
                    seconds[side].append(s / len(pairs))
                same = (same and labels["judge"] == labels["judge-served"] == labels["judge-served-all"]
                        and labels["nli"] == labels["nli-served"])
                order = ("1", "4") if r % 2 == 0 else ("4", "1")
                for width in order:
                    for name, model in (("server", served), ("stand-in", f"{stand_in_base}#stand-in")):
                        s, pairs_judged = judged_pass(template, work, model, int(width))
                        passes[f"{name}-{width}"].append(s)
                print(f"round {r + 1}: " + ", ".join(f"{s} {seconds[s][-1] * 1000:.0f} ms" for s in sides)
                      + " per verdict; passes " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in passes.items()),
                      file=sys.stderr)
        finally:
            for p in (proc, chat_proc):
                p.terminate()
                p.wait(timeout=10)
            stand_in.shutdown()

    def ratio(a: dict, x: str, y: str) -> tuple[float, list[float]]:
        rounds = [p / q for p, q in zip(a[x], a[y])]
        return round(statistics.median(rounds), 3), [round(v, 3) for v in rounds]

    result = {"bench": "served", "pairs": len(pairs), "threads": threads, "rounds": args.rounds,
              "s_per_verdict": {s: round(statistics.median(v), 4) for s, v in seconds.items()},
              "judge_served_over_local": ratio(seconds, "judge-served", "judge"),
              "judge_served_logits_all_over_local": ratio(seconds, "judge-served-all", "judge"),
              "nli_served_over_local": ratio(seconds, "nli-served", "nli"),
              "nli_grammar_over_local": ratio(seconds, "nli-grammar", "nli"),
              "pass_pairs": pairs_judged,
              "pass_seconds": {k: round(statistics.median(v), 2) for k, v in passes.items()},
              "server_4_over_1": ratio(passes, "server-4", "server-1"),
              "stand_in_4_over_1": ratio(passes, "stand-in-4", "stand-in-1"),
              "stand_in_most_in_flight": state["most"], "same_labels": same, "loadavg": os.getloadavg()}
    print(json.dumps(result))
    print(f"\nper verdict, served ÷ in-process ({len(pairs)} pairs, {threads} threads, median of {args.rounds} rounds):"
          f"\n  llm_judge {result['judge_served_over_local'][0]:.3f} (target <= 1.25); on a server keeping every "
          f"position's logits (llama_cpp.server's default) {result['judge_served_logits_all_over_local'][0]:.3f}"
          f"\n  nli {result['nli_served_over_local'][0]:.3f}; the same request without log-probabilities "
          f"(one label under a grammar) {result['nli_grammar_over_local'][0]:.3f}"
          f"\nrelevance pass of {pairs_judged} pairs, --concurrency 4 ÷ 1: llama_cpp.server "
          f"{result['server_4_over_1'][0]:.3f}; a stand-in answering each request in {STAND_IN_SECONDS * 1000:.0f} ms "
          f"{result['stand_in_4_over_1'][0]:.3f} (held {state['most']} at once)\nsame labels: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
