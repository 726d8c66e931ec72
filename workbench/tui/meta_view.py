"""What the Meta screens load and how they lay it out: the workers' loaders (each with its own connection,
no SQL here) and the text of a report row, an instance's responses and their claims."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.binding import Binding
from textual.content import Content

from workbench.claims.report import claim_runs
from workbench.meta.instances import Disagreement, disagreements, instance_detail
from workbench.meta.report import MetaRow, meta_report
from workbench.meta.sets import LABELS, get_meta_set, human_labels, meta_set_names
from workbench.metrics import stats
from workbench.store.lookup import NotFound
from workbench.store.queries import load_samples
from workbench.tables import DASH
from workbench.tui.claims_view import LABEL_STYLE

# A quick bootstrap paints first; the full one is the core's, the figure every other place shows: the Labels
# screen's preferences read RESAMPLES and SEED from here, so the two screens show one statistic.
QUICK_RESAMPLES = 200
RESAMPLES, SEED = stats.RESAMPLES, stats.SEED
WIDE = 100      # from this width the two responses sit side by side; below it, one above the other
PADDING = 2     # a DataTable column's cell padding, both sides
SCROLLBAR = 2   # a DataTable's vertical scrollbar
EMPTY = ("[b]No meta set in this database.[/b] A meta set is RAGChecker's human preference data: per query, two "
         "systems' answers and two annotators' labels of which is better. Import one in a shell:\n\n"
         "  [b]workbench import --from ragchecker-meta HUMAN.json --name NAME[/b]\n"
         "  (e.g. sample_data/ragchecker-meta/human_labeled_data.json)\n\n"
         "then check both answers of every query with the claims pipeline:\n\n"
         "  [b]workbench meta run NAME[/b]\n\n"
         "This screen then shows how far each checker's verdicts agree with the annotators' "
         "(`workbench meta report NAME` in a shell).")
INSTANCE_KEYS = Binding.Group("Instance", compact=True)
BOTH_KEYS = Binding.Group("Both", compact=True)
# An annotator's label read from one response's side: + this response better, − the other one.
PREFERENCE = {2: "much better", 1: "better", 0: "tie", -1: "worse", -2: "much worse"}


# -- what the workers load (each with its own connection; no SQL here) ---------------------------------------


@dataclass
class MetaView:
    """What the report worker returns: the set shown and its report, or what to do when there is none."""

    requested: str | None                 # the set asked for: a result for an older pick is dropped
    name: str | None = None
    names: list[str] = field(default_factory=list)
    instances: int = 0
    annotators: int = 0
    runs: tuple[str, str] | None = None
    rows: list[MetaRow] = field(default_factory=list)
    resamples: int = 0
    problem: str | None = None


def load_meta(store, name: str | None, resamples: int) -> MetaView:
    """The report of meta set ``name`` (the newest when None or gone) with the heading's counts."""
    names = meta_set_names(store)
    try:
        meta = get_meta_set(store, name if name in names else None)
    except NotFound:
        return MetaView(name, names=names, problem=EMPTY)
    rows = meta_report(store, meta, resamples=resamples, seed=SEED)
    annotators = {a for values in human_labels(store, meta).values() for _, a, _ in values}
    return MetaView(name, meta.name, names or [meta.name], len(load_samples(store, meta.dataset_id)), len(annotators),
                    (meta.run1.name, meta.run2.name), rows, resamples)


def load_disagreements(store, name: str, row: MetaRow) -> list[Disagreement]:
    return disagreements(store, get_meta_set(store, name), row)


def claim_run_key(row: MetaRow) -> str | None:
    """The claim configuration a detail shows: the row's own for a claims scorer, else None (the newest)."""
    return (row.config or {}).get("key") if row.kind == "claims" else None


def load_instance(store, name: str, sid: int, key: str | None) -> dict:
    """One instance's detail, each response's claims under ``key`` and the name of the checker that made them."""
    meta = get_meta_set(store, name)
    detail = instance_detail(store, meta, sid, key)
    for side, run in zip(detail["responses"], meta.runs()):
        claims = side["claims"]
        configs = {info.id: info.config for info in claim_runs(store, run)} if claims else {}
        config = configs.get(claims["claim_run"]) if claims else None
        side["checker"] = checker_name(config) if config else None
    return detail


def checker_name(config: dict) -> str:
    """``rule + lexical`` for a claim configuration, as ``meta report`` names its scorers."""
    return f"{config.get('decomposer', '?')} + {','.join(config.get('verifiers') or ())}"


# -- text ------------------------------------------------------------------------------------------------------


def signed(values: list[float]) -> list[str]:
    """Differences with their sign: ``+262`` when every one is a whole number (labels, word counts), else ``-0.33``."""
    whole = all(float(v).is_integer() for v in values)
    return [f"{v:+.0f}" if whole else f"{v:+.2f}" for v in values]


def split_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces, and inside a longer word after
    a ``.`` or ``_`` (``ragchecker.`` / ``correctness_label``) before it is ever cut."""
    pieces: list[tuple[str, bool]] = []     # (piece, glued to the one before: a part of a longer word)
    for word in text.split():
        glued = False
        while len(word) > width:
            cut = word.rfind(".", 0, width)
            cut = cut if cut > 0 else word.rfind("_", 0, width)
            cut = cut + 1 if cut > 0 else width
            pieces.append((word[:cut], glued))
            word, glued = word[cut:], True
        pieces.append((word, glued))
    lines: list[str] = []
    for piece, glued in pieces:
        joined = (lines[-1] + ("" if glued else " ") + piece) if lines else piece
        if lines and len(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(piece)
    return lines or [""]


def hanging(head: Content, body: str, width: int, style: str = "") -> list[Content]:
    """``body`` wrapped to ``width`` under a hanging indent as wide as ``head`` (which starts its first line)."""
    indent = head.cell_length
    lines = Content(" ".join(body.split())).wrap(max(width - indent, 8)) or [Content("")]
    return [(head if i == 0 else Content(" " * indent)) + (line.stylize(style) if style else line)
            for i, line in enumerate(lines)]


def wrapped(text: str, width: int, style: str = "") -> list[Content]:
    """``text`` wrapped to ``width``, its paragraphs kept."""
    out: list[Content] = []
    for paragraph in text.splitlines() or [""]:
        lines = Content(paragraph).wrap(max(width, 8)) if paragraph.strip() else [Content("")]
        out += [line.stylize(style) if style else line for line in lines]
    return out


def preference_words(value: int, side: int) -> str:
    """An annotator's label (−2 response 1 much better … 2 response 2 much better) read from ``side``."""
    return PREFERENCE[value if side == 2 else -value]


def response_lines(detail: dict, side: dict, width: int, row: MetaRow) -> list[Content]:
    """One response's column: system, the annotators' labels read from its side, its text, its claims with
    their verdict against the reference, and the reference's claims it holds or misses."""
    n = side["side"]
    system = side.get("system") or "system not named"
    out = [Content.assemble((f"Response {n}", "bold"), " · ", (system, "bold"))]
    for label in LABELS:
        said = [f"{preference_words(a[label], n)} (A{i})" for i, a in enumerate(detail["annotators"], start=1)
                if label in a]
        out += hanging(Content.assemble((f"{label:<12} ", "dim")), " · ".join(said) or DASH, width)
    claims = side.get("claims")
    metrics = (claims or {}).get("metrics") or {}
    shown = [f"{m} {metrics[m]:.2f}" for m in ("precision", "recall", "f1") if metrics.get(m) is not None]
    if shown:
        out += hanging(Content.assemble(("claims ", "dim")), " · ".join(shown), width)
    out.append(Content(""))
    out += wrapped(side["response"] or "(an empty response)", width)
    out.append(Content(""))
    out += claim_lines(claims, side.get("checker"), width, row)
    return out


def claim_lines(claims: dict | None, checker: str | None, width: int, row: MetaRow) -> list[Content]:
    """The response's claims (✔ entailed by the reference, ✘ not: E/N/C) and the reference's (✔ found, ✘ missed)."""
    if claims is None:
        what = "this scorer's claim run" if row.kind == "claims" else "a claim run"
        return hanging(Content.assemble(("Claims ", "bold")), f"none: the response has no {what} yet "
                       "(`workbench meta run`, in a shell)", width)
    if claims.get("status") != "done":
        why = f": {claims['error']}" if claims.get("error") else ""
        return hanging(Content.assemble(("Claims ", "bold")), f"not checked ({claims.get('status')}{why})", width)
    listed = claims["claims"]
    held = sum(1 for c in listed if _vote(c) == "E")
    by = f" ({checker})" if checker else ""
    out = wrapped(f"Claims vs the reference{by}", width, "bold")
    out += Content.assemble(" ", ("✔", "green"), f" {held} entailed (E) · ", ("✘", "red"),
                            f" {len(listed) - held} not (N neutral, C contradicted)").wrap(width)
    if not listed:
        out.append(Content.assemble(("  no claim found in the response", "dim")))
    for c in listed:
        vote = _vote(c)
        out += hanging(_head(vote == "E", vote), c["text"], width)
    reference = claims.get("reference")
    out.append(Content(""))
    if reference is None:
        out += hanging(Content.assemble(("Reference claims ", "bold")), "not stored by this claim run", width)
        return out
    found = sum(1 for r in reference if not r["missed"])
    out += wrapped("The reference's claims in this response", width, "bold")
    out += Content.assemble(" ", ("✔", "green"), f" {found} found · ", ("✘", "red"),
                            f" {len(reference) - found} missed").wrap(width)
    for r in reference:
        out += hanging(_head(not r["missed"], r["in_response"]), r["text"], width, "dim" if r["missed"] else "")
    return out


def _vote(claim: dict) -> str:
    return (claim.get("correct_by") or {}).get("vote") or ("E" if claim.get("correct") else "N")


def _head(good: bool, label: str) -> Content:
    return Content.assemble(" ", ("✔" if good else "✘", "green" if good else "red"), " ",
                            (label, LABEL_STYLE.get(label, "")), " ")


def row_name(row: MetaRow) -> str:
    return f"{row.scorer} · {row.label}"


# -- the screens -----------------------------------------------------------------------------------------------
