"""A term's interval is one statistic: the Ledger screen shows what `workbench ledger` prints.

The screens drew their full bootstrap from their own resample counts (the Ledger and Retrieval
1,000, the CLI 2,000): the same S_set of the same cell read 0.800 [0.619, 0.952] on the Ledger
and 0.800 [0.621, 0.955] in `workbench ledger demo`. Every interval shown unless asked otherwise is
drawn from :data:`workbench.metrics.stats.RESAMPLES` with :data:`~workbench.metrics.stats.SEED`:
these tests read every term of every cell on the screen (after its full pass) and in `ledger --json`,
and want them equal to the last digit.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from conftest import copy_db
from tuikit import SIZE, until_loaded
from workbench.cli import main
from workbench.metrics.stats import RESAMPLES, SEED
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens import compare, label_loads, ledger, retrieval, searchain

RUN = "demo"


def test_every_screen_draws_its_full_intervals_from_the_resamples_the_cli_uses():
    """One count, one seed: a screen's full pass is the CLI's default, not a number of its own."""
    assert {m.__name__.rsplit(".", 1)[1]: m.RESAMPLES for m in (compare, label_loads, ledger, retrieval, searchain)} \
        == dict.fromkeys(("compare", "label_loads", "ledger", "retrieval", "searchain"), RESAMPLES)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["ledger", "--help"])
    assert f"(default {RESAMPLES})" in " ".join(out.getvalue().split())


@pytest.mark.budget(10)
async def test_the_ledger_screen_shows_every_term_with_the_interval_ledger_prints(demo_template, tmp_path: Path):
    db = copy_db(demo_template, tmp_path / "demo.db")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--db", str(db), "ledger", RUN, "--json"]) == 0
    printed = {row["cell_id"]: row for row in json.loads(out.getvalue())}

    app = WorkbenchApp(db, poll_seconds=3600)
    async with app.run_test(size=SIZE) as pilot:
        app.run_name = RUN
        await until_loaded(pilot, "ledger")
        report = app.screen.view.report
        assert (report.run, report.resamples, report.seed) == (RUN, RESAMPLES, SEED)
        assert report.rows, "the Ledger screen shows no cell"
        compared = 0
        for row in report.rows:
            for term, estimate in row.items():
                cli = printed[row["cell_id"]].get(term)
                if not isinstance(cli, dict) or not hasattr(estimate, "lo"):
                    continue
                assert (estimate.value, estimate.lo, estimate.hi) == (cli["value"], cli["lo"], cli["hi"]), \
                    f"{row['cell_id']} {term}: the screen {estimate}, `ledger --json` {cli}"
                compared += 1
    assert compared >= 10 * len(report.rows)       # every term with an interval of every cell, not a few
