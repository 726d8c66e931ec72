"""Keys every screen inherits from Textual, made to say why when they have nothing to act on.

A key that does nothing looks broken (docs/design.md §9: every binding acts or says why in one
line). Textual's copy key with nothing selected, and tab on a screen with one pane, did nothing.
"""

from __future__ import annotations

NOTHING_TO_COPY = "Nothing is selected to copy: drag the mouse over text first."
NOTHING_TO_FOCUS = "Nothing else to focus here: this screen has no other pane."


class CopyOrSay:
    """A screen mixin: ctrl+c and super+c (Textual's copy) with nothing selected say how to select."""

    def action_copy_text(self) -> None:
        if self.get_selected_text() is None:
            self.notify(NOTHING_TO_COPY, timeout=3)
            return
        super().action_copy_text()
