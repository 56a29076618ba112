"""The caching allocator of one device (its primary context).

Bookkeeping is in :mod:`pyacl_rt._cachecore` (one C call per cached alloc or free);
this module adds what talks to the runtime: segments (``aclrtMalloc`` /
``aclrtFree``), event guards for blocks freed while other streams may still use them,
the per-process memory fraction, and the out-of-memory path: on a failed
``aclrtMalloc`` (or one over the fraction) wait for the pending guards, retry the
cache, free every cached segment (``num_alloc_retries``), retry ``aclrtMalloc``; then
raise :class:`~pyacl_rt.errors.AclOutOfMemoryError` (``num_ooms``) whose message gives
allocated / reserved / free memory in GiB and which keeps the code and runtime message
of the ``aclrtMalloc`` that failed. A request no retry can serve - larger than the
allocator can represent (:data:`~pyacl_rt._cachecore.MAX_ALLOC`, 2**63 - 2 MiB) or
than the device's total memory - raises the same error at once, with nothing
allocated and the cache left alone.

Layer 7 (allocator): imports layers 1-6 only.
"""

from __future__ import annotations

import collections
import threading
import weakref
from typing import TYPE_CHECKING

from .. import _capture, errors, lowlevel
from .. import _runtime as runtime
from .._cachecore import MAX_ALLOC, SMALL_SIZE, Core, allocation_size, round_size
from .._devinfo import mem_get_info
from .._log import get_logger
from .._state import (
    CtxRef,
    check,
    current,
    gate_exit,
    gate_try_enter,
    lib,
    local,
    sliced_wait_device,
)
from . import _guards, _history

if TYPE_CHECKING:
    from .._memory.records import Mem
    from .._stream import Stream

_log = get_logger("pyacl_rt")
_GiB = float(1 << 30)
# offsets into Core.stats(): [kind][pool][field], 3 pools x 4 fields per kind
_ALLOCATED = 4 * 12
_RESERVED = 5 * 12
#: Frees trim the cache (non-blocking) while reserved > 1.25 x peak allocated (and
#: more than 20 MiB above it).
TRIM_PERMILLE = 1250
_ALL_TICKS = (1 << 64) - 1


class StreamPool:
    """Releaser of the blocks allocated for one stream (``DeviceBuffer``'s ``m.rel``)."""

    __slots__ = ("alloc", "core", "key", "state", "stream")

    def __init__(self, alloc: DeviceAllocator, stream: Stream) -> None:
        self.alloc = alloc
        self.core = alloc.core
        self.key = stream.raw_handle
        #: the stream's private state list: identifies the Stream object (a handle
        #: may be reused by a new stream once the old one is destroyed)
        self.state = stream.stream_state
        self.stream = weakref.ref(stream)

    def release(self, m: Mem, base: int) -> None:
        """Give the block back: at once when only its own stream used it, else once
        events recorded now on the other streams completed. Never raises."""
        try:
            refs = m.streams
            if refs and (_capture.by_stream or _capture.graph_streams):
                cap = _capture.used_by(refs)
                if cap is not None:  # a capture uses the block: free it with its graph
                    cap.deferred.append(lambda: self.release(m, base))
                    return
            if refs:
                others = self.alloc.other_streams(refs, self.key)
                if others:
                    self.alloc.free_guarded(base, others, self.key)
                    return
            if _history.enabled:
                self.alloc.trace_free(base, self.key, pending=False)
            r = self.core.free(base)
            if r < 0:
                self.alloc.trim()
            elif not r:
                _log.warning("pyacl_rt allocator: freeing unknown block 0x%x", base)
        except BaseException:  # pragma: no cover - defensive (finalizer context)
            _log.debug("pyacl_rt allocator: release failed", exc_info=True)


class DeviceAllocator:
    """Caching allocator of device ``index`` (blocks in ``ctx``, its primary context)."""

    def __init__(self, index: int, ctx: CtxRef) -> None:
        self.index = index
        self.ctx = ctx
        self.gen = runtime.generation()
        self.core = Core()
        self.lock = threading.RLock()
        #: (block address, remaining guards) of blocks freed under pending work
        self.pending: collections.deque[tuple[int, list[_guards.Guard]]] = collections.deque()
        self.pools: dict[int, StreamPool] = {}
        #: keys of the graph-private pools in use (see _graphpool): never adopted by
        #: streams nor released by trims or empty_cache
        self.graph_keys: set[int] = set()
        #: stream -> (Core tick, guards recorded on it then): see adopt_idle
        self.marks: dict[int, tuple[int, list[_guards.Guard]]] = {}
        self.fraction: float | None = None
        self.core.set_trim(TRIM_PERMILLE)
        self.in_slow = False
        self.trim_tick = -1
        #: (code, runtime message) of the last aclrtMalloc that ran out of memory, or
        #: None (refused by the memory fraction); set under ``lock``.
        self.last_failure: tuple[int, str | None] | None = None
        self.scalars = {
            "num_alloc_retries": 0,
            "num_ooms": 0,
            "num_sync_all_streams": 0,
            "num_device_alloc": 0,
            "num_device_free": 0,
            "max_split_size": -1,
        }

    # ------------------------------------------------------------ streams
    def pool(self, stream: Stream) -> StreamPool:
        """The releaser of ``stream`` (replaced when a new stream reuses a handle)."""
        sp = self.pools.get(stream.raw_handle)
        if sp is None or sp.state is not stream.stream_state:
            sp = self.pools[stream.raw_handle] = StreamPool(self, stream)
        return sp

    def adopt_idle(self, key: int) -> int:
        """Hand wholly free segments of other streams to stream ``key`` once their
        pending work completed: an event recorded on the other stream (at an earlier
        miss, or now) guards the segments that were free when it was recorded.
        Returns bytes moved."""
        moved = 0
        for other in self.core.idle_streams():
            if other != key and other not in self.graph_keys:
                tick = self._passed(other, wait=False)
                if tick is not None:
                    moved += self.core.adopt(other, key, tick)
        return moved

    def _passed(self, key: int, wait: bool) -> int | None:
        """The Core tick up to which segments wholly free on stream ``key`` are no
        longer used by its queued work, or None (not yet known). Records an event on
        the stream when none is outstanding; ``wait``: wait for it."""
        if key in self.graph_keys:
            return None  # a graph's private pool: kept until the graph goes
        if _capture.by_stream and _capture.find(key) is not None:
            return None  # capturing: no query of it, no guard event in the capture
        mark = self.marks.get(key)
        if mark is None:
            sp = self.pools.get(key)
            s = sp.stream() if sp is not None else None
            if s is None or s.closed:  # destroyed: its work completed
                return int(self.core.tick())
            tick = self.core.tick()
            try:
                if s.query():  # idle: everything queued before now completed
                    return int(tick)
            except Exception:
                pass
            mark = self.marks[key] = (self.core.tick(), _guards.record([s]))
        tick, guards = mark
        left = _guards.pending(guards, wait)
        if not left:
            del self.marks[key]
            return tick
        self.marks[key] = (tick, left)
        return None

    def other_streams(self, refs: list[weakref.ref[Stream]], key: int) -> list[Stream]:
        """Live streams in ``refs`` other than the allocation stream ``key``."""
        out = []
        for r in refs:
            s = r()
            if s is None or s.closed or (s.raw_handle == key and s.ctx_ref is self.ctx):
                continue
            out.append(s)
        return out

    # ------------------------------------------------------------ freeing
    def free_guarded(self, base: int, streams: list[Stream], key: int) -> None:
        """Free ``base`` whose memory ``streams`` may still use: pending until guards
        recorded on them now have passed (never raises)."""
        guards = _guards.record(streams)
        try:
            if _history.enabled:
                self.trace_free(base, key, pending=True)
            if self.core.free_pending(base):
                self.pending.append((base, guards))
                return
        except BaseException:
            _guards.release(guards)  # the block was not queued: its events go back
            raise
        _log.warning("pyacl_rt allocator: freeing unknown block 0x%x", base)
        _guards.release(guards)

    def process_pending(self, wait: bool = False) -> int:
        """Make blocks whose guards passed reusable; ``wait``: wait for all of them.
        Returns how many became free."""
        freed = 0
        if wait and local.st.in_callback:
            wait = False
        for _ in range(len(self.pending)):
            try:
                base, guards = self.pending.popleft()
            except IndexError:
                break
            try:
                left = _guards.pending(guards, wait)
            except BaseException:  # interrupted: keep what is outstanding (trimmed)
                self.pending.append((base, guards))
                raise
            if left:
                self.pending.append((base, left))
                continue
            try:
                size = self.core.complete(base)
            except BaseException:  # out of host memory: its guards passed, retry later
                self.pending.append((base, []))
                raise
            if size:
                freed += 1
                if _history.enabled:
                    _history.event(self.index, "free_completed", base, size, 0)
        return freed

    def trace_free(self, base: int, key: int, pending: bool) -> None:
        info = self.core.block(base)
        size = info[0] if info else 0
        _history.event(self.index, "free_requested", base, size, key)
        if not pending:
            _history.event(self.index, "free_completed", base, size, key)

    # ----------------------------------------------------------- allocating
    def allocate_slow(self, key: int, nbytes: int) -> int:
        """A cache miss: pending blocks, a new segment, or the OOM path."""
        if nbytes > MAX_ALLOC:
            raise self._too_large(nbytes, f"the caching allocator's maximum of {MAX_ALLOC}")
        if not runtime.is_alive(self.gen) or self.ctx.device < 0:
            raise errors.RuntimeFinalizedError(
                "this caching allocator belongs to a runtime that was finalized (or a "
                "parent process); allocate again after init()",
                explanation="",
            )
        with self.lock:
            self.in_slow = True
            try:
                return self._allocate_slow(key, nbytes)
            finally:
                self.in_slow = False

    def _allocate_slow(self, key: int, nbytes: int) -> int:
        """The slow path body (``self.lock`` held, ``in_slow`` set)."""
        if self.pending and self.process_pending():
            p: int = self.core.alloc(key, nbytes)
            if p:
                return p
        if self.adopt_idle(key):
            p = self.core.alloc(key, nbytes)
            if p:
                return p
        size = allocation_size(nbytes)
        st = self.core.stats()
        if st[_RESERVED] - st[_ALLOCATED] >= size:
            # The cache holds a segment's worth of memory that cannot serve this
            # request (other streams, fragments): give idle segments back first
            # rather than grow.
            self.release_idle_segments(wait_for=key)
        base = self._malloc(size)
        if not base:
            base = self._retry(key, nbytes, size)
            if base < 0:
                return -base  # a cached block fit after waiting
        try:
            self.core.add_segment(key, base, size, round_size(nbytes) <= SMALL_SIZE)
        except BaseException:  # bookkeeping failed (MemoryError): do not leak the segment
            self._free_segments([(base, size)])
            raise
        if _history.enabled:
            _history.event(self.index, "segment_alloc", base, size, key)
        p = self.core.alloc(key, nbytes)
        if not p:  # pragma: no cover - the new segment always fits
            raise RuntimeError("pyacl_rt allocator: a new segment did not fit its request")
        return p

    def _retry(self, key: int, nbytes: int, size: int) -> int:
        """After a failed segment allocation: returns a new segment's address, or
        minus the address of a cached block; raises the OOM error."""
        total = self._mem_info()[1]
        if total and size > total:  # no retry can help: keep the cache
            raise self._oom(key, nbytes, size, retried=False)
        self.scalars["num_alloc_retries"] += 1
        if self.pending and self.process_pending(wait=True):
            p: int = self.core.alloc(key, nbytes)
            if p:
                return -p
        self.release_cached()
        base = self._malloc(size)
        if base:
            return base
        raise self._oom(key, nbytes, size, retried=True)

    def _oom(self, key: int, nbytes: int, size: int, retried: bool) -> errors.AclOutOfMemoryError:
        """Count an out-of-memory failure and build its error."""
        self.scalars["num_ooms"] += 1
        if _history.enabled:
            free = self._mem_info()[0]
            _history.event(self.index, "oom", 0, size, key, device_free=free)
        return self._oom_error(nbytes, retried)

    def _malloc(self, size: int) -> int:
        """``aclrtMalloc`` a segment of ``size`` bytes; 0 when out of memory (or over the
        memory fraction). Other errors raise."""
        if self.fraction is not None:
            total = self._mem_info()[1]
            if self.core.stats()[_RESERVED] + size > int(self.fraction * total):
                self.last_failure = None
                return 0
        self.ctx.ensure_current()
        s = local.st.scratch
        rc = lib.aclrtMalloc(s.uptr, size, 0)
        if rc:
            if rc in errors.OUT_OF_MEMORY_CODES:
                # kept for the error raised if the retries fail too
                self.last_failure = (rc, lowlevel.recent_error_message())
                lowlevel.clear_error()
                return 0
            check(rc, "aclrtMalloc")
        self.scalars["num_device_alloc"] += 1
        return int(s.uptr[0])

    def _mem_info(self) -> tuple[int, int]:
        try:
            return mem_get_info(self.index)
        except Exception:  # pragma: no cover - lost device: report what we can
            return 0, 0

    def _oom_error(self, nbytes: int, retried: bool = True) -> errors.AclOutOfMemoryError:
        st = self.core.stats()
        free, total = self._mem_info()
        allocated, reserved = st[_ALLOCATED], st[_RESERVED]
        limit = ""
        if self.fraction is not None:
            limit = (
                f"; the per-process memory fraction {self.fraction:g} allows "
                f"{self.fraction * total / _GiB:.2f} GiB"
            )
        msg = (
            f"NPU out of memory on device {self.index}: tried to allocate "
            f"{round_size(nbytes) / _GiB:.2f} GiB ({nbytes} bytes requested); "
            f"{total / _GiB:.2f} GiB total capacity; {allocated / _GiB:.2f} GiB already "
            f"allocated; {free / _GiB:.2f} GiB free; {reserved / _GiB:.2f} GiB reserved in "
            f"total by pyacl_rt (allocated + cached){limit}. "
            + (
                "Cached blocks were freed and the allocation retried."
                if retried
                else "The request exceeds the device's total memory; the cache was kept."
            )
        )
        code, recent = self.last_failure or (207001, None)
        return errors.AclOutOfMemoryError(
            msg, code=code, function="aclrtMalloc", recent_message=recent
        )

    def _too_large(self, nbytes: int, limit: str) -> errors.AclOutOfMemoryError:
        """The error for a request no retry can serve (nothing was allocated)."""
        return errors.AclOutOfMemoryError(
            f"NPU out of memory on device {self.index}: cannot allocate {nbytes} bytes, more "
            f"than {limit} bytes; nothing was allocated",
            code=207001,
        )

    # ------------------------------------------------------------- releasing
    def release_cached(self) -> int:
        """``aclrtFree`` every segment that is wholly free; returns bytes released."""
        released = 0
        if local.st.in_callback:
            return 0  # the device synchronize below would wait for this callback
        if _capture.by_stream:
            return 0  # a device synchronize would break the graph capture running
        with self.lock:
            if not self.core.idle_streams():
                return 0
            with current(self.ctx):
                # aclrtFree does not wait for queued work (cudaFree does): blocks given
                # back to their stream's cache may still be in use on it. In slices:
                # Ctrl-C interrupts the wait (nothing freed yet).
                sliced_wait_device(-1)
                self.scalars["num_sync_all_streams"] += 1
                if self.graph_keys:  # every stream's free segments, no graph pool's
                    segs = []
                    for key in self.core.idle_streams():
                        if key not in self.graph_keys:
                            segs += self.core.release_cached(key, _ALL_TICKS)
                else:
                    segs = self.core.release_cached()
                released = self._free_segments(segs)
        return released

    def trim(self) -> None:
        """A free left the cache over budget: release the wholly free segments whose
        streams are known to be done with them (never waits; skipped on a
        host-callback thread, inside this allocator's own slow path, and when no
        segment became free since the last trim and no guard is outstanding).

        A gated section: the segments it takes out of the cache are all freed before a
        finalize on another thread releases the allocator; once finalize started it
        does nothing (finalize frees every segment)."""
        if local.st.in_callback or self.in_slow:
            return
        tick = self.core.tick()
        if tick == self.trim_tick and not self.marks:
            return
        if not self.lock.acquire(blocking=False):
            return
        if not gate_try_enter():
            self.lock.release()
            return
        try:
            self.trim_tick = tick
            self.release_idle_segments()
        except Exception:  # pragma: no cover - the free path never raises
            _log.debug("pyacl_rt allocator: trim failed", exc_info=True)
        finally:
            gate_exit()
            self.lock.release()

    def release_idle_segments(self, wait_for: int | None = None) -> int:
        """``aclrtFree`` the wholly free segments of each stream whose guard event (see
        :meth:`_passed`) completed - no device-wide synchronize. The event of stream
        ``wait_for`` (the caller's allocation stream) is waited for (never on a
        host-callback thread). Returns bytes released."""
        if local.st.in_callback:
            wait_for = None
        released = 0
        with self.lock:
            for key in self.core.idle_streams():
                tick = self._passed(key, key == wait_for)
                if tick is not None:
                    released += self._free_segments(self.core.release_cached(key, tick))
        return released

    def _free_segments(self, segments: list[tuple[int, int]]) -> int:
        if not segments:
            return 0
        released = 0
        with current(self.ctx):
            for base, size in segments:
                rc = lib.aclrtFree(base)
                if rc:
                    _log.warning("pyacl_rt allocator: aclrtFree(0x%x) failed with %d", base, rc)
                    lowlevel.clear_error()
                self.scalars["num_device_free"] += 1
                released += size
                if _history.enabled:
                    _history.event(self.index, "segment_free", base, size, 0)
        return released

    def release_pool(self, key: int) -> int:
        """``aclrtFree`` the wholly free segments of graph pool ``key`` (no graph uses
        it and its replays finished); returns bytes released (``lock`` held)."""
        return self._free_segments(self.core.release_cached(key, _ALL_TICKS))

    def empty_cache(self) -> None:
        """Wait for pending guards, then free every wholly free segment."""
        wait = not local.st.in_callback
        with self.lock:
            if self.pending:
                self.process_pending(wait=wait)
            for key, (tick, guards) in list(self.marks.items()):
                left = _guards.pending(guards, wait)  # passed: events back to the pool
                if left:
                    self.marks[key] = (tick, left)
                else:
                    del self.marks[key]
            self.release_cached()

    def teardown(self, free: bool) -> None:
        """Forget everything; ``free``: ``aclrtFree`` every segment (finalize; buffers
        were already released by the memory layer)."""
        self.pending.clear()
        self.marks.clear()
        segments = self.core.clear()
        if not free or not runtime.is_alive(self.gen) or self.ctx.device < 0:
            return
        try:
            self._free_segments(segments)
        except Exception:  # pragma: no cover - defensive
            _log.debug("pyacl_rt allocator: teardown failed", exc_info=True)
