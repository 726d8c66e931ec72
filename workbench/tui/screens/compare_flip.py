"""One flipped sample in both runs of a comparison, side by side (pushed from the Compare screen)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Header, Static

from workbench.browse import sample_detail
from workbench.compare.render import ARROWS
from workbench.store.queries import get_run, sample_sid
from workbench.tui.base import WorkbenchScreen
from workbench.tui.markup import esc
from workbench.tui.messages import Loaded
from workbench.tui.screens.detail import render_answer, render_prompt, render_window
from workbench.tui.widgets import KeyFooter, scroll_both_or_say

WAYS = {"fail_to_pass": ("▲", "green"), "pass_to_fail": ("▼", "red")}
FLIP_KEYS = Binding.Group("Flip", compact=True)
BOTH_KEYS = Binding.Group("Both", compact=True)


def _pair(store, a: str, b: str, cell_a: str, cell_b: str, sample_id: str):
    """One sample's detail in cell ``cell_a`` of run ``a`` and in cell ``cell_b`` of run ``b``."""
    run_a, run_b = get_run(store, a), get_run(store, b)
    sid = sample_sid(store, run_a.dataset_id, sample_id)
    return sample_id, sample_detail(store, run_a, sid, cell_a), sample_detail(store, run_b, sid, cell_b)


class FlipDetailScreen(WorkbenchScreen):
    """One flipped sample in both runs side by side: A's cell on the left, B's on the right."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("j", "flip(1)", "Next flip", group=FLIP_KEYS),
        Binding("k", "flip(-1)", "Prev flip", group=FLIP_KEYS, key_display="/k"),
        Binding("J", "scroll_both(1)", "Both panes down", group=BOTH_KEYS),
        Binding("K", "scroll_both(-1)", "Both panes up", group=BOTH_KEYS, key_display="/K"),
    ]
    AUTO_FOCUS = "#pane-a"

    def __init__(self, a: str, b: str, cell_a: str, cell_b: str, rows: list[tuple[str, str, str]], index: int,
                 questions: dict[str, str] | None = None):
        super().__init__()
        self.a, self.b, self.cell_a, self.cell_b = a, b, cell_a, cell_b
        self.rows, self.index = rows, index
        self.questions = questions or {}
        self.pair = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("loading …", id="heading", classes="title")
        with Horizontal(id="pair"):
            with VerticalScroll(id="pane-a", classes="pane"):
                yield Static("", id="detail-a")
            with VerticalScroll(id="pane-b", classes="pane"):
                yield Static("", id="detail-b")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        stage, way, sid = self.rows[self.index]
        self.load("pair", _pair, self.a, self.b, self.cell_a, self.cell_b, sid)

    def on_loaded(self, message: Loaded) -> None:
        if message.what != "pair":
            return
        sid, da, db = message.payload
        if sid != self.rows[self.index][2]:
            return      # j/k moved on while it loaded: that sample's result follows
        self.pair = (da, db)
        stage, way, _ = self.rows[self.index]
        symbol, colour = WAYS[way]
        s = da.sample
        gold = ("gold: " + esc("  ⟶  ".join(da.gold_paths[0]))
                + (f" (+{len(da.gold_paths) - 1} more)" if len(da.gold_paths) > 1 else "")) if da.gold_paths else ""
        self.query_one("#heading", Static).update(
            f"[b]{esc(s.id)}[/b]  {esc(s.question)}\nanswers: {esc(' | '.join(s.answers))} · "
            f"[{colour}]{symbol} {stage} {ARROWS[way]}[/{colour}] · flip {self.index + 1}/{len(self.rows)} "
            f"(j/k) · {gold}")
        self.query_one("#detail-a", Static).update(render_side("A", self.a, da))
        self.query_one("#detail-b", Static).update(render_side("B", self.b, db))
        for pane in self.query(".pane"):
            pane.scroll_home(animate=False)

    def action_flip(self, step: int) -> None:
        i = self.index + step
        if not 0 <= i < len(self.rows):
            self.notify(f"This is the {'last' if step > 0 else 'first'} flip of the list.", timeout=3)
            return
        self.index = i
        self.reload()

    def action_scroll_both(self, step: int) -> None:
        scroll_both_or_say(self, step)


def render_side(side: str, run: str, d) -> str:
    """One run's half of the flip as markup: score, output, the cell's window and the prompt."""
    e = d.event
    passed = e["score"] is not None and e["score"] > 0
    verdict = ("[green]✓ pass[/green]" if passed else "[red]✗ fail[/red]") if e["score"] is not None else "unscored"
    out = [f"[b]{side} = {esc(run)}[/b] · {esc(d.cell_id)}",
           f"{verdict} · H_set {e['h_set']} · H_vis {e['h_vis']} · K_eff {e['k_eff']} · {e['evidence_tokens']} tokens"
           + (" · truncated" if e["truncated"] else ""),
           "", *render_answer(d), "",
           "[b]Evidence in window order[/b] [dim](★ gold, dim = after the cut)[/dim]", *render_window(d),
           "", "[b]Prompt[/b]", *render_prompt(d)]
    return "\n".join(out)
