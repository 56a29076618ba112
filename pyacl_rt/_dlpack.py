"""DLPack: ``buf.__dlpack__()`` / ``buf.__dlpack_device__()`` and :func:`from_dlpack`.

Export (``DeviceBuffer`` / ``HostBuffer`` methods, the Python array API protocol)
--------------------------------------------------------------------------------
* ``__dlpack_device__()`` is ``(1, 0)`` (``kDLCPU``) for a HostBuffer, so
  ``numpy.from_dlpack(h)`` is a zero-copy view of the pinned memory, and
  ``(12, index)`` for a DeviceBuffer. DLPack's ``DLDeviceType`` has no Ascend entry
  (v1.0/v1.1); ``12`` is ``kDLExtDev``, the value PyTorch gives its out-of-tree
  ("PrivateUse1") backends, i.e. what torch_npu's NPU tensors report.
  :data:`NPU_DEVICE_TYPE` names it.
* ``__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)`` returns a
  PyCapsule of a 1-D ``uint8`` tensor of ``nbytes`` elements (bytes) with explicit
  strides: named ``"dltensor_versioned"`` (``DLManagedTensorVersioned``, version 1.0)
  when ``max_version >= (1, 0)``, else the legacy ``"dltensor"``. ``buf.as_dlpack(dtype,
  shape)`` exports the same memory with another element type and shape.
* ``stream`` is where the consumer will use the data. DeviceBuffer: ``None`` waits on
  the host for the work pending on the buffer (the streams it was used on); ``-1`` does
  nothing; an ``aclrtStream`` handle (int; ``0`` = the device's default stream) or a
  :class:`~pyacl_rt.Stream` makes that stream wait (an event per pending stream,
  no host wait; a pending stream of another device is synchronized instead).
  HostBuffer: ``None`` waits for pending work, ``-1`` does nothing, anything else is a
  ``BufferError`` (host memory has no stream).
* ``dl_device`` / ``copy``: export to ``(1, 0)`` or to ``(12, index)`` of another device
  copies (synchronously, after the pending work) into a new buffer that the capsule
  owns; so does ``copy=True``. ``copy=False`` with a copy needed is a ``BufferError``.
  A copied versioned tensor has the ``IS_COPIED`` flag.

Lifetime (the safe choice): each export keeps the buffer (for a view: the allocation
it was sliced from) alive until the consumer's deleter runs, and while it is alive
``close()`` raises ``BufferError`` - the rule HostBuffer already has for memoryview /
numpy exports - and so does :func:`pyacl_rt.finalize` (unless the consumer is
a pyacl_rt import, which finalize releases first). Deleting the Python buffer is fine:
the memory stays valid until the consumer lets go. A capsule nobody consumed calls its
deleter when it is collected. The deleter runs exactly once (see
``pyacl_rt/_dlpack_c.c``), from any thread.

Import: :func:`from_dlpack`
---------------------------
Gives a buffer over the producer's memory, holding the producer's tensor until the
buffer is closed or collected (then its deleter is called once, after waiting for
the streams the buffer was used on): a :class:`~pyacl_rt.DeviceBuffer` for
``kDLExtDev`` (12) memory, a :class:`~pyacl_rt.HostBuffer` for host memory
(``kDLCPU``, ``kDLCUDAHost``, ``kDLROCMHost``). Such a HostBuffer is pageable unless
the producer's memory was pinned (e.g. a pyacl_rt HostBuffer): every copy accepts it
(ACL copies pageable memory synchronously). Checked before anything is wrapped:
C-contiguous layout (``BufferError`` otherwise), whole-byte element types
(``TypeError`` for sub-byte and opaque ones), ``nbytes = prod(shape) * itemsize``
without overflow, a non-NULL address, a known device (``BufferError``) and, for
device memory, that the runtime sees device memory there (``aclrtPointerGetAttributes``,
where the library has it and answers; otherwise the producer's word stands). Read-only
tensors are copied (``copy=False``: BufferError).

Layer 7: imports layers 1-6 (registers the export hooks of :mod:`pyacl_rt._memory.buffers`).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Final

from . import _dlpack_c, errors
from . import _runtime as runtime
from ._device import Device, context_for, device_index_arg
from ._hooks import factories, fork_hooks
from ._log import get_logger
from ._memory import records as _rec
from ._memory.args import Side
from ._memory.buffers import DeviceBuffer, HostBuffer
from ._memory.engine import copy as _copy
from ._memory.keepalive import host_wait
from ._memory.records import Mem, raise_closed
from ._memory.registry import memory
from ._state import CtxRef, check, lib
from ._stream import Stream, current_stream, default_stream, live_streams
from ._syncdebug import check_sync, sync_debug_active
from .lowlevel import ffi

__all__ = [
    "KDL_CPU",
    "KDL_CUDA_HOST",
    "KDL_EXT_DEV",
    "KDL_ROCM_HOST",
    "NPU_DEVICE_TYPE",
    "DLPackView",
    "from_dlpack",
]

#: DLPack ``DLDeviceType`` values used here (from the DLPack specification).
KDL_CPU: Final = 1
KDL_CUDA_HOST: Final = 3
KDL_ROCM_HOST: Final = 11
KDL_EXT_DEV: Final = 12
#: The device type pyacl_rt exports NPU memory as (and imports): ``kDLExtDev``.
NPU_DEVICE_TYPE: Final = KDL_EXT_DEV
_HOST_TYPES: Final = (KDL_CPU, KDL_CUDA_HOST, KDL_ROCM_HOST)
_DEVICE_NAMES: Final = {
    1: "kDLCPU",
    2: "kDLCUDA",
    3: "kDLCUDAHost",
    4: "kDLOpenCL",
    7: "kDLVulkan",
    8: "kDLMetal",
    9: "kDLVPI",
    10: "kDLROCM",
    11: "kDLROCMHost",
    12: "kDLExtDev",
    13: "kDLCUDAManaged",
    14: "kDLOneAPI",
    15: "kDLWebGPU",
    16: "kDLHexagon",
    17: "kDLMAIA",
}

#: ``DLManagedTensorVersioned.flags`` bits.
FLAG_READ_ONLY: Final = 1
FLAG_IS_COPIED: Final = 2

#: ``DLDataTypeCode`` values: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLOpaqueHandle 3,
#: kDLBfloat 4, kDLComplex 5, kDLBool 6; 7.. are the float8/6/4 formats of DLPack 1.1.
_OPAQUE: Final = 3
_MAX_CODE: Final = 17
#: dtype name -> (code, bits) for :meth:`as_dlpack`.
_DTYPES: Final = {
    "bool": (6, 8),
    **{f"int{b}": (0, b) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (1, b) for b in (8, 16, 32, 64)},
    **{f"float{b}": (2, b) for b in (16, 32, 64)},
    "bfloat16": (4, 16),
    "complex64": (5, 64),
    "complex128": (5, 128),
}
_UINT8: Final = (1, 8)
_ACL_MEM_LOCATION_TYPE_DEVICE: Final = 1
_ACL_MEM_LOCATION_TYPE_MANAGED: Final = 3
_INT64_MAX: Final = 2**63 - 1
_log = get_logger("pyacl_rt")


def _device_name(kind: int) -> str:
    return _DEVICE_NAMES.get(kind, "unknown")


# ==================================================================== export
class _Export:
    """One live export: keeps the buffer that owns the allocation alive; the tensor's
    deleter calls it once. ``internal``: consumed by a pyacl_rt import."""

    __slots__ = ("buf", "internal", "m")

    def __init__(self, buf: object, m: Mem) -> None:
        self.buf: object = buf
        self.m = m
        self.internal = False

    def __call__(self) -> None:
        m = self.m
        with memory.live_lock, contextlib.suppress(ValueError):
            m.exports.remove(self)
        self.buf = None


def _device_of(buf: DeviceBuffer | HostBuffer) -> tuple[int, int]:
    """``__dlpack_device__`` of an open buffer."""
    m = buf.mem
    if not m.ptr:
        raise_closed(m, type(buf).__name__)
    if isinstance(buf, HostBuffer):
        return (KDL_CPU, 0)
    return (NPU_DEVICE_TYPE, m.device)


def _check_layout(n: int, dtype: object, shape: object) -> tuple[int, int, tuple[int, ...]]:
    """(code, bits, shape) of ``dtype`` / ``shape`` over ``n`` bytes."""
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or dtype
    spec = _DTYPES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise TypeError(
            f"unsupported dtype {dtype!r}: expected one of {', '.join(sorted(_DTYPES))}"
        )
    code, bits = spec
    itemsize = bits // 8
    if shape is None:
        if n % itemsize:
            raise ValueError(f"{n} bytes is not a whole number of {name} items ({itemsize} bytes)")
        return code, bits, (n // itemsize,)
    if not isinstance(shape, tuple):
        raise TypeError(f"shape must be a tuple of ints, not {type(shape).__name__}")
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"shape entries must be ints, not {type(d).__name__}")
        if d < 0:
            raise ValueError(f"shape entries must be >= 0, got {shape}")
    if len(shape) > 64:
        raise ValueError(f"shape has {len(shape)} dimensions (at most 64)")
    want = math.prod(shape) * itemsize
    if want != n:
        raise ValueError(f"shape {shape} of {name} is {want} bytes but the buffer has {n} bytes")
    return code, bits, shape


def _wants_versioned(max_version: object) -> bool:
    if max_version is None:
        return False
    if (
        not isinstance(max_version, tuple)
        or len(max_version) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in max_version)
    ):
        raise TypeError(f"max_version must be None or a (major, minor) tuple, not {max_version!r}")
    return bool(max_version[0] >= 1)


def _parse_device(value: object, what: str) -> tuple[int, int]:
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise TypeError(f"{what} must be a (device_type, device_id) tuple of ints, not {value!r}")
    kind, dev = value
    if kind == KDL_CPU and dev == 0:
        return (KDL_CPU, 0)
    if kind == NPU_DEVICE_TYPE:
        return (NPU_DEVICE_TYPE, device_index_arg(dev))
    raise BufferError(
        f"{what} {value} ({_device_name(kind)}): pyacl_rt buffers export to (1, 0) (kDLCPU) "
        f"or ({NPU_DEVICE_TYPE}, index) (kDLExtDev, an NPU) only"
    )


def _host_sync(m: Mem) -> None:
    """Wait on the host for the work pending on ``m`` (memory's host-side rule)."""
    side = Side()
    side.m = m
    host_wait((side,), None)


#: Consumer streams pyacl_rt has no Stream object for (created by other code), wrapped
#: once per context and handle: the events their waits use stay referenced on them
#: (``Stream.keep_alive``) until released (next use, a device synchronize, finalize).
_foreign: dict[tuple[CtxRef, int], Stream] = {}


def _consumer_stream(stream: object, device: int) -> Stream:
    """The Stream object of the consumer's ``stream`` (a Stream or a handle)."""
    if isinstance(stream, Stream):
        if stream.dev_index != device:
            raise ValueError(
                f"stream is on device {stream.dev_index} but the buffer is on device {device}"
            )
        return stream
    assert isinstance(stream, int)
    default = default_stream(device)
    if stream == 0:
        return default
    for live in live_streams.snapshot():
        if live.raw_handle == stream and live.dev_index == device and not live.closed:
            return live
    if default.resolved_handle == stream:
        return default
    key = (context_for(device), stream)
    wrapped = _foreign.get(key)
    if wrapped is None or wrapped.closed:
        wrapped = _foreign[key] = Stream.from_handle(stream, device)
    return wrapped


def _check_stream_arg(stream: object) -> None:
    if stream is None or isinstance(stream, Stream):
        return
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(
            "stream must be None, -1, an aclrtStream handle (int) or a Stream, not "
            f"{type(stream).__name__}"
        )
    if stream < -1:
        raise ValueError(f"stream must be None, -1 or an aclrtStream handle >= 0, got {stream}")


def _make_safe(buf: DeviceBuffer | HostBuffer, stream: object) -> None:
    """Order the work pending on ``buf`` before the consumer's use on ``stream``."""
    m = buf.mem
    if isinstance(buf, HostBuffer):
        if stream is not None and stream != -1:
            raise BufferError(
                f"a HostBuffer is host memory (kDLCPU): stream must be None or -1, not {stream!r}"
            )
        if stream is None:
            _host_sync(m)
        return
    if stream is None:
        _host_sync(m)
        return
    if stream == -1 or not (m.streams or isinstance(stream, Stream)):
        return  # no synchronization asked, or nothing pending (a handle needs no check)
    consumer = _consumer_stream(stream, m.device)
    for r in list(m.streams):
        s = r()
        if s is None or s.closed or s == consumer:
            continue
        if s.dev_index == consumer.dev_index:
            consumer.wait_stream(s)
        else:
            s.synchronize()


def _capsule(
    buf: DeviceBuffer | HostBuffer,
    layout: tuple[int, int, tuple[int, ...]] | None,
    versioned: bool,
    flags: int,
) -> Any:
    m = buf.mem
    code, bits, shape = (
        layout if layout is not None else (_UINT8[0], _UINT8[1], (buf.window_nbytes,))
    )
    kind, dev = _device_of(buf)
    owner = buf.base if isinstance(buf, DeviceBuffer) and buf.base is not None else buf
    token = _Export(owner, m)
    p = m.add_export(token)  # atomic with close()
    if not p:
        raise_closed(m, type(buf).__name__)
    try:
        return _dlpack_c.make_capsule(
            p + buf.mem_offset if m.nbytes else 0,  # DeviceBuffer(0) has no address (NULL)
            kind,
            dev,
            shape,
            code,
            bits,
            1,
            flags,
            versioned,
            token,
        )
    except BaseException:
        token()
        raise


def _export(
    buf: DeviceBuffer | HostBuffer,
    stream: object,
    max_version: object,
    dl_device: object,
    copy: object,
    layout: tuple[int, int, tuple[int, ...]] | None = None,
) -> Any:
    """``__dlpack__`` of a buffer (see the module docstring)."""
    versioned = _wants_versioned(max_version)
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be None, True or False, not {type(copy).__name__}")
    _check_stream_arg(stream)
    here = _device_of(buf)
    target = here if dl_device is None else _parse_device(dl_device, "dl_device")
    if target == here and not copy:
        _make_safe(buf, stream)
        return _capsule(buf, layout, versioned, 0)
    if copy is False:
        raise BufferError(
            f"exporting to {target} from {here} needs a copy, and copy=False forbids it"
        )
    if target[0] == KDL_CPU and stream not in (None, -1):
        raise BufferError(
            f"export to host memory (kDLCPU): stream must be None or -1, not {stream}"
        )
    # The capsule holds the only reference to the copy: it is freed with the tensor.
    return _capsule(_copy_of(buf, target), layout, versioned, FLAG_IS_COPIED)


def _copy_of(buf: DeviceBuffer | HostBuffer, target: tuple[int, int]) -> DeviceBuffer | HostBuffer:
    """A new buffer on ``target`` with the contents of ``buf`` (after its pending work)."""
    n = buf.window_nbytes
    if n == 0:
        raise BufferError("cannot copy an empty (0-byte) buffer for DLPack")
    if sync_debug_active():
        check_sync("a synchronous copy for a DLPack export")
    _host_sync(buf.mem)
    new: DeviceBuffer | HostBuffer = (
        HostBuffer(n) if target[0] == KDL_CPU else DeviceBuffer(n, device=target[1])
    )
    try:
        _copy(new, buf)
    except BaseException:
        new.close()
        raise
    return new


class DLPackView:
    """A buffer seen as a typed tensor, from :meth:`DeviceBuffer.as_dlpack` /
    :meth:`HostBuffer.as_dlpack`: ``__dlpack__`` exports ``buffer``'s memory with element
    type ``dtype`` and ``shape`` (C-contiguous). It references the buffer; the export
    follows the buffer's rules (lifetime, streams)."""

    __slots__ = ("_layout", "buffer", "dtype", "shape")

    def __init__(self, buffer: DeviceBuffer | HostBuffer, dtype: Any, shape: Any) -> None:
        self._layout = _check_layout(buffer.nbytes, dtype, shape)
        self.buffer = buffer
        self.shape: tuple[int, ...] = self._layout[2]
        self.dtype: str = next(k for k, v in _DTYPES.items() if v == self._layout[:2])

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """DLPack capsule of the buffer as ``dtype`` / ``shape`` (see the buffer's)."""
        return _export(self.buffer, stream, max_version, dl_device, copy, self._layout)

    def __dlpack_device__(self) -> tuple[int, int]:
        """The buffer's ``__dlpack_device__()``."""
        return _device_of(self.buffer)

    def __repr__(self) -> str:
        return f"<DLPackView {self.dtype}{list(self.shape)} of {self.buffer!r}>"


# ==================================================================== import
def _itemsize(code: int, bits: int, lanes: int) -> int:
    if code == _OPAQUE:
        raise TypeError("DLPack dtype kDLOpaqueHandle has no byte layout: cannot import it")
    if code > _MAX_CODE:
        raise TypeError(f"unknown DLPack dtype code {code} (bits {bits})")
    if bits == 0 or bits % 8 or lanes == 0:
        raise TypeError(
            f"DLPack dtype code {code} with {bits} bits x {lanes} lanes: only whole-byte "
            "element types can be imported (sub-byte types are not supported)"
        )
    return bits // 8 * lanes


def _contiguous_nbytes(
    shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int
) -> int:
    for d in shape:
        if d < 0:
            raise ValueError(f"DLPack tensor has a negative dimension: shape {shape}")
    count = math.prod(shape)
    nbytes = count * itemsize
    if nbytes > _INT64_MAX:
        raise ValueError(f"DLPack tensor of shape {shape} is too large ({nbytes} bytes)")
    if strides is not None and count > 1:
        expect = 1
        for d, s in zip(reversed(shape), reversed(strides), strict=True):
            if d != 1 and s != expect:
                raise BufferError(
                    f"DLPack tensor is not C-contiguous (shape {shape}, strides {strides} "
                    "in elements): pyacl_rt buffers are one contiguous block; make it "
                    "contiguous first (e.g. numpy.ascontiguousarray / tensor.contiguous())"
                )
            expect *= d
    return nbytes


def _check_device_pointer(ptr: int, index: int) -> None:
    """Refuse an address the runtime does not see as device memory (when the library
    has ``aclrtPointerGetAttributes`` and it answers)."""
    attrs = ffi.new("aclrtPtrAttributes *")
    ctx = context_for(index)
    ctx.make_current()
    rc = lib.aclrtPointerGetAttributes(ptr, attrs)
    if rc:
        # An older library without the function, or a runtime that cannot answer for
        # this address: no check (the producer's word stands), the error is consumed.
        try:
            check(rc, "aclrtPointerGetAttributes")
        except errors.AclError as exc:
            _log.debug("pyacl_rt: DLPack import of 0x%x not checked: %s", ptr, exc)
            return
    kind = attrs.location.type
    if kind not in (_ACL_MEM_LOCATION_TYPE_DEVICE, _ACL_MEM_LOCATION_TYPE_MANAGED):
        raise BufferError(
            f"DLPack tensor claims device memory ({NPU_DEVICE_TYPE}, {index}) but the runtime "
            f"does not know 0x{ptr:x} as device memory (location type {kind})"
        )


def _wrap_device(ptr: int, n: int, index: int, release: Any) -> DeviceBuffer:
    m = Mem(ptr, n, index, context_for(index))
    m.release = release
    view = DeviceBuffer.__new__(DeviceBuffer)
    view.own_mem(m)
    return view


def _wrap_host(ptr: int, n: int, release: Any) -> HostBuffer:
    m = Mem(ptr, n, -1, None)
    m.release = release
    view = HostBuffer.__new__(HostBuffer)
    view.own_mem(m)  # released (the producer's deleter) when the last reference is gone
    return view


def _fetch_capsule(x: object) -> Any:
    """The capsule of ``x`` (a producer or a capsule), with the stream argument right
    for its device."""
    dlpack = getattr(x, "__dlpack__", None)
    if dlpack is None:
        if type(x).__name__ == "PyCapsule":
            return x
        raise TypeError(
            "from_dlpack: x must be an object with __dlpack__ (a numpy array, a torch "
            "tensor, a DeviceBuffer, a HostBuffer, ...) or a DLPack capsule, not "
            f"{type(x).__name__}"
        )
    get_device = getattr(x, "__dlpack_device__", None)
    if get_device is None:
        return dlpack()  # an early producer: no device query, no stream argument
    device = get_device()
    if (
        not isinstance(device, tuple)
        or len(device) != 2
        or not all(isinstance(v, int) for v in device)
    ):
        raise TypeError(f"__dlpack_device__() returned {device!r}, not (device_type, device_id)")
    kind, dev = int(device[0]), int(device[1])
    stream: int | None = None
    if kind == NPU_DEVICE_TYPE:
        stream = current_stream(device_index_arg(dev)).resolved_handle
    elif kind not in _HOST_TYPES:
        raise BufferError(_unsupported_device(kind, dev))
    try:
        return dlpack(stream=stream, max_version=(1, 0))
    except TypeError:
        return dlpack(stream=stream)  # a producer older than DLPack 1.0


def _unsupported_device(kind: int, dev: int) -> str:
    return (
        f"DLPack device ({kind}, {dev}) ({_device_name(kind)}) is not supported: pyacl_rt "
        f"imports host memory (kDLCPU, kDLCUDAHost, kDLROCMHost) and NPU memory "
        f"({NPU_DEVICE_TYPE}, kDLExtDev)"
    )


def _target(device: object) -> int | None:
    """``from_dlpack``'s ``device``: None (where the data is), -1 (host), an index."""
    if device is None:
        return None
    if device == "cpu":
        return -1
    return device_index_arg(device)


def from_dlpack(
    x: object, /, *, device: Device | int | str | None = None, copy: bool | None = None
) -> DeviceBuffer | HostBuffer:
    """A buffer over the memory of a DLPack producer ``x`` (numpy array, torch tensor,
    DeviceBuffer, HostBuffer, ...; or a DLPack capsule), zero-copy.

    Device memory (``kDLExtDev``) gives a :class:`~pyacl_rt.DeviceBuffer`, host
    memory a :class:`~pyacl_rt.HostBuffer`, of ``prod(shape) * itemsize`` bytes.
    The buffer holds the producer's tensor: its deleter is called once, when the buffer
    is closed or collected (after waiting for the streams the buffer was used on).
    The producer is asked to order its pending work before the current stream of the
    device (``stream`` = that stream's handle).

    ``device``: None (where the data is), ``"cpu"`` (a HostBuffer) or a device
    (index, ``Device``, ``"npu:N"``); a different place means a copy. ``copy``: None
    (copy only if needed: another ``device``, or a read-only tensor), True (always a new
    buffer), False (never; ``BufferError`` if needed). Refused with a typed error that
    names the problem: non-contiguous tensors (``BufferError``), sub-byte or opaque
    element types (``TypeError``), other devices such as CUDA (``BufferError``), device
    pointers the runtime does not know as device memory, capsules used twice.
    """
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be None, True or False, not {type(copy).__name__}")
    want = _target(device)
    runtime.ensure_initialized()
    handle, fields = _dlpack_c.consume(_fetch_capsule(x))
    try:
        return _import(handle, fields, want, copy)
    except BaseException:
        handle.release()
        raise


def _import(
    handle: _dlpack_c.Imported, fields: tuple[Any, ...], want: int | None, copy: bool | None
) -> DeviceBuffer | HostBuffer:
    data, offset, kind, dev, shape, strides, code, bits, lanes, flags, _ver = fields
    n = _contiguous_nbytes(shape, strides, _itemsize(code, bits, lanes))
    ptr = data + offset
    if ptr >= 2**64:
        raise ValueError(f"DLPack data 0x{data:x} + byte_offset {offset} overflows")
    if kind in _HOST_TYPES:
        here = -1
    elif kind == NPU_DEVICE_TYPE:
        here = device_index_arg(dev)
    else:
        raise BufferError(_unsupported_device(kind, dev))
    if not ptr:
        if n or here < 0:
            raise BufferError("DLPack tensor has a NULL data pointer: nothing to wrap")
        ptr = _rec.ZERO_SIZE_BASE  # an empty device tensor: a DeviceBuffer(0)
    elif here >= 0:
        _check_device_pointer(ptr, here)
    target = here if want is None else want
    read_only = bool(flags & FLAG_READ_ONLY)
    need_copy = bool(copy) or read_only or target != here
    if need_copy and copy is False:
        why = "a read-only tensor" if read_only else f"a move from {here} to {target}"
        raise BufferError(f"importing {why} needs a copy, and copy=False forbids it")
    if need_copy and n == 0:
        raise BufferError("cannot copy an empty (0-byte) DLPack tensor")
    view: DeviceBuffer | HostBuffer = (
        _wrap_host(ptr, n, handle.release)
        if here < 0
        else _wrap_device(ptr, n, here, handle.release)
    )
    own = handle.own_release
    if isinstance(own, _Export):
        own.internal = True
    if not need_copy:
        return view
    try:
        if sync_debug_active():
            check_sync("a synchronous copy of the imported DLPack tensor")
        new: DeviceBuffer | HostBuffer = HostBuffer(n) if target < 0 else DeviceBuffer(n, target)
        try:
            _copy(new, view)
        except BaseException:
            new.close()
            raise
        return new
    finally:
        view.close()


fork_hooks.add(_foreign.clear, runtime.PRIORITY_MEMORY + 60)
factories.dlpack_export.set(_export)
factories.dlpack_device.set(_device_of)
factories.dlpack_typed.set(DLPackView)
