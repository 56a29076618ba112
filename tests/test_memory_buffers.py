"""pyacl_rt._memory.buffers: DeviceBuffer / HostBuffer lifetime, bad sizes, views,
zero-copy exports, use after close, no leaks (native backend)."""

from __future__ import annotations

import ctypes
import gc
import re
import sys
import threading
import weakref
from typing import Any

import numpy as np
import pytest

from pyacl_rt import _device as D
from pyacl_rt import _memory as M
from pyacl_rt import _stream as S
from pyacl_rt import errors
from pyacl_rt.mock import mock_control

# These tests pin down the native backend (one aclrtMalloc per buffer, ordered free);
# the caching allocator has its own tests (tests/test_allocator.py).
pytestmark = pytest.mark.usefixtures("native_allocator")


def allocations(device: int = -1) -> int:
    return mock_control().stat("allocations", device)


def host_allocations() -> int:
    return mock_control().stat("host_allocations")


# ------------------------------------------------------------- DeviceBuffer
def test_device_buffer_alloc_close() -> None:
    base = allocations(0)
    buf = M.DeviceBuffer(1000, device=0)
    assert allocations(0) == base + 1
    assert buf.nbytes == len(buf) == 1000
    assert isinstance(buf.ptr, int) and buf.ptr != 0
    assert buf.device == D.Device(0) and buf.device_index == 0
    assert not buf.closed and not buf.is_view and buf.base is None
    assert "1000 bytes" in repr(buf)
    assert M.memory_allocated(0) >= 1000
    buf.close()
    assert allocations(0) == base
    assert buf.closed and "closed" in repr(buf)
    buf.close()  # idempotent
    assert allocations(0) == base


def test_context_manager_and_gc_finalizer() -> None:
    base = allocations(1)
    with M.DeviceBuffer(64, device=1) as buf:
        assert allocations(1) == base + 1
    assert buf.closed and allocations(1) == base
    buf2 = M.DeviceBuffer(64, device=1)
    assert allocations(1) == base + 1
    del buf2
    gc.collect()
    assert allocations(1) == base


def test_mem_stats_visible_in_mock_and_python() -> None:
    mc = mock_control()
    before = mc.counts(2)
    py_before = M.memory_allocated(2)
    M.reset_peak_memory_stats(2)
    bufs = [M.DeviceBuffer(100 * (i + 1), device=2) for i in range(3)]
    after = mc.counts(2)
    assert after["allocations"] == before["allocations"] + 3
    assert after["bytes"] >= before["bytes"] + 600
    assert M.memory_allocated(2) == M.memory_reserved(2) == py_before + 600
    stats = M.memory_stats(2)
    assert stats["allocated_bytes.all.current"] == py_before + 600
    assert stats["total_bytes"] >= stats["free_bytes"] > 0
    bufs[2].close()
    assert M.memory_allocated(2) == py_before + 300
    assert M.max_memory_allocated(2) == M.max_memory_reserved(2) == py_before + 600
    M.reset_peak_memory_stats(2)
    assert M.max_memory_allocated(2) == py_before + 300
    for b in bufs:
        b.close()
    assert mc.counts(2)["allocations"] == before["allocations"]
    assert M.memory_allocated(2) == py_before
    h = M.HostBuffer(48)
    assert M.host_memory_allocated() >= 48
    h.close()
    M.empty_cache()


def test_buffers_cannot_be_pickled_or_copied() -> None:
    import copy
    import pickle

    with M.DeviceBuffer(8, device=0) as buf, M.HostBuffer(8) as h:
        for obj in (buf, buf[0:2], h):
            with pytest.raises(TypeError, match="cannot be pickled"):
                pickle.dumps(obj)
            with pytest.raises(TypeError, match="cannot be pickled"):
                copy.copy(obj)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, None])
def test_bad_sizes_refused(bad: Any) -> None:
    base = allocations()
    with pytest.raises((TypeError, ValueError), match="nbytes"):
        M.DeviceBuffer(bad)
    with pytest.raises((TypeError, ValueError), match="nbytes"):
        M.HostBuffer(bad)
    assert allocations() == base
    with pytest.raises(ValueError, match="nbytes must be > 0"):
        M.HostBuffer(0)  # pinned host memory: no zero-size allocations (DeviceBuffer has)


def test_zero_size_device_buffer() -> None:
    """Issue 7: ``DeviceBuffer(0)`` (an empty batch) raised ValueError. It is a
    zero-size buffer now: nothing is allocated (no aclrtMalloc(0)), ``ptr`` is 0,
    copies / memsets / slices of 0 bytes work, closing it frees nothing."""
    mc = mock_control()
    base = allocations()
    mc.inject_fault("aclrtMalloc", 207001, nth=0)  # any aclrtMalloc call fails
    try:
        empty = M.DeviceBuffer(0, device=0)
    finally:
        hits = mc.fault_hits("aclrtMalloc")
        mc.clear_faults()
    assert hits == 0  # aclrtMalloc was not called
    assert empty.nbytes == 0 and len(empty) == 0 and empty.ptr == 0 and not empty.closed
    assert allocations() == base
    s = S.Stream(0)
    h = M.HostBuffer(16)
    other = M.DeviceBuffer(16, device=0)
    M.copy(empty, b"")
    M.copy(empty, np.zeros(0, np.uint8), stream=s, non_blocking=True)
    M.copy(empty, h, 0)
    M.copy(other, empty)  # all of src = 0 bytes
    M.copy(h, empty, dst_offset=16)
    M.copy_2d(empty, 4, other, 4, 0, 4)
    M.memcpy_async(empty, other, 0, s)
    M.memcpy_async(other, empty, 0, s)
    M.memset(empty, 7)
    empty.fill(1)
    assert empty.copy_to_host() == bytearray()
    assert empty[0:0].nbytes == 0 and empty[:].ptr == 0
    with pytest.raises(ValueError, match="nbytes 1 runs past the end of dst"):
        M.copy(empty, b"x", 1)
    with pytest.raises(IndexError, match="out of bounds"):
        empty[0:1]
    s.synchronize()
    assert "0 bytes" in repr(empty)
    empty.close()
    assert empty.closed
    with pytest.raises(errors.ObjectClosedError):
        empty.ptr  # noqa: B018
    with M.DeviceBuffer(np.int64(0), device=1) as e1:
        assert e1.device_index == 1
    for obj in (other, h, s):
        obj.close()
    assert allocations() == base


@pytest.mark.parametrize(
    "data", [np.zeros(4, np.uint8), np.zeros((2, 2)), b"abcd", bytearray(4), [1, 2]]
)
def test_buffer_of_data_is_a_clear_type_error(data: Any) -> None:
    """Issue 7: ``DeviceBuffer(ndarray)`` gave a confusing error: the argument is a size;
    the message says so and how to copy the data instead."""
    for cls in (M.DeviceBuffer, M.HostBuffer):
        with pytest.raises(TypeError, match=r"nbytes is a size in bytes, not data .*arr\.nbytes"):
            cls(data)
    with M.DeviceBuffer(np.array(8), device=0) as buf:  # a 0-d integer array is a size
        assert buf.nbytes == 8


def test_bad_policy_and_device() -> None:
    with pytest.raises(ValueError, match="policy"):
        M.DeviceBuffer(8, policy=-1)
    with pytest.raises(TypeError, match="policy"):
        M.DeviceBuffer(8, policy="huge")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidDeviceError):
        M.DeviceBuffer(8, device=99)


def test_out_of_memory_is_memory_error() -> None:
    with pytest.raises(MemoryError) as info:
        M.DeviceBuffer(2**62, device=0)
    assert isinstance(info.value, errors.AclOutOfMemoryError)
    assert info.value.function == "aclrtMalloc"


def test_injected_malloc_fault_leaks_nothing() -> None:
    mc = mock_control()
    mc.inject_fault("aclrtMalloc", 207001, nth=1)
    try:
        with pytest.raises(errors.AclError) as info:
            M.DeviceBuffer(8, device=0)
        assert info.value.code == 207001
    finally:
        mc.clear_faults()
    mc.inject_fault("aclrtMallocHost", 207001, nth=1)
    try:
        with pytest.raises(MemoryError):
            M.HostBuffer(8)
    finally:
        mc.clear_faults()


# -------------------------------------------------------------------- views
def test_views_share_memory_and_keep_parent_alive() -> None:
    base = allocations(0)
    buf = M.DeviceBuffer(100, device=0)
    data = np.arange(100, dtype=np.uint8)
    M.copy(buf, data)
    v = buf[10:30]
    assert v.is_view and v.base is buf and v.nbytes == 20
    assert v.ptr == buf.ptr + 10
    vv = v[5:]
    assert vv.ptr == buf.ptr + 15 and vv.nbytes == 15 and vv.base is buf
    assert bytes(v.copy_to_host()) == data[10:30].tobytes()
    v.fill(0xAB)
    out = np.frombuffer(buf.copy_to_host(), np.uint8)
    assert (out[10:30] == 0xAB).all() and (out[:10] == data[:10]).all()
    assert (out[30:] == data[30:]).all()
    # negative indices follow Python slicing; nothing is clamped (see test_slice_bounds)
    assert buf[-10:].nbytes == 10 and buf[90:100].nbytes == 10 and buf[50:50].nbytes == 0
    # the view keeps the allocation alive
    wr = weakref.ref(buf)
    del buf
    gc.collect()
    assert wr() is not None and allocations(0) == base + 1
    assert bytes(vv.copy_to_host()) == bytes(out[15:30])
    # closing a view closes only that view
    v.close()
    assert v.closed and not vv.closed
    del v, vv
    gc.collect()
    assert wr() is None and allocations(0) == base


def test_view_rules() -> None:
    with M.DeviceBuffer(10, device=0) as buf:
        with pytest.raises(ValueError, match="step 1"):
            buf[::2]
        with pytest.raises(TypeError, match="slices"):
            buf[3]  # type: ignore[call-overload]
        v = buf[2:4]
    assert v.closed  # parent closed: its views are unusable
    with pytest.raises(errors.ObjectClosedError):
        v.ptr  # noqa: B018
    with pytest.raises(errors.ObjectClosedError):
        M.copy(v, b"ab")


def test_use_after_close_refused() -> None:
    buf = M.DeviceBuffer(16, device=0)
    other = M.DeviceBuffer(16, device=0)
    h = M.HostBuffer(16)
    s = S.Stream(0)
    buf.close()
    h.close()
    for call in (
        lambda: buf.ptr,
        lambda: buf[0:1],
        lambda: buf.fill(0),
        lambda: buf.copy_to_host(),
        lambda: buf.copy_from_host(b"x" * 16),
        lambda: M.copy(other, buf),
        lambda: M.copy(buf, other),
        lambda: M.memset(buf, 1),
        lambda: M.memcpy_async(buf, other, 16, s),
        lambda: M.memcpy_async(other, buf, 16, s),
        lambda: M.memcpy_async(other, h, 16, s),
        lambda: h.ptr,
        lambda: h.memoryview(),
        lambda: np.asarray(h),
        lambda: M.copy(h, other),
        lambda: M.copy_2d(buf, 4, other, 4, 4, 4),
    ):
        with pytest.raises(errors.ObjectClosedError, match="closed"):
            call()
    other.close()
    s.close()


def test_device_buffer_is_not_host_accessible() -> None:
    """QA: numpy.asarray(buf) / bytes(buf) failed with the misleading "DeviceBuffer
    indices must be slices"; now a TypeError says what to do instead."""
    buf = M.DeviceBuffer(8, device=0)
    for call in (
        lambda: np.asarray(buf),
        lambda: np.array(buf),
        lambda: bytes(buf),
        lambda: list(buf),
        lambda: buf[0],
    ):
        with pytest.raises(TypeError, match=r"device memory.*copy_to_host"):
            call()
    with pytest.raises(TypeError, match="indices must be slices"):
        buf["a"]  # type: ignore[index]
    buf.fill(3)
    assert buf.copy_to_host() == bytearray(b"\x03" * 8)  # the documented way
    buf.close()


def test_closed_stream_refused() -> None:
    a = M.DeviceBuffer(16, device=0)
    b = M.DeviceBuffer(16, device=0)
    s = S.Stream(0)
    s.close()
    with pytest.raises(errors.ObjectClosedError):
        M.memcpy_async(a, b, 16, s)
    with pytest.raises(errors.ObjectClosedError):
        M.copy(a, b, stream=s)
    a.close()
    b.close()


# --------------------------------------------------------------- HostBuffer
def test_host_buffer_zero_copy_numpy_and_memoryview() -> None:
    base = host_allocations()
    h = M.HostBuffer(64)
    assert host_allocations() == base + 1
    assert h.nbytes == len(h) == 64 and isinstance(h.ptr, int)
    arr = np.asarray(h)
    assert arr.dtype == np.uint8 and arr.shape == (64,)
    assert arr.ctypes.data == h.ptr  # zero-copy
    arr[:] = np.arange(64, dtype=np.uint8)
    mv = h.memoryview()
    assert mv.format == "B" and not mv.readonly and mv.nbytes == 64
    assert mv[5] == 5
    mv[6] = 200
    assert arr[6] == 200
    assert h.tobytes()[6] == 200 and bytes(h)[5] == 5
    f32 = h.numpy(np.float32)
    assert f32.shape == (16,) and f32.ctypes.data == h.ptr
    assert np.asarray(h, dtype=np.int16).dtype == np.int16
    copied = np.array(h, copy=True)
    assert copied.ctypes.data != h.ptr
    del arr, mv, f32, copied
    h.close()
    assert host_allocations() == base


def test_memoryview_of_host_buffer() -> None:
    """``memoryview(h)`` is zero-copy on every version (was a TypeError on 3.11): the C
    buffer protocol of HostBuffer's C base (_memcore.HostBase), which counts exports
    explicitly.
    The view's ``obj`` is the HostBuffer."""
    h = M.HostBuffer(8)
    mv = memoryview(h)  # type: ignore[arg-type]
    assert mv.nbytes == 8 and mv.format == "B" and not mv.readonly
    mv[0] = 42
    assert np.asarray(h)[0] == 42
    assert np.frombuffer(mv, np.uint8).ctypes.data == h.ptr  # zero-copy
    with pytest.raises(BufferError, match="1 exported"):
        h.close()
    mv2 = memoryview(h)  # type: ignore[arg-type]
    with pytest.raises(BufferError, match="2 exported"):
        h.close()
    mv.release()
    mv2.release()
    assert h.export_count() == 0
    h.close()
    with pytest.raises(errors.ObjectClosedError, match="closed"):
        memoryview(h)  # type: ignore[arg-type]
    with M.HostBuffer(4) as h2:
        assert bytes(memoryview(h2)) == h2.tobytes()  # type: ignore[arg-type]


def test_host_buffer_close_refused_while_exported() -> None:
    base = host_allocations()
    h = M.HostBuffer(32)
    arr = np.asarray(h)
    mv = h.memoryview()
    with pytest.raises(BufferError, match="2 exported"):
        h.close()
    del arr
    with pytest.raises(BufferError, match="1 exported"):
        h.close()
    mv.release()
    h.close()
    h.close()
    assert host_allocations() == base


def test_slice_bounds() -> None:
    """Issue 7: ``buf[a:b]`` past the end was clamped (``buf[90:200]`` of 100 bytes gave
    10 bytes), hiding off-by-N bugs. Bounds past either end, and ``b < a``, now raise
    IndexError naming them; in-range slices, negative bounds and empty views work."""
    with M.DeviceBuffer(100, device=0) as buf:
        assert buf[:].nbytes == 100 and buf[100:].nbytes == 0 and buf[:0].nbytes == 0
        assert buf[-10:].nbytes == 10 and buf[-100:-90].nbytes == 10
        assert buf[np.int64(10) : np.int64(20)].nbytes == 10
        v = buf[10:30]
        assert v[0:20].nbytes == 20
        for bad, shown in (
            (slice(90, 200), "[90:200]"),
            (slice(0, 101), "[0:101]"),
            (slice(101, None), "[101:]"),
            (slice(-101, None), "[-101:]"),
            (slice(50, 40), "[50:40]"),
            (slice(None, -101), "[:-101]"),
        ):
            with pytest.raises(IndexError, match=re.escape(f"slice {shown} is out of bounds")):
                buf[bad]
        with pytest.raises(IndexError, match=r"\[0:21\].*DeviceBuffer of 20 bytes"):
            v[0:21]  # a view's bounds are its own
        with pytest.raises(TypeError, match="slice start must be an int"):
            buf[1.0:2]  # type: ignore[misc]


def test_host_buffer_exports_counted_without_refcounts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 7: exports were counted with ``sys.getrefcount`` arithmetic. CPython 3.14
    does not count borrowed stack references (the local variable holding the object,
    getrefcount's own argument), so the count came out low: with a live memoryview
    ``close()`` saw 0 exports and freed the memory under it. Simulated here (those two
    references not counted, as on 3.14): exports are now counted explicitly by the
    buffer protocol, whatever getrefcount says."""
    real = sys.getrefcount
    monkeypatch.setattr(sys, "getrefcount", lambda obj: real(obj) - 2)
    base = host_allocations()
    h = M.HostBuffer(32)
    mv = memoryview(h)  # type: ignore[arg-type]
    with pytest.raises(BufferError, match="1 exported"):
        h.close()
    assert not h.closed and host_allocations() == base + 1
    mv[0] = 5  # still valid memory
    # numpy arrays, slices of views and views of views are exports too, exactly once
    arr = np.asarray(h)
    sub = mv[4:8]
    arr2 = h.numpy(np.uint32)
    ctype = (ctypes.c_char * 32).from_buffer(h)  # type: ignore[arg-type]
    assert h.export_count() == 4
    with pytest.raises(BufferError, match="4 exported"):
        h.close()
    del arr, arr2, ctype
    gc.collect()
    assert h.export_count() == 1  # mv (and sub, which shares its export)
    mv.release()
    assert h.export_count() == 1
    sub.release()
    assert h.export_count() == 0
    h.close()
    assert host_allocations() == base


def test_host_buffer_gc_with_live_export_keeps_memory() -> None:
    base = host_allocations()
    h = M.HostBuffer(32)
    arr = np.asarray(h)
    arr[:] = 7
    del h
    gc.collect()
    assert host_allocations() == base + 1  # still used by arr
    assert (arr == 7).all()  # memory still valid
    arr[0] = 1
    del arr
    gc.collect()
    assert host_allocations() == base


def test_host_buffer_in_thread_without_device() -> None:
    out: list[Any] = []

    def worker() -> None:
        h = M.HostBuffer(16)
        np.asarray(h)[:] = 3
        d = M.DeviceBuffer(16, device=1)
        M.copy(d, h)
        out.append(bytes(d.copy_to_host()))
        d.close()
        h.close()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert out == [b"\x03" * 16]
