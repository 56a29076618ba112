"""Device and pinned host memory, and copies between any two buffers.

* :class:`DeviceBuffer` owns an ``aclrtMalloc`` allocation on one device; slicing
  (``buf[a:b]``) gives views that share the memory and keep the parent alive.
* :class:`HostBuffer` owns page-locked host memory (``aclrtMallocHost``) and exports
  it zero-copy to numpy and ``memoryview`` (see "Buffer protocol" below).
* :func:`copy`, :func:`copy_2d`, :func:`memset` work between any pair of
  DeviceBuffer / HostBuffer / bytes-like objects (numpy arrays, bytearray,
  memoryview, bytes as a source); :func:`memcpy_async` is the fast path between
  owned buffers.

Checks before C
---------------
Every size, offset and pitch is validated in Python before any pointer reaches the
runtime: ints only (``__index__`` integers such as ``numpy.int64`` accepted, ``bool``
refused: see :mod:`pyacl_rt._args`), no negatives, nothing past the end of either
side, ``width <= pitch``, ``(height - 1) * pitch + width`` inside the buffer.
Non-contiguous numpy arrays are refused (``ValueError``); writing into a read-only
object (``bytes``, a read-only memoryview, a numpy array with ``writeable=False``)
raises ``TypeError``. Messages name the argument. Use after ``close()`` raises
:class:`~pyacl_rt.errors.ObjectClosedError`; after :func:`pyacl_rt.runtime.finalize`
:class:`~pyacl_rt.errors.RuntimeFinalizedError`.

Streams and ordering
--------------------
Every copy that touches device memory is issued on a stream: ``stream`` if given,
else the calling thread's current stream of the device doing the copy (the
destination's device for H2D / D2D, the source's for D2H). ``non_blocking=False``
(the default) waits for that stream afterwards, like ``tensor.copy_()`` in
torch_npu; ``non_blocking=True`` returns at once. Host-to-host copies never go
through the runtime (ACL refuses asynchronous H2H on hosts with attached devices):
they are a plain ``memmove`` done at once, after waiting for the given ``stream``
and for pending async work on the owned buffers involved. (Pending async writes into
a *foreign* host object, e.g. a numpy array, are not tracked for H2H: synchronize
first.) Device-to-device copies across devices enable peer access between the two
devices once (``aclrtDeviceEnablePeerAccess``); between devices that cannot access
each other, :func:`copy` stages through pinned host memory (synchronously) and
:func:`copy_2d` raises :class:`~pyacl_rt.errors.FeatureNotSupportedError`.

Lifetime of memory used by async work
-------------------------------------
* **Foreign objects** (numpy arrays, bytearray, ...) given to an async copy are kept
  alive until the copy completed on the device (``Stream._keep_alive``: a per-stream
  watch list released by a marker event). ``copy(dev, arr, stream=s,
  non_blocking=True); del arr`` is safe.
* **Owned buffers** remember the streams they were used on. With the default caching
  allocator (:mod:`pyacl_rt._allocator`, plugged in through
  :mod:`pyacl_rt._membackend`), freeing one gives its block back to the cache without
  waiting: it is reused in stream order by its allocation stream, and only once events
  recorded on the other streams that used it have completed (pinned blocks: once every
  stream that used them has). The rest of this paragraph describes
  ``PYACL_RT_ALLOCATOR=native`` (and buffers that bypass the cache: explicit Contexts,
  non-default ``policy``). Freeing one
  (``close()``, garbage collection, finalize) first *synchronizes those streams*,
  then calls ``aclrtFree`` / ``aclrtFreeHost``: memory is never released under a
  pending copy (ACL's ``aclrtFree`` does not wait, acl_abi.md section 5.6). So
  ``close()`` blocks like ``cudaFree`` when the buffer still has queued work, and
  the memory is back in the pool when it returns. This costs nothing on the hot
  path (no event per copy). A buffer freed on a host-callback (report) thread -
  inside a callback, or by garbage collection that happens to run there - is freed
  soon after by pyacl_rt's releaser thread (a synchronize there could deadlock);
  :func:`empty_cache` waits for such pending frees.

Threads and host callbacks
--------------------------
Buffers work from any thread (each operation makes the buffer's device context
current; no ``set_device`` needed). A synchronous :func:`copy` / :func:`copy_2d` /
:func:`memset` marks the owned buffers it uses as in use until it no longer touches
them from the host (host-to-host ``memmove`` and host ``memset`` run without the
GIL): ``close()`` on another thread meanwhile raises ``BufferError`` and the buffer
stays open, the same rule as for live exports (like ``bytearray`` resizing). Once a
device operation is enqueued, the buffer only remembers its stream and ``close()``
waits for that stream instead. The :func:`memcpy_async` fast path takes no mark (it
stays lock- and allocation-free): closing a buffer while another thread is in the
middle of enqueueing it there is a race in the program, as with ``cudaFree``.
Inside a host callback, synchronous copies and memsets raise
:class:`~pyacl_rt.errors.CallbackContextError` (they would wait for the stream
running the callback); asynchronous copies between owned buffers are fine. An
async copy of *pageable* memory (numpy, bytearray) completes before returning (ACL
semantics), so from a callback it must not target a stream that is waiting for that
callback.

Buffer protocol (HostBuffer)
----------------------------
* ``memoryview(h)``, ``h.memoryview()`` and ``numpy.asarray(h)`` are zero-copy on
  every supported version: HostBuffer derives from
  ``pyacl_rt._fastcall.BufferForwarder``, a C base type whose buffer protocol
  (``getbuffer`` / ``releasebuffer``; on 3.12+ also ``__buffer__`` /
  ``__release_buffer__``) forwards to the HostBuffer's byte buffer and counts the
  exports explicitly (the view's ``obj`` is the HostBuffer, which it keeps alive).
  Reference-count arithmetic is not used: CPython 3.14 no longer counts borrowed
  stack references. ``numpy.asarray(h)`` also has ``__array__``. ``bytes(h)`` /
  ``h.tobytes()`` copy.
* Exports keep the memory valid: while a memoryview or numpy array of ``h`` is
  alive, ``h.close()`` raises ``BufferError`` (like ``bytearray``/``mmap``). An export
  keeps ``h`` alive, so garbage collection frees the memory only after the last
  export went away. :func:`pyacl_rt.runtime.finalize` cannot keep exported pinned
  memory alive (``aclFinalize`` reclaims it), so it raises ``BufferError`` listing
  the exported buffers and finalizes nothing (release the views, then finalize
  again). At interpreter exit, where the views can no longer be used, it logs a
  warning and proceeds.

Finalize
--------
A release hook (priority ``PRIORITY_MEMORY``, after events and streams) synchronizes
each device that still has buffers, then frees them; the Python objects become inert.
:func:`~pyacl_rt.runtime.finalize` first refuses (``BufferError``, nothing released)
while a HostBuffer is exported or a buffer is in use by a synchronous operation on
another thread, like ``close()``. Closing an explicit
:class:`~pyacl_rt.context.Context` frees the buffers allocated in it the same way.

Modules: this one (public API: buffers, copies, statistics), :mod:`pyacl_rt._memrecord`
(allocation records, ordered freeing, registry, finalize/context/fork hooks),
:mod:`pyacl_rt._membuf` (turning copy arguments into checked addresses),
:mod:`pyacl_rt._membackend` (where buffer memory comes from: ``native`` or a backend
registered from above) and :mod:`pyacl_rt._memstats` (torch's statistics keys, the
summary table). DLPack (``__dlpack__``, ``from_dlpack``) lives in :mod:`pyacl_rt._dlpack`,
a higher floor that registers ``_dlpack_hooks``.

Floor 6: imports floors 1-5 only.
"""

from __future__ import annotations

import builtins
import ctypes
import logging
import os
import weakref
from collections.abc import Callable
from typing import Any, Final, NoReturn, Self, Union

from . import _membackend as _mb
from . import _memrecord as _rec
from . import _releaser, errors, runtime
from . import context as _context
from ._args import bool_arg, index_arg
from ._fastcall import BufferForwarder
from ._membuf import _int_arg, _offsets, _resolve, _Side
from ._memrecord import (
    _DEAD,
    _claim_close,
    _free_mem,
    _Mem,
    _note,
    _process_deferred,
    _raise_closed,
    _register,
    _wait_streams,
)
from ._syncdebug import _check_sync, _sync_debug
from .device import (
    Device,
    DeviceLike,
    _check,
    _context_for,
    _CtxRef,
    _ensure_current,
    _index,
    _lib,
    _local,
    _refuse_in_callback,
    _run_finalizer,
    _validated_ctx,
    current_device,
    mem_get_info,
)
from .lowlevel import fast as _fast
from .lowlevel import ffi
from .stream import Stream, current_stream

__all__ = [
    "ACL_MEMCPY_DEVICE_TO_DEVICE",
    "ACL_MEMCPY_DEVICE_TO_HOST",
    "ACL_MEMCPY_HOST_TO_DEVICE",
    "ACL_MEMCPY_HOST_TO_HOST",
    "ACL_MEM_MALLOC_HUGE_FIRST",
    "ACL_MEM_MALLOC_HUGE_ONLY",
    "ACL_MEM_MALLOC_NORMAL_ONLY",
    "BufferLike",
    "DeviceBuffer",
    "HostBuffer",
    "copy",
    "copy_2d",
    "empty_cache",
    "host_memory_allocated",
    "max_memory_allocated",
    "max_memory_reserved",
    "memcpy_async",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "memset",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
]

_log = logging.getLogger("pyacl_rt")

ACL_MEMCPY_HOST_TO_HOST: Final = 0
ACL_MEMCPY_HOST_TO_DEVICE: Final = 1
ACL_MEMCPY_DEVICE_TO_HOST: Final = 2
ACL_MEMCPY_DEVICE_TO_DEVICE: Final = 3
ACL_MEM_MALLOC_HUGE_FIRST: Final = 0
ACL_MEM_MALLOC_HUGE_ONLY: Final = 1
ACL_MEM_MALLOC_NORMAL_ONLY: Final = 2
#: Copy kind by (dst is device, src is device).
_KIND: Final = (
    (ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_DEVICE_TO_HOST),
    (ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_DEVICE),
)

# lowlevel.fast: the hand-written METH_FASTCALL entry points (same dispatch table);
# they raise the pyacl_rt error of a failed call themselves.
_aclrtMemcpyAsync = _fast.memcpy_async
_aclrtMemcpy2dAsync = _lib.aclrtMemcpy2dAsync
_aclrtMemsetAsync = _fast.memset_async

#: Anything :func:`copy` accepts on one side.
BufferLike = Union["DeviceBuffer", "HostBuffer", Any]

#: DLPack, registered by :mod:`pyacl_rt._dlpack` (a higher floor): ``export(buf, stream,
#: max_version, dl_device, copy)``, ``device(buf)``, ``typed(buf, dtype, shape)``.
_dlpack_hooks: dict[str, Callable[..., Any]] = {}


# ================================================================= statistics
def _stat(device: DeviceLike, key: str) -> int:
    return _mb.device().device_stats(_index(device))[key]


def memory_allocated(device: DeviceLike = None) -> int:
    """Bytes of device memory held by live buffers on ``device`` (current device if
    None): ``memory_stats()["allocated_bytes.all.current"]``. With the caching
    allocator these are block sizes (requests rounded up to 512 bytes); with
    ``PYACL_RT_ALLOCATOR=native``, the requested sizes."""
    return _stat(device, "allocated_bytes.all.current")


def max_memory_allocated(device: DeviceLike = None) -> int:
    """Peak of :func:`memory_allocated` since start or :func:`reset_peak_memory_stats`."""
    return _stat(device, "allocated_bytes.all.peak")


def memory_reserved(device: DeviceLike = None) -> int:
    """Bytes the allocator holds from the runtime on ``device`` (allocated plus cached
    segments); equal to :func:`memory_allocated` with ``PYACL_RT_ALLOCATOR=native``."""
    return _stat(device, "reserved_bytes.all.current")


def max_memory_reserved(device: DeviceLike = None) -> int:
    """Peak of :func:`memory_reserved`."""
    return _stat(device, "reserved_bytes.all.peak")


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    """Reset every peak of ``device`` to its current value."""
    _mb.device().reset_peak(_index(device))


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    """Zero the ``allocated`` / ``freed`` totals of ``device``'s statistics."""
    _mb.device().reset_accumulated(_index(device))


def empty_cache() -> None:
    """Give the memory cached by the caching allocator (free device segments, idle
    pinned host blocks) back to the runtime, after waiting for the events that guard
    blocks freed under pending work (torch_npu's ``empty_cache``); memory of live
    buffers stays. Also waits for the frees deferred from host-callback threads (see
    the module docstring) and does those still pending, after their streams are done.
    On a host-callback thread it does nothing (the releaser may be waiting for the
    callback's own stream)."""
    if _local.st.in_callback:
        return
    if _sync_debug():
        _check_sync("empty_cache()")
    _releaser.flush()
    _rec._process_deferred()
    _mb.empty_all()


def memory_stats(device: DeviceLike = None) -> dict[str, int]:
    """torch_npu's ``memory_stats`` of ``device``: ``<kind>.<pool>.<field>`` for
    allocation / segment / active / inactive_split counts and their ``*_bytes`` (plus
    ``requested_bytes``), pools ``all`` / ``large_pool`` / ``small_pool``, fields
    ``current`` / ``peak`` / ``allocated`` / ``freed``; ``oversize_*``,
    ``num_alloc_retries``, ``num_ooms``, ``num_device_alloc`` ... (see
    :mod:`pyacl_rt._memstats`). Bytes and counts of this process's allocator; plus
    the runtime's ``free_bytes`` / ``total_bytes`` (``aclrtGetMemInfo``).
    """
    index = _index(device)
    st = _mb.device().device_stats(index)
    st["free_bytes"], st["total_bytes"] = mem_get_info(index)
    return st


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """A printable table of :func:`memory_stats` (torch_npu's ``memory_summary``;
    ``abbreviated`` is accepted for compatibility)."""
    from ._memstats import format_summary

    del abbreviated
    index = _index(device)
    be = _mb.device()
    return format_summary(be.device_stats(index), index, be.name)


def host_memory_allocated() -> int:
    """Bytes held by live :class:`HostBuffer` allocations (pinned host memory)."""
    return _rec.stat(-1, "allocated")


_peers: set[tuple[_CtxRef, int]] = set()


# ================================================================ arguments
def _devices(d: _Side, s: _Side) -> tuple[int, ...]:
    """Devices a copy may run on, the default one first (dst's unless dst is host)."""
    if s.dev < 0 or s.dev == d.dev:
        return (d.dev,)
    if d.dev < 0:
        return (s.dev,)
    return (d.dev, s.dev)


def _check_stream(stream: object, devices: tuple[int, ...]) -> None:
    """Refuse a bad ``stream`` argument of a device operation: not a Stream, closed
    (or finalized), or on a device the operation does not run on. Also used by
    zero-byte operations, which return before using the stream."""
    if stream is None:
        return
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be a Stream or None, not {type(stream).__name__}")
    if stream._ctx.device < 0:
        stream._activate()  # raises: closed, or its runtime was finalized
    if stream._device not in devices:
        where = " or ".join(str(d) for d in devices)
        raise ValueError(
            f"stream is on device {stream._device} but this operation runs on device {where}"
        )


def _pick_stream(stream: object, devices: tuple[int, ...]) -> Stream:
    """The stream a device operation runs on, with its context current."""
    if stream is None:
        st = current_stream(devices[0])
    else:
        _check_stream(stream, devices)
        assert isinstance(stream, Stream)
        st = stream
    if _local.st.ctx is not st._ctx:
        st._activate()
    return st


def _ensure_peer(ctx: _CtxRef, peer: int) -> bool:
    """Enable access from ``ctx``'s device to ``peer`` once (``ctx`` is current).
    False when the runtime says the devices cannot access each other."""
    key = (ctx, peer)
    if key in _peers:
        return True
    s = _local.st.scratch
    rc = _lib.aclrtDeviceCanAccessPeer(s.i32, ctx.device, peer)
    if rc:
        _check(rc, "aclrtDeviceCanAccessPeer")
    if not s.i32[0]:
        return False
    rc = _lib.aclrtDeviceEnablePeerAccess(peer, 0)
    if rc:
        _check(rc, "aclrtDeviceEnablePeerAccess")
    _peers.add(key)
    return True


def _staged_copy(d: _Side, s: _Side, n: int, doff: int, soff: int, st: Stream) -> None:
    """Across two devices without peer access: through a pinned host buffer, on the
    copy's stream where it fits and the current stream of the other device, waiting
    for each half (synchronous, whatever ``non_blocking`` said)."""
    if _local.st.in_callback:
        _refuse_in_callback("a cross-device copy between devices without peer access")
    if _sync_debug():
        _check_sync("a copy staged through pinned memory: the devices lack peer access")
    src_stream = st if st._device == s.dev else current_stream(s.dev)
    dst_stream = st if st._device == d.dev else current_stream(d.dev)
    stage = HostBuffer(n)
    try:
        copy(stage, s.obj, n, src_offset=soff, stream=src_stream)
        copy(d.obj, stage, n, dst_offset=doff, stream=dst_stream)
    finally:
        stage.close()


def _resolve_pair(dst: object, src: object) -> tuple[_Side, _Side]:
    """Both sides of a copy (``dst`` writable); nothing stays exported on failure."""
    d = _resolve(dst, "dst", True)
    try:
        s = _resolve(src, "src", False)
    except BaseException:
        d.release()
        raise
    return d, s


def _copy_stream(d: _Side, s: _Side, stream: object, non_blocking: bool) -> tuple[Stream, bool]:
    """The stream a copy touching device memory runs on (its context made current),
    and whether the two sides can be copied directly (False: two devices without peer
    access; peer access is enabled once where possible). A synchronous copy is refused
    inside a host callback."""
    if not non_blocking and _local.st.in_callback:
        _refuse_in_callback("a synchronous copy (use non_blocking=True)")
    st = _pick_stream(stream, _devices(d, s))
    if d.dev >= 0 and s.dev >= 0 and d.dev != s.dev:
        return st, _ensure_peer(st._ctx, s.dev if st._device == d.dev else d.dev)
    return st, True


def _host_wait(sides: tuple[_Side, ...], stream: object) -> None:
    """Before a host-side operation: wait for the given stream and for pending async
    work on the owned buffers involved."""
    if stream is not None:
        if not isinstance(stream, Stream):
            raise TypeError(f"stream must be a Stream or None, not {type(stream).__name__}")
        stream.synchronize()
    for side in sides:
        m = side.m
        if m is not None and m.streams:
            if _sync_debug():
                _check_sync("waiting for the work pending on the buffer")
            prev = _local.st.ctx
            try:
                if not _wait_streams(m, forget=False):
                    _refuse_in_callback("a host-side copy or memset of memory with pending work")
            finally:
                if prev is not None and _local.st.ctx is not prev and prev.device >= 0:
                    prev.make_current()


def _finish(st: Stream, sides: tuple[_Side, ...], non_blocking: bool) -> None:
    """After enqueueing on ``st``: note the stream on owned memory, keep foreign
    objects alive (async) or wait and release them (sync)."""
    tok = st._state
    foreign: list[object] = []
    for side in sides:
        m = side.m
        if m is not None:
            if m.last is not tok:
                _note(m, st)
        elif side.cd is not None:
            foreign.append(side.cd)
        # The stream is noted: from now on freeing the memory waits for it.
        side.unhold()
    if non_blocking:
        if foreign:
            st._keep_alive(tuple(foreign))
        return
    try:
        st.synchronize()
    except BaseException:
        # The copy may still be queued (e.g. a device fault): never release memory
        # the device might still write.
        if foreign:
            try:
                st._keep_alive(tuple(foreign))
            except BaseException:
                _rec._stranded.append(tuple(foreign))
        raise
    for side in sides:
        side.release()


# ==================================================================== copies
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
    d, s = _resolve_pair(dst, src)
    try:
        n, doff, soff = _offsets(d, s, nbytes, dst_offset, src_offset)
    except BaseException:
        d.release()
        s.release()
        raise
    _do_copy(d, s, n, doff, soff, stream, non_blocking)


def _do_copy(
    d: _Side, s: _Side, n: int, doff: int, soff: int, stream: object, non_blocking: bool
) -> None:
    sides = (d, s)
    try:
        if d.dev < 0 and s.dev < 0:
            try:
                _host_wait(sides, stream)
                if n:
                    ctypes.memmove(d.ptr + doff, s.ptr + soff, n)
            finally:
                d.release()
                s.release()
            return
        if n == 0:
            _check_stream(stream, _devices(d, s))
            d.release()
            s.release()
            return
        st, direct = _copy_stream(d, s, stream, non_blocking)
        if not direct:
            try:
                _staged_copy(d, s, n, doff, soff, st)
            finally:
                d.release()
                s.release()
            return
        if not non_blocking and _sync_debug():
            _check_sync("a synchronous copy")
        kind = _KIND[d.dev >= 0][s.dev >= 0]
        _aclrtMemcpyAsync(d.ptr + doff, d.n - doff, s.ptr + soff, n, kind, st._handle)
    except BaseException:
        d.release()
        s.release()
        raise
    _finish(st, sides, non_blocking)


def memcpy_async(
    dst: DeviceBuffer | HostBuffer, src: DeviceBuffer | HostBuffer, nbytes: int, stream: Stream
) -> None:
    """Fast path: enqueue a copy of ``nbytes`` bytes between two owned buffers on
    ``stream`` (``aclrtMemcpyAsync``), from the start of ``src`` to the start of
    ``dst`` (slice the buffers for offsets). Returns at once; no per-call allocation,
    no event: the buffers remember the stream so that freeing them waits for it.
    """
    try:
        dm = dst._m
        sm = src._m
        sd = stream._device
        tok = stream._state
    except AttributeError:
        _fast_type_error(dst, src, stream)
        raise
    dp = dm.ptr
    sp = sm.ptr
    if not (dp and sp):
        _raise_closed(dm if not dp else sm, "dst" if not dp else "src")
    dn = dst._n
    if nbytes.__class__ is not int or not 0 <= nbytes <= dn or nbytes > src._n:
        nbytes = _fast_size(nbytes, dn, src._n)
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
    if _local.st.ctx is not stream._ctx:
        stream._activate()
    if nbytes:
        _aclrtMemcpyAsync(dp + dst._off, dn, sp + src._off, nbytes, kind, stream._handle)
        if dm.last is not tok:
            _note(dm, stream)
        if sm.last is not tok:
            _note(sm, stream)


def _fast_type_error(dst: object, src: object, stream: object) -> None:
    for name, obj in (("dst", dst), ("src", src)):
        if not isinstance(obj, (DeviceBuffer, HostBuffer)):
            raise TypeError(
                f"memcpy_async: {name} must be a DeviceBuffer or HostBuffer, not "
                f"{type(obj).__name__} (use copy() for other objects)"
            )
    if not isinstance(stream, Stream):
        raise TypeError(f"memcpy_async: stream must be a Stream, not {type(stream).__name__}")


def _fast_size(nbytes: object, dn: int, sn: int) -> int:
    """memcpy_async's slow path for ``nbytes``: an ``__index__`` integer (e.g.
    ``numpy.int64``) that fits both sides is returned as an int; else the error."""
    n = _int_arg(nbytes, "nbytes")
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
    d, s = _resolve_pair(dst, src)
    try:
        dp = _int_arg(dpitch, "dpitch")
        sp = _int_arg(spitch, "spitch")
        w = _int_arg(width, "width")
        h = _int_arg(height, "height")
        doff = _int_arg(dst_offset, "dst_offset")
        soff = _int_arg(src_offset, "src_offset")
        if w > dp:
            raise ValueError(f"width {w} is larger than dpitch {dp}")
        if w > sp:
            raise ValueError(f"width {w} is larger than spitch {sp}")
        if doff > d.n:
            raise ValueError(f"dst_offset {doff} is past the end of dst ({d.n} bytes)")
        if soff > s.n:
            raise ValueError(f"src_offset {soff} is past the end of src ({s.n} bytes)")
        if w and h:
            dext = (h - 1) * dp + w
            sext = (h - 1) * sp + w
            if dext > d.n - doff:
                raise ValueError(
                    f"(height - 1) * dpitch + width = {dext} bytes run past the end of dst "
                    f"({d.n} bytes, dst_offset {doff})"
                )
            if sext > s.n - soff:
                raise ValueError(
                    f"(height - 1) * spitch + width = {sext} bytes run past the end of src "
                    f"({s.n} bytes, src_offset {soff})"
                )
    except BaseException:
        d.release()
        s.release()
        raise
    sides = (d, s)
    try:
        if d.dev < 0 and s.dev < 0:
            try:
                _host_wait(sides, stream)
                if w and h:
                    base_d = d.ptr + doff
                    base_s = s.ptr + soff
                    for i in range(h):
                        ctypes.memmove(base_d + i * dp, base_s + i * sp, w)
            finally:
                d.release()
                s.release()
            return
        if not (w and h):
            _check_stream(stream, _devices(d, s))
            d.release()
            s.release()
            return
        st, direct = _copy_stream(d, s, stream, non_blocking)
        if not direct:
            raise errors.FeatureNotSupportedError(
                f"devices {s.dev} and {d.dev} cannot access each other: 2D copies between "
                "them are not supported (copy through a HostBuffer)",
                function="aclrtDeviceCanAccessPeer",
            )
        if not non_blocking and _sync_debug():
            _check_sync("a synchronous copy")
        kind = _KIND[d.dev >= 0][s.dev >= 0]
        rc = _aclrtMemcpy2dAsync(d.ptr + doff, dp, s.ptr + soff, sp, w, h, kind, st._handle)
        if rc:
            _check(rc, "aclrtMemcpy2dAsync")
    except BaseException:
        d.release()
        s.release()
        raise
    _finish(st, sides, non_blocking)


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
    b = _resolve(buf, "buf", True)
    try:
        off = _int_arg(offset, "offset")
        if off > b.n:
            raise ValueError(f"offset {off} is past the end of buf ({b.n} bytes)")
        if nbytes is None:
            n = b.n - off
        else:
            n = _int_arg(nbytes, "nbytes")
            if n > b.n - off:
                raise ValueError(f"nbytes {n} runs past the end of buf ({b.n} bytes, offset {off})")
        sides = (b,)
        if b.dev < 0:
            _host_wait(sides, stream)
            if n:
                ctypes.memset(b.ptr + off, value, n)
            b.release()
            return
        if n == 0:
            _check_stream(stream, (b.dev,))
            b.release()
            return
        if not non_blocking and _local.st.in_callback:
            _refuse_in_callback("a synchronous memset (use non_blocking=True)")
        if not non_blocking and _sync_debug():
            _check_sync("a synchronous memset")
        st = _pick_stream(stream, (b.dev,))
        _aclrtMemsetAsync(b.ptr + off, b.n - off, value, n, st._handle)
    except BaseException:
        b.release()
        raise
    _finish(st, sides, non_blocking)


# ============================================================== DeviceBuffer
class _Buffer:
    """What DeviceBuffer and HostBuffer share: the allocation record ``_m`` and the
    window ``[_off, _off + _n)`` of it this object covers."""

    __slots__ = ("__weakref__", "_m", "_n", "_off")

    _m: _Mem
    _n: int
    _off: int

    @property
    def nbytes(self) -> int:
        """Size in bytes (as requested; the runtime may round the allocation up)."""
        return self._n

    def __len__(self) -> int:
        return self._n

    @property
    def ptr(self) -> int:
        """Address (int) of the first byte (device address for a DeviceBuffer); 0 (NULL)
        for a zero-byte allocation. Raises once closed."""
        m = self._m
        if not m.ptr:
            _raise_closed(m, type(self).__name__)
        if not m.nbytes:
            return 0  # DeviceBuffer(0): no memory behind it
        return m.ptr + self._off

    @property
    def closed(self) -> bool:
        """True once closed (for a view: or freed with its parent), or made inert by
        finalize."""
        return not self._m.ptr

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fill(self, value: int) -> None:
        """Set every byte to ``value`` (0..255) and wait for it."""
        memset(self, value)

    # ---------------------------------------------------------------- DLPack
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """DLPack export: a PyCapsule of a 1-D uint8 tensor of :attr:`nbytes` bytes
        (``"dltensor_versioned"`` when ``max_version >= (1, 0)``). While the consumer
        holds it, :meth:`close` raises ``BufferError``. ``stream``: the consumer's
        stream (see :mod:`pyacl_rt._dlpack`)."""
        return _dlpack_hooks["export"](self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)``: ``(1, 0)`` (kDLCPU) for a HostBuffer,
        ``(12, index)`` (kDLExtDev, the NPU) for a DeviceBuffer."""
        return _dlpack_hooks["device"](self)  # type: ignore[no-any-return]

    def as_dlpack(self, dtype: Any = "uint8", shape: tuple[int, ...] | None = None) -> Any:
        """An object whose ``__dlpack__`` exports this buffer as ``dtype`` (a name such
        as ``"float32"``, or a numpy dtype) and ``shape`` (default: 1-D; the product
        times the item size must equal :attr:`nbytes`), e.g.
        ``numpy.from_dlpack(h.as_dlpack("float32", (4, 8)))``."""
        return _dlpack_hooks["typed"](self, dtype, shape)


class DeviceBuffer(_Buffer):
    """``nbytes`` bytes of device memory on ``device`` (default: the current device),
    in the context the calling thread uses for that device (the active explicit
    Context, else the device's primary context).

    * ``nbytes`` is a size in bytes (an int or ``__index__`` integer). ``0`` is allowed
      (an empty batch): nothing is allocated (no ``aclrtMalloc(0)``), ``ptr`` is 0,
      copies and memsets of 0 bytes work. To put an array on the device allocate its
      size and copy: ``buf = DeviceBuffer(arr.nbytes); buf.copy_from_host(arr)``.
    * Where it comes from: by default a block of the caching allocator
      (:mod:`pyacl_rt._allocator`), cached for ``stream`` (the allocation stream;
      default: the current stream of the device), like torch_npu; with
      ``PYACL_RT_ALLOCATOR=native``, in an explicit Context, or with a non-default
      ``policy``: one ``aclrtMalloc(policy)``.
    * ``close()`` frees it (idempotent); so do garbage collection and finalize. A
      cached block goes back to the cache at once and is reused in stream order (other
      streams that used it are guarded by events, see :meth:`record_stream`); a native
      allocation waits for the streams that used it first (see the module docstring).
      Views become unusable when their parent is closed.
    * ``buf[a:b]`` (step 1) is a view sharing the memory; it keeps its parent alive.
      Closing a view only closes the view.
    * ``ptr`` is the device address as an int, for raw :mod:`pyacl_rt.lowlevel` calls
      (valid while the buffer is open). Memory is not initialised.
    * Usable from any thread: operations make the right context current.
    """

    __slots__ = ("_fin", "_parent")

    _parent: DeviceBuffer | None
    _fin: weakref.finalize[..., Any] | None

    def __init__(
        self,
        nbytes: int,
        device: DeviceLike = None,
        policy: int = ACL_MEM_MALLOC_HUGE_FIRST,
        *,
        stream: Stream | None = None,
    ) -> None:
        if nbytes.__class__ is not int:
            _refuse_data(nbytes, "DeviceBuffer")
        n = _int_arg(nbytes, "nbytes")
        policy = index_arg(policy, "policy", "an int (an ACL_MEM_MALLOC_* value)")
        if policy < 0:
            raise ValueError(f"policy must be an ACL_MEM_MALLOC_* value (>= 0), got {policy}")
        index = _index(device)
        _process_deferred()
        ctx = _context_for(index)
        if _local.st.ctx is not ctx:
            ctx.make_current()
        if stream is not None:
            _check_stream(stream, (index,))
        if n:
            base, rel = _mb.current.allocate_device(ctx, index, n, policy, stream)
        else:
            base, rel = _rec.ZERO_SIZE_BASE, None  # empty batch: ACL cannot allocate 0 bytes
        m = _Mem(base, n, index, ctx)
        m.rel = rel
        # ctx keeps an explicit Context alive through the buffer
        self._own(m)

    def _own(self, m: _Mem) -> None:
        """Take the record ``m`` (a new allocation, or a DLPack import): freed by
        ``close()``, garbage collection or finalize."""
        self._m = m
        self._n = m.nbytes
        self._off = 0
        self._parent = None
        self._fin = weakref.finalize(self, _free_mem, m)
        self._fin.atexit = False
        _register(m)

    def __reduce__(self) -> Any:
        raise TypeError(
            "DeviceBuffer cannot be pickled or copied (it owns device memory); copy the "
            "data with pyacl_rt.memory.copy into a new buffer"
        )

    # ------------------------------------------------- not host-accessible
    def _not_host(self, what: str) -> NoReturn:
        raise TypeError(
            f"{what}: a DeviceBuffer is device memory, which the host cannot read directly; "
            "copy it to the host first: buf.copy_to_host() returns a bytearray, or "
            "pyacl_rt.copy(host_buffer, buf) then numpy.asarray(host_buffer)"
        )

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> NoReturn:
        """``numpy.asarray(buf)`` raises ``TypeError``: device memory is not host memory."""
        self._not_host("numpy.asarray(DeviceBuffer)")

    def __bytes__(self) -> NoReturn:
        self._not_host("bytes(DeviceBuffer)")

    def __iter__(self) -> NoReturn:
        self._not_host("iterating over a DeviceBuffer")

    # ---------------------------------------------------------------- views
    def __getitem__(self, key: slice) -> DeviceBuffer:
        """``buf[a:b]``: a view of bytes ``a`` to ``b``. Negative bounds count from the
        end, as in Python, but nothing is clamped: a bound past either end, or
        ``b < a``, raises ``IndexError`` naming the bounds."""
        if not isinstance(key, slice):
            _bad_index(self, key)
        start, stop = _slice_bounds(key, self._n)
        m = self._m
        if not m.ptr:
            _raise_closed(m, "DeviceBuffer")
        view = DeviceBuffer.__new__(DeviceBuffer)
        view._m = m
        view._off = self._off + start
        view._n = stop - start
        view._parent = self._parent if self._parent is not None else self
        view._fin = None
        return view

    def record_stream(self, stream: Stream) -> None:
        """Declare that ``stream`` uses this memory (torch's ``record_stream``): freeing
        the buffer then never lets the memory be reused (or, natively, freed) before the
        work ``stream`` has queued up to that point completed. Copies and memsets
        through pyacl_rt record their stream themselves; call this after using
        :attr:`ptr` on another stream through raw calls."""
        if not isinstance(stream, Stream):
            raise TypeError(f"record_stream() needs a Stream, not {type(stream).__name__}")
        if stream._ctx.device < 0:
            stream._activate()  # raises: closed or finalized
        m = self._m
        if not m.ptr:
            _raise_closed(m, "DeviceBuffer")
        if m.last is not stream._state:
            _note(m, stream)

    # ----------------------------------------------------------- properties
    @property
    def device(self) -> Device:
        """The :class:`~pyacl_rt.device.Device` the memory lives on."""
        m = self._m
        if m.device < 0:
            _raise_closed(m, "DeviceBuffer")
        return Device(m.device)

    @property
    def device_index(self) -> int:
        """Index of the device the memory lives on (-1 once a view is closed)."""
        return self._m.device

    @property
    def is_view(self) -> bool:
        return self._parent is not None

    @property
    def base(self) -> DeviceBuffer | None:
        """The buffer a view was sliced from (None for an allocation)."""
        return self._parent

    def __repr__(self) -> str:
        kind = "view" if self._parent is not None else "DeviceBuffer"
        if not self._m.ptr:
            return f"<{kind} closed>"
        return f"<{kind} {self._n} bytes at 0x{self.ptr:x} on device {self._m.device}>"

    # ------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Free the memory (allocation) or drop the view. Idempotent.

        For an allocation: waits for the streams that used it, then ``aclrtFree``;
        every view of it becomes closed. No-op after finalize. Raises
        ``BufferError`` (and stays open) while a synchronous copy or memset on another
        thread is still using the memory (of this buffer or one of its views).
        """
        if self._parent is not None:
            if self._m.ptr:  # else keep the reason (parent closed, finalized)
                self._m = _DEAD
            self._parent = None
            return
        if self._m.rel is None and self._m.streams and _sync_debug():  # rel: no wait
            _check_sync("DeviceBuffer.close()")
        with _rec._live_lock:
            _claim_close(self._m, "DeviceBuffer")
        # detach() + call, not f(): at interpreter exit f() is a no-op once
        # weakref.finalize's own atexit hook ran (see device._run_finalizer).
        _run_finalizer(self._fin)

    # ---------------------------------------------------------------- copies
    def copy_from_host(self, src: BufferLike, *, offset: int = 0) -> None:
        """Copy all of ``src`` (host object or HostBuffer) into this buffer at ``offset``
        and wait for it."""
        copy(self, src, dst_offset=offset)

    def copy_from_host_async(
        self, src: BufferLike, stream: Stream | None = None, *, offset: int = 0
    ) -> None:
        """Enqueue a copy of all of ``src`` into this buffer at ``offset`` on ``stream``
        (default: the current stream of the buffer's device). ``src`` is kept alive
        until the copy completed."""
        copy(self, src, dst_offset=offset, stream=stream, non_blocking=True)

    def copy_to_host(self, dst: BufferLike | None = None, *, offset: int = 0) -> Any:
        """Copy this buffer (from ``offset``) into ``dst`` and wait; with ``dst=None``
        returns a new ``bytearray`` of the remaining bytes. Returns ``dst``."""
        if dst is None:
            off = _int_arg(offset, "offset")
            if off > self._n:
                raise ValueError(f"offset {off} is past the end of the buffer ({self._n} bytes)")
            dst = bytearray(self._n - off)
        copy(dst, self, src_offset=offset)
        return dst

    def copy_to_host_async(
        self, dst: BufferLike, stream: Stream | None = None, *, offset: int = 0
    ) -> None:
        """Enqueue a copy of this buffer (from ``offset``, as many bytes as ``dst``
        holds) into ``dst`` on ``stream``; ``dst`` is kept alive until it completed."""
        d, s = _resolve_pair(dst, self)
        try:
            n, doff, soff = _offsets(d, s, d.n, 0, offset)
        except BaseException:
            d.release()
            s.release()
            raise
        _do_copy(d, s, n, doff, soff, stream, True)

    def memset(
        self,
        value: int,
        nbytes: int | None = None,
        offset: int = 0,
        stream: Stream | None = None,
        *,
        non_blocking: bool = False,
    ) -> None:
        """:func:`memset` on this buffer."""
        memset(self, value, nbytes, offset, stream, non_blocking=non_blocking)


def _refuse_data(obj: object, cls: str) -> None:
    """``DeviceBuffer(arr)`` / ``HostBuffer(arr)``: the argument is a size, not data.
    A clear TypeError for arrays and bytes-like objects (0-d integer arrays and numpy
    integers are sizes, through ``__index__``)."""
    if getattr(obj, "ndim", 0) or isinstance(obj, (bytes, bytearray, memoryview, list, tuple)):
        raise TypeError(
            f"{cls}(nbytes): nbytes is a size in bytes, not data (got {type(obj).__name__}). "
            f"To copy an array into new memory: buf = {cls}(arr.nbytes); "
            "pyacl_rt.copy(buf, arr)"
        )


def _slice_bounds(key: slice, n: int) -> tuple[int, int]:
    """``(start, stop)`` of ``buf[key]`` for an ``n``-byte buffer: step 1, negative
    bounds from the end, nothing clamped (``IndexError`` naming the bounds)."""
    if key.step is not None and index_arg(key.step, "slice step") != 1:
        raise ValueError(f"DeviceBuffer slices must have step 1, got {key.step}")
    start = 0 if key.start is None else index_arg(key.start, "slice start")
    stop = n if key.stop is None else index_arg(key.stop, "slice stop")
    a = start + n if start < 0 else start
    b = stop + n if stop < 0 else stop
    if not 0 <= a <= b <= n:
        shown = f"[{'' if key.start is None else start}:{'' if key.stop is None else stop}]"
        raise IndexError(
            f"slice {shown} is out of bounds for a DeviceBuffer of {n} bytes: the bounds "
            f"resolve to [{a}:{b}], which must satisfy 0 <= start <= stop <= {n} "
            "(DeviceBuffer slices are never clamped)"
        )
    return a, b


def _bad_index(buf: DeviceBuffer, key: object) -> NoReturn:
    if isinstance(key, int):
        buf._not_host("DeviceBuffer[int] (indices must be slices: buf[a:b] is a view)")
    raise TypeError(f"DeviceBuffer indices must be slices (buf[a:b]), not {type(key).__name__}")


# ================================================================ HostBuffer
def _host_dtor(m: _Mem) -> Any:
    def dtor(_cd: object) -> None:
        _free_mem(m)

    return dtor


class HostBuffer(_Buffer, BufferForwarder):
    """``nbytes`` bytes of page-locked (pinned) host memory from ``aclrtMallocHost``.

    Zero-copy views: ``memoryview(h)``, ``h.memoryview()``, ``numpy.asarray(h)``
    (see the module docstring). ``close()`` frees it
    (after waiting for the streams that used it) and raises ``BufferError`` while
    exports exist; garbage collection frees it once the last export is gone.
    """

    __slots__ = ("_buf", "_cd", "_nexports")

    _cd: Any
    _buf: Any
    _nexports: int

    def __init__(self, nbytes: int) -> None:
        if nbytes.__class__ is not int:
            _refuse_data(nbytes, "HostBuffer")
        n = _int_arg(nbytes, "nbytes")
        if n == 0:
            raise ValueError("nbytes must be > 0 (ACL cannot allocate 0 bytes)")
        runtime.ensure_initialized()
        _process_deferred()
        # Re-validated: a foreign context switch (raw lowlevel, torch_npu) must not make
        # the allocation go through a context pyacl_rt does not think is current.
        ctx = _validated_ctx(_local.st)
        if ctx is None or ctx.device < 0:
            # Pinned memory is allocated through a device's runtime: use the thread's
            # current device (its context is created if this is its first use).
            ctx = _ensure_current(current_device())
        base, rel = _mb.current.allocate_host(ctx, n)
        m = _Mem(base, n, -1, ctx)
        m.rel = rel
        self._own(m)

    def _own(self, m: _Mem) -> None:
        """Take the record ``m`` (a new allocation, or a DLPack import)."""
        m.owner = weakref.ref(self)
        self._m = m
        self._n = n = m.nbytes
        self._off = 0
        self._nexports = 0
        # The owning cdata: freed (after waiting for its streams) when the last
        # reference - this object, the byte buffer below, any export - is gone.
        self._cd = ffi.gc(ffi.cast("char *", m.base), _host_dtor(m), n)
        self._buf = ffi.buffer(self._cd, n)
        _register(m)

    def __reduce__(self) -> Any:
        raise TypeError(
            "HostBuffer cannot be pickled or copied (it owns pinned memory); use "
            "h.tobytes() or numpy.array(h) for a copy of the data"
        )

    # ----------------------------------------------------------- properties
    def _exports(self) -> int:
        """Number of live exports (memoryviews / numpy arrays) of the memory, counted
        explicitly by the buffer protocol (not from reference counts, which CPython
        3.14 no longer reports exactly)."""
        return self._nexports

    def _export_acquire(self) -> Any:
        """Buffer protocol (``BufferForwarder``): one more export; the byte buffer to
        export. Atomic with :meth:`close` (both hold ``_live_lock``)."""
        with _rec._live_lock:
            buf = self._live_buf()
            self._nexports += 1
        return buf

    def _export_release(self) -> None:
        """Buffer protocol: an export was released."""
        with _rec._live_lock:
            self._nexports -= 1

    def __repr__(self) -> str:
        if not self._m.ptr:
            return "<HostBuffer closed>"
        how = "pinned" if self._m.release is None else "imported (DLPack)"
        return f"<HostBuffer {self._n} bytes {how} at 0x{self._m.ptr:x}>"

    # --------------------------------------------------------------- exports
    def _live_buf(self) -> Any:
        m = self._m
        if not m.ptr or self._buf is None:
            _raise_closed(m, "HostBuffer")
        return self._buf

    def memoryview(self) -> builtins.memoryview:
        """A writable, zero-copy ``memoryview`` (format ``'B'``) of the memory. While
        it is alive, :meth:`close` raises ``BufferError``."""
        return memoryview(self)

    view = memoryview

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        """``numpy.asarray(h)``: a zero-copy uint8 array over the memory."""
        import numpy

        arr = numpy.frombuffer(memoryview(self), dtype=numpy.uint8)
        if dtype is not None and numpy.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError("HostBuffer: a dtype conversion needs a copy")
            return arr.astype(dtype)
        if copy:
            return arr.copy()
        return arr

    def numpy(self, dtype: Any = "uint8") -> Any:
        """A zero-copy numpy array of ``dtype`` over the memory (nbytes must divide)."""
        import numpy

        try:
            dt = numpy.dtype(dtype)
        except TypeError as exc:
            raise TypeError(
                f"HostBuffer.numpy(): dtype {dtype!r} is not a numpy dtype ({exc})"
            ) from None
        return numpy.frombuffer(memoryview(self), dtype=dt)

    def tobytes(self) -> bytes:
        """A copy of the contents as ``bytes``."""
        return bytes(self._live_buf())

    def __bytes__(self) -> bytes:
        return self.tobytes()

    # ------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Free the memory (after waiting for the streams that used it). Idempotent.

        Raises ``BufferError`` (and stays open) while memoryviews / numpy arrays of it
        are alive, or while a synchronous copy or memset on another thread is still
        using it.
        """
        if self._buf is None:
            return
        m = self._m
        if m.rel is None and m.streams and _sync_debug():  # rel: no wait
            _check_sync("HostBuffer.close()")
        with _rec._live_lock:
            p = _claim_close(m, "HostBuffer")
            n = self._exports() if p else 0
            if n:
                m.ptr = p
                raise BufferError(
                    f"cannot close HostBuffer: {n} exported view(s) (memoryview / numpy "
                    "array) still use its memory; release them first"
                )
        self._buf = None
        self._cd = None  # normally the last reference: the destructor frees now
        if m.base:
            _free_mem(m)


# ================================================================= lifecycle
def _forget_peers() -> None:
    _peers.clear()


def _forget_context_peers(ctx: _CtxRef) -> None:
    for key in [k for k in _peers if k[0] is ctx]:
        _peers.discard(key)


os.register_at_fork(after_in_child=_forget_peers)
_context._close_hooks.append(_forget_context_peers)
runtime.register_release_hook(_forget_peers, runtime.PRIORITY_MEMORY)
