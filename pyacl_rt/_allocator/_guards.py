"""Events that guard reuse of freed memory: a block freed while other streams may
still use it is reused only once an event recorded on each of those streams (at free
time) has completed.

Events are raw ``aclrtEvent`` handles (ints) pooled per device and created in the
device's primary context. A stream of an explicit Context gets no event: its guard is
the stream itself (reuse once ``aclrtStreamQuery`` says it is idle), which is safe
but may wait for work queued later.

Floor 7 (allocator): imports floors 1-6 only.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from .._log import get_logger
from .._state import _check, _CtxRef, _fast, _lib, _local

if TYPE_CHECKING:
    from .._stream import Stream

_log = get_logger("pyacl_rt")
_record_event = _fast.record_event
_query_event = _fast.query_event_status
_sync_event = _fast.synchronize_event

#: ("event", pool, handle) or ("stream", weakref to the stream).
Guard = tuple[Any, ...]


class EventPool:
    """Idle events of one primary context (``aclrtCreateEvent`` on demand)."""

    __slots__ = ("ctx", "idle", "out")

    def __init__(self, ctx: _CtxRef) -> None:
        self.ctx = ctx
        self.idle: list[int] = []
        #: every event created and not destroyed (idle or guarding a block)
        self.out: set[int] = set()

    def get(self) -> int:
        """An event handle (the pool's context must be current)."""
        try:
            return self.idle.pop()
        except IndexError:
            pass
        s = _local.st.scratch
        rc = _lib.aclrtCreateEvent(s.uptr)
        if rc:
            _check(rc, "aclrtCreateEvent")
        ev = int(s.uptr[0])
        self.out.add(ev)
        return ev

    def destroy(self, events: list[int] | set[int]) -> None:
        """Destroy ``events`` (never raises)."""
        if not events or self.ctx.device < 0:
            return
        try:
            if _local.st.ctx is not self.ctx:
                self.ctx.make_current()
        except Exception:  # pragma: no cover - dead context: the runtime reclaims them
            return
        for ev in list(events):
            self.out.discard(ev)
            rc = _lib.aclrtDestroyEvent(ev)
            if rc:
                _log.debug("pyacl_rt allocator: aclrtDestroyEvent failed with %d", rc)

    def destroy_idle(self) -> None:
        idle, self.idle = self.idle, []
        self.destroy(idle)

    def destroy_all(self) -> None:
        self.idle = []
        self.destroy(set(self.out))


#: device index -> event pool of its primary context
_pools: dict[int, EventPool] = {}


def _pool(s: Stream) -> EventPool:
    p = _pools.get(s._device)
    if p is None or p.ctx is not s._ctx:
        p = _pools[s._device] = EventPool(s._ctx)
    return p


def record(streams: list[Stream]) -> list[Guard]:
    """Guards for ``streams`` as of now. Never raises: a stream whose event cannot be
    recorded is guarded by the stream itself."""
    guards: list[Guard] = []
    for s in streams:
        if s._ctx.owner is None:
            try:
                if _local.st.ctx is not s._ctx:
                    s._ctx.make_current()
                pool = _pool(s)
                ev = pool.get()
                try:
                    _record_event(ev, s._handle)
                except BaseException:
                    pool.idle.append(ev)
                    raise
                guards.append(("event", pool, ev))
                continue
            except Exception as exc:
                _log.debug("pyacl_rt allocator: recording a guard event failed: %s", exc)
        guards.append(("stream", weakref.ref(s)))
    return guards


def done(g: Guard, wait: bool) -> bool:
    """True once guard ``g`` passed (then its event is back in the pool). ``wait``:
    block until it does. Never raises (a failing event or stream counts as passed
    only once its stream is destroyed or the wait returned)."""
    if g[0] == "event":
        _, pool, ev = g
        try:
            if wait:
                _sync_event(ev)
            elif _query_event(ev) != 1:
                return False
        except Exception as exc:
            _log.warning("pyacl_rt allocator: waiting for a guard event failed: %s", exc)
            if pool.ctx.device >= 0 and not wait:
                return False
        pool.idle.append(ev)
        return True
    s = g[1]()
    if s is None or s.closed:
        return True  # destroying a stream waits for its work
    try:
        if wait and not _local.st.in_callback:
            s.synchronize()
            return True
        return bool(s.query())
    except Exception:
        return bool(s.closed)


def forget() -> None:
    """After fork: the pools belong to the parent's runtime."""
    _pools.clear()


def destroy_all() -> None:
    """Finalize: destroy every pooled event (idle or guarding)."""
    for p in list(_pools.values()):
        p.destroy_all()
    _pools.clear()


def destroy_idle() -> None:
    for p in list(_pools.values()):
        p.destroy_idle()
