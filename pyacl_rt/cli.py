"""The ``pyacl-rt`` command line (also ``python -m pyacl_rt``).

Commands:

``pyacl-rt info``
    Backend (real CANN library or bundled mock), library path and how it was
    found, CANN version, and one line per visible device (index, SoC, total/free
    memory in GiB). ``--json`` prints a stable machine-readable document (see
    :data:`INFO_SCHEMA_VERSION`); ``--env`` prints the environment variables pyacl_rt
    honours with their current values instead (no library is loaded);
    ``--env --markdown`` prints the README's table of them.

``info --json`` document (schema 1; keys are only ever added)::

    {"schema": 1, "pyacl_rt_version": str,
     "backend": "real" | "mock",
     "library": {"path": str, "found_via": str, "loaded": {file name: path | null},
                 "searched": [str]},           # the real-library search, in order
     "cann_version": str | null, "cann_version_source": str,
     "runtime": {"state": str, "external": bool},
     "visible_devices": str | null,            # ASCEND_RT_VISIBLE_DEVICES as given
     "device_count": int,
     "devices": [{"index": int, "soc_name": str | null,
                  "total_memory_bytes": int | null, "free_memory_bytes": int | null,
                  "total_memory_gib": float | null, "free_memory_gib": float | null,
                  "error": str | null}],       # one entry per visible device
     "warnings": [str]}                        # e.g. the auto -> mock fallback

Exit codes: 0 success; 1 runtime error (one-line message on stderr, no traceback;
for ``info`` also when any device could not be queried - the document is still
printed with the error in that device's entry); 2 usage error.

New commands (``doctor``, ``bench``) plug in through :func:`build_parser`: add a
sub-parser and set its ``func`` default to a ``(args) -> int`` handler.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

from . import _abi_data, _options, errors

__all__ = ["INFO_SCHEMA_VERSION", "build_parser", "collect_info", "format_info_text", "main"]

#: Version of the ``info --json`` document layout. Bumped only on incompatible changes;
#: new keys may be added without a bump.
INFO_SCHEMA_VERSION = 1

_GIB = float(1 << 30)
# aclrtMemAttr ACL_HBM_MEM (1): what torch_npu's mem_get_info asks for
_ACL_HBM_MEM: int = _abi_data.CONSTANTS["ACL_HBM_MEM"]


class _UsageError(Exception):
    """Bad command-line input detected after argparse (exit code 2)."""


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyacl_rt")
    except PackageNotFoundError:  # running from an uninstalled checkout
        from . import __version__

        return __version__


# ------------------------------------------------------------------ info
def _cstring(value: Any) -> str | None:
    """Decode a ``const char *`` result (cdata, int address or bytes); None for NULL."""
    from . import lowlevel

    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    ffi = lowlevel.ffi
    if isinstance(value, int):
        if value == 0:
            return None
        value = ffi.cast("char *", value)
    if value == ffi.NULL:
        return None
    raw: bytes = ffi.string(value)
    return raw.decode("utf-8", "replace")


def _query_device(index: int) -> dict[str, Any]:
    """Set device ``index`` on this thread, read SoC and memory, reset it again."""
    from . import lowlevel

    lib = lowlevel.lib
    entry: dict[str, Any] = {
        "index": index,
        "soc_name": None,
        "total_memory_bytes": None,
        "free_memory_bytes": None,
        "total_memory_gib": None,
        "free_memory_gib": None,
        "error": None,
    }
    try:
        lowlevel.check(lib.aclrtSetDevice(index), "aclrtSetDevice")
    except errors.AclError as exc:
        entry["error"] = _one_line(exc)
        return entry
    try:
        entry["soc_name"] = _cstring(lib.aclrtGetSocName())
        s = lowlevel.scratch()
        # two size_t out-parameters: elements 0 and 1 of the size_t scratch array
        lowlevel.check(lib.aclrtGetMemInfo(_ACL_HBM_MEM, s.size, s.size + 1), "aclrtGetMemInfo")
        free = int(s.size[0])
        total = int(s.size[1])
        entry.update(
            total_memory_bytes=total,
            free_memory_bytes=free,
            total_memory_gib=round(total / _GIB, 2),
            free_memory_gib=round(free / _GIB, 2),
        )
    except errors.AclError as exc:
        entry["error"] = _one_line(exc)
    finally:
        try:
            lowlevel.check(lib.aclrtResetDevice(index), "aclrtResetDevice")
        except errors.AclError as exc:
            if entry["error"] is None:
                entry["error"] = _one_line(exc)
    return entry


def collect_info() -> dict[str, Any]:
    """The ``info`` document (what ``--json`` prints). Raises :class:`AclError` on a
    process-wide failure (no library, runtime does not start, device count fails)."""
    from . import _loader, lowlevel, runtime

    captured: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", _loader.BackendFallbackWarning)
        info = _loader.backend_info()
    for w in caught:
        if issubclass(w.category, _loader.BackendFallbackWarning):
            captured.append(str(w.message))
        else:  # pragma: no cover - re-emit anything unexpected
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    runtime.ensure_initialized()
    s = lowlevel.scratch()
    lowlevel.check(lowlevel.lib.aclrtGetDeviceCount(s.u32), "aclrtGetDeviceCount")
    count = int(s.u32[0])
    devices = [_query_device(i) for i in range(count)]
    opts = _options.get_options()
    return {
        "schema": INFO_SCHEMA_VERSION,
        "pyacl_rt_version": _package_version(),
        "backend": info.backend,
        "library": {
            "path": info.path,
            "found_via": info.found_via,
            "loaded": dict(info.libraries),
            "searched": [str(a) for a in info.attempts],
        },
        "cann_version": info.cann_version,
        "cann_version_source": info.version_source,
        "runtime": {
            "state": runtime.state(),
            "external": runtime.is_external(),
        },
        "visible_devices": opts.visible_devices,
        "device_count": count,
        "devices": devices,
        "warnings": captured,
    }


def _fmt_gib(value: Any) -> str:
    return "?" if value is None else f"{value:.2f} GiB"


def format_info_text(doc: dict[str, Any]) -> str:
    """Human-readable rendering of :func:`collect_info`'s document."""
    lib = doc["library"]
    lines = [
        f"pyacl_rt {doc['pyacl_rt_version']}",
        f"backend:      {doc['backend']}",
        f"library:      {lib['path']}",
        f"found via:    {lib['found_via']}",
    ]
    version = doc["cann_version"] or "unknown"
    if doc["cann_version"] and doc.get("cann_version_source"):
        version += f" (from {doc['cann_version_source']})"
    lines.append(f"CANN version: {version}")
    if doc["runtime"]["external"]:
        lines.append("runtime:      ACL initialised by another component (not finalized here)")
    count = doc["device_count"]
    visible = doc["visible_devices"]
    suffix = f" (ASCEND_RT_VISIBLE_DEVICES={visible})" if visible is not None else ""
    lines.append(f"devices:      {count}{suffix}")
    for dev in doc["devices"]:
        head = f"  [{dev['index']}]"
        if dev["error"] is not None and dev["total_memory_bytes"] is None:
            lines.append(f"{head} error: {dev['error']}")
            continue
        line = (
            f"{head} {dev['soc_name'] or 'unknown SoC'}  "
            f"memory {_fmt_gib(dev['total_memory_gib'])} total, "
            f"{_fmt_gib(dev['free_memory_gib'])} free"
        )
        if dev["error"] is not None:
            line += f"  (error: {dev['error']})"
        lines.append(line)
    for w in doc["warnings"]:
        # first sentence only; the full text (e.g. every place searched) is in --json
        first, sep, rest = w.partition(". ")
        more = " (details: pyacl-rt info --json)" if sep and rest else ""
        lines.append(f"warning: {first.rstrip('.')}{more}")
    return "\n".join(lines) + "\n"


def _env_rows_text(rows: list[dict[str, str]]) -> str:
    width = max(len(r["name"]) for r in rows)
    out = []
    for r in rows:
        value = r["value"]
        shown = f"{value!s}" if value != "unset" else "unset"
        effective = r["effective"]
        note = "" if effective == value else f" -> {effective}"
        out.append(f"{r['name']:<{width}}  = {shown}{note}")
        out.append(f"{'':<{width}}    {r['type']}, default {r['default']}; {r['accepted']}")
        out.append(f"{'':<{width}}    {r['description']}")
    return "\n".join(out) + "\n"


def _cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    if args.markdown and not args.env:
        raise _UsageError("--markdown only applies to --env")
    if args.env:
        if args.markdown:
            out.write(_options.render_env_table_markdown())
            return 0
        rows = _options.env_table()
        if args.json:
            json.dump({"schema": INFO_SCHEMA_VERSION, "env": rows}, out, indent=2)
            out.write("\n")
        else:
            out.write(_env_rows_text(rows))
        return 0
    doc = collect_info()
    if args.json:
        json.dump(doc, out, indent=2, sort_keys=False)
        out.write("\n")
    else:
        out.write(format_info_text(doc))
    return 1 if any(d["error"] is not None for d in doc["devices"]) else 0


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The argument parser; each sub-command sets ``func(args, out) -> int``."""
    parser = argparse.ArgumentParser(
        prog="pyacl-rt",
        description="pyacl_rt: Python runtime for Ascend NPUs (AscendCL) and its mock.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    info = sub.add_parser(
        "info",
        help="show backend, library, CANN version and devices",
        description="Show the backend and library in use, the CANN version and every "
        "visible device (SoC, total/free memory).",
    )
    info.add_argument("--json", action="store_true", help="print a machine-readable document")
    info.add_argument(
        "--env",
        action="store_true",
        help="show the environment variables pyacl_rt honours and their current values",
    )
    info.add_argument(
        "--markdown",
        action="store_true",
        help="with --env: print the documentation table (as in the README) in Markdown",
    )
    info.set_defaults(func=_cmd_info)
    return parser


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Entry point of ``pyacl-rt``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with 2 on usage errors
    stream = out if out is not None else sys.stdout
    try:
        code: int = args.func(args, stream)
    except _UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"pyacl-rt: error: {exc}", file=sys.stderr)
        return 2
    except errors.AclError as exc:
        print(f"pyacl-rt: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `pyacl-rt info | head`: the reader went away; exit quietly, and keep Python
        # from complaining again when it flushes stdout at shutdown.
        _silence_stdout()
        return 1
    except OSError as exc:
        print(f"pyacl-rt: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    try:
        stream.flush()
    except BrokenPipeError:
        _silence_stdout()
        return 1
    return code


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
