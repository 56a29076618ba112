"""No dead code in pyacl_rt: vulture finds nothing that is not on the whitelist
(tests/vulture_whitelist.py, each entry with its reason)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GENERATED = ("pyacl_rt/_raw/_abi_data.py", "pyacl_rt/_raw/_abi_runtime.py")


def test_vulture_finds_no_dead_code() -> None:
    pytest.importorskip("vulture")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vulture",
            "pyacl_rt",
            "tests/vulture_whitelist.py",
            "--min-confidence",
            "60",
            "--exclude",
            ",".join(GENERATED),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and not proc.stdout, (
        "unused code (delete it, or whitelist it in tests/vulture_whitelist.py with the "
        f"reason it is used):\n{proc.stdout}{proc.stderr}"
    )
