"""Benchmark: text embeddings (all-MiniLM-L6-v2 as GGUF in llama.cpp), the workbench's way against the bare one.

1. ``throughput``: :class:`~workbench.models.embedder.Embedder` against bare llama-cpp-python on
   the same GGUF (the default embedding model, converted by
   :func:`~workbench.models.bert_gguf.default_embedding_model`) and the same texts, one text
   per call on both sides:

   a. ``bare``: ``llama_cpp.Llama(model_path, embedding=True, n_ctx=W, n_batch=W, n_ubatch=W,
      verbose=False)`` (W = :func:`~workbench.models.bert_gguf.embedding_window`, 256), then
      ``.embed(text)`` per text, the list turned into a float32 array and normalized here;
   b. ``workbench``: ``Embedder.embed([text])`` per text (its own tokenization, the window cut,
      one ``llama_decode``, the unit vector).

   Both models are loaded once in this process (not timed; the Embedder first, so it holds the
   machine-wide model slot and no other workbench process runs a model meanwhile), and warmed
   up on texts outside the sets. Two sets: ``--short`` short sentences, half English (MetaQA
   questions, ``sample_data/metaqa``), half Chinese (sentences cut from the HowToCook chunks,
   ``sample_data/howtocook``); and ``--long`` HowToCook chunks of 150 tokens up to the window
   (about 200 tokens), none cut by the window (the share of [UNK] tokens is reported: MiniLM's
   vocabulary lacks most CJK characters). In each of ``--rounds`` rounds, each set is embedded
   ``--repeat`` times by each side, the sides taking turns every ``--block`` texts (A B B A A B
   …; A is bare in odd rounds, the workbench in even ones): this machine's speed drifts by a
   third over seconds (ratios of whole passes side by side scattered 0.92-1.02, block by block
   0.99-1.02), so only measurements close in time compare. Reported per side and set: texts/s and
   tokens/s (wall), the CPU seconds of this process, and the CPU time other processes used while
   it was timed (``others_cpu_s``). Before each round the bench waits up to ``--quiet-wait`` s
   for the CPUs to be idle, and a round in which other processes used more than
   ``--max-others`` CPU seconds is reported and measured again (up to ``--retries`` extra
   rounds). The ratio workbench ÷ bare texts/s is taken in each round, and its median over the
   undisturbed rounds is the figure. The two sides must give the same vectors: min cosine over
   every text (≥ 0.99999; they are the same computation, so it is 1.0 up to rounding).
   Target: ratio ≥ 0.95 on both sets.

2. ``corpus``: the time to embed all of HowToCook for dense retrieval (``--cold`` times, median):
   a fresh temporary store (``open_store``), ``import_corpus(store, "sample_data/howtocook",
   "hc")``, ``filename_questions(store, "hc")`` (one Chinese question per document), then
   ``retrieve(store, "hc", k=10, retriever="dense")`` cold (every chunk and question embedded
   through ``CachedEmbedder``; the seconds include hashing the GGUF into the fresh store and
   loading the model), reporting the texts embedded, seconds, texts/s, tokens and how many texts
   the window cut (the ``embeddings.truncated`` column); the same call again warm (nothing may be
   embedded: the vectors come from the store, the model is not loaded); then
   ``retrieve(..., retriever="hybrid")`` warm (vectors cached; its BM25 index is built then, the
   first time). The warm runs use the last cold run's store.

Run: ``python bench/bench_embedding.py [--rounds 5] [--repeat 4] [--cold 3] [--short 200]``
(about 4-5 minutes on 2 quiet cores). Converted models go to a temporary directory
(``WORKBENCH_MODEL_CACHE``), never to the user's data directory, unless ``--model-cache`` names
one. Prints one JSON line per benchmark, then a summary with the figures for the README's
Performance table. Exits 1 if the two sides' vectors differ or a warm run embedded anything.
Nothing else heavy should run meanwhile: a process spinning on both cores slowed llama.cpp
here by two orders of magnitude (ggml's worker threads wait for each other by spinning).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from bench_generation import CpuDuring, load_snapshot, load_str  # noqa: E402  (machine-load probes)

METAQA = REPO / "sample_data" / "metaqa"
HOWTOCOOK = REPO / "sample_data" / "howtocook"
SIDES = ("bare", "workbench")
SETS = ("short", "long")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_MARKUP = re.compile(r"^\s*(?:#+|[-*+>]|\d+[.)、])\s*|\*\*|`")
MIN_COSINE = 0.99999


def log(msg: str) -> None:
    print(f"[bench_embedding {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the texts ------------------------------------------------------------------------------
def howtocook_chunks() -> list[str]:
    """Every chunk of the HowToCook sample, as ``import_corpus`` cuts it (default ChunkConfig)."""
    from workbench.data.corpus import ChunkConfig, chunk_document, read_corpus

    config = ChunkConfig()
    docs = read_corpus(HOWTOCOOK, config)[0]
    return [c for d in docs for c in chunk_document(d.text, config)]


def chinese_sentences(chunks: list[str]) -> list[str]:
    """Short Chinese sentences (6-40 characters) cut from the chunks at 。！？； and line ends, markup dropped."""
    out: dict[str, None] = {}
    for chunk in chunks:
        for line in chunk.splitlines():
            for piece in re.split(r"[。！？；]", _MARKUP.sub("", line)):
                piece = piece.strip(" ，,：:")
                if 6 <= len(piece) <= 40 and len(_CJK.findall(piece)) >= 4:
                    out.setdefault(piece, None)
    return list(out)


def make_sets(count_tokens, window: int, n_short: int, n_long: int, seed: int) -> tuple[dict, list[str]]:
    """The two sets of texts (seeded) and a few texts outside them for the warm-up."""
    rng = random.Random(seed)
    with open(METAQA / "samples.jsonl", encoding="utf-8") as fh:
        questions = list(dict.fromkeys(json.loads(line)["question"] for line in fh if line.strip()))
    chunks = howtocook_chunks()
    sentences = chinese_sentences(chunks)
    n_en = n_short // 2
    if len(questions) < n_en + 2 or len(sentences) < n_short - n_en + 2:
        raise SystemExit(f"not enough short texts: {len(questions)} questions, {len(sentences)} sentences")
    rng.shuffle(questions)
    rng.shuffle(sentences)
    short = questions[:n_en] + sentences[:n_short - n_en]
    rng.shuffle(short)
    fitting = [c for c in chunks if 150 <= count_tokens(c) <= window]
    if len(fitting) < n_long + 2:
        raise SystemExit(f"only {len(fitting)} HowToCook chunks of 150-{window} tokens")
    rng.shuffle(fitting)
    warm = [questions[n_en], sentences[n_short - n_en], fitting[n_long], fitting[n_long + 1]]
    return {"short": short, "long": fitting[:n_long]}, warm


def wait_quiet(max_wait: float, busy_pct: float = 15.0) -> float:
    """Wait (up to ``max_wait`` s) until the CPUs are less than ``busy_pct`` busy over 0.5 s; the seconds waited.

    On 2 cores, another process computing makes llama.cpp's spinning worker threads thrash
    (a 3 ms embedding took 600 ms): a measurement then says nothing about the code.
    """
    start = time.perf_counter()
    said = False
    while True:
        snap = load_snapshot()
        waited = time.perf_counter() - start
        if snap["cpu_busy_pct"] < busy_pct or waited >= max_wait:
            if said:
                log(f"{'quiet' if snap['cpu_busy_pct'] < busy_pct else 'still busy, measuring anyway'} "
                    f"after {waited:.0f} s")
            return waited
        if not said:
            log(f"waiting up to {max_wait:.0f} s for the CPUs to be quiet: {load_str(snap)}")
            said = True
        time.sleep(2)


# -- 1. throughput ----------------------------------------------------------------------------
def _timed(fn, texts: list[str]) -> tuple[float, float, np.ndarray]:
    """``fn`` over ``texts``: wall and CPU seconds of this process, and the vectors."""
    cpu0 = time.process_time()
    start = time.perf_counter()
    vectors = fn(texts)
    return time.perf_counter() - start, time.process_time() - cpu0, vectors


def throughput(a: argparse.Namespace, model_path: Path) -> dict:
    import llama_cpp

    from workbench.models.bert_gguf import embedding_window
    from workbench.models.embedder import Embedder

    window = embedding_window(model_path)
    t0 = time.perf_counter()
    emb = Embedder(model_path, on_wait=lambda msg: log(f"waiting for the model slot: {msg}"))
    wb_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    bare = llama_cpp.Llama(model_path=str(model_path), embedding=True, n_ctx=window, n_batch=window,
                           n_ubatch=window, verbose=False)
    bare_load = time.perf_counter() - t0

    def count_tokens(text: str) -> int:
        """Tokens of the whole text ([CLS] and [SEP] included), before any cut by the window."""
        return len(emb.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    sets, warm = make_sets(count_tokens, window, a.short, a.long, a.seed)
    tokens = {s: [count_tokens(t) for t in texts] for s, texts in sets.items()}
    # MiniLM's WordPiece vocabulary (bert-base-uncased's) lacks most CJK characters: [UNK] for each.
    unk = emb.llm.tokenize(b"[UNK]", add_bos=False, special=True)
    unk_share = {s: sum(tok == unk[0] for t in texts for tok in emb.tokens(t)[0]) / sum(tokens[s])
                 for s, texts in sets.items()} if len(unk) == 1 else {}
    same_tokens = all(bare.tokenize(t.encode("utf-8")) == emb.tokens(t)[0] for texts in sets.values() for t in texts)

    def run_bare(texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            v = np.asarray(bare.embed(t), dtype=np.float32)
            n = float(np.linalg.norm(v))
            out.append(v / n if n else v)
        return np.stack(out)

    def run_wb(texts: list[str]) -> np.ndarray:
        return np.stack([emb.embed([t])[0] for t in texts])

    run = {"bare": run_bare, "workbench": run_wb}
    for side in SIDES:                      # warm-up, not timed
        run[side](warm)
    log(f"throughput: {len(sets['short'])} short texts ({statistics.mean(tokens['short']):.1f} tokens), "
        f"{len(sets['long'])} chunks ({statistics.mean(tokens['long']):.1f} tokens), {a.rounds} rounds x "
        f"{a.repeat} passes; models loaded in {wb_load:.2f} s (workbench) / {bare_load:.2f} s (bare)")
    rounds: list[dict] = []                 # the rounds kept: no other process disturbed them
    disturbed: list[dict] = []
    min_cos, max_diff = 1.0, 0.0
    r = -1
    while len(rounds) < a.rounds and r + 1 < a.rounds + a.retries:
        r += 1
        wait_quiet(a.quiet_wait)
        order = SIDES if r % 2 == 0 else SIDES[::-1]
        row: dict = {s: {} for s in SETS}
        load = load_str(load_snapshot())
        for s in SETS:
            blocks = [sets[s][i:i + a.block] for i in range(0, len(sets[s]), a.block)]
            total = {side: {"seconds": 0.0, "cpu_s": 0.0} for side in SIDES}
            with CpuDuring() as cpu:
                for p in range(a.repeat):
                    parts: dict[str, list[np.ndarray]] = {side: [] for side in SIDES}
                    for i, block in enumerate(blocks):      # block by block: A B B A A B …
                        for side in (order if (p * len(blocks) + i) % 2 == 0 else order[::-1]):
                            seconds, cpu_s, vecs = _timed(run[side], block)
                            total[side]["seconds"] += seconds
                            total[side]["cpu_s"] += cpu_s
                            parts[side].append(vecs)
            vectors = {side: np.concatenate(parts[side]) for side in SIDES}
            n_texts, n_tok = len(sets[s]) * a.repeat, sum(tokens[s]) * a.repeat
            for side, m in total.items():
                m.update(texts_per_s=n_texts / m["seconds"], tokens_per_s=n_tok / m["seconds"],
                         texts_per_cpu_s=n_texts / m["cpu_s"])
                row[s][side] = m
            row[s].update(others_cpu_s=cpu.others_cpu_s, steal_pct=cpu.steal, load=load)
            cos = np.sum(vectors["bare"] * vectors["workbench"], axis=1)
            min_cos = min(min_cos, float(cos.min()))
            max_diff = max(max_diff, float(np.abs(vectors["bare"] - vectors["workbench"]).max()))
            row[s]["ratio"] = row[s]["workbench"]["texts_per_s"] / row[s]["bare"]["texts_per_s"]
            row[s]["ratio_cpu"] = row[s]["workbench"]["texts_per_cpu_s"] / row[s]["bare"]["texts_per_cpu_s"]
        row["others_cpu_s"] = round(sum(row[s]["others_cpu_s"] for s in SETS), 2)
        ok = row["others_cpu_s"] <= a.max_others
        (rounds if ok else disturbed).append(row)
        log(f"round {r + 1} ({'/'.join(order)} first): " + "; ".join(
            f"{s} {row[s]['workbench']['texts_per_s']:.1f} vs {row[s]['bare']['texts_per_s']:.1f} texts/s "
            f"= {row[s]['ratio']:.3f}" for s in SETS)
            + f"; others' CPU {row['others_cpu_s']} s"
            + ("" if ok else f" > {a.max_others}: disturbed, measured again"))
    clean = len(rounds) >= min(3, a.rounds)
    if not clean:                           # too few undisturbed rounds: every round counts, and the result says so
        rounds = rounds + disturbed
    emb.close()
    bare.close()

    def med(s: str, side: str, key: str) -> float:
        return statistics.median(r[s][side][key] for r in rounds)

    per_set = {}
    for s in SETS:
        per_set[s] = {
            "texts": len(sets[s]), "tokens_mean": round(statistics.mean(tokens[s]), 1),
            "tokens_min_max": [min(tokens[s]), max(tokens[s])], "unk_share": round(unk_share.get(s, -1), 3),
            "ratio_median": round(statistics.median(r[s]["ratio"] for r in rounds), 3),
            "ratio_rounds": [round(r[s]["ratio"], 3) for r in rounds],
            "ratio_per_cpu_s_median": round(statistics.median(r[s]["ratio_cpu"] for r in rounds), 3),
            **{side: {"texts_per_s_median": round(med(s, side, "texts_per_s"), 1),
                      "tokens_per_s_median": round(med(s, side, "tokens_per_s"), 0),
                      "ms_per_text_median": round(1000 / med(s, side, "texts_per_s"), 2),
                      "texts_per_s_rounds": [round(r[s][side]["texts_per_s"], 1) for r in rounds]}
               for side in SIDES},
            "others_cpu_s_rounds": [r[s]["others_cpu_s"] for r in rounds],
            "steal_pct_rounds": [r[s]["steal_pct"] for r in rounds],
        }
    ratio = min(per_set[s]["ratio_median"] for s in SETS)
    return {"bench": "embedding_throughput", "model": model_path.name, "window": window, "rounds": len(rounds),
            "repeat": a.repeat, "disturbed_rounds": len(disturbed), "disturbed_ratios": [
                {s: round(d[s]["ratio"], 3) for s in SETS} | {"others_cpu_s": d["others_cpu_s"]} for d in disturbed],
            "max_others_cpu_s": a.max_others, "only_undisturbed_rounds": clean, "sets": per_set,
            "ratio_min_over_sets": ratio, "target": ">= 0.95",
            "pass": ratio >= 0.95, "same_tokens": same_tokens, "min_cosine": round(min_cos, 7),
            "max_abs_diff": max_diff, "same_vectors": min_cos >= MIN_COSINE,
            "load_s": {"workbench_with_slot_wait": round(wb_load, 2), "bare": round(bare_load, 2)},
            "load": f"first: {rounds[0]['short']['load']}; last: {rounds[-1]['long']['load']}"}


# -- 2. corpus --------------------------------------------------------------------------------
def corpus(work: Path, quiet_wait: float, cold_runs: int) -> dict:
    from workbench.data.corpus import import_corpus
    from workbench.retrieval.evaluate import filename_questions
    from workbench.retrieval.runs import retrieve
    from workbench.store import open_store

    def fresh(i: int):
        store = open_store(work / f"hc{i}.db")
        report = import_corpus(store, HOWTOCOOK, "hc")
        return store, report, filename_questions(store, "hc")

    def timed(store, retriever: str) -> dict:
        wait_quiet(quiet_wait)
        snap = load_snapshot()
        with CpuDuring() as cpu:
            start = time.perf_counter()
            rep = retrieve(store, "hc", k=10, retriever=retriever,
                           on_wait=lambda msg: log(f"waiting for the model slot: {msg}"))
            seconds = time.perf_counter() - start
        return {"retriever": retriever, "seconds": round(seconds, 2), "embedded": rep.embedded, "cached": rep.cached,
                "index_built": rep.index_built, "unchanged": rep.unchanged, "others_cpu_s": cpu.others_cpu_s,
                "load": load_str(snap)}

    colds = []
    for i in range(cold_runs):                  # each in a fresh store: nothing cached, the GGUF hashed again
        store, report, questions = fresh(i)
        cold = timed(store, "dense")
        n, truncated, tokens = store.conn.execute(
            "SELECT count(*), coalesce(sum(truncated), 0), coalesce(sum(tokens), 0) FROM embeddings").fetchone()
        cold.update(texts_per_s=round(cold["embedded"] / cold["seconds"], 1), stored_vectors=n, truncated=truncated,
                    tokens=tokens, tokens_per_s=round(tokens / cold["seconds"], 0))
        log(f"cold dense {i + 1}/{cold_runs}: {cold['embedded']} texts in {cold['seconds']} s "
            f"({cold['texts_per_s']} texts/s), {truncated} cut by the window (others' CPU {cold['others_cpu_s']} s)")
        colds.append(cold)
        if i < cold_runs - 1:
            store.close()
    warm = timed(store, "dense")
    log(f"warm dense: {warm['seconds']} s, {warm['embedded']} embedded")
    hybrid = timed(store, "hybrid")
    log(f"warm hybrid: {hybrid['seconds']} s, {hybrid['embedded']} embedded "
        f"(BM25 index built: {hybrid['index_built']})")
    store.close()
    median = sorted(colds, key=lambda c: c["seconds"])[len(colds) // 2]
    ok = warm["embedded"] == 0 and hybrid["embedded"] == 0
    return {"bench": "embedding_corpus", "documents": report.documents, "chunks": report.chunks,
            "questions": questions, "cold_dense_median": median, "cold_seconds_runs": [c["seconds"] for c in colds],
            "cold_others_cpu_s_runs": [c["others_cpu_s"] for c in colds], "warm_dense": warm,
            "warm_hybrid": hybrid, "warm_embedded_nothing": ok}


# -- main -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the throughput comparison (>= 3)")
    ap.add_argument("--repeat", type=int, default=4, help="passes over a set per side and round")
    ap.add_argument("--block", type=int, default=10, help="texts a side embeds before the other side's turn")
    ap.add_argument("--short", type=int, default=200, help="short sentences (half English, half Chinese)")
    ap.add_argument("--long", type=int, default=40, help="chunk-length texts (150 tokens up to the window)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="throughput,corpus", help="comma-separated: throughput, corpus")
    ap.add_argument("--max-others", type=float, default=1.0,
                    help="a round in which other processes used more CPU seconds than this is measured again")
    ap.add_argument("--retries", type=int, default=5, help="extra rounds allowed for disturbed ones")
    ap.add_argument("--cold", type=int, default=3, help="cold dense runs over HowToCook, each in a fresh store")
    ap.add_argument("--quiet-wait", type=float, default=180,
                    help="before each round and each corpus step, wait up to this many seconds for idle CPUs")
    ap.add_argument("--model-cache", help="convert the model into / take it from this directory (default: a "
                                          "temporary one)")
    a = ap.parse_args(argv)
    only = {x.strip() for x in a.only.split(",") if x.strip()}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_embedding-") as tmp:
        os.environ["WORKBENCH_MODEL_CACHE"] = a.model_cache or str(Path(tmp) / "models")
        from workbench.models.bert_gguf import default_embedding_model

        t0 = time.perf_counter()
        model_path = default_embedding_model()
        log(f"model {model_path.name} ready in {time.perf_counter() - t0:.1f} s (converted unless cached)")
        results = {}
        if "throughput" in only:
            results["throughput"] = throughput(a, model_path)
            print(json.dumps(results["throughput"], ensure_ascii=False), flush=True)
        if "corpus" in only:
            work = Path(tmp) / "corpus"
            work.mkdir()
            results["corpus"] = corpus(work, a.quiet_wait, a.cold)
            print(json.dumps(results["corpus"], ensure_ascii=False), flush=True)
    log(f"done in {time.perf_counter() - started:.0f} s")

    print()
    print("Summary (README Performance table):")
    ok = True
    if "throughput" in results:
        t = results["throughput"]
        for s, label in (("short", "short sentences (en + zh)"), ("long", "chunks (~200 tokens)")):
            x = t["sets"][s]
            print(f"  embedding throughput, workbench ÷ bare llama-cpp-python, {x['texts']} {label}, "
                  f"{x['tokens_mean']:.0f} tokens mean ({x['unk_share']:.0%} [UNK]), "
                  f"median of {t['rounds']} interleaved rounds: "
                  f"{x['ratio_median']:.3f} ({x['workbench']['texts_per_s_median']:.1f} vs "
                  f"{x['bare']['texts_per_s_median']:.1f} texts/s; {x['workbench']['tokens_per_s_median']:.0f} vs "
                  f"{x['bare']['tokens_per_s_median']:.0f} tokens/s; rounds {x['ratio_rounds']}; "
                  f"per CPU-second {x['ratio_per_cpu_s_median']:.3f})")
        print(f"    {t['disturbed_rounds']} disturbed rounds measured again (others' CPU > {t['max_others_cpu_s']} s; "
              f"their ratios {t['disturbed_ratios']})" + ("" if t["only_undisturbed_rounds"] else
                                                           "; too few quiet rounds: the figures include them"))
        print(f"    target >= 0.95: {'pass' if t['pass'] else 'MISS'}; same tokens: {t['same_tokens']}; "
              f"vectors min cosine {t['min_cosine']:.7f}, max |diff| {t['max_abs_diff']:.2e}; others' CPU s while "
              "timed: " + ", ".join(f"{s} {t['sets'][s]['others_cpu_s_rounds']}" for s in SETS))
        ok = ok and t["same_vectors"]
    if "corpus" in results:
        c = results["corpus"]
        cold, warm, hybrid = c["cold_dense_median"], c["warm_dense"], c["warm_hybrid"]
        print(f"  embed all of HowToCook, cold (dense top-10; {c['chunks']} chunks + {c['questions']} questions, "
              f"{cold['embedded']} texts, {cold['tokens']} tokens, {cold['truncated']} cut by the window; model load "
              f"included), median of {len(c['cold_seconds_runs'])} fresh stores: {cold['seconds']:.2f} s, "
              f"{cold['texts_per_s']:.1f} texts/s, {cold['tokens_per_s']:.0f} tokens/s "
              f"(runs {c['cold_seconds_runs']} s; "
              f"others' CPU {c['cold_others_cpu_s_runs']} s)")
        print(f"  the same warm (vectors from the store, model not loaded): {warm['seconds']:.2f} s, "
              f"{warm['embedded']} embedded; hybrid warm (BM25 index built: {hybrid['index_built']}): "
              f"{hybrid['seconds']:.2f} s, {hybrid['embedded']} embedded")
        ok = ok and c["warm_embedded_nothing"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
