"""Sample detail: question, answers, gold paths, the window with its cut, prompt, output, score and claims."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.geometry import Region
from textual.widgets import Header, Static

from workbench.browse import sample_detail
from workbench.pipelines.report import chain_for_sample
from workbench.store.queries import get_run
from workbench.tui.base import WorkbenchScreen
from workbench.tui.claims_view import (WIDE, Cursor, clamp_cursor, claim_counts, move_cursor, other_side,
                                       render_claims, why_not)
from workbench.tui.dialogs import PromptDialog
from workbench.tui.markup import esc as escape
from workbench.tui.messages import Loaded
from workbench.tui.screens.searchain import ChainTreeScreen
from workbench.tui.tagging import TAG_GROUP, TAG_KEYS, set_sample_note, toggle_sample_tag
from workbench.tui.widgets import KeyFooter

STATE_STYLE = {"visible": "", "cut": "yellow", "hidden": "dim"}
# Compact groups whose second key is shown as "/→": the footer reads "←/→ Cell", "j/k Sample".
CELL_KEYS = Binding.Group("Cell", compact=True)
SAMPLE_KEYS = Binding.Group("Sample", compact=True)
CLAIM_KEYS = Binding.Group("Claim", compact=True)


def _detail(store, run_name, sid, cell_id):
    return sample_detail(store, get_run(store, run_name), sid, cell_id)


def _chain_for(store, run_name, sid):
    return chain_for_sample(store, get_run(store, run_name).dataset_id, sid)


def render_head(d) -> str:
    """Everything the detail shows above its Claims section, as Rich markup."""
    e = d.event
    s = d.sample
    out = [f"[b]{escape(s.id)}[/b]  {escape(s.question)}",
           f"answers: {escape(' | '.join(s.answers))}"
           + (f"   aliases: {escape(str(s.aliases))}" if s.aliases else ""),
           f"tags: {' '.join(d.tags) or '—'}" + (f"   note: {escape(d.note)}" if d.note else ""),
           "", "[b]Gold paths[/b]"]
    out += [f"  p{i + 1}: " + escape("  ⟶  ".join(path)) for i, path in enumerate(d.gold_paths)] or ["  —"]
    out += ["", f"[b]Cell {d.cell_id}[/b]  ({d.cells.index(d.cell_id) + 1}/{len(d.cells)}, ←/→ to switch)  "
                f"H_set={e['h_set']} H_vis={e['h_vis']} K_eff={e['k_eff']} tokens={e['evidence_tokens']}"
                f"{' truncated' if e['truncated'] else ''}",
            "[b]Evidence in window order[/b]  (★ gold, dim = after the budget cut)"]
    out += render_window(d)
    out += ["", "[b]Prompt[/b]", *render_prompt(d)]
    out += ["", *render_answer(d)]
    out += render_models(d)
    return "\n".join(out)


def render_models(d) -> list[str]:
    """In a run of several models: each model's answer to this question in this K, B and format, one line each
    (▸ the model of the cell shown); nothing for a run of one model."""
    if not d.by_model:
        return []
    wide = max(len(a.model) for a in d.by_model)
    out = ["", "[b]Every model's answer[/b]  [dim](K, B and format of this cell; ←/→ to open another)[/dim]"]
    for a in d.by_model:
        mark = "▸" if a.cell_id == d.cell_id else " "
        score = "—" if a.score is None else f"{a.score:.2f}"
        answer = escape(a.prediction) if a.prediction else f"[dim]({a.status})[/dim]"
        out.append(f"  {mark} {escape(a.model):<{wide}}  score {score}  {answer}")
    return out


@dataclass(frozen=True)
class DetailView:
    """The detail drawn ``width`` cells wide, and the rows its cursor's claim takes in it."""

    text: Content
    cursor_rows: tuple[int, int] | None = None  # (first row, how many rows), counted in wrapped rows


def render_detail(d, width: int = 100, cursor: Cursor | None = None, columns: bool = False) -> DetailView:
    """The whole detail ``width`` cells wide: the Claims section last, its response and reference
    claims side by side when ``columns``, the claim at ``cursor`` highlighted."""
    head = Content.from_markup(render_head(d))
    claims = render_claims(d.claims, width, cursor, columns)
    text = Content("\n").join([head, Content(""), *claims.rows])
    if claims.cursor_rows is None:
        return DetailView(text)
    # The claim rows come wrapped already (one screen row each); the head is wrapped as the Static will.
    first, rows = claims.cursor_rows
    return DetailView(text, (len(head.wrap(width)) + 1 + first, rows))


def render_window(d) -> list[str]:
    """The cell's evidence in window order, ★ on gold units, with a line where the budget cuts it."""
    out = []
    cut_drawn = False
    for line in d.evidence:
        if line.state != "visible" and not cut_drawn:
            out.append(f"  [red]──────── budget cut: B = {d.event['budget']} tokens ────────[/red]")
            cut_drawn = True
        mark = "★" if line.gold else " "
        style = STATE_STYLE[line.state]
        text = escape(line.text) + ("   ← cut part-way: not visible" if line.state == "cut" else "")
        out.append(f"  {mark} [{style}]{text}[/{style}]" if style else f"  {mark} {text}")
    return out


def render_prompt(d) -> list[str]:
    """The exact chat messages the model was (or would be) given, one line per message."""
    return [f"[dim]{m['role']}:[/dim] " + escape(m["content"]) for m in d.messages]


def render_answer(d) -> list[str]:
    """The raw output (or the job's error), then the parsed prediction and its score; for an imported
    answer, the answer itself and its score."""
    e = d.event
    score = "—" if e["score"] is None else f"{e['score']:.2f}"
    citations = f"   citations {escape(e['citations'])}" if e["citations"] else ""
    if e["source"] == "import":
        # Generated outside the workbench: no raw output was ever stored, and the answer is
        # scored as given, not parsed out of an output.
        return ["[b]Output[/b] [dim](imported answer: no raw model output)[/dim]",
                escape(e["prediction"]) if e["prediction"] else "[dim](an empty answer)[/dim]",
                f"[b]score[/b] {score}{citations}"]
    return ["[b]Output[/b] " + (f"[dim]({e['source']})[/dim]" if e["source"] else ""),
            escape(d.output) if d.output is not None else ("[red]" + escape(e["error"]) + "[/red]" if e["error"]
                                                            else "—"),
            f"[b]Parsed[/b] {escape(e['prediction'] or '—')}   [b]score[/b] {score}{citations}"]


class SampleDetailScreen(WorkbenchScreen):
    """One sample in one cell; ←/→ switch cells, j/k move through the samples page, ]/[ through the
    claims (the response's, then the reference's) and o to the same place in the other list."""

    # Grouped so the footer has room for N and c; ←/→ take priority over the scroll view's own
    # (hidden, and useless here: the text wraps) left/right, which would otherwise hide them.
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("left", "cell(-1)", "Prev cell", priority=True, group=CELL_KEYS),
        Binding("right", "cell(1)", "Next cell", priority=True, group=CELL_KEYS, key_display="/→"),
        Binding("j", "sample(1)", "Next sample", group=SAMPLE_KEYS),
        Binding("k", "sample(-1)", "Prev sample", group=SAMPLE_KEYS, key_display="/k"),
        Binding("right_square_bracket", "claim(1)", "Next claim", group=CLAIM_KEYS, key_display="]"),
        Binding("left_square_bracket", "claim(-1)", "Prev claim", group=CLAIM_KEYS, key_display="/["),
        Binding("o", "other_side", "Other side"),
        *[Binding(k, f"tag('{t}')", t, group=TAG_GROUP) for k, t in TAG_KEYS.items()],
        Binding("N", "note", "Note"),
        Binding("c", "chain", "SearChain"),
    ]

    def __init__(self, run_name: str, sid: int, cell_id: str, sids: list[int]):
        super().__init__()
        self.run_name, self.sid, self.cell_id, self.sids = run_name, sid, cell_id, sids
        self.detail = None
        # The highlighted claim (RESPONSE or REFERENCE, index); None until ], [ or o is pressed.
        self.claim_cursor: Cursor | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static("loading …", id="detail")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        self.load("detail", _detail, self.run_name, self.sid, self.cell_id)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "detail":
            old, self.detail = self.detail, message.payload
            same = old is not None and (old.sample.id, old.cell_id) == (self.detail.sample.id, self.detail.cell_id)
            # A retag reloads the same answer: its claims are the same, so the cursor stays on its claim.
            self.claim_cursor = clamp_cursor(self.claim_cursor, claim_counts(self.detail.claims)) if same else None
            self.redraw()
        elif message.what == "tag":
            tag, now = message.payload
            self.notify(f"{'tagged' if now else 'untagged'} {tag}")
            self.reload()
        elif message.what == "note":
            self.reload()
        elif message.what == "chain":
            if message.payload is None:
                self.notify("no SearChain run has this sample (`workbench searchain run`)")
            else:
                self.app.push_screen(ChainTreeScreen(message.payload, self.sid))

    def on_resize(self) -> None:
        # The claims are wrapped to the width and go side by side on a wide screen: drawn again once laid out.
        if self.detail is not None:
            self.call_after_refresh(self.redraw, show_cursor=True)

    def _text_width(self) -> int:
        static = self.query_one("#detail", Static)
        return static.content_region.width or max(self.size.width - 4, 20)

    def redraw(self, *, show_cursor: bool = False) -> None:
        """Draw the detail at the current width; with ``show_cursor``, scroll the cursor's claim into view."""
        if self.detail is None:
            return
        view = render_detail(self.detail, self._text_width(), self.claim_cursor, self.size.width >= WIDE)
        self.query_one("#detail", Static).update(view.text)
        if show_cursor and view.cursor_rows:
            self.call_after_refresh(self._show_rows, *view.cursor_rows)

    def _show_rows(self, first: int, rows: int) -> None:
        scroll = self.query_one(VerticalScroll)
        top, height = scroll.scroll_y, scroll.scrollable_content_region.height
        if top <= first and first + rows <= top + height:
            return
        # Centred, not just scrolled into view: the claims around it (and the other list beside it) show too.
        scroll.scroll_to_region(Region(0, first, 1, rows), center=True, animate=False, immediate=True)

    def action_claim(self, step: int) -> None:
        if self.detail is not None:
            cursor = self.claim_cursor
            self._move_cursor(move_cursor(cursor, claim_counts(self.detail.claims), step), cursor)
        else:
            self.notify("The sample is still loading.", timeout=3)

    def action_other_side(self) -> None:
        if self.detail is not None:
            cursor = self.claim_cursor
            self._move_cursor(other_side(cursor, claim_counts(self.detail.claims)), cursor, other=True)
        else:
            self.notify("The sample is still loading.", timeout=3)

    def _move_cursor(self, cursor: Cursor | None, at: Cursor | None, other: bool = False) -> None:
        """The cursor from ``at`` to ``cursor``; None or ``at`` itself (no other claim to go to): it stays, and
        the screen says why."""
        if cursor is None or cursor == at:
            self.notify(why_not(self.detail.claims, at, other), timeout=4)
            return
        self.claim_cursor = cursor
        self.redraw(show_cursor=True)

    def action_cell(self, step: int) -> None:
        if self.detail is None:
            self.notify("The sample is still loading.", timeout=3)
            return
        cells = self.detail.cells
        if len(cells) < 2:
            self.notify(f"This run has one cell only: {self.cell_id}.", timeout=3)
            return
        self.cell_id = cells[(cells.index(self.cell_id) + step) % len(cells)]
        self.reload()

    def action_sample(self, step: int) -> None:
        if self.sid in self.sids:
            i = self.sids.index(self.sid) + step
            if 0 <= i < len(self.sids):
                self.sid = self.sids[i]
                self.reload()
            else:   # a key that does nothing must say why
                self.notify("This is the last sample of the list." if step > 0 else
                            "This is the first sample of the list.", timeout=3)

    def action_chain(self) -> None:
        self.load("chain", _chain_for, self.run_name, self.sid)

    def action_tag(self, tag: str) -> None:
        self.load("tag", toggle_sample_tag, self.run_name, self.sid, tag)

    def action_note(self) -> None:
        def got(text: str | None) -> None:
            if text is not None:
                self.load("note", set_sample_note, self.run_name, self.sid, text)

        self.app.push_screen(PromptDialog("Note for this sample (empty clears)",
                                          self.detail.note if self.detail else ""), got)
