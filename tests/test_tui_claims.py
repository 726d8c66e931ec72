"""The claims in the TUI: the ledger's Faith column, the unsupported filter and the Claims view."""

from __future__ import annotations

import pytest

from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.data.importer import import_dataset
from workbench.data.predictions import import_predictions
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run, load_samples
from workbench.tui.app import WorkbenchApp

from conftest import SAMPLE_METAQA, write_jsonl
from tuikit import SIZE, heading, wait_for


@pytest.fixture
def verified_db(tmp_path):
    """Six MetaQA questions at K=5, answered in free text (imported: fixed data, the same on every CPU)
    by a true answer and a sentence no window supports; their claims verified (rule + lexical)."""
    db = tmp_path / "claims.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    plan_sweep(store, SweepConfig(ks=(5,), budgets=(256,), formats=("score",), limit=6), name="talk")
    run = get_run(store, "talk")
    answers = [{"sample_id": s.id, "cell_id": "k5-b256-score",
                "prediction": f"{s.answers[0]} is the answer. The moon is made of green cheese."}
               for s in load_samples(store, run.dataset_id)[:6]]
    import_predictions(store, run, write_jsonl(tmp_path / "answers.jsonl", answers))
    report = run_claims(store, run, ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
    assert report.done == 6
    unsupported = store.conn.execute("SELECT count(*) FROM claim_jobs WHERE n_supported < n_claims").fetchone()[0]
    assert unsupported == 6
    store.close()
    return db, unsupported


async def test_the_ledger_shows_faithfulness_and_the_claims_view_colours_each_claim(verified_db):
    db, unsupported = verified_db
    app = WorkbenchApp(db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "ledger" and app.screen.view is not None)
        table = app.screen.query_one("#ledger")
        faith = table.get_row_at(0)[-1]
        assert faith == f"{app.screen.view.report.rows[0]['faithfulness'].value:.3f}"
        assert "faithfulness" in str(app.screen.query_one("#side").render())
        await pilot.press("s")
        await wait_for(pilot, lambda: app.current_mode == "samples" and "6 samples" in heading(app))
        await pilot.press("9")
        await wait_for(pilot, lambda: "unsupported" in heading(app) and app.screen.total == unsupported)
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SampleDetailScreen"
                       and app.screen.detail is not None)
        detail = app.screen.detail
        assert detail.claims is not None and detail.claims["n_supported"] < detail.claims["n_claims"]
        text = app.screen.query_one("#detail").render()
        plain = str(text)
        assert "Claims" in plain and "✘" in plain
        unsupported_claim = next(c for c in detail.claims["claims"] if not c["supported"])
        assert unsupported_claim["text"] in plain
