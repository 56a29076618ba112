"""Every runnable example under examples/ runs (on the mock) and reports success."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs(script: str, clean_env: Any, tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env=clean_env(PYACL_RT_BACKEND="mock"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ": ok" in proc.stdout, proc.stdout
