"""Host callbacks on streams: pyacl_rt owns the report threads.

Mechanism: ``aclrtSubscribeReport`` + ``aclrtLaunchCallback`` + a thread looping on
``aclrtProcessReport`` (acl_abi.md section 5.7), not ``aclrtLaunchHostFunc``. Why:

* it is the documented, long-standing protocol that pyACL and torch_npu use, present
  in every CANN version (``aclrtLaunchHostFunc`` is newer and its worker thread is
  owned by the runtime);
* the callback runs on a *Python thread pyacl_rt owns*: we know its identity, can
  name it, stop it deterministically at finalize, and refuse the blocking calls that
  would deadlock from it;
* the subscription uses ``threading.get_ident()``, which is the thread's
  ``pthread_t`` on Linux, exactly what ``aclrtProcessReport`` compares against.

One report thread per device (ACL forbids one thread serving two devices), started
on the first :meth:`Stream.launch_host_func` of that device, with the device's
primary context current. A stream is subscribed on its first callback and
unsubscribed when it is closed. The threads stop at
:func:`pyacl_rt.finalize` after the streams are closed. The poll interval
is ``PYACL_RT_CALLBACK_POLL_MS`` (default 100 ms; only affects how fast the thread
notices it should stop).

The thread's loop runs in C (:class:`pyacl_rt._reportcore.ReportLoop`): it calls
``aclrtProcessReport`` with the GIL released and comes back to Python only to stop, on
an error, or after a Python callback ran (the trampoline flags it: the graveyard below
and the thread's context are looked after then). The C host callback of an ``await``
(:func:`launch_native`) runs without the GIL, so a loop or thread that keeps the GIL
busy never holds up await completions.

Rules for a callback (``fn(*args)``):

* It runs on the report thread, while the stream waits for it (``block=True``, the
  default). It **must not** wait for device work: ``Stream.synchronize``,
  ``Event.synchronize``, ``synchronize()``, ``Context.synchronize`` and closing a
  stream that has callbacks raise :class:`~pyacl_rt.errors.CallbackContextError`
  there instead of deadlocking. It also must not allocate/free device memory or do
  synchronous copies (ACL forbids those from callbacks; pyacl_rt cannot detect every
  such call). :func:`pyacl_rt.finalize` is refused there with
  ``CallbackContextError`` too (resetting the device waits for the stream, which
  waits for the callback). Hand heavy or blocking work to another thread.
* An exception it raises is re-raised by the next ``synchronize()`` of that stream;
  it is never lost: one that never is (the stream is closed, garbage-collected or
  finalized first) is logged then, with its traceback (logger ``pyacl_rt``, level
  ERROR). At the time it is raised it is only logged at DEBUG level.
* The callable, its arguments and the stream are kept alive until it has run.

The report thread counts as a callback thread for its whole life, not only while a
callback runs: garbage collection (or the last reference to a callback's arguments
dropped) may run finalizers there at any point, and freeing a buffer or destroying a
stream waits for streams that may be waiting for this very thread. Those releases
are handed to pyacl_rt's releaser thread (:mod:`pyacl_rt._releaser`), started with
the first report thread.

Layer 5, below :mod:`pyacl_rt._stream` (which calls into this module): imports layers
1-4 only.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from typing import TYPE_CHECKING, Any, Final

from . import _device, _releaser, _reportcore, _runtime, errors, lowlevel
from ._hooks import fork_hooks
from ._log import get_logger
from ._options import get_options
from ._raw._abi_runtime import CONSTANTS as _C
from ._state import CtxRef, check, lib, local, raw_lib

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._stream import Stream

__all__ = ["pending_count", "report_threads", "report_unraised"]

_log = get_logger("pyacl_rt")

ACL_ERROR_RT_REPORT_TIMEOUT: Final = _C["ACL_ERROR_RT_REPORT_TIMEOUT"]
ACL_ERROR_RT_THREAD_SUBSCRIBE: Final = _C["ACL_ERROR_RT_THREAD_SUBSCRIBE"]
ACL_CALLBACK_NO_BLOCK: Final = _C["ACL_CALLBACK_NO_BLOCK"]
ACL_CALLBACK_BLOCK: Final = _C["ACL_CALLBACK_BLOCK"]

_ffi = lowlevel.ffi


def _process_report_address() -> int:
    """Address of the raw layer's (ungated) aclrtProcessReport, for the C loop."""
    return int(_ffi.cast("uintptr_t", _ffi.addressof(raw_lib, "aclrtProcessReport")))


#: key -> (fn, args, stream): keeps everything alive until the callback ran.
_pending: dict[int, tuple[Callable[..., object], tuple[object, ...], Stream]] = {}
_keys = itertools.count(1)  # 0 would be a NULL userData


class ReportThread:
    """One thread serving the callbacks of every subscribed stream of one device."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.poll_ms = int(get_options().callback_poll_ms)
        #: (context, stream handle) pairs subscribed to this thread (handle 0 = the
        #: context's default stream). A set: unsubscribing twice is harmless.
        self.subscriptions: set[tuple[CtxRef, int]] = set()
        self._stop = False
        self._wake = threading.Event()
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        #: entries whose callback ran; dropped after aclrtProcessReport returned, so
        #: that a Stream finalizer never runs inside the callback it waits for.
        self._graveyard: list[object] = []
        #: the C loop around aclrtProcessReport (stop() makes it return within poll_ms)
        self.loop = _reportcore.ReportLoop(_process_report_address(), ACL_ERROR_RT_REPORT_TIMEOUT)
        self.thread = threading.Thread(
            target=self._run, name=f"pyacl_rt-callbacks-npu{device}", daemon=True
        )
        self.thread.start()
        self._started.wait()
        if self._start_error is not None:
            raise self._start_error
        ident = self.thread.ident
        assert ident is not None
        self.ident: int = ident

    def _run(self) -> None:
        # The whole report thread counts as a callback thread, not only the time a
        # callback runs: a finalizer triggered here at any point (garbage collection,
        # the graveyard below) must not wait for a stream, which may be waiting for a
        # callback only this thread can run. Such releases go to pyacl_rt._releaser.
        local.st.in_callback = True
        try:
            _device.ensure_device_current(self.device)
        except BaseException as exc:
            self._start_error = exc
            self._started.set()
            return
        self._started.set()
        poll = self.poll_ms
        # The loop itself runs in C with the GIL released (pyacl_rt._reportcore): an
        # await completion (a C callback) needs no Python at all; it comes back here
        # only to stop, on an error, or after a Python callback ran (graveyard, context).
        # Ungated: finalize waits for streams whose host callbacks only this loop runs.
        run = self.loop.run
        wait = self._wake.wait
        st = local.st
        while not self._stop:
            if not self.subscriptions:
                wait(poll / 1000.0)
                self._wake.clear()
                continue
            rc = run(poll)
            if self._graveyard:
                self._graveyard.clear()
            cur = st.ctx
            if cur is None or cur.device != self.device:
                # A deferred release (or a finalizer) switched this thread's context.
                try:
                    _device.ensure_device_current(self.device)
                except Exception:
                    _log.debug("pyacl_rt: report thread lost its context", exc_info=True)
            if rc == 0:
                continue
            lowlevel.recent_error_message()  # consume this thread's error text
            if rc != ACL_ERROR_RT_THREAD_SUBSCRIBE:
                _log.warning(
                    "pyacl_rt: aclrtProcessReport on device %d failed with %d", self.device, rc
                )
            wait(poll / 1000.0)
            self._wake.clear()
        self._graveyard.clear()

    def subscribe(self, stream_handle: int, ctx: CtxRef) -> None:
        """Subscribe a stream (``ctx`` must be current on the calling thread)."""
        key = (ctx, stream_handle)
        if key in self.subscriptions:
            return
        rc = lib.aclrtSubscribeReport(self.ident, stream_handle)
        if rc:
            check(rc, "aclrtSubscribeReport")
        self.subscriptions.add(key)
        self._wake.set()

    def unsubscribe(self, stream_handle: int, ctx: CtxRef) -> None:
        """Unsubscribe (``ctx`` current on the calling thread). Idempotent; never raises."""
        key = (ctx, stream_handle)
        if key not in self.subscriptions:
            return
        self.subscriptions.discard(key)
        try:
            rc = lib.aclrtUnSubscribeReport(self.ident, stream_handle)
            if rc:
                lowlevel.recent_error_message()
                _log.debug("aclrtUnSubscribeReport failed with %d", rc)
        except Exception:  # pragma: no cover - defensive
            pass

    def stop(self) -> None:
        self._stop = True
        self.loop.stop()
        self._wake.set()
        if self.thread.ident != threading.get_ident():
            self.thread.join(timeout=max(5.0, 4 * self.poll_ms / 1000.0))


def _run_deferred() -> None:
    """Run the releases finalizers deferred on a callback thread (still queued for
    the releaser thread) here. Never raises."""
    if local.st.in_callback:
        return  # a callback thread must not do them (see pyacl_rt._releaser)
    _releaser.drain()


_threads: dict[int, ReportThread] = {}
_threads_lock = threading.Lock()


def _thread_for(device: int) -> ReportThread:
    rt = _threads.get(device)
    if rt is None:
        with _threads_lock:
            rt = _threads.get(device)
            if rt is None:
                _releaser.start()  # runs the releases deferred on report threads
                rt = ReportThread(device)
                _threads[device] = rt
    return rt


def _on_callback(user_data: Any) -> None:
    """C trampoline body (runs on a report thread, with the GIL). Never raises."""
    try:
        key = int(_ffi.cast("uintptr_t", user_data))
        entry = _pending.pop(key, None)
        if entry is None:
            return
        fn, args, stream = entry
        _attention()  # the C loop returns to Python after this report (graveyard)
        st = local.st
        was_in_callback = st.in_callback  # True on a report thread (always)
        st.in_callback = True
        try:
            fn(*args)
        except BaseException as exc:
            # Only DEBUG here: the user gets it from synchronize(); if that never comes,
            # report_unraised logs it (with its traceback) when the stream goes away.
            _log.debug(
                "pyacl_rt: host callback %r on %r raised; it will be re-raised by the next "
                "synchronize() of that stream",
                fn,
                stream,
                exc_info=exc,
            )
            with contextlib.suppress(Exception):
                exc.add_note(f"raised in host callback {fn!r} launched on {stream!r}")
            _watch_unraised(stream)
            stream.callback_errors.append(exc)
        finally:
            st.in_callback = was_in_callback
        rt = _threads.get(stream.dev_index)
        if rt is not None and rt.thread.ident == threading.get_ident():
            rt._graveyard.append(entry)
        del entry, fn, args, stream
    except BaseException:  # pragma: no cover - never propagate into C
        pass


_attention = _reportcore.attention
_trampoline = _ffi.callback("void(void *)", _on_callback)

#: id(stream) -> the finalizer that reports its callback exceptions if the stream is
#: collected before a synchronize() re-raised them (one per stream that ever had one).
_unraised_watch: dict[int, weakref.finalize[..., Any]] = {}


def _watch_unraised(stream: Stream) -> None:
    key = id(stream)
    watch = _unraised_watch.get(key)
    if watch is None or not watch.alive:
        watch = weakref.finalize(
            stream, _stream_collected, key, stream.callback_errors, repr(stream)
        )
        watch.atexit = False  # at exit, finalize() reports what is left ("finalized")
        _unraised_watch[key] = watch


def _stream_collected(key: int, errs: list[BaseException], where: str) -> None:
    _unraised_watch.pop(key, None)
    report_unraised(errs, where, "garbage-collected")


def report_unraised(errs: list[BaseException], where: str, fate: str) -> None:
    """Log (ERROR, with traceback) and forget the host-callback exceptions in ``errs``
    that no ``synchronize()`` re-raised: the stream ``where`` was ``fate`` ("closed",
    "garbage-collected", "finalized") first. Never raises."""
    while errs:
        try:
            exc = errs.pop(0)
        except IndexError:  # pragma: no cover - a concurrent synchronize() took it
            return
        with contextlib.suppress(Exception):  # logging torn down at exit
            _log.error(
                "pyacl_rt: a host callback on %s raised, and the stream was %s before a "
                "synchronize() could re-raise it",
                where,
                fate,
                exc_info=exc,
            )


_subscribe_lock = threading.Lock()


#: Subscriptions of default streams (handle 0) per context: their Python wrappers
#: may be recreated, the ACL stream (and its subscription) stays with the context.
_default_subs: dict[CtxRef, ReportThread] = {}


def forget_context(ctx: CtxRef) -> None:
    """An explicit context is closing: drop its default stream's subscription."""
    rt = _default_subs.pop(ctx, None)
    if rt is not None and ctx.device >= 0:
        try:
            ctx.ensure_current()
            lib.aclrtSynchronizeStream(0)
        except Exception:  # pragma: no cover - defensive
            pass
        rt.unsubscribe(0, ctx)


def _subscribed(stream: Stream) -> None:
    """Make sure ``stream`` is subscribed to its device's report thread."""
    state = stream.stream_state
    if state.sub is None:
        with _subscribe_lock:
            if state.sub is None and stream.raw_handle == 0:
                state.sub = _default_subs.get(stream.ctx_ref)
            if state.sub is None:
                rt = _thread_for(stream.dev_index)
                if local.st.ctx is not stream.ctx_ref:
                    stream.ensure_current()
                rt.subscribe(stream.raw_handle, stream.ctx_ref)
                state.sub = rt
                if stream.raw_handle == 0:
                    _default_subs[stream.ctx_ref] = rt


def launch(
    stream: Stream, fn: Callable[..., object], args: tuple[object, ...], block: bool
) -> None:
    """Enqueue ``fn(*args)`` on ``stream`` (its context is current on this thread)."""
    if stream.stream_state.sub is None:
        _subscribed(stream)
    key = next(_keys)
    _pending[key] = (fn, args, stream)
    rc = lib.aclrtLaunchCallback(
        _trampoline, key, ACL_CALLBACK_BLOCK if block else ACL_CALLBACK_NO_BLOCK, stream.raw_handle
    )
    if rc:
        _pending.pop(key, None)
        check(rc, "aclrtLaunchCallback")


#: The C host callback of an await (pyacl_rt._reportcore): runs without the GIL.
_native_callback: Any = None


def launch_native(stream: Stream, record: int) -> None:
    """Enqueue the C await callback with ``record`` (an armed
    :class:`pyacl_rt._reportcore.Inbox` record) on ``stream`` (its context current),
    blocking: the report thread runs it without the GIL."""
    global _native_callback
    if stream.stream_state.sub is None:
        _subscribed(stream)
    cb = _native_callback
    if cb is None:
        cb = _native_callback = _ffi.cast("void(*)(void *)", _reportcore.callback_address())
    rc = lib.aclrtLaunchCallback(cb, record, ACL_CALLBACK_BLOCK, stream.raw_handle)
    if rc:
        check(rc, "aclrtLaunchCallback")


def pending_count() -> int:
    """Number of launched host callbacks that have not run yet (process-wide)."""
    return len(_pending)


def report_threads() -> dict[int, threading.Thread]:
    """device index -> the running report thread (for diagnostics and tests)."""
    return {d: rt.thread for d, rt in _threads.items() if rt.thread.is_alive()}


def _stop_threads() -> None:
    """Release hook (after streams): stop every report thread. Never raises."""
    _run_deferred()
    _default_subs.clear()
    with _threads_lock:
        threads = list(_threads.values())
        _threads.clear()
    for rt in threads:
        try:
            rt.stop()
        except BaseException:  # pragma: no cover - defensive
            _log.exception("pyacl_rt: stopping %s failed", rt.thread.name)
    _run_deferred()
    if _pending:
        _log.warning(
            "pyacl_rt: %d host callback(s) never ran before finalize (dropped)", len(_pending)
        )
        _pending.clear()


def _refuse_finalize_here() -> None:
    """runtime.finalize() guard: refuse it inside a callback or on a report thread."""
    if local.st.in_callback or any(
        rt.thread.ident == threading.get_ident() for rt in list(_threads.values())
    ):
        raise errors.CallbackContextError(
            "pyacl_rt.finalize() called on a host-callback (report) thread: it "
            "would reset the devices, which waits for the stream that is waiting for this "
            "callback (deadlock). Call it from another thread after the callback returned.",
            function="finalize",
            explanation="",
        )


def _after_fork_in_child() -> None:
    # The report threads do not exist in the child; forget them without joining.
    global _threads_lock, _subscribe_lock
    _threads_lock = threading.Lock()
    _subscribe_lock = threading.Lock()
    _threads.clear()
    _pending.clear()
    _default_subs.clear()


fork_hooks.add(_after_fork_in_child, _runtime.PRIORITY_STREAMS + 10)
_runtime.register_release_hook(_stop_threads, _runtime.PRIORITY_STREAMS + 10)
_runtime.finalize_guards.add(_refuse_finalize_here, _runtime.PRIORITY_FIRST)
