"""The TUI's plots name each series under their frame, inside the panel that shows them: no label over a curve.

Every plot a screen draws (the Ledger's K sweep, its oracle plot after ``o``, Retrieval's curves) at 80×24,
120×40 and 200×50, on the demo-like database (tests/tuistates.py), in one shared app (tests/tui_shared_a.py).
The panel's text is read as the screen shows it: every line of the figure must fit the panel (a legend cut
off at its bottom or right edge names nothing), no series' name may stand inside the frame, and each is
named under it. tests/test_plot_legend.py checks the same of the figures themselves, at any size.
"""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from conftest import copy_db
from test_plot_legend import frame
from tui_shared_a import running
from tuikit import SIZE, SMALL, WIDE, until_loaded, wait_for
from tuistates import few_resamples

MAIN = ("S_set", "S_vis", "S_llm", "D_rate")
ORACLE = ("Acc_struct", "Acc_linear", "L_struct")
RETRIEVAL = ("Recall@k", "MRR@k")
# Each plot: the keys that show it (after the one before: the app opens on the Ledger), its screen, its panel, what
# it names.
PLOTS = {"Ledger's K sweep": ((), "ledger", "#main-plot", MAIN),
         "Ledger's oracle plot (o)": (("o",), "ledger", "#main-plot", ORACLE),
         "Retrieval's curves": (("v",), "retrieval", "#curves", RETRIEVAL)}


@pytest.fixture(scope="module")
def shared(tmp_path_factory, demo_template):
    """One app on a copy of the demo-like database (built once per session, shared with the contract tests); its
    intervals from few resamples: the legend's place is the subject, not the intervals."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        few_resamples(monkeypatch)
        yield from running(copy_db(demo_template, tmp_path_factory.mktemp("plot-legend") / "wb.db"))


def shown(panel) -> str:
    return str(panel.render())


async def check(pilot, plot: str, size) -> None:
    """Show ``plot`` (from the screen it is on, its keys) and check its legend in its panel."""
    keys, mode, panel_id, names = PLOTS[plot]
    await pilot.press(*keys)
    screen = await until_loaded(pilot, mode)
    panel = screen.query_one(panel_id)
    await wait_for(pilot, lambda: "┌" in shown(panel) and names[0] in shown(panel),
                   what=lambda: f"{plot} drawn (the panel shows {shown(panel)!r})")
    figure = shown(panel)
    lines = figure.splitlines()
    width, height = panel.size
    assert len(lines) <= height and max(cell_len(line) for line in lines) <= width, \
        f"{plot} at {size}: a {len(lines)}-line figure in a {width}×{height} panel:\n{figure}"
    inside, below = frame(figure)
    for name in names:
        assert not any(name in row for row in inside), f"{plot}: {name!r} inside the frame at {size}:\n{figure}"
        assert any(name in line for line in below), f"{plot}: {name!r} not named under the frame at {size}:\n{figure}"


@pytest.mark.budget(15)   # three screens drawn and checked at one size, the app made fresh
@pytest.mark.parametrize("size", [SMALL, SIZE, WIDE], ids=["80x24", "120x40", "200x50"])
def test_every_plot_names_every_series_under_its_frame_within_its_panel(shared, size):
    async def look(pilot):
        await until_loaded(pilot, "ledger")
        for plot in PLOTS:      # in order: the K sweep, o, then v
            await check(pilot, plot, size)

    shared.walk(look, size)
