"""Reading a Hugging Face BERT checkpoint without torch or transformers: files, weights, vocabulary.

A checkpoint is a directory, or a ``.zip`` of one (its files at the top or one folder deep):
``config.json``, ``model.safetensors``, and ``tokenizer.json`` or ``vocab.txt``. The
safetensors format is read here (an 8-byte header length, a JSON header, the raw tensors),
so the weights of a directory are memory-mapped, not copied, and bf16 weights read too.

Every failure is a :class:`ModelError` of one line naming the checkpoint.
"""

from __future__ import annotations

import json
import mmap
import zipfile
import zlib
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

import numpy as np

from workbench.models.base import ModelError
from workbench.models.gguf import GGUFError, open_regular, read_whole

# The special tokens every WordPiece BERT has; llama.cpp needs [CLS], [SEP] and [UNK].
_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]", "pad": "[PAD]", "mask": "[MASK]"}
_REQUIRED_SPECIALS = ("cls", "sep", "unk")
# gguf's token types (llama.h ``llama_token_type``), written per token.
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5
_FLOATS = {"F32": np.float32, "F16": np.float16, "F64": np.float64}
_MAX_HEADER = 100 << 20   # a safetensors header longer than this is damage, not metadata


class Checkpoint:
    """The files of a checkpoint directory or zip, read by name relative to its root."""

    def __init__(self, path: Path):
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._prefix = ""
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise ModelError(f"{path}: not a model checkpoint (no config.json)")
            return
        try:
            self._zip = zipfile.ZipFile(path)
            names = set(self._zip.namelist())
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise ModelError(f"{path}: not a readable zip file ({exc})") from None
        if "config.json" not in names:
            # A zip of the folder itself: its files sit one level down, under one folder.
            roots = {n.split("/", 1)[0] for n in names if "/" in n}
            tops = [r for r in roots if f"{r}/config.json" in names]
            if len(tops) != 1:
                raise ModelError(f"{path}: no config.json at the top of the zip or one folder down")
            self._prefix = tops[0] + "/"

    def read(self, name: str) -> bytes | None:
        """The bytes of file ``name``, or ``None`` when the checkpoint has no such file."""
        try:
            if self._zip is None:
                file = self.path / name
                # A regular file only, never a database of this process (read_whole's guard) nor a FIFO.
                return read_whole(file) if file.is_file() else None
            try:
                return self._zip.read(self._prefix + name)   # the CRC is checked as it is read
            except KeyError:
                return None
        except GGUFError as exc:
            raise ModelError(str(exc)) from None
        except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, NotImplementedError) as exc:
            # zlib.error: damaged deflate data; NotImplementedError: a compression zipfile lacks
            raise ModelError(f"{self.path}: cannot read {name} ({exc})") from None

    def has(self, name: str) -> bool:
        """Whether the checkpoint has file ``name`` (nothing is read)."""
        if self._zip is None:
            return (self.path / name).is_file()
        return self._prefix + name in self._zip.NameToInfo

    def json(self, name: str) -> Any:
        """File ``name`` parsed as JSON, or ``None`` when it is absent."""
        raw = self.read(name)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ModelError(f"{self.path}: {name} is not valid JSON ({exc})") from None

    def weights(self) -> SafeTensors:
        """The tensors of ``model.safetensors`` (torch's ``pytorch_model.bin`` would need torch)."""
        if self._zip is None:
            file = self.path / "model.safetensors"
            if file.is_file():
                try:
                    with open_regular(file) as (fd, _):
                        # The map outlives the descriptor; the arrays are views on it, nothing is copied.
                        return SafeTensors(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), self.path)
                except GGUFError as exc:
                    raise ModelError(str(exc)) from None
                except (OSError, ValueError) as exc:   # an empty file cannot be mapped
                    raise ModelError(f"{self.path}: cannot read model.safetensors ({exc})") from None
            raw = None
        else:
            raw = self.read("model.safetensors")
        if raw is None:
            hint = ""
            if self.has("pytorch_model.bin"):
                hint = " (pytorch_model.bin would need torch: save the model as safetensors)"
            raise ModelError(f"{self.path}: no model.safetensors{hint}")
        return SafeTensors(raw, self.path)


class SafeTensors:
    """The tensors of a safetensors buffer, checked against its size and decoded on request."""

    def __init__(self, buf, label: Path):
        self.buf, self.label = buf, label
        size = len(buf)
        n = int.from_bytes(buf[:8], "little") if size >= 8 else -1
        if not 0 < n <= min(size - 8, _MAX_HEADER):
            raise ModelError(f"{label}: model.safetensors is damaged (bad header length)")
        try:
            header = json.loads(bytes(buf[8:8 + n]))
        except ValueError:
            raise ModelError(f"{label}: model.safetensors is damaged (unreadable header)") from None
        if not isinstance(header, dict):
            raise ModelError(f"{label}: model.safetensors is damaged (header is not an object)")
        header.pop("__metadata__", None)
        self._base, self.entries = 8 + n, {}
        for name, info in header.items():
            try:
                dtype, shape, (start, end) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
            except (KeyError, TypeError, ValueError):
                raise ModelError(f"{label}: model.safetensors is damaged (bad entry for {name})") from None
            if not 0 <= start <= end <= size - self._base:
                raise ModelError(f"{label}: model.safetensors is cut short or damaged ({name} lies past its end)")
            self.entries[name] = (dtype, tuple(shape), start, end)

    def array(self, name: str) -> np.ndarray:
        """Tensor ``name`` as float32, float16 or float64 (bf16 is widened to float32)."""
        dtype, shape, start, end = self.entries[name]
        count = prod(shape)
        width = 2 if dtype == "BF16" else np.dtype(_FLOATS[dtype]).itemsize if dtype in _FLOATS else 0
        if not width:
            raise ModelError(f"{self.label}: tensor {name} is {dtype}, not a float tensor")
        if end - start != count * width:
            raise ModelError(f"{self.label}: model.safetensors is damaged ({name}: {end - start} bytes "
                             f"for shape {list(shape)})")
        offset = self._base + start
        if dtype == "BF16":
            raw = np.frombuffer(self.buf, np.uint16, count, offset)
            return (raw.astype(np.uint32) << 16).view(np.float32).reshape(shape)
        return np.frombuffer(self.buf, _FLOATS[dtype], count, offset).reshape(shape)


@dataclass
class Vocab:
    """A WordPiece vocabulary as GGUF stores it: one string and one type per id, and the normalizer's flags."""

    tokens: list[str]
    types: list[int]
    special: dict[str, int]          # cls, sep, unk and, when the vocabulary has them, pad and mask
    lowercase: bool
    strip_accents: bool


def read_vocab(ckpt: Checkpoint, size: int) -> Vocab:
    """The WordPiece vocabulary of ``ckpt`` padded to ``size`` ids (the embedding matrix's rows).

    ``tokenizer.json`` is preferred (it also tells the normalizer); ``vocab.txt`` with
    ``tokenizer_config.json`` is the older form.
    """
    tok_json = ckpt.json("tokenizer.json")
    config = ckpt.json("tokenizer_config.json") or {}
    added: dict[str, tuple[int, bool]] = {}
    if tok_json is not None:
        model = tok_json.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ModelError(f"{ckpt.path}: tokenizer.json holds a {model.get('type')} tokenizer, not WordPiece")
        by_token = model.get("vocab") or {}
        for entry in tok_json.get("added_tokens") or []:
            added[entry["content"]] = (entry["id"], bool(entry.get("special")))
        lowercase, strip = _normalizer_flags(tok_json.get("normalizer"), config)
    else:
        raw = ckpt.read("vocab.txt")
        if raw is None:
            raise ModelError(f"{ckpt.path}: no tokenizer.json or vocab.txt")
        lines = raw.decode("utf-8", errors="replace").splitlines()
        by_token = {line: i for i, line in enumerate(lines)}
        lowercase, strip = _normalizer_flags(None, config, by_token)
    ids = dict(by_token)
    ids.update({t: i for t, (i, _) in added.items()})
    if not ids or max(ids.values()) >= size:
        raise ModelError(f"{ckpt.path}: the vocabulary ({len(ids)} tokens) does not fit the model's "
                         f"{size} token embeddings")
    # Ids the vocabulary leaves empty get a placeholder, as llama.cpp's converter does.
    tokens, types = [f"[PAD{i}]" for i in range(size)], [UNUSED] * size
    for token, i in ids.items():
        tokens[i], types[i] = token, NORMAL
    special = {}
    for kind, default in _SPECIALS.items():
        name = config.get(f"{kind}_token") or default
        name = name.get("content", default) if isinstance(name, dict) else name
        if name in ids:
            special[kind] = ids[name]
    missing = [_SPECIALS[k] for k in _REQUIRED_SPECIALS if k not in special]
    if missing:
        raise ModelError(f"{ckpt.path}: the vocabulary has no {', '.join(missing)} token")
    for token, (i, is_special) in added.items():
        types[i] = CONTROL if is_special else USER_DEFINED
    for i in special.values():
        types[i] = CONTROL
    return Vocab(tokens, types, special, lowercase, strip)


def _normalizer_flags(normalizer: dict | None, config: dict, vocab: dict | None = None) -> tuple[bool, bool]:
    """(lowercase, strip accents) as Hugging Face's tokenizer would apply them."""
    lowercase = strip = None
    parts = [normalizer] if normalizer else []
    while parts:
        part = parts.pop()
        kind = part.get("type")
        if kind == "Sequence":
            parts.extend(part.get("normalizers") or [])
        elif kind == "BertNormalizer":
            lowercase, strip = bool(part.get("lowercase", True)), part.get("strip_accents")
        elif kind == "Lowercase":
            lowercase = True
        elif kind == "StripAccents":
            strip = True
    if normalizer is None:
        lowercase = config.get("do_lower_case")
        strip = config.get("strip_accents")
        if lowercase is None:
            # No word about it: an uncased vocabulary has no capital letters.
            lowercase = not any(t[:1].isupper() for t in (vocab or {}) if not t.startswith("["))
    lowercase = bool(lowercase)
    # BERT's rule: accents are stripped when unset and lowercasing is on.
    return lowercase, lowercase if strip is None else bool(strip)
