"""The dedup review flow by keyboard: pairs by band, contexts side by side, one key per decision."""

from __future__ import annotations

from tuikit import SIZE, heading, settled_after, snap_app, until_loaded, wait_for
from workbench.store import open_store
from workbench.tui.app import WorkbenchApp

# judged_db (conftest): the tiny KG of test_kg_dedup judged in both modes as SmolLM2 judged it, replayed from
# tests/recorded/judged.jsonl (the same on every CPU), built once per session.


def _decisions(db):
    store = open_store(db)
    try:
        return dict(((a, b, m), d) for a, b, m, d in store.conn.execute(
            "SELECT a, b, mode, decision FROM dedup_decisions"))
    finally:
        store.close()


async def test_review_accepts_and_rejects_with_one_key_and_decisions_are_stored(judged_db):
    app = WorkbenchApp(judged_db)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("D")
        screen = await until_loaded(pilot, "dedup")
        assert "review" in heading(app)
        table = screen.query_one("#pairs")
        assert screen.mode == "graph+text" and table.row_count == len(screen.items) >= 2
        first, second = screen.items[0], screen.items[1]
        assert "Graph relations:" in str(screen.query_one("#context-a").render())
        assert first.name_b in str(screen.query_one("#context-b").render())
        await pilot.press("a")      # accept the first, the cursor moves on
        await wait_for(pilot, lambda: _decisions(judged_db).get((first.a, first.b, "graph+text")) == "accepted")
        await pilot.press("x")      # reject the second
        await wait_for(pilot, lambda: _decisions(judged_db).get((second.a, second.b, "graph+text")) == "rejected")
        await wait_for(pilot, lambda: any(p.decision == "accepted" for p in screen.items))
        assert next(p for p in screen.items if (p.a, p.b) == (first.a, first.b)).merged
        assert not next(p for p in screen.items if (p.a, p.b) == (second.a, second.b)).merged
        await pilot.press("m")
        await wait_for(pilot, lambda: screen.mode == "graph" and "mode graph (m)" in heading(app))
        await pilot.press("b")
        await wait_for(pilot, lambda: "band high" in heading(app))


def test_snapshot_dedup_review(snap_compare, judged_db):
    assert snap_compare(snap_app(judged_db), terminal_size=SIZE, run_before=settled_after(("D", "dedup")))
