"""The buffer classes: :class:`DeviceBuffer` (``aclrtMalloc``) and :class:`HostBuffer`
(pinned, ``aclrtMallocHost``, zero-copy to numpy / memoryview).

Each wraps an allocation record (:mod:`pyacl_rt._memory.records`) and a window of it
(views share the record); their copy methods delegate to the copy engine
(:mod:`pyacl_rt._memory.engine`). See :mod:`pyacl_rt._memory` for lifetime, threads,
exports and finalize.

The record, the window, ``close()``, the deallocation (an unclosed buffer's memory is
freed when it is collected) and HostBuffer's buffer protocol live in C base types
(:mod:`pyacl_rt._memcore`): a buffer the caching allocator serves from its cache is
created, closed and collected without running Python code. The functions
``_init_device`` / ``_DevicePaths.close`` / ``_init_host`` / ``_HostPaths.close`` below are
the complete Python paths; the C types call them whenever the hit path does not apply.

Layer 6 (part of :mod:`pyacl_rt._memory`, above ``engine``): imports layers 1-5 and the
modules of the package below it.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, NoReturn, Self

from .. import _memcore, _sanitize
from .. import _runtime as runtime
from .. import _stream as _streams
from .._args import index_arg, size_arg
from .._device import (
    Device,
    DeviceLike,
    context_for,
    current_device,
    device_index_arg,
    ensure_device_current,
)
from .._hooks import factories
from .._memcore import DeviceBase, HostBase
from .._state import gate_enter, gate_exit, local, validated_ctx
from .._stream import Stream
from .._syncdebug import check_sync, sync_debug_active
from . import backend as _mb
from . import engine, records
from .args import ReleaseOnExit, offsets, resolve_pair
from .engine import ACL_MEM_MALLOC_HUGE_FIRST, BufferLike, copy, memset
from .keepalive import note
from .records import Mem, free_mem, process_deferred, raise_closed

__all__ = ["BufferLike", "DeviceBuffer", "HostBuffer"]


# ============================================================== DeviceBuffer
class _Buffer:
    """What DeviceBuffer and HostBuffer share (a mixin over their C base, which holds the
    allocation record ``mem`` and the window ``[mem_offset, mem_offset + window_nbytes)``
    of it this object covers)."""

    __slots__ = ()

    if TYPE_CHECKING:  # read-only slots of the C base

        @property
        def mem(self) -> Mem: ...

        @property
        def window_nbytes(self) -> int: ...

        @property
        def mem_offset(self) -> int: ...

    @property
    def nbytes(self) -> int:
        """Size in bytes (as requested; the runtime may round the allocation up)."""
        return self.window_nbytes

    def __len__(self) -> int:
        return self.window_nbytes

    @property
    def ptr(self) -> int:
        """Address (int) of the first byte (device address for a DeviceBuffer); 0 (NULL)
        for a zero-byte allocation. Raises once closed."""
        m = self.mem
        if not m.ptr:
            raise_closed(m, type(self).__name__)
        if not m.nbytes:
            return 0  # DeviceBuffer(0): no memory behind it
        return m.ptr + self.mem_offset

    @property
    def closed(self) -> bool:
        """True once closed (for a view: or freed with its parent), or made inert by
        finalize."""
        return not self.mem.ptr

    if TYPE_CHECKING:  # implemented by the C base types

        def close(self) -> None: ...

        def __enter__(self) -> Self: ...

        def __exit__(self, *exc: object) -> None: ...

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
        stream, made safe to use the data on: ``None`` waits on the host for the
        buffer's pending work, ``-1`` does nothing, a stream handle (or a
        :class:`~pyacl_rt.Stream`) makes that stream wait on the device (host buffers
        take only ``None`` or ``-1``)."""
        return factories.dlpack_export.get()(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)``: ``(1, 0)`` (kDLCPU) for a HostBuffer,
        ``(12, index)`` (kDLExtDev, the NPU) for a DeviceBuffer."""
        return factories.dlpack_device.get()(self)

    def as_dlpack(self, dtype: Any = "uint8", shape: tuple[int, ...] | None = None) -> Any:
        """An object whose ``__dlpack__`` exports this buffer as ``dtype`` (a name such
        as ``"float32"``, or a numpy dtype) and ``shape`` (default: 1-D; the product
        times the item size must equal :attr:`nbytes`), e.g.
        ``numpy.from_dlpack(h.as_dlpack("float32", (4, 8)))``."""
        return factories.dlpack_typed.get()(self, dtype, shape)


class DeviceBuffer(DeviceBase, _Buffer):
    """``nbytes`` bytes of device memory on ``device`` (default: the current device),
    in the context the calling thread uses for that device (the active explicit
    Context, else the device's primary context).

    * ``nbytes`` is a size in bytes (an int or ``__index__`` integer). ``0`` is allowed
      (an empty batch): nothing is allocated (no ``aclrtMalloc(0)``), ``ptr`` is 0,
      copies and memsets of 0 bytes work. To put an array on the device allocate its
      size and copy: ``buf = DeviceBuffer(arr.nbytes); buf.copy_from_host(arr)``.
    * Where it comes from: by default a block of the caching allocator (see
      :func:`pyacl_rt.memory_stats`, :func:`pyacl_rt.empty_cache`), cached for
      ``stream`` (the allocation stream;
      default: the current stream of the device), like torch_npu; with
      ``PYACL_RT_ALLOCATOR=native``, in an explicit Context, or with a non-default
      ``policy``: one ``aclrtMalloc(policy)``.
    * ``close()`` frees it (idempotent); so do garbage collection and finalize. A
      cached block goes back to the cache at once and is reused in stream order (other
      streams that used it are guarded by events, see :meth:`record_stream`); a native
      allocation waits for the streams that used it first (``aclrtFree`` itself would
      not).
      Views become unusable when their parent is closed.
    * ``buf[a:b]`` (step 1) is a view sharing the memory; it keeps its parent alive.
      Closing a view only closes the view.
    * ``ptr`` is the device address as an int, for raw :mod:`pyacl_rt.lowlevel` calls
      (valid while the buffer is open). Memory is not initialised.
    * Usable from any thread: operations make the right context current.
    """

    __slots__ = ()

    if TYPE_CHECKING:  # the C base's slots; its __init__ (the hit path) calls _init_device

        @property
        def _parent(self) -> DeviceBuffer | None: ...

        def __init__(
            self,
            nbytes: int,
            device: DeviceLike = None,
            policy: int = ACL_MEM_MALLOC_HUGE_FIRST,
            *,
            stream: Stream | None = None,
        ) -> None: ...

        def own_mem(self, m: Mem) -> None:
            """Take the record ``m`` (a new allocation, or a DLPack import): freed by
            ``close()``, garbage collection or finalize."""

        def _view(self, start: int, nbytes: int) -> DeviceBuffer:
            """A view of bytes ``[start, start + nbytes)`` (bounds checked by the caller)."""

    def __reduce__(self) -> Any:
        raise TypeError(
            "DeviceBuffer cannot be pickled or copied (it owns device memory); copy the "
            "data with pyacl_rt.copy into a new buffer"
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
        start, stop = _slice_bounds(key, self.window_nbytes)
        m = self.mem
        if not m.ptr:
            raise_closed(m, "DeviceBuffer")
        return self._view(start, stop - start)  # keeps the parent alive

    def record_stream(self, stream: Stream) -> None:
        """Declare that ``stream`` uses this memory (torch's ``record_stream``): freeing
        the buffer then never lets the memory be reused (or, natively, freed) before the
        work ``stream`` has queued up to that point completed. Copies and memsets
        through pyacl_rt record their stream themselves; call this after using
        :attr:`ptr` on another stream through raw calls."""
        if not isinstance(stream, Stream):
            raise TypeError(f"record_stream() needs a Stream, not {type(stream).__name__}")
        if stream.ctx_ref.device < 0:
            stream.ensure_current()  # raises: closed or finalized
        m = self.mem
        if not m.ptr:
            raise_closed(m, "DeviceBuffer")
        if m.last is not stream.stream_state:
            note(m, stream)

    # ----------------------------------------------------------------- IPC
    def ipc_handle(self, pids: Any = None) -> Any:
        """A picklable :class:`~pyacl_rt.IpcMemHandle` of this buffer that another
        process opens with :meth:`DeviceBuffer.from_ipc_handle` (zero-copy: both see
        the same memory). ``pids``: None lets any process of this user import; an
        iterable of pids (``pyacl_rt.ipc_pid()`` of each importer) only those.
        The memory stays allocated (``close()`` raises ``BufferError``) until every
        importer closed what it opened and every handle given out was dropped."""
        return factories.ipc_mem_handle.get()(self, pids)

    @classmethod
    def from_ipc_handle(cls, handle: Any) -> DeviceBuffer:
        """Open an :class:`~pyacl_rt.IpcMemHandle` of another process: a DeviceBuffer
        of ``handle.nbytes`` bytes over the exporter's memory (no copy). ``close()``
        (or GC) closes the import; the exporter learns it. Raises
        :class:`~pyacl_rt.errors.IpcError` in the exporting process itself or when
        the exporter closed the handle or exited, and
        :class:`~pyacl_rt.errors.IpcPermissionError` when this pid is not allowed."""
        return factories.ipc_mem_open.get()(handle)  # type: ignore[no-any-return]

    # ----------------------------------------------------------- properties
    @property
    def device(self) -> Device:
        """The :class:`~pyacl_rt.Device` the memory lives on."""
        m = self.mem
        if m.device < 0:
            raise_closed(m, "DeviceBuffer")
        return Device(m.device)

    @property
    def device_index(self) -> int:
        """Index of the device the memory lives on (-1 once a view is closed)."""
        return self.mem.device

    @property
    def is_view(self) -> bool:
        return self._parent is not None

    @property
    def base(self) -> DeviceBuffer | None:
        """The buffer a view was sliced from (None for an allocation)."""
        return self._parent

    def __repr__(self) -> str:
        kind = "view" if self._parent is not None else "DeviceBuffer"
        if not self.mem.ptr:
            return f"<{kind} closed>"
        return f"<{kind} {self.window_nbytes} bytes at 0x{self.ptr:x} on device {self.mem.device}>"

    # ------------------------------------------------------------- lifetime
    if TYPE_CHECKING:  # the C base's close(): _DevicePaths.close unless the hit path frees it

        def close(self) -> None:
            """Free the memory (allocation) or drop the view. Idempotent.

            For an allocation from the cache: the block goes back to it (reused in
            stream order; see the class docstring); otherwise waits for the streams
            that used it, then ``aclrtFree``. Every view of it becomes closed. No-op
            after finalize. Raises ``BufferError`` (and stays open) while a DLPack
            export or a synchronous copy or memset on another thread still uses the
            memory (of this buffer or one of its views).
            """

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
            off = size_arg(offset, "offset")
            if off > self.window_nbytes:
                raise ValueError(
                    f"offset {off} is past the end of the buffer ({self.window_nbytes} bytes)"
                )
            dst = bytearray(self.window_nbytes - off)
        copy(dst, self, src_offset=offset)
        return dst

    def copy_to_host_async(
        self, dst: BufferLike, stream: Stream | None = None, *, offset: int = 0
    ) -> None:
        """Enqueue a copy of this buffer (from ``offset``, as many bytes as ``dst``
        holds) into ``dst`` on ``stream``; ``dst`` is kept alive until it completed."""
        d, s = resolve_pair(dst, self)
        with ReleaseOnExit(d, s):
            n, doff, soff = offsets(d, s, d.n, 0, offset)
        engine.do_copy(d, s, n, doff, soff, stream, True)

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


def _init_device(
    buf: DeviceBuffer, nbytes: Any, device: DeviceLike, policy: Any, stream: Any
) -> None:
    """``DeviceBuffer.__init__`` (the complete path; the C base serves cache hits)."""
    if nbytes.__class__ is not int:
        _refuse_data(nbytes, "DeviceBuffer")
    n = size_arg(nbytes, "nbytes")
    policy = index_arg(policy, "policy", "an int (an ACL_MEM_MALLOC_* value)")
    if policy < 0:
        raise ValueError(f"policy must be an ACL_MEM_MALLOC_* value (>= 0), got {policy}")
    index = device_index_arg(device)
    process_deferred()
    ctx = context_for(index)
    # A gated section to the registration (RuntimeFinalizedError once finalize started):
    # a block the cache serves without a runtime call must not come out of a cache that
    # finalize on another thread is releasing (the C hit path defers to this path then).
    gate_enter("DeviceBuffer()")
    try:
        ctx.ensure_current()
        if stream is not None:
            engine.check_stream(stream, (index,))
        if n:
            backend = _mb.current or _mb.device()
            base, rel = backend.allocate_device(ctx, index, n, policy, stream)
        else:
            base, rel = records.ZERO_SIZE_BASE, None  # empty batch: ACL cannot allocate 0
        m = Mem(base, n, index, ctx)  # keeps an explicit Context of ctx alive
        m.rel = rel
        buf.own_mem(m)
    finally:
        gate_exit()


class _DevicePaths:
    """Python paths of DeviceBuffer methods implemented by its C base, named like them
    (sync debug reports name the method the user called: ``DeviceBuffer.close()``)."""

    @staticmethod
    def close(self: DeviceBuffer) -> None:
        """``close()`` of an allocation the C hit path does not free."""
        m = self.mem
        if m.exports:
            before_close = factories.ipc_mem_before_close.value  # None: nothing via IPC
            if before_close is not None:
                before_close(m)  # drops the exports importers are done with
        if m.rel is None and m.streams and sync_debug_active():  # rel: no wait
            check_sync("DeviceBuffer.close()")
        m.claim_close("DeviceBuffer")  # raises while exported / in use
        free_mem(m)


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
class HostBuffer(HostBase, _Buffer):
    """``nbytes`` bytes of page-locked (pinned) host memory from ``aclrtMallocHost``.

    Zero-copy views: ``memoryview(h)``, ``h.memoryview()``, ``numpy.asarray(h)``
    (see the module docstring). ``close()`` frees it
    (after waiting for the streams that used it) and raises ``BufferError`` while
    exports exist; garbage collection frees it once the last export is gone.
    """

    __slots__ = ()

    if TYPE_CHECKING:  # the C base's __init__ (the hit path) calls _init_host otherwise

        def __init__(self, nbytes: int) -> None: ...

        def own_mem(self, m: Mem) -> None:
            """Take the record ``m`` (a new allocation, or a DLPack import)."""

        def export_count(self) -> int:
            """Number of live exports (memoryviews / numpy arrays) of the memory, counted
            explicitly by the buffer protocol of the C base (not from reference counts,
            which CPython 3.14 no longer reports exactly)."""

    def __reduce__(self) -> Any:
        raise TypeError(
            "HostBuffer cannot be pickled or copied (it owns pinned memory); use "
            "h.tobytes() or numpy.array(h) for a copy of the data"
        )

    # ----------------------------------------------------------- properties
    def __repr__(self) -> str:
        if not self.mem.ptr:
            return "<HostBuffer closed>"
        how = "pinned" if self.mem.release is None else "imported (DLPack)"
        return f"<HostBuffer {self.window_nbytes} bytes {how} at 0x{self.mem.ptr:x}>"

    # --------------------------------------------------------------- exports
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
        with memoryview(self) as mv:
            return mv.tobytes()

    def __bytes__(self) -> bytes:
        return self.tobytes()

    # ------------------------------------------------------------- lifetime
    if TYPE_CHECKING:  # the C base's close(): _HostPaths.close unless the hit path frees it

        def close(self) -> None:
            """Free the memory (a pooled block goes back to the pool, reused once the
            streams that used it passed an event; otherwise after waiting for them).
            Idempotent.

            Raises ``BufferError`` (and stays open) while memoryviews / numpy arrays of
            it are alive, or while a DLPack export or a synchronous copy or memset on
            another thread is still using it.
            """


def _init_host(buf: HostBuffer, nbytes: Any) -> None:
    """``HostBuffer.__init__`` (the complete path; the C base serves pool hits)."""
    if nbytes.__class__ is not int:
        _refuse_data(nbytes, "HostBuffer")
    n = size_arg(nbytes, "nbytes")
    if n == 0:
        raise ValueError("nbytes must be > 0 (ACL cannot allocate 0 bytes)")
    runtime.ensure_initialized()
    process_deferred()
    gate_enter("HostBuffer()")  # as in _init_device
    try:
        # Re-validated: a foreign context switch (raw lowlevel, torch_npu) must not make
        # the allocation go through a context pyacl_rt does not think is current.
        ctx = validated_ctx(local.st)
        if ctx is None or ctx.device < 0:
            # Pinned memory is allocated through a device's runtime: use the thread's
            # current device (its context is created if this is its first use).
            ctx = ensure_device_current(current_device())
        base, rel = (_mb.current or _mb.device()).allocate_host(ctx, n)
        m = Mem(base, n, -1, ctx)
        m.rel = rel
        buf.own_mem(m)
    finally:
        gate_exit()


class _HostPaths:
    """Python paths of HostBuffer methods implemented by its C base (see _DevicePaths)."""

    @staticmethod
    def close(self: HostBuffer) -> None:
        """``close()`` of a HostBuffer the C hit path does not free."""
        m = self.mem
        if not m.ptr and not m.base:
            return
        if m.rel is None and m.streams and sync_debug_active():  # rel: no wait
            check_sync("HostBuffer.close()")
        m.claim_close("HostBuffer", self.export_count())  # raises while exported / in use
        if m.base:
            free_mem(m)


factories.staging_buffer.set(HostBuffer)
_memcore.bind_buffers(
    stream=Stream,
    primary_defaults=_streams.primary_defaults,
    device_init=_init_device,
    device_close=_DevicePaths.close,
    host_init=_init_host,
    host_close=_HostPaths.close,
    default_policy=ACL_MEM_MALLOC_HUGE_FIRST,
)


def _sanitize_host_reads(on: bool) -> None:
    """The race sanitizer: every HostBuffer export declares a host read (``_sanitize``)."""
    _memcore.set_host_read_hook(_sanitize.host_read if on else None)


_sanitize.arm_hooks.add(_sanitize_host_reads, 0)
_memcore.install_fast_call(DeviceBuffer)
_memcore.install_fast_call(HostBuffer)
