"""``pyacl-rt logs export``: the mock's device log files and a process's in-memory log in
a tar.gz with a manifest; msnpureport run when installed (a fake one on PATH), reported
when missing on a machine with CANN."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from conftest import _clean_env

# A mock program that leaves entries in the host log and in device 0's log.
_PROGRAM = """
import pyacl_rt as npu
from pyacl_rt import lowlevel
from pyacl_rt.mock import mock_control
npu.init()
print(lowlevel.aclrtSetDevice(99))  # no context: the host log (plog)
npu.set_device(0)
s = npu.Stream()
mock_control().inject_fault("aclrtSynchronizeStreamWithTimeout", 507011)
try:
    s.synchronize()  # device 0's log
except npu.AclError as exc:
    print(exc.code)
"""


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = _clean_env(**{"PYACL_RT_BACKEND": "mock", **extra})
    env["PATH"] = os.pathsep.join(
        [str(tmp / "bin"), str(Path(sys.executable).parent), "/usr/bin", "/bin"]
    )
    return env


def run_cli(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyacl_rt", *args],
        env=_env(tmp, **env),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp,
    )


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        out = {}
        for m in tar.getmembers():
            f = tar.extractfile(m)
            assert f is not None and m.isfile()
            out[m.name] = f.read()
    return out


def _check_manifest(files: dict[str, bytes]) -> dict[str, Any]:
    manifest = json.loads(files["pyacl_rt_logs/manifest.json"])
    assert manifest["schema"] == 1 and manifest["pyacl_rt_version"]
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) | {"pyacl_rt_logs/manifest.json"} == set(files)
    for path, entry in listed.items():
        assert entry["bytes"] == len(files[path])
        assert entry["sha256"] == hashlib.sha256(files[path]).hexdigest()
    env = json.loads(files["pyacl_rt_logs/environment.json"])
    assert env["environment"]["PYACL_RT_BACKEND"] in ("mock", "auto")
    return manifest


def _fake_msnpureport(tmp: Path, code: int = 0) -> Path:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / "msnpureport"
    exe.write_text(
        "#!/bin/sh\n"
        'echo "msnpureport (fake): args $*"\n'
        "mkdir -p 20261201120000/slog/dev-os-0\n"
        'echo "device 0 os log" > 20261201120000/slog/dev-os-0/device-0_1.log\n'
        f"exit {code}\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_export_mock_device_log_files(tmp_path: Path) -> None:
    logdir = tmp_path / "log"
    prog = subprocess.run(
        [sys.executable, "-c", _PROGRAM],
        env=_env(tmp_path, ASCEND_PROCESS_LOG_PATH=str(logdir)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert prog.returncode == 0 and prog.stdout.split() == ["107001", "507011"], prog.stderr
    proc = run_cli(
        tmp_path, "logs", "export", "--output", "logs.tar.gz", ASCEND_PROCESS_LOG_PATH=str(logdir)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.startswith("wrote logs.tar.gz: ")
    assert f"log directory: {logdir} (ASCEND_PROCESS_LOG_PATH)" in proc.stdout
    assert "msnpureport: skipped (no CANN on this machine: mock logs only)" in proc.stdout
    files = _members(tmp_path / "logs.tar.gz")
    manifest = _check_manifest(files)
    kinds = {(f["kind"], f["device"]) for f in manifest["files"] if f["source"] == "log_dir"}
    assert kinds == {("plog", None), ("device", 0)}
    device_log = next(p for p in files if p.startswith("pyacl_rt_logs/logs/debug/device-0/device-"))
    text = files[device_log].decode()
    assert "[ERROR] RUNTIME(" in text and "[device 0]" in text and "507011" in text
    plog = next(p for p in files if p.startswith("pyacl_rt_logs/logs/debug/plog/plog-"))
    assert "[host]" in files[plog].decode() and "107001" in files[plog].decode()
    assert manifest["msnpureport"]["status"] == "skipped"
    assert manifest["log_dir"] == str(logdir) and manifest["notes"] == []


def test_export_with_no_log_files_says_so(tmp_path: Path) -> None:
    proc = run_cli(
        tmp_path, "logs", "export", "-o", "x.tar.gz", "--json", ASCEND_WORK_PATH=str(tmp_path / "w")
    )
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads(proc.stdout)
    assert manifest["log_dir_source"] == "ASCEND_WORK_PATH/log"
    assert manifest["log_dir"] == str(tmp_path / "w" / "log")
    assert proc.stderr.startswith("pyacl-rt: note: no log files in ")
    files = _members(tmp_path / "x.tar.gz")
    assert set(files) == {"pyacl_rt_logs/manifest.json", "pyacl_rt_logs/environment.json"}
    assert _check_manifest(files)["notes"] == manifest["notes"]


def test_export_runs_msnpureport_when_installed(tmp_path: Path) -> None:
    _fake_msnpureport(tmp_path)
    proc = run_cli(
        tmp_path,
        "logs",
        "export",
        "-o",
        "out.tar.gz",
        "--log-dir",
        str(tmp_path),
        "--msnpureport-args",
        "-t 0 --quiet",
    )
    assert proc.returncode == 0, proc.stderr
    assert "msnpureport: ran (" in proc.stdout and "exported 1 file(s)" in proc.stdout
    assert "from msnpureport: 2" in proc.stdout
    files = _members(tmp_path / "out.tar.gz")
    manifest = _check_manifest(files)
    report = manifest["msnpureport"]
    assert report["status"] == "ran" and report["returncode"] == 0
    assert report["path"] == str(tmp_path / "bin" / "msnpureport")
    assert (
        files["pyacl_rt_logs/msnpureport/command.log"] == b"msnpureport (fake): args -t 0 --quiet\n"
    )
    key = "pyacl_rt_logs/msnpureport/20261201120000/slog/dev-os-0/device-0_1.log"
    assert files[key] == b"device 0 os log\n"


def test_export_msnpureport_failure_exit_1_archive_written(tmp_path: Path) -> None:
    _fake_msnpureport(tmp_path, code=3)
    proc = run_cli(
        tmp_path, "logs", "export", "-o", "out.tar.gz", "--log-dir", str(tmp_path / "none")
    )
    assert proc.returncode == 1
    assert (
        "pyacl-rt: warning: msnpureport failed: " in proc.stderr and "exited with 3" in proc.stderr
    )
    manifest = _check_manifest(_members(tmp_path / "out.tar.gz"))
    assert manifest["msnpureport"]["status"] == "failed"
    assert manifest["msnpureport"]["returncode"] == 3


def test_export_says_when_msnpureport_is_missing_on_a_cann_machine(tmp_path: Path) -> None:
    # a CANN install (found by the loader's search, never loaded) without the driver tools
    cann = tmp_path / "cann"
    (cann / "lib64").mkdir(parents=True)
    (cann / "lib64" / "libascendcl.so").write_bytes(b"")
    proc = run_cli(
        tmp_path,
        "logs",
        "export",
        "-o",
        "out.tar.gz",
        "--log-dir",
        str(tmp_path / "none"),
        PYACL_RT_BACKEND="auto",
        ASCEND_HOME_PATH=str(cann),
    )
    assert proc.returncode == 0, proc.stderr
    assert "pyacl-rt: warning: msnpureport not found: CANN is installed but msnpureport is not" in (
        proc.stderr
    )
    assert "msnpureport: not found" in proc.stdout
    report = _check_manifest(_members(tmp_path / "out.tar.gz"))["msnpureport"]
    assert report["status"] == "not found" and report["path"] is None
    assert report["searched"][0] == "PATH"
    # --msnpureport never: not looked for
    proc = run_cli(
        tmp_path, "logs", "export", "-o", "o2.tar.gz", "--msnpureport", "never",
        "--log-dir", str(tmp_path / "none"), PYACL_RT_BACKEND="auto", ASCEND_HOME_PATH=str(cann),
    )  # fmt: skip
    assert proc.returncode == 0 and "warning" not in proc.stderr
    assert "msnpureport: skipped (--msnpureport never)" in proc.stdout


def test_export_in_process_includes_the_process_log(tmp_path: Path) -> None:
    code = _PROGRAM + (
        "import json\n"
        "from pyacl_rt._cli_logs import export_logs\n"
        f"m = export_logs({str(tmp_path / 'p.tar.gz')!r}, log_dir={str(tmp_path / 'none')!r})\n"
        "print(json.dumps(m))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    files = _members(tmp_path / "p.tar.gz")
    _check_manifest(files)
    assert "507011" in files["pyacl_rt_logs/process/device-0.log"].decode()
    assert "107001" in files["pyacl_rt_logs/process/host.log"].decode()


def test_export_errors(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "logs", "export", "-o", str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("pyacl-rt: error: --output ") and "is a directory" in proc.stderr
    proc = run_cli(tmp_path, "logs", "export", "-o", str(tmp_path / "missing" / "x.tar.gz"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert list(tmp_path.glob(".pyacl_rt_logs_*")) == []
    proc = run_cli(tmp_path, "logs", "export")
    assert proc.returncode == 2 and proc.stderr.startswith("usage: pyacl-rt logs export")
    proc = run_cli(tmp_path, "logs", "export", "-o", "x.tar.gz", "--msnpureport-args", "'open")
    assert proc.returncode == 2 and "--msnpureport-args" in proc.stderr
    proc = run_cli(tmp_path, "logs")
    assert proc.returncode == 2
