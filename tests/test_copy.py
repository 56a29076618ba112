"""Copies of every kind against numpy: random sizes and offsets (seeded), sync and
async, 2D with pitches, memset, the memcpy_async fast path, and no leaks."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pyacl_rt import _device as D
from pyacl_rt import _memory as M
from pyacl_rt import _stream as S
from pyacl_rt import errors
from pyacl_rt._memory import engine
from pyacl_rt._memory.registry import memory
from pyacl_rt.mock import mock_control

# ------------------------------------------------------------------ helpers
HOST_KINDS = ("numpy", "numpy2d", "bytearray", "memoryview", "host", "bytes")
DEV_KINDS = ("dev0", "dev0view", "dev1")
ALL_KINDS = HOST_KINDS + DEV_KINDS


class Obj:
    """A copy endpoint of some kind holding ``data`` (bytes), readable back."""

    def __init__(self, kind: str, data: bytes) -> None:
        self.kind = kind
        n = len(data)
        self.closers: list[Callable[[], None]] = []
        self.obj: Any
        if kind == "numpy":
            self.obj = np.frombuffer(bytearray(data), np.uint8)
        elif kind == "numpy2d":
            # a 2D float array when the size allows, else 1D uint8
            arr = np.frombuffer(bytearray(data), np.uint8)
            self.obj = arr.view(np.float32).reshape(-1, 1) if n % 4 == 0 and n else arr
        elif kind == "bytearray":
            self.obj = bytearray(data)
        elif kind == "memoryview":
            self.obj = memoryview(bytearray(data))
        elif kind == "bytes":
            self.obj = bytes(data)
        elif kind == "host":
            h = M.HostBuffer(max(n, 1))
            np.asarray(h)[:n] = np.frombuffer(data, np.uint8)
            self.obj = h  # (1 byte for an empty endpoint: ACL cannot allocate 0)
            self.closers.append(h.close)
        else:
            dev = 1 if kind == "dev1" else 0
            pad = 7 if kind == "dev0view" else 0
            buf = M.DeviceBuffer(max(n + 2 * pad, 1), device=dev)
            self.closers.append(buf.close)
            if n:
                M.copy(buf, data, dst_offset=pad)
            self.obj = buf[pad : pad + n] if kind == "dev0view" else buf
        self.size = n

    def read(self) -> bytes:
        o = self.obj
        if isinstance(o, M.DeviceBuffer):
            return bytes(o.copy_to_host())[: self.size]
        if isinstance(o, M.HostBuffer):
            return o.tobytes()[: self.size]
        return bytes(memoryview(o).cast("B"))

    @property
    def is_device(self) -> bool:
        return isinstance(self.obj, M.DeviceBuffer)

    def close(self) -> None:
        for c in self.closers:
            c()


def make(kind: str, data: bytes) -> Obj:
    return Obj(kind, data)


def seed_of(*parts: object) -> int:
    """A stable seed (str hashes are randomized per process)."""
    return zlib.crc32(repr(parts).encode())


def rand_bytes(rng: np.random.Generator, n: int) -> bytes:
    return rng.integers(0, 256, n, dtype=np.uint8).tobytes()


# -------------------------------------------------------------- every kind
@pytest.mark.parametrize("mode", ["sync", "async", "async-stream", "sync-stream"])
@pytest.mark.parametrize("dst_kind", [k for k in ALL_KINDS if k != "bytes"])
@pytest.mark.parametrize("src_kind", ALL_KINDS)
def test_copy_every_kind_random(src_kind: str, dst_kind: str, mode: str) -> None:
    rng = np.random.default_rng(seed_of(src_kind, dst_kind, mode))
    for _ in range(3):
        ssize = int(rng.integers(0, 300)) // 4 * 4
        dsize = int(rng.integers(0, 300)) // 4 * 4
        src_data = rand_bytes(rng, ssize)
        dst_data = rand_bytes(rng, dsize)
        soff = int(rng.integers(0, ssize + 1))
        doff = int(rng.integers(0, dsize + 1))
        n = int(rng.integers(0, min(ssize - soff, dsize - doff) + 1))
        src = make(src_kind, src_data)
        dst = make(dst_kind, dst_data)
        stream = None
        if mode.endswith("stream") and (src.is_device or dst.is_device):
            dev = dst.obj.device_index if dst.is_device else src.obj.device_index
            stream = S.Stream(dev)
        try:
            M.copy(
                dst.obj,
                src.obj,
                n,
                dst_offset=doff,
                src_offset=soff,
                stream=stream,
                non_blocking=mode.startswith("async"),
            )
            if mode.startswith("async"):
                if stream is not None:
                    stream.synchronize()
                else:
                    for d in list(D.primaries):
                        D.synchronize(d)
            expect = bytearray(dst_data)
            expect[doff : doff + n] = src_data[soff : soff + n]
            assert dst.read() == bytes(expect), (src_kind, dst_kind, ssize, dsize, soff, doff, n)
            assert src.read() == src_data
        finally:
            src.close()
            dst.close()
            if stream is not None:
                stream.close()


def test_copy_nbytes_none_copies_all_of_src() -> None:
    with M.DeviceBuffer(100, device=0) as dev:
        data = np.arange(40, dtype=np.uint8)
        M.copy(dev, data, dst_offset=60)
        out = np.zeros(50, np.uint8)
        M.copy(out, dev, src_offset=50)
        assert (out[10:] == data).all()
        with pytest.raises(ValueError, match="pass nbytes"):
            M.copy(out, dev)


def test_typed_numpy_arrays() -> None:
    a = np.linspace(0, 1, 64, dtype=np.float64).reshape(8, 8)
    with M.DeviceBuffer(a.nbytes, device=2) as dev:
        dev.copy_from_host(a)
        b = np.empty_like(a)
        dev.copy_to_host(b)
        assert (a == b).all()
        f = np.asfortranarray(a)
        with pytest.raises(ValueError, match="contiguous"):
            dev.copy_from_host(f)


def test_cross_device_copies_enable_peer_access_once() -> None:
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 1000, dtype=np.uint8)
    bufs = [M.DeviceBuffer(1000, device=d) for d in (5, 6, 7)]
    M.copy(bufs[0], data)
    M.copy(bufs[1], bufs[0])  # runs on device 6 (dst), peer 5
    s7 = S.Stream(7)
    M.copy(bufs[2], bufs[1], stream=s7, non_blocking=True)
    s7.synchronize()
    M.memcpy_async(bufs[0], bufs[2], 1000, S.Stream(5))
    for d in (5, 6, 7):
        D.synchronize(d)
    for b in bufs:
        assert bytes(b.copy_to_host()) == data.tobytes()
    assert any(k[1] == 5 for k in memory.peers)
    with pytest.raises(ValueError, match="device 4"):
        M.copy(bufs[0], bufs[1], stream=S.default_stream(4))
    for b in bufs:
        b.close()
    s7.close()


# ---------------------------------------------------------------------- 2D
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("dst_kind", "src_kind"),
    [
        ("dev0", "numpy"),
        ("dev0", "host"),
        ("numpy", "dev0"),
        ("host", "dev0view"),
        ("dev0", "dev0view"),
        ("dev1", "dev0"),
        ("numpy", "host"),
        ("bytearray", "bytes"),
    ],
)
def test_copy_2d_random(dst_kind: str, src_kind: str, mode: str) -> None:
    rng = np.random.default_rng(seed_of(dst_kind, src_kind, mode))
    for _ in range(4):
        width = int(rng.integers(0, 20))
        height = int(rng.integers(0, 10))
        spitch = width + int(rng.integers(0, 8))
        dpitch = width + int(rng.integers(0, 8))
        soff = int(rng.integers(0, 10))
        doff = int(rng.integers(0, 10))
        ssize = soff + max(height - 1, 0) * spitch + width + int(rng.integers(0, 5))
        dsize = doff + max(height - 1, 0) * dpitch + width + int(rng.integers(0, 5))
        src_data = rand_bytes(rng, ssize)
        dst_data = rand_bytes(rng, dsize)
        src = make(src_kind, src_data)
        dst = make(dst_kind, dst_data)
        try:
            M.copy_2d(
                dst.obj,
                dpitch,
                src.obj,
                spitch,
                width,
                height,
                dst_offset=doff,
                src_offset=soff,
                non_blocking=mode == "async",
            )
            for d in list(D.primaries):
                D.synchronize(d)
            expect = np.frombuffer(bytearray(dst_data), np.uint8).copy()
            s_arr = np.frombuffer(src_data, np.uint8)
            for r in range(height):
                expect[doff + r * dpitch : doff + r * dpitch + width] = s_arr[
                    soff + r * spitch : soff + r * spitch + width
                ]
            assert dst.read() == expect.tobytes()
        finally:
            src.close()
            dst.close()


def test_copy_2d_exact_extent_is_accepted() -> None:
    # (height - 1) * pitch + width == size: the last row need not be a full pitch
    src = np.arange(3 * 8 + 4, dtype=np.uint8)
    with M.DeviceBuffer(3 * 6 + 4, device=0) as dev:
        M.copy_2d(dev, 6, src, 8, 4, 4)
        out = np.frombuffer(dev.copy_to_host(), np.uint8)
        for r in range(4):
            assert (out[r * 6 : r * 6 + 4] == src[r * 8 : r * 8 + 4]).all()


# ------------------------------------------------------------------ memset
@pytest.mark.parametrize("kind", ["dev0", "dev0view", "dev1", "host", "numpy", "bytearray"])
def test_memset_random(kind: str) -> None:
    rng = np.random.default_rng(seed_of(kind))
    for non_blocking in (False, True):
        size = int(rng.integers(1, 500))
        data = rand_bytes(rng, size)
        obj = make(kind, data)
        try:
            off = int(rng.integers(0, size + 1))
            n = int(rng.integers(0, size - off + 1))
            value = int(rng.integers(0, 256))
            M.memset(obj.obj, value, n, off, non_blocking=non_blocking)
            for d in list(D.primaries):
                D.synchronize(d)
            expect = bytearray(data)
            expect[off : off + n] = bytes([value]) * n
            assert obj.read() == bytes(expect)
            if isinstance(obj.obj, (M.DeviceBuffer, M.HostBuffer)):
                obj.obj.fill(value ^ 0xFF)
                assert obj.read() == bytes([value ^ 0xFF]) * size
        finally:
            obj.close()


def test_memset_on_stream() -> None:
    s = S.Stream(3)
    with M.DeviceBuffer(64, device=3) as dev:
        dev.memset(0x5A, 32, 16, s, non_blocking=True)
        s.synchronize()
        out = bytes(dev.copy_to_host())
        assert out[16:48] == b"\x5a" * 32
    s.close()


# --------------------------------------------------------- fast path
def test_memcpy_async_all_owned_pairs() -> None:
    rng = np.random.default_rng(11)
    s = S.Stream(0)
    data = rand_bytes(rng, 4096)
    h_src = M.HostBuffer(4096)
    np.asarray(h_src)[:] = np.frombuffer(data, np.uint8)
    d1 = M.DeviceBuffer(4096, device=0)
    d2 = M.DeviceBuffer(4096, device=0)
    h_dst = M.HostBuffer(4096)
    M.memcpy_async(d1, h_src, 4096, s)  # H2D
    M.memcpy_async(d2[100:], d1[50:], 1000, s)  # D2D with view offsets
    M.memcpy_async(h_dst, d2, 4096, s)  # D2H
    s.synchronize()
    out = np.asarray(h_dst).tobytes()
    assert out[100:1100] == data[50:1050]
    M.memcpy_async(h_dst, h_src, 4096, s)  # H2H falls back to a host copy
    assert np.asarray(h_dst).tobytes() == data
    # streams are remembered (weakly) on the buffers they touched
    assert any(r() is s for r in d1.mem.streams)
    for b in (h_src, d1, d2, h_dst):
        b.close()
    s.close()


def test_memcpy_async_error_from_runtime_is_typed() -> None:
    mc = mock_control()
    s = S.Stream(0)
    a = M.DeviceBuffer(16, device=0)
    b = M.DeviceBuffer(16, device=0)
    mc.inject_fault("aclrtMemcpyAsync", 507899, nth=1)
    try:
        with pytest.raises(errors.AclError) as info:
            M.memcpy_async(a, b, 16, s)
        assert info.value.code == 507899 and info.value.function == "aclrtMemcpyAsync"
        for func, call in (
            ("aclrtMemcpyAsync", lambda: M.copy(a, b"z" * 16)),
            ("aclrtMemcpyAsync", lambda: M.copy(bytearray(16), a, non_blocking=True)),
            ("aclrtMemsetAsync", lambda: M.memset(a, 1)),
            ("aclrtMemcpy2dAsync", lambda: M.copy_2d(a, 4, b, 4, 4, 4)),
        ):
            mc.inject_fault(func, 507899, nth=1)
            with pytest.raises(errors.AclError) as info:
                call()
            assert info.value.code == 507899 and info.value.function == func
    finally:
        mc.clear_faults()
    a.close()
    b.close()
    s.close()


def test_copies_from_many_threads(run_threads: Any) -> None:
    rng = np.random.default_rng(3)
    payloads = [rand_bytes(rng, 2048) for _ in range(8)]

    def worker(i: int) -> None:
        dev = M.DeviceBuffer(2048, device=i % 2)
        s = S.Stream(i % 2)
        host = M.HostBuffer(2048)
        for _ in range(20):
            M.copy(dev, payloads[i], stream=s, non_blocking=True)
            M.memcpy_async(host, dev, 2048, s)
        s.synchronize()
        assert np.asarray(host).tobytes() == payloads[i]
        dev.close()
        host.close()
        s.close()

    errs = run_threads(8, worker)
    assert not errs, errs


def test_cross_device_without_peer_access_is_staged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_ensure_peer", lambda ctx, peer: False)
    staged: list[int] = []
    real = engine._staged_copy

    def spy(*args: Any) -> None:
        staged.append(args[2])
        real(*args)

    monkeypatch.setattr(engine, "_staged_copy", spy)
    data = np.random.default_rng(8).integers(0, 256, 300, dtype=np.uint8)
    a = M.DeviceBuffer(300, device=3)
    b = M.DeviceBuffer(400, device=4)
    M.copy(a, data)
    M.copy(b, a, dst_offset=100)
    s4 = S.Stream(4)
    M.copy(b[0:50], a[10:60], stream=s4, non_blocking=True)
    M.memcpy_async(a[0:5], b[100:105], 5, S.Stream(3))  # falls back to copy()
    D.synchronize(3)
    out = np.frombuffer(b.copy_to_host(), np.uint8)
    assert (out[100:] == data).all() and (out[:50] == data[10:60]).all()
    assert bytes(a.copy_to_host())[:5] == data[:5].tobytes()
    assert staged == [300, 50, 5]
    with pytest.raises(errors.FeatureNotSupportedError, match="cannot access"):
        M.copy_2d(b, 10, a, 10, 10, 3)
    a.close()
    b.close()
    s4.close()
