"""pyacl_rt._args and its use across the public API: every size, offset, device index,
count, flag, priority and integer timeout accepts ``__index__`` integers
(``numpy.int64``, ...) and refuses ``bool``; wrong types raise ``TypeError`` naming
the parameter, at every public entry point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pyacl_rt as npu
from pyacl_rt import _args, mock


class Idx:
    """A minimal ``__index__`` integer that is not an int."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


# ------------------------------------------------------------------ helpers
def test_index_arg() -> None:
    assert _args.index_arg(3, "n") == 3
    assert _args.index_arg(np.int64(-3), "n") == -3
    assert _args.index_arg(np.uint8(200), "n") == 200
    assert _args.index_arg(Idx(7), "n") == 7
    for bad in (True, np.True_, 2.0, np.float64(2.0), "2", None, [2]):
        with pytest.raises(TypeError, match=r"^nbytes must be an int, not "):
            _args.index_arg(bad, "nbytes")


def test_size_arg() -> None:
    assert _args.size_arg(np.int64(2**40), "n") == 2**40
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        _args.size_arg(np.int64(-1), "offset")
    with pytest.raises(ValueError, match="too large"):
        _args.size_arg(2**64, "n")
    with pytest.raises(TypeError, match="n must be an int, not bool"):
        _args.size_arg(False, "n")


# ------------------------------------------------- __index__ accepted everywhere
def test_memcpy_async_numpy_size() -> None:
    """Issue 7: ``memcpy_async(..., nbytes=numpy.int64(256))`` with a valid size raised
    a false "runs past the end"."""
    s = npu.Stream(0)
    src = npu.HostBuffer(256)
    src.numpy()[:] = np.arange(256, dtype=np.uint8)
    dev = npu.DeviceBuffer(256, 0)
    out = npu.HostBuffer(256)
    npu.memcpy_async(dev, src, np.int64(256), s)
    npu.memcpy_async(out, dev, np.uint16(256), s)
    s.synchronize()
    assert bytes(out.numpy()) == bytes(range(256))
    with pytest.raises(ValueError, match="nbytes 257 runs past the end of src"):
        npu.memcpy_async(dev, src, np.int64(257), s)
    with pytest.raises(TypeError, match="nbytes must be an int, not bool"):
        npu.memcpy_async(dev, src, True, s)
    with pytest.raises(TypeError, match="nbytes must be an int, not float"):
        npu.memcpy_async(dev, src, 256.0, s)  # type: ignore[arg-type]
    for b in (src, dev, out):
        b.close()
    s.close()


def _uses_of_ints(i: Callable[[int], Any]) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) for every public parameter that takes an integer, each given
    ``i(value)`` instead of an int."""
    dev = npu.DeviceBuffer(64, 0)
    host = npu.HostBuffer(64)
    arr = bytearray(64)
    s = npu.Stream(0)
    ev = npu.Event()
    ev.record(s)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("DeviceBuffer", lambda: npu.DeviceBuffer(i(16), i(0), i(0)).close()),
        ("HostBuffer", lambda: npu.HostBuffer(i(16)).close()),
        ("DeviceBuffer[a:b]", lambda: dev[i(8) : i(16)].nbytes),
        ("copy", lambda: npu.copy(dev, arr, i(8), dst_offset=i(4), src_offset=i(2))),
        ("copy_2d", lambda: npu.copy_2d(dev, i(8), arr, i(8), i(4), i(2), dst_offset=i(1))),
        (
            "copy_2d src_offset",
            lambda: npu.copy_2d(arr, i(8), dev, i(8), i(4), i(2), src_offset=i(3)),
        ),
        ("memset", lambda: npu.memset(dev, i(7), i(8), i(4), s)),
        ("memcpy_async", lambda: npu.memcpy_async(host, dev, i(64), s)),
        ("copy_to_host", lambda: dev.copy_to_host(offset=i(60))),
        ("copy_to_host_async", lambda: dev.copy_to_host_async(arr, s, offset=i(0))),
        ("copy_from_host", lambda: dev.copy_from_host(b"abcd", offset=i(60))),
        ("copy_from_host_async", lambda: dev.copy_from_host_async(host, s, offset=i(0))),
        ("DeviceBuffer.memset", lambda: dev.memset(i(1), i(4), i(2))),
        ("fill", lambda: host.fill(i(3))),
        ("Stream", lambda: npu.Stream(i(0), i(-1), i(0)).close()),
        ("Stream.from_handle", lambda: npu.Stream.from_handle(i(s.handle), i(0)).query()),
        ("Stream.priority_range", lambda: npu.Stream.priority_range(i(0))),
        ("Stream.synchronize", lambda: s.synchronize(timeout=i(60_000))),
        ("Event.synchronize", lambda: ev.synchronize(timeout=i(60_000))),
        ("stream_from_pool", lambda: npu.stream_from_pool(i(0), i(0))),
        ("default_stream", lambda: npu.default_stream(i(0))),
        ("current_stream", lambda: npu.current_stream(i(0))),
        ("Device", lambda: npu.Device(i(1)).index),
        ("Device.info", lambda: npu.Device(0).info(i(301))),
        ("Device.can_access_peer", lambda: npu.Device(0).can_access_peer(i(1))),
        ("set_device", lambda: npu.set_device(i(0))),
        ("device()", lambda: npu.device(i(0)).__enter__()),
        ("synchronize", lambda: npu.synchronize(i(0))),
        ("mem_get_info", lambda: npu.mem_get_info(i(0))),
        ("get_device_properties", lambda: npu.get_device_properties(i(0))),
        ("get_device_name", lambda: npu.get_device_name(i(0))),
        ("get_device_capability", lambda: npu.get_device_capability(i(0))),
        ("can_device_access_peer", lambda: npu.can_device_access_peer(i(0), i(1))),
        ("memory_allocated", lambda: npu.memory_allocated(i(0))),
        ("max_memory_allocated", lambda: npu.max_memory_allocated(i(0))),
        ("memory_reserved", lambda: npu.memory_reserved(i(0))),
        ("max_memory_reserved", lambda: npu.max_memory_reserved(i(0))),
        ("reset_peak_memory_stats", lambda: npu.reset_peak_memory_stats(i(0))),
        ("memory_stats", lambda: npu.memory_stats(i(0))),
        ("set_op_timeout_ms", lambda: npu.set_op_timeout_ms(i(60_000))),
        ("Context", lambda: npu.Context(i(0)).close()),
    ]
    return cases


@pytest.mark.parametrize("kind", [np.int64, np.uint32, Idx])
def test_index_integers_accepted_everywhere(kind: Callable[[int], Any]) -> None:
    def i(v: int) -> Any:
        if kind is np.uint32 and not 0 <= v < 2**32:
            return np.int64(v)
        return kind(v)

    failures = []
    for name, call in _uses_of_ints(i):
        try:
            call()
            npu.synchronize(0)  # its async work done before the next call's (no race)
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
    npu.synchronize(0)
    npu.set_device(0)
    assert not failures, "\n".join(failures)


# ------------------------------------------- wrong types at every entry point
class _Objs:
    """Live objects the wrong-type calls are made on (closed after the test)."""

    def __init__(self) -> None:
        self.s = npu.Stream(0)
        self.ev = npu.Event()
        self.dev = npu.DeviceBuffer(64, 0)
        self.host = npu.HostBuffer(64)
        self.d = npu.Device(0)
        self.ctx = npu.Context(0)
        self.gen = npu.RandomGenerator(0, 0)

    def close(self) -> None:
        self.s.synchronize()
        for obj in (self.ev, self.dev, self.host, self.s, self.ctx, self.gen):
            obj.close()


NOT_INT = object()
NOT_BUF = object()  # no buffer protocol
F = 1.5  # a float where an int is needed

#: (entry point, call on _Objs, the parameter its TypeError must name). Every public
#: function, class and method taking arguments is listed (checked below).
WRONG_TYPES: list[tuple[str, Callable[[_Objs], object], str]] = [
    # ---- devices
    ("Device", lambda o: npu.Device(F), "device"),  # type: ignore[arg-type]
    ("Device.info", lambda o: o.d.info("301"), "attr"),  # type: ignore[arg-type]
    ("Device.capability", lambda o: o.d.capability(F), "info"),  # type: ignore[arg-type]
    ("Device.feature", lambda o: o.d.feature(NOT_INT), "feature"),  # type: ignore[arg-type]
    ("Device.can_access_peer", lambda o: o.d.can_access_peer(F), "peer"),  # type: ignore[arg-type]
    ("Device.synchronize", lambda o: o.d.synchronize(timeout="1"), "timeout"),  # type: ignore[arg-type]
    ("Device.set_current", lambda o: o.d.set_current(1), "positional"),  # type: ignore[call-arg]
    ("Device.mem_get_info", lambda o: o.d.mem_get_info(1), "positional"),  # type: ignore[call-arg]
    ("Device.utilization", lambda o: o.d.utilization(1), "positional"),  # type: ignore[call-arg]
    ("Device.utilization_rates", lambda o: o.d.utilization_rates(1), "positional"),  # type: ignore[call-arg]
    ("can_device_access_peer", lambda o: npu.can_device_access_peer(0, F), "peer"),  # type: ignore[arg-type]
    ("can_device_access_peer dev", lambda o: npu.can_device_access_peer(F, 0), "device"),  # type: ignore[arg-type]
    ("device", lambda o: npu.device(F), "device"),
    ("get_cann_version", lambda o: npu.get_cann_version(1), "module"),  # type: ignore[arg-type]
    ("get_device_capability", lambda o: npu.get_device_capability(F), "device"),  # type: ignore[arg-type]
    ("get_device_name", lambda o: npu.get_device_name(NOT_INT), "device"),  # type: ignore[arg-type]
    ("get_device_properties", lambda o: npu.get_device_properties(F), "device"),  # type: ignore[arg-type]
    ("mem_get_info", lambda o: npu.mem_get_info(F), "device"),  # type: ignore[arg-type]
    ("set_device", lambda o: npu.set_device(F), "device"),  # type: ignore[arg-type]
    ("set_op_timeout_ms", lambda o: npu.set_op_timeout_ms(1.5), "timeout_ms"),  # type: ignore[arg-type]
    ("synchronize", lambda o: npu.synchronize(F), "device"),  # type: ignore[arg-type]
    ("synchronize timeout", lambda o: npu.synchronize(0, timeout="1"), "timeout"),  # type: ignore[arg-type]
    ("utilization", lambda o: npu.utilization(NOT_INT), "device"),  # type: ignore[arg-type]
    # ---- runtime
    ("init", lambda o: npu.init(5), "config_path"),  # type: ignore[arg-type]
    # ---- contexts
    ("Context", lambda o: npu.Context(F), "device"),  # type: ignore[arg-type]
    ("Context.make_current", lambda o: o.ctx.make_current(1), "positional"),  # type: ignore[call-arg]
    ("Context.synchronize", lambda o: o.ctx.synchronize(1), "positional"),  # type: ignore[call-arg]
    ("Context.close", lambda o: o.ctx.close(1), "positional"),  # type: ignore[call-arg]
    # ---- streams
    ("Stream device", lambda o: npu.Stream(F), "device"),  # type: ignore[arg-type]
    ("Stream priority", lambda o: npu.Stream(0, F), "priority"),  # type: ignore[arg-type]
    ("Stream flags", lambda o: npu.Stream(0, 0, "1"), "flags"),  # type: ignore[arg-type]
    ("Stream.from_handle", lambda o: npu.Stream.from_handle("0x1"), "handle"),  # type: ignore[arg-type]
    ("Stream.from_handle device", lambda o: npu.Stream.from_handle(0, F), "device"),  # type: ignore[arg-type]
    ("Stream.priority_range", lambda o: npu.Stream.priority_range(F), "device"),  # type: ignore[arg-type]
    ("Stream.query", lambda o: o.s.query(1), "positional"),  # type: ignore[call-arg]
    ("Stream.synchronize", lambda o: o.s.synchronize("1"), "timeout"),  # type: ignore[arg-type]
    ("Stream.wait_event", lambda o: o.s.wait_event(o.s), "event"),
    ("Stream.wait_stream", lambda o: o.s.wait_stream(o.ev), "other"),  # type: ignore[arg-type]
    ("Stream.record_event", lambda o: o.s.record_event(o.s), "event"),
    ("Stream.launch_host_func", lambda o: o.s.launch_host_func(5), "fn"),  # type: ignore[arg-type]
    ("Stream.launch_host_func block", lambda o: o.s.launch_host_func(print, block="no"), "block"),  # type: ignore[arg-type]
    ("Stream.add_callback", lambda o: o.s.add_callback(5), "callback"),  # type: ignore[arg-type]
    ("Stream.as_future", lambda o: o.s.as_future(1), "positional"),  # type: ignore[call-arg]
    ("Stream.close", lambda o: o.s.close(1), "positional"),  # type: ignore[call-arg]
    ("current_stream", lambda o: npu.current_stream(F), "device"),  # type: ignore[arg-type]
    ("default_stream", lambda o: npu.default_stream(F), "device"),  # type: ignore[arg-type]
    ("set_stream", lambda o: npu.set_stream(o.ev), "s"),  # type: ignore[arg-type]
    ("stream", lambda o: npu.stream(o.ev), "s"),
    ("StreamContext", lambda o: npu.StreamContext(o.ev), "s"),
    ("stream_from_pool", lambda o: npu.stream_from_pool(F), "device"),  # type: ignore[arg-type]
    ("stream_from_pool priority", lambda o: npu.stream_from_pool(0, "high"), "priority"),  # type: ignore[arg-type]
    # ---- events
    ("Event enable_timing", lambda o: npu.Event("yes"), "enable_timing"),  # type: ignore[arg-type]
    ("Event blocking", lambda o: npu.Event(blocking=[]), "blocking"),  # type: ignore[arg-type]
    ("Event interprocess", lambda o: npu.Event(interprocess=None), "interprocess"),  # type: ignore[arg-type]
    ("Event.record", lambda o: o.ev.record(o.ev), "stream"),  # type: ignore[arg-type]
    ("Event.ipc_handle", lambda o: o.ev.ipc_handle(1), "positional"),  # type: ignore[call-arg]
    ("Event.from_ipc_handle", lambda o: npu.Event.from_ipc_handle(b"x"), "handle"),
    ("Event.wait", lambda o: o.ev.wait(0), "stream"),  # type: ignore[arg-type]
    # ---- graphs
    ("NPUGraph", lambda o: npu.NPUGraph(1), "positional"),  # type: ignore[call-arg]
    ("NPUGraph.capture_begin", lambda o: npu.NPUGraph().capture_begin(pool=3), "pool"),  # type: ignore[arg-type]
    (
        "NPUGraph.capture_begin mode",
        lambda o: npu.NPUGraph().capture_begin(capture_error_mode=1),  # type: ignore[arg-type]
        "capture_error_mode",
    ),
    ("NPUGraph.capture_end", lambda o: npu.NPUGraph().capture_end(1), "positional"),  # type: ignore[call-arg]
    ("NPUGraph.replay", lambda o: npu.NPUGraph().replay(1), "positional"),  # type: ignore[call-arg]
    ("NPUGraph.reset", lambda o: npu.NPUGraph().reset(1), "positional"),  # type: ignore[call-arg]
    ("NPUGraph.pool", lambda o: npu.NPUGraph().pool(1), "positional"),  # type: ignore[call-arg]
    ("NPUGraph.debug_dump", lambda o: npu.NPUGraph().debug_dump(1), "debug_path"),  # type: ignore[arg-type]
    ("GraphPoolHandle", lambda o: npu.GraphPoolHandle(1), "positional"),  # type: ignore[call-arg]
    ("graph", lambda o: npu.graph(F), "npu_graph"),  # type: ignore[arg-type]
    ("graph stream", lambda o: npu.graph(npu.NPUGraph(), stream=1), "stream"),  # type: ignore[arg-type]
    ("graph_pool_handle", lambda o: npu.graph_pool_handle(1), "positional"),  # type: ignore[call-arg]
    ("make_graphed_callables", lambda o: npu.make_graphed_callables(1, ()), "callables"),  # type: ignore[arg-type]
    ("Event.query", lambda o: o.ev.query(1), "positional"),  # type: ignore[call-arg]
    ("Event.synchronize", lambda o: o.ev.synchronize(timeout=NOT_INT), "timeout"),  # type: ignore[arg-type]
    ("Event.elapsed_time", lambda o: o.ev.elapsed_time(1.0), "end_event"),  # type: ignore[arg-type]
    ("Event.close", lambda o: o.ev.close(1), "positional"),  # type: ignore[call-arg]
    ("Event.as_future", lambda o: o.ev.as_future(1), "positional"),  # type: ignore[call-arg]
    ("Event.add_done_callback", lambda o: o.ev.add_done_callback(5), "fn"),  # type: ignore[arg-type]
    # ---- memory
    ("DeviceBuffer nbytes", lambda o: npu.DeviceBuffer("64"), "nbytes"),  # type: ignore[arg-type]
    ("DeviceBuffer device", lambda o: npu.DeviceBuffer(64, F), "device"),  # type: ignore[arg-type]
    ("DeviceBuffer policy", lambda o: npu.DeviceBuffer(64, 0, F), "policy"),  # type: ignore[arg-type]
    ("DeviceBuffer[]", lambda o: o.dev["a":"b"], "slice"),  # type: ignore[misc]
    ("DeviceBuffer[] key", lambda o: o.dev[F], "slice"),  # type: ignore[index]
    ("DeviceBuffer.copy_from_host", lambda o: o.dev.copy_from_host(NOT_BUF), "src"),
    (
        "DeviceBuffer.copy_from_host offset",
        lambda o: o.dev.copy_from_host(b"x", offset=F),
        "offset",
    ),  # type: ignore[arg-type]
    (
        "DeviceBuffer.copy_from_host_async",
        lambda o: o.dev.copy_from_host_async(b"x", o.ev),
        "stream",
    ),  # type: ignore[arg-type]
    ("DeviceBuffer.copy_to_host", lambda o: o.dev.copy_to_host(NOT_BUF), "dst"),
    ("DeviceBuffer.copy_to_host offset", lambda o: o.dev.copy_to_host(offset=F), "offset"),  # type: ignore[arg-type]
    (
        "DeviceBuffer.copy_to_host_async",
        lambda o: o.dev.copy_to_host_async(bytearray(64), 5),
        "stream",
    ),  # type: ignore[arg-type]
    (
        "DeviceBuffer.copy_to_host_async offset",
        lambda o: o.dev.copy_to_host_async(bytearray(8), o.s, offset=F),
        "offset",
    ),  # type: ignore[arg-type]
    ("DeviceBuffer.memset", lambda o: o.dev.memset("0"), "value"),  # type: ignore[arg-type]
    ("DeviceBuffer.memset nbytes", lambda o: o.dev.memset(0, F), "nbytes"),  # type: ignore[arg-type]
    ("DeviceBuffer.memset offset", lambda o: o.dev.memset(0, 8, F), "offset"),  # type: ignore[arg-type]
    ("DeviceBuffer.memset stream", lambda o: o.dev.memset(0, 8, 0, 7), "stream"),  # type: ignore[arg-type]
    (
        "DeviceBuffer.memset non_blocking",
        lambda o: o.dev.memset(0, non_blocking="yes"),
        "non_blocking",
    ),  # type: ignore[arg-type]
    ("DeviceBuffer.fill", lambda o: o.dev.fill(F), "value"),  # type: ignore[arg-type]
    ("DeviceBuffer.close", lambda o: o.dev.close(1), "positional"),  # type: ignore[call-arg]
    ("HostBuffer", lambda o: npu.HostBuffer(F), "nbytes"),  # type: ignore[arg-type]
    ("HostBuffer.numpy", lambda o: o.host.numpy(NOT_INT), "dtype"),
    ("HostBuffer.fill", lambda o: o.host.fill("a"), "value"),  # type: ignore[arg-type]
    ("HostBuffer.memoryview", lambda o: o.host.memoryview(1), "positional"),  # type: ignore[call-arg]
    ("HostBuffer.tobytes", lambda o: o.host.tobytes(1), "positional"),  # type: ignore[call-arg]
    ("HostBuffer.close", lambda o: o.host.close(1), "positional"),  # type: ignore[call-arg]
    ("from_dlpack x", lambda o: npu.from_dlpack(NOT_BUF), "x"),
    ("from_dlpack device", lambda o: npu.from_dlpack(o.host, device=F), "device"),  # type: ignore[arg-type]
    ("from_dlpack copy", lambda o: npu.from_dlpack(o.host, copy="no"), "copy"),  # type: ignore[arg-type]
    ("DeviceBuffer.as_dlpack dtype", lambda o: o.dev.as_dlpack(F), "dtype"),
    ("HostBuffer.as_dlpack shape", lambda o: o.host.as_dlpack("uint8", [64]), "shape"),  # type: ignore[arg-type]
    ("DeviceBuffer.__dlpack__ stream", lambda o: o.dev.__dlpack__(stream=F), "stream"),
    ("copy dst", lambda o: npu.copy(NOT_BUF, o.dev), "dst"),
    ("copy src", lambda o: npu.copy(o.dev, NOT_BUF), "src"),
    ("copy nbytes", lambda o: npu.copy(o.dev, o.host, F), "nbytes"),  # type: ignore[arg-type]
    ("copy dst_offset", lambda o: npu.copy(o.dev, o.host, 8, dst_offset=F), "dst_offset"),  # type: ignore[arg-type]
    ("copy src_offset", lambda o: npu.copy(o.dev, o.host, 8, src_offset="0"), "src_offset"),  # type: ignore[arg-type]
    ("copy stream", lambda o: npu.copy(o.dev, o.host, stream=o.ev), "stream"),  # type: ignore[arg-type]
    ("copy non_blocking", lambda o: npu.copy(o.dev, o.host, non_blocking="no"), "non_blocking"),  # type: ignore[arg-type]
    ("copy_2d dst", lambda o: npu.copy_2d(NOT_BUF, 8, o.dev, 8, 8, 1), "dst"),
    ("copy_2d src", lambda o: npu.copy_2d(o.dev, 8, NOT_BUF, 8, 8, 1), "src"),
    ("copy_2d dpitch", lambda o: npu.copy_2d(o.dev, F, o.host, 8, 8, 1), "dpitch"),  # type: ignore[arg-type]
    ("copy_2d spitch", lambda o: npu.copy_2d(o.dev, 8, o.host, F, 8, 1), "spitch"),  # type: ignore[arg-type]
    ("copy_2d width", lambda o: npu.copy_2d(o.dev, 8, o.host, 8, F, 1), "width"),  # type: ignore[arg-type]
    ("copy_2d height", lambda o: npu.copy_2d(o.dev, 8, o.host, 8, 8, F), "height"),  # type: ignore[arg-type]
    (
        "copy_2d dst_offset",
        lambda o: npu.copy_2d(o.dev, 8, o.host, 8, 8, 1, dst_offset=F),
        "dst_offset",
    ),  # type: ignore[arg-type]
    (
        "copy_2d src_offset",
        lambda o: npu.copy_2d(o.dev, 8, o.host, 8, 8, 1, src_offset=F),
        "src_offset",
    ),  # type: ignore[arg-type]
    ("copy_2d stream", lambda o: npu.copy_2d(o.dev, 8, o.host, 8, 8, 1, stream=1), "stream"),  # type: ignore[arg-type]
    (
        "copy_2d non_blocking",
        lambda o: npu.copy_2d(o.dev, 8, o.host, 8, 8, 1, non_blocking=2),
        "non_blocking",
    ),
    ("memcpy_async dst", lambda o: npu.memcpy_async(bytearray(8), o.dev, 8, o.s), "dst"),  # type: ignore[arg-type]
    ("memcpy_async src", lambda o: npu.memcpy_async(o.dev, b"x", 1, o.s), "src"),  # type: ignore[arg-type]
    ("memcpy_async nbytes", lambda o: npu.memcpy_async(o.dev, o.host, F, o.s), "nbytes"),  # type: ignore[arg-type]
    ("memcpy_async stream", lambda o: npu.memcpy_async(o.dev, o.host, 8, None), "stream"),  # type: ignore[arg-type]
    ("memset buf", lambda o: npu.memset(NOT_BUF, 0), "buf"),
    ("memset value", lambda o: npu.memset(o.dev, None), "value"),  # type: ignore[arg-type]
    ("memset nbytes", lambda o: npu.memset(o.dev, 0, "8"), "nbytes"),  # type: ignore[arg-type]
    ("memset offset", lambda o: npu.memset(o.dev, 0, 8, F), "offset"),  # type: ignore[arg-type]
    ("memset stream", lambda o: npu.memset(o.dev, 0, 8, 0, o.ev), "stream"),  # type: ignore[arg-type]
    ("memset non_blocking", lambda o: npu.memset(o.dev, 0, non_blocking=[]), "non_blocking"),  # type: ignore[arg-type]
    ("memory_allocated", lambda o: npu.memory_allocated(F), "device"),  # type: ignore[arg-type]
    ("max_memory_allocated", lambda o: npu.max_memory_allocated(F), "device"),  # type: ignore[arg-type]
    ("memory_reserved", lambda o: npu.memory_reserved(F), "device"),  # type: ignore[arg-type]
    ("max_memory_reserved", lambda o: npu.max_memory_reserved(F), "device"),  # type: ignore[arg-type]
    ("memory_stats", lambda o: npu.memory_stats(F), "device"),  # type: ignore[arg-type]
    ("reset_peak_memory_stats", lambda o: npu.reset_peak_memory_stats(F), "device"),  # type: ignore[arg-type]
    ("reset_accumulated_memory_stats", lambda o: npu.reset_accumulated_memory_stats(F), "device"),  # type: ignore[arg-type]
    ("memory_summary", lambda o: npu.memory_summary(F), "device"),  # type: ignore[arg-type]
    ("DeviceBuffer stream", lambda o: npu.DeviceBuffer(8, stream=1), "stream"),  # type: ignore[arg-type]
    ("DeviceBuffer.record_stream", lambda o: o.dev.record_stream(1), "stream"),  # type: ignore[arg-type]
    ("DeviceBuffer.ipc_handle", lambda o: o.dev.ipc_handle(pids=3), "pids"),
    ("DeviceBuffer.from_ipc_handle", lambda o: npu.DeviceBuffer.from_ipc_handle(1), "handle"),
    ("caching_allocator_alloc", lambda o: npu.caching_allocator_alloc(F), "nbytes"),  # type: ignore[arg-type]
    (
        "caching_allocator_alloc stream",
        lambda o: npu.caching_allocator_alloc(8, stream=1),
        "stream",
    ),
    (
        "caching_allocator_alloc device",
        lambda o: npu.caching_allocator_alloc(8, device=F),
        "device",
    ),  # type: ignore[arg-type]
    ("caching_allocator_delete", lambda o: npu.caching_allocator_delete(F), "ptr"),  # type: ignore[arg-type]
    ("caching_allocator", lambda o: npu.caching_allocator(stream=1), "stream"),
    ("caching_allocator device", lambda o: npu.caching_allocator(device=F), "device"),  # type: ignore[arg-type]
    (
        "set_per_process_memory_fraction",
        lambda o: npu.set_per_process_memory_fraction("1"),
        "fraction",
    ),  # type: ignore[arg-type]
    (
        "set_per_process_memory_fraction device",
        lambda o: npu.set_per_process_memory_fraction(1.0, F),
        "device",
    ),  # type: ignore[arg-type]
    ("get_per_process_memory_fraction", lambda o: npu.get_per_process_memory_fraction(F), "device"),  # type: ignore[arg-type]
    ("record_memory_history", lambda o: npu.record_memory_history(1), "enabled"),  # type: ignore[arg-type]
    ("dump_snapshot", lambda o: npu.dump_snapshot(F), "filename"),  # type: ignore[arg-type]
    # ---- sync-debug mode
    ("set_sync_debug_mode", lambda o: npu.set_sync_debug_mode(F), "debug_mode"),  # type: ignore[arg-type]
    ("sync_debug_mode", lambda o: npu.sync_debug_mode(True), "debug_mode"),
    # ---- kernels
    ("ObjectCode", lambda o: npu.ObjectCode(F), "source"),  # type: ignore[arg-type]
    ("ObjectCode lazy", lambda o: npu.ObjectCode(b"x", lazy=1), "lazy"),  # type: ignore[arg-type]
    ("ObjectCode kernel_type", lambda o: npu.ObjectCode(b"x", kernel_type=1), "kernel_type"),  # type: ignore[arg-type]
    ("ObjectCode.from_file", lambda o: npu.ObjectCode.from_file(F), "path"),  # type: ignore[arg-type]
    ("ObjectCode.from_bytes", lambda o: npu.ObjectCode.from_bytes(F), "data"),  # type: ignore[arg-type]
    ("ObjectCode.get_kernel", lambda o: npu.ObjectCode.get_kernel(None, F), "name"),  # type: ignore[arg-type]
    ("ObjectCode.close", lambda o: npu.ObjectCode.close(None, 1), "positional"),  # type: ignore[arg-type, call-arg]
    ("ObjectCode.ensure_current", lambda o: npu.ObjectCode.ensure_current(None, 1), "positional"),  # type: ignore[arg-type, call-arg]
    ("Stream.ensure_current", lambda o: o.s.ensure_current(1), "positional"),  # type: ignore[call-arg]
    ("Event.ensure_current", lambda o: o.ev.ensure_current(1), "positional"),  # type: ignore[call-arg]
    ("Event.raise_closed", lambda o: o.ev.raise_closed(1), "positional"),  # type: ignore[call-arg]
    ("Stream.keep_alive", lambda o: o.s.keep_alive(1, 2), "positional"),  # type: ignore[call-arg]
    ("Stream.make_inert", lambda o: o.s.make_inert(1, 2), "positional"),  # type: ignore[call-arg]
    ("Event.make_inert", lambda o: o.ev.make_inert(1, 2), "positional"),  # type: ignore[call-arg]
    ("ObjectCode.make_inert", lambda o: npu.ObjectCode.make_inert(None, 1, 2), "positional"),  # type: ignore[arg-type, call-arg]
    ("Kernel", lambda o: npu.Kernel(1), "positional"),  # type: ignore[call-arg]
    ("Kernel.param_list", lambda o: npu.Kernel.param_list(None, 1), "positional"),  # type: ignore[arg-type, call-arg]
    ("LaunchConfig", lambda o: npu.LaunchConfig(F), "blocks"),  # type: ignore[arg-type]
    ("LaunchConfig timeout_us", lambda o: npu.LaunchConfig(timeout_us="1"), "timeout_us"),  # type: ignore[arg-type]
    ("launch", lambda o: npu.launch(1, npu.LaunchConfig(), None), "stream"),  # type: ignore[arg-type]
    ("launch config", lambda o: npu.launch(o.s, 1, None), "config"),  # type: ignore[arg-type]
    ("reduce_async", lambda o: npu.reduce_async(o.dev, F), "src"),  # type: ignore[arg-type]
    ("reduce_async dst", lambda o: npu.reduce_async(F, o.dev), "dst"),  # type: ignore[arg-type]
    ("reduce_async op", lambda o: npu.reduce_async(o.dev, o.dev, op=1), "op"),  # type: ignore[arg-type]
    ("reduce_async nbytes", lambda o: npu.reduce_async(o.dev, o.dev, nbytes=F), "nbytes"),  # type: ignore[arg-type]
    ("random_async", lambda o: npu.random_async(F, seed=1, counter=o.dev), "out"),  # type: ignore[arg-type]
    ("random_async seed", lambda o: npu.random_async(o.dev, seed=F, counter=o.dev), "seed"),  # type: ignore[arg-type]
    ("RandomGenerator", lambda o: npu.RandomGenerator(F), "seed"),  # type: ignore[arg-type]
    ("RandomGenerator.uniform", lambda o: npu.RandomGenerator.uniform(o.gen, F), "out"),  # type: ignore[arg-type]
    ("RandomGenerator.normal", lambda o: npu.RandomGenerator.normal(o.gen, F), "out"),  # type: ignore[arg-type]
    (
        "RandomGenerator.truncated_normal",
        lambda o: npu.RandomGenerator.truncated_normal(o.gen, F),  # type: ignore[arg-type]
        "out",
    ),
    ("RandomGenerator.dropout_mask", lambda o: o.gen.dropout_mask(F), "out"),  # type: ignore[arg-type]
    ("RandomGenerator.offset", lambda o: o.gen.offset(1), "positional"),  # type: ignore[call-arg]
    ("RandomGenerator.close", lambda o: o.gen.close(1), "positional"),  # type: ignore[call-arg]
    ("mock.register_kernel", lambda o: mock.register_kernel("k", F, ()), "fn"),  # type: ignore[arg-type]
    ("mock.unregister_kernel", lambda o: mock.unregister_kernel(F), "name"),  # type: ignore[arg-type]
]

#: Public callables that take no arguments: an argument is a TypeError from Python.
NO_ARGS = {
    "backend_info",
    "current_context",
    "current_device",
    "device_count",
    "empty_cache",
    "finalize",
    "forget_thread_context",
    "host_memory_stats",
    "memory_snapshot",
    "get_soc_version",
    "get_sync_debug_mode",
    "host_memory_allocated",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "is_support_inf_nan",
    "ipc_collect",
    "ipc_pid",
}
#: Not entry points that take typed user data: exception classes (any message is
#: fine), the DeviceProperties record and the IPC handles (returned, never built by
#: hand), modules, __version__,
#: device_of (any object: one without a ``device`` attribute gives a no-op guard).
NOT_ENTRY_POINTS = {
    "DeviceProperties",
    "OutOfMemoryError",
    "__version__",
    "device_of",
    "IpcMemHandle",  # made by DeviceBuffer.ipc_handle / unpickling, never by hand
    "IpcEventHandle",  # made by Event.ipc_handle / unpickling
    "KernelAttributes",
    "ParamInfo",
}


@pytest.mark.parametrize("case", WRONG_TYPES, ids=[c[0] for c in WRONG_TYPES])
def test_wrong_type_is_type_error_naming_the_parameter(
    case: tuple[str, Callable[[_Objs], object], str],
) -> None:
    _label, call, param = case
    objs = _Objs()
    try:
        with pytest.raises(TypeError) as info:
            call(objs)
        assert param in str(info.value), f"{info.value!s} does not name {param!r}"
    finally:
        objs.close()
        npu.set_device(0)


@pytest.mark.parametrize("name", sorted(NO_ARGS))
def test_no_argument_entry_points_refuse_arguments(name: str) -> None:
    with pytest.raises(TypeError):
        getattr(npu, name)(object())


def test_every_public_entry_point_is_covered() -> None:
    """Every function, class and public method reachable from ``pyacl_rt.__all__`` is
    in WRONG_TYPES (or takes no argument)."""
    import inspect
    import types

    covered = {c[0].split(" ")[0] for c in WRONG_TYPES}
    missing = []
    for name in npu.__all__:
        obj = getattr(npu, name)
        if name in NOT_ENTRY_POINTS or name in NO_ARGS:
            continue
        if isinstance(obj, type) and issubclass(obj, BaseException):
            continue
        if isinstance(obj, types.ModuleType):
            continue
        if name not in covered:
            missing.append(name)
        if isinstance(obj, type):
            for meth, fn in vars(obj).items():
                if meth.startswith("_") or not callable(getattr(obj, meth)):
                    continue
                if isinstance(fn, property) or meth in ("npu_stream", "view", "soc_name"):
                    continue  # properties and aliases of covered methods
                if f"{name}.{meth}" not in covered:
                    params = list(inspect.signature(getattr(obj, meth)).parameters)
                    missing.append(f"{name}.{meth}{params}")
    assert not missing, f"entry points without a wrong-type case: {missing}"
