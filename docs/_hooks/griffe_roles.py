"""A griffe extension for the API pages: Sphinx roles in docstrings as Markdown code.

The package's docstrings use reStructuredText roles (``:func:`events```), which ``help()``
and IDEs read well. mkdocstrings renders Markdown, where a role would show as raw text. Each
role becomes a code span of the name it points at (its last part for a ``~`` target), which
never needs a cross-reference target to exist, so a role naming an undocumented object
cannot break the strict build.
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(func|meth|class|data|attr|mod|obj|exc|const):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    kind, short, target = match.groups()
    name = target.rsplit(".", 1)[-1] if short else target
    return f"`{name}()`" if kind in {"func", "meth"} and not name.endswith(")") else f"`{name}`"


def plain(text: str) -> str:
    """``text`` with every Sphinx role replaced by a Markdown code span."""
    return _ROLE.sub(_code, text)


class SphinxRolesAsCode(griffe.Extension):
    """Rewrite the roles of every docstring griffe loads."""

    def on_instance(self, *, node, obj, agent, **kwargs) -> None:  # noqa: ARG002 - griffe's hook signature
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
