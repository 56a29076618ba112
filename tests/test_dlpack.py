"""DLPack: export of DeviceBuffer / HostBuffer (capsules, devices, streams, copies),
pyacl_rt.from_dlpack (views, checks, refusals), lifetime (deleters exactly once, close
refused while exported, finalize) and no leaks (mock counters, tracemalloc)."""

from __future__ import annotations

import datetime
import gc
import threading
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pyacl_rt as npu
from pyacl_rt import _dlpack as DL
from pyacl_rt import _dlpack_c as C
from pyacl_rt import errors
from pyacl_rt.mock import mock_control

# These tests count the runtime's allocations (one aclrtMalloc per buffer): native
# backend. tests/test_allocator.py checks DLPack with the caching allocator.
pytestmark = pytest.mark.usefixtures("native_allocator")


def allocations(device: int = -1) -> int:
    return mock_control().stat("allocations", device)


def host_allocations() -> int:
    return mock_control().stat("host_allocations")


def fields_of(cap: Any) -> tuple[Any, ...]:
    """Consume ``cap`` and return its fields (the tensor is released at once)."""
    handle, fields = C.consume(cap)
    handle.release()
    return fields


class Producer:
    """A DLPack producer over ``target``'s memory (kept alive by the tensor) whose
    deleter calls are counted; ``device`` / dtype / shape are what it claims."""

    def __init__(
        self,
        target: Any,
        device: tuple[int, int] = (1, 0),
        code: int = 1,
        bits: int = 8,
        shape: tuple[int, ...] | None = None,
        flags: int = 0,
        legacy_only: bool = False,
        address: int | None = None,
    ) -> None:
        self.target = target
        self.device = device
        self.code, self.bits, self.flags = code, bits, flags
        self.shape = shape
        self.legacy_only = legacy_only
        self.address = address
        self.released = 0
        self.streams: list[Any] = []

    def _release(self, keep: Any) -> Callable[[], None]:
        def release() -> None:
            self.released += 1
            keep.clear()

        return release

    def _addr(self) -> tuple[int, int]:
        if self.address is not None:
            return self.address, 64
        arr = np.asarray(self.target)
        return arr.ctypes.data, arr.nbytes

    def capsule(self, versioned: bool, stream: Any = None) -> Any:
        self.streams.append(stream)
        addr, n = self._addr()
        shape = self.shape if self.shape is not None else (n,)
        keep = [self.target]
        return C.make_capsule(
            addr, *self.device, shape, self.code, self.bits, 1, self.flags, versioned,
            self._release(keep),
        )  # fmt: skip

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, **kw: Any) -> Any:
        if self.legacy_only and set(kw) - {"stream"}:
            raise TypeError("unexpected keyword argument 'max_version'")
        mv = kw.get("max_version")
        return self.capsule(mv is not None and mv[0] >= 1, kw.get("stream"))


# ------------------------------------------------------------------ export
@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3), (0, 8), (2, 0)])
def test_capsule_names_and_fields(max_version: Any) -> None:
    with npu.DeviceBuffer(48, device=1) as d:
        cap = d.__dlpack__(max_version=max_version)
        versioned = max_version is not None and max_version[0] >= 1
        assert ('"dltensor_versioned"' if versioned else '"dltensor"') in repr(cap)
        data, off, kind, dev, shape, strides, code, bits, lanes, flags, ver = fields_of(cap)
        assert (data + off, kind, dev) == (d.ptr, 12, 1)
        assert (shape, strides, code, bits, lanes, flags) == ((48,), (1,), 1, 8, 1, 0)
        assert ver == ((1, 0) if versioned else None)
        assert d.__dlpack_device__() == (DL.NPU_DEVICE_TYPE, 1) == (12, 1)
    assert C.live_exports() == 0


def test_host_buffer_numpy_from_dlpack_zero_copy() -> None:
    with npu.HostBuffer(32) as h:
        assert h.__dlpack_device__() == (1, 0)
        a = np.from_dlpack(h)
        assert a.dtype == np.uint8 and a.shape == (32,)
        assert a.ctypes.data == h.ptr
        a[:4] = [1, 2, 3, 4]
        assert h.tobytes()[:4] == b"\x01\x02\x03\x04"
        np.asarray(h)[4] = 9
        assert a[4] == 9
        del a
    assert C.live_exports() == 0


def test_numpy_array_keeps_host_memory_after_buffer_deleted() -> None:
    base = host_allocations()
    h = npu.HostBuffer(64)
    h.fill(7)
    a = np.from_dlpack(h)
    ref = weakref.ref(h)
    del h
    gc.collect()
    assert ref() is not None  # the export holds the HostBuffer
    assert host_allocations() == base + 1
    assert (a == 7).all()
    a[:] = 1  # still valid, writable memory
    del a
    gc.collect()
    assert ref() is None and host_allocations() == base and C.live_exports() == 0


@pytest.mark.parametrize("kind", ["device", "host"])
def test_close_refused_while_exported(kind: str) -> None:
    base = allocations() + host_allocations()
    buf: Any = npu.DeviceBuffer(16, device=0) if kind == "device" else npu.HostBuffer(16)
    cap = buf.__dlpack__(max_version=(1, 0))
    with pytest.raises(BufferError, match="1 DLPack export"):
        buf.close()
    assert not buf.closed
    buf.fill(3)  # still usable
    del cap  # never consumed: the capsule's destructor calls the deleter
    assert C.live_exports() == 0 and buf.mem.exports == []
    buf.close()
    assert allocations() + host_allocations() == base


def test_view_export_keeps_the_allocation_alive() -> None:
    base = allocations(0)
    d = npu.DeviceBuffer(64, device=0)
    d.fill(0)
    v = d[16:32]
    cap = v.__dlpack__()
    handle, fields = C.consume(cap)
    assert fields[0] + fields[1] == d.ptr + 16 and fields[4] == (16,)
    v.close()
    del v, d
    gc.collect()
    assert allocations(0) == base + 1  # the tensor still holds the parent
    with pytest.raises(BufferError):
        fields_of(cap)  # already consumed
    handle.release()
    gc.collect()
    assert allocations(0) == base and C.live_exports() == 0


def test_empty_device_buffer_round_trip() -> None:
    base = allocations(0)
    with npu.DeviceBuffer(0, device=0) as d:
        f = fields_of(d.__dlpack__())
        assert (f[0], f[4]) == (0, (0,))  # no memory: a NULL data pointer
        v = npu.from_dlpack(d)
        assert isinstance(v, npu.DeviceBuffer) and v.nbytes == 0 and v.ptr == 0
        npu.copy(v, b"")  # 0-byte operations work
        v.close()
    assert allocations(0) == base and C.live_exports() == 0


def test_closed_buffer_cannot_be_exported() -> None:
    d = npu.DeviceBuffer(8, device=0)
    v = d[0:4]
    d.close()
    for obj in (d, v):
        with pytest.raises(errors.ObjectClosedError):
            obj.__dlpack__()
        with pytest.raises(errors.ObjectClosedError):
            obj.__dlpack_device__()
    h = npu.HostBuffer(8)
    h.close()
    with pytest.raises(errors.ObjectClosedError):
        np.from_dlpack(h)


def test_bad_export_arguments() -> None:
    with npu.DeviceBuffer(8, device=0) as d, npu.HostBuffer(8) as h:
        with pytest.raises(TypeError, match="max_version"):
            d.__dlpack__(max_version=1)
        with pytest.raises(TypeError, match="copy"):
            d.__dlpack__(copy="yes")
        with pytest.raises(TypeError, match="stream"):
            d.__dlpack__(stream=True)
        with pytest.raises(TypeError, match="stream"):
            d.__dlpack__(stream=1.5)
        with pytest.raises(ValueError, match="stream"):
            d.__dlpack__(stream=-2)
        with pytest.raises(ValueError, match="device 1"):
            d.__dlpack__(stream=npu.default_stream(1))
        with pytest.raises(BufferError, match="HostBuffer is host memory"):
            h.__dlpack__(stream=5)
        with pytest.raises(TypeError, match="dl_device"):
            d.__dlpack__(dl_device=(12,))
        with pytest.raises(BufferError, match="kDLCUDA"):
            d.__dlpack__(dl_device=(2, 0))
        with pytest.raises(errors.InvalidDeviceError):
            d.__dlpack__(dl_device=(12, 99))
        h.__dlpack__(stream=-1)  # no synchronization: fine for host memory
        d.__dlpack__(stream=-1)
    assert C.live_exports() == 0


def test_numpy_refuses_device_memory_clearly() -> None:
    with npu.DeviceBuffer(8, device=0) as d, pytest.raises((BufferError, RuntimeError)):
        np.from_dlpack(d)  # numpy: unsupported device; nothing exported remains
    assert C.live_exports() == 0


# ------------------------------------------------------------ copy / dl_device
def test_export_to_host_copies() -> None:
    with npu.DeviceBuffer(16, device=0) as d:
        d.fill(5)
        a = np.from_dlpack(d, device="cpu")  # numpy asks dl_device=(1, 0)
        assert (a == 5).all() and a.shape == (16,)
        d.fill(6)
        assert (a == 5).all()  # a copy
        with pytest.raises(BufferError, match="copy=False"):
            d.__dlpack__(dl_device=(1, 0), copy=False)
        cap = d.__dlpack__(dl_device=(1, 0), max_version=(1, 0))
        f = fields_of(cap)
        assert f[2] == 1 and f[9] == DL.FLAG_IS_COPIED
        d.close()  # the copy is not an export of d
        assert (a == 5).all()
        del a
    gc.collect()
    assert C.live_exports() == 0


def test_export_copy_true_and_other_device() -> None:
    base0, base1 = allocations(0), allocations(1)
    with npu.DeviceBuffer(16, device=0) as d:
        d.fill(4)
        cap = d.__dlpack__(copy=True, max_version=(1, 0))
        assert allocations(0) == base0 + 2
        v = npu.from_dlpack(cap)
        assert v.ptr != d.ptr and v.device_index == 0
        assert v.copy_to_host() == b"\x04" * 16
        v.close()
        assert allocations(0) == base0 + 1  # the copy went with the tensor
        other = npu.from_dlpack(d.as_dlpack("int32", (2, 2)).__dlpack__(dl_device=(12, 1)))
        assert other.device_index == 1 and other.copy_to_host() == b"\x04" * 16
        assert allocations(1) == base1 + 1
        other.close()
    with npu.HostBuffer(8) as h:
        h.fill(2)
        v = npu.from_dlpack(h.__dlpack__(dl_device=(12, 0)))
        assert isinstance(v, npu.DeviceBuffer) and v.copy_to_host() == b"\x02" * 8
        v.close()
    assert (allocations(0), allocations(1), C.live_exports()) == (base0, base1, 0)


# ------------------------------------------------------------------ as_dlpack
def test_as_dlpack_typed_views() -> None:
    with npu.HostBuffer(32) as h:
        np.asarray(h).view(np.float32)[:] = np.arange(8, dtype=np.float32)
        t = h.as_dlpack("float32", (2, 4))
        assert t.shape == (2, 4) and t.dtype == "float32" and "float32" in repr(t)
        a = np.from_dlpack(t)
        assert a.dtype == np.float32 and a.shape == (2, 4)
        assert (a.ravel() == np.arange(8)).all() and a.ctypes.data == h.ptr
        assert np.from_dlpack(h.as_dlpack(np.dtype(np.int16))).shape == (16,)
        assert np.from_dlpack(h.as_dlpack(np.complex128)).dtype == np.complex128
        assert t.__dlpack_device__() == (1, 0)
        with pytest.raises(ValueError, match="32 bytes"):
            h.as_dlpack("float32", (3, 4))
        with pytest.raises(TypeError, match="unsupported dtype"):
            h.as_dlpack("float8")
        with pytest.raises(TypeError, match="shape"):
            h.as_dlpack("uint8", [32])
        with pytest.raises(ValueError, match="whole number"):
            npu.HostBuffer(6).as_dlpack("float32")
        del a
    with npu.DeviceBuffer(8, device=0) as d:
        f = fields_of(d.as_dlpack("bfloat16", (2, 2)).__dlpack__())
        assert f[4:9] == ((2, 2), (2, 1), 4, 16, 1)


# ---------------------------------------------------------------- import
def test_device_round_trip_shares_memory_and_keeps_producer() -> None:
    base = allocations(0)
    d = npu.DeviceBuffer(64, device=0)
    d.fill(1)
    v = npu.from_dlpack(d)
    assert isinstance(v, npu.DeviceBuffer) and v.ptr == d.ptr and v.nbytes == 64
    assert "64 bytes" in repr(v)
    v.fill(2)
    assert d.copy_to_host() == b"\x02" * 64
    with pytest.raises(BufferError, match="DLPack export"):
        d.close()
    del d
    gc.collect()
    assert allocations(0) == base + 1  # the import keeps the producer
    assert npu.memory_allocated(0) >= 64  # imported memory is not counted twice
    v.close()
    gc.collect()
    assert allocations(0) == base and C.live_exports() == 0
    v.close()  # idempotent
    with pytest.raises(errors.ObjectClosedError):
        v.fill(0)


def test_host_round_trip() -> None:
    base = host_allocations()
    h = npu.HostBuffer(16)
    v = npu.from_dlpack(h)
    assert isinstance(v, npu.HostBuffer) and v.ptr == h.ptr and "imported" in repr(v)
    np.asarray(v)[:] = 8
    assert h.tobytes() == b"\x08" * 16
    assert npu.host_memory_allocated() >= 16
    del h
    gc.collect()
    assert host_allocations() == base + 1
    del v  # collected, not closed: the deleter runs too
    gc.collect()
    assert host_allocations() == base and C.live_exports() == 0


def test_import_numpy_array_keeps_it_alive_until_close() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ref = weakref.ref(x)
    h = npu.from_dlpack(x)
    assert isinstance(h, npu.HostBuffer) and h.nbytes == 48 and h.ptr == x.ctypes.data
    del x
    gc.collect()
    assert ref() is not None
    with npu.DeviceBuffer(48, device=0) as d:
        npu.copy(d, h)  # an imported (pageable) HostBuffer works in copies
        back = np.zeros(12, np.float32)
        npu.copy(back, d)
        assert (back == np.arange(12)).all()
    m = np.asarray(h)  # an export of the HostBuffer: close is refused meanwhile
    with pytest.raises(BufferError, match="exported"):
        h.close()
    del m
    h.close()
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize(
    "arr",
    [
        np.zeros((2, 3), np.float64),
        np.ones(5, np.bool_),
        np.zeros(3, np.complex64),
        np.array(7, np.int16),  # 0-d: one item
        np.zeros((4, 1, 2), np.uint32)[:, :, :],
        np.zeros((3, 1), np.int8)[:, ::2],  # size-1 dimension with an odd stride
    ],
)
def test_import_numpy_dtypes_and_shapes(arr: np.ndarray[Any, Any]) -> None:
    h = npu.from_dlpack(arr)
    assert h.nbytes == arr.nbytes and h.ptr == arr.ctypes.data
    h.close()


def test_import_copy_and_device_arguments() -> None:
    x = np.arange(8, dtype=np.uint8)
    c = npu.from_dlpack(x, copy=True)
    assert isinstance(c, npu.HostBuffer) and c.ptr != x.ctypes.data and c.tobytes() == x.tobytes()
    c.close()
    d = npu.from_dlpack(x, device=1)
    assert isinstance(d, npu.DeviceBuffer) and d.device_index == 1
    assert d.copy_to_host() == x.tobytes()
    with pytest.raises(BufferError, match="copy=False"):
        npu.from_dlpack(d, device="cpu", copy=False)
    back = npu.from_dlpack(d, device="cpu")
    assert isinstance(back, npu.HostBuffer) and back.tobytes() == x.tobytes()
    back.close()
    same = npu.from_dlpack(d, device="npu:1", copy=False)
    assert same.ptr == d.ptr
    same.close()
    d.close()
    ro = np.frombuffer(b"abcd", dtype=np.uint8)
    with pytest.raises(BufferError, match="read-only"):
        npu.from_dlpack(ro, copy=False)
    w = npu.from_dlpack(ro)  # copy=None: a writable copy
    assert w.ptr != ro.ctypes.data and w.tobytes() == b"abcd"
    w.close()
    with pytest.raises(TypeError, match="copy"):
        npu.from_dlpack(x, copy=1)
    with pytest.raises(errors.InvalidDeviceError):
        npu.from_dlpack(x, device=42)
    assert C.live_exports() == 0


def test_import_refusals_release_the_tensor_once() -> None:
    buf = np.zeros(64, np.uint8)
    cases: list[tuple[Producer, type[BaseException], str]] = [
        (Producer(buf, bits=4, shape=(128,)), TypeError, "sub-byte"),
        (Producer(buf, code=3, bits=64, shape=(8,)), TypeError, "kDLOpaqueHandle"),
        (Producer(buf, code=99, shape=(64,)), TypeError, "unknown DLPack dtype code 99"),
        # host memory claimed as NPU memory: the runtime says it is not device memory
        (Producer(buf, device=(12, 0)), BufferError, "does not know"),
        (Producer(buf, address=0, shape=(0,)), BufferError, "NULL data pointer"),
    ]
    for p, exc, text in cases:
        with pytest.raises(exc, match=text):
            npu.from_dlpack(p)
        assert p.released == 1, (p.code, p.bits, p.device)
    bad_index = Producer(buf, device=(12, 99))
    with pytest.raises(errors.InvalidDeviceError):
        npu.from_dlpack(bad_index)
    assert bad_index.streams == []  # refused before asking for a capsule
    unsupported = Producer(buf, device=(2, 0))
    with pytest.raises(BufferError, match=r"kDLCUDA"):
        npu.from_dlpack(unsupported)
    assert unsupported.streams == []  # refused before asking for a capsule
    with pytest.raises(BufferError, match="kDLCUDA"):
        npu.from_dlpack(unsupported.capsule(True))
    assert unsupported.released == 1
    with pytest.raises(BufferError, match="not C-contiguous"):
        npu.from_dlpack(np.arange(10)[::2])
    with pytest.raises(BufferError, match="not C-contiguous"):
        npu.from_dlpack(np.zeros((3, 4), order="F"))
    with pytest.raises(TypeError, match="__dlpack__"):
        npu.from_dlpack(5)
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        npu.from_dlpack(datetime.datetime_CAPI)  # a PyCapsule of another kind


def test_pointer_check_skipped_when_the_runtime_cannot_answer() -> None:
    mc = mock_control()
    with npu.DeviceBuffer(32, device=0) as d:
        mc.inject_fault("aclrtPointerGetAttributes", 107000)
        try:
            with npu.from_dlpack(d) as v:  # imported without the check
                assert mc.fault_hits("aclrtPointerGetAttributes") == 1
                assert v.ptr == d.ptr
                v.fill(1)  # no stale error left behind
        finally:
            mc.clear_faults()


def test_import_deleter_exactly_once_on_close_and_on_collect() -> None:
    buf = np.zeros(16, np.uint8)
    p = Producer(buf)
    h = npu.from_dlpack(p)
    assert p.streams == [None] and p.released == 0  # host memory: stream None
    h.close()
    h.close()
    gc.collect()
    assert p.released == 1
    h2 = npu.from_dlpack(p)
    del h2
    gc.collect()
    assert p.released == 2
    legacy = Producer(buf, legacy_only=True)  # a producer older than DLPack 1.0
    npu.from_dlpack(legacy).close()
    assert legacy.released == 1
    cap = p.capsule(False)
    handle, _ = C.consume(cap)
    assert not handle.released and handle.own_release is not None
    del handle  # an ownership handle dropped without release() still releases
    assert p.released == 3
    cap2 = p.capsule(True)
    del cap2  # never consumed
    assert p.released == 4


def test_capsule_consumed_once() -> None:
    with npu.DeviceBuffer(8, device=0) as d:
        cap = d.__dlpack__(max_version=(1, 0))
        v = npu.from_dlpack(cap)
        assert '"used_dltensor_versioned"' in repr(cap)
        with pytest.raises(BufferError, match="already consumed"):
            npu.from_dlpack(cap)
        v.close()


# ----------------------------------------------------------------- streams
def test_export_to_consumer_stream_orders_pending_work(gate: Any) -> None:
    s = npu.Stream(0)
    consumer = npu.Stream(0)
    d = npu.DeviceBuffer(256, device=0)
    host = npu.HostBuffer(256)
    d.fill(1)
    gate.block(s)
    npu.memset(d, 5, stream=s, non_blocking=True)  # pending behind the gate
    cap = d.__dlpack__(stream=consumer.handle)  # returns at once (no host wait)
    v = npu.from_dlpack(cap)
    npu.copy(host, v, stream=consumer, non_blocking=True)
    assert not consumer.query()  # the consumer stream waits for s
    gate.release.set()
    consumer.synchronize()
    assert host.tobytes() == b"\x05" * 256
    v.close()
    d.close()
    host.close()
    s.close()
    consumer.close()


def test_export_to_a_foreign_stream_handle(gate: Any) -> None:
    """A consumer stream pyacl_rt has no Stream object for (made by other code)."""
    ll = npu.lowlevel
    npu.set_device(0)
    sc = ll.scratch()
    ll.check(ll.aclrtCreateStream(sc.uptr), "aclrtCreateStream")
    raw = int(sc.uptr[0])
    s = npu.Stream(0)
    d = npu.DeviceBuffer(32, device=0)
    host = npu.HostBuffer(32)
    try:
        gate.block(s)
        npu.memset(d, 6, stream=s, non_blocking=True)
        v = npu.from_dlpack(d.__dlpack__(stream=raw))
        foreign = npu.Stream.from_handle(raw, 0)
        npu.copy(host, v, stream=foreign, non_blocking=True)
        assert not foreign.query()  # waits for s's memset
        gate.release.set()
        foreign.synchronize()
        assert host.tobytes() == b"\x06" * 32
        v.close()
        npu.synchronize(0)  # releases the wait's event kept on the wrapped stream
    finally:
        gate.release.set()
        ll.check(ll.aclrtDestroyStream(raw), "aclrtDestroyStream")
        DL._foreign.clear()
        d.close()
        host.close()
        s.close()


def test_export_stream_none_waits_and_minus_one_does_not(gate: Any) -> None:
    s = npu.Stream(0)
    d = npu.DeviceBuffer(64, device=0)
    gate.block(s)
    npu.memset(d, 9, stream=s, non_blocking=True)
    caps: list[Any] = []
    no_wait = threading.Thread(target=lambda: caps.append(d.__dlpack__(stream=-1)))
    no_wait.start()
    no_wait.join(60)
    assert len(caps) == 1  # did not wait for the gate
    done = threading.Event()

    def export_and_wait() -> None:
        caps.append(d.__dlpack__())  # stream=None: waits for the pending memset
        done.set()

    t = threading.Thread(target=export_and_wait)
    t.start()
    assert not done.wait(0.3), "__dlpack__(stream=None) returned before pending work ended"
    gate.release.set()
    t.join(60)
    assert done.is_set()
    v = npu.from_dlpack(caps[1])
    assert v.copy_to_host() == b"\x09" * 64
    v.close()
    caps.clear()
    d.close()
    s.close()


def test_from_dlpack_passes_the_current_stream() -> None:
    buf = np.zeros(8, np.uint8)
    p = Producer(buf, device=(12, 0), address=npu.DeviceBuffer(64, device=0).ptr)
    # (the DeviceBuffer above is collected: the pointer check then refuses the address)
    gc.collect()
    with pytest.raises(BufferError, match="does not know"):
        npu.from_dlpack(p)
    assert p.streams == [npu.current_stream(0).resolved_handle]
    with npu.DeviceBuffer(64, device=0) as d:
        p = Producer(d, device=(12, 0), address=d.ptr)
        s = npu.Stream(0)
        with npu.stream(s):
            v = npu.from_dlpack(p)
        assert p.streams == [s.handle]
        v.close()
        s.close()
    assert p.released == 1


def test_consumer_stream_as_zero_means_default_stream(gate: Any) -> None:
    """``__dlpack__(stream=0)``: the consumer uses the device's default stream, so the
    export returns at once and work queued later on the default stream runs after
    the buffer's pending work (not before it, and without a host wait)."""
    s = npu.Stream(0)
    d = npu.DeviceBuffer(32, device=0)
    host = npu.HostBuffer(32)
    default = npu.default_stream(0)
    try:
        gate.block(s)
        npu.memset(d, 7, stream=s, non_blocking=True)  # queued behind the gate
        cap = d.__dlpack__(stream=0)  # returns at once: no host wait
        v = npu.from_dlpack(cap)
        npu.copy(host, v, stream=default, non_blocking=True)
        assert not default.query()  # the default stream waits for s's memset
        gate.release.set()
        default.synchronize()
        assert host.tobytes() == b"\x07" * 32  # the copy ran after the memset
        v.close()
    finally:
        gate.release.set()
        s.synchronize()
        d.close()
        host.close()
        s.close()


# ----------------------------------------------------------- leaks, threads
def test_no_leaks_under_tracemalloc() -> None:
    d = npu.DeviceBuffer(256, device=0)
    h = npu.HostBuffer(256)

    def cycle() -> None:
        npu.from_dlpack(d.__dlpack__(max_version=(1, 0))).close()
        a = np.from_dlpack(h)
        del a
        cap = d.__dlpack__()
        del cap
        x = np.zeros(4, np.uint8)
        npu.from_dlpack(x).close()

    for _ in range(50):  # warm caches
        cycle()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(500):
            cycle()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes kept after 500 export/import cycles"
    assert C.live_exports() == 0 and d.mem.exports == [] and h.mem.exports == []
    d.close()
    h.close()


def test_exports_and_imports_from_threads(run_threads: Any) -> None:
    base = allocations() + host_allocations()
    d = npu.DeviceBuffer(1024, device=0)

    def work(i: int) -> None:
        for _ in range(50):
            v = npu.from_dlpack(d[i * 64 : (i + 1) * 64])
            v.fill(i)
            v.close()
            h = npu.HostBuffer(8)
            np.from_dlpack(h)[:] = i
            h.close()

    assert run_threads(4, work) == []
    assert C.live_exports() == 0 and d.mem.exports == []
    d.close()
    assert allocations() + host_allocations() == base


# ----------------------------------------------------------------- finalize
def test_finalize_refused_while_exported_and_releases_imports(run_python: Any) -> None:
    code = """
        import gc
        import numpy as np
        import pyacl_rt as npu
        from pyacl_rt import _runtime as runtime, errors, _dlpack_c as C
        from pyacl_rt.mock import mock_control, REPORT_LAST_FINALIZE
        d = npu.DeviceBuffer(64, device=0)
        cap = d.__dlpack__()
        try:
            npu.finalize()
        except BufferError as exc:
            assert "1 DLPack export" in str(exc) and "nothing was finalized" in str(exc), exc
        else:
            raise AssertionError("finalize with a live DLPack export")
        assert runtime.is_initialized()
        del cap
        # a pyacl_rt import is no obstacle: finalize releases it before its producer
        v = npu.from_dlpack(d)
        x = np.arange(16, dtype=np.uint8)
        hv = npu.from_dlpack(x)
        h = npu.HostBuffer(16)
        hv2 = npu.from_dlpack(h)
        npu.finalize()
        assert C.live_exports() == 0
        for obj in (v, hv, hv2):
            try:
                obj.ptr
            except errors.RuntimeFinalizedError:
                pass
            else:
                raise AssertionError(obj)
        report = mock_control().leak_report(REPORT_LAST_FINALIZE)
        assert "allocation" not in report.lower(), report
        print("OK")
    """
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert "OK" in res.stdout
    assert "still exported" not in res.stderr


def test_host_copy_alive_at_exit_is_silent(run_python: Any) -> None:
    """Issue 14 item 4: a numpy array from ``np.from_dlpack(dev, device="cpu")`` (its
    memory is a pinned block the user never saw) still alive at interpreter exit made
    every exit print "1 pinned HostBuffer(s) were still exported ... do not use those
    views any more". At exit that memory is left to the process end, silently."""
    code = """
        import numpy as np
        import pyacl_rt as npu

        dev = npu.DeviceBuffer(64, device=0)
        dev.fill(3)
        on_host = np.from_dlpack(dev, device="cpu")
        pinned = npu.HostBuffer(32)
        view = memoryview(pinned)
        assert (on_host == 3).all()
        print("OK")
    """
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "OK\n" and res.stderr == ""


def test_forked_child_never_calls_the_parents_deleters(run_python: Any) -> None:
    code = """
        import gc, os
        import numpy as np
        import pyacl_rt as npu
        from pyacl_rt import _dlpack_c as C

        released = []
        x = np.zeros(16, np.uint8)
        cap = C.make_capsule(x.ctypes.data, 1, 0, (16,), 1, 8, 1, 0, True,
                             lambda: released.append(os.getpid()))
        view = npu.from_dlpack(cap)
        pid = os.fork()
        if pid == 0:
            del view; gc.collect()
            os._exit(0 if released == [] else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0, "the child called the parent's deleter"
        view.close()
        assert released == [os.getpid()], released
        print("OK")
    """
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert "OK" in res.stdout
