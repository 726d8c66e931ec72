"""What two runs have in common: their samples, their cells, and how their configurations differ.

A comparison is paired: sample i of run A is set against sample i of run B. So both runs
must be over the same dataset (samples are matched by id), and each cell of A is matched
to one cell of B, by its id or by an explicit map. Whatever cannot be matched is refused
(``ValueError``, exit 2) with what there is to choose from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from workbench.runs.generation import GenerationConfig
from workbench.store.queries import Run

# The axes a configuration varies along, by the run-config keys that make them up.
AXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("model", ("generation.model", "generation.backend", "generation.base_url")),
    ("prompt template", ("generation.system", "generation.user", "generation.answer_format",
                         "generation.prompt_style")),
    ("sampling", ("generation.max_tokens", "generation.temperature", "generation.seed", "generation.n_ctx")),
    ("retriever", ("retriever",)),
    ("tokenizer", ("tokenizer",)),
    ("scorer", ("score",)),
    ("budget grid", ("budgets",)),
    ("K grid", ("ks",)),
    ("formats", ("formats",)),
    ("oracle cells", ("oracle", "shuffles", "seed")),
    ("samples", ("limit", "hops")),
    ("stopping rule", ("sequential.rule", "sequential.alpha", "sequential.tolerance", "sequential.seed")),
)


@dataclass(frozen=True)
class Difference:
    """One configuration key on which the two runs differ."""

    axis: str
    key: str
    a: Any
    b: Any


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested keys dotted: ``{"generation": {"model": m}}`` → ``{"generation.model": m}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _as_run_reads_it(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config with its generation settings as the executor reads them (e.g. no prompt_style = chat)."""
    if config.get("generations"):      # several models: each one's settings
        return {**config, "generations": {label: asdict(GenerationConfig.from_stored(g))
                                          for label, g in config["generations"].items()}}
    if not config.get("generation"):   # a sweep: no model, no generation settings
        return dict(config)
    return {**config, "generation": asdict(GenerationConfig.from_stored(config["generation"]))}


def config_differences(a: Run, b: Run) -> list[Difference]:
    """Every key on which the runs' configurations differ, each under its axis (``other`` if none)."""
    fa, fb = flatten(_as_run_reads_it(a.config)), flatten(_as_run_reads_it(b.config))
    axis_of = {key: axis for axis, keys in AXES for key in keys}
    order = {key: i for i, (_, keys) in enumerate(AXES) for key in keys}
    keys = sorted((k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k)),
                  key=lambda k: (order.get(k, len(order)), k))
    return [Difference(axis_of.get(k, "other"), k, fa.get(k), fb.get(k)) for k in keys]


def axes_of(differences: Sequence[Difference]) -> list[str]:
    """The distinct axes the differences fall on, in :data:`AXES` order."""
    return list(dict.fromkeys(d.axis for d in differences))


def check_same_dataset(a: Run, b: Run) -> None:
    """Refuse runs over different datasets: their samples cannot be paired."""
    if a.dataset_id != b.dataset_id:
        raise ValueError(f"run {a.name!r} is over dataset {a.dataset!r} and run {b.name!r} over {b.dataset!r}: "
                         "a comparison pairs the same samples, so both runs must be over one dataset")


def parse_cell_map(items: Sequence[str]) -> dict[str, str]:
    """``["A_CELL=B_CELL", ...]`` → ``{A_CELL: B_CELL}`` (``--map``)."""
    out: dict[str, str] = {}
    for item in items:
        left, sep, right = item.partition("=")
        if not sep or not left.strip() or not right.strip():
            raise ValueError(f"--map: expected A_CELL=B_CELL, got {item!r}")
        if left.strip() in out:
            raise ValueError(f"--map: cell {left.strip()!r} of run A is mapped twice")
        out[left.strip()] = right.strip()
    return out


def align_cells(a_cells: Sequence[str], b_cells: Sequence[str], *, only: Sequence[str] | None = None,
                cell_map: Mapping[str, str] | None = None, a_name: str = "A", b_name: str = "B") -> list[tuple[str, str]]:
    """The (A cell, B cell) pairs to compare, in A's order: mapped ones, then those with one id in both.

    ``only`` restricts to those A cells (``--cells``). An unknown cell on either side, or no
    pair at all, is refused naming what each run has.
    """
    cell_map = dict(cell_map or {})
    a_set, b_set = set(a_cells), set(b_cells)
    for left, right in cell_map.items():
        if left not in a_set:
            raise ValueError(f"--map: run {a_name!r} has no cell {left!r} (it has {_some(a_cells)})")
        if right not in b_set:
            raise ValueError(f"--map: run {b_name!r} has no cell {right!r} (it has {_some(b_cells)})")
    pairs = [(c, cell_map.get(c, c)) for c in a_cells if c in cell_map or c in b_set]
    if only:
        unknown = [c for c in only if c not in a_set]
        if unknown:
            raise ValueError(f"--cells: run {a_name!r} has no cell {unknown[0]!r} (it has {_some(a_cells)})")
        unpaired = [c for c in only if c not in dict(pairs)]
        if unpaired:
            raise ValueError(f"--cells: cell {unpaired[0]!r} of run {a_name!r} has no counterpart in run {b_name!r};"
                             f" map it with --map {unpaired[0]}=B_CELL (run {b_name!r} has {_some(b_cells)})")
        wanted = set(only)
        pairs = [p for p in pairs if p[0] in wanted]
    if not pairs:
        raise ValueError(f"runs {a_name!r} and {b_name!r} have no cell id in common: map cells with "
                         f"--map A_CELL=B_CELL ({a_name!r} has {_some(a_cells)}; {b_name!r} has {_some(b_cells)})")
    return pairs


def _some(cells: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(cells[:limit])
    return (shown + f", … {len(cells) - limit} more") if len(cells) > limit else (shown or "none")
