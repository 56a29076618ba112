"""The pyacl-rt command line: ``info`` in text and JSON, ``--env``, exit codes."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pyacl_rt
from pyacl_rt import cli
from pyacl_rt._options import ENV_VARS

PKG_ROOT = str(Path(pyacl_rt.__file__).resolve().parent.parent)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ASCEND_MOCK_", "PYACL_RT_")) and k != "ASCEND_RT_VISIBLE_DEVICES"
    }
    env["PYACL_RT_BACKEND"] = "mock"
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyacl_rt", *args],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_info_text() -> None:
    proc = run_cli(
        "info",
        ASCEND_MOCK_DEVICE_COUNT="3",
        ASCEND_MOCK_MEM_PER_DEVICE="8G",
        ASCEND_MOCK_SOC_NAME="Ascend910B3",
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "backend:      mock" in out
    assert "libascendcl.so" in out
    assert "CANN version:" in out
    assert "devices:      3" in out
    dev_lines = [ln for ln in out.splitlines() if ln.startswith("  [")]
    assert len(dev_lines) == 3
    for i, line in enumerate(dev_lines):
        assert line.startswith(f"  [{i}] Ascend910B3")
        assert "8.00 GiB total" in line and "GiB free" in line
    assert "Traceback" not in proc.stderr


def test_info_json_is_stable_document() -> None:
    proc = run_cli(
        "info",
        "--json",
        ASCEND_MOCK_DEVICE_COUNT="4",
        ASCEND_MOCK_MEM_PER_DEVICE="2G",
        ASCEND_MOCK_CANN_VERSION="8.0.RC3",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == cli.INFO_SCHEMA_VERSION
    assert doc["backend"] == "mock"
    assert doc["library"]["path"].endswith("libascendcl.so")
    assert doc["library"]["found_via"]
    assert doc["cann_version"] == "8.0.RC3"
    assert doc["device_count"] == 4
    assert doc["visible_devices"] is None
    assert [d["index"] for d in doc["devices"]] == [0, 1, 2, 3]
    for d in doc["devices"]:
        assert set(d) == {
            "index",
            "soc_name",
            "total_memory_bytes",
            "free_memory_bytes",
            "total_memory_gib",
            "free_memory_gib",
            "error",
        }
        assert d["error"] is None
        assert d["total_memory_bytes"] == 2 << 30
        assert 0 < d["free_memory_bytes"] <= d["total_memory_bytes"]
        assert d["total_memory_gib"] == 2.0
        assert isinstance(d["soc_name"], str) and d["soc_name"]
    assert doc["runtime"] == {"state": "ready", "external": False}
    assert doc["warnings"] == []


def test_info_honours_visible_devices() -> None:
    proc = run_cli("info", "--json", ASCEND_MOCK_DEVICE_COUNT="4", ASCEND_RT_VISIBLE_DEVICES="1,3")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["device_count"] == 2
    assert doc["visible_devices"] == "1,3"
    assert [d["index"] for d in doc["devices"]] == [0, 1]
    text = run_cli("info", ASCEND_MOCK_DEVICE_COUNT="4", ASCEND_RT_VISIBLE_DEVICES="1,3")
    assert "devices:      2 (ASCEND_RT_VISIBLE_DEVICES=1,3)" in text.stdout


def test_info_auto_fallback_warning_is_reported_not_printed_raw() -> None:
    # backend auto on a machine without CANN: falls back to the mock; the warning
    # becomes part of the document instead of a raw Python warning on stderr.
    env = {"PYACL_RT_BACKEND": "auto", "ASCEND_MOCK_DEVICE_COUNT": "1"}
    proc = run_cli("info", "--json", **env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    if doc["backend"] != "mock":  # pragma: no cover - a machine with real CANN
        pytest.skip("real CANN library present")
    assert "BackendFallbackWarning" not in proc.stderr
    assert len(doc["warnings"]) == 1 and "mock" in doc["warnings"][0]
    assert doc["library"]["searched"]  # every place tried, in order
    assert any("PYACL_RT_LIBRARY" in a for a in doc["library"]["searched"])
    text = run_cli("info", **env)
    assert text.returncode == 0, text.stderr
    warn = [ln for ln in text.stdout.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "falling back to the bundled mock" in warn[0]
    assert "(details: pyacl-rt info --json)" in warn[0]


def test_info_device_lost_exit_1_but_document_printed() -> None:
    proc = run_cli(
        "info", "--json", ASCEND_MOCK_DEVICE_COUNT="2", ASCEND_MOCK_DEVICE_LOST="1:507010"
    )
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["devices"][0]["error"] is None
    err = doc["devices"][1]["error"]
    assert err is not None and "507010" in err
    text = run_cli("info", ASCEND_MOCK_DEVICE_COUNT="2", ASCEND_MOCK_DEVICE_LOST="1:507010")
    assert text.returncode == 1
    assert "[1] error:" in text.stdout and "ACL_ERROR_RT_LOST_HEARTBEAT" in text.stdout


def test_info_bad_config_exit_1_one_line() -> None:
    proc = run_cli("info", PYACL_RT_BACKEND="bogus")
    assert proc.returncode == 1
    assert proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("pyacl-rt: error: ConfigError:")
    assert "PYACL_RT_BACKEND" in err[0] and "auto, real, mock" in err[0]
    assert "Traceback" not in proc.stderr


def test_info_runtime_error_exit_1_one_line() -> None:
    # aclrtGetDeviceCount fails on its first call: process-wide failure
    proc = run_cli("info", ASCEND_MOCK_FAULTS="aclrtGetDeviceCount:1:507899")
    assert proc.returncode == 1
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, proc.stderr
    assert "AclDeviceLostError" in err[0] and "aclrtGetDeviceCount" in err[0]
    assert "507899" in err[0]


def test_info_missing_real_library_exit_1(tmp_path: Path) -> None:
    proc = run_cli(
        "info",
        PYACL_RT_BACKEND="real",
        PYACL_RT_LIBRARY=str(tmp_path / "nothing" / "libascendcl.so"),
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("pyacl-rt: error: LibraryNotFoundError:")


def test_info_env_table() -> None:
    proc = run_cli("info", "--env", PYACL_RT_CALLBACK_POLL_MS="250")
    assert proc.returncode == 0, proc.stderr
    for var in ENV_VARS:
        assert var.name in proc.stdout
    assert "PYACL_RT_CALLBACK_POLL_MS" in proc.stdout and "= 250" in proc.stdout
    assert "PYACL_RT_BACKEND" in proc.stdout and "= mock" in proc.stdout


def test_info_env_json_and_invalid_value() -> None:
    proc = run_cli("info", "--env", "--json", PYACL_RT_LAZY_INIT="maybe")
    assert proc.returncode == 0, proc.stderr  # --env reports, it does not fail
    doc = json.loads(proc.stdout)
    rows = {r["name"]: r for r in doc["env"]}
    assert set(rows) == {v.name for v in ENV_VARS}
    assert rows["PYACL_RT_LAZY_INIT"]["value"] == "maybe"
    assert rows["PYACL_RT_LAZY_INIT"]["effective"].startswith("invalid")


@pytest.mark.parametrize(
    "args",
    [[], ["nosuchcommand"], ["info", "--bogus"], ["info", "extra-arg"], ["info", "--markdown"]],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert "usage:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_and_version() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0 and "info" in proc.stdout
    proc = run_cli("info", "--help")
    assert proc.returncode == 0 and "--json" in proc.stdout and "--env" in proc.stdout
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("pyacl-rt ")


def test_console_script() -> None:
    exe = shutil.which("pyacl-rt")
    if exe is None:
        pytest.skip("pyacl-rt console script not on PATH (package not installed)")
    proc = subprocess.run(
        [exe, "info", "--json"],
        env=_env(ASCEND_MOCK_DEVICE_COUNT="2"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["device_count"] == 2


def test_main_in_process_env_only() -> None:
    # --env never loads the library, so it is safe in the test process
    buf = io.StringIO()
    assert cli.main(["info", "--env", "--json"], out=buf) == 0
    doc = json.loads(buf.getvalue())
    assert [r["name"] for r in doc["env"]] == [v.name for v in ENV_VARS]


def test_format_info_text_renders_errors() -> None:
    doc = {
        "pyacl_rt_version": "0",
        "backend": "mock",
        "library": {"path": "/x/libascendcl.so", "found_via": "test", "searched": []},
        "cann_version": None,
        "cann_version_source": "unknown",
        "runtime": {"state": "ready", "external": True},
        "visible_devices": None,
        "device_count": 2,
        "devices": [
            {
                "index": 0,
                "soc_name": "S",
                "total_memory_bytes": 1 << 30,
                "free_memory_bytes": 1 << 29,
                "total_memory_gib": 1.0,
                "free_memory_gib": 0.5,
                "error": None,
            },
            {
                "index": 1,
                "soc_name": None,
                "total_memory_bytes": None,
                "free_memory_bytes": None,
                "total_memory_gib": None,
                "free_memory_gib": None,
                "error": "boom",
            },
        ],
        "warnings": ["w1"],
    }
    text = cli.format_info_text(doc)
    assert "CANN version: unknown" in text
    assert "initialised by another component" in text
    assert "  [0] S  memory 1.00 GiB total, 0.50 GiB free" in text
    assert "  [1] error: boom" in text
    assert "warning: w1" in text


def test_info_env_markdown_matches_options_table() -> None:
    from pyacl_rt._options import render_env_table_markdown

    proc = run_cli("info", "--env", "--markdown")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == render_env_table_markdown()
