"""Widgets and cell-text helpers every screen shares."""

from __future__ import annotations

import re
import textwrap

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

_WELCOME = """\
[b]Welcome to the Dissipation Workbench.[/b] Nothing is imported yet. To begin:

 • press {import_keys} to import a dataset directory, e.g. [b]sample_data/metaqa[/b],
   then [b]r[/b] for Runs and [b]n[/b] for a new run;
 • or run [b]just demo[/b] in a shell (in the checkout): it imports the sample data,
   runs a small sweep with the default model and writes [b].workbench/demo.db[/b];
   [b]just tui[/b] then opens it here.

[b]?[/b] lists every key · [b]ctrl+p[/b] the command palette · [b]q[/b] quits"""


def welcome(import_keys: str) -> str:
    """The greeting of an empty database, as markup; ``import_keys`` says how to reach the import from here."""
    return _WELCOME.format(import_keys=import_keys)

# Where a line's continuation starts: under the text after "round 40  " in a sequential run's stopped cells.
_HANG_AFTER = re.compile(r"^\s*round\s+[\d,]+\s+")


def hanging_lines(lines: list[str], width: int) -> str:
    """``lines`` folded to ``width`` columns, each continuation indented under the text it continues (after a
    stopped cell's "round N", or two columns in from the line's own indent), so a folded line still reads as one."""
    out = []
    for line in lines:
        lead = _HANG_AFTER.match(line)
        hang = len(lead.group(0)) if lead else len(line) - len(line.lstrip()) + 2
        out.extend(textwrap.wrap(line, max(width, hang + 20), subsequent_indent=" " * hang, break_long_words=False,
                                 break_on_hyphens=False, drop_whitespace=True) or [""])
    return "\n".join(out)


ROOMY = 100  # a footer at least this wide has room for the palette's hint and padding around each key


class KeyFooter(Footer):
    """The footer of every screen: on a narrow terminal it is compact and leaves the command
    palette's hint out (the header names ctrl+p and ? on every screen), so the screen's own keys fit."""

    def __init__(self) -> None:
        # Composed as the terminal is wide now: otherwise a narrow screen's footer is built twice, once
        # roomy and again at its first resize (every screen's first show).
        super().__init__()
        roomy = self.app.size.width >= ROOMY
        self.set_reactive(Footer.show_command_palette, roomy)
        self.set_reactive(Footer.compact, not roomy)
        self.set_class(not roomy, "-compact", update=False)

    def compose(self) -> ComposeResult:
        # Each key made compact as the footer is before it is mounted: a key starts roomy-or-compact by its own
        # default and is then restyled to the footer's (its data binding), one stylesheet pass per key per build.
        # The palette's key is not bound to the footer (Footer.compose): it keeps its own default.
        for widget in super().compose():
            if isinstance(widget, FooterKey) and not widget.has_class("-command-palette"):
                widget.set_reactive(FooterKey.compact, self.compact)
                widget.set_class(self.compact, "-compact", update=False)
            yield widget

    def on_resize(self, event) -> None:
        roomy = event.size.width >= ROOMY
        self.compact = not roomy
        if self.show_command_palette != roomy:
            self.show_command_palette = roomy
            self.refresh(recompose=True)
        self._fit_keys()

    def bindings_changed(self, screen) -> None:
        """Recompose only when the keys shown would change: Textual signals after every focus move and
        action, and rebuilding twenty keys each time cost most of what a key press costs."""
        shown = _footer_keys(screen)
        if shown == getattr(self, "_shown", None) and self.children:
            return
        if screen.app.app_focus and self.is_attached and screen is self.screen:   # when Footer recomposes
            self._shown = shown
        super().bindings_changed(screen)

    async def recompose(self) -> None:
        await super().recompose()
        self._fit_keys()

    def _fit_keys(self) -> None:
        """Show every key, then, once laid out, hide those the screen's edge (or the palette's hint) cuts.

        A cut key reads as a key without its label ("J/K Side d"). Hidden, not removed, so the keys
        before it keep their places; shown again first, as a hidden key has no region to measure.
        """
        for entry in self.children:
            entry.visible = True
        self.call_after_refresh(self._hide_cut_keys, 5)

    def _hide_cut_keys(self, tries: int) -> None:
        if any(not entry.region.width for entry in self.children):
            if tries > 1:   # not laid out yet (just recomposed): measure after the next refresh
                self.call_after_refresh(self._hide_cut_keys, tries - 1)
            return
        palette = [w.region.x for w in self.query("FooterKey.-command-palette")]
        end = min(palette + [self.region.right])
        entries = [e for e in self.children if not e.has_class("-command-palette")]
        for i, entry in enumerate(entries):
            entry.visible = entry.region.right <= end
            if not entry.visible and i and type(entry).__name__ == "FooterLabel":
                entries[i - 1].visible = False      # a group's keys ("J/K") mean nothing without its label


def _footer_keys(screen) -> tuple:
    """What a footer shows of ``screen``'s bindings (as Textual's Footer.compose reads them)."""
    return tuple((key, b.action, b.description, b.key_display, b.group, enabled, tooltip)
                 for key, (_, b, enabled, tooltip) in screen.active_bindings.items() if b.show)


def fit(text: str, width: int) -> str:
    """``text`` on one line cut to ``width`` characters, with … where it was cut."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def fit_tail(text: str, width: int) -> str:
    """``text`` cut from the left: an id's end (metaqa-1hop-dev-01137 → …dev-01137) tells samples apart."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


def move_or_say(screen, table, step: int) -> None:
    """j/k on a table: the cursor one row down or up, or a word why it cannot move."""
    if not table.row_count:
        screen.notify("Nothing to move through: the list is empty.", timeout=3)
        return
    row = table.cursor_row + step
    if not 0 <= row < table.row_count:
        screen.notify(f"Already on the {'last' if step > 0 else 'first'} row.", timeout=3)
        return
    table.move_cursor(row=row)


def scroll_both_or_say(screen, step: int) -> None:
    """J/K: both side-by-side panes (``.pane``) a page down or up, or a word why neither can move."""
    panes = list(screen.query(".pane"))
    movable = [p for p in panes if (p.scroll_y < p.max_scroll_y if step > 0 else p.scroll_y > 0)]
    if not movable:
        screen.notify("Both panes are shown whole: nothing to scroll." if not any(p.max_scroll_y for p in panes)
                      else f"Both panes are at their {'end' if step > 0 else 'top'}.", timeout=3)
        return
    for pane in panes:
        pane.scroll_to(y=pane.scroll_y + step * max(1, pane.size.height - 2), animate=False)
