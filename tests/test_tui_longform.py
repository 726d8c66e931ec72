"""Long-form answers in the sample detail: the response's claims beside the reference's, with every verdict.

The fixture is a RAGChecker input file (paragraph answers, one in Chinese) imported and checked by the
rule decomposer and the lexical verifier: no model, the same content on every CPU. What the screen
should show is computed from ``answer_claims``, never typed in from the text.
"""

from __future__ import annotations

import json
import re

import pytest
from rich.cells import cell_len
from textual.containers import VerticalScroll

from conftest import copy_db
from tui_shared_a import running
from tuikit import SIZE, SMALL, footer_line, settle, snap_app, until_loaded, wait_for
from workbench.claims.report import answer_claims
from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.data.ragchecker import import_ragchecker
from workbench.store import open_store
from workbench.store.queries import get_run
from workbench.tui.claims_view import (REFERENCE, RESPONSE, SPREAD, claim_counts, move_cursor, other_side,
                                       render_claims)

RESULTS = {"results": [
    {"query_id": "danube", "query": "What do we know about the Danube river?",
     "gt_answer": "The Danube is the second longest river in Europe. It flows through ten countries on its way east. "
                  "The river rises in the Black Forest of Germany. It empties into the Black Sea through a large "
                  "delta in Romania. Vienna and Budapest both stand on its banks.",
     "response": "The Danube is the second longest river in Europe. The river rises in the Black Forest of Germany. "
                 "It flows through ten countries on its way east. It empties into the Caspian Sea near Baku. "
                 "Its waters are famous for being bright blue all year round.",
     "retrieved_context": [
         {"doc_id": "d1", "text": "The Danube is the second longest river in Europe, after the Volga."},
         {"doc_id": "d2", "text": "The Danube rises in the Black Forest of Germany and flows east."},
         {"doc_id": "d3",
          "text": "The Danube empties into the Black Sea through a large delta in Romania and Ukraine."}]},
    {"query_id": "changjiang", "query": "长江有什么特点？",
     "gt_answer": "长江是中国最长的河流。长江发源于青藏高原。长江最终流入东海。",
     "response": "长江是中国最长的河流。长江流入东海。长江的水是红色的。",
     "retrieved_context": [{"doc_id": "z1", "text": "长江是中国最长的河流，全长约六千三百公里。"},
                           {"doc_id": "z2", "text": "长江最终在上海流入东海。"}]},
]}
MARK = {"faithful": "✔", "self_knowledge": "◆", "hallucination": "✘"}
WORD = {"faithful": None, "self_knowledge": "self-knowledge", "hallucination": "hallucination"}


@pytest.fixture(scope="module")
def longform_template(tmp_path_factory):
    """The RAGChecker file imported as ``lf`` and its claims checked; the expected claims of each sample."""
    directory = tmp_path_factory.mktemp("longform")
    source = directory / "ragchecker.json"
    source.write_text(json.dumps(RESULTS, ensure_ascii=False), encoding="utf-8")
    store = open_store(directory / "lf.db")
    try:
        import_ragchecker(store, source, "lf")
        run = get_run(store, "lf")
        report = run_claims(store, run, ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
        assert report.done == 2 and not report.errors
        (cell,) = [c for (c,) in store.conn.execute("SELECT cell_id FROM cells WHERE run_id = ?", (run.id,))]
        sids = [s for (s,) in store.conn.execute("SELECT sid FROM events WHERE run_id = ? ORDER BY sid", (run.id,))]
        expected = {sid: answer_claims(store, run, cell, sid) for sid in sids}
    finally:
        store.close()
    danube = expected[sids[0]]
    # The fixture is only useful if it holds every kind of claim the screen marks.
    assert {c["kind"] for c in danube["claims"]} == set(MARK)
    assert any(r["missed"] for r in danube["reference"]) and not all(r["missed"] for r in danube["reference"])
    return store.path, sids, expected


@pytest.fixture(scope="module")
def shared(tmp_path_factory, longform_template):
    """One app on a copy of the long-form database for the tests that only read it (tests/tui_shared_a.py)."""
    yield from running(copy_db(longform_template[0], tmp_path_factory.mktemp("longform-app") / "lf.db"))


@pytest.fixture
def longform(tmp_path, longform_template):
    db, sids, expected = longform_template
    return copy_db(db, tmp_path / "lf.db"), sids, expected


# -- reading what the screen drew ----------------------------------------------------------------
def detail_text(app) -> str:
    return str(app.screen.query_one("#detail").render())


def claim_rows(app) -> list[str]:
    """The Claims section's rows, from the titles of its two lists on (they are wrapped already)."""
    lines = detail_text(app).split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("Claims  support"))
    title = next(i for i in range(start, len(lines)) if lines[i].startswith("Response "))
    return lines[title:]


def split_columns(rows: list[str]) -> tuple[list[str], list[str]]:
    """The rows drawn side by side, as the left and the right column (cut at the │ between them)."""
    left, right = [], []
    for row in rows:
        if "│" not in row:
            break
        a, _, b = row.partition(" │")
        left.append(a.rstrip())
        right.append(b[1:].rstrip())
    return left, right


def blocks(column: list[str]) -> list[dict]:
    """Each claim's rows: its mark, whether the cursor is on it, its text and the rows under it."""
    out = []
    for row in column:
        if len(row) > 3 and row[2] in "✔◆✘○" and row[3] == " ":
            out.append({"cursor": row.startswith("▶"), "mark": row[2], "rows": [row[4:]]})
        elif out and row.startswith("    "):
            out[-1]["rows"].append(row[4:])
    for b in out:
        # The verdict row starts with the label against the other answer (after the kind's word, if any).
        k = next(i for i, r in enumerate(b["rows"]) if re.match(r"^(\S+  )?(ref|resp):[ENC]", r))
        b["text"], b["detail"] = "".join("".join(b["rows"][:k]).split()), " ".join(b["rows"][k:])
    return out


def squeeze(text: str) -> str:
    """Text without its whitespace: a wrapped claim compares equal to the claim."""
    return "".join(text.split())


def assert_response_blocks(drawn: list[dict], claims: list[dict]) -> None:
    assert [b["text"] for b in drawn] == [squeeze(c["text"]) for c in claims]
    for b, c in zip(drawn, claims):
        assert b["mark"] == MARK[c["kind"]], c["text"]
        word = WORD[c["kind"]]
        assert (word is not None and b["detail"].startswith(word)) or (word is None and b["detail"].startswith("ref:"))
        assert f"ref:{c['correct_by']['vote']}" in b["detail"]
        assert " ".join(f"{u['label']}:{u['vote']}" for u in c["units"]) in b["detail"]
        entailing = [u["label"] for u in c["units"] if u["vote"] == "E"]
        assert ("⇐ " + " ".join(entailing) in b["detail"]) if entailing else "⇐" not in b["detail"]


def assert_reference_blocks(drawn: list[dict], reference: list[dict]) -> None:
    assert [b["text"] for b in drawn] == [squeeze(r["text"]) for r in reference]
    for b, r in zip(drawn, reference):
        assert b["mark"] == ("○" if r["missed"] else "✔"), r["text"]
        assert b["detail"].startswith("missed") == r["missed"]
        assert f"resp:{r['in_response']}" in b["detail"]
        assert " ".join(f"{u['label']}:{u['vote']}" for u in r["units"]) in b["detail"]
        assert ("⇐ " + " ".join(r["entailing"]) in b["detail"]) if r["entailing"] else "⇐" not in b["detail"]


async def open_detail(pilot):
    """Ledger → s (samples) → enter: the first sample's detail, loaded."""
    app = pilot.app
    await wait_for(pilot, lambda: app.current_mode == "ledger" and app.screen.view is not None)
    await pilot.press("s")
    await until_loaded(pilot, "samples")
    await pilot.press("enter")
    await until_loaded(pilot, "SampleDetailScreen")
    await wait_for(pilot, lambda: "Claims  support" in detail_text(app), what="the claims drawn")
    return app.screen


def cursor_on_screen(app) -> str | None:
    """The row with the cursor's ▶, if it is inside the scrolled view (else None)."""
    static = app.screen.query_one("#detail")
    scroll = app.screen.query_one(VerticalScroll)
    top, height = round(scroll.scroll_y), scroll.scrollable_content_region.height
    for y in range(top, min(top + height, static.size.height)):
        text = static.render_line(y).text
        if text.lstrip().startswith("▶"):
            return text.strip()
    return None


# -- the screen ------------------------------------------------------------------------------------
def test_wide_the_response_and_reference_claims_stand_side_by_side_with_their_verdicts(shared, longform_template):
    _, sids, expected = longform_template

    async def look(pilot):
        app = pilot.app
        screen = await open_detail(pilot)
        for sid in sids:
            await wait_for(pilot, lambda: screen.detail.sample.id == RESULTS["results"][sids.index(sid)]["query_id"]
                           and "Claims  support" in detail_text(app), what=f"sample {sid}")
            claims = expected[sid]
            assert screen.detail.claims["claims"] == claims["claims"]
            rows = claim_rows(app)
            assert rows[0].startswith("Response ") and "│ Reference " in rows[0]
            left, right = split_columns(rows)
            assert_response_blocks(blocks(left), claims["claims"])
            assert_reference_blocks(blocks(right), claims["reference"])
            width = screen.query_one("#detail").content_region.width
            # Chinese characters take two cells: no row may run past the text's width (it would wrap again).
            assert max(cell_len(row) for row in rows) <= width
            await pilot.press("j")

    shared.walk(look, SIZE)


def test_at_80_columns_the_reference_claims_come_under_the_response_claims(shared, longform_template):
    _, sids, expected = longform_template
    claims = expected[sids[0]]

    async def look(pilot):
        app = pilot.app
        await open_detail(pilot)
        rows = claim_rows(app)
        assert not any("│" in row for row in rows)
        end = rows.index("")
        assert rows[end + 1].startswith("Reference ")
        assert_response_blocks(blocks(rows[:end]), claims["claims"])
        reference = [r for r in rows[end + 1:] if not r.startswith("  filtered:")]
        assert_reference_blocks(blocks(reference), claims["reference"])
        assert max(cell_len(row) for row in rows) <= 76

    shared.walk(look, SMALL)


def test_the_claim_keys_move_a_cursor_through_both_lists_and_scroll_it_into_view(shared, longform_template):
    _, sids, expected = longform_template
    claims = expected[sids[0]]
    n_resp, n_ref = len(claims["claims"]), len(claims["reference"])

    async def look(pilot):
        app = pilot.app
        screen = await open_detail(pilot)
        assert screen.claim_cursor is None and cursor_on_screen(app) is None  # the claims start below the fold

        async def press(key, cursor, text):
            await pilot.press(key)
            await wait_for(pilot, lambda: screen.claim_cursor == cursor and (cursor_on_screen(app) or "")[4:]
                           .startswith(text[:20]), what=lambda: f"{key}: cursor {cursor} on screen, "
                           f"at {screen.claim_cursor}: {cursor_on_screen(app)!r}")
            (drawn,) = [b for b in blocks(claim_rows(app)) if b["cursor"]]
            assert drawn["text"] == squeeze(text)

        await press("right_square_bracket", (RESPONSE, 0), claims["claims"][0]["text"])
        for i in range(1, n_resp):
            await press("right_square_bracket", (RESPONSE, i), claims["claims"][i]["text"])
        await press("right_square_bracket", (REFERENCE, 0), claims["reference"][0]["text"])
        await press("left_square_bracket", (RESPONSE, n_resp - 1), claims["claims"][-1]["text"])
        at = min(n_resp - 1, n_ref - 1)
        await press("o", (REFERENCE, at), claims["reference"][at]["text"])
        await press("o", (RESPONSE, at), claims["claims"][at]["text"])
        await pilot.press("home")  # scrolled away, a claim key brings the cursor back into view
        await wait_for(pilot, lambda: cursor_on_screen(app) is None)
        await press("left_square_bracket", (RESPONSE, at - 1), claims["claims"][at - 1]["text"])
        # Another sample: its own claims, no cursor.
        await pilot.press("j")
        await wait_for(pilot, lambda: screen.detail.sample.id == "changjiang" and screen.loaded)
        assert screen.claim_cursor is None and not any(b["cursor"] for b in blocks(claim_rows(app)))

    shared.walk(look, SMALL)


def test_the_footer_and_the_help_name_the_claim_keys(shared):
    from workbench.tui.help import help_sections

    async def look(pilot):
        app = pilot.app
        await open_detail(pilot)
        keys = ("←/→ Cell", "esc Back", "j/k Sample", "]/[ Claim", "o Other side", "ALRF Tag", "N Note",
                "c SearChain")
        await wait_for(pilot, lambda: all(k in footer_line(app) for k in keys),
                       what=lambda: f"every detail key in the footer: {footer_line(app)!r}")

    shared.walk(look, SMALL)
    detail = dict(help_sections(shared.app))["Sample detail"]
    assert {("]", "Next claim"), ("[", "Prev claim"), ("o", "Other side")} <= set(detail)


# -- the pure view ---------------------------------------------------------------------------------
def _unit(uid, vote, **by):
    return {"uid": uid, "label": f"C{uid}", "vote": vote, "by": by or {"lexical": vote}}


SYNTHETIC = {
    "status": "done", "error": None, "n_claims": 2, "n_supported": 1, "support_ratio": 0.5, "rejected": False,
    "filtered_answer": None, "metrics": {"precision": 0.5, "recall": None},
    "claims": [
        {"text": "The bridge opened in 1894", "kind": "faithful", "supported": True, "correct": True,
         "correct_by": {"lexical": "E", "nli": "C", "vote": "E"},
         "best_unit": {"label": "C1", "uid": 1, "score": 1.0, "text": "Tower Bridge opened in 1894."},
         "verifiers": {}, "units": [_unit(1, "E", lexical="E", nli="E"), _unit(2, "N", lexical="N", nli="N"),
                                    _unit(3, "C", lexical="N", nli="C")]},
        {"text": "It is painted blue", "kind": "self_knowledge", "supported": False, "correct": True,
         "correct_by": {"vote": "E"}, "best_unit": None, "verifiers": {},
         "units": [_unit(i, "C" if i == 7 else "N") for i in range(1, SPREAD + 4)]},
    ],
    "reference": [{"idx": 0, "text": "It crosses the Thames", "source": "llm", "in_response": "C",
                   "in_response_by": {"nli": "C"}, "units": [_unit(1, "E")], "entailing": ["C1"], "missed": True}],
}


def test_a_few_units_are_named_many_read_as_a_strip_and_contradictions_show():
    view = render_claims(SYNTHETIC, 100)
    text = "\n".join(r.plain for r in view.rows)
    assert "C1:E C2:N C3:C  ⇐ C1" in text
    assert f"C1…C{SPREAD + 3} " + "".join("C" if i == 7 else "N" for i in range(1, SPREAD + 4)) in text
    assert "◆ It is painted blue" in text and "self-knowledge  ref:E" in text
    assert "○ It crosses the Thames" in text and "missed  resp:C" in text
    assert "← C1" not in text and view.cursor_rows is None  # a unit's text only under the cursor


def test_the_cursor_claim_shows_its_best_unit_and_each_verifier():
    view = render_claims(SYNTHETIC, 100, (RESPONSE, 0), columns=True)
    rows = [r.plain for r in view.rows]
    first, n = view.cursor_rows
    block = rows[first:first + n]
    assert block[0].startswith("▶ ✔ The bridge opened in 1894")
    assert any("← C1 Tower Bridge opened in 1894." in r for r in block)
    assert any("lexical C1:E C2:N C3:N" in r for r in block) and any("nli C1:E C2:N C3:C" in r for r in block)
    assert any("ref: lexical:E nli:C" in r for r in block)
    at_ref = render_claims(SYNTHETIC, 100, (REFERENCE, 0), columns=True)
    first, _ = at_ref.cursor_rows
    assert "▶ ○ It crosses the Thames" in at_ref.rows[first].plain.split("│")[1]


@pytest.mark.parametrize("width", [40, 76, 116, 156])
def test_no_row_is_wider_than_the_text(width):
    for columns in (False, True):
        for cursor in (None, (RESPONSE, 1), (REFERENCE, 0)):
            rows = render_claims(SYNTHETIC, width, cursor, columns).rows
            assert max(r.cell_length for r in rows) <= width


def test_the_cursor_goes_through_the_response_then_the_reference_and_round():
    counts = (3, 2)
    seen, cursor = [], None
    for _ in range(6):
        cursor = move_cursor(cursor, counts, 1)
        seen.append(cursor)
    assert seen == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (0, 0)]
    assert move_cursor(None, counts, -1) == (1, 1) and move_cursor((0, 0), counts, -1) == (1, 1)
    assert other_side(None, counts) == (1, 0) and other_side((0, 2), counts) == (1, 1)
    assert other_side((1, 1), counts) == (0, 1)
    assert other_side((0, 1), (3, 0)) == (0, 1) and move_cursor(None, (0, 0), 1) is None
    assert claim_counts(SYNTHETIC) == (2, 1) and claim_counts(None) == (0, 0)


# -- snapshots ---------------------------------------------------------------------------------------
def _at_claim(*keys):
    """Open the first sample's detail, press ``keys``, and wait until the cursor's claim is on screen."""

    async def run_before(pilot):
        app = pilot.app
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot, "samples")
        await pilot.press("enter")
        await settle(pilot, "SampleDetailScreen")
        for key in keys:
            await pilot.press(key)
        await wait_for(pilot, lambda: cursor_on_screen(app) is not None, what="the cursor's claim on screen")
        await pilot.wait_for_scheduled_animations()

    return run_before


def test_snapshot_longform_detail_at_120x40(snap_compare, longform):
    # On the self-knowledge claim: the two lists side by side.
    keys = ["right_square_bracket"] * 3
    assert snap_compare(snap_app(longform[0]), terminal_size=SIZE, run_before=_at_claim(*keys))


def test_snapshot_longform_detail_at_80x24(snap_compare, longform):
    # On the reference's first claim: the lists one under the other.
    assert snap_compare(snap_app(longform[0]), terminal_size=SMALL, run_before=_at_claim("o"))
