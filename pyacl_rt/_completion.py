"""Device completion as futures: the framework-neutral primitive under ``await``.

A *device future* is a :class:`concurrent.futures.Future` (result ``None``) that
completes when the device reaches a point of a stream. The runtime tells us: a host
callback (``block=True``) launched on a *companion stream* that first waits for the
point's event (:mod:`pyacl_rt._event` owns the companions), run by pyacl_rt's report
thread (:mod:`pyacl_rt._callbacks`). No polling, no thread per wait: one callback per
awaited point, shared by every waiter of that point.

:func:`fire` is that callback: it completes the future on the report thread, which
runs the future's done callbacks there. :func:`wait` is the asyncio side: it hangs a
:class:`_Relay` on the future that hands the completion to the waiting loop with
``loop.call_soon_threadsafe``, batched per loop (:class:`_Inbox`: completions arriving
before the loop ran the last hand-over ride along with it). A closed loop gets nothing
and no "Event loop is closed" error is raised anywhere. Cancelling the
awaiting task detaches the relay (it keeps no loop, task or future alive) and never
touches the device work; the device future itself completes normally later.

Futures that can no longer complete fail instead of hanging: at
:func:`pyacl_rt.finalize` with
:class:`~pyacl_rt.errors.RuntimeFinalizedError`, when their context is closed with
:class:`~pyacl_rt.errors.ObjectClosedError`.

Floor 5, after :mod:`_callbacks` and before :mod:`_stream`: imports floors 1-4. The
asyncio module is imported on the first ``await`` only.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import TYPE_CHECKING, Any

from . import _runtime, errors
from ._hooks import fork_hooks
from ._state import CtxRef, context_close_hooks

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = ["done_future", "fire", "forget", "new_future", "pending_futures", "wait"]


#: concurrent.futures.Future and InvalidStateError once loaded (concurrent.futures
#: imports logging: loaded on the first wait, not by import; then no import statement
#: runs per completion on the report thread, which holds the GIL meanwhile).
_Future: Any = None
_InvalidState: Any = None


def _future() -> concurrent.futures.Future[None]:
    global _Future, _InvalidState
    if _Future is None:
        import concurrent.futures

        _InvalidState = concurrent.futures.InvalidStateError
        _Future = concurrent.futures.Future
    fut: concurrent.futures.Future[None] = _Future()
    return fut


#: Futures launched and not yet completed -> the context of their stream.
_unfired: dict[concurrent.futures.Future[None], CtxRef] = {}
_lock = threading.Lock()


def new_future(ctx: CtxRef) -> concurrent.futures.Future[None]:
    """A pending device future for a point of a stream of ``ctx`` (tracked until fired)."""
    fut = _future()
    with _lock:
        _unfired[fut] = ctx
    return fut


def done_future() -> concurrent.futures.Future[None]:
    """An already completed device future (the point was passed, or there is none)."""
    fut = _future()
    fut.set_result(None)
    return fut


def forget(fut: concurrent.futures.Future[None]) -> None:
    """The launch of ``fut``'s callback failed: stop tracking it."""
    with _lock:
        _unfired.pop(fut, None)


def fire(fut: concurrent.futures.Future[None]) -> None:
    """Host callback body (report thread): the device reached the point. Never raises."""
    with _lock:
        _unfired.pop(fut, None)
    _settle(fut, None)


def _settle(fut: concurrent.futures.Future[None], exc: BaseException | None) -> None:
    # Every future here came from _future(), so _InvalidState is set.
    try:
        if exc is None:
            fut.set_result(None)
        else:
            fut.set_exception(exc)
    except _InvalidState:  # cancelled by a user
        pass


def pending_futures() -> int:
    """Number of device futures whose point has not been reached yet (process-wide)."""
    return len(_unfired)


#: At most this many waiters woken per loop iteration by one drain: a burst of
#: completions is spread over iterations, so timers and I/O due meanwhile are not
#: queued behind all of them (the loop's lag stays bounded).
DRAIN_BATCH = 16


class _Inbox:
    """Completions on their way to one loop: many arrive, one ``call_soon_threadsafe``
    (one self-pipe write, one loop callback) carries every completion that arrived
    until the loop ran it, :data:`DRAIN_BATCH` per loop iteration."""

    __slots__ = ("__weakref__", "items", "lock", "loop", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        import collections

        self.loop = weakref.ref(loop)  # the inbox must not keep its loop alive
        self.items: collections.deque[asyncio.Future[None]] = collections.deque()
        self.lock = threading.Lock()
        #: True while a drain is pending (scheduled and not yet started).
        self.scheduled = False

    def post(self, waiter: asyncio.Future[None]) -> None:
        """From any thread: wake ``waiter`` in the loop soon. Never raises."""
        loop = self.loop()
        if loop is None or loop.is_closed():
            return  # a dead loop gets nothing
        self.items.append(waiter)
        with self.lock:
            if self.scheduled:
                return  # the drain already on its way takes it
            self.scheduled = True
        # A loop closing right now: call_soon_threadsafe raises RuntimeError; drop it.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self.drain)

    def drain(self) -> None:
        """In the loop: wake the waiters that arrived, :data:`DRAIN_BATCH` of them now
        and the rest in the next iteration (cancelled ones are skipped)."""
        with self.lock:
            self.scheduled = False
        items = self.items
        woken = 0
        while items:
            if woken == DRAIN_BATCH:
                with self.lock:
                    if self.scheduled:
                        return  # a post scheduled a drain meanwhile
                    self.scheduled = True
                loop = self.loop()
                if loop is not None:
                    loop.call_soon(self.drain)  # in the loop: after what is due now
                return
            waiter = items.popleft()
            if not waiter.done():
                waiter.set_result(None)
                woken += 1


#: loop -> its inbox (dropped with the loop).
_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = weakref.WeakKeyDictionary()


def _inbox(loop: asyncio.AbstractEventLoop) -> _Inbox:
    box = _inboxes.get(loop)
    if box is None:
        box = _inboxes.setdefault(loop, _Inbox(loop))
    return box


class _Relay:
    """A done callback of a device future that wakes one awaiting asyncio task."""

    __slots__ = ("inbox", "waiter")

    def __init__(self, inbox: _Inbox, waiter: asyncio.Future[None]) -> None:
        self.inbox: _Inbox | None = inbox
        self.waiter: asyncio.Future[None] | None = waiter

    def __call__(self, fut: concurrent.futures.Future[None]) -> None:
        inbox, waiter = self.inbox, self.waiter
        self.inbox = self.waiter = None
        if inbox is not None and waiter is not None:
            inbox.post(waiter)

    def detach(self) -> None:
        """The waiting task gave up (cancelled) or is done: keep nothing alive."""
        self.inbox = self.waiter = None


#: asyncio.get_running_loop once asyncio is loaded (no import statement per await).
_running_loop: Any = None


async def wait(fut: concurrent.futures.Future[None]) -> None:
    """Wait in the running asyncio loop until ``fut`` completes; raise its exception.

    Never blocks the loop. Cancelling the caller leaves ``fut`` and the device work alone.
    """
    if not fut.done():
        global _running_loop
        if _running_loop is None:
            import asyncio

            _running_loop = asyncio.get_running_loop
        loop = _running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        relay = _Relay(_inbox(loop), waiter)
        fut.add_done_callback(relay)
        try:
            await waiter
        finally:
            relay.detach()
    exc = fut.exception()
    if exc is not None:
        raise exc


def _fail_where(ctx: CtxRef | None, make: Any) -> None:
    with _lock:
        doomed = [f for f, c in _unfired.items() if ctx is None or c is ctx]
        for f in doomed:
            del _unfired[f]
    for f in doomed:
        _settle(f, make())


def _on_finalize() -> None:
    """Release hook (after the report threads stopped): fail what never completed."""
    _fail_where(
        None,
        lambda: errors.RuntimeFinalizedError(
            "pyacl_rt.finalize() ran before the device reached the awaited point",
            explanation="",
        ),
    )


def _on_context_close(ctx: CtxRef) -> None:
    _fail_where(
        ctx,
        lambda: errors.ObjectClosedError(
            "the context of the awaited stream was closed before the device reached the "
            "awaited point",
            explanation="",
        ),
    )


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    _unfired.clear()


fork_hooks.add(_after_fork_in_child, _runtime.PRIORITY_STREAMS + 1)
context_close_hooks.add(_on_context_close, _runtime.PRIORITY_STREAMS + 1)
_runtime.register_release_hook(_on_finalize, _runtime.PRIORITY_STREAMS + 20)
