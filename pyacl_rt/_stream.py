"""Streams: owned streams, default streams, the per-thread current stream, a pool.

* :class:`Stream` owns an ACL stream (``aclrtCreateStreamWithConfig``) on a device
  and context; ``close()`` (idempotent), garbage collection or
  :func:`pyacl_rt.finalize` destroys it. It keeps its context alive.
* :func:`default_stream` wraps the context's default stream (handle 0 = NULL, which
  ACL resolves to the default stream of the *current* context; pyacl_rt makes the
  right context current before every call, so the NULL handle is always right).
* :func:`current_stream` / :func:`set_stream` / ``with stream(s):`` manage a
  per-thread, per-device current stream; ``with stream(s):`` (and ``with s:``)
  restore the previous stream *and* device selection exactly, even when
  :func:`set_stream` was called inside the block.
* :func:`stream_from_pool` hands out pooled streams round robin (32 per device and
  priority class, created lazily), like torch_npu's ``Stream()``.

Keep-alive hook for higher layers (memory)
------------------------------------------
(The watch lists and the marker-event pool are :mod:`pyacl_rt._watch`.)
``Stream.keep_alive(objs)`` keeps ``objs`` (one object or a tuple/list) referenced
until all work enqueued on the stream *so far* has completed on the device. It
records a marker event after the op (from a per-context pool, no allocation in the
steady state) and appends ``(marker, objs)`` to the stream's watch list. Entries
are released, oldest first, when their marker completes; completion is polled on
each ``keep_alive`` call (cheap: ``aclrtQueryEventStatus`` on the oldest entry
only), and everything is released by :meth:`Stream.synchronize`, device
``synchronize()``, :meth:`Stream.close` and finalize. Call it right *after*
enqueueing the async op::

    rc = lowlevel.lib.aclrtMemcpyAsync(dst, dmax, src, n, kind, s.handle)
    check(rc, "aclrtMemcpyAsync")
    s.keep_alive((dst_buf, src_obj))

``Stream._watch_pending()`` returns how many entries are still held (tests).
The calling thread must already have the stream's context current (it has, right
after an op through :meth:`Stream.ensure_current` or ``_device.ensure_device_current``).

Layer 5: imports layers 1-4, :mod:`_callbacks` and :mod:`_watch`. Events (the layer above) register
the class :meth:`Stream.record_event` / :meth:`Stream.wait_stream` create
(``_hooks.factories.event_class``), so this module never imports them.
"""

from __future__ import annotations

import collections
import functools
import threading
import weakref
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Final, NoReturn

from . import _callbacks, _capture, _completion, _device, _releaser, _runtime, _state, errors
from ._args import bool_arg, index_arg, timeout_ms_arg
from ._device import (
    Device,
    DeviceLike,
    context_for,
    current_device,
    device_index_arg,
    restore_selection,
)
from ._hooks import PriorityHooks, factories, fork_hooks
from ._log import get_logger
from ._state import (
    CLOSED_REF,
    FINALIZED_REF,
    CtxRef,
    LiveSet,
    check,
    context_close_hooks,
    device_sync_hooks,
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
    sliced_wait_stream,
)
from ._syncdebug import check_sync, sync_debug_active
from ._watch import keep_alive as watch_keep_alive
from ._watch import markers, poll_watch, release_watch

if TYPE_CHECKING:
    import concurrent.futures  # imports logging: loaded on the first wait only

__all__ = [
    "STREAMS_PER_POOL",
    "Stream",
    "StreamContext",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    "stream_from_pool",
]

_log = get_logger("pyacl_rt")

STREAMS_PER_POOL: Final = 32

# Checked C fast paths (lowlevel.fast): they return the out-parameter and raise the
# typed error themselves, so the hot paths need no scratch array and no rc test.
_fast_stream_query = _state.fast.stream_query

_OWNED: Final = 0
_DEFAULT: Final = 1
_POOL: Final = 2
_EXTERNAL: Final = 3
_KIND_NAMES: Final = ("owned", "default", "pool", "external")


# ------------------------------------------------------------- stream state
class StreamState:
    """A Stream's mutable state, shared with its finalizer (which must not hold the
    Stream itself). Also the Stream's identity token for the memory layer's hot path
    (``Mem.last is stream.stream_state``: one identity compare, no reference to the Stream).
    """

    __slots__ = ("side", "sub", "waiter", "watch")

    def __init__(self) -> None:
        #: Keep-alive entries ``(marker event, objects)``, oldest first.
        self.watch: collections.deque[tuple[int, object]] = collections.deque()
        #: The report thread this stream is subscribed to for host callbacks, or None.
        self.sub: _callbacks.ReportThread | None = None
        #: The companion stream that waits for this stream's events for device futures
        #: (:func:`side_stream`), closed with this stream; None until the first one.
        self.side: Stream | None = None
        #: The companion that waits for this stream's events for ``await`` (C host
        #: functions, never subscribed to a report thread: the runtime runs them), closed
        #: with this stream; None until the first await (:func:`await_stream`).
        self.waiter: Stream | None = None


# -------------------------------------------------------------- destruction
def _destroy_stream(ctx: CtxRef, handle: int, state: StreamState) -> None:
    """Finalizer body of an owned stream: destroys it exactly once. Never raises; never
    touches a dead runtime.

    The whole release is one gated section: finalize (on another thread) waits for it
    to finish before it releases anything, and a release arriving once finalize has
    closed the gate is handed to finalize (or, past that point, left to the context /
    device the stream dies with) instead of racing with it."""
    try:
        if ctx.device < 0:
            state.watch.clear()
            return
        if local.st.in_callback:
            # GC on a host-callback thread: destroying waits for the stream's work,
            # which may wait for a callback of this very thread. The releaser does it.
            _releaser.defer(functools.partial(_destroy_stream, ctx, handle, state))
            return
        if not gate_try_enter():
            _runtime.defer_to_finalize(functools.partial(_destroy_stream, ctx, handle, state))
            return
        try:
            _destroy_stream_gated(ctx, handle, state)
        finally:
            gate_exit()
    except BaseException:  # pragma: no cover - interpreter shutdown
        pass


def _destroy_stream_gated(ctx: CtxRef, handle: int, state: StreamState) -> None:
    """:func:`_destroy_stream` inside the gate. An explicit context being closed by
    another thread (``CtxRef.enter`` refuses) destroys the stream itself."""
    explicit = ctx.owner is not None
    if ctx.device < 0 or (explicit and not ctx.enter()):
        sub = state.sub
        if sub is not None:  # the subscription went with the stream
            state.sub = None
            sub.subscriptions.discard((ctx, handle))
        state.watch.clear()
        return
    try:
        ctx.ensure_current()
        sub = state.sub
        if sub is not None:
            state.sub = None
            lib.aclrtSynchronizeStream(handle)  # let pending host callbacks run
            sub.unsubscribe(handle, ctx)
        rc = lib.aclrtDestroyStream(handle)  # waits for pending work
        if rc:
            log_release_failure("aclrtDestroyStream", handle, rc)
        release_watch(ctx, state.watch)
        for side in (state.side, state.waiter):
            if side is not None:  # its waits are satisfied now: this stream's work is done
                side.make_inert(CLOSED_REF)
                live_streams.discard(side)
        state.side = state.waiter = None
    finally:
        if explicit:
            ctx.leave()


live_streams: LiveSet[Stream] = LiveSet()

#: Called as ``hook(stream, error)`` when :meth:`Stream.synchronize` raises an
#: :class:`~pyacl_rt.errors.AclError`, before it propagates: a higher layer may attach
#: what caused it (``pyacl_rt.mock`` chains the exception of a Python kernel twin). A
#: hook must not raise. Run in priority order (:class:`~pyacl_rt._hooks.PriorityHooks`).
sync_error_hooks: Final[PriorityHooks[Callable[[Stream, errors.AclError], None]]] = PriorityHooks(
    "sync error"
)


# ------------------------------------------------------------------ Stream
class Stream:
    """An ACL stream on ``device`` (default: the current device).

    ``priority`` is torch-style: ``0`` (the default) is the normal, lowest priority and
    each step below 0 is one level higher. It is mapped onto the device's ACL range
    (``aclrtDeviceGetStreamPriorityRange``, queried once per device: ``least`` and
    ``greatest``; on current runtimes 7 and 0, lower ACL numbers being higher
    priorities): ACL priority = ``least`` moved ``-priority`` levels towards
    ``greatest``, clamped to the range. So ``0`` -> ``least``, ``-1`` -> one level
    higher, anything at or below ``-(number of levels - 1)`` -> ``greatest``; positive
    values are clamped to ``least`` (as CUDA/torch clamp). :meth:`priority_range`
    gives the torch-style range. Where the runtime cannot report a range, every
    priority maps to ACL 0. :attr:`priority` is the effective (clamped) torch-style
    value, :attr:`acl_priority` the ACL value. Note that ACL's own default streams
    (and ``aclrtCreateStream``) use ACL priority 0, the greatest on current runtimes;
    many CANN versions ignore priorities altogether. ``flags`` are ``ACL_STREAM_*``
    bits (default 0); torch_npu uses ``FAST_LAUNCH | FAST_SYNC`` for its own streams.

    Unlike torch_npu, ``Stream()`` creates a new stream that this object owns and
    destroys (``close()``, GC, or finalize); use :func:`stream_from_pool` for
    torch_npu's pooled, never-destroyed streams.

    ``with s:`` makes ``s`` the current stream (and its device the current device)
    for the block, like ``with stream(s):``; it does not close the stream.
    """

    __slots__ = (
        "__weakref__",
        "_acl_priority",
        "_finalizer",
        "_flags",
        "_kind",
        "_owner",
        "_priority",
        "callback_errors",
        "ctx_ref",
        "dev_index",
        "raw_handle",
        "stream_state",
    )

    raw_handle: int
    ctx_ref: CtxRef
    dev_index: int
    _kind: int
    stream_state: StreamState

    def __init__(self, device: DeviceLike = None, priority: int = 0, flags: int = 0) -> None:
        priority = index_arg(priority, "Stream(): priority")
        flags = index_arg(flags, "Stream(): flags", "an int of ACL_STREAM_* bits")
        if not 0 <= flags <= 0xFFFFFFFF:
            raise ValueError(
                f"Stream(): flags must be an unsigned 32-bit value of ACL_STREAM_* bits "
                f"(0 <= flags < 2**32), got {flags}"
            )
        index = device_index_arg(device)
        ctx = context_for(index)
        ctx.ensure_current()
        least, greatest = _priority_range(index)
        prio = _acl_priority(priority, least, greatest)
        s = local.st.scratch
        rc = lib.aclrtCreateStreamWithConfig(s.uptr, prio, flags)
        if rc == -1 and prio == 0 and flags == 0:
            # Old runtime without aclrtCreateStreamWithConfig.
            try:
                check(rc, "aclrtCreateStreamWithConfig")
            except errors.FunctionNotFoundError:
                rc = lib.aclrtCreateStream(s.uptr)
                check(rc, "aclrtCreateStream")
        elif rc:
            check(rc, "aclrtCreateStreamWithConfig")
        self._setup(int(s.uptr[0]), ctx, _OWNED, prio, flags)
        self._priority = -abs(prio - least)

    # Owning a raw handle: a copy would alias it (use after free once one is closed).
    def __reduce__(self) -> NoReturn:
        refuse_copy(self, "aclrtStream")

    def __copy__(self) -> NoReturn:
        refuse_copy(self, "aclrtStream")

    def __deepcopy__(self, memo: object) -> NoReturn:
        refuse_copy(self, "aclrtStream")

    def _setup(self, handle: int, ctx: CtxRef, kind: int, prio: int | None, flags: int) -> None:
        self.raw_handle = handle
        self.ctx_ref = ctx
        self.dev_index = ctx.device
        self._owner = owner_of(ctx)  # keeps an explicit Context alive
        self._kind = kind
        self._priority = 0
        self._acl_priority = prio
        self._flags = flags
        #: host-callback exceptions the next synchronize() re-raises (_callbacks appends)
        self.callback_errors: list[BaseException] = []
        # Shared with the finalizer (no self ref).
        self.stream_state = StreamState()
        if kind == _OWNED:
            self._finalizer: weakref.finalize[..., Any] | None = weakref.finalize(
                self, _destroy_stream, ctx, handle, self.stream_state
            )
            self._finalizer.atexit = False
        else:
            self._finalizer = None
        live_streams.add(self)

    @classmethod
    def _wrap(cls, handle: int, ctx: CtxRef, kind: int) -> Stream:
        obj = cls.__new__(cls)
        obj._setup(handle, ctx, kind, None, 0)
        return obj

    @staticmethod
    def priority_range(device: DeviceLike = None) -> tuple[int, int]:
        """torch-style ``(least, greatest)`` priorities of ``device`` (current device if
        None): ``(0, -(levels - 1))``, e.g. ``(0, -7)`` for ACL's 0..7. Values outside
        are clamped by :class:`Stream`. Makes the device's context current."""
        index = device_index_arg(device)
        _device.ensure_device_current(index)
        least, greatest = _priority_range(index)
        return 0, -abs(least - greatest)

    @classmethod
    def from_handle(cls, handle: int, device: DeviceLike = None) -> Stream:
        """Wrap a stream created elsewhere (not owned: ``close()`` does nothing).

        ``handle`` is the raw ``aclrtStream`` as an int; ``device`` is the device it
        was created on (default: current). It is used in that device's context on
        this thread (the explicit Context active here, else the primary context).
        """
        handle = index_arg(handle, "handle", "an int (an aclrtStream address)")
        if handle < 0:
            raise ValueError(f"handle must be a non-negative aclrtStream address, got {handle}")
        return cls._wrap(handle, context_for(device_index_arg(device)), _EXTERNAL)

    # ------------------------------------------------------------ properties
    @property
    def handle(self) -> int:
        """The raw ``aclrtStream`` as an int (0 for a default stream = NULL)."""
        return self.raw_handle

    npu_stream = handle  # torch_npu's name

    @property
    def resolved_handle(self) -> int:
        """The real ``aclrtStream`` address, also for a default stream (whose
        :attr:`handle` is 0 = NULL): ``aclrtCtxGetCurrentDefaultStream`` in the
        stream's context. For C code that cannot rely on NULL meaning "the default
        stream of the calling thread's current context"."""
        if self.raw_handle:
            return self.raw_handle
        if local.st.ctx is not self.ctx_ref:
            self.ensure_current()
        s = local.st.scratch
        check(lib.aclrtCtxGetCurrentDefaultStream(s.uptr), "aclrtCtxGetCurrentDefaultStream")
        return int(s.uptr[0])

    @property
    def device(self) -> Device:
        """The :class:`~pyacl_rt.Device` of this stream."""
        return Device(self.dev_index)

    @property
    def device_index(self) -> int:
        """The device index of this stream."""
        return self.dev_index

    @property
    def priority(self) -> int:
        """The torch-style priority after clamping (0 = lowest; see the class
        docstring). 0 for default and external streams."""
        return self._priority

    @property
    def acl_priority(self) -> int | None:
        """The ACL priority the stream was created with; None for default and
        external streams (not created by pyacl_rt)."""
        return self._acl_priority

    @property
    def flags(self) -> int:
        """The ``ACL_STREAM_*`` flags requested at creation."""
        return self._flags

    @property
    def kind(self) -> str:
        """``'owned'``, ``'default'``, ``'pool'`` or ``'external'``."""
        return _KIND_NAMES[self._kind]

    @property
    def closed(self) -> bool:
        """True once closed (or made inert by finalize)."""
        return self.ctx_ref.device < 0

    def __repr__(self) -> str:
        if self.ctx_ref.device < 0:
            return f"<Stream {self.kind} closed>"
        return f"<Stream {self.kind} 0x{self.raw_handle:x} on device {self.dev_index}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stream):
            return NotImplemented
        return (
            other.raw_handle == self.raw_handle
            and other.dev_index == self.dev_index
            and (self.raw_handle != 0 or other.ctx_ref is self.ctx_ref)
        )

    def __hash__(self) -> int:
        return hash((self.raw_handle, self.dev_index))

    # --------------------------------------------------------------- helpers
    def ensure_current(self) -> None:
        """Make this stream's context current on the calling thread (or raise)."""
        ctx = self.ctx_ref
        if ctx.device < 0:
            if ctx is CLOSED_REF:
                raise errors.ObjectClosedError(
                    f"{self.kind} stream is closed; create a new Stream", explanation=""
                )
            raise_dead(ctx.dead)
        ctx.make_current()

    # ------------------------------------------------------------- queries
    def query(self) -> bool:
        """True if all work submitted to the stream has completed (``aclrtStreamQuery``)."""
        if local.st.ctx is not self.ctx_ref:
            self.ensure_current()
        return _fast_stream_query(self.raw_handle) == 0  # type: ignore[no-any-return]

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait until all work on the stream completed. Releases the GIL.

        ``timeout`` in milliseconds (``aclrtSynchronizeStreamWithTimeout``); on expiry
        :class:`~pyacl_rt.errors.SyncTimeoutError` (a ``TimeoutError`` and an
        :class:`~pyacl_rt.errors.AclError`) is raised. ``None`` waits forever.
        Re-raises the first exception a host callback of this stream raised since the
        last synchronize (the others are attached as notes). Refused inside a host
        callback (it would wait for itself).
        """
        t = local.st
        if t.in_callback:
            refuse_in_callback("Stream.synchronize()")
        if sync_debug_active():
            check_sync("Stream.synchronize()")
        if t.ctx is not self.ctx_ref:
            self.ensure_current()
        # In slices: Ctrl-C interrupts the wait (the work stays queued); an expired
        # timeout raises errors.SyncTimeoutError.
        try:
            sliced_wait_stream(self.raw_handle, -1 if timeout is None else _timeout_ms(timeout))
        except errors.AclError as exc:
            for hook in sync_error_hooks:
                hook(self, exc)  # e.g. chain the exception of a mock kernel twin
            raise
        watch = self.stream_state.watch
        if watch:
            # Everything recorded before this sync is complete; entries another thread
            # appended meanwhile are not (polling releases exactly the completed ones).
            self._poll_watch(watch)
        if self.callback_errors:
            self._raise_callback_error()

    def _raise_callback_error(self) -> None:
        errs = self.callback_errors
        first = errs.pop(0)
        others = list(errs)
        errs.clear()
        for other in others:
            first.add_note(f"another host callback on this stream also raised: {other!r}")
        raise first

    # ------------------------------------------------------------ ordering
    def wait_event(self, event: Any) -> None:
        """Make future work on this stream wait for ``event`` (``aclrtStreamWaitEvent``).

        Waiting on an event that was never recorded is a no-op (as in torch_npu).
        """
        wait_on = getattr(event, "_wait_on", None)
        if wait_on is None:
            raise TypeError(
                f"Stream.wait_event(): event must be an Event, not {type(event).__name__}"
            )
        wait_on(self)

    def wait_stream(self, other: Stream) -> None:
        """Make future work on this stream wait for the work submitted to ``other`` so far."""
        if not isinstance(other, Stream):
            raise TypeError(
                f"Stream.wait_stream(): other must be a Stream, not {type(other).__name__}"
            )
        if other is self:
            return
        ev = _new_event()
        ev.record(other)
        self.wait_event(ev)
        self.keep_alive(ev)  # the event must outlive the wait

    def record_event(self, event: Any = None) -> Any:
        """Record ``event`` (a new :class:`~pyacl_rt.Event` if None) on this stream."""
        if event is None:
            event = _new_event()
        elif not isinstance(event, factories.event_class.get()):
            raise TypeError(
                f"Stream.record_event(): event must be an Event or None, not {type(event).__name__}"
            )
        event.record(self)
        return event

    # ------------------------------------------------------------- callbacks
    def launch_host_func(
        self, fn: Callable[..., object], *args: object, block: bool = True
    ) -> None:
        """Run ``fn(*args)`` on pyacl_rt's report thread when the stream reaches this point.

        ``block=True`` (the default, like torch_npu's host funcs) makes later work on
        the stream wait until ``fn`` returns. ``fn`` must not wait for device work (a
        synchronize, a synchronous copy, closing a stream that has callbacks, or
        :func:`pyacl_rt.finalize` raise :class:`~pyacl_rt.errors.CallbackContextError`
        there) nor allocate or free device memory: hand blocking work to another
        thread. An exception raised by ``fn`` is re-raised by the next
        :meth:`synchronize` of this stream; if the stream is closed, collected or
        finalized first, it is logged (logger ``pyacl_rt``) instead.
        """
        if not callable(fn):
            raise TypeError(f"launch_host_func(): fn must be callable, not {type(fn).__name__}")
        if block is not True:
            block = bool_arg(block, "launch_host_func(): block")
        if local.st.ctx is not self.ctx_ref:
            self.ensure_current()
        _callbacks.launch(self, fn, args, block)

    def add_callback(
        self, callback: Callable[[Stream, int, object], object], arg: object = None
    ) -> None:
        """CuPy-style: run ``callback(stream, 0, arg)`` when the stream reaches this point."""
        if not callable(callback):
            raise TypeError(
                f"add_callback(): callback must be callable, not {type(callback).__name__}"
            )
        self.launch_host_func(callback, self, 0, arg)

    # ------------------------------------------------------------ completion
    def as_future(self) -> concurrent.futures.Future[None]:
        """A :class:`concurrent.futures.Future` (result None) that completes when all
        work submitted to this stream so far is done (see :meth:`Event.as_future`: a
        host callback tells, no polling; this stream is never held up by it).

        Already done if the stream is idle. Raises the mapped error of a failed stream.
        """
        if self.query():  # also raises the error of a failed stream
            return _completion.done_future()
        return self.record_event().as_future()  # type: ignore[no-any-return]

    def __await__(self) -> Generator[Any, None, None]:
        """``await stream``: wait in the running asyncio loop (never blocking it) until
        all work submitted so far is done; then raise the stream's error if a task on
        it failed. Cancelling the await cancels no device work."""
        return self._await().__await__()

    async def _await(self) -> None:
        if not self.query():  # also raises the error of a failed stream
            await self.record_event()
        if self.ctx_ref.device >= 0:
            self.query()  # the mapped error of a task that failed meanwhile

    # ------------------------------------------------------------- keep-alive
    def keep_alive(self, objs: object) -> None:
        """Keep ``objs`` alive until the work enqueued so far on this stream completed.

        For higher layers (see the module docstring). Requires the stream's context
        to be current on this thread (true right after enqueueing an op on it).
        """
        if _capture.by_stream:  # a graph capture runs: no marker in (or query of) it
            cap = _capture.find(self.raw_handle)
            if cap is not None:
                cap.keep.append(objs)  # kept by the graph: replays use them
                return
        ctx = self.ctx_ref
        if local.st.ctx is not ctx:
            self.ensure_current()
        watch_keep_alive(ctx, self.raw_handle, self.stream_state.watch, objs)

    def _poll_watch(self, watch: collections.deque[tuple[int, object]]) -> None:
        """Release the leading entries whose marker completed (see
        :func:`pyacl_rt._watch.poll_watch`)."""
        poll_watch(self.ctx_ref, watch)

    def _watch_pending(self) -> int:
        """Number of keep-alive entries not yet released (polls first)."""
        watch = self.stream_state.watch
        if watch and self.ctx_ref.device >= 0:
            if local.st.ctx is not self.ctx_ref:
                self.ensure_current()
            self._poll_watch(watch)
        return len(watch)

    # ------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Destroy an owned stream (waits for its pending work). Idempotent.

        No-op for default, pooled and external streams (they are not ours to
        destroy) and after :func:`pyacl_rt.finalize`. Refused inside a host
        callback when the stream has host callbacks (it would wait for itself).
        """
        f = self._finalizer
        if f is None or not f.alive or self._kind != _OWNED:
            return
        if self.stream_state.sub is not None and local.st.in_callback:
            refuse_in_callback("Stream.close()")
        if sync_debug_active():
            check_sync("Stream.close()")
        if not local.st.in_callback and self.ctx_ref.device >= 0:
            # Destroying waits for the pending work, uninterruptibly: wait for it here
            # first, in slices (Ctrl-C leaves the stream open and usable). A failing
            # wait (a failed task, finalize on another thread) is left to the destroy.
            try:
                self.ctx_ref.ensure_current()
                sliced_wait_stream(self.raw_handle, -1)
            except errors.AclError:
                pass
        where = repr(self)
        run_finalizer(f)  # runs _destroy_stream once
        self.ctx_ref = CLOSED_REF
        live_streams.discard(self)
        if self.callback_errors:  # host-callback exceptions no synchronize() will re-raise now
            _callbacks.report_unraised(self.callback_errors, where, "closed")

    def make_inert(self, reason_ctx: CtxRef) -> None:
        """Finalize / context close: destroy if owned, then refuse further use."""
        where = repr(self)
        if not run_finalizer(self._finalizer):
            state = self.stream_state
            sub = state.sub
            if sub is not None and self.ctx_ref.device >= 0:
                state.sub = None
                try:
                    self.ctx_ref.ensure_current()
                    lib.aclrtSynchronizeStream(self.raw_handle)  # let its callbacks run
                    sub.unsubscribe(self.raw_handle, self.ctx_ref)
                except Exception:  # pragma: no cover - defensive
                    _log.debug("pyacl_rt: unsubscribing %r failed", self, exc_info=True)
            state.watch.clear()
        if self.callback_errors:
            fate = "finalized" if reason_ctx.dead == "finalized" else "closed"
            _callbacks.report_unraised(self.callback_errors, where, fate)
        self.ctx_ref = reason_ctx

    def __enter__(self) -> Stream:
        guard = StreamContext(self)
        guard.__enter__()
        _guard_stack().append(guard)
        return self

    def __exit__(self, *exc: object) -> None:
        st = _guard_stack()
        if st:
            st.pop().__exit__()


#: device index -> ACL (least, greatest) stream priorities, queried once per device.
_priority_ranges: dict[int, tuple[int, int]] = {}


def _priority_range(index: int) -> tuple[int, int]:
    """``aclrtDeviceGetStreamPriorityRange`` of device ``index`` (its context must be
    current on this thread), cached; ``(0, 0)`` if the runtime cannot report it."""
    r = _priority_ranges.get(index)
    if r is None:
        i32 = local.st.i32
        rc = lib.aclrtDeviceGetStreamPriorityRange(i32, i32 + 1)
        if rc:
            try:
                check(rc, "aclrtDeviceGetStreamPriorityRange")
            except (errors.FeatureNotSupportedError, errors.AclUsageError):
                # older CANN without the query, or a runtime that does not support it
                return (0, 0)
        r = (int(i32[0]), int(i32[1]))
        _priority_ranges[index] = r
    return r


def _acl_priority(priority: int, least: int, greatest: int) -> int:
    """torch-style ``priority`` (0 = least, negative = higher) -> ACL priority in the
    range, clamped: ``least`` moved ``-priority`` levels towards ``greatest``."""
    levels = abs(greatest - least)
    up = min(max(-priority, 0), levels)
    return least - up if greatest < least else least + up


def _new_event() -> Any:
    return factories.event_class.get()()


_side_lock = threading.Lock()


def side_stream(state: StreamState, ctx: CtxRef) -> Stream:
    """The companion of the stream whose state is ``state`` (of context ``ctx``) for
    device futures: an owned stream in ``ctx`` that :mod:`_event` uses to wait for that
    stream's events without holding it up, then run a Python host callback (through a
    report thread). Created on first use, closed with the stream."""
    side = state.side
    if side is not None and side.ctx_ref.device >= 0:
        return side
    return _companion(state, ctx, "side")


def await_stream(state: StreamState, ctx: CtxRef) -> Stream:
    """The companion of the stream whose state is ``state`` for ``await``: like
    :func:`side_stream`, but its completions are C host functions that the runtime runs
    itself (``aclrtLaunchHostFunc``), so it is never subscribed to a report thread (the
    two mechanisms do not mix on one stream)."""
    side = state.waiter
    if side is not None and side.ctx_ref.device >= 0:
        return side
    return _companion(state, ctx, "waiter")


def _companion(state: StreamState, ctx: CtxRef, slot: str) -> Stream:
    with _side_lock:
        side: Stream | None = getattr(state, slot)
        if side is not None and side.ctx_ref.device >= 0:
            return side
        if local.st.ctx is not ctx:
            ctx.make_current()
        s = local.st.scratch
        rc = lib.aclrtCreateStream(s.uptr)
        if rc:
            check(rc, "aclrtCreateStream")
        side = Stream._wrap(int(s.uptr[0]), ctx, _OWNED)
        setattr(state, slot, side)
        return side


_timeout_ms = timeout_ms_arg


# ---------------------------------------------------- default / current stream
#: Default-stream wrappers of primary contexts (they live as long as the process).
_defaults: dict[CtxRef, Stream] = {}
#: device index -> default stream of its primary context (current_stream's fast path).
primary_defaults: dict[int, Stream] = {}
#: ... and of explicit Contexts: weak, so that the cache never keeps a Context alive.
_explicit_defaults: weakref.WeakValueDictionary[CtxRef, Stream] = weakref.WeakValueDictionary()


def default_stream(device: DeviceLike = None) -> Stream:
    """The default stream of ``device`` (current device if None) in the context this
    thread uses for it. Its handle is 0 (NULL), as in ACL; ``close()`` is a no-op.
    """
    index = device_index_arg(device)
    ctx = context_for(index)
    cache = _defaults if ctx.owner is None else _explicit_defaults
    s = cache.get(ctx)
    if s is None:
        s = cache.setdefault(ctx, Stream._wrap(0, ctx, _DEFAULT))
        if ctx.owner is None:
            primary_defaults[index] = s
    return s


def current_stream(device: DeviceLike = None) -> Stream:
    """The calling thread's current stream for ``device`` (default: current device).

    The default stream unless :func:`set_stream` / ``with stream(s):`` chose another.
    """
    t = local.st
    if device is None:
        index = t.device
        if index < 0:
            index = current_device()
    else:
        index = device_index_arg(device)
    s = t.streams.get(index)
    if s is not None:
        if s.ctx_ref is not FINALIZED_REF:
            return s  # type: ignore[no-any-return]
        del t.streams[index]  # chosen before a finalize: back to the default stream
    if t.active is None:
        s = primary_defaults.get(index)
        if s is not None:
            return s
    return default_stream(index)


def set_stream(s: Stream) -> None:
    """Make ``s`` the calling thread's current stream for its device, and select that
    device (as torch_npu's ``set_stream`` does)."""
    if not isinstance(s, Stream):
        raise TypeError(f"set_stream(): s must be a Stream, not {type(s).__name__}")
    if s.ctx_ref.device < 0:
        s.ensure_current()  # raises the closed/finalized error
    _device.set_device(s.dev_index)
    local.st.streams[s.dev_index] = s


_guard_tls = threading.local()


def _guard_stack() -> list[StreamContext]:
    st: list[StreamContext] | None = getattr(_guard_tls, "stack", None)
    if st is None:
        st = []
        _guard_tls.stack = st
    return st


def stream(s: Stream | None) -> StreamContext:
    """``with stream(s):`` makes ``s`` the current stream (and its device the current
    device) for the block, then restores the thread's previous state exactly: the
    selected device (or "none"), the active Context and the current stream of
    *every* device, even if :func:`set_stream` / :func:`set_device` were called
    inside the block. ``stream(None)`` is a no-op, as in torch_npu. Returns the
    :class:`StreamContext` doing it.
    """
    return StreamContext(s)


class StreamContext:
    """The context manager :func:`stream` returns (torch_npu's ``StreamContext``):
    ``with StreamContext(s):`` is ``with stream(s):``; ``__enter__`` returns ``s``."""

    __slots__ = ("_saved", "s")

    def __init__(self, s: Stream | None) -> None:
        if s is not None and not isinstance(s, Stream):
            raise TypeError(f"stream(): s must be a Stream or None, not {type(s).__name__}")
        self.s = s
        self._saved: list[tuple[int, Any, dict[int, Any]]] = []

    def __enter__(self) -> Stream | None:
        s = self.s
        if s is None:
            return None
        self._saved.append((local.st.device, local.st.active, dict(local.st.streams)))
        try:
            set_stream(s)
        except BaseException:
            self._saved.pop()
            raise
        return s

    def __exit__(self, *exc: object) -> None:
        if self.s is None or not self._saved:
            return
        prev_device, prev_active, prev_streams = self._saved.pop()
        restore_selection(prev_device, prev_active)
        table = local.st.streams
        table.clear()
        table.update(prev_streams)


# ------------------------------------------------------------------- pool
class _Pool:
    __slots__ = ("counter", "lock", "streams")

    def __init__(self) -> None:
        self.streams: list[Stream | None] = [None] * STREAMS_PER_POOL
        self.counter = 0
        self.lock = threading.Lock()


_pools: dict[tuple[CtxRef, bool], _Pool] = {}
_pools_lock = threading.Lock()


def stream_from_pool(device: DeviceLike = None, priority: int = 0) -> Stream:
    """A pooled stream of ``device``, round robin over 32 streams per device and
    priority class (``priority < 0`` = the high-priority pool, whose streams have the
    device's greatest priority; the others the least), as torch_npu's
    ``Stream()`` does. Streams are created on first use and live until finalize;
    ``close()`` on them is a no-op. For libraries that need short-lived streams
    without paying stream creation each time.
    """
    priority = index_arg(priority, "priority")
    index = device_index_arg(device)
    ctx = context_for(index)
    high = priority < 0
    key = (ctx, high)
    pool = _pools.get(key)
    if pool is None:
        with _pools_lock:
            pool = _pools.setdefault(key, _Pool())
    with pool.lock:
        i = pool.counter % STREAMS_PER_POOL
        pool.counter += 1
        s = pool.streams[i]
        if s is None or s.ctx_ref.device < 0:
            # high pool: the device's greatest priority (clamped), as torch does
            s = Stream(index, priority=-(2**31) if high else 0)
            s._kind = _POOL
            pool.streams[i] = s
    return s


def _drain_pools() -> int:
    """Destroy every pooled stream now (tests, and libraries that want to give the
    resources back before finalize). Returns how many were destroyed. Pooled Stream
    objects still held somewhere become closed."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    n = 0
    for pool in pools:
        with pool.lock:
            items = [s for s in pool.streams if s is not None]
            pool.streams = [None] * STREAMS_PER_POOL
        for s in items:
            s.make_inert(CLOSED_REF)
            live_streams.discard(s)
            n += 1
    return n


# ------------------------------------------------------------- lifecycle
def _release_streams() -> None:
    """Release hook (priority 'streams'): destroy every live stream, pools included."""
    live_streams.make_inert(None, FINALIZED_REF)
    with _pools_lock:
        _pools.clear()
    _priority_ranges.clear()
    _defaults.clear()
    primary_defaults.clear()
    _explicit_defaults.clear()


def _on_context_close(ctx: CtxRef) -> None:
    """An explicit Context is closing: close its streams, pools and markers first."""
    live_streams.make_inert(ctx, CLOSED_REF)
    with _pools_lock:
        for key in [k for k in _pools if k[0] is ctx]:
            del _pools[key]
    _explicit_defaults.pop(ctx, None)
    _callbacks.forget_context(ctx)
    markers.drop_context(ctx)


def _on_device_sync(index: int) -> None:
    for s in live_streams.snapshot():
        ctx = s.ctx_ref
        if s.dev_index == index and ctx.device >= 0 and s.stream_state.watch:
            explicit = ctx.owner is not None
            if explicit and not ctx.enter():
                continue  # its context is being closed on another thread
            try:
                ctx.ensure_current()
                s._poll_watch(s.stream_state.watch)
            except errors.AclError:  # pragma: no cover - defensive
                pass
            finally:
                if explicit:
                    ctx.leave()


def _after_fork_in_child() -> None:
    global _side_lock
    _side_lock = threading.Lock()
    # A parent thread may have held these at fork time; the child only needs them
    # not to deadlock while refusing to use the runtime.
    global _pools_lock
    _pools_lock = threading.Lock()


def _settle() -> None:
    """settle(): forget this thread's selection and current streams, destroy the pooled
    streams and synchronize the devices in use (which releases keep-alive lists)."""
    if not _runtime.is_initialized():
        return
    st = local.st
    _state.select_device(st, -1)
    st.active = None
    st.streams.clear()
    _drain_pools()
    for index in list(_device.primaries):
        _device.synchronize(index)


fork_hooks.add(_after_fork_in_child, _runtime.PRIORITY_STREAMS)
_runtime.settle_hooks.add(_settle, _runtime.PRIORITY_STREAMS)
context_close_hooks.add(_on_context_close, _runtime.PRIORITY_STREAMS)
device_sync_hooks.add(_on_device_sync, _runtime.PRIORITY_STREAMS)
_runtime.register_release_hook(_release_streams, _runtime.PRIORITY_STREAMS)
