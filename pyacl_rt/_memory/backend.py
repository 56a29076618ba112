"""Where DeviceBuffer / HostBuffer memory comes from: a small pluggable backend.

:class:`~pyacl_rt.DeviceBuffer` asks ``device.allocate(ctx, index, nbytes,
policy, stream)`` for ``(address, releaser)``; :class:`~pyacl_rt.HostBuffer` asks
``host.allocate(ctx, nbytes)``. A ``releaser`` (any object with ``release(mem, base)``)
takes the memory back when the buffer is freed, instead of the ordered free of
:mod:`pyacl_rt._memory.records` (wait for the streams that used it, then
``aclrtFree``/``aclrtFreeHost``), which is what a ``None`` releaser gets.

* ``native``: one ``aclrtMalloc`` / ``aclrtMallocHost`` per buffer (releaser None).
* ``caching`` (the default): registered from above by :mod:`pyacl_rt._allocator`.

The backend is chosen at the first allocation from ``PYACL_RT_ALLOCATOR``
(``caching`` / ``native``); ``caching`` falls back to ``native`` when no caching
backend was registered. :func:`select` switches later (tests; buffers already
allocated keep their releaser).

Layer 6 (part of :mod:`pyacl_rt._memory`): imports layers 1-5, ``records`` and
``torchstats``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .. import _memcore
from .._options import get_options
from .._state import check, lib, local
from . import records as _memrecord
from .torchstats import native_stats, reset_native_accumulated

if TYPE_CHECKING:
    from .._state import CtxRef
    from .._stream import Stream
    from .records import Mem

__all__ = ["Backend", "Releaser", "available", "device", "empty_all", "host", "register", "select"]


class Releaser(Protocol):
    """Takes back the memory of a freed buffer; never raises."""

    def release(self, m: Mem, base: int) -> None: ...


class Backend(Protocol):
    """An allocation backend (see the module docstring)."""

    name: str

    def allocate_device(
        self, ctx: CtxRef, index: int, nbytes: int, policy: int, stream: Stream | None
    ) -> tuple[int, Releaser | None]:
        """``nbytes`` (> 0) of device memory on device ``index`` with ``ctx`` current."""
        ...

    def allocate_host(self, ctx: CtxRef, nbytes: int) -> tuple[int, Releaser | None]:
        """``nbytes`` (> 0) of pinned host memory with ``ctx`` current."""
        ...

    def device_stats(self, index: int) -> dict[str, int]:
        """torch-style ``memory_stats`` of device ``index`` (see :mod:`.torchstats`)."""
        ...

    def reset_peak(self, index: int) -> None: ...

    def reset_accumulated(self, index: int) -> None: ...

    def empty_cache(self) -> None:
        """Give cached memory back to the runtime (no-op without a cache)."""
        ...


class _Native:
    """One ``aclrtMalloc`` / ``aclrtMallocHost`` per buffer."""

    name = "native"

    def allocate_device(
        self, ctx: CtxRef, index: int, nbytes: int, policy: int, stream: Stream | None
    ) -> tuple[int, Releaser | None]:
        s = local.st.scratch
        rc = lib.aclrtMalloc(s.uptr, nbytes, policy)
        if rc:
            check(rc, "aclrtMalloc")
        return int(s.uptr[0]), None

    def allocate_host(self, ctx: CtxRef, nbytes: int) -> tuple[int, Releaser | None]:
        s = local.st.scratch
        rc = lib.aclrtMallocHost(s.uptr, nbytes)
        if rc:
            check(rc, "aclrtMallocHost")
        return int(s.uptr[0]), None

    def device_stats(self, index: int) -> dict[str, int]:
        return native_stats(index)

    def reset_peak(self, index: int) -> None:
        _memrecord.reset_peak(index)

    def reset_accumulated(self, index: int) -> None:
        reset_native_accumulated(index)

    def empty_cache(self) -> None:
        return None


NATIVE: Backend = _Native()
_registered: dict[str, Backend] = {"native": NATIVE}


#: The backend in use (None until the first allocation chooses it; read on every
#: allocation as ``current or device()``).
current: Backend | None = None


def _choose() -> Backend:
    global current
    want = get_options().allocator
    current = _registered.get(want, NATIVE)
    _memcore.forget_pools()  # the buffers' C hit path serves the caching backend only
    return current


def register(backend: Backend) -> None:
    """Make ``backend`` selectable under ``backend.name`` (called from above)."""
    _registered[backend.name] = backend


def available() -> tuple[str, ...]:
    """Names of the registered backends."""
    return tuple(_registered)


def select(name: str) -> Backend:
    """Use backend ``name`` for new allocations from now on; returns the previous one."""
    global current
    if name not in _registered:
        raise ValueError(f"unknown allocator backend {name!r}; available: {', '.join(_registered)}")
    prev = current if current is not None else _choose()
    current = _registered[name]
    _memcore.forget_pools()  # caches are remembered again by the backend serving them
    return prev


def empty_all() -> None:
    """``empty_cache()`` of every registered backend (buffers of an earlier backend may
    still be cached after :func:`select`)."""
    for be in list(_registered.values()):
        be.empty_cache()


def device() -> Backend:
    """The backend in use (chooses it on first call)."""
    return current if current is not None else _choose()


host = device
