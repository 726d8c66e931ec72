"""The Claims section of the sample detail: the answer's claims beside the reference's, with every verdict.

Pure functions of ``answer_claims``'s dict (see ``workbench.claims.report``), so they can be
tested without an app. The rows come back already wrapped to the width they are given: the
screen then knows on which row each claim starts, and can scroll the cursor's claim into view.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content

from workbench.tui.markup import esc

WIDE = 110  # from this many screen columns, the response's and the reference's claims sit side by side
SPREAD = 8  # up to this many units, each is named with its label; more read as a strip of letters
LABEL_STYLE = {"E": "bold green", "N": "dim", "C": "bold red"}
KIND = {"faithful": ("✔", "green", ""), "self_knowledge": ("◆", "yellow", "self-knowledge"),
        "hallucination": ("✘", "red", "hallucination")}
RESPONSE, REFERENCE = 0, 1
SEPARATOR = Content.assemble((" │ ", "dim"))
INDENT = 4  # the cursor's ▶ and the claim's mark come before its text

Cursor = tuple[int, int]  # (RESPONSE or REFERENCE, index of the claim in that list)


@dataclass(frozen=True)
class ClaimsView:
    """The Claims section as rows of one screen line each, and where the cursor's claim is among them."""

    rows: list[Content]
    cursor_rows: tuple[int, int] | None = None  # (first row, how many rows) of the cursor's claim


def claim_counts(claims: dict | None) -> tuple[int, int]:
    """How many response claims and reference claims the cursor can visit (0, 0 when unverified)."""
    if not claims or claims.get("status") != "done":
        return 0, 0
    return len(claims["claims"]), len(claims.get("reference") or [])


def move_cursor(cursor: Cursor | None, counts: tuple[int, int], step: int) -> Cursor | None:
    """The claim ``step`` away: through the response's claims, then the reference's, round again."""
    total = counts[0] + counts[1]
    if not total:
        return None
    if cursor is None:
        pos = 0 if step > 0 else total - 1
    else:
        pos = (cursor[1] + (counts[0] if cursor[0] == REFERENCE else 0) + step) % total
    return (RESPONSE, pos) if pos < counts[0] else (REFERENCE, pos - counts[0])


def other_side(cursor: Cursor | None, counts: tuple[int, int]) -> Cursor | None:
    """The claim at the same place in the other list (the reference's first, with no cursor yet); ``cursor``
    itself when the other list is empty (nothing to go to: :func:`why_not` says why)."""
    side = REFERENCE if cursor is None or cursor[0] == RESPONSE else RESPONSE
    if not counts[side]:
        return cursor if cursor is not None else move_cursor(None, counts, 1)
    return side, min(0 if cursor is None else cursor[1], counts[side] - 1)


def why_not(claims: dict | None, cursor: Cursor | None = None, other: bool = False) -> str:
    """Why ], [ (or with ``other``, o from ``cursor``) have no other claim to go to: the answer's claims
    unverified or failed, none in either list, only the one highlighted, or none in the other list."""
    if claims is None:
        return "This answer's claims are not verified (`workbench claims run`)."
    if claims["status"] != "done":
        return f"This answer's claims were not verified: {esc(str(claims['error'] or claims['status']))}."
    counts = claim_counts(claims)
    if not any(counts):
        return "This answer has no claims, and its reference none: no claim to go to."
    if not other:
        return "The one claim of the answer and its reference is highlighted: no other to go to."
    if cursor is None or cursor[0] == REFERENCE:
        return "The answer has no claims of its own: o has no other list to go to."
    if claims.get("reference") is None:
        return "The reference's claims are not stored (a claim run made before they were): o has no other list."
    return "The reference has no claims: o has no other list to go to."


def clamp_cursor(cursor: Cursor | None, counts: tuple[int, int]) -> Cursor | None:
    """``cursor`` if its claim still exists (the claims were reloaded), else None."""
    if cursor is None or cursor[1] >= counts[cursor[0]]:
        return None
    return cursor


def _label(label: str) -> Content:
    return Content.assemble((label, LABEL_STYLE.get(label, "")))


def unit_strip(units: list[dict]) -> Content:
    """Each unit's vote in window order: ``C1:E C2:N C3:C`` for a few, a strip of letters ``ENC…`` for many."""
    if not units:
        return Content.assemble(("no units", "dim"))
    if len(units) <= SPREAD:
        parts = []
        for u in units:
            parts += [(f"{u['label']}:", "dim"), (u["vote"], LABEL_STYLE.get(u["vote"], "")), " "]
        return Content.assemble(*parts[:-1])
    strip = [(u["vote"], LABEL_STYLE.get(u["vote"], "")) for u in units]
    return Content.assemble((f"{units[0]['label']}…{units[-1]['label']} ", "dim"), *strip)


def _entailing(labels: list[str]) -> Content:
    return Content.assemble(("⇐ ", "dim"), (" ".join(labels), "green")) if labels else Content("")


def _wrapped(first: Content, body: Content, width: int, style: str = "") -> list[Content]:
    """``body`` wrapped under a hanging indent, ``first`` (the cursor and the mark) before its first line."""
    lines = body.wrap(max(width - INDENT, 8)) or [Content("")]
    out = []
    for i, line in enumerate(lines):
        if style:
            line = line.stylize(style)
        out.append((first if i == 0 else Content(" " * INDENT)) + line)
    return out


def _joined(parts: list[Content]) -> Content:
    return Content.assemble(("  ", "dim")).join([p for p in parts if p.plain])


def _by(by: dict[str, str]) -> Content:
    return Content(" ").join([Content.assemble((f"{k}:", "dim"), _label(v)) for k, v in by.items()])


def _head(at: bool, mark: str, colour: str) -> Content:
    return Content.assemble(("▶ " if at else "  ", "bold"), (mark, colour), " ")


def response_block(c: dict, width: int, at: bool = False) -> list[Content]:
    """One response claim: its kind's mark and text, then its label against the reference, its
    units' votes and the units that entail it; under the cursor also its best unit and each verifier."""
    mark, colour, word = KIND.get(c["kind"], ("?", "", c["kind"]))
    rows = _wrapped(_head(at, mark, colour), Content(c["text"]), width, "reverse" if at else "")
    correct = c.get("correct_by", {}).get("vote") or ("E" if c["correct"] else "N")
    detail = _joined([Content.assemble((word, colour)) if word else Content(""),
                      Content.assemble(("ref:", "dim"), _label(correct)), unit_strip(c["units"]),
                      _entailing([u["label"] for u in c["units"] if u["vote"] == "E"])])
    rows += _wrapped(Content(" " * INDENT), detail, width)
    if at:
        if c.get("best_unit"):
            b = c["best_unit"]
            rows += _wrapped(Content(" " * INDENT),
                             Content.assemble((f"← {b['label']} " + " ".join(b["text"].split())[:240], "dim")), width)
        rows += _verifier_rows(c["units"], {k: v for k, v in c.get("correct_by", {}).items() if k != "vote"},
                               "ref", width)
    return rows


def reference_block(r: dict, width: int, at: bool = False, compact: bool = False) -> list[Content]:
    """One reference claim: ✔ if the response holds it, else ○ and "missed"; its label against the
    response, its units' votes and the units that entail it. ``compact`` (a KG gold answer): one line."""
    missed = r["missed"]
    mark, colour = ("○", "yellow") if missed else ("✔", "green")
    word = Content.assemble(("missed", "yellow")) if missed else Content("")
    head = _head(at, mark, colour)
    if compact:
        body = _joined([Content.assemble((r["text"], "reverse" if at else "")), word, _entailing(r["entailing"])])
        rows = _wrapped(head, body, width)
    else:
        rows = _wrapped(head, Content(r["text"]), width, "reverse" if at else "")
        rows += _wrapped(Content(" " * INDENT),
                         _joined([word, Content.assemble(("resp:", "dim"), _label(r["in_response"])),
                                  unit_strip(r["units"]), _entailing(r["entailing"])]), width)
    if at:
        rows += _verifier_rows(r["units"], r.get("in_response_by", {}), "resp", width)
    return rows


def _verifier_rows(units: list[dict], against: dict[str, str], name: str, width: int) -> list[Content]:
    """Under the cursor: each verifier's labels when several voted, and the checkers of the other answer
    when they are not just the one verifier (KG answers are checked by containment)."""
    verifiers = sorted({v for u in units for v in u["by"]})
    rows = []
    if len(verifiers) > 1:
        for v in verifiers:
            labels = [Content.assemble((f"{u['label']}:", "dim"), _label(u["by"][v])) for u in units if v in u["by"]]
            rows += _wrapped(Content(" " * INDENT), Content.assemble((f"{v} ", "italic"), Content(" ").join(labels)),
                             width)
    if against and (len(against) > 1 or set(against) != set(verifiers)):
        rows += _wrapped(Content(" " * INDENT), Content.assemble((f"{name}: ", "dim"), _by(against)), width)
    return rows


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def _metrics_line(m: dict | None) -> Content | None:
    if not m:
        return None
    # Faithfulness, hallucination and self-knowledge are the response's counts of each kind: not repeated.
    groups = [[("precision", "precision"), ("recall", "recall"), ("F1", "f1"), ("claim recall", "claim_recall")],
              [("context precision", "context_precision"), ("utilization", "context_utilization")],
              [("noise sens.", "noise_sensitivity_relevant")]]
    parts = [" ".join(f"{name} {_fmt(m[key])}" for name, key in g if key in m) for g in groups]
    return Content.assemble((" · ".join(p for p in parts if p), "dim"))


def _response_title(claims: dict) -> Content:
    kinds = [c["kind"] for c in claims["claims"]]
    counts = [(KIND[k][0] + str(kinds.count(k)), KIND[k][1]) for k in KIND]
    return Content.assemble(("Response", "bold"), f" {len(kinds)} claim{'' if len(kinds) == 1 else 's'}  ",
                            *[x for c in counts for x in (c, " ")]).rstrip()


def _reference_title(reference: list[dict], compact: bool) -> Content:
    missed = sum(r["missed"] for r in reference)
    n = len(reference)
    what = ("gold answer" if compact else "claim") + ("" if n == 1 else "s")
    return Content.assemble(("Reference", "bold"), f" {n} {what}  ", (f"✔{n - missed}", "green"), " ",
                            (f"○{missed} missed", "yellow"))


def _padded(rows: list[Content], n: int) -> list[Content]:
    return rows + [Content("")] * (n - len(rows))


def render_claims(claims: dict | None, width: int = 100, cursor: Cursor | None = None,
                  columns: bool = False) -> ClaimsView:
    """The Claims section, ``width`` cells wide: the response's claims, then (``columns``: beside them)
    the reference's; the claim at ``cursor`` is highlighted and shows each verifier's labels."""
    if claims is None:
        return ClaimsView([Content.from_markup("[b]Claims[/b] [dim]— not verified (`workbench claims run`)[/dim]")])
    if claims["status"] != "done":
        return ClaimsView([Content.assemble(("Claims", "bold"), " ",
                                            (str(claims["error"] or claims["status"]), "red"))])
    support = f"  support {_fmt(claims['support_ratio'])} ({claims['n_supported']}/{claims['n_claims']})"
    head = Content.assemble(("Claims", "bold"), support, ("  rejected", "red") if claims["rejected"] else "")
    reference = claims.get("reference")
    legend = Content.assemble(("✔", "green"), " faithful ", ("◆", "yellow"), " self-knowledge ", ("✘", "red"),
                              " hallucination ", ("○", "yellow"), " missed · ", ("E", LABEL_STYLE["E"]), " entails ",
                              ("N", LABEL_STYLE["N"]), " neutral ", ("C", LABEL_STYLE["C"]),
                              " contradicts · ⇐ entailed by")
    top = [head, *([m] if (m := _metrics_line(claims.get("metrics"))) else []), legend.stylize("dim")]
    rows = [line for c in top for line in c.wrap(width)]
    columns = columns and bool(reference)
    col = (width - len(SEPARATOR.plain)) // 2 if columns else width
    left = _response_title(claims).wrap(col)
    spans: dict[Cursor, tuple[int, int]] = {}
    for i, c in enumerate(claims["claims"]):
        block = response_block(c, col, cursor == (RESPONSE, i))
        spans[(RESPONSE, i)] = (len(left), len(block))
        left += block
    if not claims["claims"]:
        left.append(Content.assemble(("  no claims", "dim")))
    right: list[Content] = []
    if reference:
        compact = all(r["source"] == "item" for r in reference)
        right = _reference_title(reference, compact).wrap(col)
        for g, r in enumerate(reference):
            block = reference_block(r, col, cursor == (REFERENCE, g), compact)
            spans[(REFERENCE, g)] = (len(right), len(block))
            right += block
    if columns:
        body = [(a.pad_right(col - a.cell_length) + SEPARATOR + b).rstrip()
                for a, b in zip(_padded(left, len(right)), _padded(right, len(left)))]
        starts = (0, 0)  # where each list's first row is in ``body``
    else:
        note = [] if reference is not None else [
            Content.assemble(("  reference claims not stored (a claim run made before they were)", "dim"))]
        body = [*left, *note, *([Content(""), *right] if right else [])]
        starts = (0, len(left) + len(note) + 1)
    at = spans.get(cursor) if cursor else None
    cursor_rows = (len(rows) + starts[cursor[0]] + at[0], at[1]) if at else None
    rows += body
    if claims["filtered_answer"]:
        rows += Content.assemble("  filtered: ", claims["filtered_answer"]).wrap(width)
    return ClaimsView(rows, cursor_rows)
