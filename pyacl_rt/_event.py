"""Events: ordering between streams, completion queries, and timing.

``Event(enable_timing=False, blocking=False)`` follows torch_npu:

* The ACL event is created lazily at the first :meth:`Event.record`, in the
  context of the stream it is recorded on (``aclrtCreateEventExWithFlag`` with
  ``ACL_EVENT_SYNC``, plus ``ACL_EVENT_TIME_LINE`` when timing is enabled; the
  "Ex" events are not limited by hardware event counts and may be re-recorded).
  From then on the event belongs to that context (and keeps it alive).
* Before the first record, :meth:`query` is True, :meth:`synchronize` and
  :meth:`wait` do nothing, and :meth:`elapsed_time` raises a clear error.
* ``blocking`` is accepted and ignored, as in torch_npu: ACL has no spin/blocking
  choice for events; :meth:`synchronize` always blocks the calling thread with the
  GIL released.
* ``interprocess=True`` creates an IPC event (``ACL_EVENT_IPC``, alone: no timing)
  that another process opens from :meth:`Event.ipc_handle` with
  :meth:`Event.from_ipc_handle`, or receives through a ``multiprocessing`` queue or
  pipe (:mod:`pyacl_rt._ipc` implements both; ``Event.ipc_handle`` creates the ACL
  event on the current stream's device when it was never recorded).

``with Event() as e:`` destroys the event at the end of the block.

Layer 5, above :mod:`pyacl_rt._stream`: imports layers 1-4 and :mod:`_stream`.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Final, NoReturn

from . import _callbacks, _completion, _runtime, _stream, errors
from ._args import bool_arg, timeout_ms_arg
from ._completion import Point
from ._device import Device
from ._hooks import factories, fork_hooks
from ._log import get_logger
from ._raw._abi_runtime import CONSTANTS as _C
from ._state import (
    CLOSED_REF,
    FINALIZED_REF,
    CtxRef,
    LiveSet,
    check,
    context_close_hooks,
    fast,
    gate_exit,
    gate_try_enter,
    lib,
    local,
    log_release_failure,
    owner_of,
    raise_dead,
    refuse_copy,
    refuse_in_callback,
    run_finalizer,
    sliced_wait_event,
    validated_ctx,
)
from ._stream import Stream, StreamState, current_stream
from ._syncdebug import check_sync, sync_debug_active
from .errors import ObjectClosedError

if TYPE_CHECKING:
    import concurrent.futures  # imports logging: loaded on the first wait only

__all__ = ["Event", "EventTimingError"]

_log = get_logger("pyacl_rt")

ACL_EVENT_SYNC: Final = _C["ACL_EVENT_SYNC"]
ACL_EVENT_TIME_LINE: Final = _C["ACL_EVENT_TIME_LINE"]
ACL_EVENT_IPC: Final = _C["ACL_EVENT_IPC"]

# Checked C fast paths (lowlevel.fast): value returned, typed error raised.
_fast_record_event = fast.record_event
_fast_query_event_status = fast.query_event_status
#: Sliced, interruptible wait (``timeout`` ms, -1 = none), gated per slice.
_fast_stream_wait_event = fast.stream_wait_event
_fast_wait_then_host_func = fast.wait_then_host_func


#: Defined in :mod:`pyacl_rt.errors` (with every other error class); kept here for imports.
EventTimingError = errors.EventTimingError


def _destroy_event(ctx: CtxRef, handle: int) -> None:
    """Finalizer body: destroys the event exactly once. Never raises; never touches a
    finalized runtime. One gated section, like ``_stream._destroy_stream``: a release
    refused because finalize runs on another thread is handed to finalize."""
    try:
        if ctx.device < 0:
            return
        if not gate_try_enter():
            _runtime.defer_to_finalize(functools.partial(_destroy_event, ctx, handle))
            return
        explicit = ctx.owner is not None
        try:
            # dead since, or its explicit context is being closed on another thread (which
            # destroys the event with it)
            if ctx.device < 0 or (explicit and not ctx.enter()):
                explicit = False
                return
            ctx.ensure_current()
            rc = lib.aclrtDestroyEvent(handle)  # asynchronous: fine while pending
            if rc:
                log_release_failure("aclrtDestroyEvent", handle, rc)
        finally:
            if explicit:
                ctx.leave()
            gate_exit()
    except BaseException:  # pragma: no cover - interpreter shutdown
        pass


_bind_lock = threading.Lock()
_live: LiveSet[Event] = LiveSet()


class Event:
    """A stream event (see the module docstring for the torch_npu-compatible rules)."""

    __slots__ = (
        "__weakref__",
        "_at",
        "_blocking",
        "_finalizer",
        "_ipc",
        "_owner",
        "_recorded",
        "_timing",
        "ctx_ref",
        "dev_index",
        "raw_handle",
    )

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        enable_timing = bool_arg(enable_timing, "Event(): enable_timing")
        blocking = bool_arg(blocking, "Event(): blocking")
        self._ipc = bool_arg(interprocess, "Event(): interprocess")
        if self._ipc and enable_timing:
            raise EventTimingError(
                "an interprocess event cannot measure time (ACL_EVENT_IPC is not combined "
                "with other flags): create it with enable_timing=False",
                explanation="",
            )
        self.raw_handle = 0
        self.ctx_ref: CtxRef | None = None
        self.dev_index = -1
        self._owner: object = None
        self._timing = bool(enable_timing)
        self._blocking = bool(blocking)
        self._recorded = False
        self._finalizer: weakref.finalize[..., Any] | None = None
        #: The state of the Stream of the last record (not the Stream: an event must
        #: not keep it alive), then the device future of that record once something
        #: awaits it (shared by every waiter); None before the first record.
        self._at: _stream.StreamState | Point | None = None

    # Owning a raw handle: a copy would alias it (use after free once one is closed).
    def __reduce__(self) -> NoReturn:
        refuse_copy(self, "aclrtEvent")

    def __copy__(self) -> NoReturn:
        refuse_copy(self, "aclrtEvent")

    def __deepcopy__(self, memo: object) -> NoReturn:
        refuse_copy(self, "aclrtEvent")

    # ------------------------------------------------------------ properties
    @property
    def handle(self) -> int:
        """The raw ``aclrtEvent`` as an int (0 before the first record / after close)."""
        return self.raw_handle

    @property
    def device(self) -> Device | None:
        """The device the event was first recorded on (None before that)."""
        return Device(self.dev_index) if self.dev_index >= 0 else None

    @property
    def enable_timing(self) -> bool:
        return self._timing

    @property
    def blocking(self) -> bool:
        """Accepted for torch_npu compatibility; has no effect (see module docstring)."""
        return self._blocking

    @property
    def interprocess(self) -> bool:
        """True for an IPC event (``Event(interprocess=True)`` or opened from a handle)."""
        return self._ipc

    @property
    def is_recorded(self) -> bool:
        """True once :meth:`record` succeeded."""
        return self._recorded

    @property
    def closed(self) -> bool:
        ctx = self.ctx_ref
        return ctx is not None and ctx.device < 0

    def __repr__(self) -> str:
        if self.closed:
            return "<Event closed>"
        if self.ctx_ref is None:
            return f"<Event not recorded timing={self._timing}>"
        return f"<Event 0x{self.raw_handle:x} on device {self.dev_index} timing={self._timing}>"

    # --------------------------------------------------------------- helpers
    def _bind(self, stream: Stream) -> None:
        """First record: create the ACL event in ``stream``'s context (or refuse)."""
        if stream.ctx_ref.device < 0:
            stream.ensure_current()  # raises the stream's closed / finalized error
        with _bind_lock:  # two threads recording a fresh Event at once: create one
            if self.ctx_ref is stream.ctx_ref:
                return
            self._bind_locked(stream)

    def _bind_locked(self, stream: Stream) -> None:
        ctx = self.ctx_ref
        if ctx is not None:
            if ctx.device < 0:
                self.raise_closed()
            raise errors.AclUsageError(
                f"this Event belongs to device {self.dev_index} (context {ctx!r}); it cannot "
                f"be recorded on {stream!r}. Use one Event per device.",
                explanation="",
            )
        sctx = stream.ctx_ref
        # Creation is not a hot path: re-validate the thread's cached context (a raw
        # context switch would create the event in a foreign context).
        if validated_ctx(local.st) is not sctx:
            stream.ensure_current()
        if self._ipc:
            flags = ACL_EVENT_IPC  # alone: the runtime refuses it ORed with other flags
        else:
            flags = ACL_EVENT_SYNC | (ACL_EVENT_TIME_LINE if self._timing else 0)
        s = local.st.scratch
        rc = lib.aclrtCreateEventExWithFlag(s.uptr, flags)
        if rc == -1:
            try:
                check(rc, "aclrtCreateEventExWithFlag")
            except errors.FunctionNotFoundError:
                rc = lib.aclrtCreateEventWithFlag(s.uptr, flags)
                check(rc, "aclrtCreateEventWithFlag")
        elif rc:
            check(rc, "aclrtCreateEventExWithFlag")
        handle = int(s.uptr[0])
        self.raw_handle = handle
        self.ctx_ref = sctx
        self.dev_index = sctx.device
        self._owner = owner_of(sctx)
        self._finalizer = weakref.finalize(self, _destroy_event, sctx, handle)
        self._finalizer.atexit = False
        _live.add(self)

    def raise_closed(self) -> None:
        """Raise the error a call on this unusable Event gets (closed, or its context gone)."""
        ctx = self.ctx_ref
        if ctx is CLOSED_REF:
            raise ObjectClosedError("this Event is closed; create a new one", explanation="")
        raise_dead(ctx.dead if ctx is not None else None)

    def ensure_current(self) -> None:
        """Make this Event's context current on the calling thread (or raise if unusable)."""
        ctx = self.ctx_ref
        if ctx is None or ctx.device < 0:
            self.raise_closed()
        assert ctx is not None
        ctx.make_current()

    # --------------------------------------------------------------- methods
    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (default: the current stream).

        Re-recording is allowed; queries and waits follow the latest record.
        """
        if stream.__class__ is not Stream:  # one compare on the hot path
            if stream is None:
                stream = current_stream()
            elif not isinstance(stream, Stream):
                raise TypeError(
                    f"Event.record(): stream must be a Stream or None, not {type(stream).__name__}"
                )
        ctx = stream.ctx_ref
        if self.ctx_ref is not ctx:
            self._bind(stream)
        if local.st.ctx is not ctx:
            stream.ensure_current()
        _fast_record_event(self.raw_handle, stream.raw_handle)
        self._recorded = True
        self._at = stream.stream_state

    def query(self) -> bool:
        """True if the work captured by the last record completed (True if never recorded)."""
        ctx = self.ctx_ref
        if ctx is None:
            return True
        if local.st.ctx is not ctx:
            self.ensure_current()
        # ACL_EVENT_RECORDED_STATUS_COMPLETE
        return _fast_query_event_status(self.raw_handle) == 1  # type: ignore[no-any-return]

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait for the work captured by the last record. Releases the GIL.

        ``timeout`` in milliseconds raises :class:`~pyacl_rt.errors.SyncTimeoutError`
        on expiry. A no-op if never recorded. Refused inside a host callback.
        """
        if local.st.in_callback:
            refuse_in_callback("Event.synchronize()")
        ctx = self.ctx_ref
        if ctx is None:
            if timeout is not None:
                timeout_ms_arg(timeout)  # validate the argument even when there is no wait
            return
        if sync_debug_active():
            check_sync("Event.synchronize()")
        if local.st.ctx is not ctx:
            self.ensure_current()
        # In slices: Ctrl-C interrupts the wait (the work stays queued); an expired
        # timeout raises errors.SyncTimeoutError.
        sliced_wait_event(self.raw_handle, -1 if timeout is None else timeout_ms_arg(timeout))

    def wait(self, stream: Stream | None = None) -> None:
        """Make future work on ``stream`` (default: current stream) wait for this event."""
        if stream is None:
            stream = current_stream()
        elif not isinstance(stream, Stream):
            raise TypeError(
                f"Event.wait(): stream must be a Stream or None, not {type(stream).__name__}"
            )
        self._wait_on(stream)

    def _wait_on(self, stream: Stream) -> None:
        # Callers (wait(), Stream.wait_event) pass a checked Stream.
        ctx = self.ctx_ref
        if ctx is None:
            if stream.ctx_ref.device < 0:
                stream.ensure_current()  # a closed / finalized stream is refused even here
            return  # never recorded: nothing to wait for (torch_npu does the same)
        if ctx.device < 0:
            self.raise_closed()
        if local.st.ctx is not stream.ctx_ref:
            stream.ensure_current()
        _fast_stream_wait_event(stream.raw_handle, self.raw_handle)

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event's record and ``end_event``'s.

        Both events need ``enable_timing=True`` and must have been recorded; both are
        synchronized first (like torch_npu). Raises :class:`EventTimingError`
        otherwise.
        """
        if not isinstance(end_event, Event):
            raise TypeError(
                f"Event.elapsed_time(): end_event must be an Event, not {type(end_event).__name__}"
            )
        for name, ev in (("start", self), ("end", end_event)):
            if not ev._timing:
                raise EventTimingError(
                    f"the {name} event was created with enable_timing=False; create both "
                    "events with Event(enable_timing=True) to measure time",
                    explanation="",
                )
            if ev.closed:
                ev.raise_closed()
            if not ev._recorded:
                raise EventTimingError(
                    f"the {name} event was never recorded; call record() on both events "
                    "before elapsed_time()",
                    explanation="",
                )
        if sync_debug_active():
            check_sync("Event.elapsed_time()")
        self.synchronize()
        end_event.synchronize()
        if local.st.ctx is not self.ctx_ref:
            self.ensure_current()
        f = local.st.scratch.f32
        rc = lib.aclrtEventElapsedTime(f, self.raw_handle, end_event.raw_handle)
        if rc:
            check(rc, "aclrtEventElapsedTime")
        return float(f[0])

    # ------------------------------------------------------- interprocess
    def ipc_handle(self) -> Any:
        """A picklable :class:`~pyacl_rt.IpcEventHandle` another process opens with
        :meth:`Event.from_ipc_handle` (only for ``Event(interprocess=True)``; never
        recorded: the event is created on the current stream's device now). This
        Event is kept alive until every handle given out was opened or dropped."""
        return factories.ipc_event_handle.get()(self)

    @classmethod
    def from_ipc_handle(cls, handle: Any) -> Event:
        """Open an :class:`~pyacl_rt.IpcEventHandle` of another process: an Event of
        the current device whose :meth:`wait` / :meth:`synchronize` / :meth:`query`
        follow the other process's records (and whose :meth:`record` its waits see).
        Raises :class:`~pyacl_rt.errors.IpcError` in the exporting process itself or
        once the exporter destroyed the event."""
        return factories.ipc_event_open.get()(handle)  # type: ignore[no-any-return]

    # ------------------------------------------------------------ completion
    def as_future(self) -> concurrent.futures.Future[None]:
        """A :class:`concurrent.futures.Future` (result None) that completes when the
        device passes the last :meth:`record` of this event (already done if it has, or
        if the event was never recorded).

        Completion comes from the runtime (a host callback on a companion stream that
        waits for this event), never from polling; every caller of the same record
        shares one future and one callback. Its done callbacks run on pyacl_rt's report
        thread: they must not block or wait for the device. Cancelling the future
        cancels nothing on the device. Raises the mapped error if the event's status
        cannot be queried (e.g. a lost device), ``ObjectClosedError`` once closed.
        """
        at = self._at
        if at is None or self.ctx_ref is None:
            if self.closed:
                self.raise_closed()
            return _completion.done_future()
        if self._ipc and self.ctx_ref.device >= 0:
            # another process may record it again: never reuse a completed future
            return _completion.done_future() if self.query() else _wait_future(self, _ipc_src(self))
        if isinstance(at, Point):
            fut = at.future
            if fut is None:
                fut = _completion.done_future() if self.query() else _wait_future(self, at.src)
                at.future = fut
            return fut  # this record's shared future
        # Passed already (or failed: query raises the mapped error) - else a callback.
        fut = _completion.done_future() if self.query() else _wait_future(self, at)
        if self._at is at:
            point = Point(at)
            point.future = fut
            self._at = point
        return fut

    def add_done_callback(self, fn: Callable[[Event], object]) -> None:
        """Call ``fn(self)`` once the device passed the last record of this event.

        The framework-neutral hook (``await event`` takes a GIL-free path of its own):
        ``fn`` runs on pyacl_rt's report thread (at once on the calling thread if the
        event already completed or was never recorded) and must not block or wait for
        the device;
        hand the news to your loop, e.g. ``loop.call_soon_threadsafe`` or trio's
        ``TrioToken.run_sync_soon``. An exception ``fn`` raises is logged.
        """
        if not callable(fn):
            raise TypeError(
                f"Event.add_done_callback(): fn must be callable, not {type(fn).__name__}"
            )
        self.as_future().add_done_callback(lambda _fut: fn(self))

    def __await__(self) -> Generator[Any, None, None]:
        """``await event``: wait in the running asyncio loop (never blocking it) until
        the device passed the last record. Cancelling the await cancels no device work.

        The completion reaches the loop without the GIL: a C host function on a
        companion stream signals an eventfd the loop reads, so a busy loop or busy
        Python threads never delay it on its way."""
        return _await_event(self)

    # -------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Destroy the ACL event (asynchronous; safe while it is pending). Idempotent."""
        run_finalizer(self._finalizer)
        if self.ctx_ref is None or self.ctx_ref.device >= 0:
            self.ctx_ref = CLOSED_REF
        self.raw_handle = 0
        self._at = None
        _live.discard(self)

    def make_inert(self, reason: CtxRef) -> None:
        """Finalize / context close (package-internal): destroy the event, then refuse
        further use with ``reason``'s error."""
        run_finalizer(self._finalizer)
        self.ctx_ref = reason
        self.raw_handle = 0
        self._at = None

    def __enter__(self) -> Event:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_now(ev: Event) -> None:
    """Create ``ev``'s ACL event on the current stream's context if it has none yet
    (an interprocess event needs one before its handle exists), and make its context
    current."""
    if ev.ctx_ref is None:
        ev._bind(current_stream())
    if local.st.ctx is not ev.ctx_ref:
        ev.ensure_current()  # raises when closed


def adopt_handle(ev: Event, handle: int) -> None:
    """Make ``ev`` (fresh, interprocess) own ``handle``, an event just opened in the
    context current on this thread (destroyed by close(), GC, or finalize)."""
    ctx = validated_ctx(local.st)
    assert ctx is not None
    ev.raw_handle = handle
    ev.ctx_ref = ctx
    ev.dev_index = ctx.device
    ev._owner = owner_of(ctx)
    ev._finalizer = weakref.finalize(ev, _destroy_event, ctx, handle)
    ev._finalizer.atexit = False
    ev._at = current_stream(ctx.device).stream_state  # its records come from another process
    _live.add(ev)


# ------------------------------------------------------ companion streams
# Each recording stream gets companions that wait for its events and then run their
# completions: _stream.side_stream for device futures (Python host callbacks through a
# report thread), _stream.await_stream for awaits (C host functions the runtime runs;
# the two mechanisms do not mix on one stream). Events of one stream complete in record
# order, so one companion per stream never delays a completion behind another stream's
# work, and the recording stream is never held up by a callback (nor left waiting for
# one discarded after a failure: the companion's wait is released then too).


def _wait_future(event: Event, src: StreamState) -> concurrent.futures.Future[None]:
    """A device future of ``event``'s last record, on the stream whose state is ``src``:
    its companion waits for the event, then a blocking host callback on the companion
    fires the future."""
    ctx = event.ctx_ref
    assert ctx is not None
    comp = _stream.side_stream(src, ctx)
    fut = _completion.new_future(comp.ctx_ref)
    try:
        event._wait_on(comp)
        comp.launch_host_func(_completion.fire, fut)
    except BaseException:
        _completion.forget(fut)
        raise
    return fut


def _ipc_src(event: Event) -> StreamState:
    """The stream state an interprocess event's completion waits on."""
    at = event._at
    if isinstance(at, StreamState):
        return at
    return current_stream(event.dev_index).stream_state


#: The runtime has aclrtLaunchHostFunc (False after the first FunctionNotFoundError:
#: awaits then go through report callbacks, like device futures).
_host_funcs = True


def _launch_await(event: Event, src: StreamState, ctx: CtxRef, record: int) -> None:
    """Enqueue the await of ``event``'s last record: its await companion waits for the
    event, then runs the C completion of ``record`` as a host function (the runtime runs
    it: no report thread, no Python, no GIL)."""
    global _host_funcs
    if _host_funcs:
        comp = _stream.await_stream(src, ctx)
        if local.st.ctx is not ctx:
            comp.ensure_current()
        try:
            _fast_wait_then_host_func(
                comp.raw_handle, event.raw_handle, _completion.DONE_FUNCTION, record
            )
            return
        except errors.FunctionNotFoundError:  # an older runtime: nothing was queued
            _host_funcs = False
    comp = _stream.side_stream(src, ctx)
    event._wait_on(comp)
    _callbacks.launch_native(comp, record)


def _await_event(event: Event) -> Generator[Any, None, None]:
    """``await event`` (a generator: ``Event.__await__`` returns it, no coroutine in
    between): one C completion per awaited record and loop (shared by the awaits of
    that loop), woken through the loop's inbox."""
    at = event._at
    ctx = event.ctx_ref
    if at is None or ctx is None:
        if event.closed:
            event.raise_closed()
        return
    point = at if isinstance(at, Point) else None
    if event._ipc and ctx.device >= 0:
        src = _ipc_src(event)
        point = None  # another process may record it again: share nothing
    elif point is not None:
        fut = point.future
        if fut is not None and fut.done():
            exc = fut.exception()
            if exc is not None:
                raise exc
            return
        waiter = _completion.join(point.inbox, point.token)
        if waiter is not None:
            yield from _completion.settle(point.inbox, point.token, waiter).__await__()  # type: ignore[arg-type]
            return
        src = point.src
    else:
        src = at  # type: ignore[assignment]
    if event.query():  # passed already (or failed: query raises the mapped error)
        return
    box, token, record = _completion.arm(ctx)
    try:
        _launch_await(event, src, ctx, record)
    except BaseException:
        _completion.disarm(box, token, record)
        raise
    waiter = _completion.waiter(box, token)  # after the launch: the device goes on meanwhile
    if not event._ipc:
        if point is None and event._at is at:
            point = Point(at)
            event._at = point
        if point is not None:
            point.inbox = box
            point.token = token
    try:  # _completion.settle, inlined: one coroutine less per await
        yield from waiter
    finally:
        if not waiter.done() or waiter.cancelled():
            _completion.drop(box, token, waiter)


def _release_events() -> None:
    """Release hook (priority 'events'): destroy every live event."""
    _live.make_inert(None, FINALIZED_REF)


def _on_context_close(ctx: CtxRef) -> None:
    _live.make_inert(ctx, CLOSED_REF)


def _after_fork_in_child() -> None:
    global _bind_lock
    _bind_lock = threading.Lock()


fork_hooks.add(_after_fork_in_child, _runtime.PRIORITY_EVENTS)
context_close_hooks.add(_on_context_close, _runtime.PRIORITY_EVENTS)
_runtime.register_release_hook(_release_events, _runtime.PRIORITY_EVENTS)
factories.event_class.set(Event)
