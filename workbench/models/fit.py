"""Whether the local models of a run of several models fit in memory together.

A run of several models keeps each one loaded for the whole execution, so that no job reloads a
model. That needs every model in memory at once; this module estimates what each one holds once
loaded and refuses, before anything is written, a set that does not fit in the memory this machine
has available.

The estimate of one model: its GGUF file (the weights, mapped and read in), its KV cache at the
run's context (2 × layers × n_ctx × KV heads × head size, 16-bit: llama.cpp's default cache type),
and a compute buffer, taken as an eighth of the file plus 64 MiB (llama.cpp sizes it from the graph;
measured 30–60 MiB for the 135M–270M models the workbench ships with). It errs high: refusing a set
that would have fitted costs a user a rerun with fewer models; accepting one that does not costs the
machine swapping or the process its life.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.dbfiles import read_regular
from workbench.errors import BadInput
from workbench.models.gguf import read_header

MIB = 1 << 20
GIB = 1 << 30
# Memory left to everything else (the workbench, SQLite's cache, the OS) when models are kept loaded.
HEADROOM = 1 * GIB


@dataclass(frozen=True)
class Footprint:
    """What one local model holds once loaded: its weights, its KV cache, its compute buffer (bytes)."""

    label: str
    path: Path
    weights: int
    kv_cache: int
    compute: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute


def footprint(label: str, path: str | Path, n_ctx: int) -> Footprint:
    """The estimated memory of the GGUF model at ``path`` loaded with a context of ``n_ctx`` (see the module)."""
    path = Path(path)
    header = read_header(path)
    meta = header.metadata
    arch = meta.get("general.architecture")
    layers = int(meta.get(f"{arch}.block_count") or 0)
    width = int(meta.get(f"{arch}.embedding_length") or 0)
    heads = int(meta.get(f"{arch}.attention.head_count") or 1)
    kv_heads = int(meta.get(f"{arch}.attention.head_count_kv") or heads)
    head_size = int(meta.get(f"{arch}.attention.key_length") or (width // heads if heads else 0))
    weights = path.stat().st_size
    return Footprint(label, path, weights, 2 * layers * n_ctx * kv_heads * head_size * 2, weights // 8 + 64 * MIB)


def available_memory() -> int | None:
    """The memory this machine can give without swapping (``MemAvailable`` of /proc/meminfo), or None if unknown."""
    try:
        text = read_regular("/proc/meminfo", 1 << 16).decode("ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "MemAvailable":
            parts = value.split()
            return int(parts[0]) * 1024 if parts and parts[0].isdigit() else None
    return None


def check_fit(footprints: list[Footprint], available: int | None = None) -> None:
    """Refuse (:class:`BadInput`, naming each model's share) a set of models that does not fit in memory together."""
    if len(footprints) < 2:
        return
    available = available_memory() if available is None else available
    if available is None:
        return      # not Linux: nothing to measure against, and llama.cpp will say if a load fails
    need = sum(f.total for f in footprints)
    if need + HEADROOM > available:
        shares = ", ".join(f"{f.label} {f.total / GIB:.1f} GiB" for f in footprints)
        raise BadInput(f"--model: the {len(footprints)} models are kept loaded together for the whole run and need "
                       f"about {need / GIB:.1f} GiB ({shares}), with {HEADROOM / GIB:.0f} GiB left for the rest, "
                       f"but this machine has {available / GIB:.1f} GiB available: run fewer models at once, or "
                       "serve some (--backend openai)")
