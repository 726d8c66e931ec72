"""``python -m workbench.cli``: the ``workbench`` command (tests and bench scripts run it so)."""

import sys

from workbench.cli import main

if __name__ == "__main__":
    sys.exit(main())
