"""``pyacl-rt logs export``: pack the runtime's logs into a ``.tar.gz`` with a manifest (the
seed's msnpureport flow).

What goes in (under ``pyacl_rt_logs/`` in the archive):

* ``logs/...`` - the log files of the log directory: ``--log-dir``, else
  ``ASCEND_PROCESS_LOG_PATH``, else ``$ASCEND_WORK_PATH/log``, else ``~/ascend/log``
  (CANN's order), the files under its ``debug/``, ``run/`` and ``security/`` folders
  (``plog/plog-<pid>_<time>.log``: the host part; ``device-<id>/device-<pid>_<time>.log``:
  each device's). The mock writes this layout from its bounded per-device log when
  ``ASCEND_PROCESS_LOG_PATH`` or ``ASCEND_WORK_PATH`` is set (mock README "Device log").
* ``process/...`` - when the command runs inside a program that has the mock loaded
  (:func:`export_logs`, or ``cli.main`` called in-process): that process's in-memory
  log, ``host.log`` and ``device-<id>.log``.
* ``msnpureport/...`` - on a machine with CANN (a real ``libascendcl.so`` is found, or
  ``/usr/local/Ascend/driver`` exists): the output of the real ``msnpureport`` (the
  driver tool that exports the devices' own logs), run in a temporary directory, with
  its console output in ``msnpureport/command.log``. When it is not installed, the
  command says so on stderr and in the manifest.
* ``environment.json`` - pyacl_rt's version, the host, the time and the ``ASCEND_*``,
  ``ACL_*`` and ``PYACL_RT_*`` variables;
* ``manifest.json`` (schema 1)::

    {"schema": 1, "pyacl_rt_version": str, "created": str (ISO 8601, UTC),
     "host": str, "log_dir": str, "log_dir_source": str,
     "msnpureport": {"status": "ran" | "failed" | "not found" | "skipped",
                     "path": str | null, "returncode": int | null,
                     "searched": [str], "message": str},
     "files": [{"path": str,            # in the archive
                "bytes": int, "sha256": str,
                "source": "log_dir" | "process" | "msnpureport" | "pyacl_rt",
                "kind": "plog" | "device" | "other",
                "device": int | null}],
     "notes": [str]}

The command loads no library and starts no runtime (logs are most wanted when the
runtime is broken). Exit codes: 0 written (also with no log file found: the manifest
says so); 1 when the archive cannot be written or msnpureport failed (the archive is
still written); 2 usage errors.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, TextIO

__all__ = ["LOGS_SCHEMA_VERSION", "MSNPUREPORT_DIRS", "add_parser", "export_logs"]

#: Version of the manifest layout (new keys may be added without a bump).
LOGS_SCHEMA_VERSION = 1
#: Where msnpureport is looked for after ``PATH`` (the driver package's tools).
MSNPUREPORT_DIRS = ("/usr/local/Ascend/driver/tools",)
_ROOT = "pyacl_rt_logs"
_LOG_FOLDERS = ("debug", "run", "security")
_DEVICE_DIR = re.compile(r"^device-(\d+)$")
_MSNPUREPORT_TIMEOUT_S = 600


def _log_dir(explicit: str | None) -> tuple[Path, str]:
    if explicit:
        return Path(explicit), "--log-dir"
    env = os.environ
    if env.get("ASCEND_PROCESS_LOG_PATH"):
        return Path(env["ASCEND_PROCESS_LOG_PATH"]), "ASCEND_PROCESS_LOG_PATH"
    if env.get("ASCEND_WORK_PATH"):
        return Path(env["ASCEND_WORK_PATH"]) / "log", "ASCEND_WORK_PATH/log"
    return Path.home() / "ascend" / "log", "~/ascend/log (CANN's default)"


def _classify(rel: Path) -> tuple[str, int | None]:
    for part in rel.parts:
        if part == "plog":
            return "plog", None
        m = _DEVICE_DIR.match(part)
        if m:
            return "device", int(m[1])
    return "other", None


def _cann_present() -> bool:
    """A real CANN install is on this machine (looked up without loading anything)."""
    from . import _options
    from ._raw._loader import find_real_library

    if os.path.isdir("/usr/local/Ascend/driver"):
        return True
    try:
        opts = _options.get_options()
        if opts.backend == "mock":
            return False
        path, _via, _attempts = find_real_library(opts)
    except Exception:  # a bad PYACL_RT_* value or library: the export still runs
        return False
    return path is not None


def _find_msnpureport() -> tuple[str | None, list[str]]:
    searched = ["PATH"]
    found = shutil.which("msnpureport")
    if found:
        return found, searched
    for d in MSNPUREPORT_DIRS:
        cand = os.path.join(d, "msnpureport")
        searched.append(cand)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand, searched
    return None, searched


class _Archive:
    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        self.files: list[dict[str, Any]] = []
        self.mtime = int(datetime.datetime.now(datetime.UTC).timestamp())

    def add_bytes(
        self, arcname: str, data: bytes, source: str, kind: str = "other", device: int | None = None
    ) -> None:
        info = tarfile.TarInfo(f"{_ROOT}/{arcname}")
        info.size = len(data)
        info.mtime = self.mtime
        info.mode = 0o644
        self.tar.addfile(info, io.BytesIO(data))
        self.files.append(
            {
                "path": f"{_ROOT}/{arcname}",
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "source": source,
                "kind": kind,
                "device": device,
            }
        )

    def add_tree(self, root: Path, prefix: str, source: str, folders: tuple[str, ...] = ()) -> int:
        """Add the regular files below ``root`` (only ``folders`` of it when given);
        symlinks are not followed. Returns how many were added."""
        n = 0
        tops = [root / f for f in folders] if folders else [root]
        for top in tops:
            if not top.is_dir() or top.is_symlink():
                continue
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames.sort()
                for name in sorted(filenames):
                    path = Path(dirpath) / name
                    if path.is_symlink() or not path.is_file():
                        continue
                    try:
                        data = path.read_bytes()
                    except OSError:
                        continue  # rotated away or unreadable: skip it
                    rel = path.relative_to(root)
                    kind, device = _classify(rel)
                    self.add_bytes(f"{prefix}/{rel.as_posix()}", data, source, kind, device)
                    n += 1
        return n


def _process_logs(archive: _Archive) -> int:
    """The in-memory device log of this process, when it has the mock loaded."""
    from . import lowlevel

    if not (lowlevel.is_loaded() and lowlevel.is_mock_library()):
        return 0
    from ._mockdiag import LOG_HOST, mock_diag
    from .mock import mock_control

    diag = mock_diag()
    if diag is None:
        return 0
    n = 0
    host = diag.device_log(LOG_HOST)
    if host:
        archive.add_bytes("process/host.log", host.encode(), "process", "plog")
        n += 1
    for i in range(mock_control().device_count):
        text = diag.device_log(i)
        if text:
            archive.add_bytes(f"process/device-{i}.log", text.encode(), "process", "device", i)
            n += 1
    return n


def _run_msnpureport(archive: _Archive, exe: str, extra: list[str]) -> tuple[str, int | None, str]:
    with tempfile.TemporaryDirectory(prefix="pyacl_rt_msnpureport_") as tmp:
        try:
            proc = subprocess.run(
                [exe, *extra],
                cwd=tmp,
                capture_output=True,
                timeout=_MSNPUREPORT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return "failed", None, f"{exe} could not run: {exc}"
        console = proc.stdout + (b"\n--- stderr\n" + proc.stderr if proc.stderr else b"")
        archive.add_bytes("msnpureport/command.log", console, "msnpureport")
        n = archive.add_tree(Path(tmp), "msnpureport", "msnpureport")
        if proc.returncode != 0:
            return "failed", proc.returncode, f"{exe} exited with {proc.returncode}"
        return "ran", 0, f"{exe} exported {n} file(s)"


def _environment() -> dict[str, Any]:
    from ._cli_support import package_version

    env = {
        k: v
        for k, v in sorted(os.environ.items())
        if k.startswith(("ASCEND_", "ACL_", "PYACL_RT_")) or k in ("LD_LIBRARY_PATH",)
    }
    return {
        "pyacl_rt_version": package_version(),
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "environment": env,
    }


def export_logs(
    output: str | os.PathLike[str],
    *,
    log_dir: str | os.PathLike[str] | None = None,
    msnpureport: str = "auto",
    msnpureport_args: list[str] | None = None,
) -> dict[str, Any]:
    """Write the logs archive ``output`` (``.tar.gz``) and return its manifest.

    ``msnpureport``: ``"auto"`` runs it when installed and warns (in the manifest's
    ``notes``) on a machine with CANN when it is not; ``"never"`` skips it. Raises
    :class:`OSError` when the archive cannot be written.
    """
    from ._cli_support import package_version

    if msnpureport not in ("auto", "never"):
        raise ValueError(f"msnpureport must be 'auto' or 'never', not {msnpureport!r}")
    out_path = Path(output)
    if out_path.is_dir():
        raise IsADirectoryError(f"--output {out_path} is a directory; give a file name")
    directory, source = _log_dir(None if log_dir is None else os.fspath(log_dir))
    notes: list[str] = []
    report: dict[str, Any] = {
        "status": "skipped",
        "path": None,
        "returncode": None,
        "searched": [],
        "message": "",
    }
    parent = out_path.parent if str(out_path.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=".pyacl_rt_logs_", suffix=".tar.gz", dir=parent)
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            archive = _Archive(tar)
            n_logs = archive.add_tree(directory, "logs", "log_dir", _LOG_FOLDERS)
            if n_logs == 0:
                notes.append(
                    f"no log files in {directory} ({source}); the mock writes them only with "
                    "ASCEND_PROCESS_LOG_PATH or ASCEND_WORK_PATH set"
                )
            _process_logs(archive)
            if msnpureport == "never":
                report["message"] = "--msnpureport never"
            else:
                exe, searched = _find_msnpureport()
                report["searched"] = searched
                if exe is not None:
                    status, rc, message = _run_msnpureport(archive, exe, msnpureport_args or [])
                    report.update(status=status, path=exe, returncode=rc, message=message)
                elif _cann_present():
                    report.update(
                        status="not found",
                        message="CANN is installed but msnpureport is not (searched: "
                        + ", ".join(searched)
                        + "): the devices' own logs are not in the archive; install the "
                        "driver package's tools or put msnpureport on PATH",
                    )
                else:
                    report.update(
                        status="skipped", message="no CANN on this machine: mock logs only"
                    )
            env_doc = json.dumps(_environment(), indent=2).encode()
            archive.add_bytes("environment.json", env_doc, "pyacl_rt")
            manifest: dict[str, Any] = {
                "schema": LOGS_SCHEMA_VERSION,
                "pyacl_rt_version": package_version(),
                "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "host": socket.gethostname(),
                "log_dir": str(directory),
                "log_dir_source": source,
                "msnpureport": report,
                "files": list(archive.files),
                "notes": notes,
            }
            archive.add_bytes("manifest.json", json.dumps(manifest, indent=2).encode(), "pyacl_rt")
        os.replace(tmp_name, out_path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return manifest


# ---------------------------------------------------------------- command
def _cmd_logs_export(args: argparse.Namespace, out: TextIO) -> int:
    try:
        extra = _split_args(args.msnpureport_args)
    except ValueError as exc:
        args.command_parser.error(str(exc))
    manifest = export_logs(
        args.output,
        log_dir=args.log_dir,
        msnpureport=args.msnpureport,
        msnpureport_args=extra,
    )
    report = manifest["msnpureport"]
    if args.json:
        json.dump(manifest, out, indent=2)
        out.write("\n")
    else:
        files = manifest["files"]
        by_source: dict[str, int] = {}
        for f in files:
            by_source[f["source"]] = by_source.get(f["source"], 0) + 1
        total = sum(f["bytes"] for f in files)
        out.write(f"wrote {args.output}: {len(files)} files and manifest.json ({total} bytes)\n")
        out.write(f"  log directory: {manifest['log_dir']} ({manifest['log_dir_source']})\n")
        for src, label in (
            ("log_dir", "log files"),
            ("process", "this process's mock log"),
            ("msnpureport", "from msnpureport"),
        ):
            if by_source.get(src):
                out.write(f"  {label}: {by_source[src]}\n")
        out.write(f"  msnpureport: {report['status']}" + _suffix(report["message"]) + "\n")
    out.flush()
    for note in manifest["notes"]:
        print(f"pyacl-rt: note: {note}", file=sys.stderr)
    if report["status"] in ("not found", "failed"):
        print(
            f"pyacl-rt: warning: msnpureport {report['status']}: {report['message']}",
            file=sys.stderr,
        )
    return 1 if report["status"] == "failed" else 0


def _suffix(message: str) -> str:
    return f" ({message})" if message else ""


def _split_args(text: str | None) -> list[str]:
    import shlex

    if not text:
        return []
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"--msnpureport-args: {exc}") from None


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``logs export`` on the sub-parsers of ``pyacl-rt``."""
    logs = sub.add_parser(
        "logs",
        help="export the runtime's logs (msnpureport on a machine with CANN)",
        description="The runtime's logs.",
    )
    logs_sub = logs.add_subparsers(dest="logs_command", metavar="LOGS_COMMAND")
    logs_sub.required = True
    p: argparse.ArgumentParser = logs_sub.add_parser(
        "export",
        help="pack the logs into a .tar.gz with a manifest",
        description="Pack the host and device log files (ASCEND_PROCESS_LOG_PATH, "
        "ASCEND_WORK_PATH/log or ~/ascend/log), and on a machine with CANN the output of "
        "msnpureport, into a .tar.gz with a manifest.json.",
    )
    p.add_argument("--output", "-o", required=True, metavar="FILE", help="the .tar.gz to write")
    p.add_argument("--log-dir", metavar="DIR", help="the log directory (default: as CANN)")
    p.add_argument(
        "--msnpureport",
        choices=("auto", "never"),
        default="auto",
        help="auto: run msnpureport when installed (default); never: skip it",
    )
    p.add_argument(
        "--msnpureport-args",
        metavar="ARGS",
        help="extra arguments for msnpureport (one shell-quoted string)",
    )
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(func=_cmd_logs_export, command_parser=p)
    return p
