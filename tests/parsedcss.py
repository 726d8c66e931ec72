"""Textual's CSS parsed once per test process, not once per app and screen.

Textual re-parses every CSS source into a fresh ``Stylesheet`` each time an app starts and each
time a screen of a new mode first shows (``App.refresh_css`` → ``Stylesheet.reparse``), so its
parse cache never outlives one refresh. A user's app starts once, but the suite starts an app
hundreds of times in one worker: parsing the same CSS again was about 7% of a TUI test's time.

The parse of a source depends on its text, where it was read from, its kind and scope and the CSS
variables (the theme): with all of them as the key, the rules are the ones Textual would parse,
and Textual already hands one parse's ``RuleSet`` objects to every later ``parse()`` of a stylesheet
(they are not changed after parsing). The snapshot tests compare what is drawn, byte for byte.
"""

from __future__ import annotations

from textual.css.stylesheet import Stylesheet

_PARSED: dict[tuple, list] = {}
_parse_rules = Stylesheet._parse_rules


def _parse_rules_once(self, css, read_from, is_default_rules=False, tie_breaker=0, scope=""):
    key = (css, read_from, is_default_rules, tie_breaker, scope, tuple(sorted(self._variables.items())))
    try:
        return _PARSED[key]
    except KeyError:
        rules = _PARSED[key] = _parse_rules(self, css, read_from, is_default_rules, tie_breaker, scope)
        return rules


def parse_once() -> None:
    """Make every ``Stylesheet`` of this process reuse a parse of the same source and variables."""
    Stylesheet._parse_rules = _parse_rules_once
