"""Reading a GGUF file's header (metadata and tensor shapes) without loading the model.

The format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): the magic
``GGUF``, a uint32 version, uint64 tensor and key/value counts, the typed key/values,
then one info record per tensor (name, shape, type, offset), then the weights. Only the
part before the weights is read, through ``mmap``: a 100 MB file costs a few
milliseconds, nothing is allocated for the weights, and no model slot is needed.

Long arrays (the vocabulary, the merges) are skipped and only their length is kept: a
run manifest needs the vocabulary's size, not its 49,152 strings.
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
# Arrays up to this many elements are kept whole (e.g. a rope section list); longer ones
# (tokens, merges, token types) only by length.
SMALL_ARRAY = 64

# ggml.h ``enum ggml_type``: a tensor's storage type.
GGML_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K", 11: "Q3_K",
    12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
    20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
    29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4", 40: "NVFP4", 41: "Q1_0", 42: "Q2_0",
}
# llama.h ``enum llama_ftype``: the file's quantisation as a whole (``general.file_type``).
LLAMA_FTYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}

# GGUF value types: id → struct format of a scalar (8 = string, 9 = array are read apart).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands (the message names the path and the offset)."""


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF file says about itself before its weights."""

    version: int
    metadata: dict[str, Any]                                       # scalars, strings and short arrays
    array_lengths: dict[str, int] = field(default_factory=dict)    # the long arrays, by length only
    tensor_count: int = 0
    parameters: int = 0                                            # elements over all tensors
    tensor_types: dict[str, int] = field(default_factory=dict)     # storage type → tensors of that type


class _Cursor:
    """Little- or big-endian reads from a buffer, every one bounds-checked."""

    def __init__(self, buf, path: Path, order: str):
        self.buf, self.path, self.order, self.pos = buf, path, order, 0

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise GGUFError(f"{self.path}: truncated GGUF header (at byte {self.pos:,})")
        value = struct.unpack_from(self.order + fmt, self.buf, self.pos)[0]
        self.pos += size
        return value

    def string(self) -> str:
        n = self.take("Q")
        if self.pos + n > len(self.buf):
            raise GGUFError(f"{self.path}: a string of {n:,} bytes runs past the end of the file "
                            f"(at byte {self.pos:,})")
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        # The vocabulary: ~50k length-prefixed strings. Only the lengths are read.
        unpack, width, end = struct.Struct(self.order + "Q").unpack_from, 8, len(self.buf)
        pos = self.pos
        for _ in range(count):
            if pos + width > end:
                raise GGUFError(f"{self.path}: truncated GGUF header (at byte {pos:,})")
            pos += width + unpack(self.buf, pos)[0]
        if pos > end:
            raise GGUFError(f"{self.path}: truncated GGUF header (at byte {end:,})")
        self.pos = pos

    def value(self, kind: int, key: str):
        """One value of type ``kind``; a long array is returned as ``_Skipped(length)``."""
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner, n = self.take("I"), self.take("Q")
            if n > SMALL_ARRAY:
                if inner == _STRING:
                    self.skip_strings(n)
                elif inner in _SCALARS:
                    self.pos += n * struct.calcsize(_SCALARS[inner])
                    if self.pos > len(self.buf):
                        raise GGUFError(f"{self.path}: array {key} runs past the end of the file")
                else:
                    raise GGUFError(f"{self.path}: array {key} of type {inner} is not supported")
                return _Skipped(n)
            return [self.value(inner, key) for _ in range(n)]
        raise GGUFError(f"{self.path}: key {key} has unknown value type {kind} (at byte {self.pos:,})")


@dataclass(frozen=True)
class _Skipped:
    length: int


def read_header(path: str | Path) -> GGUFHeader:
    """The metadata and tensor shapes of the GGUF file at ``path``; the weights are not read.

    Raises :class:`GGUFError` for a file that is not GGUF, of version 1 (pre-2023, 32-bit
    counts), or cut short; ``OSError`` when it cannot be opened.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        if fh.read(4) != MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (no GGUF magic)")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _parse(buf, path)


def _parse(buf, path: Path) -> GGUFHeader:
    version = struct.unpack_from("<I", buf, 4)[0]
    order = "<"
    if version & 0xFFFF == 0 and version != 0:   # a big-endian file (e.g. for s390x): the bytes are swapped
        order, version = ">", struct.unpack_from(">I", buf, 4)[0]
    if version not in (2, 3):
        raise GGUFError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
    cur = _Cursor(buf, path, order)
    cur.pos = 8
    n_tensors, n_kv = cur.take("Q"), cur.take("Q")
    metadata: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for _ in range(n_kv):
        key = cur.string()
        value = cur.value(cur.take("I"), key)
        if isinstance(value, _Skipped):
            lengths[key] = value.length
        else:
            metadata[key] = value
            if isinstance(value, list):
                lengths[key] = len(value)
    parameters, types = 0, {}
    for _ in range(n_tensors):
        cur.string()
        n_dims = cur.take("I")
        if n_dims > 8:
            raise GGUFError(f"{path}: a tensor with {n_dims} dimensions (at byte {cur.pos:,}): not a GGUF tensor")
        elements = 1
        for _ in range(n_dims):
            elements *= cur.take("Q")
        kind = cur.take("I")
        cur.take("Q")   # the data offset
        parameters += elements
        name = GGML_TYPES.get(kind, f"type{kind}")
        types[name] = types.get(name, 0) + 1
    return GGUFHeader(version, metadata, lengths, n_tensors, parameters, dict(sorted(types.items())))


def model_facts(header: GGUFHeader) -> dict[str, Any]:
    """What a run manifest keeps of a GGUF header: architecture, size, quantisation, context, template, tokenizer.

    Every key is present; a value the file does not state is ``None``. ``parameters`` is
    counted from the tensor shapes (exact, and cheap: the shapes are in the header);
    ``size_label`` is the file's own ``general.size_label`` when it has one.
    """
    meta = header.metadata
    arch = meta.get("general.architecture")
    file_type = meta.get("general.file_type")
    template = meta.get("tokenizer.chat_template")
    return {
        "architecture": arch,
        "name": meta.get("general.name"),
        "size_label": meta.get("general.size_label"),
        "parameters": header.parameters,
        "file_type": None if file_type is None else LLAMA_FTYPES.get(file_type, f"ftype {file_type}"),
        "tensor_types": header.tensor_types,
        "context_length": meta.get(f"{arch}.context_length") if arch else None,
        "chat_template_sha256": (hashlib.sha256(template.encode("utf-8")).hexdigest()
                                 if isinstance(template, str) else None),
        "tokenizer_model": meta.get("tokenizer.ggml.model"),
        "vocab_size": header.array_lengths.get("tokenizer.ggml.tokens"),
        "gguf_version": header.version,
    }
