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
from pyacl_rt import _args


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
        ("device()", lambda: npu.device.device(i(0)).__enter__()),
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
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
    npu.synchronize(0)
    npu.set_device(0)
    assert not failures, "\n".join(failures)
