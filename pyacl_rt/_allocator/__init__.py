"""The caching allocator: stream-ordered device memory cache and pinned host pool.

Registered as the ``caching`` backend of :mod:`pyacl_rt._memory.backend` (the default;
``PYACL_RT_ALLOCATOR=native`` bypasses it) when ``pyacl_rt`` is imported. It follows
PyTorch's (torch_npu's) caching allocator:

* **Device** (:mod:`._device`, bookkeeping in :mod:`pyacl_rt._cachecore`): requests
  rounded up to 512 bytes; small pool (blocks <= 1 MiB, 2 MiB segments) and large
  pool (20 MiB segments below 10 MiB, else rounded up to 2 MiB); best fit among the
  free blocks *of the allocation stream*, splitting and merging. A buffer's
  allocation stream is the ``stream`` given to ``DeviceBuffer`` (default: the current
  stream). Freeing gives the block back to that stream's cache at once (work queued
  later on that stream runs after the old work), unless other streams used the
  buffer (copies and memsets record their stream, :meth:`DeviceBuffer.record_stream`
  adds one): then an event is recorded on each and the block is not handed out again
  until all completed. Wholly free segments move to another stream once an event on
  their stream shows its work is done; on a miss while the cache holds a segment's
  worth of unusable memory, and on frees while reserved > 1.25 x peak allocated (and
  > peak + 20 MiB), wholly free segments whose streams are done go back to the
  runtime (no device-wide synchronize). Out of memory: wait for those events, free the cached
  segments, retry, then :class:`~pyacl_rt.errors.AclOutOfMemoryError` with
  allocated / reserved / free GiB. Buffers of an explicit Context or with a
  non-default ``policy`` bypass the cache (one ``aclrtMalloc`` each; not counted in
  :func:`memory_stats`).
* **Pinned host** (:mod:`._host`): power-of-two blocks reused once every stream that
  used them passed an event recorded at free time.
* **Statistics and history**: torch's ``memory_stats`` keys, :func:`memory_summary`,
  :func:`memory_snapshot`, :func:`record_memory_history` / :func:`dump_snapshot`
  (pickles loadable by PyTorch's memory visualizer; see :mod:`._history`).

Layer 7 (allocator): imports layers 1-6 only.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .. import _capture, _memcore, _sanitize
from .. import _runtime as runtime
from .._args import index_arg, size_arg
from .._cachecore import _C_API, Core, Raw, set_region_hooks
from .._device import DeviceLike, context_for, device_count, device_index_arg
from .._hooks import fork_hooks
from .._memory import backend as _membackend
from .._memory.backend import NATIVE
from .._memory.registry import memory
from .._memory.torchstats import stats_dict
from .._state import CtxRef, current
from .._stream import Stream, current_stream
from . import _guards, _history
from ._device import DeviceAllocator, StreamPool
from ._graphpool import GraphPool
from ._history import dump_snapshot, record_memory_history
from ._host import HostPool

if TYPE_CHECKING:
    from .._memory.backend import Releaser

__all__ = [
    "caching_allocator",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "dump_snapshot",
    "get_per_process_memory_fraction",
    "host_memory_stats",
    "memory_snapshot",
    "record_memory_history",
    "set_per_process_memory_fraction",
    "snapshot",
]

_EMPTY_STATS = Core().stats()


class CachingBackend:
    """The ``caching`` backend of :mod:`pyacl_rt._memory.backend`."""

    name = "caching"

    def __init__(self) -> None:
        self.devices: dict[int, DeviceAllocator] = {}
        self.host: HostPool | None = None
        self.lock = threading.Lock()

    # ------------------------------------------------------------- device
    def allocator(self, index: int, ctx: CtxRef) -> DeviceAllocator:
        a = self.devices.get(index)
        if a is None or a.ctx is not ctx:
            with self.lock:
                a = self.devices.get(index)
                if a is None or a.ctx is not ctx:
                    a = self.devices[index] = DeviceAllocator(index, ctx)
        return a

    def stream_pool(self, index: int, ctx: CtxRef, stream: Stream) -> StreamPool:
        """The cache of ``stream`` (a stream of ``ctx``, the primary context of
        device ``index``)."""
        a = self.devices.get(index)
        if a is None or a.ctx is not ctx:
            a = self.allocator(index, ctx)
        sp = a.pools.get(stream.raw_handle)
        if sp is None or sp.state is not stream.stream_state:
            sp = a.pool(stream)
        return sp

    def allocate_device(
        self, ctx: CtxRef, index: int, nbytes: int, policy: int, stream: Stream | None
    ) -> tuple[int, Releaser | None]:
        if ctx.owner is not None or policy:
            return NATIVE.allocate_device(ctx, index, nbytes, policy, stream)
        if stream is None:
            stream = current_stream(index)
        if stream.ctx_ref is not ctx:  # a stream of an explicit Context: not cached
            return NATIVE.allocate_device(ctx, index, nbytes, policy, stream)
        if _capture.by_stream:
            cap = _capture.find(stream.raw_handle)
            if cap is not None and isinstance(cap.pool, GraphPool) and cap.pool.alloc.ctx is ctx:
                # a capturing stream: from the graph's private pool
                return self._allocate_in(cap.pool, stream, ctx, index, nbytes), cap.pool
        sp = self.stream_pool(index, ctx, stream)
        return self._allocate_in(sp, stream, ctx, index, nbytes), sp

    @staticmethod
    def _allocate_in(
        owner: StreamPool | GraphPool, stream: Stream, ctx: CtxRef, index: int, nbytes: int
    ) -> int:
        """``nbytes`` from the cache of ``owner`` (a stream's pool or a graph's)."""
        a, key = owner.alloc, owner.key
        # Next time, DeviceBuffer's C hit path serves this stream from that cache by
        # itself (a capturing stream: from the graph's pool until the capture ends).
        _memcore.remember_device(a.core, key, stream.stream_state, ctx, owner, a.trim, a.gen)
        p: int = a.core.alloc(key, nbytes)
        if not p:
            p = a.allocate_slow(key, nbytes)
        if _history.enabled:
            _history.event(index, "alloc", p, (a.core.block(p) or (0,))[0], key)
        return p

    def device_stats(self, index: int) -> dict[str, int]:
        a = self.devices.get(index)
        if a is None:
            return stats_dict(_EMPTY_STATS, {"max_split_size": -1})
        return stats_dict(a.core.stats(), a.scalars)

    def reset_peak(self, index: int) -> None:
        a = self.devices.get(index)
        if a is not None:
            a.core.reset_peak()

    def reset_accumulated(self, index: int) -> None:
        a = self.devices.get(index)
        if a is not None:
            a.core.reset_accumulated()
            for k in a.scalars:
                if k != "max_split_size":
                    a.scalars[k] = 0

    # --------------------------------------------------------------- host
    def allocate_host(self, ctx: CtxRef, nbytes: int) -> tuple[int, Releaser | None]:
        h = self.host
        if h is None:
            with self.lock:
                h = self.host
                if h is None:
                    h = self.host = HostPool()
        _memcore.remember_host(h.core, h, h.gen)  # HostBuffer's C hit path uses the pool
        return h.allocate(ctx, nbytes)

    # ------------------------------------------------------------ caches
    def empty_cache(self) -> None:
        if not runtime.is_initialized():
            return
        with current():
            for a in list(self.devices.values()):
                if runtime.is_alive(a.gen) and a.ctx.device >= 0:
                    a.empty_cache()
            if self.host is not None:
                self.host.empty_cache()
            _guards.destroy_idle()

    # ---------------------------------------------------------- lifecycle
    def teardown(self, free: bool) -> None:
        devices, self.devices = self.devices, {}
        host, self.host = self.host, None
        if free:
            _guards.destroy_all()
        else:
            _guards.forget()
        for a in devices.values():
            a.teardown(free)
        if host is not None:
            host.teardown(free)
        _history.forget()


_backend = CachingBackend()


def _release() -> None:
    """Release hook (after the memory layer freed every buffer into the caches)."""
    global _hot
    _hot = [None, None]
    memory.raw_owner.clear()
    _memcore.forget_pools()
    _backend.teardown(free=True)


def _after_fork_in_child() -> None:
    """The child owns none of the parent's runtime objects: forget them all (no
    runtime call, no lock another thread may have held at fork time)."""
    _backend.lock = threading.Lock()
    _backend.devices = {}
    _backend.host = None
    global _hot
    _hot = [None, None]
    _memcore.forget_pools()  # (the memory registry's raw_owner: reset by its fork hook)
    _guards.forget()
    _history.forget()


def _sanitize_regions(on: bool) -> None:
    """The race sanitizer: each block handed out is a sub-allocation region of its
    segment (``_cachecore.set_region_hooks``), so a kernel argument stops at its block."""
    set_region_hooks(*(_sanitize.region_functions() if on else (0, 0)))


_memcore.set_cache_api(_C_API)  # the C hit paths of DeviceBuffer / HostBuffer
_sanitize.arm_hooks.add(_sanitize_regions, 10)
_membackend.register(_backend)
runtime.register_release_hook(_release, runtime.PRIORITY_MEMORY + 50)
fork_hooks.add(_after_fork_in_child, runtime.PRIORITY_MEMORY + 50)


# ================================================================ public API
def device_allocator(device: DeviceLike) -> tuple[int, DeviceAllocator]:
    """``(index, the caching allocator of the device's primary context)`` (package-internal)."""
    index = device_index_arg(device)
    ctx = context_for(index)
    if ctx.owner is not None:
        # the cache serves primary contexts only
        ctx = _primary_context(index)
    return index, _backend.allocator(index, ctx)


def _primary_context(index: int) -> CtxRef:
    from .._device import primaries

    ctx = primaries.get(index)
    if ctx is None:  # pragma: no cover - an explicit context implies the device is set up
        raise RuntimeError(f"device {index} has no primary context")
    return ctx


def set_per_process_memory_fraction(fraction: float, device: DeviceLike = None) -> None:
    """Limit the caching allocator of ``device`` to ``fraction`` (0..1) of the device's
    total memory (torch_npu's name): a segment that would exceed it is treated as out
    of memory (cache freed, retried, then :class:`~pyacl_rt.errors.AclOutOfMemoryError`)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError(f"fraction must be a float, not {type(fraction).__name__}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must be within 0..1, got {fraction}")
    a = device_allocator(device)[1]
    # 1.0 is no limit: aclrtMalloc decides (and its error text is kept)
    a.fraction = float(fraction) if fraction < 1 else None


def get_per_process_memory_fraction(device: DeviceLike = None) -> float:
    """The fraction set by :func:`set_per_process_memory_fraction` (1.0 if none)."""
    a = device_allocator(device)[1]
    return 1.0 if a.fraction is None else a.fraction


def caching_allocator_alloc(nbytes: int, device: DeviceLike = None, stream: Any = None) -> int:
    """``nbytes`` of device memory from the cache as a raw address (torch's
    ``caching_allocator_alloc``), for ``stream`` (default: the current stream of
    ``device``; a stream of the device's primary context). Give it back with
    :func:`caching_allocator_delete`; freed at finalize otherwise."""
    if nbytes.__class__ is not int or nbytes < 0:
        nbytes = size_arg(nbytes, "nbytes")
    if stream is None:
        stream = current_stream(device_index_arg(device))
    elif stream.__class__ is not Stream and not isinstance(stream, Stream):
        raise TypeError(f"stream must be a Stream or None, not {type(stream).__name__}")
    elif device is not None and device_index_arg(device) != stream.dev_index:
        raise ValueError(
            f"stream is on device {stream.dev_index}, not device {device_index_arg(device)}"
        )
    if stream.ctx_ref.device < 0:
        stream.ensure_current()  # raises: closed or finalized
    hot = _hot  # the same Stream object as last time: its cache
    sp = hot[1] if hot[0] is stream.stream_state else _stream_pool(stream)
    p: int = sp.core.alloc(sp.key, nbytes) or sp.alloc.allocate_slow(sp.key, nbytes)
    memory.raw_owner[p] = sp
    if _history.enabled:
        _history.event(stream.dev_index, "alloc", p, (sp.core.block(p) or (0,))[0], sp.key)
    return p


#: [stream state, its StreamPool] of the last caching_allocator_alloc (replaced whole:
#: readers see a consistent pair; reset at finalize and fork).
_hot: list[Any] = [None, None]


def _stream_pool(stream: Stream) -> StreamPool:
    global _hot
    ctx = stream.ctx_ref
    if ctx.owner is not None:
        raise ValueError("the caching allocator serves streams of primary contexts only")
    sp = _backend.stream_pool(stream.dev_index, ctx, stream)
    _hot = [stream.stream_state, sp]
    return sp


def caching_allocator_delete(ptr: int) -> None:
    """Give back an address from :func:`caching_allocator_alloc` (to its stream's
    cache, at once: use the memory only on that stream, or synchronize first)."""
    if ptr.__class__ is not int:
        ptr = index_arg(ptr, "ptr", "an int address from caching_allocator_alloc")
    sp = memory.raw_owner.pop(ptr, None)
    if sp is None:
        raise ValueError(f"0x{ptr:x} is not an address from caching_allocator_alloc")
    if _history.enabled:
        sp.alloc.trace_free(ptr, sp.key, pending=False)
    if sp.core.free(ptr) < 0:
        sp.alloc.trim()


def caching_allocator(stream: Any = None, device: DeviceLike = None) -> Raw:
    """A raw-address handle on the cache of ``stream`` (default: the current stream of
    ``device``): ``h.alloc(nbytes) -> address`` and ``h.free(address)``, each one C
    call when the cache hits (misses, trimming and history recording go through the
    same Python paths as :func:`caching_allocator_alloc`). Give addresses back to the
    handle that allocated them; memory is valid on that stream (see
    :func:`caching_allocator_delete`)."""
    if stream is None:
        stream = current_stream(device_index_arg(device))
    elif not isinstance(stream, Stream):
        raise TypeError(f"stream must be a Stream or None, not {type(stream).__name__}")
    elif device is not None and device_index_arg(device) != stream.dev_index:
        raise ValueError(
            f"stream is on device {stream.dev_index}, not device {device_index_arg(device)}"
        )
    if stream.ctx_ref.device < 0:
        stream.ensure_current()  # raises: closed or finalized
    sp = _stream_pool(stream)
    s = stream

    def traced_alloc(nbytes: int) -> int:
        return caching_allocator_alloc(nbytes, stream=s)

    def traced_free(ptr: int) -> None:
        if ptr.__class__ is not int:
            ptr = index_arg(ptr, "ptr", "an int address from this allocator")
        memory.raw_owner.pop(ptr, None)
        if _history.enabled:
            sp.alloc.trace_free(ptr, sp.key, pending=False)
        r = sp.core.free(ptr)
        if not r:
            raise ValueError(f"0x{ptr:x} is not an address allocated by this allocator")
        if r < 0:
            sp.alloc.trim()

    return Raw(sp.core, sp.key, sp.alloc.allocate_slow, sp.alloc.trim, traced_alloc, traced_free)


def host_memory_stats() -> dict[str, int]:
    """Counters of the pinned host memory pool (``HostBuffer`` memory):
    ``allocated_bytes.current`` / ``.peak``, ``allocations.current``,
    ``reserved_bytes.current`` / ``.peak`` (bytes held, including cached blocks) and
    ``num_host_alloc`` / ``num_host_free`` (``aclrtMallocHost`` / ``aclrtFreeHost``
    calls)."""
    h = _backend.host
    return _zero_host_stats() if h is None else h.stats()


def _zero_host_stats() -> dict[str, int]:
    keys = (
        "allocated_bytes.current",
        "allocated_bytes.peak",
        "allocations.current",
        "num_host_alloc",
        "num_host_free",
        "reserved_bytes.current",
        "reserved_bytes.peak",
    )
    return dict.fromkeys(keys, 0)


def snapshot() -> dict[str, Any]:
    """torch's ``torch.cuda.memory._snapshot()``: segments with their blocks (all
    devices), device traces and allocator settings (see :mod:`._history`)."""
    segments = []
    for index, a in sorted(_backend.devices.items()):
        segments += _history.segment_dicts(index, a.core.segments())
    try:
        n = device_count() if runtime.is_initialized() else 0
    except Exception:  # pragma: no cover - no devices
        n = 0
    return {
        "segments": segments,
        "device_traces": _history.device_traces(n),
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": None,
            "max_split_size": -1,
            "garbage_collection_threshold": 0.0,
            "expandable_segments": False,
            "roundup_power2_divisions": {},
            "backend": _membackend.device().name,
        },
    }


def memory_snapshot() -> list[dict[str, Any]]:
    """The segments of :func:`snapshot` (torch_npu's ``memory_snapshot``)."""
    return list(snapshot()["segments"])


# torch's private spellings (torch.cuda.memory._record_memory_history & co.)
_record_memory_history = record_memory_history
_snapshot = snapshot
_history.snapshot_builder = snapshot
_dump_snapshot = dump_snapshot
