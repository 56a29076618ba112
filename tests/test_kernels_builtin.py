"""pyacl_rt._kernels.builtin: reduce_async (aclrtReduceAsync) and random numbers
(aclrtRandomNumAsync: random_async, RandomGenerator) on the mock."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import pyacl_rt as npu


def _dev(values: np.ndarray[Any, Any], device: int = 0) -> npu.DeviceBuffer:
    buf = npu.DeviceBuffer(values.nbytes, device=device)
    npu.copy(buf, values)
    return buf


def _host(buf: npu.DeviceBuffer, dtype: Any) -> np.ndarray[Any, Any]:
    return np.frombuffer(buf.copy_to_host(), dtype=dtype)


@pytest.mark.parametrize(
    ("op", "expect"), [("sum", [2, 4, 6, 8]), ("max", [4, 3, 3, 4]), ("min", [1, 2, 2, 1])]
)
def test_reduce_async(op: str, expect: list[int]) -> None:
    dst = _dev(np.array([1, 2, 3, 4], np.float32))
    src = _dev(np.array([1, 2, 3, 4][:: -1 if op != "sum" else 1], np.float32))
    s = npu.Stream()
    npu.reduce_async(dst, src, op, np.float32, stream=s)
    s.synchronize()
    assert _host(dst, np.float32).tolist() == expect
    dst.close()
    src.close()
    s.close()


def test_reduce_async_dtypes_part_and_current_stream() -> None:
    dst = _dev(np.array([100, 120, 5, 6], np.int8))
    src = _dev(np.array([100, 10, 1, 1], np.int8))
    npu.reduce_async(dst, src, "sum", "int8", nbytes=2)  # the current stream
    npu.current_stream().synchronize()
    assert _host(dst, np.int8).tolist() == [-56, -126, 5, 6]  # integers wrap
    h = _dev(np.array([1.5, 2.0], np.float16))
    npu.reduce_async(h, h, dtype=np.dtype("float16"))
    npu.synchronize()
    assert _host(h, np.float16).tolist() == [3.0, 4.0]
    for b in (dst, src, h):
        b.close()


def test_reduce_async_refusals() -> None:
    a, b = npu.DeviceBuffer(16), npu.DeviceBuffer(8)
    other = npu.DeviceBuffer(16, device=1)
    with pytest.raises(ValueError, match="op must be one of"):
        npu.reduce_async(a, a, "prod")
    with pytest.raises(ValueError, match="dtype must be one of"):
        npu.reduce_async(a, a, dtype="complex64")
    with pytest.raises(ValueError, match="not a multiple of the float32 size"):
        npu.reduce_async(a, a, nbytes=6)
    with pytest.raises(ValueError, match=r"min\(len\(src\), len\(dst\)\)"):
        npu.reduce_async(b, a)
    with pytest.raises(ValueError, match="one device"):
        npu.reduce_async(a, other)
    with pytest.raises(ValueError, match="stream is on device 1"):
        npu.reduce_async(a, a, stream=npu.default_stream(1))
    with pytest.raises(TypeError, match="dst must be a DeviceBuffer"):
        npu.reduce_async(np.zeros(4), a)  # type: ignore[arg-type]
    b.close()
    with pytest.raises(npu.ObjectClosedError):
        npu.reduce_async(b, a)
    a.close()
    other.close()


def test_random_uniform_is_deterministic_per_seed_and_counter() -> None:
    out1, out2 = npu.DeviceBuffer(4096), npu.DeviceBuffer(4096)
    ctr = npu.DeviceBuffer(8)
    s = npu.Stream()
    for out in (out1, out2):
        ctr.memset(0)
        npu.random_async(out, "uniform", seed=42, counter=ctr, low=-1.0, high=1.0, stream=s)
        s.synchronize()
    a, b = _host(out1, np.float32), _host(out2, np.float32)
    assert np.array_equal(a, b) and a.min() >= -1.0 and a.max() < 1.0 and a.std() > 0.3
    assert int.from_bytes(ctr.copy_to_host(), "little") == 1024  # advanced by the count
    npu.random_async(out2, seed=43, counter=ctr, stream=s)
    s.synchronize()
    assert not np.array_equal(_host(out2, np.float32), a)
    for x in (out1, out2, ctr):
        x.close()
    s.close()


def test_random_generator_continues_the_sequence() -> None:
    with npu.RandomGenerator(seed=7) as gen:
        assert gen.seed == 7 and gen.offset() == 0 and "seed=7" in repr(gen)
        first, second = npu.DeviceBuffer(4000), npu.DeviceBuffer(4000)
        gen.normal(first, mean=10.0, std=2.0)
        gen.normal(second, mean=10.0, std=2.0)
        npu.current_stream().synchronize()
        a, b = _host(first, np.float32), _host(second, np.float32)
        assert not np.array_equal(a, b) and gen.offset() == 2000
        assert abs(a.mean() - 10.0) < 0.5 and abs(a.std() - 2.0) < 0.5
        gen.truncated_normal(first, std=1.0, dtype="float16", count=100)
        gen.uniform(second, 5, 9, dtype="int32")
        mask = npu.DeviceBuffer(16)
        gen.dropout_mask(mask, p=0.25, dtype="float32", count=128)
        npu.current_stream().synchronize()
        t = _host(first, np.float16)[:100].astype(np.float32)
        assert np.abs(t).max() <= 2.0
        ints = _host(second, np.int32)
        assert ints.min() >= 5 and ints.max() < 9
        bits = np.unpackbits(_host(mask, np.uint8), bitorder="little")
        assert 0.5 < bits.mean() < 0.95  # kept with probability 0.75
        for x in (first, second, mask):
            x.close()


def test_random_refusals() -> None:
    out, ctr = npu.DeviceBuffer(64), npu.DeviceBuffer(8)
    small = npu.DeviceBuffer(4)
    with pytest.raises(ValueError, match="at least 8 bytes"):
        npu.random_async(out, seed=1, counter=small)
    with pytest.raises(ValueError, match="distribution must be one of"):
        npu.random_async(out, "poisson", seed=1, counter=ctr)
    with pytest.raises(ValueError, match="needs a floating-point dtype"):
        npu.random_async(out, "normal", seed=1, counter=ctr, dtype="int32")
    with pytest.raises(ValueError, match="range is empty"):
        npu.random_async(out, seed=1, counter=ctr, low=1.0, high=1.0)
    with pytest.raises(ValueError, match="p must be in"):
        npu.random_async(out, "dropout_mask", seed=1, counter=ctr, p=1.5)
    with pytest.raises(ValueError, match="std must be >= 0"):
        npu.random_async(out, "normal", seed=1, counter=ctr, std=-1.0)
    with pytest.raises(ValueError, match="count 17 does not fit"):
        npu.random_async(out, seed=1, counter=ctr, count=17)
    with pytest.raises(ValueError, match="seed must be in"):
        npu.random_async(out, seed=-1, counter=ctr)
    with pytest.raises(ValueError, match="does not fit int32"):
        npu.random_async(out, seed=1, counter=ctr, dtype="int32", high=2**40)
    with pytest.raises(ValueError, match="dtype must be one of"):
        npu.random_async(out, seed=1, counter=ctr, dtype="int8")
    for x in (out, ctr, small):
        x.close()


def test_random_generator_offset_waits_for_its_streams(gate: Any) -> None:
    """offset() on another stream than the generating one still sees the advance."""
    s = npu.Stream()
    out = npu.DeviceBuffer(400)
    with npu.RandomGenerator(5) as gen:
        gate.block(s)  # hold s: the task cannot run yet
        gen.uniform(out, stream=s)
        releaser = threading.Timer(0.2, gate.release.set)  # while offset() waits
        releaser.start()
        assert gen.offset() == 100  # waited for s
        releaser.join()
    out.close()
    s.close()
