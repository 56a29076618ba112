"""Keep-alive watch lists of streams and the pool of marker events they use.

A stream's watch list holds ``(marker event, objects)`` entries, oldest first: the
objects stay referenced until the marker, recorded on the stream right after the work
that uses them, completed. :func:`keep_alive` appends an entry (polling the list
first), :func:`poll_watch` releases the leading entries whose marker completed (markers
complete in stream order; ``aclrtQueryEventStatus`` on the oldest entry only) and
:func:`release_watch` drops them all once the caller knows the stream is idle. Marker
events are raw ACL events (flag SYNC) pooled per context (:data:`markers`), so the
steady state allocates nothing. :class:`pyacl_rt.Stream` is the interface
(``keep_alive``, ``synchronize``, ``close``); see :mod:`pyacl_rt._stream`.

Layer 5, below :mod:`pyacl_rt._stream`: imports layers 1-4 only.
"""

from __future__ import annotations

import collections
import threading
from typing import Final

from . import _runtime, lowlevel
from ._hooks import fork_hooks
from ._log import get_logger
from ._raw._abi_runtime import CONSTANTS as _C
from ._state import (
    CtxRef,
    check,
    current,
    gate_exit,
    gate_try_enter,
    lib,
    local,
    log_release_failure,
)

__all__ = ["MarkerPool", "keep_alive", "markers", "poll_watch", "release_watch"]

_log = get_logger("pyacl_rt")

ACL_EVENT_SYNC: Final = _C["ACL_EVENT_SYNC"]
ACL_EVENT_RECORDED_STATUS_COMPLETE: Final = _C["ACL_EVENT_RECORDED_STATUS_COMPLETE"]
_aclrtRecordEvent = lib.aclrtRecordEvent
_aclrtQueryEventStatus = lib.aclrtQueryEventStatus

#: A watch list: ``(marker event, objects)`` entries, oldest first.
Watch = collections.deque[tuple[int, object]]


class MarkerPool:
    """Raw ACL events (flag SYNC) per context, reused for keep-alive markers: at most
    :attr:`IDLE_MAX` idle per context (a burst of outstanding markers does not stay
    allocated for the life of the process)."""

    IDLE_MAX = 64

    def __init__(self) -> None:
        self._free: dict[CtxRef, list[int]] = {}
        self._lock = threading.Lock()

    def get(self, ctx: CtxRef) -> int:
        with self._lock:
            lst = self._free.get(ctx)
            if lst:
                return lst.pop()
        s = local.st.scratch
        rc = lib.aclrtCreateEventExWithFlag(s.uptr, ACL_EVENT_SYNC)
        if rc:
            check(rc, "aclrtCreateEventExWithFlag")
        return int(s.uptr[0])

    def put(self, ctx: CtxRef, handle: int) -> None:
        if ctx.device < 0:
            return  # its context died; the runtime released the event with it
        with self._lock:
            lst = self._free.setdefault(ctx, [])
            if len(lst) < self.IDLE_MAX:
                lst.append(handle)
                return
        try:  # the pool is full: destroy it (never raises)
            with current(ctx):
                rc = lib.aclrtDestroyEvent(handle)
            if rc:
                log_release_failure("aclrtDestroyEvent", handle, rc)
        except Exception:  # pragma: no cover - defensive
            _log.debug("pyacl_rt: destroying a marker event failed", exc_info=True)

    def drop_context(self, ctx: CtxRef) -> None:
        """Destroy the pooled events of ``ctx`` (context close / finalize)."""
        if not gate_try_enter():
            return  # finalize runs (on another thread): the events die with ctx
        try:
            with self._lock:
                handles = self._free.pop(ctx, [])
            if not handles or ctx.device < 0:
                return
            ctx.ensure_current()
            for h in handles:
                lib.aclrtDestroyEvent(h)
        except Exception:  # pragma: no cover - defensive
            _log.debug("pyacl_rt: destroying marker events failed", exc_info=True)
        finally:
            gate_exit()

    def drop_all(self) -> None:
        with self._lock:
            ctxs = list(self._free)
        for ctx in ctxs:
            self.drop_context(ctx)


#: The pool of marker events.
markers = MarkerPool()


def keep_alive(ctx: CtxRef, handle: int, watch: Watch, objs: object) -> None:
    """Keep ``objs`` referenced until the work enqueued so far on stream ``handle``
    completed: poll ``watch``, record a marker, append the entry. ``ctx`` must be
    current on this thread."""
    if watch:
        poll_watch(ctx, watch)
    marker = markers.get(ctx)
    rc = _aclrtRecordEvent(marker, handle)
    if rc:
        markers.put(ctx, marker)
        check(rc, "aclrtRecordEvent")
    watch.append((marker, objs))


def poll_watch(ctx: CtxRef, watch: Watch) -> None:
    """Release the leading entries whose marker completed (markers complete in
    stream order). Safe against other threads polling or appending the same list:
    an entry is removed by identity, so only an entry seen complete is released."""
    st = local.st.i32
    while True:
        try:
            entry = watch[0]
        except IndexError:
            return
        marker = entry[0]
        if _aclrtQueryEventStatus(marker, st):
            lowlevel.recent_error_message()  # failed query: keep the entry
            return
        if st[0] != ACL_EVENT_RECORDED_STATUS_COMPLETE:
            return
        try:
            watch.remove(entry)  # identity first: never another thread's entry
        except ValueError:
            continue  # another thread released it meanwhile
        markers.put(ctx, marker)


def release_watch(ctx: CtxRef, watch: collections.deque[tuple[int, object]]) -> None:
    """Drop every keep-alive entry (the caller knows the work completed)."""
    while watch:
        try:
            marker, _objs = watch.popleft()
        except IndexError:  # pragma: no cover - concurrent release
            return
        markers.put(ctx, marker)


def _after_fork_in_child() -> None:
    markers._lock = threading.Lock()  # a parent thread may have held it


fork_hooks.add(_after_fork_in_child, _runtime.PRIORITY_STREAMS - 10)
# after the deferred frees (which may give marker events back)
_runtime.settle_hooks.add(markers.drop_all, _runtime.PRIORITY_MEMORY + 10)
_runtime.register_release_hook(markers.drop_all, _runtime.PRIORITY_STREAMS + 50)
