"""Labels: a human labels judged items one key at a time, so the workbench can say how far each judge is trusted.

One item at a time from the label queue (:mod:`workbench.judges.queue`) of the current run:
its claims (default when verified), the newest dedup run's pairs, its answers, or the relevance
of retrieved chunks in the dataset judged last (``workbench retrieval judge``). y / n label
the item, s skips it, z undoes the last label. Each label is written in its own transaction
by one serial writer (:class:`SerialWrites`): the screen moves on at once, and labels land in
the order they were given, none lost and none twice. The judges' verdicts stay hidden until the
item is labelled (w shows them), so they cannot anchor the human. A compact report — each
judge's κ against the labels, and the judged metric's naive / human-only / prediction-powered
estimates — is recomputed in a worker once the labels land.
"""

from __future__ import annotations

from dataclasses import replace

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Header, Static

from workbench.judges.items import JudgedItem
from workbench.judges.queue import describe_order
from workbench.judges.report import JudgeReport
from workbench.meta.report import MetaRow
from workbench.store.labels import ClaimKey, default_annotator
from workbench.tables import DASH, fmt_estimate
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import label_loads
from workbench.tui.screens.label_loads import (KIND_TITLES, KINDS, RUNLESS, QueueView, load_cards, load_queue, load_report,
                                              undo_label, write_label)
from workbench.tui.label_text import ANSWERS, card_text, report_lines, short, verdict_text
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.serial import SerialWrites
from workbench.tui.widgets import KeyFooter

WIDE = 100          # from this width the report sits right of the item, below it on a narrower screen
ESTIMATE = 19       # "74.64 [65.70,81.79]": a correlation ×100 with its interval
PREFETCH = 4        # cards loaded ahead of the item shown
REPORT_DELAY = 0.4  # seconds of quiet after a label before the report is recomputed


class LabelsScreen(SerialWrites, WorkbenchScreen):
    """One judged item at a time: y / n label it, s skips, z undoes; the report beside it follows the labels."""

    BINDINGS = [
        Binding("y", "label(True)", "Yes"), Binding("n", "label(False)", "No"), Binding("s", "skip", "Skip"),
        Binding("z", "undo", "Undo"), Binding("t", "next_kind", "Kind"), Binding("o", "toggle_order", "Order"),
        Binding("e", "toggle_more", "More context"), Binding("w", "toggle_verdicts", "Verdicts"),
        # m as on the Ledger: the run whose claims and answers are labelled, without going back there.
        Binding("m", "next_run", "Run"),
    ]
    AUTO_FOCUS = "#card-scroll"

    def __init__(self):
        super().__init__()
        self.annotator = default_annotator()
        self.kind: str | None = None
        self.order = "uniform"
        self.view: QueueView | None = None
        self.queues_pending = 0                  # queues asked for and not back yet (the last one is shown)
        self.extending = False                   # the next window of the queue is on its way
        self.typed: list[tuple[str, tuple]] = [] # keys pressed while the next items were on their way
        self.done: set = set()                   # keys labelled on this screen (and not undone)
        self.items: list[JudgedItem] = []
        self.pos = 0
        self.labelled = 0
        self.skipped: set = set()               # keys skipped in this pass (a new window leaves them out)
        self.touched = False                     # labelled or skipped since the queue was loaded
        self.history: dict[str, list[JudgedItem]] = {k: [] for k in KINDS}
        self.cards: dict = {}
        self.more = False
        self.show_verdicts = False
        self.last = ""
        self.report: JudgeReport | None = None
        # Every meta set's scorers against people's overall preference (None: not read yet on this screen).
        self.preferences: tuple[tuple[str, MetaRow], ...] | None = None
        self._report_due = False
        self._report_timer = None

    @property
    def loaded(self) -> bool:
        return super().loaded and self.writes_owed == 0 and not self._report_due and not self.typed

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="heading", classes="title")
        yield Static("", id="order", classes="status")
        with Horizontal(id="label-body"):
            with VerticalScroll(id="card-scroll"):
                yield Static("", id="card")
            with VerticalScroll(id="report-panel"):
                yield Static("", id="report")
                yield Static("", id="preferences")
        yield Static("", id="last", classes="status")
        yield KeyFooter()

    # -- loading ---------------------------------------------------------------------------------

    def on_screen_resume(self) -> None:
        run_changed = self.view is not None and self.view.kind not in RUNLESS and self.view.run != self.app.run_name
        if run_changed:
            self.kind = None    # the new run's default kind
            self._clear_last()  # what was done to the other run's items
        if self.view is None or run_changed or not self.touched:
            self.reload_queue()

    def reload_queue(self) -> None:
        """Ask for the queue of the current kind and order; it is read after every label already given."""
        self.skipped = set()
        self.queues_pending += 1
        self.items, self.pos = [], 0
        self._draw()
        self.serial_write("queue", load_queue, self.kind, self.app.run_name, self.order, self.annotator)

    def _extend(self) -> None:
        """Ask for the queue's next window before the shown one runs out (after the labels already given)."""
        if self.extending or self.queues_pending or self.view is None or not self.view.more:
            return
        self.extending = True
        listed = {item.key for item in self.items[self.pos:]}
        self.serial_write("queue-more", load_queue, self.view.kind, self.app.run_name, self.view.order,
                          self.annotator, frozenset(self.skipped | self.done | listed), None, self.view.population)

    def _waiting(self) -> bool:
        """The next item is on its way: keys typed now wait for it (none is lost, none lands on the wrong item)."""
        return bool(self.queues_pending) or (self.extending and self.pos >= len(self.items))

    def _act(self, name: str, *args) -> bool:
        """True: do the action now; False: it was queued behind the items being loaded (replayed in order)."""
        if self._waiting() or self.typed:
            self.typed.append((name, args))
            return False
        return True

    def _replay(self) -> None:
        while self.typed and not self._waiting():
            name, args = self.typed.pop(0)
            getattr(self, f"_do_{name}")(*args)

    def on_data_changed(self, message: DataChanged) -> None:
        if self.view is not None and self.view.population is not None:
            self._schedule_report()

    def on_resize(self) -> None:
        wide = self.size.width >= WIDE
        self.set_class(not wide, "narrow")
        self._draw_report()

    def on_loaded(self, message: Loaded) -> None:
        what, payload = message.what, message.payload
        if what == "queue":
            self.serial_done(what)
            self._queue_loaded(payload)
            self._replay()
        elif what == "queue-more":
            self.serial_done(what)
            self._extended(payload)
            self._replay()
        elif what in ("label", "undo"):
            self.serial_done(what)
            self._schedule_report()
        elif what == "cards":
            self.cards.update(payload)
            self._draw()
        elif what == "report":
            pop = self.view.population if self.view is not None else None
            if payload.preferences is not None:
                self.preferences = payload.preferences
            if pop is not None and (payload.report.kind, payload.report.run) == (pop.kind, pop.run):
                self.report = payload.report
            self._draw_report()

    def _queue_loaded(self, view: QueueView) -> None:
        self.queues_pending = max(0, self.queues_pending - 1)
        if self.queues_pending:
            return      # a later request is on its way (queues come back in the order asked for)
        self.view, self.kind, self.order = view, view.kind, view.order
        if view.note:
            self.notify(view.note, timeout=8)
        self.items = list(view.items)
        self.pos, self.touched = 0, False
        self.labelled = view.labelled
        if self.report is not None and (view.population is None or self.report.kind != view.population.kind
                                        or self.report.run != view.population.run):
            self.report = None
        self._draw()
        if view.population is not None:
            # A queue read afresh (the screen shown, another kind or run) reads people's preferences again too.
            self.load("report", load_report, view.population, True)
        else:
            self._draw_report()

    def _extended(self, view: QueueView) -> None:
        self.extending = False
        if self.queues_pending or self.view is None or view.kind != self.view.kind or view.order != self.view.order:
            return      # the kind or order changed meanwhile: that queue is being read afresh
        listed = {item.key for item in self.items[self.pos:]}
        self.items += [item for item in view.items if item.key not in self.skipped | self.done | listed]
        self.view = replace(self.view, more=view.more)
        self._draw()

    def _schedule_report(self) -> None:
        """Recompute the report once the labels stop coming for a moment (a burst of keys costs one report)."""
        if self.view is None or self.view.population is None:
            return
        self._report_due = True
        if self._report_timer is not None:
            self._report_timer.stop()
        self._report_timer = self.set_timer(REPORT_DELAY, self._report_now)

    def _report_now(self) -> None:
        self._report_due = False
        self._report_timer = None
        if self.view is not None and self.view.population is not None:
            self.load("report", load_report, self.view.population, self.preferences is None)

    def _prefetch(self) -> None:
        wanted = [i.key for i in self.items[self.pos:self.pos + PREFETCH] if i.key not in self.cards]
        if wanted:
            self.load("cards", load_cards, wanted)

    # -- drawing ---------------------------------------------------------------------------------

    def current(self) -> JudgedItem | None:
        return self.items[self.pos] if self.view is not None and self.pos < len(self.items) else None

    def _draw(self) -> None:
        view = self.view
        heading = self.query_one("#heading", Static)
        order_line = self.query_one("#order", Static)
        body = self.query_one("#card", Static)
        if self.queues_pending:
            heading.update(f"[b]Labels[/b]  {KIND_TITLES.get(self.kind or '', '')} · loading the queue …")
            order_line.update("")
            body.update("")
            return
        if view is None:
            return
        kind = view.kind
        where = {"dedup": f"dedup run {esc(view.run or DASH)}", "relevance": f"dataset {esc(view.run or DASH)}"}.get(
            kind, f"run {esc(view.run or DASH)}")
        total = view.total
        # Yours only (the queue is this annotator's); the report panel counts every annotator's labels.
        heading.update(f"[b]Labels[/b]  {KIND_TITLES[kind]} (t) · {where} · annotator {esc(self.annotator)} · "
                       f"you labelled {self.labelled} of {total} ({self.order})")
        order_line.update(f"{self.order} order (o): {describe_order(self.order)}")
        if view.empty:
            body.update(f"[b]Nothing to label here.[/b] {esc(view.empty)}\n\n[dim]t: next kind "
                        f"({' → '.join(KINDS)})[/dim]")
            return
        item = self.current()
        if item is None:
            body.update("[dim]loading the next items …[/dim]" if self.extending else self._end_text(total))
            return
        body.update(card_text(kind, item, self.cards.get(item.key), more=self.more, verdicts=self.show_verdicts))
        self._prefetch()

    def _end_text(self, total: int) -> str:
        if self.labelled >= total:
            return (f"[b]All {total} {KIND_TITLES[self.view.kind]} labelled[/b] in {self.order} order.\n\n"
                    "[dim]t: next kind · o: other order · z: undo the last label[/dim]")
        left = total - self.labelled
        return (f"[b]End of the queue.[/b] {left} left unlabelled ({len(self.skipped)} skipped this pass).\n\n"
                "[dim]s: go through them again · t: next kind · o: other order · z: undo the last label[/dim]")

    def _draw_report(self) -> None:
        if not self.is_mounted:
            return
        panel = self.query_one("#report", Static)
        preferences = self.query_one("#preferences", Static)
        # With nothing to report the panel is hidden, not left empty: tab has no blank pane to move to (and says so).
        empty = self.view is None or self.view.population is None
        self.query_one("#report-panel").display = not empty
        if empty:
            panel.update("")
            preferences.update("")
            preferences.display = False
            return
        panel.update("\n".join(report_lines(self.report, wide=self.size.width < WIDE)))
        # Below the item the panel is the screen's width less its padding and scrollbar.
        lines = preference_lines(self.preferences, side=self.size.width >= WIDE, width=self.size.width - 6)
        preferences.display = bool(lines)      # without a meta set, not even an empty line
        preferences.update("\n".join(lines))

    # -- actions ---------------------------------------------------------------------------------

    # Labels, skips, undos and the kind/order keys act in the order typed: typed while the next items
    # are on their way, they wait for them (see _act) rather than being dropped or landing elsewhere.

    def action_label(self, value: bool) -> None:
        if self._act("label", value):
            self._do_label(value)

    def action_skip(self) -> None:
        if self._act("skip"):
            self._do_skip()

    def action_undo(self) -> None:
        if self._act("undo"):
            self._do_undo()

    def action_next_kind(self) -> None:
        if self._act("next_kind"):
            self._do_next_kind()

    def action_toggle_order(self) -> None:
        if self._act("toggle_order"):
            self._do_toggle_order()

    def action_next_run(self) -> None:
        if self._act("next_run"):
            self._do_next_run()

    def _nothing_shown(self) -> str | None:
        """Why no item is shown to act on (None: one is)."""
        if self.view is None:
            return "The queue is still loading."
        if self.view.empty:
            return f"Nothing to label here: {self.view.empty} (t: next kind)"
        if self.current() is None:
            return ("Every item is labelled: z undoes the last label, t shows the next kind." if
                    self.labelled >= self.view.total else "End of the queue: s goes through the skipped items again.")
        return None

    def _say_nothing_shown(self) -> bool:
        why = self._nothing_shown()
        if why is not None:
            self.notify(why, timeout=5)
        return why is not None

    def _do_label(self, value: bool) -> None:
        item = self.current()
        if item is None:
            self._say_nothing_shown()
            return
        kind = self.view.kind
        claim = item.text if isinstance(item.key, ClaimKey) else None
        self.serial_write("label", write_label, item.key, value, self.annotator, self.order, claim)
        self.history[kind].append(item)
        self.done.add(item.key)
        self.labelled += 1
        self.touched = True
        yes, no = ANSWERS[kind]
        self.last = (f"saved: {esc(short(item.text, 32))} → [b]{yes if value else no}[/b] · judges: "
                     f"{verdict_text(item.verdicts, compact=True)}")
        self._advance()

    def _do_skip(self) -> None:
        if self.view is None or not self.view.has_queue:
            self._say_nothing_shown()
            return
        item = self.current()
        if item is None:
            if self.labelled < self.view.total:
                self.reload_queue()     # through the skipped ones again
            else:
                self._say_nothing_shown()
            return
        self.skipped.add(item.key)
        self.touched = True
        self.last = f"skipped: {esc(short(item.text))} (it stays in the queue)"
        self._advance()

    def _advance(self) -> None:
        """On to the next item; with half a window left, the next window is asked for."""
        self.pos += 1
        self._show_last()
        if len(self.items) - self.pos <= label_loads.WINDOW // 2:
            self._extend()
        self._draw()

    def _do_undo(self) -> None:
        kind = self.view.kind if self.view is not None else None
        history = self.history.get(kind or "", [])
        if not history or self.view is None or not self.view.has_queue:
            self.notify("nothing to undo here" + ("" if kind is None else f" ({KIND_TITLES[kind]})"), timeout=4)
            return
        item = history.pop()
        self.serial_write("undo", undo_label, item.key, self.annotator)
        self.done.discard(item.key)
        self.items.insert(self.pos, item)
        self.labelled = max(0, self.labelled - 1)
        self.last = f"undone: {esc(short(item.text))} is unlabelled again and shown next"
        self._show_last()
        self._draw()

    def _do_next_kind(self) -> None:
        current = self.view.kind if self.view is not None else (self.kind or KINDS[0])
        self.kind = KINDS[(KINDS.index(current) + 1) % len(KINDS)]
        self.last = ""
        self._show_last()
        self.reload_queue()

    def _do_next_run(self) -> None:
        """The next run of the dataset, as the Ledger's m: its default kind, a fresh queue, the last line cleared."""
        runs = list(self.view.runs) if self.view is not None else []
        if not runs:
            self.notify("no run selected: open one in Runs (r)", timeout=4)
            return
        if len(runs) == 1:
            self.notify(f"only one run of this dataset: {runs[0]}", timeout=4)
            return
        current = self.app.run_name
        self.app.run_name = runs[(runs.index(current) + 1) % len(runs)] if current in runs else runs[0]
        if self.kind not in RUNLESS:
            self.kind = None        # the new run's default kind
        else:
            self.notify(f"run {self.app.run_name}: {KIND_TITLES[self.kind]} do not belong to a run "
                        "(t for its claims or answers)", timeout=6)
        self._clear_last()
        self.reload_queue()

    def _clear_last(self) -> None:
        self.last = ""
        if self.is_mounted:
            self._show_last()

    def _do_toggle_order(self) -> None:
        if self.view is None:
            self._say_nothing_shown()
            return
        self.kind = self.view.kind
        self.order = "disagreement" if self.order == "uniform" else "uniform"
        self.reload_queue()

    def action_toggle_more(self) -> None:
        if self._say_nothing_shown():
            return
        self.more = not self.more
        self._draw()

    def action_toggle_verdicts(self) -> None:
        if self._say_nothing_shown():
            return
        self.show_verdicts = not self.show_verdicts
        self._draw()

    def _show_last(self) -> None:
        self.query_one("#last", Static).update(self.last)


def preference_lines(rows: tuple[tuple[str, MetaRow], ...] | None, *, side: bool, width: int = 74) -> list[str]:
    """Beside κ: how far each checker agrees with people's preferences between two answers (the overall label of
    every meta set, as markup); none without a meta set. ``side``: lines of ≤ 36 columns for the side panel, else
    one line a scorer within ``width`` (its name on a line of its own when long)."""
    if not rows:
        return []
    sets = {name for name, _ in rows}
    where = f"meta set {esc(next(iter(sets)))}" if len(sets) == 1 else f"{len(sets)} meta sets"
    lines = ["", "[b]Agreement with people's preferences[/b]" + ("" if side else f" [dim](overall · {where})[/dim]")]
    if side:
        lines += [f"[dim]overall label · {where}[/dim]", "[dim]r Pearson, ρ Spearman ×100 \\[95% CI][/dim]",
                  "[dim]n pairs · M: every label, instances[/dim]"]
    else:
        lines.append("[dim]Pearson, Spearman ×100 \\[95% CI] · n pairs · M: every label, the instances[/dim]")
    for name, row in rows:
        scorer = row.scorer if len(sets) == 1 else f"{name} · {row.scorer}"
        pearson, spearman = fmt_estimate(row.pearson, 2), fmt_estimate(row.spearman, 2)
        if side:
            lines += [f"[b]{esc(scorer)}[/b]", f" r {pearson} [dim]n {row.n}[/dim]", f" ρ {spearman}"]
            continue
        numbers = f"{pearson:>{ESTIMATE}}  {spearman:>{ESTIMATE}}  n {row.n}"
        room = max(0, width - len(numbers) - 1)
        if len(scorer) <= room:
            lines.append(f"{esc(scorer)}{' ' * (room - len(scorer))} {numbers}")
        else:   # a long name on its own line: the numbers stay in their columns
            lines += [esc(scorer), f"{' ' * room} {numbers}"]
    return lines
