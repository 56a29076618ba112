"""torch_npu-style memory statistics (bytes and counts) of the allocation backend.

The numbers come from the backend in use (:mod:`pyacl_rt._memory.backend`: the caching
allocator, or ``native`` counters over :mod:`pyacl_rt._memory.records`); the key layout
and the summary table are :mod:`pyacl_rt._memory.torchstats`.

Layer 6 (part of :mod:`pyacl_rt._memory`): imports layers 1-5, ``records``,
``torchstats`` and ``backend``.
"""

from __future__ import annotations

from .. import _releaser
from .. import _runtime as runtime
from .._device import DeviceLike, device_index_arg
from .._devinfo import mem_get_info
from .._state import local
from .._syncdebug import check_sync, sync_debug_active
from . import backend as _mb
from . import records as _rec
from .torchstats import format_summary

__all__ = [
    "empty_cache",
    "host_memory_allocated",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
]


def _stat(device: DeviceLike, key: str) -> int:
    return _mb.device().device_stats(device_index_arg(device))[key]


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
    _mb.device().reset_peak(device_index_arg(device))


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    """Zero the ``allocated`` / ``freed`` totals of ``device``'s statistics."""
    _mb.device().reset_accumulated(device_index_arg(device))


def empty_cache() -> None:
    """Give the memory cached by the caching allocator (free device segments, idle
    pinned host blocks) back to the runtime, after waiting for the events that guard
    blocks freed under pending work (torch_npu's ``empty_cache``); memory of live
    buffers stays. Also waits for the frees deferred from host-callback threads (buffers
    collected there are freed by pyacl_rt's releaser thread) and does those still
    pending, after their streams are done.
    On a host-callback thread it does nothing (the releaser may be waiting for the
    callback's own stream)."""
    if local.st.in_callback:
        return
    if sync_debug_active():
        check_sync("empty_cache()")
    _releaser.flush()
    _rec.process_deferred()
    _mb.empty_all()


def memory_stats(device: DeviceLike = None) -> dict[str, int]:
    """torch_npu's ``memory_stats`` of ``device``: ``<kind>.<pool>.<field>`` for
    allocation / segment / active / inactive_split counts and their ``*_bytes`` (plus
    ``requested_bytes``), pools ``all`` / ``large_pool`` / ``small_pool``, fields
    ``current`` / ``peak`` / ``allocated`` / ``freed``; ``oversize_*``,
    ``num_alloc_retries``, ``num_ooms``, ``num_device_alloc`` ... (the keys of
    ``torch.npu.memory_stats``; :func:`pyacl_rt.memory_summary` prints them as a
    table). Bytes and counts of this process's allocator;
    plus the runtime's ``free_bytes`` / ``total_bytes`` (``aclrtGetMemInfo``).
    """
    index = device_index_arg(device)
    st = _mb.device().device_stats(index)
    st["free_bytes"], st["total_bytes"] = mem_get_info(index)
    return st


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """A printable table of :func:`memory_stats` (torch_npu's ``memory_summary``;
    ``abbreviated`` is accepted for compatibility)."""
    del abbreviated
    index = device_index_arg(device)
    be = _mb.device()
    return format_summary(be.device_stats(index), index, be.name)


def host_memory_allocated() -> int:
    """Bytes held by live :class:`HostBuffer` allocations (pinned host memory)."""
    return _rec.stat(-1, "allocated")


def _settle() -> None:
    if runtime.is_initialized():
        empty_cache()  # the caching allocator's segments, pinned blocks, guard events


runtime.settle_hooks.add(_settle, runtime.PRIORITY_MEMORY + 50)
