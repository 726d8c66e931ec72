"""Reading a GGUF file's header (metadata and tensor shapes) without loading the model.

The format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): the magic
``GGUF``, a uint32 version, uint64 tensor and key/value counts, the typed key/values,
then one info record per tensor (name, shape, type, offset), then the weights. Only the
part before the weights is read, through ``mmap``: a 100 MB file costs a few
milliseconds, nothing is allocated for the weights, and no model slot is needed.

Long arrays (the vocabulary, the merges) are skipped and only their length is kept: a
run manifest needs the vocabulary's size, not its 49,152 strings.

Only a regular file is ever opened (:func:`~workbench.dbfiles.open_regular_fd`): a FIFO would block an open
until a writer came, and a device such as ``/dev/zero`` would be read for ever. Every count
the header declares is checked against the bytes left before it is trusted, so a crafted
header cannot make the reader loop or allocate past the file's own size.
:func:`check_gguf` adds what a model option needs: the weights all there, and the
architecture of the right kind (an encoder for embeddings, anything else for generation).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from workbench.dbfiles import database_file_of, open_regular_fd
from workbench.filekinds import NotRegular, file_kind
from workbench.models.base import ModelError

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

# ggml type → (elements per block, bytes per block), as gguf-py's GGML_QUANT_SIZES: how many
# bytes a tensor's weights take. Types whose layout changed between ggml versions (Q8_1, the
# newest) are left out: their tensors are only checked to start inside the file.
_BLOCKS = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 10: (256, 84),
    11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74),
    18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66),
    39: (32, 17),
}
# Encoder architectures llama.cpp embeds with (and cannot generate with: its decode of one
# fails on a memory assertion).
EMBEDDING_ARCHS = frozenset({"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3",
                             "neo-bert", "modern-bert", "eurobert"})

# GGUF value types: id → struct format of a scalar (8 = string, 9 = array are read apart).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
# The least bytes a key/value (an empty key, a type, a one-byte value) and a tensor record (an
# empty name, a dimension count, a type, an offset) take: a count the rest of the file cannot
# hold is refused before anything is read by it.
_MIN_KV, _MIN_TENSOR = 8 + 4 + 1, 8 + 4 + 4 + 8
_MAX_NESTING = 4            # arrays of arrays: GGUF files hold none deeper than this
_MAX_STRING = 16 << 20      # a metadata string (a chat template is a few KB) longer than this is damage


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
    data_end: int = 0               # the byte the last tensor's weights end at (as far as their types tell)
    file_size: int = 0


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

    def left(self) -> int:
        return len(self.buf) - self.pos

    def string(self) -> str:
        n = self.take("Q")
        if n > self.left():
            raise GGUFError(f"{self.path}: a string of {n:,} bytes runs past the end of the file "
                            f"(at byte {self.pos:,})")
        if n > _MAX_STRING:
            raise GGUFError(f"{self.path}: a string of {n:,} bytes in the header (at byte {self.pos:,}): "
                            "not GGUF metadata")
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        # The vocabulary: ~50k length-prefixed strings. Only the lengths are read.
        unpack, width, end = struct.Struct(self.order + "Q").unpack_from, 8, len(self.buf)
        pos = self.pos
        if count > (end - pos) // width:
            raise GGUFError(f"{self.path}: an array of {count:,} strings cannot fit in the rest of the file "
                            f"(at byte {pos:,})")
        for _ in range(count):
            if pos + width > end:
                raise GGUFError(f"{self.path}: truncated GGUF header (at byte {pos:,})")
            pos += width + unpack(self.buf, pos)[0]
        if pos > end:
            raise GGUFError(f"{self.path}: truncated GGUF header (at byte {end:,})")
        self.pos = pos

    def value(self, kind: int, key: str, depth: int = 0):
        """One value of type ``kind``; a long array is returned as ``_Skipped(length)``."""
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            if depth >= _MAX_NESTING:
                raise GGUFError(f"{self.path}: array {key} nests arrays deeper than {_MAX_NESTING} levels")
            inner, n = self.take("I"), self.take("Q")
            if n > SMALL_ARRAY:
                if inner == _STRING:
                    self.skip_strings(n)
                elif inner in _SCALARS:
                    size = n * struct.calcsize(_SCALARS[inner])
                    if size > self.left():
                        raise GGUFError(f"{self.path}: array {key} runs past the end of the file")
                    self.pos += size
                else:
                    raise GGUFError(f"{self.path}: array {key} of type {inner} is not supported")
                return _Skipped(n)
            return [self.value(inner, key, depth + 1) for _ in range(n)]
        raise GGUFError(f"{self.path}: key {key} has unknown value type {kind} (at byte {self.pos:,})")


@dataclass(frozen=True)
class _Skipped:
    length: int


def not_regular(mode: int) -> str | None:
    """What a file of ``st_mode`` is when it is not a regular file (``"a directory"``, ``"a FIFO"`` …), else None."""
    return None if stat.S_ISREG(mode) else file_kind(mode)


def regular_file(path: Path) -> os.stat_result:
    """``os.stat(path)`` of a non-empty regular file, found without opening it.

    Raises :class:`GGUFError` naming what ``path`` is instead (a directory, a device, a FIFO,
    an empty file), ``FileNotFoundError`` when nothing is there, ``OSError`` when it cannot be
    looked at.
    """
    st = os.stat(path)
    what = not_regular(st.st_mode)
    if what is not None:
        raise GGUFError(f"{path}: {what}, not a model file")
    held = database_file_of(path)
    if held is not None:    # never opened: closing the descriptor would drop SQLite's locks on it
        raise GGUFError(f"{path}: is {held}, not a model file")
    if st.st_size == 0:
        raise GGUFError(f"{path}: an empty file (0 bytes), not a model file")
    return st


@contextmanager
def open_regular(path: Path) -> Iterator[tuple[int, os.stat_result]]:
    """A read-only descriptor of the regular file ``path`` and its ``fstat``; nothing else is opened.

    ``path`` is looked at (:func:`regular_file`) before it is opened, and the opened file
    again (:func:`~workbench.filekinds.open_regular_fd`: without blocking), so a device or FIFO
    is never read even if it replaced the file in between.
    """
    regular_file(path)
    try:
        fd, st = open_regular_fd(path)
    except NotRegular as exc:
        raise GGUFError(f"{path}: {exc.kind}, not a model file") from None
    try:
        yield fd, st
    finally:
        os.close(fd)


def read_prefix(path: str | Path, n: int) -> bytes:
    """The first ``n`` bytes (or fewer) of the regular file ``path`` (see :func:`open_regular`)."""
    with open_regular(Path(path)) as (fd, _):
        return os.read(fd, n)


def read_whole(path: str | Path) -> bytes:
    """Every byte of the regular file ``path`` (a checkpoint's JSON, say), through :func:`open_regular`."""
    with open_regular(Path(path)) as (fd, st):
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def file_sha256(path: str | Path) -> str:
    """sha256 of the regular file ``path``, read in 1 MiB slices through :func:`open_regular`."""
    digest = hashlib.sha256()
    with open_regular(Path(path)) as (fd, _):
        for block in iter(lambda: os.read(fd, 1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_header(path: str | Path) -> GGUFHeader:
    """The metadata and tensor shapes of the GGUF file at ``path``; the weights are not read.

    Raises :class:`GGUFError` for a file that is not GGUF, of version 1 (pre-2023, 32-bit
    counts), cut short, or not a regular file (nothing else is opened); ``FileNotFoundError``
    or another ``OSError`` when it cannot be opened.
    """
    path = Path(path)
    with open_regular(path) as (fd, _):
        magic = os.read(fd, 4)
        if magic != MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
            return _parse(buf, path)


def checked_model_file(path: Path, *, embedding: bool, what: str) -> GGUFHeader:
    """:func:`check_gguf` for a model the user named, every failure one :class:`ModelError` line naming ``path``.

    ``what`` names the file where nothing is there ("model file", "embedding model").
    """
    try:
        return check_gguf(path, embedding=embedding)
    except GGUFError as exc:
        raise ModelError(str(exc)) from None
    except FileNotFoundError:
        raise ModelError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None


def check_gguf(path: str | Path, *, embedding: bool) -> GGUFHeader:
    """The header of ``path`` when it is a whole GGUF of the right kind of model; :class:`GGUFError` otherwise.

    Whole: every tensor's weights end inside the file (a download cut short fails here, not in
    llama.cpp). The right kind: with ``embedding``, an encoder (:data:`EMBEDDING_ARCHS`); without,
    anything else, since llama.cpp cannot generate with an encoder.
    """
    path = Path(path)
    header = read_header(path)
    if header.data_end > header.file_size:
        raise GGUFError(f"{path}: truncated: its weights run to byte {header.data_end:,} but the file has "
                        f"{header.file_size:,} bytes")
    arch = header.metadata.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise GGUFError(f"{path}: the GGUF names no architecture (general.architecture)")
    if embedding and arch not in EMBEDDING_ARCHS:
        raise GGUFError(f"{path}: not an embedding model (architecture {arch!r}, not an encoder such as bert)")
    if not embedding and arch in EMBEDDING_ARCHS:
        raise GGUFError(f"{path}: an embedding model (architecture {arch!r}), not one that generates text")
    return header


def _parse(buf, path: Path) -> GGUFHeader:
    cur = _Cursor(buf, path, "<")
    cur.pos = 4
    version = cur.take("I")
    if version & 0xFFFF == 0 and version != 0:   # a big-endian file (e.g. for s390x): the bytes are swapped
        cur.order, version = ">", struct.unpack_from(">I", buf, 4)[0]
    if version not in (2, 3):
        raise GGUFError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
    n_tensors, n_kv = cur.take("Q"), cur.take("Q")
    if n_kv > cur.left() // _MIN_KV or n_tensors > cur.left() // _MIN_TENSOR \
            or n_kv * _MIN_KV + n_tensors * _MIN_TENSOR > cur.left():
        raise GGUFError(f"{path}: truncated GGUF header: it declares {n_kv:,} keys and {n_tensors:,} tensors, "
                        f"more than the file's {len(buf):,} bytes can hold")
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
    parameters, types, weights_end = 0, {}, 0
    for _ in range(n_tensors):
        cur.string()
        n_dims = cur.take("I")
        if n_dims > 8:
            raise GGUFError(f"{path}: a tensor with {n_dims} dimensions (at byte {cur.pos:,}): not a GGUF tensor")
        dims = [cur.take("Q") for _ in range(n_dims)]
        elements = 1
        for d in dims:
            elements *= d
        kind = cur.take("I")
        offset = cur.take("Q")
        parameters += elements
        name = GGML_TYPES.get(kind, f"type{kind}")
        types[name] = types.get(name, 0) + 1
        weights_end = max(weights_end, offset + _tensor_bytes(kind, dims, elements))
    alignment = metadata.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0:
        raise GGUFError(f"{path}: general.alignment {alignment!r} is not a positive integer")
    data_start = -(-cur.pos // alignment) * alignment
    return GGUFHeader(version, metadata, lengths, n_tensors, parameters, dict(sorted(types.items())),
                      data_end=data_start + weights_end, file_size=len(buf))


def _tensor_bytes(kind: int, dims: list[int], elements: int) -> int:
    """The bytes of a tensor's weights (rows of whole blocks), or 0 for a type whose layout is not known here."""
    if kind not in _BLOCKS or not dims:
        return 0
    block, size = _BLOCKS[kind]
    return (dims[0] // block) * size * (elements // dims[0] if dims[0] else 0)


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
