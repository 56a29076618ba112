"""asyncio and framework-neutral waits: ``await event`` / ``await stream``,
``Event.as_future`` / ``add_done_callback``, :mod:`pyacl_rt.aio` (pyacl_rt._completion,
the Event/Stream completion methods, pyacl_rt.aio)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import pyacl_rt as npu
from pyacl_rt import _callbacks, _completion, _reportcore, aio, errors
from pyacl_rt.mock import mock_control


class Gate:
    """Holds a stream on the device (a notify wait) until :meth:`open` (a record of
    that notify on another stream); occupies no host thread. ``timeout_s`` > 0 fails
    the held stream when it expires."""

    def __init__(self, stream: npu.Stream, timeout_s: int = 60) -> None:
        ll = npu.lowlevel
        self._opener = npu.Stream(stream.device_index)
        out = ll.ffi.new("uintptr_t *")
        ll.check(ll.lib.aclrtCreateNotify(out, 0), "aclrtCreateNotify")
        self._notify = int(out[0])
        rc = ll.lib.aclrtWaitAndResetNotify(self._notify, stream.handle, timeout_s)
        ll.check(rc, "aclrtWaitAndResetNotify")

    def open(self) -> None:
        ll = npu.lowlevel
        ll.check(ll.lib.aclrtRecordNotify(self._notify, self._opener.handle), "aclrtRecordNotify")
        with npu.sync_debug_mode("default"):  # the test's own plumbing
            self._opener.synchronize()
            self._opener.close()


@pytest.fixture
def s() -> Iterator[npu.Stream]:
    npu.set_device(0)
    st = npu.Stream()
    yield st
    st.close()


def _pending() -> tuple[int, int, int, int]:
    """(device futures, Python callbacks, awaits, armed C records) still pending."""
    return (
        _completion.pending_futures(),
        _callbacks.pending_count(),
        _completion.pending_awaits(),
        _reportcore.stats()[1],
    )


def _settled() -> None:
    """Wait (bounded) until no completion is pending anywhere."""
    deadline = time.monotonic() + 10
    while any(_pending()) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert _pending() == (0, 0, 0, 0)


# --------------------------------------------------------------- awaiting
def test_await_event_completes_when_the_device_passes_it(s: npu.Stream) -> None:
    async def main() -> list[str]:
        out: list[str] = []
        gate = Gate(s)
        ev = npu.Event()
        ev.record(s)
        task = asyncio.ensure_future(ev)
        await asyncio.sleep(0.05)
        out.append(f"done before open: {task.done()}")
        gate.open()
        await task
        out.append(f"query after: {ev.query()}")
        return out

    assert asyncio.run(main()) == ["done before open: False", "query after: True"]
    _settled()


def test_await_stream_waits_for_all_work_submitted_so_far(s: npu.Stream) -> None:
    async def main() -> None:
        gate = Gate(s)
        task = asyncio.ensure_future(_await(s))
        await asyncio.sleep(0.05)
        assert not task.done()
        gate.open()
        await task
        assert s.query()

    async def _await(x: Any) -> None:
        await x

    asyncio.run(main())
    _settled()


def test_await_idle_stream_and_unrecorded_event_return_at_once(s: npu.Stream) -> None:
    async def main() -> None:
        await s
        await npu.Event()
        s.synchronize()
        ev = s.record_event()
        s.synchronize()
        await ev  # already passed: no callback launched
        assert _callbacks.pending_count() == 0

    asyncio.run(main())


def test_an_event_on_a_held_stream_does_not_wait_for_other_streams(s: npu.Stream) -> None:
    other = npu.Stream()
    try:

        async def main() -> None:
            gate = Gate(s)
            ev_held = s.record_event()
            ev_free = other.record_event()
            await asyncio.wait_for(asyncio.ensure_future(_aw(ev_free)), 10)
            assert not ev_held.query()
            gate.open()
            await ev_held

        async def _aw(x: Any) -> None:
            await x

        asyncio.run(main())
    finally:
        other.close()
    _settled()


def test_waiters_of_one_record_share_one_future_and_one_callback(s: npu.Stream) -> None:
    gate = Gate(s)
    ev = s.record_event()
    before = _callbacks.pending_count()
    f1 = ev.as_future()
    f2 = ev.as_future()
    assert f1 is f2
    assert _callbacks.pending_count() == before + 1

    async def main() -> None:
        waits = [asyncio.ensure_future(_aw(ev)) for _ in range(100)]
        await asyncio.sleep(0.01)
        gate.open()
        await asyncio.gather(*waits)

    async def _aw(x: Any) -> None:
        await x

    asyncio.run(main())
    assert f1.done() and f1.result() is None
    ev.record(s)  # a new record: a new position, a new future
    assert ev.as_future() is not f1
    s.synchronize()
    _settled()


def test_many_events_in_order_complete(s: npu.Stream) -> None:
    async def main() -> int:
        gate = Gate(s)
        evs = [s.record_event() for _ in range(500)]
        gate.open()
        await asyncio.gather(*(_aw(e) for e in evs))
        return sum(e.query() for e in evs)

    async def _aw(x: Any) -> None:
        await x

    assert asyncio.run(main()) == 500
    _settled()


# --------------------------------------------------- framework-neutral primitive
def test_a_burst_of_completions_is_spread_over_loop_iterations() -> None:
    """A burst of completions wakes at most DRAIN_BATCH waiters per loop iteration, so
    timers and I/O due meanwhile do not queue behind all of them (before: all 100 woke
    in one iteration)."""

    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        futs = [_completion._future() for _ in range(100)]
        tasks = [asyncio.ensure_future(_completion.wait(f)) for f in futs]
        await asyncio.sleep(0)  # every wait is pending
        done_per_iteration: list[int] = []

        def probe() -> None:  # runs once per loop iteration
            done_per_iteration.append(sum(t.done() for t in tasks))
            if done_per_iteration[-1] < len(tasks):
                loop.call_soon(probe)

        for f in futs:  # all arrive before the loop runs the drain
            _completion.fire(f)
        loop.call_soon(probe)
        await asyncio.gather(*tasks)
        return done_per_iteration

    seen = asyncio.run(main())
    steps = [b - a for a, b in zip([0, *seen], seen, strict=False)]
    assert seen[-1] == 100
    assert max(steps) <= 16, steps  # _completion.DRAIN_BATCH


def test_as_future_is_a_concurrent_future(s: npu.Stream) -> None:
    gate = Gate(s)
    fut = s.as_future()
    assert isinstance(fut, concurrent.futures.Future)
    assert not fut.done()
    gate.open()
    assert fut.result(timeout=10) is None
    assert s.as_future().done()  # idle stream: done at once
    _settled()


def test_add_done_callback_runs_once_on_the_report_thread(s: npu.Stream) -> None:
    gate = Gate(s)
    ev = s.record_event()
    seen: list[tuple[Any, str]] = []
    done = threading.Event()

    def cb(e: npu.Event) -> None:
        seen.append((e, threading.current_thread().name))
        done.set()

    ev.add_done_callback(cb)
    gate.open()
    assert done.wait(10)
    assert seen == [(ev, "pyacl_rt-callbacks-npu0")]
    # already complete: runs at once on the calling thread
    ev.add_done_callback(cb)
    assert seen[-1] == (ev, threading.current_thread().name)
    _settled()


def test_trio_style_adaptation_through_add_done_callback(s: npu.Stream) -> None:
    """How another framework adapts it: hand the news to its loop thread-safely."""
    trio = pytest.importorskip("trio")

    async def wait_event(ev: npu.Event) -> None:
        done = trio.Event()
        token = trio.lowlevel.current_trio_token()
        ev.add_done_callback(lambda _e: token.run_sync_soon(done.set))
        await done.wait()

    async def main() -> bool:
        gate = Gate(s)
        ev = s.record_event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_event, ev)
            await trio.sleep(0.02)
            gate.open()
        return ev.query()

    assert trio.run(main) is True
    _settled()


# ------------------------------------------------------------- cancellation
def test_cancelled_await_leaves_device_work_alone_and_leaks_nothing(s: npu.Stream) -> None:
    host = bytearray(b"x" * 4096)
    buf = npu.DeviceBuffer(4096)
    buf.copy_from_host(bytes(4096))
    refs: list[weakref.ref[Any]] = []

    async def main() -> None:
        gate = Gate(s)
        task = asyncio.ensure_future(aio.copy_to_host(buf, host, stream=s))
        refs.append(weakref.ref(task))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.open()

    async def _aw(x: Any) -> None:
        await x

    asyncio.run(main())
    s.synchronize()
    assert host == b"x" * 4096  # the wait was cancelled before the staged result landed
    _settled()
    gc.collect()
    assert refs[0]() is None  # the relay kept no reference to the task
    buf.close()


def test_wait_for_timeout_cancels_only_the_wait(s: npu.Stream) -> None:
    async def main() -> None:
        gate = Gate(s)
        ev = s.record_event()
        with pytest.raises(errors.SyncTimeoutError, match="device work goes on"):
            await aio.synchronize(ev, timeout=20)
        assert not ev.query()
        gate.open()
        await aio.synchronize(ev, timeout=10_000)

    asyncio.run(main())
    _settled()


def test_loop_closed_while_waits_are_pending_gets_no_callbacks(
    s: npu.Stream, caplog: pytest.LogCaptureFixture
) -> None:
    errors_seen: list[object] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: errors_seen.append(args)
    try:
        gate = Gate(s)
        ev = s.record_event()
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(lambda _l, ctx: errors_seen.append(ctx))

        tasks: list[asyncio.Future[None]] = []

        async def waiters() -> None:
            tasks.extend(asyncio.ensure_future(_aw(ev)) for _ in range(10))
            tasks.append(asyncio.ensure_future(_aw(s)))
            await asyncio.sleep(0.02)

        async def _aw(x: Any) -> None:
            await x

        with caplog.at_level(logging.DEBUG):
            loop.run_until_complete(waiters())
            loop.close()  # waits still pending (their tasks die with the loop)
            gate.open()
            ev.synchronize()
            s.synchronize()
            _settled()
        assert errors_seen == []
        assert "Event loop is closed" not in caplog.text
    finally:
        threading.excepthook = old_hook


# --------------------------------------------------------------- sync debug
def test_code_that_only_awaits_passes_sync_debug_error(s: npu.Stream) -> None:
    buf = npu.DeviceBuffer(64)

    async def main() -> bytes:
        with npu.sync_debug_mode("error"):
            gate = Gate(s)
            ev = s.record_event()
            waiting = asyncio.ensure_future(_aw(ev))
            await asyncio.sleep(0.01)
            gate.open()
            await waiting
            await aio.copy_from_host(buf, bytes(range(64)), stream=s)
            await s
            await aio.synchronize(s, timeout=10_000)
            out = await aio.copy_to_host(buf, stream=s)
            dst = npu.DeviceBuffer(64)
            await aio.copy(dst, buf, stream=s)
            back = await aio.copy_to_host(dst, bytearray(64), stream=s)
            assert back == out
            dst.close()
            return bytes(out)

    async def _aw(x: Any) -> None:
        await x

    assert asyncio.run(main()) == bytes(range(64))
    buf.close()
    _settled()


def test_aio_on_the_current_stream_by_default() -> None:
    npu.set_device(0)
    buf = npu.DeviceBuffer(16)

    async def main() -> bytes:
        with npu.sync_debug_mode("error"):
            await aio.copy_from_host(buf, b"0123456789abcdef")
            await aio.synchronize()
            return bytes(await aio.copy_to_host(buf, offset=10))

    assert asyncio.run(main()) == b"abcdef"
    buf.close()


# ------------------------------------------------------------------- errors
def test_await_on_a_lost_device_raises_the_mapped_error() -> None:
    mc = mock_control()
    npu.set_device(5)
    st = npu.Stream(5)
    ev = st.record_event()
    st.synchronize()
    ev.record(st)

    async def main() -> None:
        with pytest.raises(errors.AclDeviceLostError):
            await st
        with pytest.raises(errors.AclDeviceLostError):
            await ev

    mc.set_device_lost(5, 507010)
    try:
        asyncio.run(main())
    finally:
        mc.set_device_lost(5, 0)
    st.synchronize()
    st.close()
    npu.set_device(0)


@pytest.mark.parametrize("mode", ["continue", "stop"])
def test_await_on_a_failed_stream_raises_its_mapped_error(s: npu.Stream, mode: str) -> None:
    ctx = None
    if mode == "stop":  # ACL_STOP_ON_FAILURE: later tasks are discarded, none may hang
        # STOP applies to every stream of the context (acl_abi.md 5.4): on a context of
        # its own, so that it ends with this test (on the primary context it outlived
        # the test and failed the next test's raw streams).
        ctx = npu.Context(0)
        with ctx:
            s = npu.Stream()
        rc = npu.lowlevel.lib.aclrtSetStreamFailureMode(s.handle, 1)
        npu.lowlevel.check(rc, "aclrtSetStreamFailureMode")
    Gate(s, timeout_s=1)  # never opened: the notify wait fails the stream after 1 s
    ev = s.record_event()

    async def main() -> None:
        await asyncio.wait_for(_aw(ev), 30)  # as ev.synchronize(): the event is passed
        with pytest.raises(errors.AclError, match="107019"):
            await asyncio.wait_for(_aw(s), 30)

    async def _aw(x: Any) -> None:
        await x

    asyncio.run(main())
    assert ev.query()
    if ctx is not None:
        ev.close()
        s.close()
        ctx.close()


def test_closed_event_and_bad_arguments() -> None:
    ev = npu.Event()
    ev.close()
    with pytest.raises(errors.ObjectClosedError):
        ev.as_future()

    async def main() -> None:
        with pytest.raises(TypeError, match="target"):
            await aio.synchronize(5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="timeout"):
            await aio.synchronize(None, timeout="1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="src"):
            await aio.copy_to_host(b"x")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="dst"):
            await aio.copy_from_host(b"x", b"y")  # type: ignore[arg-type]
        buf = npu.DeviceBuffer(8)
        with pytest.raises(ValueError, match="offset"):
            await aio.copy_to_host(buf, offset=9)
        with pytest.raises(TypeError, match="src"):
            await aio.copy(buf, b"12345678")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="stream"):
            await aio.copy(buf, npu.HostBuffer(8), stream=3)  # type: ignore[arg-type]
        buf.close()

    asyncio.run(main())
    with pytest.raises(TypeError, match="fn"):
        npu.Event().add_done_callback(5)  # type: ignore[arg-type]


def test_context_close_ends_pending_waits() -> None:
    ctx = npu.Context(0)
    with ctx:
        st = npu.Stream()
    hold = threading.Event()
    st.launch_host_func(hold.wait, 30.0)
    fut = st.record_event().as_future()
    timer = threading.Timer(0.2, hold.set)
    timer.start()
    ctx.close()  # waits for the held stream, then tears the context down
    with contextlib.suppress(errors.ObjectClosedError):
        fut.result(timeout=10)
    timer.join()
    npu.set_device(0)
    _settled()


def test_finalize_with_pending_waits_ends_them(run_python: Any) -> None:
    code = """
        import asyncio, threading, time
        import pyacl_rt as npu
        s = npu.Stream()
        gate = threading.Event()
        s.launch_host_func(gate.wait, 30.0)
        ev = s.record_event()
        fut = ev.as_future()
        threading.Timer(0.2, gate.set).start()
        npu.finalize()
        try:
            fut.result(timeout=10)
            print("completed")
        except npu.errors.RuntimeFinalizedError:
            print("failed: finalized")
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in ("completed", "failed: finalized")


def test_an_event_does_not_keep_its_stream_alive() -> None:
    npu.set_device(0)
    st = npu.Stream()
    ev = st.record_event()
    ref = weakref.ref(st)
    st.synchronize()
    del st
    gc.collect()
    assert ref() is None  # destroyed (with its companion, if any)

    async def main() -> None:
        await ev  # passed: returns at once

    asyncio.run(main())


def test_the_companion_stream_is_closed_with_its_stream() -> None:
    npu.set_device(0)
    st = npu.Stream()
    gate = Gate(st)
    fut = st.record_event().as_future()
    gate.open()
    fut.result(timeout=10)
    before = mock_control().stat("streams", 0)
    st.close()
    assert mock_control().stat("streams", 0) == before - 2  # the stream and its companion
    _settled()


# ------------------------------------------------- completions without the GIL
def _device_sleep(stream: npu.Stream, us: int) -> None:
    """``us`` microseconds of device-side delay: libc usleep as a host func on the
    stream's own worker (no Python, no GIL)."""
    import cffi

    libc_ffi = cffi.FFI()
    libc_ffi.cdef("int usleep(unsigned int usec);")
    libc = libc_ffi.dlopen(None)
    ll = npu.lowlevel
    fn = ll.ffi.cast(
        "aclrtHostFunc", int(libc_ffi.cast("uintptr_t", libc_ffi.addressof(libc, "usleep")))
    )
    ll.check(ll.lib.aclrtLaunchHostFunc(stream.handle, fn, us), "aclrtLaunchHostFunc")


def _live_inboxes() -> int:
    """Inboxes whose C core (and eventfd) is still open."""
    return _reportcore.stats()[0]


def test_awaits_complete_while_the_loop_is_busy_at_the_default_switch_interval(
    s: npu.Stream,
) -> None:
    """A loop whose task runs Python in chunks shorter than the GIL switch interval
    (5 ms) between yields starves other Python threads; an await's completion needs
    none (before: it went through Python on the report thread and never arrived while
    the loop was busy - this test hung until wait_for gave up)."""
    old = sys.getswitchinterval()

    async def main() -> int:
        stop = False

        async def busy() -> None:
            while not stop:
                end = time.perf_counter() + 0.002
                while time.perf_counter() < end:
                    pass
                await asyncio.sleep(0)

        task = asyncio.ensure_future(busy())
        done = 0
        try:
            for _ in range(5):
                _device_sleep(s, 1000)
                ev = s.record_event()
                await asyncio.wait_for(_aw(ev), 20)  # generous: a regression fails, not hangs
                await asyncio.wait_for(_aw(s), 20)
                done += 1
        finally:
            stop = True
            await task
        return done

    async def _aw(x: Any) -> None:
        await x

    sys.setswitchinterval(0.005)
    try:
        assert asyncio.run(main()) == 5
    finally:
        sys.setswitchinterval(old)
    _settled()


def test_an_await_completion_reaches_the_inbox_while_the_gil_is_held(s: npu.Stream) -> None:
    """The loop thread holds the GIL (a spin at a switch interval of 1000 s: no other
    Python thread runs meanwhile) while the device passes an awaited point: the
    completion still reaches the loop's inbox (token queued, eventfd signalled), because
    that path needs no GIL. Before, the report thread had to run Python first: nothing
    arrived until the GIL was let go."""
    old = sys.getswitchinterval()

    async def main() -> tuple[int, int, int, bool]:
        _device_sleep(s, 1000)
        await asyncio.wait_for(_aw(s.record_event()), 20)  # the report thread is in C now
        await asyncio.sleep(0.02)
        _device_sleep(s, 5000)
        ev = s.record_event()
        task = asyncio.ensure_future(_aw(ev))
        await asyncio.sleep(0)  # armed: a C callback waits on the companion stream
        box = _completion._inboxes[asyncio.get_running_loop()]
        sys.setswitchinterval(1000.0)
        try:
            deadline = time.perf_counter() + 10
            while box.core.stats()[2] == 0 and time.perf_counter() < deadline:  # type: ignore[index]
                pass  # holds the GIL: no bytecode boundary lets another thread in
            got = box.core.stats()
        finally:
            sys.setswitchinterval(old)
        await asyncio.wait_for(task, 20)
        assert got is not None
        return got

    async def _aw(x: Any) -> None:
        await x

    _refs, armed, queued, signalled = asyncio.run(main())
    assert (armed, queued, signalled) == (0, 1, True)
    _settled()


def test_python_callbacks_run_on_the_report_thread_and_awaits_need_none(
    s: npu.Stream,
) -> None:
    """A Python host callback and a device future's callback run on the report thread
    (its C loop comes back to Python for them); await completions are C host functions
    on the await companion, which no report thread serves."""
    ran: list[int] = []

    async def main() -> None:
        gate = Gate(s)
        s.launch_host_func(lambda: ran.append(threading.get_ident()))
        ev = s.record_event()
        fut = ev.as_future()  # the framework-neutral path keeps its Python callback
        waits = [asyncio.ensure_future(_aw(ev)) for _ in range(3)]
        await asyncio.sleep(0.01)
        gate.open()
        await asyncio.wait_for(asyncio.gather(*waits), 20)
        assert fut.result(timeout=20) is None

    async def _aw(x: Any) -> None:
        await x

    asyncio.run(main())
    s.synchronize()
    assert ran == [_callbacks.report_threads()[0].ident]
    side, waiter = s.stream_state.side, s.stream_state.waiter
    assert side is not None and side.stream_state.sub is not None  # futures: callbacks
    assert waiter is not None and waiter.stream_state.sub is None  # awaits: host funcs
    _settled()


def test_awaits_complete_through_host_functions_without_a_report_thread(
    s: npu.Stream,
) -> None:
    """``await`` launches ``aclrtLaunchHostFunc`` of the C completion on the recording
    stream's await companion (one stream per recording stream, never subscribed): no
    report thread is started for it and no Python runs until the loop wakes."""
    from pyacl_rt import _event

    calls: list[tuple[int, int, int, int]] = []
    real = _event._fast_wait_then_host_func

    def spy(stream: int, event: int, fn: int, arg: int) -> None:
        calls.append((stream, event, fn, arg))
        real(stream, event, fn, arg)

    async def main() -> None:
        gate = Gate(s)
        ev = s.record_event()
        task = asyncio.ensure_future(_aw(ev))
        await asyncio.sleep(0.01)
        assert not task.done()
        gate.open()
        await asyncio.wait_for(task, 20)
        gate = Gate(s)
        task = asyncio.ensure_future(_aw(s))  # a marker event of s: the same companion
        await asyncio.sleep(0.01)
        gate.open()
        await asyncio.wait_for(task, 20)

    async def _aw(x: Any) -> None:
        await x

    _event._fast_wait_then_host_func = spy
    try:
        asyncio.run(main())
    finally:
        _event._fast_wait_then_host_func = real
    waiter = s.stream_state.waiter
    assert waiter is not None and waiter.stream_state.sub is None
    assert [c[0] for c in calls] == [waiter.handle] * 2
    assert {c[2] for c in calls} == {_reportcore.callback_address()}
    assert s.stream_state.side is None  # no future asked for: no callback companion
    _settled()
    before = mock_control().stat("streams", 0)
    s.close()
    assert mock_control().stat("streams", 0) == before - 2  # the stream and its companion


def test_an_await_resumes_inside_the_drain_in_its_own_context(s: npu.Stream) -> None:
    """The drain that completes an await runs the awaiting task's step at once (not one
    loop iteration later), in the task's context; before, the task resumed after the
    drain had returned."""
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    draining: list[bool] = [False]
    real = _completion.Inbox.drain

    def drain(self: _completion.Inbox) -> None:
        draining[0] = True
        try:
            real(self)
        finally:
            draining[0] = False

    async def main() -> tuple[bool, str, bool]:
        gate = Gate(s)
        ev = s.record_event()

        async def waiting() -> tuple[bool, str, bool]:
            var.set("mine")
            me = asyncio.current_task()
            await ev
            return draining[0], var.get(), asyncio.current_task() is me

        task = asyncio.ensure_future(waiting())
        await asyncio.sleep(0.01)
        gate.open()
        return await asyncio.wait_for(task, 20)

    _completion.Inbox.drain = drain  # type: ignore[method-assign]
    try:
        assert asyncio.run(main()) == (True, "mine", True)
    finally:
        _completion.Inbox.drain = real  # type: ignore[method-assign]
    _settled()


def test_waiter_completes_like_a_future_every_other_way() -> None:
    """Set, failed, cancelled, or given more callbacks: a Waiter schedules its task's
    wake-up as a plain future does."""

    async def main() -> list[object]:
        loop = asyncio.get_running_loop()
        cls = _completion._Waiter or _completion._waiter_class()
        out: list[object] = []

        async def wait(fut: asyncio.Future[None]) -> None:
            try:
                out.append(await fut)
            except BaseException as exc:
                out.append(type(exc).__name__)

        for how in ("result", "exception", "cancel"):
            fut = cls(loop=loop)
            task = asyncio.ensure_future(wait(fut))
            await asyncio.sleep(0)
            if how == "result":
                fut.set_result(None)
            elif how == "exception":
                fut.set_exception(ValueError("x"))
            else:
                assert fut.cancel()
                assert not fut.cancel()
            await task
        fut = cls(loop=loop)
        seen: list[str] = []
        fut.add_done_callback(lambda f: seen.append("a"))
        fut.add_done_callback(lambda f: seen.append("b"))

        def cb(_f: object) -> None:
            seen.append("c")

        fut.add_done_callback(cb)
        assert fut.remove_done_callback(cb) == 1
        fut.resume()  # the kept callback ("a") runs now, the others as usual
        assert seen == ["a"]
        await asyncio.sleep(0)
        fut.add_done_callback(lambda f: seen.append("d"))  # done: scheduled
        await asyncio.sleep(0)
        out.append("".join(seen))
        return out

    assert asyncio.run(main()) == [None, "ValueError", "CancelledError", "abd"]


def test_a_task_interrupted_while_resumed_leaves_the_other_awaits_woken(
    s: npu.Stream,
) -> None:
    """Two awaits of one record: the first task's step runs inside the drain and raises
    KeyboardInterrupt (which leaves the loop); the second await was woken before, so
    running the loop again completes it."""

    async def first(ev: npu.Event) -> None:
        await ev
        raise KeyboardInterrupt

    async def second(ev: npu.Event) -> str:
        await ev
        return "woken"

    loop = asyncio.new_event_loop()
    try:
        gate = Gate(s)
        ev = s.record_event()
        a = loop.create_task(first(ev))
        b = loop.create_task(second(ev))
        loop.run_until_complete(asyncio.sleep(0.01))
        gate.open()
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(asyncio.wait_for(asyncio.shield(b), 20))
        assert a.done()
        assert loop.run_until_complete(asyncio.wait_for(b, 20)) == "woken"
    finally:
        loop.close()
    _settled()


def test_await_falls_back_to_report_callbacks_without_launch_host_func(
    s: npu.Stream,
) -> None:
    """A runtime without ``aclrtLaunchHostFunc`` (older CANN): the first await's
    FunctionNotFoundError switches awaits to C report callbacks on the (subscribed)
    callback companion, and the await still completes."""
    from pyacl_rt import _event

    real = _event._fast_wait_then_host_func

    def missing(*_args: int) -> None:
        raise errors.FunctionNotFoundError("aclrtLaunchHostFunc", "libascendcl.so")

    async def main() -> None:
        gate = Gate(s)
        ev = s.record_event()
        task = asyncio.ensure_future(_aw(ev))
        await asyncio.sleep(0.01)
        gate.open()
        await asyncio.wait_for(task, 20)
        await asyncio.wait_for(_aw(s), 20)

    async def _aw(x: Any) -> None:
        await x

    _event._fast_wait_then_host_func = missing
    try:
        asyncio.run(main())
        assert _event._host_funcs is False
    finally:
        _event._fast_wait_then_host_func = real
        _event._host_funcs = True
    side = s.stream_state.side
    assert side is not None and side.stream_state.sub is not None
    _settled()


def test_a_completion_keeps_the_loops_next_timer_on_time(s: npu.Stream) -> None:
    """asyncio's epoll rounds a timeout up to whole ms, so a wake-up by a completion
    would make the loop's next timer up to 1 ms late: after a drain the inbox arms its
    timerfd at that timer's deadline, and the timerfd's firing disarms it."""

    async def main() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        handle = loop.call_later(0.3, lambda: None)  # the only timer
        gate = Gate(s)
        ev = s.record_event()
        task = asyncio.ensure_future(_aw(ev))
        await asyncio.sleep(0)
        gate.open()  # synchronizes the opener: the device passes ev meanwhile
        await task
        box = _completion._inboxes[loop]
        armed_at = box.ontime.at
        assert box.ontime.fd >= 0
        while loop.time() < handle.when() + 0.05:
            await asyncio.sleep(0.05)
        return armed_at, handle.when(), box.ontime.at

    async def _aw(x: Any) -> None:
        await x

    armed_at, when, after = asyncio.run(main())
    assert armed_at == when  # the loop's next timer when the completion arrived
    assert after == 0.0  # the timerfd fired (and was disarmed) at that deadline
    _settled()


def test_on_time_leaves_loops_without_a_timer_heap_and_due_timers_alone() -> None:
    class Bare:  # a loop without BaseEventLoop's timer heap (uvloop, trio adapters)
        def time(self) -> float:
            return time.monotonic()

    ot = _completion.OnTime()
    ot.after_wake(Bare())  # type: ignore[arg-type]
    assert ot.fd == -1 and ot.at == 0.0

    async def main() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        loop.call_at(loop.time() - 1, lambda: None)  # due already: the loop runs it anyway
        ot.after_wake(loop)
        return ot.fd, ot.at

    assert asyncio.run(main()) == (-1, 0.0)
    ot.close()  # idempotent, never raises
    ot.close()


def test_timer_fd_expires_at_its_deadline_and_disarms() -> None:
    import select

    fd = _reportcore.timer_fd()
    try:
        _reportcore.timer_set(fd, time.monotonic() + 30)
        assert select.select([fd], [], [], 0)[0] == []  # not due yet
        _reportcore.timer_set(fd, time.monotonic() - 1)  # in the past: expires at once
        assert select.select([fd], [], [], 5)[0] == [fd]
        _reportcore.timer_set(fd, 0.0)  # disarm: the expiry is cleared too
        assert select.select([fd], [], [], 0)[0] == []
        with pytest.raises(ValueError, match="fd out of range"):
            _reportcore.timer_set(-1, 1.0)
        with pytest.raises(OverflowError, match="too large"):
            _reportcore.timer_set(fd, 1e300)
        with pytest.raises(TypeError, match="2 arguments"):
            _reportcore.timer_set(fd)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            _reportcore.timer_set(fd, "soon")  # type: ignore[arg-type]
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        _reportcore.timer_set(fd, 1.0)  # closed


def test_ten_thousand_concurrent_awaits(s: npu.Stream) -> None:
    streams = [npu.Stream() for _ in range(8)]

    async def main() -> int:
        gates = [Gate(st) for st in streams]
        events = [streams[i % 8].record_event() for i in range(10_000)]
        waits = [asyncio.ensure_future(_aw(ev)) for ev in events]
        await asyncio.sleep(0.01)
        assert _completion.pending_awaits() == 10_000
        box = _completion._inboxes[asyncio.get_running_loop()]
        grown = sys.getsizeof(box.waits)
        for g in gates:
            g.open()
        await asyncio.wait_for(asyncio.gather(*waits), 120)
        # the burst is over: the token dictionaries were rebuilt small (a dict keeps the
        # table of its largest size otherwise)
        assert box.peak < _completion.COMPACT_AT
        assert sys.getsizeof(box.waits) < grown // 8 and sys.getsizeof(box.armed) < grown // 8
        return sum(ev.query() for ev in events)

    async def _aw(x: Any) -> None:
        await x

    assert asyncio.run(main()) == 10_000
    for st in streams:
        st.synchronize()
        st.close()
    _settled()


def test_cancelled_awaits_leak_nothing_and_close_the_fd(s: npu.Stream) -> None:
    before = _live_inboxes()
    refs: list[weakref.ref[Any]] = []
    fds: list[int] = []

    async def main() -> None:
        gate = Gate(s)
        ev = s.record_event()
        tasks = [asyncio.ensure_future(_aw(ev)) for _ in range(50)]
        tasks.append(asyncio.ensure_future(_aw(s)))
        refs.extend(weakref.ref(t) for t in tasks)
        await asyncio.sleep(0.01)
        box = _completion._inboxes[asyncio.get_running_loop()]
        fds.append(box.fd)
        refs_now, armed, _queued, _sig = box.core.stats()  # type: ignore[misc]
        assert armed == 2 and refs_now == 3  # one record per point + the owner
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert all(t.cancelled() for t in tasks)
        assert not box.waits  # no waiter kept
        gate.open()
        await asyncio.wait_for(_aw(s), 20)  # the device work itself went on

    async def _aw(x: Any) -> None:
        await x

    asyncio.run(main())
    _settled()
    gc.collect()
    assert all(r() is None for r in refs)  # nothing kept the tasks alive
    assert _live_inboxes() == before  # the loop is gone: its inbox and fd too
    with pytest.raises(OSError):
        os.fstat(fds[0])


def test_loop_closed_with_awaits_pending_closes_the_fd_after_the_device(
    s: npu.Stream,
) -> None:
    """A closed loop gets no callback; its inbox is detached and its eventfd closed in
    C once the device passed the points its records wait for (never before: the
    runtime still holds them)."""
    before = _live_inboxes()
    gate = Gate(s)
    ev = s.record_event()
    loop = asyncio.new_event_loop()
    seen: list[object] = []
    loop.set_exception_handler(lambda _l, ctx: seen.append(ctx))

    tasks: list[asyncio.Future[None]] = []

    async def start() -> int:
        tasks.extend(asyncio.ensure_future(_aw(ev)) for _ in range(5))
        await asyncio.sleep(0.01)
        return _completion._inboxes[asyncio.get_running_loop()].fd

    async def _aw(x: Any) -> None:
        await x

    fd = loop.run_until_complete(start())
    loop.close()
    assert _completion.pending_awaits() == 0  # detached: nothing waits in Python
    assert _reportcore.stats()[1] == 1  # the runtime still holds the armed record
    os.fstat(fd)  # so the fd is still open
    gate.open()
    ev.synchronize()
    s.synchronize()
    _settled()
    with pytest.raises(OSError):
        os.fstat(fd)  # closed by the last record
    assert seen == []  # nothing reached the dead loop
    assert not any(t.done() for t in tasks)
    tasks.clear()  # (asyncio itself reports its pending tasks destroyed)
    del loop
    gc.collect()
    assert _live_inboxes() == before


def test_context_close_fails_pending_awaits() -> None:
    ctx = npu.Context(0)
    with ctx:
        st = npu.Stream()
    hold = threading.Event()
    st.launch_host_func(hold.wait, 30.0)
    ev = st.record_event()

    async def main() -> str:
        task = asyncio.ensure_future(_aw(ev))
        await asyncio.sleep(0.01)
        assert _completion.pending_awaits() == 1
        timer = threading.Timer(0.2, hold.set)
        timer.start()
        ctx.close()  # waits for the held stream, then tears the context down
        timer.join()
        try:
            await asyncio.wait_for(task, 20)
            return "completed"
        except errors.ObjectClosedError:
            return "failed: closed"

    async def _aw(x: Any) -> None:
        await x

    assert asyncio.run(main()) in ("completed", "failed: closed")
    npu.set_device(0)
    _settled()


def test_finalize_with_pending_awaits_fails_them(run_python: Any) -> None:
    code = """
        import asyncio, threading
        import pyacl_rt as npu
        from pyacl_rt import _completion, _reportcore

        async def main():
            s = npu.Stream()
            gate = threading.Event()
            s.launch_host_func(gate.wait, 30.0)
            ev = s.record_event()
            task = asyncio.ensure_future(aw(ev))
            await asyncio.sleep(0.01)
            threading.Timer(0.2, gate.set).start()
            npu.finalize()
            try:
                await asyncio.wait_for(task, 20)
                print("completed")
            except npu.errors.RuntimeFinalizedError:
                print("failed: finalized")
            print("pending", _completion.pending_awaits(), _reportcore.stats()[1:])

        async def aw(x):
            await x

        asyncio.run(main())
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.strip().splitlines()
    assert first in ("completed", "failed: finalized")
    assert second == "pending 0 (0, 0)"  # no armed record, no orphan left


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_drops_the_inherited_inboxes(s: npu.Stream) -> None:
    gate = Gate(s)
    ev = s.record_event()
    loop = asyncio.new_event_loop()

    tasks: list[asyncio.Future[None]] = []

    async def start() -> None:
        tasks.append(asyncio.ensure_future(_aw(ev)))
        await asyncio.sleep(0.01)

    async def _aw(x: Any) -> None:
        await x

    loop.run_until_complete(start())
    fd = _completion._inboxes[loop].fd
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            try:
                os.fstat(fd)
                fd_open = True
            except OSError:
                fd_open = False
            msg = f"{_reportcore.stats()} {_completion.pending_awaits()} {fd_open}"
        except BaseException as exc:
            msg = f"error {exc!r}"
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = f.read()
    os.waitpid(pid, 0)
    assert got == "(0, 0, 0) 0 False"
    gate.open()
    loop.run_until_complete(asyncio.wait_for(_aw(ev), 20))  # the parent is unaffected
    loop.close()
    s.synchronize()
    _settled()
