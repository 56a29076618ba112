"""Every runnable example under examples/ runs (on the mock) and reports success."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TESTS = Path(__file__).resolve().parent

#: Examples run with their own arguments and checks by another test file (their output is
#: a per-worker report, not the ": ok" line of the examples run here).
OWN_TESTS = {
    "per_card.py": "test_scaleout.py",
    "ray_workers.py": "test_scaleout.py",  # marker ray: a further step of .ci/run
    "pipeline_speedup.py": "test_profiler.py",  # prints the modeled times
}


def test_examples_with_their_own_tests_are_run_there() -> None:
    for script, test_file in OWN_TESTS.items():
        assert (EXAMPLES / script).is_file(), script
        assert f'"{script}"' in (TESTS / test_file).read_text(), (script, test_file)


@pytest.mark.parametrize(
    "script", sorted(p.name for p in EXAMPLES.glob("*.py") if p.name not in OWN_TESTS)
)
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
    assert "race sanitizer" not in proc.stderr, proc.stderr  # pytest --npu-sanitize
