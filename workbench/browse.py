"""Reading a run sample by sample: quadrant filters, search, paging and the detail of one sample.

Only one page of rows is ever materialized. Every filter is parameterized SQL; user
search text is bound, never spliced (docs/design.md §11).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from workbench.evidence import Unit, get_tokenizer, order_units, render_line
from workbench.runs.generation import stored_generations
from workbench.runs.prompt import PromptTemplate
from workbench.runs.sweep import oracle_path
from workbench.store.db import Store
from workbench.store.lookup import NotFound
from workbench.store.queries import Run, Sample, load_sample

# Quadrants of (H_set, H_vis, s) the samples view filters by (docs/design.md §9).
QUADRANTS: dict[str, tuple[str, str]] = {
    "all": ("1", "every sample"),
    "dissipation": ("e.h_vis = 1 AND e.score < 1", "visible hit but wrong"),
    "leakage": ("e.h_vis = 0 AND e.score > 0", "no visible hit but right"),
    "interface": ("e.h_set = 1 AND e.h_vis = 0", "retrieved, lost to the window"),
    "retrieval-miss": ("e.h_set = 0", "no gold path in the top K"),
    "right": ("e.score = 1", "scored 1"),
    "unscored": ("e.score IS NULL AND e.status != 'error'", "not generated yet"),
    "error": ("e.status = 'error'", "generation failed"),
    # Bound to the latest claim run (one parameter, see list_samples).
    "unsupported": ("EXISTS (SELECT 1 FROM claim_jobs cj WHERE cj.claim_run_id = ? AND cj.cell_id = e.cell_id"
                    " AND cj.sid = e.sid AND cj.status = 'done' AND cj.n_supported < cj.n_claims)",
                    "an answer with unsupported claims"),
}


@dataclass(frozen=True)
class SampleRow:
    """One line of the samples view."""

    sid: int
    sample_id: str
    question: str
    h_set: int
    h_vis: int
    k_eff: int
    truncated: int
    score: float | None
    prediction: str | None
    tags: tuple[str, ...]


@dataclass(frozen=True)
class SamplePage:
    rows: list[SampleRow]
    total: int
    offset: int
    limit: int


def list_samples(store: Store, run: Run, cell_id: str, *, quadrant: str = "all", search: str = "",
                 tag: str | None = None, offset: int = 0, limit: int = 50) -> SamplePage:
    """One page of the run's samples in ``cell_id``, filtered by quadrant, text and tag."""
    if quadrant not in QUADRANTS:
        raise ValueError(f"unknown quadrant {quadrant!r}; choose from {', '.join(QUADRANTS)}")
    where = [QUADRANTS[quadrant][0]]
    params: list[Any] = [run.dataset_id, run.id, cell_id]
    if quadrant == "unsupported":
        from workbench.claims.report import latest_claim_run

        info = latest_claim_run(store, run)
        params.append(info.id if info else -1)
    if search.strip():
        pattern = _contains(search)
        # Questions and sample ids only: matching predictions would read every event row.
        where.append("(s.question LIKE ? ESCAPE '\\' OR s.id LIKE ? ESCAPE '\\')")
        params += [pattern, pattern]
    if tag and tag.strip():
        # Part of a tag is enough ("alias" finds alias-miss): nobody remembers the exact spelling.
        where.append("EXISTS (SELECT 1 FROM tags t WHERE t.dataset_id = s.dataset_id AND t.sid = s.sid"
                     " AND t.tag LIKE ? ESCAPE '\\')")
        params.append(_contains(tag))
    base = (" FROM events e JOIN samples s ON s.dataset_id = ? AND s.sid = e.sid"
            " WHERE e.run_id = ? AND e.cell_id = ? AND " + " AND ".join(where))
    total = store.conn.execute("SELECT count(*)" + base, params).fetchone()[0]
    rows = store.conn.execute(
        "SELECT s.sid, s.id, s.question, e.h_set, e.h_vis, e.k_eff, e.truncated, e.score, e.prediction,"
        " (SELECT group_concat(t.tag, ' ') FROM tags t WHERE t.dataset_id = s.dataset_id AND t.sid = s.sid)"
        + base + " ORDER BY e.sid LIMIT ? OFFSET ?", [*params, limit, max(0, offset)]).fetchall()
    return SamplePage([SampleRow(*r[:9], tuple(sorted((r[9] or "").split()))) for r in rows], total, offset, limit)


def _contains(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere, with LIKE's wildcards in it taken literally."""
    return "%" + text.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def matching_tags(tags: list[str] | dict[str, int], text: str) -> list[str]:
    """The tags the samples view's tag filter ``text`` matches (case-insensitive substring, as in SQL)."""
    needle = text.strip().lower()
    return [t for t in tags if needle in t.lower()]


@dataclass(frozen=True)
class EvidenceLine:
    """A retrieved unit in window order, with what happened to it at the budget cut."""

    label: str
    text: str
    gold: bool
    state: str          # "visible" | "cut" (partly in the window, so not visible) | "hidden" (after the cut)


@dataclass
class ModelAnswer:
    """One model's answer to a sample in one cell: what the Sample detail shows side by side."""

    model: str
    cell_id: str
    status: str
    prediction: str | None
    score: float | None


@dataclass
class SampleDetail:
    """Everything the sample-detail screen shows for one sample in one cell."""

    sample: Sample
    cell_id: str
    cells: list[str]
    gold_paths: list[list[str]]
    evidence: list[EvidenceLine]
    event: dict[str, Any]
    messages: list[dict[str, str]]
    output: str | None
    tags: list[str] = field(default_factory=list)
    note: str = ""
    claims: dict[str, Any] | None = None    # the latest claim run's verdicts on this answer (claims.report)
    # A run of several models: every model's answer to this question in a cell of the same K, B and format.
    by_model: list[ModelAnswer] = field(default_factory=list)


def sample_detail(store: Store, run: Run, sid: int, cell_id: str) -> SampleDetail:
    """The sample, its gold paths, the cell's window with the cut, the prompt, output and score."""
    from workbench.triage import note_of, tags_of

    try:
        sample = load_sample(store, run.dataset_id, sid)
    except NotFound:
        raise ValueError(f"no sample {sid} in dataset {run.dataset!r}") from None
    from workbench.runs.report import cell_order

    # Ledger order (format, B, numeric K, oracle last), not string order where k10 sorts before k2.
    has_job = {r[0] for r in store.conn.execute("SELECT cell_id FROM events WHERE run_id = ? AND sid = ?",
                                                (run.id, sid))}
    cells = [c for c in cell_order(store, run) if c in has_job]
    row = store.conn.execute(
        "SELECT c.kind, c.k, c.budget, c.format, c.shuffle, e.h_set, e.h_vis, e.k_eff, e.evidence_tokens,"
        " e.truncated, e.visible, v.text, e.status, e.error, e.prediction, e.score, e.citations, e.gen_key, e.source"
        " FROM events e JOIN cells c ON c.run_id = e.run_id AND c.cell_id = e.cell_id"
        " JOIN evidence v ON v.sha256 = e.evidence_sha256 WHERE e.run_id = ? AND e.cell_id = ? AND e.sid = ?",
        (run.id, cell_id, sid)).fetchone()
    if row is None:
        raise ValueError(f"no job ({sample.id!r}, {cell_id!r}) in run {run.name!r}")
    keys = ("kind", "k", "budget", "format", "shuffle", "h_set", "h_vis", "k_eff", "evidence_tokens", "truncated",
            "visible", "window", "status", "error", "prediction", "score", "citations", "gen_key", "source")
    event = dict(zip(keys, row))
    ranked = _ranked(store, run, sid)
    gold = {u for p in sample.gold_paths for u in p}
    units = _units(store, run.dataset_id, gold | set(ranked))
    gold_paths = [[render_line(units[u]) for u in path] for path in sample.gold_paths]
    evidence = _evidence_lines(run, sample, event, units, gold, ranked)
    model = store.conn.execute("SELECT model FROM cells WHERE run_id = ? AND cell_id = ?", (run.id, cell_id)).fetchone()
    gen = stored_generations(run.config).get(model[0] if model else None)
    template = (PromptTemplate(gen["system"], gen["user"], gen["answer_format"]) if gen else PromptTemplate())
    output = None
    if event["gen_key"]:
        hit = store.conn.execute("SELECT output FROM generations WHERE key = ?", (event["gen_key"],)).fetchone()
        output = hit[0] if hit else None
    from workbench.claims.report import answer_claims

    return SampleDetail(sample, cell_id, cells, gold_paths, evidence, event,
                        template.messages(event["window"], sample.question), output,
                        tags_of(store, run.dataset_id, sid), note_of(store, run.dataset_id, sid),
                        answer_claims(store, run, cell_id, sid), _answers_by_model(store, run, sid, cell_id))


def _answers_by_model(store: Store, run: Run, sid: int, cell_id: str) -> list[ModelAnswer]:
    """Each model's answer to ``sid`` in the cells of ``cell_id``'s K, B, format (and shuffle), in the run's
    model order; empty for a run of one model."""
    models = list(stored_generations(run.config))
    if len(models) < 2:
        return []
    rows = store.conn.execute(
        "SELECT c.model, e.cell_id, e.status, e.prediction, e.score FROM cells c"
        " JOIN cells here ON here.run_id = c.run_id AND here.cell_id = ?"
        " JOIN events e ON e.run_id = c.run_id AND e.cell_id = c.cell_id AND e.sid = ?"
        " WHERE c.run_id = ? AND c.kind = here.kind AND c.budget = here.budget AND c.format = here.format"
        " AND c.k IS here.k AND c.shuffle IS here.shuffle", (cell_id, sid, run.id)).fetchall()
    return sorted((ModelAnswer(*row) for row in rows), key=lambda a: models.index(a.model))


def _ranked(store: Store, run: Run, sid: int) -> list[int]:
    row = store.conn.execute("SELECT uids FROM retrievals WHERE dataset_id = ? AND retriever = ? AND sid = ?",
                             (run.dataset_id, run.retriever, sid)).fetchone()
    return json.loads(row[0]) if row else []


def _units(store: Store, dataset_id: int, uids: set[int]) -> dict[int, Unit]:
    if not uids:
        return {}
    marks = ",".join("?" * len(uids))
    out = {}
    for uid, head, rel, tail, doc_id, text in store.conn.execute(
            f"SELECT uid, head, relation, tail, doc_id, text FROM units WHERE dataset_id = ? AND uid IN ({marks})",
            (dataset_id, *uids)):
        out[uid] = (Unit(uid, "triple", head, rel, tail) if head is not None
                    else Unit(uid, "chunk", doc_id=doc_id, text=text))
    return out


def _evidence_lines(run, sample, event, units, gold, ranked) -> list[EvidenceLine]:
    """Re-linearize the cell's units exactly as the sweep did and mark where the budget cut falls."""
    seed = run.config.get("seed", 0)
    if event["kind"] == "retrieval":
        chosen = [units[u] for u in ranked[: event["k"]]]
        ordered = order_units(chosen, event["format"], seed=f"{seed}:{sample.id}")
    else:
        chosen = [units[u] for u in oracle_path(sample, units, get_tokenizer(run.config.get("tokenizer")))]
        ordered = order_units(chosen, event["format"], seed=f"{seed}:{sample.id}:oracle:{event['shuffle']}")
    visible = set(json.loads(event["visible"]))
    lines = []
    for unit in ordered:
        text = render_line(unit)
        state = "visible" if unit.uid in visible else "cut" if _partly_in(event["window"], text) else "hidden"
        lines.append(EvidenceLine(unit.label, text, unit.uid in gold, state))
    return lines


def _partly_in(window: str, line: str) -> bool:
    tail = window.rsplit("\n", 1)[-1]
    return bool(tail) and line.startswith(tail)
