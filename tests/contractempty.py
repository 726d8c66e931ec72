"""The key contract where a screen is empty or filtered in a populated database (tests/test_tui_key_contract.py).

On an empty database every screen is empty the same way, and on the demo's every screen has rows: the keys
that changed nothing and said nothing were in between, where one screen is empty or filtered while the rest
has data. ``VIEWS`` puts the contracts' app (tests/contractapp.py) in each such view of the "partial" state
(what `just demo` leaves: no SearChain or dedup run) before the key walk walks its screen:

- a screen with no run of its kind (SearChain, Dedup);
- Samples searched down to one answer with no claims of its own (its detail, opened by enter, is walked with
  the claim cursor on the reference's claims), and on an empty quadrant searched with no match (the walk's
  quadrant keys then show every quadrant empty);
- the Runs list narrowed to a dataset with no run.

:class:`SeenWalk` is the key walk with one more way of changing nothing: a key that moves the focus onto a
pane showing nothing (an empty list, a blank report) changes only the focus's tint; a user sees no change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from textual.screen import ModalScreen

from tuiwalk import KeyWalk, bindings_of, settle
from workbench.browse import list_samples
from workbench.runs.report import first_cell
from workbench.store.queries import get_run
from workbench.tui.messages import DataChanged
from workbench.tui.screens.run_form import RunForm
from workbench.tui.screens.samples import QUADRANT_KEYS

NO_MATCH = "no sample matches this"


def shows_nothing(app, widget) -> bool:
    """Whether ``widget`` shows nothing on the screen on top: no room, or only blanks in its region."""
    region = widget.region
    if not widget.display or not region.area:
        return True
    strips = app.screen._compositor.render_strips()[region.y:region.bottom]
    return not "".join(strip.crop(region.x, region.right).text for strip in strips).strip()


FOCUS_KEYS = ("tab", "shift+tab")


@dataclass
class SeenWalk(KeyWalk):
    """The key walk (tests/tuiwalk.py), failing also a key that said nothing and only moved the focus onto a pane
    that shows nothing. ``focus_keys``: with ``every=False``, Textual's tab and shift+tab are pressed too (on the
    workbench's screens, not the dialogs): what moves the focus is what an empty pane leaves without an answer."""

    focus_keys: bool = False

    def keys_here(self) -> list:
        keys = super().keys_here()
        screen = self.app.screen
        if self.focus_keys and not self.every and not isinstance(screen, ModalScreen):
            keys += [k for k in bindings_of(type(screen)) if k.key in FOCUS_KEYS]
        return keys

    async def _press_and_check(self, key, mode: str, switches: bool = False) -> None:
        app = self.app
        focused, screens, found = app.focused, list(app.screen_stack), len(self.findings)
        await super()._press_and_check(key, mode, switches)
        now = app.focused
        if (len(self.findings) == found and not self.said and now is not None and now is not focused
                and list(app.screen_stack) == screens and shows_nothing(app, now)):
            self.findings.append(f"{self.where()}: {key} moved the focus to {type(now).__name__}"
                                 f"#{now.id}, which shows nothing, and said nothing")


@dataclass(frozen=True)
class View:
    """A screen empty or filtered: ``mode``'s screen, after ``setup(pilot)`` put the app in the view."""

    name: str
    mode: str
    setup: Callable[..., Awaitable[None]] | None = None
    # Screens its keys open that are not walked in this view (the demo's walk walks them): the new-run form's
    # ctrl+s would plan a run, and the rest of the keys would act on it, not on the empty list.
    not_followed: tuple[type, ...] = ()

    def unwalked(self, app) -> tuple[type, ...]:
        """The screens the view's keys open but its walk does not walk: ``not_followed`` and the other modes'
        screens (esc on Samples opens the Ledger), which the walk of the demo's data walks with their data."""
        return self.not_followed + tuple(screen for mode, screen in type(app).MODES.items() if mode != self.mode)

    async def enter(self, pilot) -> None:
        """The app in this view: its mode on top, nothing open above it, the view's selection and filters."""
        app = pilot.app
        app.cell_id, app.dataset_filter, app.exclude_tagged = None, None, False
        if self.setup is not None:
            await self.setup(pilot)
        await app.switch_mode(self.mode)
        while len(app.screen_stack) > 1:
            await app.pop_screen()
        app.screen.post_message(DataChanged(app.store.data_version()))   # loaded again in the view's selection
        await settle(pilot)


def runs_of(dataset: str) -> Callable:
    """The setup of the Runs list narrowed to ``dataset`` (as enter on it in Datasets does)."""
    async def setup(pilot) -> None:
        pilot.app.dataset_filter = dataset
    return setup


def samples_of(run: str, filters: Callable) -> Callable:
    """The setup of a Samples view of ``run``: ``filters(store, run)`` gives the cell, the screen's quadrant and
    search, and the sample the page must show first (None: the page must be empty)."""
    async def setup(pilot) -> None:
        app = pilot.app
        cell, quadrant, search, first = filters(app.store, get_run(app.store, run))
        app.run_name, app.cell_id = run, cell
        await app.switch_mode("samples")
        while len(app.screen_stack) > 1:
            await app.pop_screen()
        await settle(pilot)
        screen = app.screen
        screen.quadrant, screen.search, screen.tag, screen.page_offset = quadrant, search, None, 0
        screen.reload()
        await settle(pilot)
        shown = [r.sample_id for r in screen.rows[:1]]
        assert shown == ([first] if first else []), f"Samples of {run} on {quadrant}, “{search}”, shows {shown}"
    return setup


def no_match_on_an_empty_quadrant(store, run):
    """The run's first cell on its first quadrant with no sample, searched with no match: 1 shows quadrant all,
    still searched with no match, and the walk's other quadrant keys each show an empty quadrant."""
    cell = first_cell(store, run)
    empty = [q for q in QUADRANT_KEYS if not list_samples(store, run, cell, quadrant=q, limit=1).total]
    assert empty, f"every quadrant of {run.name}'s cell {cell} has samples"
    return cell, empty[0], NO_MATCH, None


def answer_without_claims(store, run):
    """The cell of an answer that has no claims of its own while its reference has some, searched by its id."""
    row = store.conn.execute(
        "SELECT j.cell_id, s.id FROM claim_jobs j JOIN claim_runs c ON c.id = j.claim_run_id"
        " JOIN samples s ON s.sid = j.sid AND s.dataset_id = ?"
        " WHERE c.run_id = ? AND j.status = 'done' AND j.n_claims = 0"
        " AND EXISTS (SELECT 1 FROM ref_claims f WHERE f.claim_run_id = j.claim_run_id AND f.sid = j.sid)"
        " ORDER BY j.cell_id, s.id LIMIT 1", (run.dataset_id, run.id)).fetchone()
    assert row is not None, f"{run.name} has no answer without claims of its own"
    return row[0], "all", row[1], row[1]


VIEWS = (
    View("SearChain with no run of its kind", "searchain"),
    View("Dedup with no run of its kind", "dedup"),
    View("Samples down to an answer with no claims of its own", "samples", samples_of("recorded", answer_without_claims)),
    View("Samples on an empty quadrant, searched with no match", "samples",
         samples_of("demo", no_match_on_an_empty_quadrant)),
    View("Runs narrowed to a dataset with no run", "runs", runs_of("howtocook"), not_followed=(RunForm,)),
)
