"""The SearChain view: the report, the samples, and a tree expanded by keyboard."""

from __future__ import annotations

import time

import pytest
from textual.widgets import Tree

from workbench.tui.screens import searchain

from conftest import copy_db
from tui_shared_a import running
from tuikit import SIZE, heading, settled_after, snap_app, until_loaded, wait_for

# chained_db (conftest): two MetaQA 2-hop questions through SearChain as SmolLM2 answered them, replayed from
# tests/recorded/chains.jsonl (the same on every CPU), built once per session.


@pytest.fixture(scope="module")
def looking(tmp_path_factory, chained_template):
    """One app on a copy of the SearChain database for the tests that only look and navigate (none writes): each
    walks it made fresh (tests/tui_shared_a.py)."""
    yield from running(copy_db(chained_template, tmp_path_factory.mktemp("searchain-looking") / "chains.db"))


def test_the_searchain_view_shows_the_report_and_a_tree_by_keyboard(looking):
    async def walk(pilot):
        app = pilot.app
        await pilot.press("h")
        await until_loaded(pilot, "searchain")
        assert "chains" in heading(app)
        report = str(app.screen.query_one("#report").render())
        assert "cover-EM" in report and "knowledge sources" in report and "SearChain − RAG" in report
        assert app.screen.query_one("#chains").row_count == 2
        await pilot.press("enter")
        await until_loaded(pilot, "ChainTreeScreen")
        tree = app.screen.query_one(Tree)
        data = app.screen.tree_data
        assert len(tree.root.children) >= 1
        labels = []

        def walk(node):
            for child in node.children:
                labels.append(str(child.label))
                walk(child)

        walk(tree.root)
        assert any(n["query"] in " ".join(labels) for n in data["nodes"])
        # The first sample's first step was corrected by retrieval (in the recorded chain):
        # its reference and its collapsed feedback hang under it; "e" expands everything.
        assert any(n["feedback"] for n in data["nodes"])
        assert any(lab.startswith("reference") or "reference" in lab for lab in labels)
        feedback = [c for c in _all(tree.root) if "feedback" in str(c.label)]
        assert feedback and not any(c.is_expanded for c in feedback)
        await pilot.press("e")
        await wait_for(pilot, lambda: all(c.is_expanded for c in feedback), what="every feedback expanded")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.current_mode == "searchain" and type(app.screen).__name__ ==
                       "SearChainScreen")

    looking.walk(walk, SIZE)


def test_sample_detail_opens_the_samples_searchain_tree(looking):
    from workbench.pipelines.report import chain_for_sample
    from workbench.store import open_store as reopen

    store = reopen(looking.app.db_path)
    sid = store.conn.execute("SELECT sid FROM pipeline_samples ORDER BY sid LIMIT 1").fetchone()[0]
    assert chain_for_sample(store, 1, sid) == "chains"
    store.close()

    async def walk(pilot):
        app = pilot.app
        await pilot.press("s")
        await wait_for(pilot, lambda: app.current_mode == "samples" and app.screen.rows)
        from workbench.tui.screens.detail import SampleDetailScreen

        app.push_screen(SampleDetailScreen("sweep", sid, "k5-b64-score", [sid]))
        await wait_for(pilot, lambda: isinstance(app.screen, SampleDetailScreen) and app.screen.detail is not None)
        await pilot.press("c")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "ChainTreeScreen"
                       and app.screen.tree_data is not None and app.screen.tree_data["status"] == "done")

    looking.walk(walk, SIZE)


def _all(node):
    for child in node.children:
        yield child
        yield from _all(child)


def test_snapshot_chain_tree(snap_compare, chained_db, monkeypatch):
    """The picture waits for the tree's worker, however slow: it was once taken after a fixed delay,
    and on a loaded machine showed an empty tree. Here the worker is slowed as such a machine would."""
    tree = searchain._tree

    def slow_tree(*args):
        time.sleep(2.0)
        return tree(*args)

    monkeypatch.setattr(searchain, "_tree", slow_tree)
    open_tree = settled_after(("h", "searchain"), ("enter", "ChainTreeScreen"))
    assert snap_compare(snap_app(chained_db), terminal_size=SIZE, run_before=open_tree)
