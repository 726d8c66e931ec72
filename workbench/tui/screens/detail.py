"""Sample detail: question, answers, gold paths, the window with its cut, prompt, output and score."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Header, Static

from workbench.browse import sample_detail
from workbench.pipelines.report import chain_for_sample
from workbench.store.queries import get_run
from workbench.tui.base import WorkbenchScreen
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


def _detail(store, run_name, sid, cell_id):
    return sample_detail(store, get_run(store, run_name), sid, cell_id)


def _chain_for(store, run_name, sid):
    return chain_for_sample(store, get_run(store, run_name).dataset_id, sid)


def render_detail(d) -> str:
    """The detail as Rich markup (also used by the README's text capture)."""
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
    out += ["", *render_claims(d.claims)]
    return "\n".join(out)


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
    """The raw output (or the job's error), then the parsed prediction and its score."""
    e = d.event
    score = "—" if e["score"] is None else f"{e['score']:.2f}"
    return ["[b]Output[/b] " + (f"[dim]({e['source']})[/dim]" if e["source"] else ""),
            escape(d.output) if d.output is not None else ("[red]" + escape(e["error"]) + "[/red]" if e["error"]
                                                            else "—"),
            f"[b]Parsed[/b] {escape(e['prediction'] or '—')}   [b]score[/b] {score}"
            + (f"   citations {escape(e['citations'])}" if e["citations"] else "")]


def render_claims(claims: dict | None) -> list[str]:
    """The Claims view: each claim coloured by its verdict, with the unit it is attributed to."""
    if claims is None:
        return ["[b]Claims[/b] [dim]— not verified (`workbench claims run`)[/dim]"]
    if claims["status"] != "done":
        return [f"[b]Claims[/b] [red]{escape(claims['error'] or claims['status'])}[/red]"]
    ratio = claims["support_ratio"]
    head = (f"[b]Claims[/b]  support {'—' if ratio is None else f'{ratio:.2f}'} "
            f"({claims['n_supported']}/{claims['n_claims']})" + ("  [red]rejected[/red]" if claims["rejected"] else ""))
    out = [head]
    for c in claims["claims"]:
        colour, mark = ("green", "✔") if c["supported"] else ("red", "✘")
        votes = " ".join(f"{v}:{'y' if x['supported'] else 'n'}" for v, x in c["verifiers"].items())
        out.append(f"  [{colour}]{mark} {escape(c['text'])}[/{colour}]  [dim]{votes}"
                   + ("  gold" if c["correct"] else "") + "[/dim]")
        if c["best_unit"]:
            b = c["best_unit"]
            out.append(f"      [dim]← {escape(b['label'])} {escape(' '.join(b['text'].split())[:120])}[/dim]")
    if claims["filtered_answer"]:
        out.append(f"  filtered: {escape(claims['filtered_answer'])}")
    return out


class SampleDetailScreen(WorkbenchScreen):
    """One sample in one cell; ←/→ switch cells, j/k move through the samples page."""

    # Grouped so the footer has room for N and c; ←/→ take priority over the scroll view's own
    # (hidden, and useless here: the text wraps) left/right, which would otherwise hide them.
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("left", "cell(-1)", "Prev cell", priority=True, group=CELL_KEYS),
        Binding("right", "cell(1)", "Next cell", priority=True, group=CELL_KEYS, key_display="/→"),
        Binding("j", "sample(1)", "Next sample", group=SAMPLE_KEYS),
        Binding("k", "sample(-1)", "Prev sample", group=SAMPLE_KEYS, key_display="/k"),
        *[Binding(k, f"tag('{t}')", t, group=TAG_GROUP) for k, t in TAG_KEYS.items()],
        Binding("N", "note", "Note"),
        Binding("c", "chain", "SearChain"),
    ]

    def __init__(self, run_name: str, sid: int, cell_id: str, sids: list[int]):
        super().__init__()
        self.run_name, self.sid, self.cell_id, self.sids = run_name, sid, cell_id, sids
        self.detail = None

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
            self.detail = message.payload
            self.query_one("#detail", Static).update(render_detail(self.detail))
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

    def action_cell(self, step: int) -> None:
        if self.detail:
            cells = self.detail.cells
            self.cell_id = cells[(cells.index(self.cell_id) + step) % len(cells)]
            self.reload()

    def action_sample(self, step: int) -> None:
        if self.sid in self.sids:
            i = self.sids.index(self.sid) + step
            if 0 <= i < len(self.sids):
                self.sid = self.sids[i]
                self.reload()

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
