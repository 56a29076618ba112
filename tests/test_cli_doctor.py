"""``pyacl-rt doctor``: every problem check (level, message, what to do), the exit code,
the JSON document and the text report (with and without rich)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import _clean_env

from pyacl_rt import _cli_doctor

_NO_RICH = (
    "import sys; sys.modules['rich'] = None; "
    "from pyacl_rt.cli import main; raise SystemExit(main(sys.argv[1:]))"
)
KEYS = {
    "schema",
    "pyacl_rt_version",
    "status",
    "library",
    "versions",
    "devices",
    "environment",
    "ld_library_path",
    "mock",
    "problems",
}


def run_cli(
    *args: str, rich: bool = True, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pyacl_rt"] if rich else [sys.executable, "-c", _NO_RICH]
    full = _clean_env(**{"PYACL_RT_BACKEND": "mock", **env})
    if "ASCEND_MOCK_SANITIZE" not in env:  # the doctor reports it: not from pytest --npu-sanitize
        full.pop("ASCEND_MOCK_SANITIZE", None)
    return subprocess.run(
        [*cmd, *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def doctor(**env: str) -> tuple[int, dict[str, Any], str]:
    proc = run_cli("doctor", "--json", **env)
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == KEYS
    return proc.returncode, doc, proc.stderr


def _problem(doc: dict[str, Any], check: str) -> dict[str, str]:
    found = [p for p in doc["problems"] if p["check"] == check]
    assert found, (check, doc["problems"])
    return found[0]


def test_doctor_clean_mock() -> None:
    code, doc, err = doctor(ASCEND_MOCK_DEVICE_COUNT="2")
    assert code == 0 and err == ""
    assert doc["schema"] == _cli_doctor.DOCTOR_SCHEMA_VERSION
    assert doc["status"] == "ok" and doc["problems"] == []
    lib = doc["library"]
    assert lib["backend"] == "mock" and lib["requested_backend"] == "mock"
    assert lib["path"].endswith("libascendcl.so") and lib["found_via"] == "PYACL_RT_BACKEND=mock"
    v = doc["versions"]
    assert v["cann"] == "8.5.0" and v["runtime_api"] and v["driver"] == "8.5.0"
    d = doc["devices"]
    assert d["count"] == 2 and d["physical_count"] == 2 and d["physical_ids"] == [0, 1]
    assert d["list"] == [
        {"index": 0, "name": "Ascend910B1", "error": None},
        {"index": 1, "name": "Ascend910B1", "error": None},
    ]
    assert {e["name"] for e in doc["environment"]} == {
        "PYACL_RT_BACKEND",
        "ASCEND_MOCK_DEVICE_COUNT",
    }
    m = doc["mock"]
    assert m["timing_mode"] == "real" and m["sanitizer"] == "off" and m["profiler"] == "off"
    assert m["timing_model"]["h2d_gbps"] == 24 and m["faults"] is None
    assert m["soc_name"] == "Ascend910B1" and m["memory_per_device_bytes"] == 64 << 30


def test_doctor_mock_configuration_is_reported() -> None:
    code, doc, _ = doctor(
        ASCEND_MOCK_TIMING="paced", ASCEND_MOCK_SANITIZE="1", ASCEND_MOCK_FAULTS="aclrtFree:5:1"
    )
    assert code == 0 and doc["status"] == "warnings"
    m = doc["mock"]
    assert m["timing_mode"] == "paced" and m["sanitizer"] == "report"
    assert m["faults"] == "aclrtFree:5:1"
    assert "ASCEND_MOCK_FAULTS" in _problem(doc, "mock-faults")["fix"]
    assert _problem(doc, "mock-sanitizer")["level"] == "info"
    assert _problem(doc, "mock-timing")["level"] == "info"


# (env, check, level, in message, in fix, exit code)
CASES: list[tuple[dict[str, str], str, str, str, str, int]] = [
    (
        {"PYACL_RT_BACKEND": "bogus"},
        "config",
        "error",
        "PYACL_RT_BACKEND",
        "correct or unset PYACL_RT_BACKEND",
        1,
    ),
    (
        {"PYACL_RT_BACKEND": "real", "PYACL_RT_LIBRARY": "/nonexistent/lib/libascendcl.so"},
        "library",
        "error",
        "PYACL_RT_LIBRARY=/nonexistent/lib/libascendcl.so cannot be used: not found",
        "PYACL_RT_BACKEND=mock",
        1,
    ),
    (
        {"PYACL_RT_BACKEND": "real"},
        "library",
        "error",
        "no usable libascendcl.so was found",
        "set_env.sh",
        1,
    ),
    (
        {"ASCEND_MOCK_DEVICE_COUNT": "0"},
        "devices",
        "error",
        "no device is visible: ACL_ERROR_RT_NO_DEVICE (207004)",
        "ASCEND_MOCK_DEVICE_COUNT=0",
        1,
    ),
    (
        {"ASCEND_RT_VISIBLE_DEVICES": "abc"},
        "devices",
        "error",
        "no device is visible",
        "correct or unset ASCEND_RT_VISIBLE_DEVICES",
        1,
    ),
    (
        {"ASCEND_RT_VISIBLE_DEVICES": "0,1,x,3"},
        "mock-config",
        "warning",
        "ASCEND_RT_VISIBLE_DEVICES='0,1,x,3' entry 'x' is not a device id",
        "set ASCEND_RT_VISIBLE_DEVICES to an accepted value",
        0,
    ),
    (
        {"ASCEND_MOCK_DEVICE_COUNT": "2", "ASCEND_MOCK_DEVICE_LOST": "1:507010"},
        "device",
        "error",
        "device 1 does not answer",
        "ASCEND_RT_VISIBLE_DEVICES",
        1,
    ),
    (
        {"ASCEND_GLOBAL_LOG_LEVEL": "9"},
        "env-value",
        "warning",
        "ASCEND_GLOBAL_LOG_LEVEL='9' is not an integer in 0..4",
        "a value in 0..4",
        0,
    ),
    (
        {"ASCEND_HOST_LOG_FILE_NUM": "0"},
        "env-value",
        "warning",
        "ASCEND_HOST_LOG_FILE_NUM='0' is not an integer in 1..1000",
        "a value in 1..1000",
        0,
    ),
    (
        {"ASCEND_PROFILER_FLAGS": "yes", "ASCEND_PROFILER_OUTPUT": "/tmp"},
        "env-value",
        "warning",
        "ASCEND_PROFILER_FLAGS='yes' is neither",
        "ASCEND_PROFILER_FLAGS=enable",
        0,
    ),
    (
        {"ASCEND_SLOG_PRINT_TO_STDOUT": "1"},
        "env-deprecated",
        "info",
        "deprecated",
        "ASCEND_LOG_PRINT_TO_STDOUT",
        0,
    ),
    (
        {"ASCEND_MOCK_TIMING": "fast"},
        "mock-config",
        "warning",
        "ASCEND_MOCK_TIMING='fast' is not real, virtual or paced",
        "set ASCEND_MOCK_TIMING to an accepted value",
        0,
    ),
    (
        {"ASCEND_MOCK_DEVICE_COUNT": "lots"},
        "mock-config",
        "warning",
        "ASCEND_MOCK_DEVICE_COUNT='lots' is not an integer",
        "ASCEND_MOCK_DEVICE_COUNT",
        0,
    ),
    (
        {"ASCEND_HOME_PATH": "relative/cann"},
        "cann-home",
        "warning",
        "relative path",
        "absolute path",
        0,
    ),
    (
        {"ASCEND_HOME_PATH": "/nonexistent/cann"},
        "cann-home",
        "warning",
        "does not exist",
        "point ASCEND_HOME_PATH at an installed CANN toolkit",
        0,
    ),
    (
        {"PYACL_RT_BACKEND": "auto", "PYACL_RT_WARN_FALLBACK": "0"},
        "backend",
        "info",
        "runs on the bundled mock",
        "PYACL_RT_BACKEND=mock",
        0,
    ),
    (
        {"PYACL_RT_BACKEND": "auto", "ASCEND_HOME_PATH": "/"},
        "backend",
        "warning",
        "although ASCEND_HOME_PATH is set",
        "set_env.sh",
        0,
    ),
    (
        {"LD_LIBRARY_PATH": "/usr/lib::/opt/x"},
        "ld-library-path",
        "warning",
        "the working directory",
        "remove empty and relative entries",
        0,
    ),
    (
        {"DUMP_CONFIG_PATH": "/nonexistent/acl.json"},
        "dump-config",
        "error",
        "DUMP_CONFIG_PATH=/nonexistent/acl.json is not a readable file",
        "point DUMP_CONFIG_PATH at a dump config JSON",
        1,
    ),
    (
        {"ASCEND_MOCK_FAULTS": "aclInit:1:507899"},
        "runtime",
        "error",
        "the runtime does not start",
        "pyacl-rt logs export",
        1,
    ),
    (
        {
            "ASCEND_RT_VISIBLE_DEVICES": "0",
            "ASCEND_PROFILER_FLAGS": "enable",
            "ASCEND_PROFILER_OUTPUT": "{tmp}",
        },
        "visible-devices",
        "warning",
        "cannot be used with profiling",
        "without ASCEND_RT_VISIBLE_DEVICES",
        0,
    ),
    (
        {"ASCEND_PROCESS_LOG_PATH": "{file}/sub"},
        "env-dir",
        "warning",
        "is not a writable directory",
        "point ASCEND_PROCESS_LOG_PATH at a writable directory",
        0,
    ),
]


@pytest.mark.parametrize(
    "env,check,level,message,fix,exit_code",
    CASES,
    ids=[f"{c[1]}-{next(iter(c[0].values()))[:20]}" for c in CASES],
)
def test_doctor_problem_checks(
    env: dict[str, str],
    check: str,
    level: str,
    message: str,
    fix: str,
    exit_code: int,
    tmp_path: Path,
) -> None:
    afile = tmp_path / "a_file"
    afile.write_text("x")
    env = {k: v.format(tmp=tmp_path, file=afile) for k, v in env.items()}
    code, doc, _err = doctor(**env)
    assert code == exit_code, doc["problems"]
    p = _problem(doc, check)
    assert p["level"] == level
    assert message in p["message"], p
    assert fix in p["fix"], p
    expected = {"error": ("errors",), "warning": ("warnings", "errors")}
    assert doc["status"] in expected.get(level, ("ok", "warnings", "errors"))
    assert (doc["status"] == "errors") == (exit_code == 1)


def test_doctor_stub_library_on_ld_library_path(tmp_path: Path) -> None:
    stub = tmp_path / "devlib" / "stub"
    stub.mkdir(parents=True)
    (stub / "libascendcl.so").write_bytes(b"\x7fELF")
    code, doc, _ = doctor(LD_LIBRARY_PATH=str(stub))
    assert code == 0
    p = _problem(doc, "ld-library-path")
    assert "link-time stub" in p["message"] and "remove the stub directory" in p["fix"]
    assert doc["ld_library_path"][0]["entry"] == str(stub)
    assert "refused" in doc["ld_library_path"][0]["note"]


@pytest.mark.parametrize("rich", [True, False], ids=["rich", "plain"])
def test_doctor_text_report(rich: bool) -> None:
    proc = run_cli(
        "doctor",
        rich=rich,
        ASCEND_MOCK_DEVICE_COUNT="2",
        ASCEND_MOCK_DEVICE_LOST="1",
        ASCEND_GLOBAL_LOG_LEVEL="7",
    )
    assert proc.returncode == 1
    assert proc.stderr == ""
    out = proc.stdout
    for head in ("Library", "Versions", "Devices", "Environment", "Mock", "Problems (3)"):
        assert f"\n{head}\n" in out, head
    assert "  [0] Ascend910B1  ok" in out
    assert "  [1] Ascend910B1  error: " in out and "507010" in out
    lines = out.splitlines()
    at = lines.index("Problems (3)")
    assert lines[at + 1].startswith("  ERROR: device 1 does not answer")
    assert lines[at + 2].startswith("    -> reset the device")
    assert lines[at + 3].startswith("  WARNING: ")
    env_line = next(ln for ln in lines if ln.startswith("ASCEND_GLOBAL_LOG_LEVEL"))
    assert env_line.split() == ["ASCEND_GLOBAL_LOG_LEVEL", "7", "invalid"]
    assert "\x1b[" not in out


def test_doctor_text_no_problems() -> None:
    proc = run_cli("doctor", ASCEND_MOCK_DEVICE_COUNT="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("No problems found.")


def test_doctor_leaves_nothing_behind() -> None:
    code = """
import io, json
from pyacl_rt import cli, _runtime as runtime
from pyacl_rt.mock import REPORT_LAST_FINALIZE, mock_control
buf = io.StringIO()
assert cli.main(["doctor", "--json"], out=buf) == 0
assert json.loads(buf.getvalue())["status"] == "ok"
assert runtime.state() == "finalized"
assert "no leaks" in mock_control().leak_report(REPORT_LAST_FINALIZE)
print("OK")
"""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_DEVICE_COUNT="2"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"


def test_doctor_usage_error() -> None:
    proc = run_cli("doctor", "--bogus")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: pyacl-rt doctor")
