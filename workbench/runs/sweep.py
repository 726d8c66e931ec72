"""Planning a K×B×format sweep: the retrieval/interface half of every (sample, cell) event.

For each sample and K the retrieved top-K is linearized once per format and tokenized
once; every budget B is then a prefix cut of the same token list (``truncate_many``).
The whole plan is written in one transaction.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from workbench.evidence import (DEFAULT_TOKENIZER, FORMATS, Window, count_tokens, get_tokenizer, linearize,
                                render_line, select_oracle_path, truncate_many, uncut)
from workbench.evidence.stored import load_units
from workbench.passes import RUN_NAME_DIGITS, canonical_json, default_name, plan_or_find, refuse_changed
from workbench.runs.cells import Cell, grid
from workbench.runs.generation import resolve_generation
from workbench.runs.manifest import plan_manifest
from workbench.runs.sequential import SequentialConfig, write_order
from workbench.store.db import Store, utcnow
from workbench.store.manifests import insert_manifest
from workbench.store.queries import EXTERNAL_MODEL, Dataset, get_dataset, load_retrieval, load_samples, retrievers


@dataclass(frozen=True)
class SweepConfig:
    """Everything that determines a sweep's events. Stored as the run's config."""

    ks: tuple[int, ...]
    budgets: tuple[int, ...]
    formats: tuple[str, ...]
    retriever: str | None = None
    tokenizer: str = DEFAULT_TOKENIZER
    oracle: bool = False
    shuffles: int = 5
    seed: int = 0
    score: str = "acc"
    limit: int | None = None     # only the first N samples (file order)

    def validate(self) -> None:
        """Reject an empty or nonsensical grid with a message naming the option."""
        if not self.ks or any(k < 1 for k in self.ks):
            raise ValueError("--k: give one or more positive integers, e.g. --k 1,2,5,10")
        if not self.budgets or any(b < 1 for b in self.budgets):
            raise ValueError("--budget: give one or more positive token budgets, e.g. --budget 64,128")
        bad = [f for f in self.formats if f not in FORMATS]
        if not self.formats or bad:
            raise ValueError(f"--format: unknown {bad or 'empty'}; choose from {', '.join(FORMATS)}")
        if self.shuffles < 1:
            raise ValueError("--shuffles: must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise ValueError("--limit: must be at least 1")


@dataclass
class SweepResult:
    run: str
    dataset: str
    retriever: str
    cells: int
    events: int
    created: bool
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)   # kept with the run (its config's "warnings")


def _sorted_unique(values: Sequence[int]) -> tuple[int, ...]:
    return tuple(sorted(set(values)))


def _resolve(store: Store, config: SweepConfig, dataset: str | None) -> tuple[SweepConfig, Dataset, list[str]]:
    """The config as planned (sorted grid, the retriever chosen), its dataset, and notes on the defaults taken."""
    config = SweepConfig(**{**asdict(config), "ks": _sorted_unique(config.ks),
                            "budgets": _sorted_unique(config.budgets),
                            "formats": tuple(dict.fromkeys(config.formats))})
    config.validate()
    ds = get_dataset(store, dataset)
    notes = []
    if dataset is None:
        notes.append(f"dataset: {ds.name} (the most recent import; pass DATASET to choose)")
    names = retrievers(store, ds.id)
    if not names:
        raise ValueError(f"dataset {ds.name!r} has no retrieval results to sweep (import a retrieval.jsonl)")
    retriever = config.retriever or names[0]
    if retriever not in names:
        raise ValueError(f"--retriever: {retriever!r} is not in dataset {ds.name!r} (has: {', '.join(names)})")
    if config.retriever is None and len(names) > 1:
        notes.append(f"retriever: {retriever} (of {', '.join(names)}; pass --retriever to choose)")
    return SweepConfig(**{**asdict(config), "retriever": retriever}), ds, notes


def models_run_name(store: Store, config: SweepConfig, generations: dict[str, dict], *,
                    dataset: str | None = None, sequential: SequentialConfig | None = None) -> str:
    """The default name :func:`plan_sweep` gives the run of several models ``generations`` (label → settings):
    what a dry run of ``run --model A,B`` names, before anything is planned."""
    config, ds, _ = _resolve(store, config, dataset)
    identity = {**asdict(config), "generations": {label: resolve_generation(g) for label, g in generations.items()}}
    if sequential is not None:
        identity["sequential"] = sequential.as_dict()
    return default_name(ds.name, identity, RUN_NAME_DIGITS)


def plan_sweep(store: Store, config: SweepConfig, *, dataset: str | None = None, name: str | None = None,
               generation: dict | None = None, generations: dict[str, dict] | None = None,
               sequential: SequentialConfig | None = None,
               progress: Callable[[int, int], None] | None = None) -> SweepResult:
    """Plan (or find, if identical) a run and write its retrieval/interface events (its jobs).

    ``generation`` (a model's settings, :meth:`GenerationConfig.as_dict`) is stored with the
    config: a run that generates. Its prompt style ``auto`` is resolved here, so every
    planner (CLI, TUI) records the style the run uses. ``generations`` (label → settings, two or
    more) makes the model an axis of the grid: every cell once per model, one sample order, one run.
    ``sequential`` makes it a sequential run (:mod:`workbench.runs.sequential`): its settings join
    the config and its samples' seeded order is stored with it.
    """
    if generation is not None:
        generation = resolve_generation(generation)
    models: tuple[str, ...] = ()
    if generations is not None:
        if generation is not None or len(generations) < 2:
            raise ValueError("a run of several models takes two or more in `generations`, and no `generation`")
        generations = {label: resolve_generation(g) for label, g in generations.items()}
        models = tuple(generations)
    if sequential is not None:
        sequential.validate()
        if config.oracle:
            raise ValueError("--stop-when: a sequential run weighs its grid cells; the oracle controls (--oracle) "
                             "would be asked on every sample: run them in a run of their own")
        if generation is None and not models:
            raise ValueError("--stop-when: a sequential run asks a model (`workbench run`, not `sweep`)")
    config, ds, notes = _resolve(store, config, dataset)
    retriever = config.retriever
    tokenizer = get_tokenizer(config.tokenizer)
    # A run of one model keeps the identity (and the default name) it always had.
    identity = ({**asdict(config), "generations": generations} if models
                else {**asdict(config), "generation": generation})
    if sequential is not None:    # absent otherwise: every other run's identity (and name) is as it was
        identity["sequential"] = sequential.as_dict()
    name = name or default_name(ds.name, identity, RUN_NAME_DIGITS)

    def find(conn):
        return _find_run(conn, name)

    def prepare():
        units = load_units(store, ds.id)
        # The manifest is built before the write lock is taken: hashing a model file takes a while.
        manifest = plan_manifest(store, name=name, dataset_id=ds.id, dataset_name=ds.name, identity=identity)
        return units, load_samples(store, ds.id)[: config.limit], load_retrieval(store, ds.id, retriever), manifest

    def write(conn, loaded) -> SweepResult:
        units, samples, ranked, manifest = loaded
        warnings = _k_warnings(config.ks, [len(ranked.get(s.sid, ())) for s in samples])
        stored = {**identity, "warnings": warnings} if warnings else identity
        run_id = conn.execute(
            "INSERT INTO runs (name, dataset_id, retriever, config, model, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (name, ds.id, retriever, canonical_json(stored), _models_column(generation, generations),
             utcnow())).lastrowid
        insert_manifest(conn, run_id, manifest)
        cells = grid(config.ks, config.budgets, config.formats, oracle=config.oracle, shuffles=config.shuffles,
                     models=models)
        conn.executemany(
            "INSERT INTO cells (run_id, cell_id, kind, k, budget, format, shuffle, model)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(run_id, c.cell_id, c.kind, c.k, c.budget, c.format, c.shuffle, c.model) for c in cells])
        events = _write_events(_EventWriter(conn, run_id, models=models), config, samples, units, ranked, tokenizer,
                               progress)
        if sequential is not None:
            if sequential.rule == "best":
                _refuse_one_arm(conn, run_id)
            write_order(conn, run_id, [s.sid for s in samples], sequential.seed)
        return SweepResult(name, ds.name, retriever, len(cells), events, created=True, notes=notes,
                           warnings=warnings)

    found, planned = plan_or_find(store, find, write, prepare)
    if found is None:
        return planned
    # Found (perhaps planned by another process meanwhile) when the config is the same, refused otherwise.
    run_id, warnings = _same_plan(found, name, ds, identity)
    n_cells = store.conn.execute("SELECT count(*) FROM cells WHERE run_id = ?", (run_id,)).fetchone()[0]
    n_events = store.conn.execute("SELECT count(*) FROM events WHERE run_id = ?", (run_id,)).fetchone()[0]
    return SweepResult(name, ds.name, retriever, n_cells, n_events, created=False, notes=notes, warnings=warnings)


def _models_column(generation: dict | None, generations: dict[str, dict] | None) -> str | None:
    """``runs.model``: the model's reference, or every model's, comma-separated (what a listing shows)."""
    if generations:
        return ",".join(g["model"] for g in generations.values())
    return (generation or {}).get("model")


def _refuse_one_arm(conn, run_id: int) -> None:
    """``best`` compares configurations: a grid of one cell, or of cells whose prompts are the same on every sample
    (one arm: :func:`~workbench.runs.stopping.arms_of`), has nothing to compare. Raised inside the plan's
    transaction, so nothing is written."""
    rows = conn.execute("SELECT e.cell_id, e.sid, c.model, e.evidence_sha256 FROM events e JOIN cells c"
                        " ON c.run_id = e.run_id AND c.cell_id = e.cell_id WHERE e.run_id = ? AND c.kind = 'retrieval'",
                        (run_id,)).fetchall()
    windows: dict[str, list] = {}
    for cell, sid, model, sha in sorted(rows, key=lambda r: (r[0], r[1])):
        windows.setdefault(cell, []).append((sid, model, sha))     # two models on one window: two prompts
    arms = {tuple(w) for w in windows.values()}
    if len(arms) < 2:
        what = ("one cell" if len(windows) == 1
                else f"{len(windows)} cells that render the same prompt on every sample (one configuration)")
        raise ValueError(f"--stop-when best compares two or more configurations, and the grid has {what}: "
                         "use --stop-when precision to pin its S_llm down, or widen the grid")


def _find_run(conn, name: str):
    """``(id, stored config, dataset name)`` of the run called ``name``, or None."""
    return conn.execute("SELECT r.id, r.config, d.name FROM runs r LEFT JOIN datasets d ON d.id = r.dataset_id"
                        " WHERE r.name = ?", (name,)).fetchone()


def _same_plan(found, name: str, ds: Dataset, identity: dict) -> tuple[int, list[str]]:
    """The found run's id and warnings; ValueError naming the differences when its config is another."""
    run_id, stored_json, stored_dataset = found
    stored = json.loads(stored_json)
    warnings = stored.pop("warnings", [])   # found from the data, not chosen: not part of the identity
    refuse_changed("run", name, {"dataset": stored_dataset, **stored}, {"dataset": ds.name, **identity},
                   resume=f"workbench resume {name}")
    return run_id, warnings


@dataclass
class SweepPreview:
    """What :func:`plan_sweep` would plan, computed without writing (``run --dry-run``).

    For a run already planned under that name (same config) ``exists`` is True and
    ``jobs`` is empty: its jobs are in the database. Otherwise ``jobs`` holds every
    ``(cell_id, sid, visible uids, evidence sha256)`` the plan would write, and ``texts``
    the evidence texts by sha256 (each distinct window once, as the evidence table keeps them).
    """

    run: str
    dataset: Dataset
    retriever: str
    cells: int
    exists: bool
    jobs: list[tuple[str, int, list[int], str]] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def preview_sweep(store: Store, config: SweepConfig, *, dataset: str | None = None, name: str | None = None,
                  generation: dict | None = None, generations: dict[str, dict] | None = None) -> SweepPreview:
    """The run :func:`plan_sweep` would plan (or find), computed in memory: nothing is written.

    A name taken by another config is refused exactly as :func:`plan_sweep` refuses it. With
    ``generations`` (a run of several models) the jobs are one model's part: the grid once.
    """
    if generation is not None:
        generation = resolve_generation(generation)
    config, ds, notes = _resolve(store, config, dataset)
    identity = ({**asdict(config), "generations": {label: resolve_generation(g) for label, g in generations.items()}}
                if generations else {**asdict(config), "generation": generation})
    name = name or default_name(ds.name, identity, RUN_NAME_DIGITS)
    found = _find_run(store.conn, name)
    if found is not None:
        run_id, warnings = _same_plan(found, name, ds, identity)
        n_cells = store.conn.execute("SELECT count(*) FROM cells WHERE run_id = ?", (run_id,)).fetchone()[0]
        return SweepPreview(name, ds, config.retriever, n_cells, exists=True, notes=notes, warnings=warnings)
    units, samples = load_units(store, ds.id), load_samples(store, ds.id)[: config.limit]
    ranked = load_retrieval(store, ds.id, config.retriever)
    collector = _EventCollector()
    _write_events(collector, config, samples, units, ranked, get_tokenizer(config.tokenizer), None)
    cells = grid(config.ks, config.budgets, config.formats, oracle=config.oracle, shuffles=config.shuffles)
    return SweepPreview(name, ds, config.retriever, len(cells), exists=False, jobs=collector.jobs,
                        texts=collector.texts, notes=notes,
                        warnings=_k_warnings(config.ks, [len(ranked.get(s.sid, ())) for s in samples]))


def _write_events(writer: _EventWriter | _EventCollector, config: SweepConfig, samples, units, ranked, tokenizer,
                  progress: Callable[[int, int], None] | None) -> int:
    """Every (sample, cell) event of the plan, with its evidence text; returns how many."""
    for i, sample in enumerate(samples):
        gold = [frozenset(p) for p in sample.gold_paths]
        top = ranked.get(sample.sid, [])
        for k in config.ks:
            top_k = top[:k]
            h_set = _hit(gold, set(top_k))
            for fmt in config.formats:
                text = linearize([units[u] for u in top_k], fmt, seed=f"{config.seed}:{sample.id}")
                for budget, window in zip(config.budgets, truncate_many(text, config.budgets, tokenizer)):
                    writer.add(Cell("retrieval", budget, fmt, k=k), sample.sid, h_set, gold, window)
        if config.oracle:
            _oracle_events(writer, config, sample, gold, units, tokenizer)
        if progress:
            progress(i + 1, len(samples))
    writer.flush()
    return writer.count


def _k_warnings(ks: Sequence[int], lengths: Sequence[int]) -> list[str]:
    """A warning when some K is past every sample's retrieval list: those cells repeat one another."""
    longest = max(lengths, default=0)
    over = [k for k in ks if k > longest]
    if not over:
        return []
    if longest == 0:
        return ["no sample in this sweep has retrieved units: every retrieval cell sees empty evidence"]
    return [f"K={','.join(map(str, over))} {'exceeds' if len(over) == 1 else 'exceed'} the longest retrieval "
            f"list ({longest}): cells with K ≥ {longest} see the same evidence"]


def _hit(gold: list[frozenset[int]], units: set[int]) -> int:
    return int(any(p <= units for p in gold))


def oracle_path(sample, units, tokenizer) -> list[int]:
    """p*: the sample's gold path with the fewest struct tokens (docs/design.md §3); [] without gold paths."""
    if not sample.gold_paths:
        return []
    paths = [[units[u] for u in p] for p in sample.gold_paths]
    return sample.gold_paths[select_oracle_path(paths, tokenizer)]


def _oracle_events(writer, config: SweepConfig, sample, gold, units, tokenizer) -> None:
    """Events of the oracle cells: only p*, in struct order and in M seeded shuffles."""
    best = oracle_path(sample, units, tokenizer)
    path_units = [units[u] for u in best]
    # H_set is 1 by construction when a gold path exists: the oracle content is p* itself.
    h_set = int(bool(gold))
    target = [frozenset(best)] if best else []
    variants = [("struct", None, linearize(path_units, "struct"))]
    variants += [("linear", m, linearize(path_units, "linear", seed=f"{config.seed}:{sample.id}:oracle:{m}"))
                 for m in range(config.shuffles)]
    for fmt, m, text in variants:
        for budget, window in zip(config.budgets, truncate_many(text, config.budgets, tokenizer)):
            writer.add(Cell("oracle", budget, fmt, shuffle=m), sample.sid, h_set, target, window)


def per_model(cell: Cell, models: tuple[str, ...]) -> list[Cell]:
    """``cell`` as each of ``models`` answers it (itself in a run of one model): the interface half of an
    event (the evidence window, H_set, H_vis) is the same for every model, so it is computed once."""
    return [cell.for_model(m) for m in models] if models else [cell]


class _EventCollector:
    """:class:`_EventWriter`'s interface, kept in memory: the jobs a plan would write (a dry run)."""

    def __init__(self, models: tuple[str, ...] = ()):
        self.jobs: list[tuple[str, int, list[int], str]] = []
        self.texts: dict[str, str] = {}
        self.count = 0
        self.models = models

    def add(self, cell: Cell, sid: int, h_set: int, gold, window) -> None:
        sha = hashlib.sha256(window.text.encode("utf-8")).hexdigest()
        self.texts[sha] = window.text
        visible = [int(label[1:]) for label in window.visible]
        for answered in per_model(cell, self.models):
            self.jobs.append((answered.cell_id, sid, visible, sha))
            self.count += 1

    def flush(self) -> None:
        pass


class _EventWriter:
    """Buffers event rows and content-addressed evidence texts for executemany.

    With ``answers`` (sid → prediction, score) the events are written done, as imported answers.
    """

    _COLUMNS = "run_id, cell_id, sid, h_set, h_vis, k_eff, evidence_tokens, truncated, evidence_sha256, visible"

    def __init__(self, conn, run_id: int, answers: dict[int, tuple[str, float | None]] | None = None,
                 models: tuple[str, ...] = ()):
        self.conn, self.run_id, self.answers, self.models = conn, run_id, answers, models
        self.rows: list[tuple] = []
        self.texts: dict[str, str] = {}
        self.count = 0
        self.sql = (f"INSERT INTO events ({self._COLUMNS}) VALUES ({', '.join('?' * 10)})" if answers is None else
                    f"INSERT INTO events ({self._COLUMNS}, prediction, score, status, source)"
                    f" VALUES ({', '.join('?' * 12)}, 'done', 'import')")

    def add(self, cell: Cell, sid: int, h_set: int, gold, window) -> None:
        visible = [int(label[1:]) for label in window.visible]
        sha = hashlib.sha256(window.text.encode("utf-8")).hexdigest()
        self.texts[sha] = window.text
        h_vis, shown = _hit(gold, set(visible)), json.dumps(visible)
        for answered in per_model(cell, self.models):
            row = (self.run_id, answered.cell_id, sid, h_set, h_vis, window.k_eff, window.tokens,
                   int(window.truncated), sha, shown)
            self.rows.append(row if self.answers is None else row + self.answers[sid])
            self.count += 1
        if len(self.rows) >= 20_000:
            self.flush()

    def flush(self) -> None:
        self.conn.executemany("INSERT OR IGNORE INTO evidence (sha256, text) VALUES (?, ?)", self.texts.items())
        self.conn.executemany(self.sql, self.rows)
        self.rows, self.texts = [], {}


def uncut_evidence(config: SweepConfig, samples, units, ranked, tokenizer=None) -> tuple[int, list[tuple]]:
    """Each sample's evidence at the sweep's one K and format, uncut: ``(B, [(sid, h_set, gold, window)])``.

    For a run whose single budget is the longest evidence (``import --from ragchecker``: the
    file says what was shown, so nothing may be cut). B is that longest evidence's token
    count; every window is what :func:`truncate_many` gives at a budget the text fits. The
    texts are counted on every core (:func:`count_tokens`).
    """
    if len(config.ks) != 1 or len(config.formats) != 1 or config.oracle:
        raise ValueError("uncut evidence is one K and one format, without oracle cells")
    k, fmt = config.ks[0], config.formats[0]
    tokenizer = tokenizer or get_tokenizer(config.tokenizer)
    rows, shown = [], []
    for sample in samples:
        gold = [frozenset(p) for p in sample.gold_paths]
        top_k = ranked.get(sample.sid, [])[:k]
        rows.append((sample.sid, _hit(gold, set(top_k)), gold))
        shown.append(top_k)
    # Each distinct unit rendered once (contexts recur across queries): ``score`` evidence is its
    # lines in rank order, as linearize() writes it.
    distinct = list(dict.fromkeys(u for top_k in shown for u in top_k))
    lines = {u: render_line(units[u]) + "\n" for u in distinct}
    if fmt == "score":
        texts = ["".join(lines[u] for u in top_k) for top_k in shown]
    else:
        texts = [linearize([units[u] for u in top_k], fmt, seed=f"{config.seed}:{sample.id}")
                 for top_k, sample in zip(shown, samples)]
    if getattr(tokenizer, "lines_add_up", False):
        # Each distinct line counted once, then summed per sample.
        per_unit = dict(zip(distinct, count_tokens(tokenizer, [lines[u] for u in distinct])))
        counts = [sum(per_unit[u] for u in top_k) for top_k in shown]
    else:
        counts = count_tokens(tokenizer, texts)
    budget = max(1, max(counts, default=0))
    return budget, [(sid, h_set, gold, uncut(text, n)) for (sid, h_set, gold), text, n in zip(rows, texts, counts)]


def insert_imported_run(conn, store: Store, *, name: str, dataset_id: int, dataset_name: str, retriever: str | None,
                        stored: dict, config: SweepConfig, evidence: list[tuple[int, int, list, Window]],
                        answers: dict[int, tuple[str, float | None]]) -> tuple[int, int]:
    """A run of imported answers, in the caller's transaction: its row (model ``external``, config
    ``stored``), its one uncut cell with every answer's event done (:func:`write_uncut_run`), and its
    manifest, recorded as made when imported. Returns (the run's id, events written)."""
    run_id = conn.execute(
        "INSERT INTO runs (name, dataset_id, retriever, config, model, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (name, dataset_id, retriever, canonical_json(stored), EXTERNAL_MODEL, utcnow())).lastrowid
    events = write_uncut_run(conn, run_id, config, evidence, answers)
    # What the run was made from (`runs show`): the imported file's content, hashed like any run's inputs.
    insert_manifest(conn, run_id, plan_manifest(store, name=name, dataset_id=dataset_id, dataset_name=dataset_name,
                                                identity=stored, recorded="when imported"))
    return run_id, events


def write_uncut_run(conn, run_id: int, config: SweepConfig, evidence: list[tuple[int, int, list, Window]],
                    answers: dict[int, tuple[str, float | None]] | None = None) -> int:
    """Write the one cell (K, B = the longest evidence, format) of run ``run_id`` and its events.

    ``evidence`` is :func:`uncut_evidence`'s, ``config`` holds its B. ``answers`` (sid →
    prediction, score) are imported answers: those events are written done (source ``import``),
    as ``predictions import`` would leave them, in the same insert. In the caller's transaction
    (the importer writes a dataset and this run together). Returns how many events were written.
    """
    (cell,) = grid(config.ks, config.budgets, config.formats, oracle=False, shuffles=config.shuffles)
    conn.execute("INSERT INTO cells (run_id, cell_id, kind, k, budget, format, shuffle) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (run_id, cell.cell_id, cell.kind, cell.k, cell.budget, cell.format, cell.shuffle))
    writer = _EventWriter(conn, run_id, answers)
    for sid, h_set, gold, window in evidence:
        writer.add(cell, sid, h_set, gold, window)
    writer.flush()
    return writer.count
