"""The dedup review flow by keyboard: pairs by band, contexts side by side, one key per decision."""

from __future__ import annotations

import pytest

from test_kg_dedup import kg_dir  # noqa: F401  (the tiny KG fixture, used by judged_db)
from tuikit import SIZE, heading, wait_for
from workbench.kg.importer import import_kg
from workbench.kg.runner import DedupConfig, execute_dedup, plan_dedup
from workbench.store import open_store
from workbench.tui.app import WorkbenchApp


@pytest.fixture
def judged_db(tmp_path, kg_dir):  # noqa: F811
    """The tiny KG judged by SmolLM2 in both modes."""
    db = tmp_path / "dedup.db"
    store = open_store(db)
    import_kg(store, kg_dir, "tiny")
    name, _, _ = plan_dedup(store, "tiny", DedupConfig(), "review")
    assert execute_dedup(store, name).errors == 0
    store.close()
    return db


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
        await wait_for(pilot, lambda: app.current_mode == "dedup" and "review" in heading(app))
        screen = app.screen
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
    from tuikit import settle as _settle

    async def open_dedup(pilot):
        await pilot.press("D")
        await _settle(pilot)

    assert snap_compare(WorkbenchApp(judged_db, poll_seconds=3600), terminal_size=SIZE, run_before=open_dedup)
