"""The TUI's three contracts over a run of three models: the model column is walked like any other.

The key, room and cursor contracts (tests/test_tui_key_contract.py) walk the demo's data, where every
run has one model. A run whose cells are (model, K, B, format) adds a column to the Ledger (kept in
view when the table scrolls), a model to every cell id, and every model's answer to the Sample
detail: these tests walk the same contracts over such a run (tests/test_tui_models.py's ``m3``:
three models × K 1,5 × B 32,128, six questions), in one app at 80×24 and 200×50.
"""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from contractapp import Driver
from contractcursor import Checker
from contractroom import room_findings
from test_tui_key_contract import FULL

from test_tui_models import template as template  # noqa: F401 - the fixture (its database built once a session)
from tuikit import SMALL, WIDE
from tuistates import few_resamples, no_model_runs
from tuiwalk import KeyWalk, draw_only_when_looked_at, settle
from workbench.tui.app import WorkbenchApp

RUN = "m3"
# The screens a model axis changes: the Ledger (its column, kept in view), Samples (a cell of a model),
# and what their keys open (the Sample detail with the answers of every model).
MODEL_MODES = ["ledger", "samples"]


@pytest.fixture(scope="module")
def driver(template, tmp_path_factory):   # noqa: F811 - the fixture imported above
    """One app on a copy of the three-model run, walked by every test of this file."""
    db = tmp_path_factory.mktemp("models-contracts") / "wb.db"
    db.write_bytes(template.read_bytes())
    with pytest.MonkeyPatch.context() as monkeypatch:
        no_model_runs(monkeypatch)
        few_resamples(monkeypatch)
        draw_only_when_looked_at(monkeypatch)
        shared = Driver(WorkbenchApp(db, poll_seconds=3600))
        try:
            yield shared
        finally:
            shared.close()


@pytest.mark.budget(10)
def test_no_column_of_a_three_model_run_is_cut_while_the_screen_has_room(driver):
    """The room contract (tests/contractroom.py) at 200×50 and 80×24, the model column among the others."""
    findings = driver.run(room_findings)
    assert not findings, "\n".join(findings)


@pytest.mark.parametrize("keys", [
    ["down", "down", "s", "enter", "escape", "escape", "down", "space", "down", "space"],
    ["end", "s", "enter", "escape", "escape", "pagedown", "m", "m", "down"],
], ids=["detail-and-marks", "end-and-other-run"])
def test_every_pane_and_side_panel_shows_the_highlighted_model_and_cell(driver, keys):
    """The cursor contract (tests/contractcursor.py) at 80×24: the side panel names the highlighted
    (model, cell) and its n, Samples and the Sample detail are that model's."""
    if tuple(driver.app.size) != SMALL:
        driver.run(lambda pilot: pilot.resize_terminal(*SMALL))
    checker = Checker(driver.pilot, run=RUN)
    driver.run(lambda pilot: checker.reset())
    table = driver.app.screen.query_one("#ledger", DataTable)
    assert str(table.ordered_columns[0].label) == "model"
    for key in keys:
        driver.run(lambda pilot, key=key: checker.step(key))


@pytest.mark.budget(12)
def test_every_key_on_the_screens_of_a_three_model_run_acts_or_says_why(driver):
    """The key contract (tests/tuiwalk.py) on the Ledger and Samples and what their keys open, at 80×24 (where the
    model column leaves the least room; ``WORKBENCH_WALK=full``: at 200×50 too, as the demo's walk does)."""
    findings, pressed = [], 0

    async def walk(pilot):
        nonlocal pressed
        for size in (SMALL, WIDE) if FULL else (SMALL,):
            await pilot.resize_terminal(*size)
            await settle(pilot)
            keys = KeyWalk(pilot, f"three models {size[0]}×{size[1]}", every=False)
            await keys.start()
            await keys.walk_modes(MODEL_MODES)
            findings.extend(keys.findings)
            pressed += keys.pressed

    driver.run(walk)
    assert pressed > 40, f"the walk pressed only {pressed} keys"
    assert not findings, f"{len(findings)} of {pressed} keys break the contract:\n" + "\n".join(findings)
