"""Escaping data for Textual markup: evidence lines start with "[T17]", which looks like a tag."""


def esc(text: object) -> str:
    """``text`` as literal markup (backslash-escapes every ``[``)."""
    return str(text).replace("\\", "\\\\").replace("[", "\\[")
