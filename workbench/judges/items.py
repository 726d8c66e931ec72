"""The judged items of a run, one population per kind, with every judge's verdict on each (issue 18).

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

Each item has a stable integer ``key`` (its position in a fixed order of the population)
that keys the bootstrap, so every judge of one population is resampled alike.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from workbench.claims.report import latest_claim_run
from workbench.kg.runner import get_dedup_run
from workbench.store.db import Store
from workbench.store.labels import AnswerKey, ClaimKey, ItemKey, PairKey
from workbench.store.lookup import NotFound
from workbench.store.queries import Run, get_run

__all__ = ["JudgedItem", "Population", "claim_population", "pair_population", "answer_population", "population",
           "uniform_rank", "VOTE", "POPULATION_KINDS"]

VOTE = "vote"
#: The kinds a report or a queue is asked for on the command line, and the label kind each holds.
POPULATION_KINDS = {"claims": "claim", "dedup": "dedup_pair", "answers": "answer"}


@dataclass(frozen=True)
class JudgedItem:
    """One judged item: its key, what each judge said (and scored), and what a human is shown."""

    key: ItemKey
    verdicts: dict[str, bool]
    scores: dict[str, float]
    text: str                                   # the claim, "name a ~ name b", or the answer
    merges: dict[str, bool] = field(default_factory=dict)   # dedup only: per mode, the judge merges it

    @property
    def sample(self) -> tuple[str, int] | None:
        """(cell_id, sid) of a claim or an answer; None for a dedup pair."""
        return None if isinstance(self.key, PairKey) else (self.key.cell_id, self.key.sid)


@dataclass(frozen=True)
class Population:
    """Every judged item of one kind in one run, and the judges that judged them."""

    kind: str                   # claim | dedup_pair | answer (the label kind)
    run: str                    # the run's name (a dedup run's for pairs)
    owner_id: int               # runs.id (dedup_runs.id for pairs): where the labels hang
    judges: tuple[str, ...]     # in report order; claims end with the vote
    items: list[JudgedItem]
    source: str                 # what was judged, for a report's header
    threshold: float | None = None   # dedup: the merge threshold

    def index(self) -> dict[ItemKey, int]:
        """Item key → bootstrap key (its position)."""
        return {item.key: i for i, item in enumerate(self.items)}


def uniform_rank(seed: int, key: ItemKey) -> bytes:
    """The item's place in the uniform queue: a hash of (seed, key), so the order is a uniform
    random permutation that is the same on every machine and for every annotator (two
    annotators label the same items first, which measures their agreement) and that new items
    join without reshuffling the others."""
    return hashlib.sha256(json.dumps([seed, type(key).__name__, *vars(key).values()]).encode()).digest()


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
    per_verifier: dict[tuple, dict[str, bool]] = {}
    for cell, sid, idx, verifier, supported in store.conn.execute(
            "SELECT cell_id, sid, idx, verifier, max(supported) FROM claim_verdicts WHERE claim_run_id = ?"
            " AND verifier != 'vote' AND (? IS NULL OR cell_id = ?) GROUP BY cell_id, sid, idx, verifier",
            (claim_run, cell_id, cell_id)):
        per_verifier.setdefault((cell, sid, idx), {})[verifier] = bool(supported)
    items = []
    for cell, sid, idx, text, supported in store.conn.execute(
            "SELECT c.cell_id, c.sid, c.idx, c.text, c.supported FROM claims c JOIN claim_jobs j"
            " ON j.claim_run_id = c.claim_run_id AND j.cell_id = c.cell_id AND j.sid = c.sid"
            " WHERE c.claim_run_id = ? AND j.status = 'done' AND (? IS NULL OR c.cell_id = ?)"
            " ORDER BY c.cell_id, c.sid, c.idx", (claim_run, cell_id, cell_id)):
        shown = per_verifier.get((cell, sid, idx), {})
        verdicts = {v: shown.get(v, False) for v in verifiers}     # no shown unit: supported by none
        verdicts[VOTE] = bool(supported)
        items.append(JudgedItem(ClaimKey(r.id, cell, sid, idx), verdicts,
                                {j: float(v) for j, v in verdicts.items()}, text))
    return Population("claim", r.name, r.id, (*verifiers, VOTE), items,
                      f"claim run {claim_run} ({config.get('decomposer')} decomposer; {', '.join(verifiers)})")


def pair_population(store: Store, dedup_run: str | None = None, *, threshold: float = 0.5) -> Population:
    """The judged candidate pairs of a dedup run, every mode's verdict on each."""
    d = get_dedup_run(store, dedup_run)
    modes = tuple(d.config.modes)
    by_pair: dict[tuple[int, int], dict[str, tuple[bool, float]]] = {}
    names: dict[tuple[int, int], str] = {}
    for a, b, name_a, name_b, mode, coreferent, confidence in store.conn.execute(
            "SELECT v.a, v.b, ea.name, eb.name, v.mode, v.is_coreferent, v.confidence FROM dedup_verdicts v"
            " JOIN kg_entities ea ON ea.kg_id = ? AND ea.eid = v.a JOIN kg_entities eb ON eb.kg_id = ? AND eb.eid = v.b"
            " WHERE v.run_id = ? AND v.status = 'done' ORDER BY v.a, v.b, v.mode", (d.kg_id, d.kg_id, d.id)):
        by_pair.setdefault((a, b), {})[mode] = (bool(coreferent), float(confidence or 0.0))
        names[(a, b)] = f"{name_a} ~ {name_b}"
    items = []
    for (a, b), judged in by_pair.items():
        verdicts = {m: v for m, (v, _) in judged.items()}
        # The stated confidence is in the verdict; as a score of "same" it is turned for "different".
        scores = {m: (c if v else 1.0 - c) for m, (v, c) in judged.items()}
        merges = {m: v and c >= threshold for m, (v, c) in judged.items()}
        items.append(JudgedItem(PairKey(d.id, a, b), verdicts, scores, names[(a, b)], merges))
    judged_modes = tuple(m for m in modes if any(m in i.verdicts for i in items)) or modes
    return Population("dedup_pair", d.name, d.id, judged_modes, items,
                      f"dedup run {d.name} ({', '.join(modes)})", threshold)


def answer_population(store: Store, run: str | None = None, *, cell_id: str | None = None) -> Population:
    """The scored answers of a run, every cell (one if given)."""
    r: Run = get_run(store, run)
    scorer = r.config.get("score", "acc")
    items = [JudgedItem(AnswerKey(r.id, cell, sid), {scorer: score >= 0.5}, {scorer: float(score)}, prediction or "")
             for cell, sid, score, prediction in store.conn.execute(
                 "SELECT cell_id, sid, score, prediction FROM events WHERE run_id = ? AND score IS NOT NULL"
                 " AND (? IS NULL OR cell_id = ?) ORDER BY cell_id, sid", (r.id, cell_id, cell_id))]
    return Population("answer", r.name, r.id, (scorer,), items, f"run {r.name}'s scorer ({scorer})")


def population(store: Store, kind: str, run: str | None = None, *, claim_run: int | None = None,
               threshold: float = 0.5) -> Population:
    """The population of ``kind`` (``claims``, ``dedup`` or ``answers``) in ``run``."""
    if kind == "claims":
        return claim_population(store, run, claim_run)
    if kind == "dedup":
        return pair_population(store, run, threshold=threshold)
    if kind == "answers":
        return answer_population(store, run)
    raise ValueError(f"kind {kind!r} is not one of {', '.join(POPULATION_KINDS)}")
