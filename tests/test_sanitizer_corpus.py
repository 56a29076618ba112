"""The Python corpus of seeded ordering bugs (tests/sanitizer_corpus/, issue 17).

Each program there runs twice under ``ASCEND_MOCK_SANITIZE=1``: ``bug`` must produce the
report its ``EXPECT`` names (kind, both calls and their access) with the user's lines
that the ``# <- current`` / ``# <- previous`` markers point at, and a RaceWarning at the
current line; ``fixed`` (the same program with the missing ordering) must produce none.
The mock's own C corpus is tests/c/test_sanitizer_corpus.c (run by test_mock_c.py).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CORPUS = Path(__file__).parent / "sanitizer_corpus"
PROGRAMS = sorted(p.name for p in CORPUS.glob("[0-9][0-9]_*.py"))


def test_corpus_has_at_least_ten_programs() -> None:
    assert len(PROGRAMS) >= 10, PROGRAMS


def _expectation(source: str) -> tuple[str, str, str, str, str]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EXPECT":
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple) and len(value) == 5
            return value
    raise AssertionError("no EXPECT = (kind, current, access, previous, access)")


def _marker(source: str, name: str, program: str) -> str:
    lines = [i for i, text in enumerate(source.splitlines(), 1) if f"# <- {name}" in text]
    assert len(lines) == 1, f"{program}: one '# <- {name}' marker expected"
    return f"{program}:{lines[0]}"


def _run(program: str, mode: str, clean_env: Any) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, program, mode],
        env=clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_SANITIZE="1"),
        cwd=CORPUS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("CORPUS ")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(lines[0][len("CORPUS ") :])
    result["stderr"] = proc.stderr
    assert result["mode"] == "report"
    return result


@pytest.mark.parametrize("program", PROGRAMS)
def test_seeded_bug_is_reported_with_the_user_lines(program: str, clean_env: Any) -> None:
    source = (CORPUS / program).read_text()
    kind, cur_name, cur_access, prev_name, prev_access = _expectation(source)
    cur_tag = _marker(source, "current", program)
    prev_tag = _marker(source, "previous", program)
    got = _run(program, "bug", clean_env)
    wanted = {
        "kind": kind,
        "current": (cur_name, cur_access, cur_tag),
        "previous": (prev_name, prev_access, prev_tag),
    }
    found = [
        {
            "kind": r["kind"],
            "current": (r["current"]["name"], r["current"]["access"], r["current"]["tag"]),
            "previous": (r["previous"]["name"], r["previous"]["access"], r["previous"]["tag"]),
        }
        for r in got["reports"]
    ]
    assert wanted in found, json.dumps(got, indent=1)
    report = got["reports"][found.index(wanted)]
    # the report names both streams (the host for a host access) and both user lines
    assert report["size"] > 0
    if kind == "race":
        assert report["current"]["stream_id"] >= 0 and report["previous"]["stream_id"] >= 0
        assert report["current"]["stream_id"] != report["previous"]["stream_id"]
    else:
        assert report["current"]["stream_id"] == -1 and report["previous"]["stream_id"] >= 0
    assert f"[{cur_tag}]" in report["message"] and f"[{prev_tag}]" in report["message"]
    # the RaceWarning points at the line that made the later access
    line = int(cur_tag.rsplit(":", 1)[1])
    warned = [(Path(w["file"]).name, w["line"]) for w in got["warnings"]]
    assert (program, line) in warned, got["warnings"]


@pytest.mark.parametrize("program", PROGRAMS)
def test_fixed_program_is_clean(program: str, clean_env: Any) -> None:
    got = _run(program, "fixed", clean_env)
    assert got["reports"] == [] and got["warnings"] == [], json.dumps(got, indent=1)
    assert "race sanitizer" not in got["stderr"]
