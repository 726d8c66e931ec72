"""The judged items of a run, one population per kind, with every judge's verdict on each.

- **claims** of the newest claim run over a run (or a chosen one). The judges are the
  enabled verifiers and their ``vote``. A verifier's verdict on a claim is "supported on at
  least one shown unit" (a claim with no shown unit is supported by none); the vote's is the
  stored claim-level vote.
- **dedup pairs** of a dedup run. The judges are the run's modes (``graph``,
  ``graph+text``, ``embedding``): a mode's verdict is its ``is_coreferent``; its score, the
  probability of "same" it stated (its confidence in its verdict, turned towards "same").
  A mode *merges* a pair when it says "same" with confidence ≥ the merge threshold; that
  is the judge's own call, before any reviewer decision.
- **answers** of a run: every scored event. The judge is the run's scorer; its verdict is
  score ≥ 0.5, its score the event's score.
- **relevance** of retrieved chunks in a dataset: every (question, chunk) pair the local model
  judged (``workbench retrieval judge``), over every retriever (or one's). The judges are the
  judging models (a judge per config key: model, prompt, passage cut); a judge's verdict is
  "relevant", its score the verdict's stored score. Labels hang on the dataset.

A population is held in columns (numpy arrays), not item objects: a run of 5M answers is a
few arrays, and a report reads the judges' columns whole. Items are in key order; an item's
*position* keys the bootstrap, so every judge of one population is resampled alike.
:attr:`Population.items` gives :class:`JudgedItem` objects on demand.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Iterator, Sequence, overload

import numpy as np

from workbench.claims.report import latest_claim_run
from workbench.kg.merges import is_merged
from workbench.kg.runner import get_dedup_run
from workbench.retrieval.relevance import judge_names, judged_verdicts, latest_relevance_dataset, relevance_runs
from workbench.store.db import Store
from workbench.store.labels import AnswerKey, ClaimKey, ItemKey, PairKey, RelevanceKey, owner_of
from workbench.store.lookup import NotFound
from workbench.store.queries import Run, get_dataset, get_run

__all__ = ["JudgedItem", "Population", "ItemView", "claim_population", "pair_population", "answer_population",
           "relevance_population", "population", "uniform_rank", "uniform_ranks", "VOTE", "POPULATION_KINDS"]

VOTE = "vote"
#: The kinds a report or a queue is asked for on the command line, and the label kind each holds.
POPULATION_KINDS = {"claims": "claim", "dedup": "dedup_pair", "answers": "answer", "relevance": "relevance"}

# The composite key packs an item's key fields into one int64 (cells by their sorted code):
# claims (cell 15 bits, sid 32, idx 16), answers (cell, sid), pairs (a 31 bits, b 31),
# relevance (sid 31 bits, uid 32).
_CELL_BITS, _SID_BITS, _IDX_BITS = 15, 32, 16
_UID_BITS = 32


@dataclass(frozen=True)
class JudgedItem:
    """One judged item: its key, what each judge said (and scored), and what a human is shown."""

    key: ItemKey
    verdicts: dict[str, bool]
    scores: dict[str, float]
    text: str                                   # the claim, "name a ~ name b", the answer, or "question → chunk id"
    merges: dict[str, bool] = field(default_factory=dict)   # dedup only: per mode, the judge merges it

    @property
    def sample(self) -> tuple[str, int] | None:
        """(cell_id, sid) of a claim or an answer; None for a dedup pair or a relevance pair."""
        return None if isinstance(self.key, (PairKey, RelevanceKey)) else (self.key.cell_id, self.key.sid)


@dataclass(frozen=True)
class Population:
    """Every judged item of one kind in one run, and the judges that judged them, as columns.

    ``fields`` holds the key columns (``cell`` codes into ``cells``, ``sid``, ``idx``; or
    ``a``, ``b``); ``verdicts``, ``scores`` and ``judged`` (did the judge judge the item)
    one column per judge; ``merges`` per dedup mode. ``texts`` are the claims' texts or the
    pairs' names; answers' texts are read when items are materialized (:meth:`texts_of`).
    """

    kind: str                   # claim | dedup_pair | answer | relevance (the label kind)
    run: str                    # the run's name (a dedup run's for pairs, the dataset's for relevance)
    owner_id: int               # runs.id (dedup_runs.id for pairs, datasets.id for relevance): where the labels hang
    judges: tuple[str, ...]     # in report order; claims end with the vote
    source: str                 # what was judged, for a report's header
    fields: dict[str, np.ndarray]
    verdicts: dict[str, np.ndarray]
    scores: dict[str, np.ndarray]
    judged: dict[str, np.ndarray]
    cells: tuple[str, ...] = ()
    texts: Sequence[str] | None = None
    merges: dict[str, np.ndarray] = field(default_factory=dict)
    threshold: float | None = None  # dedup: the merge threshold

    def __len__(self) -> int:
        return len(next(iter(self.fields.values())))

    @property
    def items(self) -> "ItemView":
        """Every item, in key order, as :class:`JudgedItem` objects made on access."""
        return ItemView(self, np.arange(len(self), dtype=np.int64))

    def composite(self) -> np.ndarray:
        """Each item's key packed into one int64, ascending (items are in key order)."""
        return _pack(self.kind, self.fields)

    def key(self, i: int) -> ItemKey:
        """The key of the item at position ``i``."""
        f = self.fields
        if self.kind == "dedup_pair":
            return PairKey(self.owner_id, int(f["a"][i]), int(f["b"][i]))
        if self.kind == "relevance":
            return RelevanceKey(self.owner_id, int(f["sid"][i]), int(f["uid"][i]))
        cell = self.cells[int(f["cell"][i])]
        if self.kind == "claim":
            return ClaimKey(self.owner_id, cell, int(f["sid"][i]), int(f["idx"][i]))
        return AnswerKey(self.owner_id, cell, int(f["sid"][i]))

    def positions(self, keys: Sequence[ItemKey]) -> np.ndarray:
        """The position of each key in the population, −1 where it is not an item of it."""
        if not len(keys) or not len(self):
            return np.full(len(keys), -1, dtype=np.int64)
        code = {c: i for i, c in enumerate(self.cells)}
        cols: dict[str, list[int]] = {name: [] for name in self.fields}
        ok = np.ones(len(keys), dtype=bool)
        for n, key in enumerate(keys):
            if owner_of(key) != self.owner_id:
                ok[n] = False
            for name in cols:
                value = code.get(key.cell_id, -1) if name == "cell" else getattr(key, name)
                ok[n] &= value >= 0
                cols[name].append(max(value, 0))
        wanted = _pack(self.kind, {name: np.asarray(v, dtype=np.int64) for name, v in cols.items()})
        have = self.composite()
        at = np.minimum(np.searchsorted(have, wanted), len(have) - 1)
        return np.where(ok & (have[at] == wanted), at, -1)

    def item(self, i: int, text: str | None = None) -> JudgedItem:
        """The item at position ``i`` (``text`` supplies an answer's, which is not held)."""
        judges = [j for j in self.judges if self.judged[j][i]]
        verdicts = {j: bool(self.verdicts[j][i]) for j in judges}
        scores = {j: float(self.scores[j][i]) for j in judges}
        merges = {j: bool(m[i]) for j, m in self.merges.items() if self.judged[j][i]}
        if text is None:
            text = self.texts[i] if self.texts is not None else ""
        return JudgedItem(self.key(i), verdicts, scores, text, merges)

    def texts_of(self, store: Store, positions: Sequence[int]) -> list[str]:
        """The texts of the items at ``positions``; answers' are read from their events."""
        if self.texts is not None:
            return [self.texts[int(i)] for i in positions]
        out = []
        for i in positions:
            key = self.key(int(i))
            row = store.conn.execute("SELECT prediction FROM events WHERE run_id = ? AND cell_id = ? AND sid = ?",
                                     (key.run_id, key.cell_id, key.sid)).fetchone()
            out.append((row[0] if row else None) or "")
        return out

    def materialize(self, store: Store, positions: Sequence[int]) -> list[JudgedItem]:
        """The items at ``positions`` with their texts (answers' read from the store now)."""
        return [self.item(int(i), text) for i, text in zip(positions, self.texts_of(store, positions))]


class ItemView(Sequence[JudgedItem]):
    """Items of a population at some positions, made into :class:`JudgedItem` objects on access
    (an answer's text is "" here: :meth:`Population.materialize` reads it)."""

    def __init__(self, population: Population, positions: np.ndarray):
        self.population, self.positions = population, positions

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, i: int) -> JudgedItem: ...

    @overload
    def __getitem__(self, i: slice) -> "ItemView": ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ItemView(self.population, self.positions[i])
        return self.population.item(int(self.positions[i]))

    def __iter__(self) -> Iterator[JudgedItem]:
        return (self.population.item(int(p)) for p in self.positions)


def _pack(kind: str, fields: dict[str, np.ndarray]) -> np.ndarray:
    if kind == "dedup_pair":
        return (fields["a"].astype(np.int64) << 31) | fields["b"].astype(np.int64)
    if kind == "relevance":
        return (fields["sid"].astype(np.int64) << _UID_BITS) | fields["uid"].astype(np.int64)
    packed = fields["cell"].astype(np.int64) << (_SID_BITS + _IDX_BITS) | fields["sid"].astype(np.int64) << _IDX_BITS
    return packed | fields["idx"].astype(np.int64) if kind == "claim" else packed


def _check_ranges(kind: str, fields: dict[str, np.ndarray], cells: Sequence[str]) -> None:
    limits = ({"a": 31, "b": 31} if kind == "dedup_pair" else {"sid": 31, "uid": _UID_BITS} if kind == "relevance"
              else {"sid": _SID_BITS, "idx": _IDX_BITS})
    for name, bits in limits.items():
        if name in fields and len(fields[name]) and (fields[name].min() < 0 or fields[name].max() >= 1 << bits):
            raise ValueError(f"a {name} outside 0..2^{bits} cannot be keyed")
    if len(cells) >= 1 << _CELL_BITS:
        raise ValueError(f"{len(cells)} cells: at most {1 << _CELL_BITS} can be keyed")


_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a bijective 64-bit hash (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _M64
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _M64
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _M64
        return x ^ (x >> np.uint64(31))


def _cell_word(cell: str) -> int:
    return int.from_bytes(hashlib.sha256(cell.encode()).digest()[:8], "little")


def uniform_ranks(population: Population, seed: int) -> np.ndarray:
    """Each item's place in the uniform queue (uint64; sort ascending).

    A hash of (seed, kind, key), so the order is a uniform random permutation that is the
    same on every machine and for every annotator (two annotators label the same items
    first, which measures their agreement), and that new items join without reshuffling the
    others. Cells enter by a hash of their id, not their position.
    """
    kind_word = {"claim": 1, "dedup_pair": 2, "answer": 3, "relevance": 4}[population.kind]
    h = _mix(_mix(np.full(len(population), np.uint64(seed & 0xFFFFFFFFFFFFFFFF))) ^ np.uint64(kind_word))
    f = population.fields
    if population.kind == "dedup_pair":
        parts = [f["a"], f["b"]]
    elif population.kind == "relevance":
        parts = [f["sid"], f["uid"]]
    else:
        words = np.array([_cell_word(c) for c in population.cells], dtype=np.uint64)
        parts = [words[f["cell"]] if len(words) else np.zeros(0, np.uint64), f["sid"]]
        if population.kind == "claim":
            parts.append(f["idx"])
    for part in parts:
        h = _mix(h ^ np.asarray(part).astype(np.uint64))
    return h


def uniform_rank(seed: int, key: ItemKey) -> int:
    """One item's place in the uniform queue (as :func:`uniform_ranks`, for a key on its own)."""
    if isinstance(key, PairKey):
        pop = _single("dedup_pair", {"a": np.array([key.a]), "b": np.array([key.b])}, ())
    elif isinstance(key, RelevanceKey):
        pop = _single("relevance", {"sid": np.array([key.sid]), "uid": np.array([key.uid])}, ())
    else:
        fields = {"cell": np.array([0]), "sid": np.array([key.sid])}
        if isinstance(key, ClaimKey):
            fields["idx"] = np.array([key.idx])
        pop = _single("claim" if isinstance(key, ClaimKey) else "answer", fields, (key.cell_id,))
    return int(uniform_ranks(pop, seed)[0])


def _single(kind: str, fields: dict[str, np.ndarray], cells: tuple[str, ...]) -> Population:
    return Population(kind, "", 0, (), "", fields, {}, {}, {}, cells)


def _cell_codes(cell_ids: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray]:
    cells = tuple(sorted(set(cell_ids)))
    code = {c: i for i, c in enumerate(cells)}
    return cells, np.fromiter((code[c] for c in cell_ids), dtype=np.int32, count=len(cell_ids))


def claim_population(store: Store, run: str | None = None, claim_run: int | None = None, *,
                     cell_id: str | None = None) -> Population:
    """The claims of the run's newest claim run with finished jobs (or of ``claim_run``); one cell's if given."""
    r = get_run(store, run)
    if claim_run is None:
        info = latest_claim_run(store, r)
        if info is None:
            raise NotFound(f"run {r.name} has no verified claims yet: run `workbench claims run {r.name}` first")
        claim_run, config = info.id, info.config
    else:
        row = store.conn.execute("SELECT config FROM claim_runs WHERE id = ? AND run_id = ?",
                                 (claim_run, r.id)).fetchone()
        if row is None:
            raise NotFound(f"run {r.name} has no claim run {claim_run}")
        config = json.loads(row[0])
    verifiers = tuple(config["verifiers"])
    rows = store.conn.execute(
        "SELECT c.cell_id, c.sid, c.idx, c.text, c.supported FROM claims c JOIN claim_jobs j"
        " ON j.claim_run_id = c.claim_run_id AND j.cell_id = c.cell_id AND j.sid = c.sid"
        " WHERE c.claim_run_id = ? AND j.status = 'done' AND (? IS NULL OR c.cell_id = ?)"
        " ORDER BY c.cell_id, c.sid, c.idx", (claim_run, cell_id, cell_id)).fetchall()
    cells, codes = _cell_codes([row[0] for row in rows])
    fields = {"cell": codes, "sid": np.array([row[1] for row in rows], dtype=np.int64),
              "idx": np.array([row[2] for row in rows], dtype=np.int64)}
    _check_ranges("claim", fields, cells)
    verdicts = {v: np.zeros(len(rows), dtype=bool) for v in verifiers}   # no shown unit: supported by none
    at = {(row[0], row[1], row[2]): i for i, row in enumerate(rows)}
    for cell, sid, idx, verifier, supported in store.conn.execute(
            "SELECT cell_id, sid, idx, verifier, max(supported) FROM claim_verdicts WHERE claim_run_id = ?"
            " AND verifier != 'vote' AND (? IS NULL OR cell_id = ?) GROUP BY cell_id, sid, idx, verifier",
            (claim_run, cell_id, cell_id)):
        i = at.get((cell, sid, idx))
        if verifier in verdicts and i is not None:
            verdicts[verifier][i] = bool(supported)
    verdicts[VOTE] = np.array([bool(row[4]) for row in rows], dtype=bool)
    judges = (*verifiers, VOTE)
    everyone = np.ones(len(rows), dtype=bool)
    return Population("claim", r.name, r.id, judges,
                      f"claim run {claim_run} ({config.get('decomposer')} decomposer; {', '.join(verifiers)})",
                      fields, verdicts, {j: verdicts[j].astype(np.float64) for j in judges},
                      {j: everyone for j in judges}, cells, [row[3] for row in rows])


def pair_population(store: Store, dedup_run: str | None = None, *, threshold: float = 0.5) -> Population:
    """The judged candidate pairs of a dedup run, every mode's verdict on each."""
    d = get_dedup_run(store, dedup_run)
    modes = tuple(d.config.modes)
    rows = store.conn.execute(
        "SELECT v.a, v.b, v.mode, v.is_coreferent, v.confidence FROM dedup_verdicts v"
        " WHERE v.run_id = ? AND v.status = 'done' ORDER BY v.a, v.b", (d.id,)).fetchall()
    pairs = sorted({(a, b) for a, b, *_ in rows})
    at = {pair: i for i, pair in enumerate(pairs)}
    n = len(pairs)
    verdicts = {m: np.zeros(n, dtype=bool) for m in modes}
    scores = {m: np.zeros(n) for m in modes}
    judged = {m: np.zeros(n, dtype=bool) for m in modes}
    merges = {m: np.zeros(n, dtype=bool) for m in modes}
    for a, b, mode, coreferent, confidence in rows:
        if mode not in verdicts:
            continue
        i, said, conf = at[(a, b)], bool(coreferent), float(confidence or 0.0)
        verdicts[mode][i], judged[mode][i] = said, True
        # The stated confidence is in the verdict; as a score of "same" it is turned for "different".
        scores[mode][i] = conf if said else 1.0 - conf
        merges[mode][i] = is_merged(said, conf, None, threshold)   # the judge's own call: no decision
    names = dict(store.conn.execute("SELECT eid, name FROM kg_entities WHERE kg_id = ?", (d.kg_id,)).fetchall()) \
        if n else {}
    fields = {"a": np.array([a for a, _ in pairs], dtype=np.int64), "b": np.array([b for _, b in pairs], dtype=np.int64)}
    _check_ranges("dedup_pair", fields, ())
    judged_modes = tuple(m for m in modes if judged[m].any()) or modes
    return Population("dedup_pair", d.name, d.id, judged_modes, f"dedup run {d.name} ({', '.join(modes)})", fields,
                      verdicts, scores, judged, (), [f"{names[a]} ~ {names[b]}" for a, b in pairs], merges, threshold)


def answer_population(store: Store, run: str | None = None, *, cell_id: str | None = None) -> Population:
    """The scored answers of a run, every cell (one if given); read in columns, without their texts."""
    r: Run = get_run(store, run)
    scorer = r.config.get("score", "acc")
    cells = tuple(c for (c,) in store.conn.execute(
        "SELECT cell_id FROM cells WHERE run_id = ? AND (? IS NULL OR cell_id = ?) ORDER BY cell_id",
        (r.id, cell_id, cell_id)))
    codes, sids, scores = [], [], []
    for code, cell in enumerate(cells):
        sid, score = _scored(store, r.id, cell)
        if len(sid):
            codes.append(np.full(len(sid), code, dtype=np.int32))
            sids.append(sid)
            scores.append(score)
    fields = {"cell": np.concatenate(codes) if codes else np.zeros(0, np.int32),
              "sid": np.concatenate(sids) if sids else np.zeros(0, np.int64)}
    _check_ranges("answer", fields, cells)
    score = np.concatenate(scores) if scores else np.zeros(0)
    return Population("answer", r.name, r.id, (scorer,), f"run {r.name}'s scorer ({scorer})", fields,
                      {scorer: score >= 0.5}, {scorer: score}, {scorer: np.ones(len(score), dtype=bool)}, cells)


# A score read as the integer score · 2^60: exact for every score in [0, 1] down to 2^-8 (and
# any dyadic one), and parsed in C with the sids; a cell holding another score is read per row.
_SCALE = 1 << 60
_SCORED = (f"SELECT group_concat(sid), group_concat(CAST(score * {_SCALE} AS INTEGER)),"
           f" coalesce(sum(score * {_SCALE} != CAST(score * {_SCALE} AS INTEGER) OR score < 0 OR score > 4), 0)"
           " FROM events WHERE run_id = ? AND cell_id = ? AND score IS NOT NULL")


def _scored(store: Store, run_id: int, cell: str) -> tuple[np.ndarray, np.ndarray]:
    """One cell's scored events: sids ascending and their scores (the covering index, no row objects)."""
    sid_text, score_text, inexact = store.conn.execute(_SCORED, (run_id, cell)).fetchone()
    if sid_text is None:
        return np.zeros(0, np.int64), np.zeros(0)
    if inexact:
        rows = store.conn.execute("SELECT sid, score FROM events WHERE run_id = ? AND cell_id = ?"
                                  " AND score IS NOT NULL ORDER BY sid", (run_id, cell)).fetchall()
        block = np.array(rows, dtype=np.float64)
        return block[:, 0].astype(np.int64), block[:, 1]
    sid = np.fromstring(sid_text, dtype=np.int64, sep=",")
    score = np.fromstring(score_text, dtype=np.int64, sep=",") / float(_SCALE)
    if len(sid) > 1 and not (np.diff(sid) > 0).all():     # the index gives sid order; make sure
        order = np.argsort(sid, kind="stable")
        sid, score = sid[order], score[order]
    return sid, score


def relevance_population(store: Store, dataset: str | None = None, *, retriever: str | None = None) -> Population:
    """The (question, chunk) pairs of a dataset (the latest judged when None) whose relevance the local model
    judged, for every retriever or ``retriever``'s; one judge per judging config, each pair's newest verdict."""
    if dataset is not None:
        get_dataset(store, dataset)     # NotFound names the known datasets
    runs = relevance_runs(store, dataset, retriever)
    if not runs:
        name = dataset if dataset is not None else latest_relevance_dataset(store)
        of = f"retriever {retriever!r} in " if retriever is not None else ""
        raise NotFound(f"no relevance judged for {of}dataset {name!r} yet: run `workbench retrieval judge {name}"
                       f"{f' --retriever {retriever}' if retriever else ''}` first")
    names = judge_names(runs)
    judges = tuple(dict.fromkeys(names[r.config_key] for r in sorted(runs, key=lambda r: r.id)))
    verdicts = judged_verdicts(store, runs)
    pairs = sorted({(v.sid, v.uid) for v in verdicts})
    at = {pair: i for i, pair in enumerate(pairs)}
    n = len(pairs)
    said = {j: np.zeros(n, dtype=bool) for j in judges}
    scores = {j: np.zeros(n) for j in judges}
    judged = {j: np.zeros(n, dtype=bool) for j in judges}
    for v in verdicts:                  # oldest run first: a newer verdict on a pair replaces an older one
        i, j = at[(v.sid, v.uid)], names[v.config_key]
        said[j][i], scores[j][i], judged[j][i] = v.relevant, v.score, True
    fields = {"sid": np.array([s for s, _ in pairs], dtype=np.int64), "uid": np.array([u for _, u in pairs],
                                                                                       dtype=np.int64)}
    _check_ranges("relevance", fields, ())
    first = runs[0]
    questions = dict(store.conn.execute("SELECT sid, question FROM samples WHERE dataset_id = ?", (first.dataset_id,)))
    chunks = dict(store.conn.execute("SELECT uid, chunk_id FROM units WHERE dataset_id = ?", (first.dataset_id,)))
    what = ", ".join(f"{r.retriever} top {r.k}" for r in runs) if retriever is None else \
        ", ".join(f"top {r.k}" for r in runs)
    source = (f"relevance of {retriever + ' ' if retriever else ''}retrieved chunks ({what}; judged by "
              f"{', '.join(judges)})")
    return Population("relevance", first.dataset, first.dataset_id, judges, source, fields, said, scores, judged, (),
                      [f"{questions.get(s, '?')} → {chunks.get(u, u)}" for s, u in pairs])


def population(store: Store, kind: str, run: str | None = None, *, claim_run: int | None = None,
               threshold: float = 0.5, retriever: str | None = None) -> Population:
    """The population of ``kind`` (``claims``, ``dedup``, ``answers`` or ``relevance``) in ``run`` (for relevance:
    the dataset, and only ``retriever``'s pairs if given)."""
    if kind == "claims":
        return claim_population(store, run, claim_run)
    if kind == "dedup":
        return pair_population(store, run, threshold=threshold)
    if kind == "answers":
        return answer_population(store, run)
    if kind == "relevance":
        return relevance_population(store, run, retriever=retriever)
    raise ValueError(f"kind {kind!r} is not one of {', '.join(POPULATION_KINDS)}")
