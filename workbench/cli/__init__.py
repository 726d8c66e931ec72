"""The ``workbench`` command line: the same verbs as the TUI, for scripts and CI.

``main`` is the entry point of the ``workbench`` script (and of ``python -m workbench.cli``).
The package: ``main.py`` builds the top-level parser and adds each verb group; one module per
group (``data``, ``runs``, ``ledger``, ``retrieval``, ``claims``, ``searchain``, ``dedup``,
``triage``, ``byo``, ``tui``) holds its verbs' options and handlers; ``common`` the options they
share, ``shared`` the helpers their handlers share, ``types`` the argument types, and
``exit_codes`` what each exit code means.
"""

from workbench.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
