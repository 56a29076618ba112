"""torch_npu-style memory counters over :mod:`pyacl_rt._memory.records` (bytes).

Floor 6 (part of :mod:`pyacl_rt._memory`): imports floors 1-5 and ``records``.
"""

from __future__ import annotations

from .. import _releaser
from .._device import DeviceLike, _index, mem_get_info
from .._state import _local
from . import records as _rec

__all__ = [
    "empty_cache",
    "host_memory_allocated",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
]


def _stat(device: DeviceLike, key: str) -> int:
    return _rec.stat(_index(device), key)


def memory_allocated(device: DeviceLike = None) -> int:
    """Bytes held by live :class:`DeviceBuffer` allocations on ``device`` (current device
    if None), as requested (the runtime rounds each allocation up a little).

    torch_npu's name. pyacl_rt has no caching allocator: memory is returned to the
    runtime when a buffer is freed, so :func:`memory_reserved` is the same number.
    """
    return _stat(device, "allocated")


def max_memory_allocated(device: DeviceLike = None) -> int:
    """Peak of :func:`memory_allocated` since start or :func:`reset_peak_memory_stats`."""
    return _stat(device, "peak")


def memory_reserved(device: DeviceLike = None) -> int:
    """Same as :func:`memory_allocated` (no caching allocator; torch_npu compatibility)."""
    return memory_allocated(device)


def max_memory_reserved(device: DeviceLike = None) -> int:
    """Same as :func:`max_memory_allocated` (no caching allocator)."""
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    """Reset the peak of ``device`` to the current :func:`memory_allocated`."""
    _rec.reset_peak(_index(device))


def empty_cache() -> None:
    """pyacl_rt frees memory at once, there is no cache to empty (torch_npu
    compatibility). Waits for the frees deferred from host-callback threads (see the
    module docstring) and does those still pending, after their streams are done. On a
    host-callback thread it waits for nothing (the releaser may be waiting for the
    callback's own stream)."""
    if _local.st.in_callback:
        return
    _releaser.flush()
    _rec._process_deferred()


def memory_stats(device: DeviceLike = None) -> dict[str, int]:
    """Counters of ``device``: ``allocated_bytes.current`` / ``.peak``,
    ``num_allocs``, ``num_frees`` (DeviceBuffer allocations of this process), plus
    the runtime's ``free_bytes`` / ``total_bytes`` (``aclrtGetMemInfo``).

    A small subset of torch_npu's ``memory_stats`` keys, with the same names.
    """
    index = _index(device)
    st = _rec.counters(index)
    free, total = mem_get_info(index)
    return {
        "allocated_bytes.all.current": st["allocated"],
        "allocated_bytes.all.peak": st["peak"],
        "num_allocs": st["allocs"],
        "num_frees": st["frees"],
        "free_bytes": free,
        "total_bytes": total,
    }


def host_memory_allocated() -> int:
    """Bytes held by live :class:`HostBuffer` allocations (pinned host memory)."""
    return _rec.stat(-1, "allocated")
