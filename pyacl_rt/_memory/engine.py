"""The copy engine: :func:`copy`, :func:`copy_2d`, :func:`memset`, :func:`memcpy_async`.

Which stream an operation runs on (the given one, else the current stream of the
device doing it), peer access between devices (enabled once per pair), staging through
pinned host memory between devices that cannot access each other, host-to-host copies
and host memsets (``memmove`` / ``memset`` without the GIL, after waiting for pending
work), and the ACL copy kinds. See :mod:`pyacl_rt._memory` for the rules.

Layer 6 (part of :mod:`pyacl_rt._memory`): imports layers 1-5, ``records``, ``args`` and
``keepalive``. The buffer classes sit above it; they register the staging buffer
factory (``_hooks.factories.staging_buffer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Union

from .. import _runtime as runtime
from .. import _sanitize, errors
from .._args import bool_arg, index_arg, size_arg
from .._hooks import factories
from .._raw._abi_runtime import CONSTANTS as _C
from .._state import (
    CtxRef,
    check,
    context_close_hooks,
    fast,
    gate_enter,
    gate_exit,
    lib,
    local,
    refuse_in_callback,
    sliced_wait_stream,
)
from .._stream import Stream, current_stream
from .._syncdebug import check_sync, sync_debug_active
from .args import (
    ReleaseOnExit,
    Side,
    check_2d,
    memset_range,
    offsets,
    resolve,
    resolve_pair,
)
from .keepalive import finish, host_wait, note
from .records import Mem, raise_closed
from .registry import memory

if TYPE_CHECKING:
    from .buffers import DeviceBuffer, HostBuffer

__all__ = [
    "ACL_MEMCPY_DEVICE_TO_DEVICE",
    "ACL_MEMCPY_DEVICE_TO_HOST",
    "ACL_MEMCPY_HOST_TO_DEVICE",
    "ACL_MEMCPY_HOST_TO_HOST",
    "ACL_MEM_MALLOC_HUGE_FIRST",
    "ACL_MEM_MALLOC_HUGE_ONLY",
    "ACL_MEM_MALLOC_NORMAL_ONLY",
    "copy",
    "copy_2d",
    "memcpy_async",
    "memset",
]

# ACL constants, from the generated table (pyacl_rt._raw._abi_runtime).
ACL_MEMCPY_HOST_TO_HOST: Final[int] = _C["ACL_MEMCPY_HOST_TO_HOST"]
ACL_MEMCPY_HOST_TO_DEVICE: Final[int] = _C["ACL_MEMCPY_HOST_TO_DEVICE"]
ACL_MEMCPY_DEVICE_TO_HOST: Final[int] = _C["ACL_MEMCPY_DEVICE_TO_HOST"]
ACL_MEMCPY_DEVICE_TO_DEVICE: Final[int] = _C["ACL_MEMCPY_DEVICE_TO_DEVICE"]
ACL_MEM_MALLOC_HUGE_FIRST: Final[int] = _C["ACL_MEM_MALLOC_HUGE_FIRST"]
ACL_MEM_MALLOC_HUGE_ONLY: Final[int] = _C["ACL_MEM_MALLOC_HUGE_ONLY"]
ACL_MEM_MALLOC_NORMAL_ONLY: Final[int] = _C["ACL_MEM_MALLOC_NORMAL_ONLY"]
#: Copy kind by (dst is device, src is device).
_KIND: Final = (
    (ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_DEVICE_TO_HOST),
    (ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_DEVICE),
)

# lowlevel.fast: the hand-written METH_FASTCALL entry points (same dispatch table);
# they raise the pyacl_rt error of a failed call themselves. Gated (pyacl_rt._state).
_aclrtMemcpyAsync = fast.memcpy_async
_aclrtMemcpy2dAsync = lib.aclrtMemcpy2dAsync
_aclrtMemsetAsync = fast.memset_async

#: Anything :func:`copy` accepts on one side.
BufferLike = Union["DeviceBuffer", "HostBuffer", Any]


def _host_memmove(dst: int, src: int, n: int) -> None:
    """``memmove`` between host addresses with the GIL released (ctypes foreign call;
    ctypes is imported on first use, not by ``import pyacl_rt``)."""
    import ctypes

    if _sanitize.armed:  # the race sanitizer: the host reads src and writes dst
        _sanitize.host_access(src, n, False)
        _sanitize.host_access(dst, n, True)
    ctypes.memmove(dst, src, n)


def _host_memset(dst: int, value: int, n: int) -> None:
    """``memset`` of host memory with the GIL released (see :func:`_host_memmove`)."""
    import ctypes

    if _sanitize.armed:
        _sanitize.host_access(dst, n, True)
    ctypes.memset(dst, value, n)


def _wait_before_pageable(d: Side, s: Side, st: Stream, non_blocking: bool) -> None:
    """Before a synchronous copy touching pageable host memory (a numpy array, a
    bytearray): the runtime's copy call itself waits - uninterruptibly, GIL released -
    for the work queued on the stream before it. Wait for that work here first, in
    slices, so that Ctrl-C interrupts the wait with nothing copied yet; the copy call
    then finds the stream idle. (``non_blocking=True`` is left alone: on hardware such a
    copy may return before the stream reaches it.)"""
    if not non_blocking and ((d.m is None and d.dev < 0) or (s.m is None and s.dev < 0)):
        sliced_wait_stream(st.raw_handle, -1)


def _enter_pinned(sides: tuple[Side, ...]) -> bool:
    """Before a host-side copy / memset touching pinned memory (a HostBuffer): enter
    the finalize gate, so that finalize (on another thread) cannot free that memory
    while ``memmove`` runs without the GIL; RuntimeFinalizedError once it started.
    True when entered (leave with ``gate_exit()``)."""
    for side in sides:
        if side.m is not None:
            gate_enter("a host-side copy or memset of pinned memory")
            return True
    return False


# ============================================================ stream choice
def _devices(d: Side, s: Side) -> tuple[int, ...]:
    """Devices a copy may run on, the default one first (dst's unless dst is host)."""
    if s.dev < 0 or s.dev == d.dev:
        return (d.dev,)
    if d.dev < 0:
        return (s.dev,)
    return (d.dev, s.dev)


def check_stream(stream: object, devices: tuple[int, ...]) -> None:
    """Refuse a bad ``stream`` argument of a device operation: not a Stream, closed
    (or finalized), or on a device the operation does not run on. Also used by
    zero-byte operations, which return before using the stream."""
    if stream is None:
        return
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be a Stream or None, not {type(stream).__name__}")
    if stream.ctx_ref.device < 0:
        stream.ensure_current()  # raises: closed, or its runtime was finalized
    if stream.dev_index not in devices:
        where = " or ".join(str(d) for d in devices)
        raise ValueError(
            f"stream is on device {stream.dev_index} but this operation runs on device {where}"
        )


def _pick_stream(stream: object, devices: tuple[int, ...]) -> Stream:
    """The stream a device operation runs on, with its context current."""
    if stream is None:
        st = current_stream(devices[0])
    else:
        check_stream(stream, devices)
        assert isinstance(stream, Stream)
        st = stream
    if local.st.ctx is not st.ctx_ref:
        st.ensure_current()
    return st


def _ensure_peer(ctx: CtxRef, peer: int) -> bool:
    """Enable access from ``ctx``'s device to ``peer`` once (``ctx`` is current).
    False when the runtime says the devices cannot access each other."""
    key = (ctx, peer)
    if key in memory.peers:
        return True
    s = local.st.scratch
    rc = lib.aclrtDeviceCanAccessPeer(s.i32, ctx.device, peer)
    if rc:
        check(rc, "aclrtDeviceCanAccessPeer")
    if not s.i32[0]:
        return False
    rc = lib.aclrtDeviceEnablePeerAccess(peer, 0)
    if rc:
        check(rc, "aclrtDeviceEnablePeerAccess")
    memory.peers.add(key)
    return True


def _staged_copy(d: Side, s: Side, n: int, doff: int, soff: int, st: Stream) -> None:
    """Across two devices without peer access: through a pinned host buffer, on the
    copy's stream where it fits and the current stream of the other device, waiting
    for each half (synchronous, whatever ``non_blocking`` said)."""
    if local.st.in_callback:
        refuse_in_callback("a cross-device copy between devices without peer access")
    if sync_debug_active():
        check_sync("a copy staged through pinned memory: the devices lack peer access")
    src_stream = st if st.dev_index == s.dev else current_stream(s.dev)
    dst_stream = st if st.dev_index == d.dev else current_stream(d.dev)
    stage = factories.staging_buffer.get()(n)
    try:
        copy(stage, s.obj, n, src_offset=soff, stream=src_stream)
        copy(d.obj, stage, n, dst_offset=doff, stream=dst_stream)
    finally:
        stage.close()


def _nothing_to_copy(d: Side, s: Side, stream: object) -> None:
    """A zero-byte copy touching device memory: the ``stream`` argument is still checked
    (it would be refused for a real copy), then both sides are released."""
    check_stream(stream, _devices(d, s))
    d.release()
    s.release()


def _copy_stream(d: Side, s: Side, stream: object, non_blocking: bool) -> tuple[Stream, bool]:
    """The stream a copy touching device memory runs on (its context made current),
    and whether the two sides can be copied directly (False: two devices without peer
    access; peer access is enabled once where possible). A synchronous copy is refused
    inside a host callback."""
    if not non_blocking and local.st.in_callback:
        refuse_in_callback("a synchronous copy (use non_blocking=True)")
    st = _pick_stream(stream, _devices(d, s))
    if d.dev >= 0 and s.dev >= 0 and d.dev != s.dev:
        return st, _ensure_peer(st.ctx_ref, s.dev if st.dev_index == d.dev else d.dev)
    return st, True


# =================================================================== copies
def copy(
    dst: BufferLike,
    src: BufferLike,
    nbytes: int | None = None,
    *,
    dst_offset: int = 0,
    src_offset: int = 0,
    stream: Stream | None = None,
    non_blocking: bool = False,
) -> None:
    """Copy ``nbytes`` bytes from ``src[src_offset:]`` to ``dst[dst_offset:]``.

    ``dst`` / ``src``: :class:`DeviceBuffer` (or a view), :class:`HostBuffer`, or any
    C-contiguous buffer-protocol object (numpy array, bytearray, memoryview; ``bytes``
    only as a source). The kind (H2D, D2H, D2D - also across devices -, H2H) follows
    from the objects. ``nbytes=None`` copies all of ``src`` from ``src_offset`` (it
    must fit into ``dst``). See the module docstring for streams, ``non_blocking``
    and what is kept alive.
    """
    if non_blocking is not False:
        non_blocking = bool_arg(non_blocking, "non_blocking")
    d, s = resolve_pair(dst, src)
    with ReleaseOnExit(d, s):
        n, doff, soff = offsets(d, s, nbytes, dst_offset, src_offset)
    do_copy(d, s, n, doff, soff, stream, non_blocking)


def do_copy(
    d: Side, s: Side, n: int, doff: int, soff: int, stream: object, non_blocking: bool
) -> None:
    sides = (d, s)
    if d.dev < 0 and s.dev < 0:
        with ReleaseOnExit(d, s, always=True):
            host_wait(sides, stream)
            if n:
                gated = _enter_pinned(sides)
                try:
                    _host_memmove(d.ptr + doff, s.ptr + soff, n)
                finally:
                    if gated:
                        gate_exit()
        return
    with ReleaseOnExit(d, s):
        if n == 0:
            _nothing_to_copy(d, s, stream)
            return
        st, direct = _copy_stream(d, s, stream, non_blocking)
        if not direct:
            with ReleaseOnExit(d, s, always=True):
                _staged_copy(d, s, n, doff, soff, st)
            return
        if not non_blocking and sync_debug_active():
            check_sync("a synchronous copy")
        _wait_before_pageable(d, s, st, non_blocking)
        kind = _KIND[d.dev >= 0][s.dev >= 0]
        _aclrtMemcpyAsync(d.ptr + doff, d.n - doff, s.ptr + soff, n, kind, st.raw_handle)
    finish(st, sides, non_blocking)


def memcpy_async(
    dst: DeviceBuffer | HostBuffer, src: DeviceBuffer | HostBuffer, nbytes: int, stream: Stream
) -> None:
    """Fast path: enqueue a copy of ``nbytes`` bytes between two owned buffers on
    ``stream`` (``aclrtMemcpyAsync``), from the start of ``src`` to the start of
    ``dst`` (slice the buffers for offsets). Returns at once; no per-call allocation,
    no event: the buffers remember the stream so that freeing them waits for it.
    """
    try:
        dm = dst.mem
        sm = src.mem
        sd = stream.dev_index
        tok = stream.stream_state
    except AttributeError:
        _fast_type_error(dst, src, stream)
        raise
    dp = dm.ptr
    sp = sm.ptr
    if not (dp and sp):
        raise_closed(dm if not dp else sm, "dst" if not dp else "src")
    dn = dst.window_nbytes
    if nbytes.__class__ is not int or not 0 <= nbytes <= dn or nbytes > src.window_nbytes:
        nbytes = _fast_size(nbytes, dn, src.window_nbytes)
    ddev = dm.device
    sdev = sm.device
    if ddev == sd:
        if sdev == sd:
            kind = ACL_MEMCPY_DEVICE_TO_DEVICE
        elif sdev < 0:
            kind = ACL_MEMCPY_HOST_TO_DEVICE
        else:
            kind = -1
    elif ddev < 0 and sdev == sd:
        kind = ACL_MEMCPY_DEVICE_TO_HOST
    else:
        kind = -1
    if kind < 0:
        # Rare: across devices (peer access), host-to-host, or a stream of another
        # device (raises): the general path.
        copy(dst, src, nbytes, stream=stream, non_blocking=True)
        return
    if local.st.ctx is not stream.ctx_ref:
        stream.ensure_current()
    if nbytes:
        _aclrtMemcpyAsync(
            dp + dst.mem_offset, dn, sp + src.mem_offset, nbytes, kind, stream.raw_handle
        )
        if dm.last is not tok:
            note(dm, stream)
        if sm.last is not tok:
            note(sm, stream)


def _fast_type_error(dst: object, src: object, stream: object) -> None:
    for name, obj in (("dst", dst), ("src", src)):
        # DeviceBuffer (or a view) and HostBuffer are the objects with an allocation record
        if not isinstance(getattr(obj, "mem", None), Mem):
            raise TypeError(
                f"memcpy_async: {name} must be a DeviceBuffer or HostBuffer, not "
                f"{type(obj).__name__} (use copy() for other objects)"
            )
    if not isinstance(stream, Stream):
        raise TypeError(f"memcpy_async: stream must be a Stream, not {type(stream).__name__}")


def _fast_size(nbytes: object, dn: int, sn: int) -> int:
    """memcpy_async's slow path for ``nbytes``: an ``__index__`` integer (e.g.
    ``numpy.int64``) that fits both sides is returned as an int; else the error."""
    n = size_arg(nbytes, "nbytes")
    if n > sn:
        raise ValueError(f"nbytes {n} runs past the end of src ({sn} bytes)")
    if n > dn:
        raise ValueError(f"nbytes {n} runs past the end of dst ({dn} bytes)")
    return n


def copy_2d(
    dst: BufferLike,
    dpitch: int,
    src: BufferLike,
    spitch: int,
    width: int,
    height: int,
    *,
    dst_offset: int = 0,
    src_offset: int = 0,
    stream: Stream | None = None,
    non_blocking: bool = False,
) -> None:
    """Copy a ``height`` x ``width`` byte matrix: row ``i`` goes from
    ``src[src_offset + i*spitch :][:width]`` to ``dst[dst_offset + i*dpitch :][:width]``
    (``aclrtMemcpy2dAsync``; host-to-host is done row by row on the host).

    Requires ``width <= dpitch``, ``width <= spitch`` and
    ``(height - 1) * pitch + width`` bytes after each offset.
    """
    if non_blocking is not False:
        non_blocking = bool_arg(non_blocking, "non_blocking")
    d, s = resolve_pair(dst, src)
    with ReleaseOnExit(d, s):
        dp, sp, w, h, doff, soff = check_2d(
            d, s, dpitch, spitch, width, height, dst_offset, src_offset
        )
    sides = (d, s)
    if d.dev < 0 and s.dev < 0:
        with ReleaseOnExit(d, s, always=True):
            host_wait(sides, stream)
            if w and h:
                base_d = d.ptr + doff
                base_s = s.ptr + soff
                gated = _enter_pinned(sides)
                try:
                    for i in range(h):
                        _host_memmove(base_d + i * dp, base_s + i * sp, w)
                finally:
                    if gated:
                        gate_exit()
        return
    with ReleaseOnExit(d, s):
        if not (w and h):
            _nothing_to_copy(d, s, stream)
            return
        st, direct = _copy_stream(d, s, stream, non_blocking)
        if not direct:
            raise errors.FeatureNotSupportedError(
                f"devices {s.dev} and {d.dev} cannot access each other: 2D copies between "
                "them are not supported (copy through a HostBuffer)",
                function="aclrtDeviceCanAccessPeer",
            )
        if not non_blocking and sync_debug_active():
            check_sync("a synchronous copy")
        _wait_before_pageable(d, s, st, non_blocking)
        kind = _KIND[d.dev >= 0][s.dev >= 0]
        rc = _aclrtMemcpy2dAsync(d.ptr + doff, dp, s.ptr + soff, sp, w, h, kind, st.raw_handle)
        if rc:
            check(rc, "aclrtMemcpy2dAsync")
    finish(st, sides, non_blocking)


def memset(
    buf: BufferLike,
    value: int,
    nbytes: int | None = None,
    offset: int = 0,
    stream: Stream | None = None,
    *,
    non_blocking: bool = False,
) -> None:
    """Set ``nbytes`` bytes of ``buf`` from ``offset`` (default: to the end) to the byte
    ``value`` (0..255).

    Device memory: ``aclrtMemsetAsync`` on ``stream`` (default: the current stream of
    the buffer's device), waited for unless ``non_blocking``. Host memory (HostBuffer
    or a writable buffer-protocol object): filled on the host at once, after waiting
    for ``stream`` and pending work on the buffer.
    """
    value = index_arg(value, "value", "an int byte value (0..255)")
    if non_blocking is not False:
        non_blocking = bool_arg(non_blocking, "non_blocking")
    if not 0 <= value <= 255:
        raise ValueError(f"value must be a byte value 0..255, got {value}")
    b = resolve(buf, "buf", True)
    with ReleaseOnExit(b):
        n, off = memset_range(b, nbytes, offset)
        sides = (b,)
        if b.dev < 0:
            host_wait(sides, stream)
            if n:
                gated = _enter_pinned(sides)
                try:
                    _host_memset(b.ptr + off, value, n)
                finally:
                    if gated:
                        gate_exit()
            b.release()
            return
        if n == 0:
            check_stream(stream, (b.dev,))
            b.release()
            return
        if not non_blocking and local.st.in_callback:
            refuse_in_callback("a synchronous memset (use non_blocking=True)")
        if not non_blocking and sync_debug_active():
            check_sync("a synchronous memset")
        st = _pick_stream(stream, (b.dev,))
        _aclrtMemsetAsync(b.ptr + off, b.n - off, value, n, st.raw_handle)
    finish(st, sides, non_blocking)


# ================================================================ lifecycle
def _forget_peers() -> None:
    memory.peers.clear()


def _forget_context_peers(ctx: CtxRef) -> None:
    for key in [k for k in memory.peers if k[0] is ctx]:
        memory.peers.discard(key)


context_close_hooks.add(_forget_context_peers, runtime.PRIORITY_MEMORY + 10)
runtime.register_release_hook(_forget_peers, runtime.PRIORITY_MEMORY)
