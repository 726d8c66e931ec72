"""The TUI's key reference (docs/keys.md) is generated from the screens' bindings and lists every one.

A changed key or description without `python scripts/tui_keys.py` fails here.
"""

from __future__ import annotations

from workbench.tui.app import WorkbenchApp
from workbench.tui.help import key_label
from conftest import REPO, load_script


def test_the_key_reference_is_what_the_bindings_give_now():
    assert (REPO / "docs" / "keys.md").read_text(encoding="utf-8") == load_script("tui_keys").render(), \
        "docs/keys.md is stale: run `python scripts/tui_keys.py`"


def test_every_binding_of_every_screen_is_in_the_reference():
    reference = (REPO / "docs" / "keys.md").read_text(encoding="utf-8")
    cell = load_script("tui_keys").cell
    for screen in [WorkbenchApp, *WorkbenchApp.MODES.values()]:
        for binding in screen.BINDINGS:
            row = f"| `{cell(key_label(binding.key))}` | {cell(binding.description or binding.action)} |"
            assert row in reference, (screen.__name__, binding.key)
