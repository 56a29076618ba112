"""pyacl_rt._memory.args: every copy/memset argument checked (and refused with a typed
error) before a pointer reaches C; zero-size operations; read-only targets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pyacl_rt import _memory as M
from pyacl_rt import _stream as S
from pyacl_rt import errors
from pyacl_rt.mock import mock_control

# These tests pin down the native backend (one aclrtMalloc per buffer, ordered free);
# the caching allocator has its own tests (tests/test_allocator.py).
pytestmark = pytest.mark.usefixtures("native_allocator")


# ---------------------------------------------------- refused before C
_COPY_FUNCS = (
    "aclrtMemcpy",
    "aclrtMemcpyAsync",
    "aclrtMemcpy2d",
    "aclrtMemcpy2dAsync",
    "aclrtMemset",
    "aclrtMemsetAsync",
)


class Trap:
    """Arms a fault on every copy/memset entry point: a call reaching C would fail with
    507899 and count a hit."""

    def arm(self) -> None:
        for f in _COPY_FUNCS:
            mock_control().inject_fault(f, 507899, nth=0)

    def disarm(self) -> None:
        mock_control().clear_faults()

    def __call__(self) -> int:
        mc = mock_control()
        return sum(mc.fault_hits(f) for f in _COPY_FUNCS)


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    t.arm()
    try:
        yield t
    finally:
        t.disarm()


def test_hostile_arguments_never_reach_c(trap: Trap) -> None:
    trap.disarm()
    dev = M.DeviceBuffer(64, device=0)
    dev2 = M.DeviceBuffer(64, device=0)
    h = M.HostBuffer(64)
    arr = np.zeros(64, np.uint8)
    s = S.Stream(0)
    bad_calls: list[tuple[Any, type[BaseException], str]] = [
        (lambda: M.copy(dev, arr, 65), ValueError, "nbytes"),
        (lambda: M.copy(dev, arr, -1), ValueError, "nbytes"),
        (lambda: M.copy(dev, arr, 2**64), ValueError, "nbytes"),
        (lambda: M.copy(dev, arr, 1.0), TypeError, "nbytes"),  # type: ignore[arg-type]
        (lambda: M.copy(dev, arr, True), TypeError, "nbytes"),
        (lambda: M.copy(dev, arr, 10, dst_offset=60), ValueError, "dst"),
        (lambda: M.copy(dev, arr, 10, src_offset=60), ValueError, "src"),
        (lambda: M.copy(dev, arr, 1, dst_offset=-1), ValueError, "dst_offset"),
        (lambda: M.copy(dev, arr, 1, src_offset=65), ValueError, "src_offset"),
        (lambda: M.copy(dev, arr, 1, dst_offset=2**70), ValueError, "dst_offset"),
        (lambda: M.copy(dev, np.zeros(65, np.uint8)), ValueError, "src has 65 bytes"),
        (lambda: M.copy(arr, dev[0:10], dst_offset=60), ValueError, "src has 10"),
        (lambda: M.copy(dev, 12345), TypeError, "src must be"),
        (lambda: M.copy("abc", dev), TypeError, "dst must be"),
        (lambda: M.copy(dev, arr, stream=object()), TypeError, "stream"),  # type: ignore[arg-type]
        (lambda: M.copy(dev, arr, stream=S.default_stream(1)), ValueError, "device 1"),
        (lambda: M.copy(dev, np.zeros((8, 8), np.uint8)[:, ::2]), ValueError, "contiguous"),
        (lambda: M.copy(np.zeros((8, 16), np.uint8).T, dev), ValueError, "contiguous"),
        (lambda: M.memcpy_async(dev, dev2, 65, s), ValueError, "nbytes"),
        (lambda: M.memcpy_async(dev, dev2[0:8], 9, s), ValueError, "src"),
        (lambda: M.memcpy_async(dev[0:8], dev2, 9, s), ValueError, "dst"),
        (lambda: M.memcpy_async(dev, dev2, -1, s), ValueError, "nbytes"),
        (lambda: M.memcpy_async(dev, dev2, "1", s), TypeError, "nbytes"),  # type: ignore[arg-type]
        (lambda: M.memcpy_async(dev, arr, 1, s), TypeError, "src"),  # type: ignore[arg-type]
        (lambda: M.memcpy_async(arr, dev, 1, s), TypeError, "dst"),  # type: ignore[arg-type]
        (lambda: M.memcpy_async(dev, dev2, 1, None), TypeError, "stream"),  # type: ignore[arg-type]
        (lambda: M.memcpy_async(dev, dev2, 1, S.default_stream(1)), ValueError, "device 1"),
        (lambda: M.memset(dev, 256), ValueError, "value"),
        (lambda: M.memset(dev, -1), ValueError, "value"),
        (lambda: M.memset(dev, 1.0), TypeError, "value"),  # type: ignore[arg-type]
        (lambda: M.memset(dev, 0, 65), ValueError, "nbytes"),
        (lambda: M.memset(dev, 0, 10, offset=60), ValueError, "nbytes"),
        (lambda: M.memset(dev, 0, offset=65), ValueError, "offset"),
        (lambda: M.memset(dev, 0, offset=-3), ValueError, "offset"),
        (lambda: M.memset(b"abc", 0), TypeError, "read-only"),
        (lambda: M.copy_2d(dev, 8, arr, 8, 9, 2), ValueError, "dpitch"),
        (lambda: M.copy_2d(dev, 16, arr, 8, 9, 2), ValueError, "spitch"),
        (lambda: M.copy_2d(dev, 8, arr, 8, 8, 9), ValueError, "dst"),
        (lambda: M.copy_2d(dev, 8, arr, 9, 8, 8), ValueError, "spitch"),
        (lambda: M.copy_2d(dev, 8, arr, 8, 8, 8, dst_offset=1), ValueError, "dst"),
        (lambda: M.copy_2d(dev, 8, arr, 8, 8, 8, src_offset=1), ValueError, "src"),
        (lambda: M.copy_2d(dev, -8, arr, 8, 8, 8), ValueError, "dpitch"),
        (lambda: M.copy_2d(dev, 8, arr, 8, -1, 8), ValueError, "width"),
        (lambda: M.copy_2d(dev, 8, arr, 8, 8, 2**64), ValueError, "height"),
        (lambda: M.copy_2d(dev, 2**63, arr, 8, 8, 3), ValueError, "dst"),
        (lambda: M.copy_2d(dev, 8, arr, 8, 8, 1, dst_offset=65), ValueError, "dst_offset"),
    ]
    M.copy(dev, bytes(range(64)))
    M.copy(dev2, bytes(range(64, 128)))
    trap.arm()
    for call, exc, text in bad_calls:
        with pytest.raises(exc, match=text):
            call()
    assert trap() == 0
    trap.disarm()
    # nothing was written anywhere
    assert (arr == 0).all()
    assert bytes(dev.copy_to_host()) == bytes(range(64))
    assert bytes(dev2.copy_to_host()) == bytes(range(64, 128))
    dev.close()
    dev2.close()
    h.close()
    s.close()


def test_zero_size_operations_do_not_reach_c(trap: Trap) -> None:
    dev = M.DeviceBuffer(16, device=0)
    s = S.Stream(0)
    M.copy(dev, b"")
    M.copy(dev, b"abc", 0)
    M.memcpy_async(dev, dev, 0, s)
    M.memset(dev, 1, 0)
    M.copy_2d(dev, 4, b"abcd", 4, 0, 4)
    M.copy_2d(dev, 4, b"abcd", 4, 4, 0)
    assert trap() == 0
    dev.close()
    s.close()


def test_zero_size_operations_still_validate_the_stream(trap: Trap) -> None:
    """QA: zero-byte copy / copy_2d / memset returned before looking at ``stream``,
    so stream="junk", a closed stream or one on another device were accepted."""
    dev = M.DeviceBuffer(16, device=0)
    host = M.HostBuffer(16)
    closed = S.Stream(0)
    closed.close()
    other = S.Stream(1)
    zero_ops = [
        lambda st: M.copy(dev, b"", stream=st),
        lambda st: M.copy(dev, b"abc", 0, stream=st),
        lambda st: M.copy(bytearray(4), dev, 0, stream=st),
        lambda st: M.copy_2d(dev, 4, b"abcd", 4, 0, 4, stream=st),
        lambda st: M.copy_2d(dev, 4, b"abcd", 4, 4, 0, stream=st),
        lambda st: M.memset(dev, 1, 0, stream=st),
        lambda st: M.memset(dev[16:16], 1, stream=st),
        lambda st: M.memcpy_async(dev, host, 0, st),
    ]
    host_ops = [  # host-to-host: any device's stream is fine, junk / closed are not
        lambda st: M.copy(host, b"", stream=st),
        lambda st: M.copy_2d(host, 4, b"abcd", 4, 0, 4, stream=st),
        lambda st: M.memset(host, 1, 0, stream=st),
    ]
    for op in zero_ops + host_ops:
        with pytest.raises(TypeError, match="stream must be a Stream"):
            op("junk")
        with pytest.raises(errors.ObjectClosedError, match="closed"):
            op(closed)
    for op in zero_ops:
        if op is zero_ops[-1]:
            continue  # memcpy_async takes a Stream positionally: checked below
        with pytest.raises(ValueError, match="stream is on device 1"):
            op(other)
        op(S.default_stream(0))  # a valid stream: fine
    with pytest.raises(ValueError, match="stream is on device 1"):
        M.memcpy_async(dev, dev, 0, other)
    for op in host_ops:
        op(other)
    assert trap() == 0
    assert not dev.mem.inuse and not host.mem.inuse
    dev.close()
    host.close()
    other.close()


@pytest.mark.parametrize(
    "make",
    [
        lambda: b"x" * 16,
        lambda: memoryview(bytearray(16)).toreadonly(),
        lambda: _readonly_array(),
    ],
    ids=["bytes", "readonly-memoryview", "readonly-numpy"],
)
def test_writes_into_readonly_objects_refused(make: Any, trap: Trap) -> None:
    ro = make()
    dev = M.DeviceBuffer(16, device=0)
    h = M.HostBuffer(16)
    for call in (
        lambda: M.copy(ro, dev),
        lambda: M.copy(ro, h),
        lambda: M.copy(ro, b"y" * 16),
        lambda: dev.copy_to_host(ro),
        lambda: dev.copy_to_host_async(ro),
        lambda: M.copy_2d(ro, 4, dev, 4, 4, 4),
        lambda: M.memset(ro, 0),
    ):
        with pytest.raises(TypeError, match="read-only"):
            call()
    assert trap() == 0
    assert bytes(ro) == bytes(make())
    dev.close()
    h.close()


def _readonly_array() -> np.ndarray[Any, Any]:
    a = np.zeros(16, np.uint8)
    a.flags.writeable = False
    return a


def test_readonly_source_is_fine() -> None:
    ro = _readonly_array() + 5
    ro.flags.writeable = False
    with M.DeviceBuffer(16, device=0) as dev:
        M.copy(dev, ro)
        M.copy(dev, memoryview(b"z" * 16).toreadonly(), 8, dst_offset=8)
        assert bytes(dev.copy_to_host()) == b"\x05" * 8 + b"z" * 8
