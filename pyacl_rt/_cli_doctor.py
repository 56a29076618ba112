"""``pyacl-rt doctor``: what pyacl_rt found, how it is configured, and what to fix.

Reports the library that was loaded and why (the loader's search, in order, with the
reason each place was rejected), the CANN and driver versions, the visible devices (and
what ``ASCEND_RT_VISIBLE_DEVICES`` did), the relevant environment variables (``PYACL_RT_*``,
``ASCEND_*``, ``ACL_*``, ``DUMP_CONFIG_PATH``, the ``LD_LIBRARY_PATH`` entries that matter),
the mock's configuration (timing mode, fault injection, sanitizer, profiler) - and one
**problem** line per thing found wrong, each with what to do about it. Problems have a
level: ``error`` (pyacl_rt cannot work as configured: exit code 1), ``warning``
(something is ignored or surprising) or ``info``.

``doctor --json`` document (schema 1; keys are only ever added)::

    {"schema": 1, "pyacl_rt_version": str,
     "status": "ok" | "warnings" | "errors",
     "library": {"backend": "real" | "mock" | null, "requested_backend": str | null,
                 "path": str | null, "found_via": str | null,
                 "searched": [str],                 # the real-library search, in order
                 "loaded": {file name: path | null}},
     "versions": {"cann": str | null, "cann_source": str,
                  "driver": str | null, "driver_source": str,
                  "runtime_api": str | null},        # aclrtGetVersion
     "devices": {"count": int | null, "visible_devices": str | null,
                 "physical_count": int | null,       # the mock's, before the filter
                 "physical_ids": [int] | null,       # user id i -> physical_ids[i]
                 "no_device_reason": str | null,
                 "list": [{"index": int, "name": str | null, "error": str | null}]},
     "environment": [{"name": str, "value": str, "note": str}],   # variables that are set
     "ld_library_path": [{"entry": str, "note": str}],
     "mock": {"timing_mode": str, "timing_model": {key: number}, "sanitizer": str,
              "profiler": str, "faults": str | null, "device_lost": str | null,
              "soc_name": str, "cann_version": str, "memory_per_device_bytes": int,
              "device_log_entries": int} | null,       # null on real CANN
     "problems": [{"level": "error" | "warning" | "info", "check": str,
                   "message": str, "fix": str}]}

The text report shows the same, problems last (``ERROR``/``WARNING``/``INFO`` lines with
``-> what to do``). All of it goes to stdout; nothing but a failure of the command itself
goes to stderr. The runtime is finalized at the end when the command started it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any, TextIO

from . import errors

__all__ = ["DOCTOR_SCHEMA_VERSION", "add_parser", "collect_doctor", "format_doctor_text"]

#: Version of the ``doctor --json`` layout (new keys may be added without a bump).
DOCTOR_SCHEMA_VERSION = 1

#: Prefixes and names of the environment variables the report lists when set.
_ENV_PREFIXES = ("PYACL_RT_", "ASCEND_", "ACL_")
_ENV_NAMES = ("DUMP_CONFIG_PATH", "NPU_COLLECT_PATH", "LD_PRELOAD")
#: Variables with a documented integer range (acl_next_semantics.md §8, mock README):
#: name -> (low, high, what an invalid value does).
_INT_RANGES = {
    "ASCEND_GLOBAL_LOG_LEVEL": (0, 4, "the default 3 (error) is used"),
    "ASCEND_GLOBAL_EVENT_ENABLE": (0, 1, "the default 1 is used"),
    "ASCEND_HOST_LOG_FILE_NUM": (1, 1000, "the default 10 is used"),
    "ASCEND_LOG_DEVICE_FLUSH_TIMEOUT": (0, 180000, "the default 2000 ms is used"),
    "ASCEND_LOG_SYNC_SAVE": (0, 1, "the default 0 is used"),
    "ASCEND_TRACE_RECORD_NUM": (10, 1000, "the default is used"),
}
_MOCK_WARNING = re.compile(r"^mock_libascendcl: (?P<var>[A-Z_]+)='(?P<value>[^']*)' (?P<what>.*)$")
_LIB = "libascendcl.so"


class _Report:
    def __init__(self) -> None:
        self.problems: list[dict[str, str]] = []

    def add(self, level: str, check: str, message: str, fix: str) -> None:
        self.problems.append({"level": level, "check": check, "message": message, "fix": fix})


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """Capture what the C library writes to fd 2 (the mock's configuration warnings)."""
    lines: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable fd 2: nothing to capture
        yield lines
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines.extend(tmp.read().decode(errors="replace").splitlines())


# ------------------------------------------------------------ environment
def _environment(report: _Report) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for name in sorted(os.environ):
        if name == "LD_LIBRARY_PATH":
            continue  # listed entry by entry
        if not (name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES):
            continue
        value = os.environ[name]
        rows.append({"name": name, "value": value, "note": _env_note(name, value, report)})
    return rows


def _env_note(name: str, value: str, report: _Report) -> str:
    """Check one variable; problems go to ``report``, a short note is returned."""
    if name in _INT_RANGES:
        low, high, fallback = _INT_RANGES[name]
        if not (value.strip().isdigit() and low <= int(value) <= high):
            report.add(
                "warning",
                "env-value",
                f"{name}={value!r} is not an integer in {low}..{high}: {fallback}",
                f"set {name} to a value in {low}..{high}, or unset it",
            )
            return "invalid"
        return ""
    if name == "ASCEND_SLOG_PRINT_TO_STDOUT":
        report.add(
            "info",
            "env-deprecated",
            "ASCEND_SLOG_PRINT_TO_STDOUT is deprecated (CANN 9.2.0) and replaced by "
            "ASCEND_LOG_PRINT_TO_STDOUT, which wins when both are set",
            "use ASCEND_LOG_PRINT_TO_STDOUT instead",
        )
        return "deprecated"
    if name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        if not os.path.isabs(value):
            report.add(
                "warning",
                "cann-home",
                f"{name}={value!r} is a relative path: the loader refuses it",
                f"set {name} to the absolute path of the CANN install (source its set_env.sh)",
            )
            return "relative path (refused)"
        if not os.path.isdir(value):
            report.add(
                "warning",
                "cann-home",
                f"{name}={value} does not exist",
                f"point {name} at an installed CANN toolkit, or unset it",
            )
            return "missing directory"
        if not os.path.isfile(os.path.join(value, "lib64", _LIB)):
            return f"no lib64/{_LIB}"
        return f"has lib64/{_LIB}"
    if name in ("ASCEND_PROCESS_LOG_PATH", "ASCEND_PROFILER_OUTPUT", "ASCEND_WORK_PATH"):
        return _check_dir(name, value, report)
    if name == "DUMP_CONFIG_PATH":
        if not os.path.isfile(value):
            report.add(
                "error",
                "dump-config",
                f"DUMP_CONFIG_PATH={value} is not a readable file: aclInit fails "
                "(ACL_ERROR_READ_MODEL_FAILURE 100003)",
                "point DUMP_CONFIG_PATH at a dump config JSON, or unset it",
            )
            return "missing file"
        return ""
    if name == "ASCEND_PROFILER_FLAGS" and value not in ("enable", "disable"):
        report.add(
            "warning",
            "env-value",
            f"ASCEND_PROFILER_FLAGS={value!r} is neither 'enable' nor 'disable': not profiling",
            "set ASCEND_PROFILER_FLAGS=enable to profile, or unset it",
        )
        return "invalid"
    return ""


def _check_dir(name: str, value: str, report: _Report) -> str:
    """A directory the runtime writes into (created when missing)."""
    path = value
    while path and not os.path.exists(path):
        parent = os.path.dirname(path.rstrip("/"))
        if parent == path:
            break
        path = parent
    target = path or "."
    if os.path.exists(target) and (
        not os.path.isdir(target) or not os.access(target, os.W_OK | os.X_OK)
    ):
        report.add(
            "warning",
            "env-dir",
            f"{name}={value} is not a writable directory ({target} is not writable or "
            "not a directory): what is written there is lost",
            f"point {name} at a writable directory",
        )
        return "not writable"
    return "" if os.path.isdir(value) else "created on use"


def _ld_library_path(report: _Report) -> list[dict[str, str]]:
    """The LD_LIBRARY_PATH entries that matter for finding libascendcl.so."""
    raw = os.environ.get("LD_LIBRARY_PATH")
    if raw is None:
        return []
    from ._raw._loader import is_refused_path

    rows: list[dict[str, str]] = []
    for entry in re.split("[:;]", raw):
        if not entry or not os.path.isabs(entry):
            note = "relative or empty: the current directory (refused by the loader)"
            report.add(
                "warning",
                "ld-library-path",
                f"LD_LIBRARY_PATH has the entry {entry!r}, which means the working directory: "
                "the dynamic linker loads libraries planted there",
                "remove empty and relative entries (a leading, trailing or doubled ':')",
            )
        elif os.path.isfile(os.path.join(entry, _LIB)):
            refused = is_refused_path(os.path.join(entry, _LIB))
            note = f"has {_LIB}" + (f" - refused: {refused}" if refused else "")
            if refused:
                report.add(
                    "warning",
                    "ld-library-path",
                    f"LD_LIBRARY_PATH entry {entry} holds a link-time stub {_LIB}: other "
                    "programs load it instead of the runtime and fail at the first call",
                    "remove the stub directory from LD_LIBRARY_PATH (link against it only)",
                )
        elif "ascend" in entry.lower() or "cann" in entry.lower():
            note = "Ascend directory" if os.path.isdir(entry) else "Ascend directory (missing)"
        else:
            continue  # unrelated entries are not listed
        rows.append({"entry": entry, "note": note})
    return rows


# ---------------------------------------------------------------- library
def _library(report: _Report) -> dict[str, Any]:
    from . import _options

    lib: dict[str, Any] = {
        "backend": None,
        "requested_backend": None,
        "path": None,
        "found_via": None,
        "searched": [],
        "loaded": {},
    }
    try:
        opts = _options.get_options()
    except errors.ConfigError as exc:
        report.add("error", "config", _one_line(exc), _config_fix(exc))
        return lib
    lib["requested_backend"] = opts.backend
    import warnings

    from ._raw._backend import backend_info

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", errors.BackendFallbackWarning)
            info = backend_info()
    except errors.LibraryNotFoundError as exc:
        lib["searched"] = list(getattr(exc, "searched", ()))
        report.add(
            "error",
            "library",
            _one_line(exc),
            "install CANN (toolkit and driver) and `source <CANN>/set_env.sh`, set "
            "ASCEND_HOME_PATH or PYACL_RT_LIBRARY to it, or use the bundled mock with "
            "PYACL_RT_BACKEND=mock",
        )
        return lib
    except errors.AclError as exc:
        report.add(
            "error",
            "library",
            f"the library does not load: {_one_line(exc)}",
            "check that the CANN driver is installed (its lib64 directories in "
            "LD_LIBRARY_PATH: `source <CANN>/set_env.sh`)",
        )
        return lib
    lib.update(
        backend=info.backend,
        path=info.path,
        found_via=info.found_via,
        searched=[str(a) for a in info.attempts],
        loaded=dict(info.libraries),
    )
    fell_back = info.backend == "mock" and opts.backend == "auto" and info.attempts
    for w in caught:
        if not issubclass(w.category, errors.BackendFallbackWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if fell_back:
        home = [v for v in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME") if os.environ.get(v)]
        report.add(
            "warning" if home else "info",
            "backend",
            "no usable real libascendcl.so was found: pyacl_rt runs on the bundled mock"
            + (f" although {', '.join(home)} is set" if home else ""),
            "on a machine with a card: `source <CANN>/set_env.sh` (or set ASCEND_HOME_PATH); "
            "to use the mock on purpose, set PYACL_RT_BACKEND=mock",
        )
    return lib


def _config_fix(exc: errors.AclError) -> str:
    text = str(exc)
    m = re.search(r"\b(PYACL_RT_[A-Z_]+)", text)
    var = m[1] if m else "the PYACL_RT_* variable"
    return f"correct or unset {var} (`pyacl-rt info --env` lists the accepted values)"


def _versions() -> dict[str, Any]:
    from . import lowlevel
    from ._raw._backend import backend_info

    info = backend_info()
    out: dict[str, Any] = {
        "cann": info.cann_version,
        "cann_source": info.version_source,
        "driver": None,
        "driver_source": "unknown",
        "runtime_api": None,
    }
    ffi, lib = lowlevel.ffi, lowlevel.lib
    with contextlib.suppress(errors.AclError, AttributeError):
        v = ffi.new("aclCANNPackageVersion *")
        if lib.aclsysGetCANNVersion(7, v) == 0:  # ACL_PKG_NAME_DRIVER
            text = ffi.string(v.version).decode(errors="replace").strip()
            if text:
                out.update(driver=text, driver_source="aclsysGetCANNVersion(ACL_PKG_NAME_DRIVER)")
        else:
            lowlevel.clear_error()
    if out["driver"] is None:
        for path in ("/usr/local/Ascend/driver/version.info",):
            with contextlib.suppress(OSError):
                for line in open(path, encoding="utf-8", errors="replace"):  # noqa: SIM115
                    if line.strip().lower().startswith("version="):
                        out.update(driver=line.split("=", 1)[1].strip(), driver_source=path)
                        break
    with contextlib.suppress(errors.AclError, AttributeError):
        nums = ffi.new("int32_t[3]")
        if lib.aclrtGetVersion(nums, nums + 1, nums + 2) == 0:
            out["runtime_api"] = f"{nums[0]}.{nums[1]}.{nums[2]}"
        else:
            lowlevel.clear_error()
    return out


# ---------------------------------------------------------------- devices
def _devices(report: _Report, diag: Any) -> dict[str, Any]:
    from . import _device, _options
    from . import _runtime as runtime

    visible = _options.get_options().visible_devices
    out: dict[str, Any] = {
        "count": None,
        "visible_devices": visible,
        "physical_count": None,
        "physical_ids": None,
        "no_device_reason": None,
        "list": [],
    }
    try:
        runtime.ensure_initialized()
        count = _device.device_count()
    except errors.AclError as exc:
        report.add(
            "error",
            "runtime",
            f"the runtime does not start: {_one_line(exc)}",
            "see the message; `pyacl-rt info` shows the same failure, and the device log "
            "(`pyacl-rt logs export`) the runtime's own record",
        )
        return out
    out["count"] = count
    if diag is not None:
        from .mock import mock_control

        mc = mock_control()
        out["physical_count"] = mc.config(0)
        out["physical_ids"] = [mc.physical_device(i) for i in range(count)]
    if count == 0:
        reason = _device.no_device_reason() or "the runtime reports no device"
        out["no_device_reason"] = reason
        if visible:
            fix = (
                "correct or unset ASCEND_RT_VISIBLE_DEVICES: a comma-separated, strictly "
                "ascending list of existing device ids (e.g. 0,1)"
            )
        elif diag is not None:
            fix = "the mock has ASCEND_MOCK_DEVICE_COUNT=0: unset it or set 1..64"
        else:
            fix = (
                "check the driver and the card (`npu-smi info`), the /dev/davinci* device "
                "nodes and, in a container, that they are mounted into it"
            )
        report.add("error", "devices", f"no device is visible: {reason}", fix)
        return out
    if visible and diag is None:  # the mock says it itself (a configuration warning)
        _check_visible_prefix(visible, count, report)
    from ._device import Device

    for i in range(count):
        entry: dict[str, Any] = {"index": i, "name": None, "error": None}
        try:
            entry["name"] = Device(i).name or None
            if diag is not None and diag.device_lost(i):
                raise errors.error_from_code(diag.device_lost(i), function="device status")
        except errors.AclError as exc:
            entry["error"] = _one_line(exc)
            report.add(
                "error",
                "device",
                f"device {i} does not answer: {_one_line(exc)}",
                "reset the device (`npu-smi set -t reset -i <id>`) or exclude it with "
                "ASCEND_RT_VISIBLE_DEVICES; `pyacl-rt logs export` collects its log",
            )
        out["list"].append(entry)
    return out


def _check_visible_prefix(visible: str, used: int, report: _Report) -> None:
    """The runtime stops the list at the first bad entry: say what was ignored."""
    entries = visible.split(",")
    if used < len(entries):
        ignored = ",".join(entries[used:])
        report.add(
            "warning",
            "visible-devices",
            f"ASCEND_RT_VISIBLE_DEVICES={visible}: the runtime stopped at {entries[used]!r} "
            f"and ignored {ignored!r}; visible: {used} device(s)",
            "list only existing device ids, ascending, without spaces",
        )


# ------------------------------------------------------------------- mock
def _mock_section(report: _Report, diag: Any, captured: list[str]) -> dict[str, Any] | None:
    for line in captured:
        m = _MOCK_WARNING.match(line)
        if m is None:
            continue
        report.add(
            "warning",
            "mock-config",
            f"{m['var']}={m['value']!r} {m['what']}",
            f"set {m['var']} to an accepted value (mock README, Configuration) or unset it",
        )
    if diag is None:
        return None
    from ._mockdiag import describe
    from .mock import mock_control

    mc = mock_control()
    section: dict[str, Any] = dict(describe(diag) or {})
    section.update(
        faults=os.environ.get("ASCEND_MOCK_FAULTS") or None,
        device_lost=os.environ.get("ASCEND_MOCK_DEVICE_LOST") or None,
        soc_name=mc.soc_name,
        cann_version=mc.cann_version,
        memory_per_device_bytes=mc.config(2),
        device_log_entries=diag.device_log_count(-1),
    )
    if section["faults"]:
        report.add(
            "warning",
            "mock-faults",
            f"fault injection is on (ASCEND_MOCK_FAULTS={section['faults']}): those calls fail",
            "unset ASCEND_MOCK_FAULTS unless a test wants the failures",
        )
    if section["device_lost"]:
        report.add(
            "warning",
            "mock-faults",
            f"devices are marked lost from the start "
            f"(ASCEND_MOCK_DEVICE_LOST={section['device_lost']})",
            "unset ASCEND_MOCK_DEVICE_LOST unless a test wants lost devices",
        )
    if section["sanitizer"] not in ("off", "unknown"):
        report.add(
            "info",
            "mock-sanitizer",
            f"the race sanitizer is on ({section['sanitizer']}): every task is checked",
            "nothing to do; unset ASCEND_MOCK_SANITIZE for full speed",
        )
    if section["timing_mode"] == "paced":
        report.add(
            "info",
            "mock-timing",
            "paced timing: the mock sleeps so that wall time follows the model",
            "nothing to do; ASCEND_MOCK_TIMING=virtual keeps the model without waiting",
        )
    return section


def _cross_checks(report: _Report) -> None:
    env = os.environ
    if env.get("ASCEND_RT_VISIBLE_DEVICES") and env.get("ASCEND_PROFILER_FLAGS") == "enable":
        report.add(
            "warning",
            "visible-devices",
            "ASCEND_RT_VISIBLE_DEVICES cannot be used with profiling (CANN): "
            "ASCEND_PROFILER_FLAGS=enable is set",
            "profile without ASCEND_RT_VISIBLE_DEVICES (select the device in the program)",
        )


# ---------------------------------------------------------------- collect
def collect_doctor() -> dict[str, Any]:
    """Run every check and return the ``doctor --json`` document (never raises for a
    problem it can report; the runtime may be left initialized)."""
    from ._cli_support import package_version

    report = _Report()
    environment = _environment(report)
    ld_path = _ld_library_path(report)
    _cross_checks(report)
    library: dict[str, Any]
    versions: dict[str, Any] = {
        "cann": None,
        "cann_source": "unknown",
        "driver": None,
        "driver_source": "unknown",
        "runtime_api": None,
    }
    devices: dict[str, Any] = {
        "count": None,
        "visible_devices": os.environ.get("ASCEND_RT_VISIBLE_DEVICES"),
        "physical_count": None,
        "physical_ids": None,
        "no_device_reason": None,
        "list": [],
    }
    mock: dict[str, Any] | None = None
    with _captured_stderr() as captured:
        library = _library(report)
        diag = None
        if library["path"] is not None:
            from ._mockdiag import mock_diag

            diag = mock_diag()
            versions = _versions()
            devices = _devices(report, diag)
    if library["path"] is not None:
        mock = _mock_section(report, diag, captured)
    for line in captured:
        m = _MOCK_WARNING.match(line)
        for row in environment:
            if m is not None and row["name"] == m["var"] and not row["note"]:
                row["note"] = "invalid (see problems)"
    for line in captured:  # anything else the library printed: pass it on
        if not _MOCK_WARNING.match(line):
            print(line, file=sys.stderr)
    levels = {p["level"] for p in report.problems}
    status = "errors" if "error" in levels else "warnings" if "warning" in levels else "ok"
    order = {"error": 0, "warning": 1, "info": 2}
    return {
        "schema": DOCTOR_SCHEMA_VERSION,
        "pyacl_rt_version": package_version(),
        "status": status,
        "library": library,
        "versions": versions,
        "devices": devices,
        "environment": environment,
        "ld_library_path": ld_path,
        "mock": mock,
        "problems": sorted(report.problems, key=lambda p: order[p["level"]]),
    }


# ----------------------------------------------------------------- output
def format_doctor_text(doc: dict[str, Any], out: TextIO) -> None:
    """Write the human-readable report of a ``doctor`` document to ``out``."""
    from ._cli_support import render_table

    lib = doc["library"]
    w = out.write
    w(f"pyacl_rt {doc['pyacl_rt_version']} doctor\n\n")
    w("Library\n")
    w(f"  backend:    {lib['backend'] or 'none'} (requested: {lib['requested_backend']})\n")
    w(f"  path:       {lib['path'] or '-'}\n")
    w(f"  found via:  {lib['found_via'] or '-'}\n")
    if lib["searched"]:
        w("  searched, in order:\n")
        for place in lib["searched"]:
            w(f"    {place}\n")
    v = doc["versions"]
    w("\nVersions\n")
    w(f"  CANN:         {v['cann'] or 'unknown'} ({v['cann_source']})\n")
    w(f"  driver:       {v['driver'] or 'unknown'} ({v['driver_source']})\n")
    w(f"  runtime API:  {v['runtime_api'] or 'unknown'}\n")
    d = doc["devices"]
    w("\nDevices\n")
    count = "?" if d["count"] is None else str(d["count"])
    vis = d["visible_devices"]
    w(f"  visible:    {count}" + (f" (ASCEND_RT_VISIBLE_DEVICES={vis})" if vis else "") + "\n")
    if d["physical_count"] is not None:
        ids = ", ".join(f"{i}->{p}" for i, p in enumerate(d["physical_ids"] or []))
        w(
            f"  physical:   {d['physical_count']} (mock)"
            + (f"; user -> physical: {ids}" if ids else "")
            + "\n"
        )
    for dev in d["list"]:
        state = f"error: {dev['error']}" if dev["error"] else "ok"
        w(f"  [{dev['index']}] {dev['name'] or 'unknown SoC'}  {state}\n")
    w("\n")
    env_rows = [[e["name"], e["value"], e["note"]] for e in doc["environment"]]
    env_rows += [
        ["LD_LIBRARY_PATH entry", e["entry"] or "''", e["note"]] for e in doc["ld_library_path"]
    ]
    if env_rows:
        render_table("Environment", ["variable", "value", "note"], env_rows, out)
    else:
        w("Environment\n  no PYACL_RT_*, ASCEND_*, ACL_* variable is set\n\n")
    m = doc["mock"]
    if m is not None:
        w("Mock\n")
        w(f"  SoC {m['soc_name']}, CANN {m['cann_version']}, "
          f"{m['memory_per_device_bytes'] >> 30} GiB per device\n")  # fmt: skip
        w(f"  timing:     {m['timing_mode']}\n")
        w(f"  sanitizer:  {m['sanitizer']}\n")
        w(f"  profiler:   {m['profiler']}\n")
        w(f"  faults:     {m['faults'] or 'none'}; lost devices: {m['device_lost'] or 'none'}\n")
        w(f"  device log: {m['device_log_entries']} entries in this process\n\n")
    problems = doc["problems"]
    if not problems:
        w("No problems found.\n")
        return
    w(f"Problems ({len(problems)})\n")
    for p in problems:
        w(f"  {p['level'].upper()}: {p['message']}\n")
        w(f"    -> {p['fix']}\n")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# ---------------------------------------------------------------- command
def _cmd_doctor(args: argparse.Namespace, out: TextIO) -> int:
    from . import _runtime as runtime

    started_here = runtime.state() == "uninitialized"
    try:
        doc = collect_doctor()
    finally:
        if started_here and runtime.state() != "uninitialized":
            with contextlib.suppress(errors.AclError):
                runtime.finalize()
    if args.json:
        import json

        json.dump(doc, out, indent=2)
        out.write("\n")
    else:
        format_doctor_text(doc, out)
    return 1 if doc["status"] == "errors" else 0


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``doctor`` on the sub-parsers of ``pyacl-rt``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "doctor",
        help="check the installation and configuration, and say what to fix",
        description="Report which library was loaded and why, the CANN and driver versions, "
        "the visible devices, the relevant environment variables and the mock's "
        "configuration, with one line per problem found saying what to do. Exit code 1 "
        "when there is an error-level problem.",
    )
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.set_defaults(func=_cmd_doctor, command_parser=p)
    return p
