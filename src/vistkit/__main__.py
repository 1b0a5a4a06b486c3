"""``python -m vistkit ...``: the same as the ``vistkit`` command."""

from __future__ import annotations

import sys

from vistkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
