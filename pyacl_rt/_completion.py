"""Device completion for waiters: device futures and the asyncio inboxes.

Two paths, both fed by the runtime (tasks on a *companion stream* that first waits for
the point's event; :mod:`pyacl_rt._event` owns the companions), never by polling, never
a thread per wait:

* ``await event`` / ``await stream`` (:func:`arm`, :func:`waiter`): a **C** host function
  (:data:`DONE_FUNCTION`, :mod:`pyacl_rt._reportcore`) whose argument is a record of the
  running loop's :class:`Inbox`, launched with ``aclrtLaunchHostFunc`` on the await
  companion: when the device passes the point the runtime runs it (no report thread;
  on a runtime without host functions, a C report callback instead). It appends the
  record's token to the inbox's C queue and writes the inbox's eventfd unless already
  signalled. No Python and no GIL until the loop wakes (``loop.add_reader``) and
  :meth:`Inbox.drain` wakes the waiters, :data:`DRAIN_BATCH` per loop iteration. So a
  busy loop (or any Python thread holding the GIL) never delays a completion on its way.
  The awaits of one record in one loop share one host function (:class:`Point`). After
  a drain, :class:`OnTime` keeps the loop's next timer on time.
* the framework-neutral :class:`concurrent.futures.Future` (``as_future`` /
  ``add_done_callback``): :func:`fire`, a Python host callback run by the report thread,
  completes it there (its done callbacks run there). :func:`wait` awaits such a future
  through the loop's inbox (its done callback posts a token).

Lifetimes: an inbox keeps its loop only weakly; the inbox of a closed or collected loop
is detached (what arrives is dropped, no callback ever reaches a dead loop) and its
eventfd is closed in C when its last armed record has run. Cancelling an await removes
its waiter and keeps nothing alive; the device work and its callback go on (the token
is dropped on arrival). Pending waits fail instead of hanging: at
:func:`pyacl_rt.finalize` with :class:`~pyacl_rt.errors.RuntimeFinalizedError`, when
their context is closed with :class:`~pyacl_rt.errors.ObjectClosedError` (their records,
which the runtime will not run any more, are abandoned in C). A forked child forgets the
inherited inboxes.

Floor 5, after :mod:`_callbacks` and before :mod:`_stream`: imports floors 1-4 and the
compiled :mod:`_reportcore`. asyncio is imported on the first ``await`` only.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, Final

from . import _reportcore, _runtime, errors
from ._hooks import fork_hooks
from ._state import CtxRef, context_close_hooks

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

__all__ = [
    "DONE_FUNCTION",
    "Inbox",
    "OnTime",
    "Point",
    "arm",
    "disarm",
    "done_future",
    "drop",
    "fire",
    "forget",
    "join",
    "new_future",
    "pending_awaits",
    "pending_futures",
    "settle",
    "wait",
    "waiter",
]

#: Name prefix of pyacl_rt's report threads (pyacl_rt._callbacks).
_REPORT_THREAD_PREFIX = "pyacl_rt-callbacks-"


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

#: An inbox whose awaits once numbered more than this rebuilds its dictionaries when
#: they drop below an eighth of their peak (:meth:`Inbox.compact`).
COMPACT_AT = 1024

#: Tokens of waits handed to inboxes (any thread may draw one).
_tokens = itertools.count(1)


class OnTime:
    """Keeps an asyncio loop's next timer on time after completions woke the loop.

    asyncio's epoll selector rounds a timeout up to whole milliseconds: a completion that
    wakes the loop ``r`` ms before its next timer makes it sleep ``ceil(r)`` ms after
    that, so the timer runs up to 1 ms late (under a steady stream of completions a 1 ms
    ticker sees about 1 ms of lag at p99, with or without pyacl_rt: any wake-up does it).
    After each drain the inbox arms a timerfd (:func:`pyacl_rt._reportcore.timer_fd`) at
    the deadline of the loop's next timer: the loop wakes exactly then. The deadline is
    read from the timer heap of asyncio's event loops (``BaseEventLoop._scheduled``; no
    public API has it); a loop without one (uvloop) is left alone."""

    __slots__ = ("at", "fd")

    def __init__(self) -> None:
        #: the timerfd (created on first use; read in the loop), or -1
        self.fd = -1
        #: the deadline it is armed for (``loop.time()`` seconds), 0.0 if disarmed
        self.at = 0.0

    def after_wake(self, loop: asyncio.AbstractEventLoop) -> None:
        """In the loop, after a drain: arm the timerfd at the next timer's deadline."""
        heap = getattr(loop, "_scheduled", None)  # asyncio's timer heap (see the class)
        if not heap:
            return
        when: float = heap[0].when()
        if when == self.at or when <= loop.time():  # armed already / due now anyway
            return
        if self.fd < 0:
            self.fd = _reportcore.timer_fd()
            loop.add_reader(self.fd, self.fired)
        _reportcore.timer_set(self.fd, when)
        self.at = when

    def fired(self) -> None:
        """In the loop: the deadline came (the loop runs its due timers now)."""
        _reportcore.timer_set(self.fd, 0.0)  # disarm: clears the expiry
        self.at = 0.0

    def close(self) -> None:
        """The loop is closed or gone: close the timerfd. Never raises."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _forget_loop(core: Any, ontime: OnTime) -> None:
    """A collected loop gets nothing more: detach its inbox, close its timerfd."""
    core.detach()
    ontime.close()


class Inbox:
    """Completions on their way to one asyncio loop.

    The C half (:class:`pyacl_rt._reportcore.Inbox`) collects tokens without the GIL:
    the C host callback of an awaited point appends its token and writes the inbox's
    eventfd (once until the loop read it). The loop reads the fd (``add_reader``) and
    wakes the waiters of the tokens, :data:`DRAIN_BATCH` per loop iteration. Tokens from
    Python (a device future's relay, a failure at finalize) travel the same way. The
    inbox keeps its loop only weakly; a closed or collected loop's inbox is detached
    (nothing more reaches it; its fd closes in C once no armed record is left). After a
    drain, :class:`OnTime` keeps the loop's next timer on time."""

    __slots__ = (
        "__weakref__",
        "armed",
        "core",
        "failed",
        "fd",
        "loop",
        "ontime",
        "peak",
        "ready",
        "scheduled",
        "waits",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            self.core = _reportcore.Inbox(fd)  # owns the fd from here on
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.loop = weakref.ref(loop)  # the inbox must not keep its loop alive
        #: token -> the loop futures waiting for it (loop thread only)
        self.waits: dict[int, list[asyncio.Future[None]]] = {}
        #: token -> the exception its waiters get (finalize, context close)
        self.failed: dict[int, BaseException] = {}
        self.ready: collections.deque[int] = collections.deque()
        #: token -> the context of the awaited stream, for the awaits whose C callback
        #: is launched (or about to be) and not yet drained. Written by the loop thread;
        #: finalize / context close (any thread) take entries out with ``pop`` (atomic
        #: under the GIL: a token is failed or delivered, never both).
        self.armed: dict[int, CtxRef] = {}
        self.scheduled = False
        #: the most awaits pending at once since the dictionaries were last compacted
        self.peak = 0
        self.ontime = OnTime()
        loop.add_reader(fd, self.drain)
        weakref.finalize(loop, _forget_loop, self.core, self.ontime)

    def drain(self) -> None:
        """In the loop (the fd is readable): take the tokens that arrived and wake."""
        try:
            tokens = self.core.take()
        except ValueError:  # detached
            return
        if len(tokens) == 1 and not self.ready and not self.failed:
            # the common case (one completion, nothing failed): what wake() does for it,
            # and the first waiter's task resumes right here (Waiter.resume); the others
            # (awaits joined to the same record) are scheduled first
            token = tokens[0]
            self.armed.pop(token, None)
            waiters = self.waits.pop(token, ())
            for waiter in waiters[1:]:
                if not waiter.done():
                    waiter.set_result(None)
            if waiters and not waiters[0].done():
                first: Any = waiters[0]
                if type(first) is _Waiter:
                    first.resume()
                else:
                    first.set_result(None)
            self.compact_after_burst()
        else:
            self.ready.extend(tokens)
            self.wake()  # compacts too, at the end of the burst
        loop = self.loop()
        if loop is not None:
            self.ontime.after_wake(loop)

    def compact_after_burst(self) -> None:
        """In the loop, after waking waiters: once a burst of awaits is over (fewer than
        an eighth of the peak left), rebuild the token dictionaries at their present size
        (a dict keeps the table of its largest size, and every later await would pay the
        cache misses of a large, sparse one)."""
        if self.peak <= COMPACT_AT or len(self.waits) * 8 >= self.peak:
            return
        self.waits = dict(self.waits)
        self.armed = dict(self.armed)  # other threads pop from either copy: atomic
        self.peak = len(self.waits)

    def wake(self) -> None:
        """In the loop: wake the waiters of ready tokens, :data:`DRAIN_BATCH` of them now
        and the rest in the next iteration (cancelled ones are skipped)."""
        self.scheduled = False
        ready = self.ready
        waits = self.waits
        woken = 0
        while ready:
            if woken >= DRAIN_BATCH:
                loop = self.loop()
                if loop is not None and not self.scheduled:
                    self.scheduled = True
                    loop.call_soon(self.wake)  # in the loop: after what is due now
                return
            token = ready.popleft()
            self.armed.pop(token, None)
            waiters = waits.pop(token, None)
            if waiters is None:
                continue
            exc = self.failed.pop(token, None) if self.failed else None
            for waiter in waiters:
                if not waiter.done():
                    if exc is None:
                        waiter.set_result(None)
                    else:
                        waiter.set_exception(exc)
                    woken += 1
        self.compact_after_burst()

    def post(self, token: int) -> None:
        """From any thread: deliver ``token`` (its waiters wake in the loop). Never raises."""
        with contextlib.suppress(ValueError):  # detached: a dead loop gets nothing
            self.core.push(token)

    def fail(self, token: int, exc: BaseException) -> None:
        """From any thread: the waiters of ``token`` get ``exc``. Never raises."""
        self.failed[token] = exc
        self.post(token)

    def close(self) -> None:
        """The loop is closed or gone: detach (nothing more reaches it). Never raises."""
        self.core.detach()
        self.waits.clear()
        self.failed.clear()
        self.ready.clear()
        self.armed.clear()
        self.ontime.close()


#: loop -> its inbox (dropped with the loop).
_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Inbox] = weakref.WeakKeyDictionary()


def _sweep() -> None:
    """Detach the inboxes of closed loops."""
    for loop, box in list(_inboxes.items()):
        if loop.is_closed():
            _inboxes.pop(loop, None)
            box.close()


#: The inbox found last (most programs run one loop): checked before the dictionary.
_last: Inbox | None = None


def _inbox(loop: asyncio.AbstractEventLoop) -> Inbox:
    global _last
    box = _last
    if box is not None and box.loop() is loop:
        return box
    box = _inboxes.get(loop)
    if box is None:
        _sweep()
        box = _inboxes.setdefault(loop, Inbox(loop))
    _last = box
    return box


#: asyncio.get_running_loop once asyncio is loaded (no import statement per await).
_running_loop: Any = None


def _loop() -> asyncio.AbstractEventLoop:
    global _running_loop
    if _running_loop is None:
        import asyncio

        _running_loop = asyncio.get_running_loop
    loop: asyncio.AbstractEventLoop = _running_loop()
    return loop


#: Address of the C function that completes an armed record (``void fn(void *)``: a
#: host callback's or a host function's signature).
DONE_FUNCTION: Final[int] = _reportcore.callback_address()


def arm(ctx: CtxRef) -> tuple[Inbox, int, int]:
    """In the running loop: a new await of a device point of a stream of ``ctx``:
    ``(inbox, token, record)``. Launch the C completion with ``record`` right away (see
    :data:`DONE_FUNCTION`; the device may pass the point meanwhile: the token waits in
    the inbox), or :func:`disarm` it if that fails; then take its :func:`waiter`."""
    box = _inbox(_loop())
    token = next(_tokens)
    if not token & 63:
        _sweep()  # now and then: let go of the waits of closed loops
    record: int = box.core.arm(token, id(ctx))
    box.armed[token] = ctx
    return box, token, record


#: The Waiter class once asyncio is loaded (see _waiter_class).
_Waiter: Any = None


def _waiter_class() -> Any:
    """Define ``Waiter`` (asyncio is imported on the first await only)."""
    global _Waiter
    import asyncio

    class Waiter(asyncio.Future[None]):
        """The future an ``await`` waits on, which :meth:`Inbox.drain` can complete *and*
        resume its task with at once (``resume()``).

        A plain future schedules its task's wake-up for the loop's next iteration; the
        drain that completes it is a reader callback, so the task would run one loop
        iteration (a poll, the timer scan) later than it can. The task's wake-up (the one
        done callback an awaited future gets) is kept here instead and, on
        ``resume()``, called right away in the task's context, as asyncio's eager
        tasks do. Every other way to complete the future (``set_result()``,
        ``set_exception()``, ``cancel()``) schedules it as usual."""

        __slots__ = ("wake_ctx", "wake_fn")

        def __init__(self, *, loop: asyncio.AbstractEventLoop) -> None:
            super().__init__(loop=loop)
            self.wake_fn: Any = None
            self.wake_ctx: Any = None

        def add_done_callback(self, fn: Any, *, context: Any = None) -> None:
            if not self.done() and self.wake_fn is None:
                self.wake_fn = fn
                self.wake_ctx = context
            else:
                super().add_done_callback(fn, context=context)

        def remove_done_callback(self, fn: Any) -> int:
            removed = super().remove_done_callback(fn)
            if self.wake_fn is fn:
                self.wake_fn = None
                removed += 1
            return removed

        def _schedule_wake(self) -> None:
            fn = self.wake_fn
            if fn is not None:
                self.wake_fn = None
                self.get_loop().call_soon(fn, self, context=self.wake_ctx)

        def set_result(self, result: None) -> None:
            super().set_result(result)
            self._schedule_wake()

        def set_exception(self, exception: type | BaseException) -> None:
            super().set_exception(exception)
            self._schedule_wake()

        def cancel(self, msg: Any = None) -> bool:
            if not super().cancel(msg=msg):
                return False
            self._schedule_wake()
            return True

        def resume(self) -> None:
            """In the loop (not inside a task): complete with None and run the waiting
            task's step now."""
            super().set_result(None)
            fn = self.wake_fn
            if fn is None:
                return
            self.wake_fn = None
            ctx = self.wake_ctx
            if ctx is None:
                fn(self)
                return
            try:
                ctx.run(fn, self)
            except RuntimeError:  # the context is entered already: the usual way
                self.get_loop().call_soon(fn, self, context=ctx)

    _Waiter = Waiter
    return Waiter


def waiter(box: Inbox, token: int) -> asyncio.Future[None]:
    """In the running loop, after the launch of ``token``'s record: the future its
    arrival completes (the token cannot be drained before: draining runs in this loop);
    a ``Waiter``, resumed at once by the drain."""
    cls = _Waiter or _waiter_class()
    fut: asyncio.Future[None] = cls(loop=_loop())
    waits = box.waits
    waits[token] = [fut]
    if len(waits) > box.peak:
        box.peak = len(waits)
    return fut


def disarm(box: Inbox, token: int, record: int) -> None:
    """The callback of an :func:`arm` ed record was not launched: forget it."""
    box.core.disarm(record)
    box.waits.pop(token, None)
    box.armed.pop(token, None)


def join(box: Inbox | None, token: int) -> asyncio.Future[None] | None:
    """In the running loop: a new waiter of the pending await ``token`` of ``box`` (a
    point awaited again), or None if that await is not pending in this loop."""
    if box is None:
        return None
    loop = box.loop()
    waiters = box.waits.get(token)
    if waiters is None or loop is None or loop is not _loop():
        return None
    waiter: asyncio.Future[None] = loop.create_future()
    waiters.append(waiter)
    return waiter


async def settle(box: Inbox, token: int, waiter: asyncio.Future[None]) -> None:
    """Wait for ``waiter`` (woken by ``box``); cancelling leaves the device work alone
    and keeps nothing alive (the token's callback still arrives, and is dropped)."""
    try:
        await waiter
    finally:
        if not waiter.done() or waiter.cancelled():
            drop(box, token, waiter)


def drop(box: Inbox, token: int, waiter: asyncio.Future[None]) -> None:
    """A waiter of ``token`` gave up (cancelled): forget it (what :func:`settle` does
    when the await ends without a result)."""
    waiters = box.waits.get(token)
    if waiters is not None:
        with contextlib.suppress(ValueError):
            waiters.remove(waiter)
        if not waiters:
            box.waits.pop(token, None)


class _Relay:
    """A done callback of a device future that wakes one awaiting asyncio task."""

    __slots__ = ("inbox", "token")

    def __init__(self, inbox: Inbox, token: int) -> None:
        self.inbox: Inbox | None = inbox
        self.token = token

    def __call__(self, fut: concurrent.futures.Future[None]) -> None:
        inbox = self.inbox
        self.inbox = None
        if inbox is not None:
            inbox.post(self.token)

    def detach(self) -> None:
        """The waiting task gave up (cancelled) or is done: keep nothing alive."""
        self.inbox = None


async def wait(fut: concurrent.futures.Future[None]) -> None:
    """Wait in the running asyncio loop until ``fut`` completes; raise its exception.

    Never blocks the loop (the future's done callback posts to the loop's inbox).
    Cancelling the caller leaves ``fut`` and the device work alone.
    """
    if not fut.done():
        loop = _loop()
        box = _inbox(loop)
        token = next(_tokens)
        waiter: asyncio.Future[None] = loop.create_future()
        box.waits[token] = [waiter]
        relay = _Relay(box, token)
        fut.add_done_callback(relay)
        try:
            await settle(box, token, waiter)
        finally:
            relay.detach()
    exc = fut.exception()
    if exc is not None:
        raise exc


class Point:
    """One record of an event once awaited or turned into a future (``Event._at``):
    the state of the stream it was recorded on, its shared device future (None until
    :meth:`~pyacl_rt.Event.as_future`), and its pending await (inbox and token: the
    awaits of one loop share one callback)."""

    __slots__ = ("future", "inbox", "src", "token")

    def __init__(self, src: Any) -> None:
        #: the _stream.StreamState of the recording stream (a higher floor's type)
        self.src: Any = src
        self.future: concurrent.futures.Future[None] | None = None
        self.inbox: Inbox | None = None
        self.token = 0


def pending_awaits() -> int:
    """Number of awaits whose device point has not been reached (process-wide; the
    inboxes of closed loops are detached first)."""
    _sweep()
    return sum(len(box.armed) for box in list(_inboxes.values()))


def _fail_where(ctx: CtxRef | None, make: Any) -> None:
    with _lock:
        doomed = [f for f, c in _unfired.items() if ctx is None or c is ctx]
        for f in doomed:
            del _unfired[f]
    awaits = [
        (t, box)
        for box in list(_inboxes.values())
        for t, c in list(box.armed.items())
        if (ctx is None or c is ctx) and box.armed.pop(t, None) is not None
    ]
    # Their streams are gone: the runtime will not call these records back.
    _reportcore.abandon(None if ctx is None else id(ctx))
    for f in doomed:
        _settle(f, make())
    for t, box in awaits:
        box.fail(t, make())


def _on_finalize() -> None:
    """Release hook (after the report threads stopped): fail what never completed."""
    _fail_where(
        None,
        lambda: errors.RuntimeFinalizedError(
            "pyacl_rt.finalize() ran before the device reached the awaited point",
            explanation="",
        ),
    )
    if not any(t.name.startswith(_REPORT_THREAD_PREFIX) for t in threading.enumerate()):
        _reportcore.free_orphans()  # no report thread is left that could run them


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
    global _lock, _last
    _lock = threading.Lock()
    _last = None
    _unfired.clear()
    # The parent's awaits stay in the parent: forget the inherited inboxes.
    _reportcore.after_fork()
    for box in list(_inboxes.values()):
        box.ontime.close()
    _inboxes.clear()


fork_hooks.add(_after_fork_in_child, _runtime.PRIORITY_STREAMS + 1)
context_close_hooks.add(_on_context_close, _runtime.PRIORITY_STREAMS + 1)
_runtime.register_release_hook(_on_finalize, _runtime.PRIORITY_STREAMS + 20)
