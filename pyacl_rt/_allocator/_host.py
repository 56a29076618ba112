"""Pinned host memory pool behind :class:`~pyacl_rt.HostBuffer`.

Blocks are ``aclrtMallocHost`` allocations of power-of-two sizes (at least 512
bytes, so at most half of a block is rounding waste), reused by size. The host may
touch a HostBuffer as soon as it exists, so a freed block is reused only once the
work of *every* stream that used it has completed: an event is recorded on each of
them at free time (torch's CachingHostAllocator rule). When ``aclrtMallocHost`` fails,
idle blocks are freed and the allocation retried once.

The block bookkeeping (states, idle stacks, counters) is C (``_cachecore.HostCore``), so
that a HostBuffer served from the pool is created and closed without Python code
(:mod:`pyacl_rt._memcore`); this class does what talks to the runtime and the guards.

Floor 7 (allocator): imports floors 1-6 only.
"""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING

from .. import _runtime as runtime
from .. import errors, lowlevel
from .._cachecore import HostCore
from .._log import get_logger
from .._state import _check, _CtxRef, _lib, _local
from . import _guards

if TYPE_CHECKING:
    from .._memory.backend import Releaser
    from .._memory.records import _Mem

_log = get_logger("pyacl_rt")


def block_size(nbytes: int) -> int:
    """Pool block size of a request: the next power of two, at least 512 bytes."""
    return max(512, 1 << (nbytes - 1).bit_length())


class HostPool:
    """The process's pinned host pool (one; blocks usable from any context)."""

    def __init__(self) -> None:
        self.gen = runtime.generation()
        self.lock = threading.RLock()
        #: the blocks: states, idle stacks by size, counters (host_memory_stats)
        self.core = HostCore()
        #: (block, guards) of blocks freed while streams may still use them
        self.pending: collections.deque[tuple[int, list[_guards.Guard]]] = collections.deque()

    def allocate(self, ctx: _CtxRef, nbytes: int) -> tuple[int, Releaser]:
        size = block_size(nbytes)
        with self.lock:
            if self.pending:
                self.process_pending()
            ptr: int = self.core.take(nbytes)
            if not ptr:
                ptr = self._malloc(size)
                self.core.add(ptr, size)
        return ptr, self

    def _malloc(self, size: int) -> int:
        s = _local.st.scratch
        rc = _lib.aclrtMallocHost(s.uptr, size)
        if rc in errors.OUT_OF_MEMORY_CODES:
            lowlevel.clear_error()
            self.process_pending(wait=True)
            self.release_idle()
            rc = _lib.aclrtMallocHost(s.uptr, size)
        if rc:
            _check(rc, "aclrtMallocHost")
        return int(s.uptr[0])

    def release(self, m: _Mem, base: int) -> None:
        """A HostBuffer was freed: idle now, or once every stream that used it passed
        an event recorded now. Never raises."""
        try:
            with self.lock:
                streams = [s for r in m.streams if (s := r()) is not None and not s.closed]
                if not streams:
                    self.core.give(base)  # 0: finalized meanwhile
                    return
                if not self.core.hold(base):
                    return  # finalized meanwhile
                prev = _local.st.ctx
                guards = _guards.record(streams)
                if prev is not None and _local.st.ctx is not prev and prev.device >= 0:
                    prev.make_current()
                self.pending.append((base, guards))
                self.core.set_pending(len(self.pending))
        except BaseException:  # pragma: no cover - defensive (finalizer context)
            _log.debug("pyacl_rt host pool: release failed", exc_info=True)

    def process_pending(self, wait: bool = False) -> None:
        if wait and _local.st.in_callback:
            wait = False
        with self.lock:
            for _ in range(len(self.pending)):
                base, guards = self.pending.popleft()
                left = [g for g in guards if not _guards.done(g, wait)]
                if left:
                    self.pending.append((base, left))
                else:
                    self.core.make_idle(base)
            self.core.set_pending(len(self.pending))

    def release_idle(self) -> int:
        """``aclrtFreeHost`` every idle block; returns bytes released."""
        released = 0
        with self.lock:
            for ptr, size in self.core.drain_idle():
                self._free(ptr)
                released += size
        return released

    def _free(self, ptr: int) -> None:
        rc = _lib.aclrtFreeHost(ptr)
        if rc:
            _log.warning("pyacl_rt host pool: aclrtFreeHost(0x%x) failed with %d", ptr, rc)
            lowlevel.clear_error()

    def empty_cache(self) -> None:
        """Wait for pending guards, then free every idle block."""
        with self.lock:
            if self.pending:
                self.process_pending(wait=True)
            self.release_idle()

    def stats(self) -> dict[str, int]:
        """``host_memory_stats()``: bytes of live HostBuffer blocks and of the pool."""
        out: dict[str, int] = self.core.stats()
        return out

    def teardown(self, free: bool) -> None:
        """Forget every block; ``free``: ``aclrtFreeHost`` them (finalize)."""
        with self.lock:
            self.pending.clear()
            blocks = self.core.clear()
            if free and runtime.is_alive(self.gen):
                for ptr, _size in blocks:
                    self._free(ptr)
