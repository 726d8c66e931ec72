"""Benchmark: what the three-way NLI verifier (``nli``) costs per verdict, three ways side by side in one run.

The same (claim, premise) pairs are checked three ways with the default local GGUF (SmolLM2-135M):

a. ``generate``: the naive way, one generation per pair: ``CachedLLM.ask`` with the verifier's own
   messages (:func:`~workbench.claims.verify.nli_messages`) under a GBNF grammar that admits only
   the verifier's three options (``NLI_OPTIONS``), greedy, a few ``max_tokens``; pairs in claim-major
   order, so consecutive prompts share only the system prompt.
b. ``choose``: one forward pass per pair (``NLIVerifier.check`` → ``CachedLLM.choose``), the same
   claim-major order: the next-token logits of the three labels' first tokens, no generation,
   but no premise is reused either.
c. ``verify_pairs``: the product path (``NLIVerifier.verify_pairs``): choose, premise by premise, so
   each premise is evaluated once and every claim about it reuses its KV prefix.

Pairs: real English text from ``sample_data/dedup`` (MetaQA film facts written as chunks):
``--premises`` passages of ``--min-words``–``--max-words`` words, each a run of consecutive
chunks about a few films, and ``--claims`` short claims per passage, half of them facts the
passage states (from the chunks' own triples), half the same kind of fact with the object taken
from another passage (unsupported), seeded.

Each variant, in each of ``--rounds`` rounds (the order of the three rotates from round to
round), runs on a fresh temporary store (``open_store``), so no verdict comes from the cache,
with the model built by ``default_llm(store, "default")``. The model load and one warm-up call
of the variant's own kind (on a pair outside the set; it also compiles (a)'s grammar) are NOT
timed; only the checking is. Reported per variant: prompt tokens per verdict (the whole prompts)
and evaluated per verdict (what the KV cache did not already hold: ``Generation.eval_tokens``
for (a), ``CachedLLM.eval_tokens`` for (b) and (c)), (a)'s generated tokens, the tokens the model
decoded per verdict (evaluated + (a)'s generated tokens fed back, from llama.cpp's own counters,
``llama_perf_context``: n_p_eval, which must equal the evaluated count, + n_eval), verdicts per
second (wall; and per CPU-second of this process, which time-sharing with other processes
inflates less), and the ratios c/a and c/b (median over rounds: the machine is noisy, ratios
of runs side by side are what it leaves alone). (b) and (c) must give the same label on every
pair (the order must not change a verdict); the bench reports any difference with the two
passes' logits and exits 1.

Run: ``python bench/bench_nli.py [--premises 6] [--claims 8] [--rounds 2]`` (about 3-4 minutes
on 2 slow cores, ~100 s a round). Prints one JSON line, then a short summary. Nothing else
heavy should run meanwhile: each variant records the CPU time other processes used while it
was timed (``others_cpu_s_during``). A variant waits (untimed) while another process holds the
machine-wide model slot.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from bench_generation import CpuDuring, load_snapshot, load_str  # noqa: E402  (machine-load probes)

DEDUP = REPO / "sample_data" / "dedup"
VARIANTS = ("generate", "choose", "verify_pairs")
# How a triple reads as a claim; has_tags, IMDb ratings and votes make poor claims and are left out.
CLAIM_TEMPLATES = {
    "directed_by": "{h} was directed by {t}.",
    "written_by": "{h} was written by {t}.",
    "starred_actors": "{t} acted in {h}.",
    "has_genre": "{h} is a {t} film.",
    "release_year": "{h} was released in {t}.",
    "in_language": "{h} is in {t}.",
}


def label_grammar() -> tuple[str, dict[str, str]]:
    """(a)'s GBNF grammar, admitting exactly the verifier's options, and each option's label (E, N, C)."""
    from workbench.claims.verify import NLI_OPTIONS

    return "root ::= " + " | ".join(json.dumps(o) for o in NLI_OPTIONS), dict(zip(NLI_OPTIONS, "ENC"))


def log(msg: str) -> None:
    print(f"[bench_nli {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the pairs ------------------------------------------------------------------------------
def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def passages(min_words: int, max_words: int, data: Path = DEDUP) -> list[dict]:
    """Every passage of consecutive chunks of ``min_words``–``max_words`` words, cut at film boundaries.

    A film is a run of consecutive chunks whose triples have one head entity's gold cluster;
    a passage gathers whole films until it has at least ``min_words`` words. Each passage:
    ``{"text", "chunks", "triples"}`` (the triples its chunks state).
    """
    chunks = _read_jsonl(data / "chunks.jsonl")
    triples = _read_jsonl(data / "kb.jsonl")
    cluster = {r["entity"]: r["cluster"] for r in _read_jsonl(data / "gold_clusters.jsonl")}
    by_chunk: dict[str, list[tuple[str, str, str]]] = {}
    for t in triples:
        for cid in t["source_chunks"]:
            by_chunk.setdefault(cid, []).append(tuple(t["triple"]))
    films: list[list[dict]] = []
    last = None
    for c in chunks:
        heads = {cluster.get(h, h) for h, _, _ in by_chunk.get(c["chunk_id"], [])}
        head = min(heads) if heads else None
        if films and head == last:
            films[-1].append(c)
        else:
            films.append([c])
        last = head
    out, current = [], []
    for film in films:
        words = sum(len(c["text"].split()) for c in current + film)
        if current and words > max_words:
            current = []          # too long with this film: start again from it
        current = current + film
        words = sum(len(c["text"].split()) for c in current)
        if min_words <= words <= max_words:
            out.append({"text": " ".join(c["text"] for c in current), "chunks": [c["chunk_id"] for c in current],
                        "triples": [t for c in current for t in by_chunk.get(c["chunk_id"], [])]})
            current = []
        elif words > max_words:
            current = []
    return out


def make_pairs(n_premises: int, n_claims: int, *, seed: int = 0, min_words: int = 60,
               max_words: int = 120) -> tuple[list[dict], list[tuple[str, str]]]:
    """``n_premises`` passages with ``n_claims`` claims each, and the (claim, premise) pairs in claim-major order.

    Claim-major: claim 0 of every premise, then claim 1 of every premise, …; so no two
    consecutive pairs share a premise. Each premise dict also gets ``claims`` and ``supported``
    (whether each claim is a fact the passage states).
    """
    pool = passages(min_words, max_words)
    if len(pool) < n_premises + 1:
        raise SystemExit(f"only {len(pool)} passages of {min_words}-{max_words} words in {DEDUP}")
    rng = random.Random(seed)
    chosen = [dict(p) for p in rng.sample(pool, n_premises)]
    tails: dict[str, list[str]] = {}
    for p in pool:
        for _h, r, t in p["triples"]:
            if r in CLAIM_TEMPLATES and t not in tails.setdefault(r, []):
                tails[r].append(t)
    for p in chosen:
        facts = sorted({t for t in p["triples"] if t[1] in CLAIM_TEMPLATES})
        rng.shuffle(facts)
        stated = {t for t in p["triples"]}
        claims, supported = [], []
        n_true = min(len(facts), n_claims // 2)
        for h, r, t in facts[:n_true]:
            claims.append(CLAIM_TEMPLATES[r].format(h=h, t=t))
            supported.append(True)
        i = 0
        while len(claims) < n_claims:   # the same kind of fact about a film of the passage, with another object
            h, r, _t = facts[i % len(facts)]
            i += 1
            other = rng.choice(tails[r])
            text = CLAIM_TEMPLATES[r].format(h=h, t=other)
            if (h, r, other) in stated or text in claims:
                continue
            claims.append(text)
            supported.append(False)
        order = list(range(n_claims))
        rng.shuffle(order)
        p["claims"] = [claims[i] for i in order]
        p["supported"] = [supported[i] for i in order]
        p["words"] = len(p["text"].split())
    pairs = [(p["claims"][j], p["text"]) for j in range(n_claims) for p in chosen]
    return chosen, pairs


def warmup_pair(premises: list[dict], min_words: int, max_words: int) -> tuple[str, str]:
    """A pair outside the set, of the same shape (the first passage not chosen)."""
    texts = {p["text"] for p in premises}
    other = next(p for p in passages(min_words, max_words) if p["text"] not in texts)
    h, r, t = next(t for t in other["triples"] if t[1] in CLAIM_TEMPLATES)
    return CLAIM_TEMPLATES[r].format(h=h, t=t), other["text"]


# -- one variant ----------------------------------------------------------------------------
class Recorder:
    """Wraps the backend's ``generate`` and ``choose`` to keep what each call returned (tokens, logits)."""

    def __init__(self, backend):
        self.generations, self.choices = [], {}
        self._generate, self._choose = backend.generate, backend.choose
        backend.generate, backend.choose = self.generate, self.choose

    def generate(self, prompt, *args, **kwargs):
        g = self._generate(prompt, *args, **kwargs)
        self.generations.append(g)
        return g

    def choose(self, prompt, options):
        c = self._choose(prompt, options)
        self.choices[prompt.text] = c
        return c


def _perf(backend) -> dict:
    import llama_cpp

    p = llama_cpp.llama_perf_context(backend.llm._ctx.ctx)
    return {"n_p_eval": int(p.n_p_eval), "n_eval": int(p.n_eval)}


def run_variant(variant: str, pairs: list[tuple[str, str]], warm: tuple[str, str], work: Path,
                max_tokens: int) -> dict:
    """Check ``pairs`` (claim-major) one way on a fresh store; time the checking only."""
    import llama_cpp

    from workbench.claims.verify import NLIVerifier, nli_messages
    from workbench.models.cached import default_llm
    from workbench.store import open_store

    store = open_store(work / f"{variant}.db")
    llm = default_llm(store, "default", on_wait=lambda msg: log(f"waiting for the model slot: {msg}"))
    verifier = NLIVerifier(llm)
    grammar, label_of = label_grammar()

    def ask(claim: str, premise: str) -> str:
        call = llm.ask(nli_messages(premise, claim), max_tokens=max_tokens, grammar=grammar)
        return label_of.get(call.text.strip(), "?")

    t0 = time.perf_counter()
    backend = llm.backend                     # model load (+ the GGUF's sha256 into this fresh store): not timed
    load_s = time.perf_counter() - t0
    recorder = Recorder(backend)
    if variant == "generate":                 # warm-up of the variant's own kind: not timed
        ask(*warm)
    else:
        verifier.check(warm[1], warm[0])
    llama_cpp.llama_perf_context_reset(backend.llm._ctx.ctx)
    recorder.generations.clear()
    calls0, hits0, prompt0, eval0 = llm.model_calls, llm.cache_hits, llm.prompt_tokens, llm.eval_tokens
    snap = load_snapshot()
    with CpuDuring() as cpu:
        cpu0 = time.process_time()
        start = time.perf_counter()
        if variant == "generate":
            labels = [ask(claim, premise) for claim, premise in pairs]
        elif variant == "choose":
            labels = [verifier.check(premise, claim).label for claim, premise in pairs]
        else:
            labels = [v.label for v in verifier.verify_pairs(pairs)]
        seconds = time.perf_counter() - start
        cpu_s = time.process_time() - cpu0
    perf = _perf(backend)
    # llama.cpp reports max(1, n) for both counters; n_eval (single-token decodes) is (a)'s generated tokens
    # fed back, 1 for (b) and (c) where every evaluated suffix is longer than one token.
    fed_back = perf["n_eval"] if variant == "generate" else 0
    n = len(pairs)
    if variant == "generate":
        prompt_tokens = sum(g.prompt_tokens for g in recorder.generations)
        eval_tokens = sum(g.eval_tokens for g in recorder.generations)
        completion_tokens = sum(g.completion_tokens for g in recorder.generations)
        model_seconds = sum(g.seconds for g in recorder.generations)
    scores = None
    if variant != "generate":
        prompt_tokens, eval_tokens = llm.prompt_tokens - prompt0, llm.eval_tokens - eval0
        completion_tokens = 0
        choices = [recorder.choices[backend.render(nli_messages(premise, claim)).text] for claim, premise in pairs]
        model_seconds = sum(c.seconds for c in choices)
        scores = [list(c.scores) for c in choices]   # each option's first-token logit, pair by pair
    llama_decoded = perf["n_p_eval"] + fed_back
    out = {
        "variant": variant, "verdicts": n, "seconds": round(seconds, 3), "verdicts_per_s": round(n / seconds, 2),
        "cpu_s": round(cpu_s, 3), "verdicts_per_cpu_s": round(n / cpu_s, 3),
        "model_seconds": round(model_seconds, 3),
        "prompt_tokens": prompt_tokens, "eval_tokens": eval_tokens, "completion_tokens": completion_tokens,
        "prompt_tokens_per_verdict": round(prompt_tokens / n, 1), "eval_tokens_per_verdict": round(eval_tokens / n, 1),
        "completion_tokens_per_verdict": round(completion_tokens / n, 2),
        "llama_decoded_tokens": llama_decoded, "llama_n_p_eval": perf["n_p_eval"], "llama_n_eval": perf["n_eval"],
        # what the model really ran through per verdict: evaluated prompt tokens + generated tokens fed back
        "decoded_tokens_per_verdict": round(llama_decoded / n, 1),
        "model_calls": llm.model_calls - calls0, "cache_hits": llm.cache_hits - hits0,
        "load_s": round(load_s, 2), "others_cpu_s_during": cpu.others_cpu_s, "load": load_str(snap),
        "labels": "".join(labels),
    }
    llm.close()
    store.close()
    return {**out, "_scores": scores}


# -- main -----------------------------------------------------------------------------------
def _ratio(x: float, y: float) -> float | None:
    return round(x / y, 3) if y else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--premises", type=int, default=6, help="passages (premises)")
    ap.add_argument("--claims", type=int, default=8, help="claims per premise")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the three variants (order rotates)")
    ap.add_argument("--min-words", type=int, default=60)
    ap.add_argument("--max-words", type=int, default=120)
    ap.add_argument("--max-tokens", type=int, default=8, help="(a): max_tokens of a label generation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="put the stores in this directory and keep them")
    a = ap.parse_args(argv)

    premises, pairs = make_pairs(a.premises, a.claims, seed=a.seed, min_words=a.min_words, max_words=a.max_words)
    warm = warmup_pair(premises, a.min_words, a.max_words)
    log(f"{len(premises)} premises ({', '.join(str(p['words']) for p in premises)} words) x {a.claims} claims = "
        f"{len(pairs)} pairs; {a.rounds} rounds; initial {load_str(load_snapshot())}")
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench_nli_"))
    started = time.perf_counter()
    rounds: list[dict[str, dict]] = []
    try:
        for r in range(a.rounds):
            order = VARIANTS[r % 3:] + VARIANTS[:r % 3]
            res = {}
            for v in order:
                work = base / f"round{r + 1}"
                work.mkdir(parents=True, exist_ok=True)
                res[v] = run_variant(v, pairs, warm, work, a.max_tokens)
                log(f"round {r + 1} {v}: {res[v]['verdicts_per_s']} verdicts/s, "
                    f"{res[v]['eval_tokens_per_verdict']} evaluated / {res[v]['prompt_tokens_per_verdict']} prompt "
                    f"tokens per verdict, llama.cpp decoded {res[v]['llama_decoded_tokens']}; "
                    f"others' CPU {res[v]['others_cpu_s_during']} s")
            rounds.append(res)
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)

    def med(v: str, key: str) -> float:
        return statistics.median(r[v][key] for r in rounds)

    def speed(r: dict, v: str) -> float:
        return r[v]["verdicts_per_s"]

    per_round = [{"c_over_a_verdicts_per_s": _ratio(speed(r, "verify_pairs"), speed(r, "generate")),
                  "c_over_b_verdicts_per_s": _ratio(speed(r, "verify_pairs"), speed(r, "choose")),
                  "b_over_a_verdicts_per_s": _ratio(speed(r, "choose"), speed(r, "generate")),
                  "c_over_a_verdicts_per_cpu_s": _ratio(r["verify_pairs"]["verdicts_per_cpu_s"],
                                                        r["generate"]["verdicts_per_cpu_s"]),
                  "c_over_b_verdicts_per_cpu_s": _ratio(r["verify_pairs"]["verdicts_per_cpu_s"],
                                                        r["choose"]["verdicts_per_cpu_s"])}
                 for r in rounds]
    ratios = {k: round(statistics.median(x[k] for x in per_round), 3) for k in per_round[0]}
    last = rounds[-1]
    vp, gen = last["verify_pairs"], last["generate"]
    ratios.update({
        "c_over_a_eval_tokens_per_verdict": _ratio(vp["eval_tokens"], gen["eval_tokens"]),
        "c_over_b_eval_tokens_per_verdict": _ratio(vp["eval_tokens"], last["choose"]["eval_tokens"]),
        "c_over_a_decoded_tokens_per_verdict": _ratio(vp["llama_decoded_tokens"], gen["llama_decoded_tokens"]),
    })
    # The order must not change a verdict: (b) and (c) on every pair, in every round.
    mismatches = []
    for i, r in enumerate(rounds):
        b, c = r["choose"], r["verify_pairs"]
        for j, (lb, lc) in enumerate(zip(b["labels"], c["labels"])):
            if lb != lc:
                mismatches.append({"round": i + 1, "pair": j, "choose": lb, "verify_pairs": lc,
                                   "choose_logits": [round(s, 4) for s in b["_scores"][j]],
                                   "verify_pairs_logits": [round(s, 4) for s in c["_scores"][j]]})
    max_logit_diff = max(abs(x - y) for r in rounds
                         for sb, sc in zip(r["choose"]["_scores"], r["verify_pairs"]["_scores"])
                         for x, y in zip(sb, sc))
    stable = all(r[v]["labels"] == rounds[0][v]["labels"] for r in rounds for v in VARIANTS)
    gen_labels, vp_labels = last["generate"]["labels"], last["verify_pairs"]["labels"]
    supported = [p["supported"][j] for j in range(a.claims) for p in premises]
    label_counts = {v: {k: last[v]["labels"].count(k) for k in "ENC?"} for v in VARIANTS}
    entailed = {v: {"supported": sum(1 for s, lab in zip(supported, last[v]["labels"]) if s and lab == "E"),
                    "unsupported": sum(1 for s, lab in zip(supported, last[v]["labels"]) if not s and lab == "E")}
                for v in VARIANTS}
    counters_ok = all(r[v]["llama_n_p_eval"] == r[v]["eval_tokens"] for r in rounds for v in VARIANTS)
    nothing_cached = all(r[v]["cache_hits"] == 0 and r[v]["model_calls"] == len(pairs)
                         for r in rounds for v in VARIANTS)
    variants = {}
    for v in VARIANTS:
        row = {k: val for k, val in last[v].items() if not k.startswith("_") and k not in ("labels", "load")}
        row["verdicts_per_s_median"] = round(med(v, "verdicts_per_s"), 2)
        row["verdicts_per_s_rounds"] = [r[v]["verdicts_per_s"] for r in rounds]
        row["others_cpu_s_rounds"] = [r[v]["others_cpu_s_during"] for r in rounds]
        variants[v] = row
    result = {
        "bench": "nli", "model": "default", "premises": len(premises), "claims_per_premise": a.claims,
        "pairs": len(pairs), "rounds": a.rounds, "premise_words": [p["words"] for p in premises],
        "claim_words_mean": round(statistics.mean(len(c.split()) for c, _ in pairs), 1),
        "supported_claims": sum(supported), "generate_max_tokens": a.max_tokens, "generate_grammar": label_grammar()[0],
        "variants": variants, "ratios": ratios, "ratios_per_round": per_round,
        "ratio_definition": "verdicts/s: median over rounds of each round's ratio (wall time; per CPU-second of this "
                            "process too, which time-sharing with other processes inflates less); tokens: per "
                            "verdict, last round (deterministic, identical in every round)",
        "labels_b_eq_c": f"{len(pairs) * len(rounds) - len(mismatches)}/{len(pairs) * len(rounds)}",
        "b_c_mismatches": mismatches, "b_c_max_abs_logit_diff": round(max_logit_diff, 5),
        "labels_a_eq_c": f"{sum(x == y for x, y in zip(gen_labels, vp_labels))}/{len(pairs)}",
        "labels_same_every_round": stable, "label_counts": label_counts,
        "entailment_on_supported_unsupported": entailed,
        "llama_counters_match": counters_ok, "nothing_from_cache": nothing_cached,
        "labels": {v: last[v]["labels"] for v in VARIANTS},
        "load": f"first: {rounds[0]['generate']['load']}; last: {last['generate']['load']}",
        "bench_seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(result, ensure_ascii=False), flush=True)

    print()
    print(f"{len(pairs)} pairs ({len(premises)} premises x {a.claims} claims), {a.rounds} rounds, "
          f"median verdicts/s; tokens per verdict:")
    print(f"  {'variant':<28}{'verdicts/s':>11}{'prompt':>9}{'evaluated':>11}{'generated':>11}{'decoded':>9}")
    names = {"generate": "(a) generate, claim-major", "choose": "(b) choose, claim-major",
             "verify_pairs": "(c) verify_pairs (product)"}
    for v in VARIANTS:
        row = variants[v]
        print(f"  {names[v]:<28}{row['verdicts_per_s_median']:>11.1f}{row['prompt_tokens_per_verdict']:>9.1f}"
              f"{row['eval_tokens_per_verdict']:>11.1f}{row['completion_tokens_per_verdict']:>11.2f}"
              f"{row['decoded_tokens_per_verdict']:>9.1f}")
    print(f"  per CPU-second of this process: c/a {ratios['c_over_a_verdicts_per_cpu_s']}x, "
          f"c/b {ratios['c_over_b_verdicts_per_cpu_s']}x; others' CPU s while timed: "
          + ", ".join(f"{v} {variants[v]['others_cpu_s_rounds']}" for v in VARIANTS))
    print(f"  c/a: {ratios['c_over_a_verdicts_per_s']}x verdicts/s, "
          f"{ratios['c_over_a_eval_tokens_per_verdict']}x tokens evaluated; "
          f"c/b: {ratios['c_over_b_verdicts_per_s']}x verdicts/s, "
          f"{ratios['c_over_b_eval_tokens_per_verdict']}x tokens evaluated")
    print(f"  labels (b) = (c): {result['labels_b_eq_c']} (max |logit diff| {result['b_c_max_abs_logit_diff']}); "
          f"(a) = (c): {result['labels_a_eq_c']}; llama.cpp counters match: {counters_ok}; "
          f"nothing from cache: {nothing_cached}")
    if mismatches:
        print(f"  (b) and (c) disagree on {len(mismatches)} verdicts: the logits of a prompt evaluated whole and "
              "evaluated on a reused KV prefix differ by float noise, enough to flip a near tie:")
        for m in mismatches[:10]:
            print(f"    {m}")
    return 0 if not mismatches and nothing_cached else 1


if __name__ == "__main__":
    sys.exit(main())
