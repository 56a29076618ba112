"""The runtime's built-in tasks that need no user binary, Pythonic: ``reduce_async``
(``aclrtReduceAsync``) and random numbers (``aclrtRandomNumAsync``: ``random_async`` and
:class:`RandomGenerator`, which owns its seed and its device counter).

Both are asynchronous stream tasks; the buffers they get are noted on the stream like
the buffers of a copy (freeing waits for, or the caching allocator orders reuse after,
the task). Which reduce kinds and data types a device supports depends on the product
(the runtime refuses others with ``FeatureNotSupportedError``).

Layer 7 (higher tools): imports layers 1-6.
"""

from __future__ import annotations

import struct
import threading
from typing import Any, Final

from .. import lowlevel
from .._args import index_arg, type_name
from .._memory.buffers import DeviceBuffer
from .._memory.keepalive import note
from .._memory.records import raise_closed, wait_streams
from .._raw._abi_runtime import CONSTANTS as _C
from .._state import check, lib, local, refuse_in_callback
from .._stream import Stream, current_stream
from .._syncdebug import check_sync, sync_debug_active

__all__ = ["RandomGenerator", "random_async", "reduce_async"]

#: dtype name -> (aclDataType, element size in bytes, struct format of one value)
_DTYPES: Final[dict[str, tuple[int, int, str]]] = {
    "float32": (_C["ACL_FLOAT"], 4, "<f"),
    "float16": (_C["ACL_FLOAT16"], 2, "<e"),
    "bfloat16": (_C["ACL_BF16"], 2, "bf16"),
    "int8": (_C["ACL_INT8"], 1, "<b"),
    "uint8": (_C["ACL_UINT8"], 1, "<B"),
    "int16": (_C["ACL_INT16"], 2, "<h"),
    "uint16": (_C["ACL_UINT16"], 2, "<H"),
    "int32": (_C["ACL_INT32"], 4, "<i"),
    "uint32": (_C["ACL_UINT32"], 4, "<I"),
    "int64": (_C["ACL_INT64"], 8, "<q"),
    "uint64": (_C["ACL_UINT64"], 8, "<Q"),
}
_REDUCE_OPS: Final[dict[str, int]] = {
    "sum": _C["ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM"],
    "max": _C["ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX"],
    "min": _C["ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN"],
    "equal": _C["ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL"],
}
_DISTRIBUTIONS: Final[dict[str, int]] = {
    "dropout_mask": _C["ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK"],
    "uniform": _C["ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS"],
    "normal": _C["ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS"],
    "truncated_normal": _C["ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS"],
}
_RANDOM_DTYPES: Final = ("int32", "int64", "uint32", "uint64", "bfloat16", "float16", "float32")
_FLOATS: Final = ("bfloat16", "float16", "float32")


def _dtype_name(dtype: object, where: str, allowed: tuple[str, ...] | None = None) -> str:
    """A dtype given as a str or anything with a ``name`` (a numpy dtype or scalar type)."""
    if isinstance(dtype, str):
        name = dtype
    else:
        name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)  # type: ignore[assignment]
        if not isinstance(name, str):
            raise TypeError(
                f"{where}: dtype must be a str or a numpy dtype, not {type_name(dtype)}"
            )
    names = allowed or tuple(_DTYPES)
    if name not in names:
        raise ValueError(f"{where}: dtype must be one of {', '.join(names)}, got {name!r}")
    return name


def _device_buffer(obj: object, name: str, where: str) -> tuple[Any, int, int]:
    """``(record, address, nbytes)`` of a DeviceBuffer argument."""
    if not isinstance(obj, DeviceBuffer):
        raise TypeError(f"{where}: {name} must be a DeviceBuffer, not {type_name(obj)}")
    m = obj.mem
    p = m.ptr
    if not p:
        raise_closed(m, f"{where}: {name}")
    return m, p + obj.mem_offset, obj.window_nbytes


def _stream_for(stream: object, device: int, where: str) -> Stream:
    if stream is None:
        return current_stream(device)
    if not isinstance(stream, Stream):
        raise TypeError(f"{where}: stream must be a Stream or None, not {type_name(stream)}")
    if stream.device_index != device:
        raise ValueError(
            f"{where}: the buffers are on device {device} but the stream is on device "
            f"{stream.device_index}"
        )
    return stream


def _finish(st: Stream, *mems: Any) -> None:
    tok = st.stream_state
    for m in mems:
        if m.last is not tok:
            note(m, st)


def reduce_async(
    dst: DeviceBuffer,
    src: DeviceBuffer,
    op: str = "sum",
    dtype: object = "float32",
    *,
    nbytes: int | None = None,
    stream: Stream | None = None,
) -> None:
    """``dst[i] = op(dst[i], src[i])`` elementwise on the device (``aclrtReduceAsync``):
    accumulates ``src`` into ``dst`` as ``dtype`` elements. ``op`` is ``"sum"``,
    ``"max"``, ``"min"`` or ``"equal"`` (the runtime's kinds); ``nbytes`` (bytes,
    default all of ``src``) must be a multiple of the element size and fit both
    buffers, which must be on one device. Runs on ``stream`` (default: the current
    stream of that device) and returns at once.
    """
    where = "reduce_async()"
    dm, dp, dn = _device_buffer(dst, "dst", where)
    sm, sp, sn = _device_buffer(src, "src", where)
    if not isinstance(op, str) or op not in _REDUCE_OPS:
        if not isinstance(op, str):
            raise TypeError(f"{where}: op must be a str, not {type_name(op)}")
        raise ValueError(f"{where}: op must be one of {', '.join(_REDUCE_OPS)}, got {op!r}")
    name = _dtype_name(dtype, where)
    acl_type, esize, _fmt = _DTYPES[name]
    n = sn if nbytes is None else index_arg(nbytes, f"{where}: nbytes", "an int (bytes)")
    if n < 0 or n > sn or n > dn:
        raise ValueError(
            f"{where}: nbytes {n} must be in [0, min(len(src), len(dst))] = [0, {min(sn, dn)}]"
        )
    if n % esize:
        raise ValueError(
            f"{where}: nbytes {n} is not a multiple of the {name} size ({esize} bytes)"
        )
    if dm.device != sm.device:
        raise ValueError(
            f"{where}: dst is on device {dm.device} and src on device {sm.device}; "
            "both must be on one device"
        )
    st = _stream_for(stream, dm.device, where)
    if local.st.ctx is not st.ctx_ref:
        st.ensure_current()
    if n:
        check(
            lib.aclrtReduceAsync(dp, sp, n, _REDUCE_OPS[op], acl_type, st.raw_handle, 0),
            "aclrtReduceAsync",
        )
        _finish(st, dm, sm)


# ------------------------------------------------------------------- random
def _value_bytes(value: object, name: str, dtype: str, where: str) -> bytes:
    """``value`` encoded as one ``dtype`` element (little endian)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise TypeError(f"{where}: {name} must be a number, not {type_name(value)}") from None
    fmt = _DTYPES[dtype][2]
    try:
        if fmt == "bf16":
            f32 = struct.unpack("<I", struct.pack("<f", float(value)))[0]
            f32 += 0x7FFF + ((f32 >> 16) & 1)  # round to nearest even
            return struct.pack("<H", (f32 >> 16) & 0xFFFF)
        if fmt in ("<f", "<e"):
            return struct.pack(fmt, float(value))
        return struct.pack(fmt, int(value))
    except (OverflowError, struct.error) as exc:
        raise ValueError(f"{where}: {name} = {value!r} does not fit {dtype} ({exc})") from None


def _para(p: Any, data: bytes) -> None:
    p.isAddr = 0
    p.size = len(data)
    for i, b in enumerate(data):
        p.valueOrAddr[i] = b


def random_async(
    out: DeviceBuffer,
    distribution: str = "uniform",
    *,
    dtype: object = "float32",
    seed: int,
    counter: DeviceBuffer,
    count: int | None = None,
    low: float = 0.0,
    high: float = 1.0,
    mean: float = 0.0,
    std: float = 1.0,
    p: float = 0.5,
    stream: Stream | None = None,
) -> None:
    """Fill ``out`` with random numbers on the device (``aclrtRandomNumAsync``).

    ``distribution``: ``"uniform"`` (in ``[low, high)``), ``"normal"`` (``mean``,
    ``std``), ``"truncated_normal"`` (within two ``std`` of ``mean``) or
    ``"dropout_mask"`` (one bit per value, 1 = kept with probability ``1 - p``).
    ``dtype``: int32, int64, uint32, uint64, bfloat16, float16 or float32 (float only
    for the normals and dropout). ``count`` values (default: as many as ``out``
    holds) come from the Philox stream of ``seed`` at the 64-bit position held by
    ``counter`` (a DeviceBuffer of at least 8 bytes) when the task runs; the task
    advances that counter by ``count``, so consecutive calls continue the sequence.
    Deterministic per seed and counter. Returns at once.
    """
    where = "random_async()"
    om, op_, on = _device_buffer(out, "out", where)
    cm, cp, cn = _device_buffer(counter, "counter", where)
    if cn < 8:
        raise ValueError(f"{where}: counter must hold at least 8 bytes (a uint64), it has {cn}")
    if not isinstance(distribution, str) or distribution not in _DISTRIBUTIONS:
        if not isinstance(distribution, str):
            raise TypeError(f"{where}: distribution must be a str, not {type_name(distribution)}")
        raise ValueError(
            f"{where}: distribution must be one of {', '.join(_DISTRIBUTIONS)}, "
            f"got {distribution!r}"
        )
    name = _dtype_name(dtype, where, _RANDOM_DTYPES)
    if distribution != "uniform" and name not in _FLOATS:
        raise ValueError(f"{where}: {distribution} needs a floating-point dtype, got {name}")
    esize = _DTYPES[name][1]
    s = index_arg(seed, f"{where}: seed", "an int")
    if not 0 <= s < 1 << 64:
        raise ValueError(f"{where}: seed must be in [0, 2**64), got {s}")
    capacity = (on * 8) if distribution == "dropout_mask" else on // esize
    n = capacity if count is None else index_arg(count, f"{where}: count", "an int")
    if not 0 <= n <= capacity:
        raise ValueError(f"{where}: count {n} does not fit out ({on} bytes hold {capacity} values)")
    if n >= 1 << 32:
        raise ValueError(f"{where}: count {n} is above the runtime's limit of 2**32 - 1")
    if distribution == "uniform":
        lo, hi = _value_bytes(low, "low", name, where), _value_bytes(high, "high", name, where)
        if not float(low) < float(high):
            raise ValueError(f"{where}: the range is empty (low {low!r} >= high {high!r})")
    elif distribution == "dropout_mask":
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"{where}: p must be in [0, 1], got {p!r}")
        lo = _value_bytes(p, "p", name, where)
    else:
        if float(std) < 0.0:
            raise ValueError(f"{where}: std must be >= 0, got {std!r}")
        lo, hi = _value_bytes(mean, "mean", name, where), _value_bytes(std, "std", name, where)
    st = _stream_for(stream, om.device, where)
    if cm.device != om.device:
        raise ValueError(f"{where}: counter is on device {cm.device}, out on device {om.device}")
    if not n:
        return
    ffi = lowlevel.ffi
    info: Any = _local_info()
    info.dataType = _DTYPES[name][0]
    fp = info.randomNumFuncParaInfo
    fp.funcType = _DISTRIBUTIONS[distribution]
    if distribution == "uniform":
        _para(fp.paramInfo.uniformDisInfo.min, lo)
        _para(fp.paramInfo.uniformDisInfo.max, hi)
    elif distribution == "dropout_mask":
        _para(fp.paramInfo.dropoutBitmaskInfo.dropoutRation, lo)
    else:
        _para(fp.paramInfo.normalDisInfo.mean, lo)
        _para(fp.paramInfo.normalDisInfo.stddev, hi)
    info.randomResultAddr = ffi.cast("void *", op_)
    info.randomCounterAddr = ffi.cast("void *", cp)
    _para(info.randomSeed, struct.pack("<Q", s))
    _para(info.randomNum, struct.pack("<Q", n))
    if local.st.ctx is not st.ctx_ref:
        st.ensure_current()
    check(lib.aclrtRandomNumAsync(info, st.raw_handle, 0), "aclrtRandomNumAsync")
    _finish(st, om, cm)


_tls = threading.local()
_ZERO_INFO: Final = bytes(lowlevel.ffi.sizeof("aclrtRandomNumTaskInfo"))


def _local_info() -> Any:
    """The calling thread's task-info struct, zeroed (the runtime copies it at the call)."""
    info = getattr(_tls, "info", None)
    if info is None:
        info = _tls.info = lowlevel.ffi.new("aclrtRandomNumTaskInfo *")
    lowlevel.ffi.memmove(info, _ZERO_INFO, len(_ZERO_INFO))
    return info


class RandomGenerator:
    """A Philox random-number generator on a device: a ``seed`` and a 64-bit counter in
    device memory that every call advances (like torch's generator state), so
    consecutive calls never repeat values. ``uniform`` / ``normal`` /
    ``truncated_normal`` / ``dropout_mask`` fill a DeviceBuffer asynchronously on a
    stream (see :func:`random_async`)."""

    __slots__ = ("_counter", "_device", "_seed")

    def __init__(self, seed: int = 0, device: object = None) -> None:
        s = index_arg(seed, "RandomGenerator(): seed", "an int")
        if not 0 <= s < 1 << 64:
            raise ValueError(f"RandomGenerator(): seed must be in [0, 2**64), got {s}")
        self._seed = s
        self._counter = DeviceBuffer(8, device=device)  # type: ignore[arg-type]
        self._counter.memset(0)
        self._device = self._counter.mem.device

    @property
    def seed(self) -> int:
        """The Philox key."""
        return self._seed

    @property
    def counter(self) -> DeviceBuffer:
        """The 8-byte device buffer holding the position in the sequence."""
        return self._counter

    def offset(self) -> int:
        """The current position (synchronous: waits for the tasks that use the counter,
        then copies it to the host)."""
        if local.st.in_callback:
            refuse_in_callback("RandomGenerator.offset()")
        if sync_debug_active():
            check_sync("RandomGenerator.offset()")
        wait_streams(self._counter.mem, forget=False)
        return int.from_bytes(self._counter.copy_to_host(), "little")

    def _fill(self, out: DeviceBuffer, distribution: str, stream: Stream | None, **kw: Any) -> None:
        random_async(out, distribution, seed=self._seed, counter=self._counter, stream=stream, **kw)

    def uniform(
        self,
        out: DeviceBuffer,
        low: float = 0.0,
        high: float = 1.0,
        *,
        dtype: object = "float32",
        count: int | None = None,
        stream: Stream | None = None,
    ) -> None:
        """Fill ``out`` with values uniform in ``[low, high)``."""
        self._fill(out, "uniform", stream, low=low, high=high, dtype=dtype, count=count)

    def normal(
        self,
        out: DeviceBuffer,
        mean: float = 0.0,
        std: float = 1.0,
        *,
        dtype: object = "float32",
        count: int | None = None,
        stream: Stream | None = None,
    ) -> None:
        """Fill ``out`` with normal values of ``mean`` and ``std``."""
        self._fill(out, "normal", stream, mean=mean, std=std, dtype=dtype, count=count)

    def truncated_normal(
        self,
        out: DeviceBuffer,
        mean: float = 0.0,
        std: float = 1.0,
        *,
        dtype: object = "float32",
        count: int | None = None,
        stream: Stream | None = None,
    ) -> None:
        """Fill ``out`` with normal values redrawn until within two ``std`` of ``mean``."""
        self._fill(out, "truncated_normal", stream, mean=mean, std=std, dtype=dtype, count=count)

    def dropout_mask(
        self,
        out: DeviceBuffer,
        p: float = 0.5,
        *,
        dtype: object = "float32",
        count: int | None = None,
        stream: Stream | None = None,
    ) -> None:
        """Fill ``out`` with a bit mask, one bit per value, 1 (kept) with probability ``1 - p``."""
        self._fill(out, "dropout_mask", stream, p=p, dtype=dtype, count=count)

    def close(self) -> None:
        """Free the device counter (idempotent; pending tasks keep it until they ran)."""
        self._counter.close()

    def __enter__(self) -> RandomGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RandomGenerator seed={self._seed} on device {self._device}>"
