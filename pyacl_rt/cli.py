"""The ``pyacl-rt`` command line (also ``python -m pyacl_rt``).

Commands:

``pyacl-rt info``
    Backend (real CANN library or bundled mock), library path and how it was
    found, CANN version, and every visible device through its
    :class:`~pyacl_rt.Device` object: one line per device (index, SoC,
    total/free memory in GiB, utilisation) and a peer-access matrix (one line per
    device listing its peers when the matrix would not fit in 80 columns).
    ``--json`` prints a stable machine-readable document (see
    :data:`INFO_SCHEMA_VERSION`); ``--env`` prints the environment variables pyacl_rt
    honours with their current values instead (no library is loaded);
    ``--env --markdown`` prints the documentation's table of them (docs/guides/scripting.md).

    Contexts: SoC, utilisation and peer access are queried by device id (no context).
    Free memory needs a context: ``info`` uses the device's primary context if this
    process already holds it, else a temporary :class:`~pyacl_rt.Context`
    destroyed right after the query. The command finalizes the runtime before
    printing when it started it, so it leaves no context or device reference behind.

``info --json`` document (schema 1; keys are only ever added)::

    {"schema": 1, "pyacl_rt_version": str,
     "backend": "real" | "mock",
     "library": {"path": str, "found_via": str, "loaded": {file name: path | null},
                 "searched": [str]},           # the real-library search, in order
     "cann_version": str | null, "cann_version_source": str,
     "runtime": {"state": str, "external": bool},
     "visible_devices": str | null,            # ASCEND_RT_VISIBLE_DEVICES as given
     "device_count": int,
     "no_device_reason": str | null,           # why device_count is 0 (added in 0.1)
     "devices": [{"index": int, "soc_name": str | null,
                  "total_memory_bytes": int | null, "free_memory_bytes": int | null,
                  "total_memory_gib": float | null, "free_memory_gib": float | null,
                  "error": str | null,
                  # added in 0.1 (still schema 1):
                  "utilization_percent": int | null,     # Device.utilization()
                  "utilization_rates": {"cube", "vector", "aicpu", "memory":
                                        int | null} | null,
                  "peer_access": [bool | null]}],  # [j]: can this device access
                                                   # device j (null: self/unknown)
     "warnings": [str]}                        # e.g. the auto -> mock fallback

    ``runtime.state`` is the state while the devices were queried.

    When ``info`` fails as a whole (exit 1: no usable library, a bad ``PYACL_RT_*``
    value, the runtime does not start), ``--json`` prints an error document instead::

    {"schema": 1, "pyacl_rt_version": str,
     "error": {"type": str,                    # the exception class, e.g.
               "message": str,                 #   "LibraryNotFoundError"
               "searched": [str]}}             # every place tried (else [])

Output: the report (text or ``--json``) goes to stdout; warnings (``warning: ...``,
e.g. the auto -> mock fallback) and errors go to stderr, so ``2>/dev/null`` keeps
only the report. The text report lists the places searched for a real library.

Exit codes: 0 success; 1 runtime error (a one-line message on stderr, no traceback;
when no library was found, followed by every place tried and why it was rejected;
for ``info`` also when any device could not be queried - the document is still
printed with the error in that device's entry); 2 usage error (the usage of the
command concerned, ``pyacl-rt info`` for ``info``'s arguments). No visible device
(``ACL_ERROR_RT_NO_DEVICE``: no card, or ``ASCEND_RT_VISIBLE_DEVICES`` selects none
or is malformed) is not an error: ``info`` lists 0 devices (the document is printed
as usual), prints the runtime's reason on stderr and exits 0.

``pyacl-rt mock prefix``
    Prints the install prefix of the bundled mock (a CANN-shaped install: use it as
    ``ASCEND_HOME_PATH`` or ``ASCEND_CANN_PACKAGE_PATH``).

``pyacl-rt mock env``
    Prints ``export`` lines for a POSIX shell doing what the prefix's ``set_env.sh``
    does (see :func:`pyacl_rt.mock.env_exports`): ``eval "$(pyacl-rt mock env)"``.
    Exit 1 with a one-line message when the bundled mock is not built.

``pyacl-rt doctor`` / ``bench`` / ``logs export``
    Installation and configuration check with what to fix; copy bandwidth and
    launch/record latency; the device logs in a ``.tar.gz`` (docs/guides/cli.md; their
    ``--json`` documents are described in ``_cli_doctor``, ``_cli_bench``, ``_cli_logs``).

Further commands plug in through :func:`build_parser`, one module each: add a
sub-parser and set its ``func`` default to a ``(args, out) -> int`` handler and its
``command_parser`` default to the sub-parser.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import textwrap
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

from . import _options, errors

__all__ = [
    "INFO_SCHEMA_VERSION",
    "build_parser",
    "collect_info",
    "format_info_text",
    "format_warnings",
    "main",
]

#: Version of the ``info --json`` document layout. Bumped only on incompatible changes;
#: new keys may be added without a bump.
INFO_SCHEMA_VERSION = 1

_GIB = float(1 << 30)


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
def _empty_entry(index: int) -> dict[str, Any]:
    return {
        "index": index,
        "soc_name": None,
        "total_memory_bytes": None,
        "free_memory_bytes": None,
        "total_memory_gib": None,
        "free_memory_gib": None,
        "error": None,
        "utilization_percent": None,
        "utilization_rates": None,
        "peer_access": [],
    }


def _mem_info(dev: Any) -> tuple[int, int]:
    """``(free, total)`` of ``dev`` without leaving a context behind.

    ``aclrtGetMemInfo`` needs a context on the device. If pyacl_rt already holds the
    device's primary context (the device is in use in this process) that one is used;
    otherwise a temporary explicit :class:`~pyacl_rt.Context` is created for
    the query and destroyed right after, so ``info`` never leaves a context (or a
    device reference) on a device nobody asked for.
    """
    from . import _device
    from ._context import Context
    from ._state import local

    cur = local.st.ctx
    if dev.index in _device.primaries or (cur is not None and cur.device == dev.index):
        result: tuple[int, int] = dev.mem_get_info()
        return result
    ctx = Context(dev.index)
    try:
        with ctx:
            result = dev.mem_get_info()
    finally:
        ctx.close()
    return result


def _query_device(index: int) -> dict[str, Any]:
    """SoC, memory and utilisation of device ``index`` through its :class:`Device`."""
    from ._device import Device

    entry = _empty_entry(index)
    try:
        dev = Device(index)
        entry["soc_name"] = dev.name or None
        free, total = _mem_info(dev)
        entry.update(
            total_memory_bytes=total,
            free_memory_bytes=free,
            total_memory_gib=round(total / _GIB, 2),
            free_memory_gib=round(free / _GIB, 2),
        )
    except errors.AclError as exc:
        entry["error"] = _one_line(exc)
        return entry
    try:
        entry["utilization_rates"] = dev.utilization_rates()
        entry["utilization_percent"] = dev.utilization()
    except errors.FeatureNotSupportedError:
        pass  # the device (or runtime) does not report it: null, not an error
    except errors.AclError as exc:
        entry["error"] = _one_line(exc)
    return entry


def _fill_peer_access(devices: list[dict[str, Any]]) -> None:
    """``peer_access[j]`` of device ``i``: can ``i`` access ``j``'s memory.

    ``None`` on the diagonal, when the runtime does not support the query, and when
    the query failed; a failure between two otherwise healthy devices is reported in
    the row device's ``error`` (a failure involving a device that already has an
    error is that device's error).
    """
    from ._device import Device

    healthy = {d["index"] for d in devices if d["error"] is None}
    for row in devices:
        i = row["index"]
        cells: list[bool | None] = []
        for col in devices:
            j = col["index"]
            value: bool | None = None
            if i != j and i in healthy and j in healthy:
                try:
                    value = Device(i).can_access_peer(j)
                except errors.FeatureNotSupportedError:
                    value = None
                except errors.AclError as exc:
                    if row["error"] is None:
                        row["error"] = f"peer access {i}->{j}: {_one_line(exc)}"
            cells.append(value)
        row["peer_access"] = cells


def collect_info() -> dict[str, Any]:
    """The ``info`` document (what ``--json`` prints). Raises :class:`AclError` on a
    process-wide failure (no library, runtime does not start, device count fails).

    Starts the runtime if needed (the ``info`` command finalizes it again); creates no
    context that outlives the call (free memory is read through a temporary context
    on a device this process does not use) and leaves the calling
    thread's device, context and stream selection unchanged.
    """
    from . import _device as device
    from . import _runtime as runtime
    from ._raw._backend import backend_info
    from .errors import BackendFallbackWarning

    captured: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BackendFallbackWarning)
        info = backend_info()
    for w in caught:
        if issubclass(w.category, BackendFallbackWarning):
            captured.append(str(w.message))
        else:  # pragma: no cover - re-emit anything unexpected
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    runtime.ensure_initialized()
    count = device.device_count()
    devices = [_query_device(i) for i in range(count)]
    _fill_peer_access(devices)
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
        "no_device_reason": device.no_device_reason() if count == 0 else None,
        "devices": devices,
        "warnings": captured,
    }


def _fmt_gib(value: Any) -> str:
    return "?" if value is None else f"{value:.2f} GiB"


#: Width the text output is laid out for (device lines and the peer matrix).
TEXT_WIDTH = 80


def _fmt_util(dev: dict[str, Any]) -> str:
    pct = dev.get("utilization_percent")
    return "util n/a" if pct is None else f"util {pct}%"


def _peer_cell(value: bool | None, is_self: bool) -> str:
    if is_self:
        return "-"
    return "?" if value is None else ("Y" if value else "N")


def _format_peer_access(devices: list[dict[str, Any]]) -> list[str]:
    """The peer-access matrix (rows can access columns), or one line per device
    listing its peers when the matrix would not fit in :data:`TEXT_WIDTH` columns."""
    if len(devices) < 2 or not all("peer_access" in d for d in devices):
        return []
    indices = [d["index"] for d in devices]
    label_w = 2 + len(str(max(indices)))  # "  N" right-aligned
    cell_w = len(str(max(indices))) + 1
    lines = ["peer access (row device -> column device; Y yes, N no, ? unknown):"]
    if label_w + 2 + cell_w * len(devices) <= TEXT_WIDTH:
        lines.append(" " * label_w + " |" + "".join(f"{i:>{cell_w}}" for i in indices))
        for d in devices:
            cells = d["peer_access"]
            row = "".join(
                f"{_peer_cell(cells[k] if k < len(cells) else None, j == d['index']):>{cell_w}}"
                for k, j in enumerate(indices)
            )
            lines.append(f"{d['index']:>{label_w}} |{row}")
        return lines
    for d in devices:
        cells = d["peer_access"]
        peers = [j for k, j in enumerate(indices) if k < len(cells) and cells[k]]
        unknown = [
            j
            for k, j in enumerate(indices)
            if j != d["index"] and (k >= len(cells) or cells[k] is None)
        ]
        text = _ranges(peers) if peers else "none"
        if unknown:
            text += f" (unknown: {_ranges(unknown)})"
        lines.extend(_wrapped(f"{d['index']:>{label_w}} -> {text}", label_w + 4))
    return lines


def _ranges(values: list[int]) -> str:
    """``[0, 2, 3, 4, 7]`` -> ``"0, 2-4, 7"``."""
    parts: list[str] = []
    start = prev = values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(parts)


def _wrapped(text: str, indent: int) -> list[str]:
    return textwrap.wrap(
        text, width=TEXT_WIDTH, subsequent_indent=" " * indent, break_on_hyphens=False
    ) or [text]


def format_info_text(doc: dict[str, Any]) -> str:
    """Human-readable rendering of :func:`collect_info`'s document (80 columns)."""
    lib = doc["library"]
    lines = [
        f"pyacl_rt {doc['pyacl_rt_version']}",
        f"backend:      {doc['backend']}",
        f"library:      {lib['path']}",
        f"found via:    {lib['found_via']}",
    ]
    lines.extend(_format_searched(lib.get("searched") or []))
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
            lines.extend(_wrapped(f"{head} error: {dev['error']}", len(head) + 1))
            continue
        line = (
            f"{head} {dev['soc_name'] or 'unknown SoC'}  "
            f"memory {_fmt_gib(dev['total_memory_gib'])} total, "
            f"{_fmt_gib(dev['free_memory_gib'])} free, {_fmt_util(dev)}"
        )
        lines.append(line)
        if dev["error"] is not None:
            lines.extend(_wrapped(f"{' ' * len(head)} error: {dev['error']}", len(head) + 1))
    lines.extend(_format_peer_access(doc["devices"]))
    return "\n".join(lines) + "\n"


def _format_searched(searched: list[str]) -> list[str]:
    """The places searched for a real library, in order, each with why it was not
    used (one line each: paths are not broken)."""
    if not searched:
        return []
    n = len(searched)
    head = f"searched:     {n} place{'s' if n != 1 else ''} for a real libascendcl.so, in order:"
    return [head, *(f"  {place}" for place in searched)]


def format_warnings(doc: dict[str, Any]) -> str:
    """The document's warnings as ``warning: ...`` lines (80 columns; for stderr): the
    first sentence of each, the rest (what to set) follows from the report."""
    lines: list[str] = []
    for w in doc.get("warnings") or []:
        first = w.partition(". ")[0].rstrip(".")
        lines.extend(_wrapped(f"warning: {first}", len("warning: ")))
    return "".join(line + "\n" for line in lines)


def _env_rows_text(rows: list[dict[str, str]]) -> str:
    width = max(len(r["name"]) for r in rows)
    out = []
    for r in rows:
        value = r["value"]
        effective = r["effective"]
        note = "" if effective == value else f" -> {effective}"
        out.append(f"{r['name']:<{width}}  = {value}{note}")
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
    from . import _runtime as runtime

    # `info` leaves the process as it found it: if it started the runtime, it also
    # finalizes it (releasing every device reference and aclFinalize) before printing.
    started_here = runtime.state() == "uninitialized"
    doc: dict[str, Any] | None = None
    try:
        try:
            doc = collect_info()
        finally:
            if started_here:
                try:
                    runtime.finalize()
                except errors.AclError:
                    if doc is not None:
                        raise  # a failed aclFinalize is the command's error
    except errors.AclError as exc:
        if args.json:
            json.dump(_error_document(exc), out, indent=2)
            out.write("\n")
        raise
    if args.json:
        json.dump(doc, out, indent=2, sort_keys=False)
        out.write("\n")
    else:
        out.write(format_info_text(doc))
    warning_text = format_warnings(doc)
    if warning_text:
        out.flush()  # the report first, then the warnings (as a terminal shows them)
        sys.stderr.write(warning_text)
    if doc["device_count"] == 0:
        reason = doc.get("no_device_reason") or "the runtime reports no device"
        print(f"pyacl-rt: no devices: {reason}", file=sys.stderr)
    return 1 if any(d["error"] is not None for d in doc["devices"]) else 0


def _error_document(exc: errors.AclError) -> dict[str, Any]:
    """What ``info --json`` prints when the command fails as a whole."""
    return {
        "schema": INFO_SCHEMA_VERSION,
        "pyacl_rt_version": _package_version(),
        "error": {
            "type": type(exc).__name__,
            "message": _one_line(exc),
            "searched": list(getattr(exc, "searched", ())),
        },
    }


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The argument parser; each sub-command sets the defaults ``func(args, out) -> int``
    and ``command_parser`` (its own parser: errors in its arguments show its usage)."""
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
        help="with --env: print the documentation table (docs/guides/scripting.md) in Markdown",
    )
    info.set_defaults(func=_cmd_info, command_parser=info)

    mock = sub.add_parser(
        "mock",
        help="the bundled mock's install prefix and shell environment",
        description="The CANN-shaped install prefix of the mock bundled with pyacl_rt.",
    )
    mock_sub = mock.add_subparsers(dest="mock_command", metavar="MOCK_COMMAND")
    mock_sub.required = True
    prefix = mock_sub.add_parser(
        "prefix",
        help="print the prefix (use as ASCEND_HOME_PATH / ASCEND_CANN_PACKAGE_PATH)",
        description="Print the install prefix of the bundled mock.",
    )
    prefix.set_defaults(func=_cmd_mock_prefix, command_parser=prefix)
    env = mock_sub.add_parser(
        "env",
        help='print shell exports: eval "$(pyacl-rt mock env)"',
        description="Print the export lines of the prefix's set_env.sh for a POSIX "
        'shell: eval "$(pyacl-rt mock env)".',
    )
    env.set_defaults(func=_cmd_mock_env, command_parser=env)
    from . import _cli_bench, _cli_doctor, _cli_logs, _cli_trace  # one module per further command

    _cli_bench.add_parser(sub)
    _cli_doctor.add_parser(sub)
    _cli_logs.add_parser(sub)
    _cli_trace.add_parser(sub)
    return parser


def _built_mock_prefix() -> str:
    """The bundled mock's prefix; an OSError naming the fix when it is not built."""
    from . import mock

    root = mock.prefix()
    if (
        not (mock.include_dir() / "acl" / "acl.h").is_file()
        or not (mock.lib_dir() / "libascendcl.so").is_file()
    ):
        raise OSError(
            f"the bundled mock is not built ({root} has no include/acl/acl.h or "
            "lib64/libascendcl.so); build it with `pip install -e .` in the checkout"
        )
    return str(root)


def _cmd_mock_prefix(args: argparse.Namespace, out: TextIO) -> int:
    out.write(_built_mock_prefix() + "\n")
    return 0


def _cmd_mock_env(args: argparse.Namespace, out: TextIO) -> int:
    import shlex

    from . import mock

    _built_mock_prefix()
    for name, value in mock.env_exports().items():
        out.write(f"export {name}={shlex.quote(value)}\n")
    return 0


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Entry point of ``pyacl-rt``; returns the exit code."""
    parser = build_parser()
    # Unknown arguments are reported with the usage of the command they were given to
    # (argparse would show the top-level usage for `pyacl-rt info extra`).
    args, unknown = parser.parse_known_args(argv)  # exits with 2 on usage errors
    command: argparse.ArgumentParser = getattr(args, "command_parser", parser)
    if unknown:
        command.error(f"unrecognized arguments: {' '.join(unknown)}")  # exits with 2
    stream = out if out is not None else sys.stdout
    try:
        code: int = args.func(args, stream)
    except _UsageError as exc:
        command.print_usage(sys.stderr)
        print(f"{command.prog}: error: {exc}", file=sys.stderr)
        return 2
    except errors.AclError as exc:
        with contextlib.suppress(BrokenPipeError):
            stream.flush()  # an error document (--json) before the message
        print(f"pyacl-rt: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        # LibraryNotFoundError: every place tried, with the reason it was rejected
        for place in getattr(exc, "searched", ()):
            print(f"  {place}", file=sys.stderr)
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
