"""The docs' pictures: PNG screenshots of the TUI's main screens, and the HTML report's two figures.

    .venv/bin/python scripts/docs_shots.py                         # .workbench/demo.db -> build/docs-shots/
    .venv/bin/python scripts/docs_shots.py --only ledger,figures --out /tmp/shots

`just docs` runs it before mkdocs, which takes the pictures from that directory (docs/_hooks/shots.py):
they are drawn from the app as it is, on every build, never committed. The screens are the real app's
(Textual's ``run_test`` at 120×40) on the database ``just demo`` fills, reached by the keys a user presses
(d, r, l, enter, 2, enter, ], v, T; D and h only when the database has a dedup or SearChain run), each
taken once its screen is ``loaded``, never after a guessed delay. No key that labels, tags, decides or
deletes is pressed. Each screen is read as a grid of cells and drawn cell by cell by headless Chromium
(scripts/screen_picture.py), so Chinese is two cells wide and nothing overlaps; a character no installed
font draws stops the run instead of becoming a box. The figures are the report's own
(:mod:`workbench.figures` on ``run_ledger`` with the report's resamples and seed), as SVG files a rerun
reproduces byte for byte, their text drawn as paths.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
from pathlib import Path
from typing import Callable, Sequence
from unittest.mock import patch

from textual.widgets import DataTable

import screen_picture

from workbench import figures
from workbench.kg.runner import get_dedup_run
from workbench.pipelines.report import pipeline_runs
from workbench.report import ReportOptions
from workbench.runs.report import run_ledger
from workbench.store import open_store
from workbench.store.labels import ANNOTATOR_ENV
from workbench.store.lookup import NotFound
from workbench.store.queries import get_run
from workbench.tui.app import WorkbenchApp
from workbench.tui.claims_view import claim_counts

ROOT = Path(__file__).resolve().parents[1]
RUN = "demo"
# B=128 as in the main figure; in the demo this sample is in the cell's dissipation quadrant and its claims
# were verified (`claims run demo --limit 3`): one is faithful, one a hallucination. Elsewhere: the first ones.
CELL, SAMPLE = "k1-b128-linear", "metaqa-1hop-dev-04982"
# Labels: the demo's human labels are ana's, of the run `recorded`; as her the screen shows them and the κ.
LABELS_RUN, ANNOTATOR = "recorded", "ana"
SIZE = (120, 40)
PATIENCE = 180.0  # a safety net only: each wait ends as soon as its screen has loaded
# Every picture: its name (file name and --only) and what it shows. "figures" are ledger-main and ledger-oracle.
SHOTS = {"datasets": "Datasets", "runs": "Runs", "ledger": "Ledger", "samples": "Samples",
         "detail": "Sample detail", "claims": "Claims", "retrieval": "Retrieval", "labels": "Labels",
         "dedup": "Dedup", "searchain": "SearChain", "figures": "Figures"}
# Each of these is reached through the ones before it (the run's ledger, a cell's samples, a sample).
CHAIN = ("ledger", "samples", "detail", "claims")
FIGURES = ("ledger-main", "ledger-oracle")
OUT = ROOT / "build" / "docs-shots"


def check_db(db: Path) -> str | None:
    """Why ``db`` cannot be photographed (missing, not a workbench database, no ``demo`` run), or None.

    Read with SQLite's read-only mode: opening it as the app does would create a missing file.
    """
    hint = "run `just demo` first"
    if not db.is_file():
        return f"{db}: no such database; {hint}"
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            found = conn.execute("SELECT 1 FROM runs WHERE name = ?", (RUN,)).fetchone()
    except sqlite3.Error as exc:
        return f"{db}: not a workbench database ({exc}); {hint}"
    return None if found else f"{db} has no run named {RUN!r}; {hint}"


def write_figures(db: Path, out: Path) -> list[Path]:
    """The report's main figure (the largest budget, linear) and oracle figure of the run, as SVG files."""
    options = ReportOptions()  # the report's resamples and seed: the same intervals as its figures
    store = open_store(db, readonly=True)
    try:
        report = run_ledger(store, get_run(store, RUN), resamples=options.resamples, seed=options.seed)
    finally:
        store.close()
    drawn = {}
    if report.rows:
        # The budget _figures_section draws; the demo's only format, linear, is the one the docs show.
        budget = max(r["budget"] for r in report.rows)
        drawn["ledger-main"] = figures.main_figure(report.rows, budget=budget, fmt="linear")
    if report.oracle:
        drawn["ledger-oracle"] = figures.oracle_figure(report.oracle)
    else:
        print(f"skipped ledger-oracle.svg: run {RUN} has no oracle cells")
    for name, fig in drawn.items():
        path = out / f"{name}.svg"
        path.write_bytes(figures.image_bytes(fig, "svg"))  # not inline_svg: a file keeps its prolog and xmlns
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return [out / f"{name}.svg" for name in drawn]


async def _until(pilot, ready: Callable[[], bool], what: str) -> None:
    """Let the app work until ``ready()`` holds; fail at once if a background task raised."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while not ready():
        if pilot.app.worker_errors:
            error = pilot.app.worker_errors[0]
            raise RuntimeError(f"a background task failed while waiting for {what}: {error!r}") from error
        if loop.time() > deadline:
            raise RuntimeError(f"{what} not reached in {PATIENCE:.0f} s")
        await pilot.pause(0.05)


async def _loaded(pilot, screen: str, also: Callable = lambda top: True):
    """Wait until the screen on top is ``screen`` (a mode or a type name), loaded, and ``also(it)`` holds."""
    app = pilot.app

    def ready() -> bool:
        top = app.screen
        ours = type(top).__name__ == screen or (app.current_mode == screen and len(app.screen_stack) == 1)
        return ours and getattr(top, "loaded", False) and also(top)

    await _until(pilot, ready, f"{screen} loaded")
    await pilot.wait_for_scheduled_animations()
    return app.screen


def _cursor_key(table: DataTable) -> str | None:
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None


async def _highlight(pilot, table: DataTable, key: str) -> None:
    """Move the table's cursor to the row ``key`` with the arrow keys, as a user would."""
    steps = [row.value for row in table.rows].index(key) - table.cursor_row
    await pilot.press(*(["down"] * steps if steps > 0 else ["up"] * -steps))
    await _until(pilot, lambda: _cursor_key(table) == key, f"{key} highlighted")


class Camera:
    """Reads the selected screens of the running app as grids of cells, by name."""

    def __init__(self, pilot, only: set[str]):
        # lines: printed once the app has exited (while it runs, Textual captures stdout).
        self.pilot, self.only, self.grids, self.lines = pilot, only, {}, []

    async def shoot(self, name: str) -> None:
        if name not in self.only:
            return
        app = self.pilot.app
        app.clear_notifications()  # a passing toast ("run demo …") is not part of the screen
        await self.pilot.pause()
        self.grids[name] = screen_picture.grid_of_app(app)

    async def visit(self, key: str, name: str, screen: str) -> None:
        """Press ``key`` (a mode's key) and read the screen once it has loaded."""
        if name in self.only:
            await self.pilot.press(key)
            await _loaded(self.pilot, screen)
            await self.shoot(name)


async def take_screens(db: Path, only: set[str]) -> dict[str, screen_picture.Grid]:
    """The selected screens of the real app on ``db``, each as the grid of cells it shows."""
    app = WorkbenchApp(db, poll_seconds=3600)  # no live polling: the picture cannot change under the camera
    # The demo's annotator, not the login name of whoever takes the pictures (restored afterwards).
    with patch.dict(os.environ, {ANNOTATOR_ENV: ANNOTATOR}):
        async with app.run_test(size=SIZE) as pilot:
            cam = Camera(pilot, only)
            await _tour(pilot, cam)
    if cam.lines:
        print("\n".join(cam.lines))
    return cam.grids


async def _tour(pilot, cam: Camera) -> None:
    """Every screen in turn, by its key; Dedup and SearChain only when the database has a run of theirs."""
    app, only = pilot.app, cam.only
    await _loaded(pilot, "ledger")
    app.open_run(RUN)  # what enter in Runs does; every screen follows the run opened
    await _loaded(pilot, "ledger", lambda s: s.view is not None and s.view.report.run == RUN)
    await cam.visit("d", "datasets", "datasets")
    await cam.visit("r", "runs", "runs")
    await _chain(pilot, cam, max((CHAIN.index(n) for n in only if n in CHAIN), default=-1))
    await cam.visit("v", "retrieval", "retrieval")
    if "labels" in only:
        app.open_run(LABELS_RUN if LABELS_RUN in app.run_names() else RUN)
        await _loaded(pilot, "ledger", lambda s: s.view is not None and s.view.report.run == app.run_name)
        await cam.visit("T", "labels", "labels")
    # Without a run of their kind these screens only say how to make one: not worth a picture.
    if "dedup" in only:
        try:
            get_dedup_run(app.store)
            await cam.visit("D", "dedup", "dedup")
        except NotFound:
            cam.lines.append("skipped dedup.png: the database has no dedup run")
    if "searchain" in only:
        if pipeline_runs(app.store):
            await cam.visit("h", "searchain", "searchain")
        else:
            cam.lines.append("skipped searchain.png: the database has no SearChain run")


async def _chain(pilot, cam: Camera, depth: int) -> None:
    """Ledger → the cell's samples → a dissipation sample → its claims, as far as ``depth`` in CHAIN."""
    if depth < 0:
        return
    await pilot.press("l")
    ledger = await _loaded(pilot, "ledger", lambda s: s.view is not None and s.view.report.run == RUN)
    table = ledger.query_one("#ledger", DataTable)
    if CELL in [row.value for row in table.rows]:  # elsewhere (another database) the first cell will do
        await _highlight(pilot, table, CELL)
        await _loaded(pilot, "ledger")  # the side panel of the cell, its human-label estimates included
    await cam.shoot("ledger")
    if depth < 1:
        return
    cell = _cursor_key(table)
    await pilot.press("enter")
    samples = await _loaded(pilot, "samples", lambda s: s.shown == (RUN, cell))
    await cam.shoot("samples")
    if depth < 2:
        return
    await pilot.press("2")  # the dissipation quadrant: a visible hit, yet a wrong answer
    await _loaded(pilot, "samples", lambda s: s.quadrant == "dissipation")
    if not samples.total:
        cam.lines.append(f"no dissipation sample in {cell}: showing its first sample")
        await pilot.press("1")
        await _loaded(pilot, "samples", lambda s: s.quadrant == "all")
    sid = next((str(r.sid) for r in samples.rows if r.sample_id == SAMPLE), None)  # the table's row keys
    if sid is not None:
        await _highlight(pilot, samples.query_one(DataTable), sid)
    await pilot.press("enter")
    detail = await _loaded(pilot, "SampleDetailScreen")
    await cam.shoot("detail")
    if depth < 3:
        return
    if claim_counts(detail.detail.claims) == (0, 0):
        cam.lines.append(f"skipped claims.png: sample {detail.detail.sample.id} has no verified claims in {cell}")
    else:
        await pilot.press("right_square_bracket")  # the first claim, highlighted and scrolled into view
        await _until(pilot, lambda: detail.claim_cursor is not None, "the first claim highlighted")
        await pilot.pause()  # the scroll to the claim runs after the next refresh: let that refresh happen
        await cam.shoot("claims")
    await pilot.press("escape")
    await _loaded(pilot, "samples")


def parse_only(text: str) -> set[str]:
    """The pictures ``--only`` names (comma-separated)."""
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = sorted(names - set(SHOTS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown picture {', '.join(unknown) or '(none)'}; choose from "
                                         f"{', '.join(SHOTS)}")
    return names


def clear(out: Path) -> None:
    """Remove the pictures an earlier run left in ``out``: one this run skips must not stay in the site."""
    for old in out.glob("*"):
        if old.suffix in (".png", ".svg") and old.is_file():
            old.unlink()


def draw(grids: dict[str, screen_picture.Grid], out: Path) -> list[Path]:
    """Draw the grids into ``out`` as PNG files, or raise naming the characters no installed font draws."""
    missing = screen_picture.missing_glyphs(set().union(*(grid.chars() for grid in grids.values())))
    if missing:
        named = ", ".join(f"{c} (U+{ord(c[0]):04X})" for c in missing)
        raise RuntimeError(f"no installed font draws {named}: the picture would show boxes; "
                           f"install {screen_picture.FONT_PACKAGES}")
    return screen_picture.render(grids, out)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: check the database and the browser, write the selected pictures, print each file."""
    parser = argparse.ArgumentParser(description="PNG screenshots of the TUI and the report's figures for the docs.")
    parser.add_argument("--db", type=Path, default=ROOT / ".workbench" / "demo.db", help="default: %(default)s")
    parser.add_argument("--out", type=Path, default=OUT, help="default: %(default)s")
    parser.add_argument("--only", type=parse_only, default=None, metavar="NAME[,NAME]",
                        help=f"only these pictures, of: {', '.join(SHOTS)} (the others already there stay)")
    args = parser.parse_args(argv)
    only = args.only or set(SHOTS)
    problem = check_db(args.db)
    if problem is None and only - {"figures"} and screen_picture.chromium() is None:
        problem = ("chromium is not installed: it draws the screenshots (Debian: apt-get install chromium "
                   f"{screen_picture.FONT_PACKAGES})")
    if problem:
        print(f"docs_shots: {problem}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only is None:
        clear(args.out)
    written = write_figures(args.db, args.out) if "figures" in only else []
    if only - {"figures"}:
        try:
            shots = draw(asyncio.run(take_screens(args.db, only)), args.out)
        except RuntimeError as exc:
            print(f"docs_shots: {exc}", file=sys.stderr)
            return 1
        for path in shots:
            print(f"wrote {path} ({path.stat().st_size:,} bytes)")
        written += shots
    print(f"{len(written)} files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
