"""Pinned host memory pool behind :class:`~pyacl_rt.HostBuffer`.

Blocks are ``aclrtMallocHost`` allocations of power-of-two sizes (at least 512
bytes, so at most half of a block is rounding waste), reused by size. The host may
touch a HostBuffer as soon as it exists, so a freed block is reused only once the
work of *every* stream that used it has completed: an event is recorded on each of
them at free time (torch's CachingHostAllocator rule). When ``aclrtMallocHost`` fails,
idle blocks are freed and the allocation retried once; the error then keeps the code and
runtime message of the call that failed. A request above :data:`MAX_REQUEST` (2**63
bytes: its block would not fit 64 bits) raises the same out-of-memory error at once, and
so does a block larger than the machine's physical memory (idle blocks are kept).

The block bookkeeping (states, idle stacks, counters) is C (``_cachecore.HostCore``), so
that a HostBuffer served from the pool is created and closed without Python code
(:mod:`pyacl_rt._memcore`); this class does what talks to the runtime and the guards.

Layer 7 (allocator): imports layers 1-6 only.
"""

from __future__ import annotations

import collections
import os
import threading
from typing import TYPE_CHECKING

from .. import _runtime as runtime
from .. import errors, lowlevel
from .._cachecore import HostCore
from .._log import get_logger
from .._state import CtxRef, check, lib, local
from . import _guards

if TYPE_CHECKING:
    from .._memory.backend import Releaser
    from .._memory.records import Mem

_log = get_logger("pyacl_rt")


_EXPLANATION = "Pinned host memory exhausted: free HostBuffers (or empty caches), or allocate less."

#: The largest request the pool serves (bytes): its block, the next power of two, must
#: fit ``size_t``.
MAX_REQUEST = 1 << 63


def _physical_memory() -> int:
    """Bytes of physical memory of the machine (0: unknown)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        return 0


def block_size(nbytes: int) -> int:
    """Pool block size of a request (0 < nbytes <= MAX_REQUEST): the next power of
    two, at least 512 bytes."""
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

    @property
    def blocks(self) -> dict[int, int]:
        """Every block the pool owns (address -> size), a snapshot."""
        return self.core.blocks()

    def allocate(self, ctx: CtxRef, nbytes: int) -> tuple[int, Releaser]:
        if nbytes > MAX_REQUEST:
            raise errors.AclOutOfMemoryError(
                f"pinned host pool: cannot allocate {nbytes} bytes, more than its maximum "
                f"of {MAX_REQUEST} bytes; nothing was allocated",
                code=207001,
                explanation=_EXPLANATION,
            )
        size = block_size(nbytes)
        with self.lock:
            if self.pending:
                self.process_pending()
            ptr: int = self.core.take(nbytes)
            if not ptr:
                ptr = self._malloc(size, nbytes)
                self.core.add(ptr, size)
        return ptr, self

    def _malloc(self, size: int, nbytes: int) -> int:
        s = local.st.scratch
        rc = lib.aclrtMallocHost(s.uptr, size)
        if rc in errors.OUT_OF_MEMORY_CODES:
            recent = lowlevel.recent_error_message()
            lowlevel.clear_error()
            physical = _physical_memory()
            if physical and size > physical:  # no retry can help: keep the idle blocks
                raise errors.AclOutOfMemoryError(
                    f"pinned host pool: cannot allocate {nbytes} bytes (a block of {size} "
                    f"bytes), more than the machine's {physical} bytes of memory",
                    code=rc,
                    function="aclrtMallocHost",
                    recent_message=recent,
                    explanation=_EXPLANATION,
                )
            self.process_pending(wait=True)
            self.release_idle()
            rc = lib.aclrtMallocHost(s.uptr, size)
            if rc in errors.OUT_OF_MEMORY_CODES:
                raise errors.AclOutOfMemoryError(
                    f"pinned host pool: cannot allocate {nbytes} bytes (a block of {size} "
                    "bytes); idle blocks were freed and the allocation retried",
                    code=rc,
                    function="aclrtMallocHost",
                    recent_message=lowlevel.recent_error_message(),
                    explanation=_EXPLANATION,
                )
        if rc:
            check(rc, "aclrtMallocHost")
        return int(s.uptr[0])

    def release(self, m: Mem, base: int) -> None:
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
                # The block is held from here on: it goes on the pending list whatever
                # happens, guarded by the streams themselves if recording events is
                # interrupted (a lost entry would strand the block and its counters).
                guards = _guards.stream_guards(streams)
                try:
                    guards = _guards.record(streams)
                finally:
                    self.pending.append((base, guards))
                    self.core.set_pending(len(self.pending))
        except BaseException:  # pragma: no cover - defensive (finalizer context)
            _log.debug("pyacl_rt host pool: release failed", exc_info=True)

    def process_pending(self, wait: bool = False) -> None:
        if wait and local.st.in_callback:
            wait = False
        with self.lock:
            try:
                for _ in range(len(self.pending)):
                    base, guards = self.pending.popleft()
                    try:
                        left = _guards.pending(guards, wait)
                    except BaseException:  # interrupted: keep what is outstanding
                        self.pending.append((base, guards))
                        raise
                    if left:
                        self.pending.append((base, left))
                    else:
                        self.core.make_idle(base)
            finally:
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
        rc = lib.aclrtFreeHost(ptr)
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
