"""``python -m pyacl_rt``: the same command line as ``pyacl-rt``."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
