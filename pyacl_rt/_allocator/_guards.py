"""Events that guard reuse of freed memory: a block freed while other streams may
still use it is reused only once an event recorded on each of those streams (at free
time) has completed.

Events are raw ``aclrtEvent`` handles (ints) pooled per primary context and created
in it; a guard's event goes back to the pool (at most :data:`IDLE_MAX` idle, the rest
destroyed) as soon as it is seen complete, whatever happened to its stream meanwhile,
or when the guard is dropped (:func:`release`); :func:`pending` looks at every guard of
a list and keeps what is outstanding even when interrupted. A stream of an explicit
Context gets no event: its guard is the stream itself (reuse once ``aclrtStreamQuery``
says it is idle), which is safe but may wait for work queued later.

Layer 7 (allocator): imports layers 1-6 only.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from .. import lowlevel
from .._log import get_logger
from .._state import CtxRef, check, current, fast, lib, local

if TYPE_CHECKING:
    from .._stream import Stream

_log = get_logger("pyacl_rt")
_record_event = fast.record_event
_query_event = fast.query_event_status
_sync_event = fast.synchronize_event

#: ("event", pool, handle) or ("stream", weakref to the stream).
Guard = tuple[Any, ...]

#: Idle events kept per device (bytes of nothing: runtime handles); an event coming back
#: to a full pool is destroyed. Busy events are bounded by what they guard.
IDLE_MAX = 64


class EventPool:
    """Events of one primary context (``aclrtCreateEvent`` on demand): at most
    :data:`IDLE_MAX` idle ones, plus those guarding blocks (``out`` holds both).
    Thread-safe: every change of ``idle`` / ``out`` happens under ``lock``."""

    __slots__ = ("ctx", "idle", "lock", "out")

    def __init__(self, ctx: CtxRef) -> None:
        self.ctx = ctx
        self.idle: list[int] = []
        #: every event created and not destroyed (idle or guarding a block)
        self.out: set[int] = set()
        self.lock = threading.Lock()

    def get(self) -> int:
        """An event handle (the pool's context must be current)."""
        with self.lock:
            if self.idle:
                return self.idle.pop()
        s = local.st.scratch
        rc = lib.aclrtCreateEvent(s.uptr)
        if rc:
            check(rc, "aclrtCreateEvent")
        ev = int(s.uptr[0])
        with self.lock:
            self.out.add(ev)
        return ev

    def put(self, ev: int) -> None:
        """Take ``ev`` back (its guard passed, or it is no longer needed); destroyed
        when the idle list is full. Never raises."""
        with self.lock:
            if ev not in self.out or ev in self.idle:
                return  # destroyed meanwhile (finalize), or given back twice
            if len(self.idle) < IDLE_MAX:
                self.idle.append(ev)
                return
            self.out.discard(ev)
        self._destroy([ev])

    def _destroy(self, events: list[int]) -> None:
        """Destroy ``events`` (already taken out of ``out``; never raises)."""
        if not events or self.ctx.device < 0:
            return  # a dead context: the runtime reclaimed them
        try:
            with current(self.ctx):
                for ev in events:
                    rc = lib.aclrtDestroyEvent(ev)  # asynchronous: fine while pending
                    if rc:
                        _log.debug("pyacl_rt allocator: aclrtDestroyEvent failed with %d", rc)
                        lowlevel.clear_error()
        except Exception:  # pragma: no cover - dead context: the runtime reclaims them
            _log.debug("pyacl_rt allocator: destroying guard events failed", exc_info=True)

    def destroy_idle(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
            self.out.difference_update(idle)
        self._destroy(idle)

    def destroy_all(self) -> None:
        with self.lock:
            self.idle = []
            out, self.out = list(self.out), set()
        self._destroy(out)


#: primary context -> its event pool (a device's primary context changes only across
#: finalize / init; pools of dead contexts are dropped by destroy_idle)
_pools: dict[CtxRef, EventPool] = {}


def _pool(s: Stream) -> EventPool:
    p = _pools.get(s.ctx_ref)
    if p is None:  # setdefault: two threads creating it at once share one pool
        p = _pools.setdefault(s.ctx_ref, EventPool(s.ctx_ref))
    return p


def record(streams: list[Stream]) -> list[Guard]:
    """Guards for ``streams`` as of now (the thread's context is restored after).
    Never raises an Exception: a stream whose event cannot be recorded is guarded by
    the stream itself. Interrupted (e.g. ``KeyboardInterrupt``), it gives the events
    recorded so far back first (callers that must not lose a block fall back to
    :func:`stream_guards`)."""
    guards: list[Guard] = []
    try:
        with current():
            _record_all(streams, guards)
    except BaseException:
        release(guards)
        raise
    return guards


def stream_guards(streams: list[Stream]) -> list[Guard]:
    """Guards that are the streams themselves (no event): what :func:`record` falls
    back to. Never raises."""
    return [("stream", weakref.ref(s)) for s in streams]


def _record_all(streams: list[Stream], guards: list[Guard]) -> None:
    for s in streams:
        if s.ctx_ref.owner is None:
            try:
                s.ctx_ref.ensure_current()
                pool = _pool(s)
                ev = pool.get()
                try:
                    _record_event(ev, s.raw_handle)
                except BaseException:
                    pool.put(ev)
                    raise
                guards.append(("event", pool, ev))
                continue
            except Exception as exc:
                _log.debug("pyacl_rt allocator: recording a guard event failed: %s", exc)
        guards.append(("stream", weakref.ref(s)))


def release(guards: list[Guard]) -> None:
    """Give the events of ``guards`` back to their pools without waiting (the guards
    are no longer needed). Never raises."""
    for g in guards:
        if g[0] == "event":
            g[1].put(g[2])


def done(g: Guard, wait: bool) -> bool:
    """True once guard ``g`` passed (then its event is back in the pool). ``wait``:
    block until it does. Never raises an Exception (a failing event or stream counts
    as passed only once its stream is destroyed or the wait returned)."""
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
        pool.put(ev)
        return True
    s = g[1]()
    if s is None or s.closed:
        return True  # destroying a stream waits for its work
    try:
        if wait and not local.st.in_callback:
            s.synchronize()
            return True
        return bool(s.query())
    except Exception:
        return bool(s.closed)


def pending(guards: list[Guard], wait: bool) -> list[Guard]:
    """The guards of ``guards`` that have not passed yet (those that passed gave their
    events back). Every guard is looked at: none that gave its event back may stay in
    a list that is looked at again. Interrupted (``KeyboardInterrupt`` during a wait),
    ``guards`` is trimmed in place to what is still outstanding before the exception
    propagates, so that the caller can keep it."""
    left: list[Guard] = []
    for i, g in enumerate(guards):
        try:
            passed = done(g, wait)
        except BaseException:
            guards[:] = left + guards[i:]
            raise
        if not passed:
            left.append(g)
    return left


def forget() -> None:
    """After fork: the pools belong to the parent's runtime."""
    _pools.clear()


def destroy_all() -> None:
    """Finalize: destroy every pooled event (idle or guarding)."""
    for p in list(_pools.values()):
        p.destroy_all()
    _pools.clear()


def destroy_idle() -> None:
    """``empty_cache``: destroy the idle events (those guarding blocks stay)."""
    for ctx, p in list(_pools.items()):
        p.destroy_idle()
        if ctx.device < 0 and not p.out:
            _pools.pop(ctx, None)
