"""``claims run``: decompose and verify every finished answer of a run, resumably.

A claim run is one verification config over one generation run. Each done event (an
answer of a sample in a cell) is a job, committed whole in its own transaction with its
claims, the claim × unit verdict table and its per-sample metrics. Every LLM call (the
decomposer's and the judge's) is committed to the generation cache the moment it
returns, so a kill at any point loses no model work: a resume skips finished jobs and
replays the calls of the interrupted one from the cache.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np

from workbench.claims.decompose import DECOMPOSERS, decompose
from workbench.claims.metrics import SampleClaims, sample_metrics
from workbench.claims.types import Claim
from workbench.claims.verify import VERIFIERS, make_verifiers
from workbench.claims.vote import TIES, ClaimResult, judge_claim, summarize
from workbench.metrics.scoring import normalize_answer
from workbench.models.cached import default_llm
from workbench.passes import CLAIMS_KEY_DIGITS, PassReport, PassWork, config_hash, drive, plan_or_find
from workbench.store.db import Store, utcnow
from workbench.store.queries import Run, Sample, load_samples


@dataclass(frozen=True)
class ClaimsConfig:
    """What determines a claim run's results (its key); execution settings are not part of it."""

    decomposer: str = "hybrid"
    verifiers: tuple[str, ...] = ("lexical", "llm_judge")
    ties: str = "unsupported"
    reject_below: float = 0.5
    lexical_threshold: float = 0.6
    embedding_threshold: float = 0.75
    long_clause: int = 40
    model: str = "default"                  # the GGUF of the llm decomposer and the judge
    embedding_model: str | None = None
    nli_model: str | None = None

    def validate(self) -> None:
        """Reject a config that cannot work, naming the option."""
        if self.decomposer not in DECOMPOSERS:
            raise ValueError(f"--decomposer: {self.decomposer!r} is not one of {', '.join(DECOMPOSERS)}")
        if not self.verifiers:
            raise ValueError("--verifiers: give at least one of " + ", ".join(VERIFIERS))
        for name in self.verifiers:
            if name not in VERIFIERS:
                raise ValueError(f"--verifiers: {name!r} is not one of {', '.join(VERIFIERS)}")
        if self.ties not in TIES:
            raise ValueError(f"--ties: {self.ties!r} is not one of {', '.join(TIES)}")
        if not 0.0 <= self.reject_below <= 1.0:
            raise ValueError("--reject-below must be within [0, 1]")

    @property
    def needs_llm(self) -> bool:
        return self.decomposer in ("llm", "hybrid") or "llm_judge" in self.verifiers

    def key(self) -> str:
        """The claim run's identity among those over one run (``claim_runs.config_key``)."""
        return config_hash(asdict(self))[:CLAIMS_KEY_DIGITS]


@dataclass
class ClaimsReport(PassReport):
    """What one ``claims run`` did."""

    claim_run: int = 0
    claims: int = 0


def claim_run_id(store: Store, run: Run, config: ClaimsConfig) -> int:
    """The id of ``config``'s claim run over ``run``, created on first use."""
    key = config.key()

    def find(conn):
        return conn.execute("SELECT id FROM claim_runs WHERE run_id = ? AND config_key = ?", (run.id, key)).fetchone()

    def write(conn, _) -> int:
        return conn.execute("INSERT INTO claim_runs (run_id, config_key, config, created_at) VALUES (?, ?, ?, ?)",
                            (run.id, key, json.dumps(asdict(config)), utcnow())).lastrowid

    found, created = plan_or_find(store, find, write)
    return found[0] if found is not None else created


def _check_cells(store: Store, run: Run, cells: Sequence[str] | None) -> None:
    unknown = set(cells or ()) - {c for (c,) in store.conn.execute("SELECT cell_id FROM cells WHERE run_id = ?",
                                                                    (run.id,))}
    if unknown:
        raise ValueError(f"--cell: {', '.join(sorted(unknown))} not in run {run.name!r}")


def plan_jobs(store: Store, run: Run, crid: int, *, cells: Sequence[str] | None = None,
              limit: int | None = None) -> int:
    """Add a job for every done event of ``run`` (in ``cells``, first ``limit`` samples); returns the new count."""
    where, params = ["run_id = ?", "status = 'done'"], [run.id]
    _check_cells(store, run, cells)
    if cells:
        where.append(f"cell_id IN ({','.join('?' * len(cells))})")
        params += list(cells)
    if limit is not None:
        where.append("sid IN (SELECT sid FROM samples WHERE dataset_id = ? ORDER BY sid LIMIT ?)")
        params += [run.dataset_id, limit]
    with store.transaction() as conn:
        before = conn.total_changes
        conn.execute("INSERT OR IGNORE INTO claim_jobs (claim_run_id, cell_id, sid)"
                     f" SELECT ?, cell_id, sid FROM events WHERE {' AND '.join(where)}", (crid, *params))
        return conn.total_changes - before


def unit_text(row) -> str:
    """The plain text a verifier reads for a unit: ``h | r | t`` for a triple, the chunk text otherwise."""
    head, relation, tail, text = row
    return text if text is not None else f"{head} | {relation} | {tail}"


def list_answer(prediction: str | None) -> tuple[str, list[Claim] | None]:
    """The answer text of a prediction, and its claims when it is a list answer.

    A ``json``-format run stores a JSON list of answer strings; each item is one claim (an
    entity answer has nothing to decompose), with its span in the ``"; "``-joined text.
    Any other prediction is free text for the decomposer: (text, None).
    """
    text = prediction or ""
    try:
        items = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text, None
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        return text, None
    claims, pos = [], 0
    for item in dict.fromkeys(x.strip() for x in items if x.strip()):
        claims.append(Claim(item, pos, pos + len(item), "item"))
        pos += len(item) + 2
    return "; ".join(c.text for c in claims), claims


def _contains(haystack: str, needles: Sequence[str]) -> bool:
    hay = normalize_answer(haystack)
    return any(n and n in hay for n in needles)


def gold_items(sample: Sample) -> list[list[str]]:
    """Each gold answer with its aliases, normalized: the RAGChecker "ground-truth claims"."""
    return [[x for x in (normalize_answer(a), *(normalize_answer(al) for al in sample.aliases.get(a, []))) if x]
            for a in sample.answers]


def sample_table(answer: str, results: Sequence[ClaimResult], sample: Sample, units: Sequence[str],
                 uids: Sequence[int]) -> SampleClaims:
    """The boolean matrices of one answer, in the RAGChecker layout (see ``claims.metrics``)."""
    gold = gold_items(sample)
    all_gold = [x for item in gold for x in item]
    gold_uids = {u for path in sample.gold_paths for u in path}
    claim_unit = np.array([r.unit_votes for r in results], dtype=bool).reshape(len(results), len(units))
    return SampleClaims(
        claim_unit=claim_unit,
        claim_correct=np.array([_contains(r.claim.text, all_gold) for r in results], dtype=bool),
        gold_unit=np.array([[_contains(u, item) for u in units] for item in gold], dtype=bool).reshape(
            len(gold), len(units)),
        gold_in_response=np.array([_contains(answer, item) for item in gold], dtype=bool),
        relevant=np.array([u in gold_uids for u in uids], dtype=bool) if gold_uids else None)


class _ClaimsWork(PassWork):
    """A claim run's jobs (the answers of its run) and how one is verified; all writes on the calling thread."""

    def __init__(self, store: Store, run: Run, crid: int, config: ClaimsConfig, llm, verifiers,
                 report: ClaimsReport, cells: Sequence[str] | None, limit: int | None):
        self.store, self.run, self.crid, self.config, self.llm, self.report = store, run, crid, config, llm, report
        self.verifiers, self.cells, self.limit = verifiers, cells, limit
        self._claims: dict[str, list[Claim]] = {}
        self._verdicts: dict[tuple[str, str, str], object] = {}
        self._units: dict[int, str] = {}

    def load(self, statuses: tuple[str, ...]) -> list[tuple]:
        """Plan the claim run's jobs (one per done answer in scope), then select those with ``statuses``.

        A job is ``(cell_id, sid, prediction, visible)``: an answer and the units it saw.
        """
        run, cells, limit = self.run, self.cells, self.limit
        plan_jobs(self.store, run, self.crid, cells=cells, limit=limit)
        scope, params = "", []
        if cells:
            scope += f" AND j.cell_id IN ({','.join('?' * len(cells))})"
            params += list(cells)
        if limit is not None:
            scope += " AND j.sid IN (SELECT sid FROM samples WHERE dataset_id = ? ORDER BY sid LIMIT ?)"
            params += [run.dataset_id, limit]
        return self.store.conn.execute(
            "SELECT j.cell_id, j.sid, e.prediction, e.visible FROM claim_jobs j JOIN events e"
            " ON e.run_id = ? AND e.cell_id = j.cell_id AND e.sid = j.sid"
            f" WHERE j.claim_run_id = ? AND j.status IN ({','.join('?' * len(statuses))}){scope}"
            " ORDER BY j.sid, j.cell_id", (run.id, self.crid, *statuses, *params)).fetchall()

    def open(self) -> None:
        self.samples = {s.sid: s for s in load_samples(self.store, self.run.dataset_id)}

    def describe(self, job) -> str:
        cell_id, sid = job[:2]
        return f"{self.samples[sid].id} / {cell_id}"

    def unit_texts(self, uids: Sequence[int]) -> list[str]:
        missing = [u for u in uids if u not in self._units]
        for i in range(0, len(missing), 500):
            part = missing[i:i + 500]
            for uid, *row in self.store.conn.execute(
                    f"SELECT uid, head, relation, tail, text FROM units WHERE dataset_id = ? AND uid IN"
                    f" ({','.join('?' * len(part))})", (self.run.dataset_id, *part)):
                self._units[uid] = unit_text(row)
        return [self._units[u] for u in uids]

    def claims_of(self, answer: str) -> list[Claim]:
        # The same answer recurs across cells (and samples); decompose it once per pass.
        if answer not in self._claims:
            kw = {"long_clause": self.config.long_clause} if self.config.decomposer == "hybrid" else {}
            self._claims[answer] = decompose(answer, self.config.decomposer, self.llm, **kw)
        return self._claims[answer]

    def verdicts(self, claim: str, question: str, units: Sequence[str]) -> dict[str, list]:
        out = {}
        for verifier in self.verifiers:
            todo = [u for u in units if (verifier.name, claim, u) not in self._verdicts]
            if todo:
                for unit, verdict in zip(todo, verifier.verify(claim, todo, question=question)):
                    self._verdicts[(verifier.name, claim, unit)] = verdict
            out[verifier.name] = [self._verdicts[(verifier.name, claim, u)] for u in units]
        return out

    def process(self, job) -> None:
        cell_id, sid, prediction, visible_json = job
        visible = json.loads(visible_json)
        sample = self.samples[sid]
        answer, items = list_answer(prediction)
        units = self.unit_texts(visible)
        results = [judge_claim(c, self.verdicts(c.text, sample.question, units), self.config.ties)
                   for c in (items if items is not None else self.claims_of(answer))]
        summary = summarize(answer, results, reject_below=self.config.reject_below)
        metrics = sample_metrics(sample_table(answer, results, sample, units, visible))
        gold = [x for item in gold_items(sample) for x in item]
        claim_rows, verdict_rows = [], []
        for idx, r in enumerate(results):
            best_uid = visible[r.best_unit] if r.best_unit is not None else None
            claim_rows.append((self.crid, cell_id, sid, idx, r.claim.text, r.claim.start, r.claim.end, r.claim.source,
                               int(r.supported), int(_contains(r.claim.text, gold)), best_uid, r.best_score))
            for name, verdicts in r.verdicts.items():
                verdict_rows += [(self.crid, cell_id, sid, idx, uid, name, int(v.supported), float(v.score))
                                 for uid, v in zip(visible, verdicts)]
            verdict_rows += [(self.crid, cell_id, sid, idx, uid, "vote", int(vote), 1.0 if vote else 0.0)
                             for uid, vote in zip(visible, r.unit_votes)]
        n_supported = sum(r.supported for r in results)
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM claims WHERE claim_run_id = ? AND cell_id = ? AND sid = ?",
                         (self.crid, cell_id, sid))
            conn.execute("DELETE FROM claim_verdicts WHERE claim_run_id = ? AND cell_id = ? AND sid = ?",
                         (self.crid, cell_id, sid))
            conn.executemany("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", claim_rows)
            conn.executemany("INSERT INTO claim_verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)", verdict_rows)
            conn.execute("UPDATE claim_jobs SET status = 'done', error = NULL, n_claims = ?, n_supported = ?,"
                         " support_ratio = ?, rejected = ?, filtered_answer = ?, metrics = ?, finished_at = ?"
                         " WHERE claim_run_id = ? AND cell_id = ? AND sid = ?",
                         (len(results), n_supported, summary.support_ratio, int(summary.rejected),
                          summary.filtered_answer, json.dumps(metrics), utcnow(), self.crid, cell_id, sid))
        self.report.claims += len(results)

    def fail(self, job, message: str) -> None:
        cell_id, sid = job[:2]
        with self.store.transaction() as conn:
            conn.execute("UPDATE claim_jobs SET status = 'error', error = ?, finished_at = ?"
                         " WHERE claim_run_id = ? AND cell_id = ? AND sid = ?",
                         (message, utcnow(), self.crid, cell_id, sid))


def run_claims(store: Store, run: Run, config: ClaimsConfig, *, cells: Sequence[str] | None = None,
               limit: int | None = None, llm=None, retry_errors: bool = False,
               stop: threading.Event | None = None,
               progress: Callable[[int, int, ClaimsReport], None] | None = None, wait: bool = False,
               on_wait: Callable[[str], None] | None = None) -> ClaimsReport:
    """Verify the claims of every finished answer of ``run`` under ``config``; resumable.

    ``llm`` is a :class:`workbench.models.cached.CachedLLM`; by default one over
    ``config.model`` is built when the config needs it. ``stop`` (set from another thread,
    e.g. a SIGINT handler) ends the pass after the job in progress. One process at a time
    runs a claim run: another holding it raises :class:`~workbench.store.lease.LeaseHeld`,
    or with ``wait`` is waited for (``on_wait`` hears why).
    """
    config.validate()
    own_llm = llm is None and config.needs_llm
    if own_llm:
        llm = default_llm(store, config.model)   # loads the model on its first call only
    try:
        # Everything that can refuse the options does so before anything is written.
        verifiers = make_verifiers(config.verifiers, llm=llm, embedding_model=config.embedding_model,
                                   nli_model=config.nli_model, lexical_threshold=config.lexical_threshold,
                                   embedding_threshold=config.embedding_threshold)
        _check_cells(store, run, cells)
        crid = claim_run_id(store, run, config)
        report = ClaimsReport(run.name, claim_run=crid)
        work = _ClaimsWork(store, run, crid, config, llm, verifiers, report, cells, limit)
        return drive(store, f"claims:{crid}", work, report, retry_errors=retry_errors, stop=stop, progress=progress,
                     wait=wait, on_wait=on_wait)
    finally:
        if own_llm:
            llm.close()
