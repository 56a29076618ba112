"""``pyacl-rt bench``: copy bandwidth over sizes and launch/record latency of one device.

Bandwidth: for each size and direction (H2D pinned host -> device, D2H device -> pinned
host, D2D within the device) the command queues ``--warmup`` untimed copies, then
``--iterations`` asynchronous copies on one stream between two timing events; GB/s =
size x iterations / the events' elapsed time (10^9 bytes per second; a D2D copy counts
its bytes once, although it reads and writes them). The events time the device's work:
on a card, its own clock; on the mock, the timing model's modeled time with
``ASCEND_MOCK_TIMING=virtual`` or ``paced`` (deterministic: the figures follow the
model's numbers) and the host clock with ``real`` (the default: then the figures are
the host's ``memcpy`` speed, not a card's). The document says which.

Latency (microseconds per call, host side, the best of 3 rounds of ``--calls`` calls):
``record`` - ``Event.record(stream)``; ``launch`` - a kernel launch with one block:
``--kernel FILE:NAME`` (a device binary and a kernel without parameters) launched with
:func:`pyacl_rt.launch`, else on the mock an operator without work
(``aclmockLaunchOp``; on a card without ``--kernel`` the row is skipped). With the
mock's timing model on, ``modeled_us`` is the modeled host time per call as well.

``bench --json`` document (schema 1; keys are only ever added)::

    {"schema": 1, "pyacl_rt_version": str,
     "backend": "real" | "mock", "library": str,       # the loaded libascendcl.so
     "device": int, "soc_name": str | null,
     "timing": {"source": "device events" | "mock timing model" | "mock host clock",
                "mock_mode": "real" | "virtual" | "paced" | null,   # null on a card
                "mock_model": {key: number} | null},  # ASCEND_MOCK_TIMING_MODEL keys
     "iterations": int, "warmup": int, "calls": int,
     "bandwidth": [{"direction": "H2D" | "D2H" | "D2D", "bytes": int,
                    "iterations": int, "elapsed_ms": float, "gbps": float}],
     "latency": [{"operation": "launch" | "record", "via": str, "calls": int,
                  "host_us": float, "modeled_us": float | null}],
     "notes": [str]}                  # also printed on stderr ("pyacl-rt: note: ...")

Exit codes as ``info``: 0, 1 for a runtime error (no device, bad device index, a copy
that fails), 2 for bad arguments. The runtime is finalized at the end when the command
started it.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from . import errors

__all__ = [
    "BENCH_SCHEMA_VERSION",
    "DEFAULT_SIZES",
    "add_parser",
    "format_bench_text",
    "parse_size",
    "run_bench",
]

#: Version of the ``bench --json`` layout (new keys may be added without a bump).
BENCH_SCHEMA_VERSION = 1
#: Default copy sizes in bytes: 4 KiB to 64 MiB.
DEFAULT_SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
DIRECTIONS = ("H2D", "D2H", "D2D")
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}
_MAX_SIZE = 1 << 40


class _BenchUsageError(ValueError):
    """A bad ``bench`` argument (exit code 2)."""


def parse_size(text: str) -> int:
    """``"4K"`` -> 4096: bytes, or a number with K, M, G, T (binary multiples, optional
    ``B``/``iB``, case-insensitive). Raises :class:`_BenchUsageError` for anything else,
    zero, or more than 1 TiB."""
    m = _SIZE.match(text)
    if m is None:
        raise _BenchUsageError(f"bad size {text!r}: expected bytes or a number with K, M, G or T")
    value = int(m[1]) << _UNITS[m[2].lower()]
    if not 0 < value <= _MAX_SIZE:
        raise _BenchUsageError(f"bad size {text!r}: must be between 1 byte and 1 TiB")
    return value


def _parse_sizes(text: str) -> list[int]:
    sizes = [parse_size(part) for part in text.split(",") if part.strip()]
    if not sizes:
        raise _BenchUsageError("--sizes needs at least one size")
    return sorted(set(sizes))


def fmt_bytes(n: int) -> str:
    """``1048576`` -> ``"1 MiB"`` (exact binary units, else bytes)."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _positive(name: str, value: int, limit: int) -> int:
    if not 0 < value <= limit:
        raise _BenchUsageError(f"{name} must be between 1 and {limit}, not {value}")
    return value


# ------------------------------------------------------------------ measure
def _timing_info(diag: Any) -> dict[str, Any]:
    if diag is None:
        return {"source": "device events", "mock_mode": None, "mock_model": None}
    mode = diag.timing_mode()
    modeled = mode in ("virtual", "paced")
    return {
        "source": "mock timing model" if modeled else "mock host clock",
        "mock_mode": mode,
        "mock_model": diag.timing_model() if modeled else None,
    }


def _measure_copy(
    npu: Any, direction: str, size: int, bufs: dict[str, Any], stream: Any, iters: int, warmup: int
) -> dict[str, Any]:
    dst, src = {
        "H2D": (bufs["dev_a"], bufs["host"]),
        "D2H": (bufs["host"], bufs["dev_a"]),
        "D2D": (bufs["dev_b"], bufs["dev_a"]),
    }[direction]
    for _ in range(warmup):
        npu.copy(dst, src, size, stream=stream, non_blocking=True)
    start = npu.Event(enable_timing=True)
    end = npu.Event(enable_timing=True)
    start.record(stream)
    for _ in range(iters):
        npu.copy(dst, src, size, stream=stream, non_blocking=True)
    end.record(stream)
    end.synchronize()
    ms = float(start.elapsed_time(end))
    start.close()
    end.close()
    gbps = size * iters / (ms * 1e-3) / 1e9 if ms > 0 else float("inf")
    return {
        "direction": direction,
        "bytes": size,
        "iterations": iters,
        "elapsed_ms": round(ms, 6),
        "gbps": round(gbps, 3),
    }


def _measure_calls(
    call: Callable[[], object], calls: int, stream: Any, diag: Any, modeled: bool
) -> tuple[float, float | None]:
    """Best mean host time per call (µs) over 3 rounds, and the modeled one."""
    best = float("inf")
    best_model: float | None = None
    for _ in range(3):
        stream.synchronize()
        m0 = diag.now_ns() if modeled else 0
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            call()
        t1 = time.perf_counter_ns()
        m1 = diag.now_ns() if modeled else 0
        host = (t1 - t0) / calls / 1e3
        if host < best:
            best = host
            best_model = (m1 - m0) / calls / 1e3 if modeled else None
    stream.synchronize()
    return round(best, 3), (round(best_model, 3) if best_model is not None else None)


def _launcher(npu: Any, args: argparse.Namespace, stream: Any, diag: Any, keep: list[Any]) -> Any:
    """``(callable, via)`` launching one small kernel, or ``None`` when impossible."""
    if args.kernel:
        path, _, name = args.kernel.rpartition(":")
        if not path or not name:
            raise _BenchUsageError(f"--kernel {args.kernel!r}: expected FILE:NAME")
        code = npu.ObjectCode.from_file(path)
        keep.append(code)
        kernel = code.get_kernel(name)
        config = npu.LaunchConfig(1)

        def launch_kernel() -> None:
            npu.launch(stream, config, kernel)

        return launch_kernel, f"pyacl_rt.launch of {name} (1 block)"
    if diag is None:
        return None
    handle = stream.handle

    def launch_op() -> None:
        rc = diag.launch_empty_op(handle)
        if rc != 0:
            raise errors.error_from_code(rc, function="aclmockLaunchOp")

    return launch_op, "aclmockLaunchOp (a modeled operator without work, mock only)"


def run_bench(
    args: argparse.Namespace, advance: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Measure and return the ``bench --json`` document (the runtime must be usable)."""
    import pyacl_rt as npu

    from . import _device
    from ._cli_support import package_version
    from ._mockdiag import mock_diag
    from ._raw._backend import backend_info

    step = advance or (lambda label: None)
    info = backend_info()
    diag = mock_diag()
    count = _device.device_count()
    if count == 0:
        reason = _device.no_device_reason() or "the runtime reports no device"
        raise errors.InvalidDeviceError(f"no device to benchmark: {reason}")
    if not 0 <= args.device < count:
        raise _BenchUsageError(f"--device {args.device}: devices 0..{count - 1} are visible")
    timing = _timing_info(diag)
    modeled = timing["mock_mode"] in ("virtual", "paced")
    notes: list[str] = []
    if timing["source"] == "mock host clock":
        notes.append(
            "mock in real-time mode: the figures are this host's memcpy and call costs, not "
            "a card's; ASCEND_MOCK_TIMING=virtual gives the timing model's figures"
        )
    doc: dict[str, Any] = {
        "schema": BENCH_SCHEMA_VERSION,
        "pyacl_rt_version": package_version(),
        "backend": info.backend,
        "library": info.path,
        "device": args.device,
        "soc_name": None,
        "timing": timing,
        "iterations": args.iterations,
        "warmup": args.warmup,
        "calls": args.calls,
        "bandwidth": [],
        "latency": [],
        "notes": notes,
    }
    keep: list[Any] = []
    with npu.device(args.device):
        doc["soc_name"] = npu.Device(args.device).name or None
        stream = npu.Stream()
        biggest = max(args.sizes)
        bufs: dict[str, Any] = {}
        try:
            if not args.no_copies:
                bufs = {
                    "host": npu.HostBuffer(biggest),
                    "dev_a": npu.DeviceBuffer(biggest),
                    "dev_b": npu.DeviceBuffer(biggest),
                }
                for direction in DIRECTIONS:
                    for size in args.sizes:
                        row = _measure_copy(
                            npu, direction, size, bufs, stream, args.iterations, args.warmup
                        )
                        doc["bandwidth"].append(row)
                        step(f"{direction} {fmt_bytes(size)}")
            event = npu.Event()
            keep.append(event)
            us, model_us = _measure_calls(
                lambda: event.record(stream), args.calls, stream, diag, modeled
            )
            doc["latency"].append(
                {
                    "operation": "record",
                    "via": "Event.record(stream)",
                    "calls": args.calls,
                    "host_us": us,
                    "modeled_us": model_us,
                }
            )
            step("record")
            launcher = _launcher(npu, args, stream, diag, keep)
            if launcher is None:
                notes.append(
                    "launch latency not measured: pass --kernel FILE:NAME (a kernel without "
                    "parameters) on a card"
                )
            else:
                call, via = launcher
                us, model_us = _measure_calls(call, args.calls, stream, diag, modeled)
                doc["latency"].append(
                    {
                        "operation": "launch",
                        "via": via,
                        "calls": args.calls,
                        "host_us": us,
                        "modeled_us": model_us,
                    }
                )
            step("launch")
            stream.synchronize()
        finally:
            for obj in [*bufs.values(), *keep]:
                obj.close()
            stream.close()
    return doc


# ------------------------------------------------------------------- output
def format_bench_text(doc: dict[str, Any], out: TextIO) -> None:
    """Write the tables of a ``bench`` document to ``out`` (rich or plain text)."""
    from ._cli_support import render_table

    timing = doc["timing"]
    source = timing["source"]
    if timing["mock_mode"] is not None:
        source += f" (ASCEND_MOCK_TIMING={timing['mock_mode']})"
    out.write(
        f"pyacl-rt bench: device {doc['device']} ({doc['soc_name'] or 'unknown SoC'}), "
        f"{doc['backend']} backend\n"
        f"timing:  {source}\n"
    )
    out.write("\n")
    if doc["bandwidth"]:
        by_size: dict[int, dict[str, float]] = {}
        for row in doc["bandwidth"]:
            by_size.setdefault(row["bytes"], {})[row["direction"]] = row["gbps"]
        rows = [
            [fmt_bytes(size), *(_fmt_gbps(cells.get(d)) for d in DIRECTIONS)]
            for size, cells in sorted(by_size.items())
        ]
        render_table(
            f"Copy bandwidth, GB/s ({doc['iterations']} copies per cell)",
            ["size", *DIRECTIONS],
            rows,
            out,
            right=[True] * 4,
        )
    if doc["latency"]:
        with_model = any(r["modeled_us"] is not None for r in doc["latency"])
        columns = ["operation", "host µs/call"] + (["modeled µs/call"] if with_model else [])
        lat_rows = []
        for r in doc["latency"]:
            cells = [r["operation"], f"{r['host_us']:.2f}"]
            if with_model:
                cells.append("-" if r["modeled_us"] is None else f"{r['modeled_us']:.2f}")
            lat_rows.append(cells)
        render_table(
            f"Latency ({doc['calls']} calls, best of 3)",
            columns,
            lat_rows,
            out,
            right=[False, True, True][: len(columns)],
        )
        for r in doc["latency"]:
            out.write(f"{r['operation']}: {r['via']}\n")


def _fmt_gbps(value: float | None) -> str:
    if value is None:
        return "-"
    if value == float("inf"):
        return "inf"
    return f"{value:.2f}" if value < 1000 else f"{value:.0f}"


# ------------------------------------------------------------------ command
def _cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    from . import _runtime as runtime
    from ._cli_support import progress

    try:
        args.sizes = _parse_sizes(args.sizes) if args.sizes else list(DEFAULT_SIZES)
        _positive("--iterations", args.iterations, 1_000_000)
        _positive("--calls", args.calls, 10_000_000)
        if not 0 <= args.warmup <= 1_000_000:
            raise _BenchUsageError(f"--warmup must be between 0 and 1000000, not {args.warmup}")
        if args.device < 0:
            raise _BenchUsageError(f"--device must be >= 0, not {args.device}")
    except _BenchUsageError as exc:
        args.command_parser.error(str(exc))  # usage + message on stderr, exit 2
    started_here = runtime.state() == "uninitialized"
    steps = (0 if args.no_copies else len(DIRECTIONS) * len(args.sizes)) + 2
    doc: dict[str, Any] | None = None
    try:
        with progress(steps, "bench", enabled=not args.no_progress) as advance:
            doc = run_bench(args, advance)
    except _BenchUsageError as exc:
        args.command_parser.error(str(exc))
    finally:
        if started_here:
            try:
                runtime.finalize()
            except errors.AclError:
                if doc is not None:
                    raise
    assert doc is not None
    if args.json:
        import json

        json.dump(doc, out, indent=2)
        out.write("\n")
    else:
        format_bench_text(doc, out)
    if doc["notes"]:
        out.flush()  # the report first, then the notes (stderr, like info's warnings)
        for note in doc["notes"]:
            print(f"pyacl-rt: note: {note}", file=sys.stderr)
    return 0


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``bench`` on the sub-parsers of ``pyacl-rt``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "bench",
        help="copy bandwidth (H2D/D2H/D2D) and launch/record latency",
        description="Measure H2D, D2H and D2D copy bandwidth over sizes (GB/s) and the host "
        "latency of a kernel launch and an event record (µs) on one device. On the mock, "
        "ASCEND_MOCK_TIMING=virtual (or paced) reports the timing model's figures.",
    )
    p.add_argument(
        "--sizes",
        metavar="LIST",
        help="comma-separated copy sizes, bytes or with K/M/G (default 4K,64K,1M,16M,64M)",
    )
    p.add_argument(
        "--iterations", type=int, default=20, metavar="N", help="timed copies per cell (20)"
    )
    p.add_argument("--warmup", type=int, default=2, metavar="N", help="untimed copies first (2)")
    p.add_argument(
        "--calls", type=int, default=1000, metavar="N", help="calls per latency round (1000)"
    )
    p.add_argument("--device", type=int, default=0, metavar="N", help="device index (0)")
    p.add_argument(
        "--kernel",
        metavar="FILE:NAME",
        help="a device binary and a kernel without parameters for the launch latency",
    )
    p.add_argument("--no-copies", action="store_true", help="skip the bandwidth part")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.set_defaults(func=_cmd_bench, command_parser=p)
    return p
