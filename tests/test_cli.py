"""The pyacl-rt command line: ``info`` in text and JSON, ``--env``, exit codes."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import _clean_env

from pyacl_rt import cli
from pyacl_rt._options import ENV_VARS


def _env(**extra: str) -> dict[str, str]:
    return _clean_env(**{"PYACL_RT_BACKEND": "mock", **extra})


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
        assert re.search(r", util (\d+%|n/a)$", line), line
    # peer-access matrix: header row, then one row per device, "-" on the diagonal
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("peer access"))
    assert lines[at + 1].split() == ["|", "0", "1", "2"]
    rows = [ln.split() for ln in lines[at + 2 : at + 5]]
    for i, row in enumerate(rows):
        assert row[:2] == [str(i), "|"]
        cells = row[2:]
        assert len(cells) == 3 and cells[i] == "-"
        assert all(c in "YN" for j, c in enumerate(cells) if j != i)
    assert max(len(ln) for ln in lines if "/" not in ln) <= cli.TEXT_WIDTH
    assert "Traceback" not in proc.stderr


def test_info_text_many_devices_fits_80_columns() -> None:
    proc = run_cli("info", ASCEND_MOCK_DEVICE_COUNT="40")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len([ln for ln in lines if ln.startswith("  [")]) == 40
    # too wide for a matrix: one "i -> peers" line per device, ranges compressed
    at = next(i for i, ln in enumerate(lines) if ln.startswith("peer access"))
    peer_lines = [ln for ln in lines[at + 1 :] if "->" in ln]
    assert len(peer_lines) == 40
    assert peer_lines[0].split("->")[0].strip() == "0"
    assert all(len(ln) <= cli.TEXT_WIDTH for ln in lines if "/" not in ln)


def test_peer_text_rendering_units() -> None:
    assert cli._ranges([0, 2, 3, 4, 7]) == "0, 2-4, 7"
    assert cli._ranges([5]) == "5"
    devices = [
        {"index": 0, "peer_access": [None, True, None]},
        {"index": 1, "peer_access": [False, None, True]},
        {"index": 2, "peer_access": [None, None, None]},
    ]
    lines = cli._format_peer_access(devices)
    assert lines[1:] == ["    | 0 1 2", "  0 | - Y ?", "  1 | N - Y", "  2 | ? ? -"]
    assert cli._format_peer_access(devices[:1]) == []


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
        # schema 1 keys, then the keys added later (additions only, never renames)
        assert list(d)[:7] == [
            "index",
            "soc_name",
            "total_memory_bytes",
            "free_memory_bytes",
            "total_memory_gib",
            "free_memory_gib",
            "error",
        ]
        assert set(d) == set(list(d)[:7]) | {
            "utilization_percent",
            "utilization_rates",
            "peer_access",
        }
        assert d["error"] is None
        assert isinstance(d["utilization_percent"], int)
        assert 0 <= d["utilization_percent"] <= 100
        assert set(d["utilization_rates"]) == {"cube", "vector", "aicpu", "memory"}
        peers = d["peer_access"]
        assert len(peers) == 4 and peers[d["index"]] is None
        assert all(isinstance(p, bool) for j, p in enumerate(peers) if j != d["index"])
        assert d["total_memory_bytes"] == 2 << 30
        assert 0 < d["free_memory_bytes"] <= d["total_memory_bytes"]
        assert d["total_memory_gib"] == 2.0
        assert isinstance(d["soc_name"], str) and d["soc_name"]
    assert doc["runtime"] == {"state": "ready", "external": False}
    assert doc["warnings"] == []
    # the matrix is consistent with the Device objects of a fresh process
    code = """
        import json, pyacl_rt as npu
        n = npu.device_count()
        print(json.dumps([[None if i == j else npu.can_device_access_peer(i, j)
                           for j in range(n)] for i in range(n)]))
    """
    ref = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_env(ASCEND_MOCK_DEVICE_COUNT="4"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ref.returncode == 0, ref.stderr
    assert [d["peer_access"] for d in doc["devices"]] == json.loads(ref.stdout)


def test_info_honours_visible_devices() -> None:
    proc = run_cli("info", "--json", ASCEND_MOCK_DEVICE_COUNT="4", ASCEND_RT_VISIBLE_DEVICES="1,3")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["device_count"] == 2
    assert doc["visible_devices"] == "1,3"
    assert [d["index"] for d in doc["devices"]] == [0, 1]
    assert [len(d["peer_access"]) for d in doc["devices"]] == [2, 2]
    assert all(d["utilization_percent"] is not None for d in doc["devices"])
    text = run_cli("info", ASCEND_MOCK_DEVICE_COUNT="4", ASCEND_RT_VISIBLE_DEVICES="1,3")
    assert "devices:      2 (ASCEND_RT_VISIBLE_DEVICES=1,3)" in text.stdout
    lines = text.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("peer access"))
    assert lines[at + 1].split() == ["|", "0", "1"]


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
    # --json: the warning is also on stderr (stdout stays a pure JSON document)
    assert proc.stderr.startswith("warning: pyacl_rt: no real libascendcl.so found")


def test_info_text_lists_places_searched_and_warns_on_stderr() -> None:
    """The fallback warning says ``pyacl-rt info`` lists the places searched: the text
    report does, in order, one per line; the warning itself goes to stderr (so
    ``2>/dev/null`` drops it), after the report."""
    env = {"PYACL_RT_BACKEND": "auto", "ASCEND_MOCK_DEVICE_COUNT": "1"}
    doc = json.loads(run_cli("info", "--json", **env).stdout)
    if doc["backend"] != "mock":  # pragma: no cover - a machine with real CANN
        pytest.skip("real CANN library present")
    text = run_cli("info", **env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("searched:"))
    searched = doc["library"]["searched"]
    assert lines[at] == f"searched:     {len(searched)} places for a real libascendcl.so, in order:"
    assert lines[at + 1 : at + 1 + len(searched)] == [f"  {place}" for place in searched]
    assert lines[at - 1].startswith("found via:    bundled mock")
    assert "warning" not in text.stdout
    warning = " ".join(ln.strip() for ln in text.stderr.splitlines())
    assert text.stderr.startswith("warning: pyacl_rt: no real libascendcl.so found")
    assert warning.endswith("falling back to the bundled mock"), text.stderr
    assert all(len(ln) <= cli.TEXT_WIDTH for ln in text.stderr.splitlines())
    # the warning's advice is true: `pyacl-rt info` lists the places searched
    assert "`pyacl-rt info` lists the places searched" in doc["warnings"][0]
    quiet = run_cli("info", "--json", PYACL_RT_BACKEND="mock")
    assert quiet.stderr == "" and json.loads(quiet.stdout)["library"]["searched"] == []
    assert "searched:" not in run_cli("info", PYACL_RT_BACKEND="mock").stdout


def test_info_backend_real_without_library_lists_every_place() -> None:
    """``PYACL_RT_BACKEND=real`` and no library: the text mode prints the error and
    every place tried with its reason on stderr; ``--json`` prints an error document
    with the same list on stdout (it printed nothing before). Exit 1 both."""
    env = {"PYACL_RT_BACKEND": "real"}
    text = run_cli("info", **env)
    if text.returncode == 0:  # pragma: no cover - a machine with real CANN
        pytest.skip("real CANN library present")
    assert text.returncode == 1 and text.stdout == ""
    err = text.stderr.splitlines()
    assert err[0].startswith("pyacl-rt: error: LibraryNotFoundError: PYACL_RT_BACKEND=real")
    n = int(re.search(r"\((\d+) places tried\)", err[0]).group(1))  # type: ignore[union-attr]
    assert n >= 2 and len(err) == 1 + n, text.stderr
    assert err[1].startswith("  [PYACL_RT_LIBRARY] ")
    assert all(" - rejected: " in ln for ln in err[1:]), err
    assert "Traceback" not in text.stderr

    proc = run_cli("info", "--json", **env)
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["schema"] == cli.INFO_SCHEMA_VERSION and doc["pyacl_rt_version"]
    assert doc["error"]["type"] == "LibraryNotFoundError"
    assert doc["error"]["message"] == err[0].removeprefix("pyacl-rt: error: LibraryNotFoundError: ")
    assert [f"  {p}" for p in doc["error"]["searched"]] == err[1:]
    assert proc.stderr == text.stderr


def test_info_json_error_document_for_other_failures() -> None:
    proc = run_cli("info", "--json", PYACL_RT_BACKEND="bogus")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["error"]["type"] == "ConfigError" and doc["error"]["searched"] == []
    assert "PYACL_RT_BACKEND" in doc["error"]["message"]
    assert len(proc.stderr.splitlines()) == 1


def test_info_device_lost_exit_1_but_document_printed() -> None:
    proc = run_cli(
        "info", "--json", ASCEND_MOCK_DEVICE_COUNT="2", ASCEND_MOCK_DEVICE_LOST="1:507010"
    )
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["devices"][0]["error"] is None
    err = doc["devices"][1]["error"]
    assert err is not None and "507010" in err
    # queries involving the lost device are unknown, not errors of device 0
    assert doc["devices"][0]["peer_access"] == [None, None]
    assert doc["devices"][1]["peer_access"] == [None, None]
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
    "args,usage",
    [
        ([], "usage: pyacl-rt [-h]"),
        (["nosuchcommand"], "usage: pyacl-rt [-h]"),
        # errors in info's own arguments show info's usage (not the top-level one)
        (["info", "--bogus"], "usage: pyacl-rt info [-h]"),
        (["info", "extra-arg"], "usage: pyacl-rt info [-h]"),
        (["info", "--markdown"], "usage: pyacl-rt info [-h]"),
        (["info", "--json", "extra-arg"], "usage: pyacl-rt info [-h]"),
    ],
)
def test_usage_errors_exit_2(args: list[str], usage: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(usage), proc.stderr
    assert "Traceback" not in proc.stderr
    if args[:1] == ["info"]:
        assert "pyacl-rt info: error: " in proc.stderr
        assert ("--markdown only applies to --env" in proc.stderr) == ("--markdown" in args)
        assert ("unrecognized arguments: " in proc.stderr) == ("--markdown" not in args)


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
    assert "  [0] S  memory 1.00 GiB total, 0.50 GiB free, util n/a" in text
    assert "  [1] error: boom" in text
    assert "warning" not in text  # warnings go to stderr: format_warnings
    assert cli.format_warnings(doc) == "warning: w1\n"
    assert cli.format_warnings({**doc, "warnings": ["First. Second."]}) == "warning: First\n"
    # a document without the added keys (an older producer) still renders
    assert "peer access" not in text


def test_info_env_markdown_matches_options_table() -> None:
    from pyacl_rt._options import render_env_table_markdown

    proc = run_cli("info", "--env", "--markdown")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == render_env_table_markdown()


_COUNT_CONTEXTS = """
    import io, json
    import pyacl_rt as npu
    from pyacl_rt import cli, _context as context, _runtime as runtime
    from pyacl_rt.mock import REPORT_LAST_FINALIZE, mock_control

    created = []
    _orig_init = context.Context.__init__

    def counting_init(self, device=None):
        _orig_init(self, device)
        created.append((self.device.index, dict(mc.counts())))

    context.Context.__init__ = counting_init
    mc = mock_control()
    {body}
"""


def _run_counting(body: str, **env: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(_COUNT_CONTEXTS).replace("{body}", body)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_info_command_releases_everything_it_created() -> None:
    # the command in a fresh process: one temporary context per device for the memory
    # query (never two at once), nothing alive afterwards, runtime finalized
    body = """
buf = io.StringIO()
assert cli.main(["info", "--json"], out=buf) == 0
doc = json.loads(buf.getvalue())
assert doc["device_count"] == 3
assert [d for d, _ in created] == [0, 1, 2], created
assert all(c["contexts"] == 1 for _, c in created), created
assert runtime.state() == "finalized"
assert "no leaks" in mc.leak_report(REPORT_LAST_FINALIZE), mc.leak_report(REPORT_LAST_FINALIZE)
print("OK")
"""
    proc = _run_counting(body, ASCEND_MOCK_DEVICE_COUNT="3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("OK")


def test_collect_info_in_a_busy_process_leaves_counts_unchanged() -> None:
    # a process that uses device 1 (primary context, a stream, a buffer): collect_info
    # reuses that context, creates temporary ones only for devices 0 and 2, and leaves
    # every per-device count as it found it; the runtime stays up
    body = """
npu.set_device(1)
s = npu.Stream()
buf = npu.DeviceBuffer(4096)
before = [mc.counts(i) for i in range(3)]
with npu.stream(s):
    doc = cli.collect_info()
    # the thread's selection and current stream are untouched
    assert npu.current_device() == 1 and npu.current_stream() is s
after = [mc.counts(i) for i in range(3)]
assert before == after, (before, after)
assert [d for d, _ in created] == [0, 2], created
assert doc["devices"][1]["free_memory_bytes"] < doc["devices"][1]["total_memory_bytes"]
assert runtime.state() == "ready"
s.synchronize(); buf.close(); s.close()
print("OK")
"""
    proc = _run_counting(body, ASCEND_MOCK_DEVICE_COUNT="3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("OK")


def test_peer_failure_is_reported_on_the_row_and_does_not_mask_the_rest() -> None:
    body = """
mc.inject_fault("aclrtDeviceCanAccessPeer", 507899)  # the first peer query fails
buf = io.StringIO()
assert cli.main(["info", "--json"], out=buf) == 1
doc = json.loads(buf.getvalue())
row0 = doc["devices"][0]
assert row0["error"].startswith("peer access 0->1:") and "507899" in row0["error"]
assert row0["peer_access"][:2] == [None, None]
assert isinstance(row0["peer_access"][2], bool)       # 0->2 still queried
assert doc["devices"][1]["error"] is None
assert all(isinstance(p, bool) for p in doc["devices"][1]["peer_access"][::2])
print("OK")
"""
    proc = _run_counting(body, ASCEND_MOCK_DEVICE_COUNT="3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("OK")


def test_info_failure_midway_still_releases() -> None:
    # device 1's memory query fails: the command reports it (exit 1) and still
    # destroys the temporary context and finalizes the runtime
    body = """
mc.inject_fault("aclrtGetMemInfo", 507899, nth=2)
buf = io.StringIO()
assert cli.main(["info", "--json"], out=buf) == 1
doc = json.loads(buf.getvalue())
assert doc["devices"][0]["error"] is None
assert "507899" in doc["devices"][1]["error"]
assert runtime.state() == "finalized"
assert "no leaks" in mc.leak_report(REPORT_LAST_FINALIZE)
print("OK")
"""
    proc = _run_counting(body, ASCEND_MOCK_DEVICE_COUNT="2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("OK")


@pytest.mark.parametrize(
    "env_extra",
    [{"ASCEND_MOCK_DEVICE_COUNT": "0"}, {"ASCEND_RT_VISIBLE_DEVICES": "abc"}],
)
def test_info_with_no_visible_device(env_extra: dict[str, str]) -> None:
    """ACL_ERROR_RT_NO_DEVICE: 0 devices listed, the reason on stderr, exit 0; --json
    still prints the document."""
    text = run_cli("info", **env_extra)
    assert text.returncode == 0, text.stderr
    assert "devices:      0" in text.stdout
    assert "[0]" not in text.stdout
    assert "pyacl-rt: no devices: ACL_ERROR_RT_NO_DEVICE (207004)" in text.stderr
    assert "Traceback" not in text.stderr

    proc = run_cli("info", "--json", **env_extra)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["device_count"] == 0 and doc["devices"] == []
    assert doc["no_device_reason"].startswith("ACL_ERROR_RT_NO_DEVICE (207004): ")
    assert "pyacl-rt: no devices: " in proc.stderr


def test_info_json_no_device_reason_null_with_devices() -> None:
    doc = json.loads(run_cli("info", "--json", ASCEND_MOCK_DEVICE_COUNT="1").stdout)
    assert doc["device_count"] == 1 and doc["no_device_reason"] is None
