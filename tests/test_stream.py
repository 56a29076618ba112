"""Streams: lifetime, default/current streams, guards, ordering, pool, keep-alive."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

import pytest

from pyacl_rt import _device as D
from pyacl_rt import _state, errors
from pyacl_rt import _stream as S
from pyacl_rt import _watch as W
from pyacl_rt._event import Event
from pyacl_rt.mock import mock_control


def streams_on(device: int) -> int:
    return mock_control().stat("streams", device)


# --------------------------------------------------------------------- tests
def test_create_query_synchronize_close() -> None:
    base = streams_on(1) if 1 in D.primaries else None
    s = S.Stream(1)
    if base is not None:
        assert streams_on(1) == base + 1
    assert isinstance(s.handle, int) and s.handle != 0
    assert s.npu_stream == s.handle
    assert s.device == D.Device(1) and s.device_index == 1
    assert s.kind == "owned" and not s.closed
    assert s.query() is True
    s.synchronize()
    s.synchronize(timeout=1000)
    s.synchronize(timeout=0.5)
    assert "owned" in repr(s)
    s.close()
    assert s.closed and "closed" in repr(s)
    s.close()  # idempotent
    if base is not None:
        assert streams_on(1) == base


def test_use_after_close_is_refused() -> None:
    s = S.Stream(0)
    s.close()
    for call in (s.query, s.synchronize, lambda: Event().record(s), lambda: S.set_stream(s)):
        with pytest.raises(errors.ObjectClosedError):
            call()
    with pytest.raises(errors.ObjectClosedError):
        s.launch_host_func(print)


def test_gc_destroys_stream() -> None:
    D.set_device(2)
    base = streams_on(2)
    s = S.Stream()
    assert streams_on(2) == base + 1
    del s
    gc.collect()
    assert streams_on(2) == base


def _acl_stream_priority(s: S.Stream) -> int:
    """The priority the runtime reports for ``s`` (aclrtStreamGetPriority)."""
    from pyacl_rt import lowlevel

    s.ensure_current()
    out = lowlevel.scratch().u32
    lowlevel.check(lowlevel.lib.aclrtStreamGetPriority(s.handle, out), "aclrtStreamGetPriority")
    return int(out[0])


def test_priority_and_flags() -> None:
    s = S.Stream(0, priority=-1, flags=0x1 | 0x2)
    assert s.priority == -1 and s.flags == 3
    s.close()
    s = S.Stream(0, priority=3)  # above the least priority: clamped to it
    assert s.priority == 0
    s.close()
    with pytest.raises(TypeError):
        S.Stream(0, priority=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="flags must be an int"):
        S.Stream(0, flags=1.0)  # type: ignore[arg-type]
    # uint32 in C: out-of-range values are refused before cffi (was a bare OverflowError)
    for bad in (-1, 2**32, 2**64):
        with pytest.raises(ValueError, match=r"flags must be an unsigned 32-bit value"):
            S.Stream(0, flags=bad)
    with pytest.raises(errors.InvalidDeviceError):
        S.Stream(42)


@pytest.mark.parametrize("bad", [0, -5, float("nan")])
def test_bad_timeouts(bad: float) -> None:
    s = S.Stream(0)
    with pytest.raises(ValueError):
        s.synchronize(timeout=bad)
    with pytest.raises(TypeError):
        s.synchronize(timeout="10")  # type: ignore[arg-type]
    s.close()


def test_synchronize_timeout_raises_timeout_error(gate: Any) -> None:
    s = S.Stream(1)
    gate.block(s)
    assert s.query() is False
    with pytest.raises(errors.SyncTimeoutError) as info:
        s.synchronize(timeout=20)
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, errors.AclError)
    assert info.value.code == 507046
    gate.release.set()
    s.synchronize()
    assert s.query() is True
    s.close()


def test_timeout_longer_than_a_wait_slice_is_kept(gate: Any) -> None:
    """Waits run in slices (so that signals are handled); a user timeout spanning
    several slices still expires as one timeout: SyncTimeoutError, not before the
    timeout (a correctness bound: never early), naming the total in a note. The
    runtime's error text of the intermediate slices is consumed."""
    from pyacl_rt import lowlevel

    fast = lowlevel.fast
    prev = fast._wait_slice_ms(10)
    s = S.Stream(1)
    gate.block(s)
    e = Event()
    e.record(s)
    try:
        for wait, code in ((s.synchronize, 507046), (e.synchronize, 507047)):
            t0 = time.monotonic()
            with pytest.raises(errors.SyncTimeoutError) as info:
                wait(timeout=60)
            assert time.monotonic() - t0 >= 0.06
            assert info.value.code == code
            assert any("60 ms in total" in n for n in getattr(info.value, "__notes__", []))
        assert lowlevel.recent_error_message() is None
    finally:
        fast._wait_slice_ms(prev)
        gate.release.set()
    s.synchronize()
    e.close()
    s.close()


# One child per blocking call: a host callback holds the stream for 5 s; the child
# prints "waiting" right before the call, the test sends SIGINT; KeyboardInterrupt must
# arrive well before the callback ends (< 4 s: a correctness bound, not a benchmark),
# and the objects must still work afterwards.
_CTRL_C_CHILD = """
import sys, time
import pyacl_rt as npu

what = sys.argv[1]
ctx = npu.Context(0)
with ctx if what.startswith("context") else npu.device(0):
    s = npu.Stream()
    s.launch_host_func(time.sleep, 8.0)  # outlasts the start of all 7 children on busy cores
e = npu.Event()
e.record(s)
buf = npu.DeviceBuffer(64)
npu.memset(buf, 7, stream=s, non_blocking=True)  # runs after the callback
out = bytearray(64)
wait = {
    "stream": s.synchronize,
    "event": e.synchronize,
    "device": npu.synchronize,
    "context": ctx.synchronize,
    "copy": lambda: npu.copy(out, buf, stream=s),  # synchronous, pageable destination
    "close": s.close,
    "context_close": ctx.close,
}[what]
print("waiting", flush=True)
t0 = time.monotonic()
try:
    wait()
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted early:", time.monotonic() - t0 < 4.0, flush=True)
print("usable:", not s.closed and not ctx.closed, flush=True)
wait()  # the same call again completes
# the event completes before the memset queued after its record: ask what was waited for
finished = s.closed if what.endswith("close") else e.query() if what == "event" else s.query()
if not s.closed:
    s.synchronize()  # the event case waited for the record only, not the memset after it
npu.copy(out, buf)
print("done:", finished, out == bytearray([7]) * 64, flush=True)
"""


def test_ctrl_c_interrupts_blocking_waits(clean_env: Any) -> None:
    """Ctrl-C during a blocking wait (stream / event / device / context synchronize, a
    synchronous copy, closing a busy stream or context) raises KeyboardInterrupt
    promptly, leaves the work queued and the objects usable (issue 12: it arrived only
    when the wait ended)."""
    cases = ("stream", "event", "device", "context", "copy", "close", "context_close")
    env = clean_env(PYACL_RT_BACKEND="mock")
    children = {
        what: subprocess.Popen(
            [sys.executable, "-c", _CTRL_C_CHILD, what],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for what in cases
    }
    try:
        for what, child in children.items():
            assert child.stdout is not None
            line = child.stdout.readline()
            assert line == "waiting\n", (what, line, child.stderr.read() if child.stderr else "")
        time.sleep(0.5)  # inside the wait (any moment before 4 s would do)
        for child in children.values():
            child.send_signal(signal.SIGINT)
        results = {what: child.communicate(timeout=60) for what, child in children.items()}
    finally:
        for child in children.values():
            child.kill()
    for what, (out, err) in results.items():
        assert out.splitlines() == [
            "interrupted early: True",
            "usable: True",
            "done: True True",
        ], (what, out, err)
        assert children[what].returncode == 0, (what, err)


def test_raw_layer_timeouts_are_sync_timeout_errors(gate: Any) -> None:
    """lowlevel.check and the checked lowlevel.fast calls raise SyncTimeoutError
    themselves (errors.error_from_code), not only the Stream/Event methods."""
    from pyacl_rt import lowlevel

    s = S.Stream(1)
    gate.block(s)
    try:
        with pytest.raises(errors.SyncTimeoutError) as info:
            lowlevel.fast.synchronize_stream_with_timeout(s.handle, 5)
        assert info.value.code == 507046
        assert info.value.function == "aclrtSynchronizeStreamWithTimeout"
        rc = lowlevel.lib.aclrtSynchronizeStreamWithTimeout(s.handle, 5)
        with pytest.raises(TimeoutError) as info2:
            lowlevel.check(rc, "aclrtSynchronizeStreamWithTimeout")
        assert type(info2.value) is errors.SyncTimeoutError
        ev = Event()
        ev.record(s)
        with pytest.raises(errors.SyncTimeoutError) as info3:
            lowlevel.fast.synchronize_event_with_timeout(ev.handle, 5)
        assert info3.value.code == 507047
    finally:
        gate.release.set()
    s.synchronize()
    ev.close()
    s.close()


def test_default_stream() -> None:
    d = S.default_stream(1)
    assert d is S.default_stream(1) is S.default_stream("npu:1")
    assert d.handle == 0 and d.kind == "default"
    real = d.resolved_handle
    assert real != 0 and real != S.default_stream(2).resolved_handle
    assert S.Stream.from_handle(real, 1).query() is True
    owned = S.Stream(1)
    assert owned.resolved_handle == owned.handle
    owned.close()
    assert d.query() is True
    d.synchronize()
    d.close()  # not ours: a no-op
    assert not d.closed and d.query() is True
    assert d != S.default_stream(2)
    D.set_device(1)
    assert S.default_stream() is d


def test_current_stream_and_set_stream() -> None:
    D.set_device(0)
    assert S.current_stream() is S.default_stream(0)
    s = S.Stream(1)
    S.set_stream(s)
    assert S.current_stream() is s
    assert D.current_device() == 1  # set_stream selects the stream's device
    assert S.current_stream(0) is S.default_stream(0)
    with pytest.raises(TypeError):
        S.set_stream("s")  # type: ignore[arg-type]
    _state._local.st.streams.clear()
    s.close()


def test_current_stream_is_per_thread() -> None:
    s = S.Stream(0)
    S.set_stream(s)
    seen: list[Any] = []
    t = threading.Thread(target=lambda: seen.append(S.current_stream(0)))
    t.start()
    t.join()
    assert seen[0] is S.default_stream(0)
    assert S.current_stream(0) is s
    _state._local.st.streams.clear()
    s.close()


def test_stream_guard_restores_exactly_mixed_with_set_stream() -> None:
    D.set_device(0)
    a, b, c = S.Stream(0), S.Stream(0), S.Stream(1)
    S.set_stream(a)
    with S.stream(b) as got:
        assert got is b and S.current_stream() is b
        S.set_stream(c)  # other device: selects device 1 too
        assert D.current_device() == 1 and S.current_stream() is c
        with S.stream(a):
            assert D.current_device() == 0 and S.current_stream() is a
            S.set_stream(b)
        assert S.current_stream() is c and D.current_device() == 1
        S.set_stream(a)
    # Back to exactly what was current before the block, on both devices.
    assert D.current_device() == 0
    assert S.current_stream(0) is a
    assert S.current_stream(1) is S.default_stream(1)
    with S.stream(None) as none:
        assert none is None and S.current_stream() is a
    _state._local.st.streams.clear()
    for s in (a, b, c):
        s.close()


def test_stream_guard_on_fresh_thread_restores_nothing_selected() -> None:
    s = S.Stream(3)

    def body() -> tuple[int, bool, int, bool]:
        with s:
            inside = (D.current_device(), S.current_stream() is s)
        return _state._local.st.device, 3 in _state._local.st.streams, *inside  # type: ignore[return-value]

    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(body()))
    t.start()
    t.join()
    assert box == [(-1, False, 3, True)]
    s.close()


def test_with_stream_object() -> None:
    D.set_device(2)
    s = S.Stream(2)
    with s as same:
        assert same is s and S.current_stream() is s
        with S.Stream(2) as inner:
            assert S.current_stream() is inner
        assert S.current_stream() is s
    assert S.current_stream() is S.default_stream(2)
    assert not s.closed  # `with s:` selects, it does not close
    inner.close()
    s.close()


def test_wait_event_orders_streams(gate: Any) -> None:
    a, b = S.Stream(1), S.Stream(1)
    gate.block(a)
    ev = a.record_event()
    assert isinstance(ev, Event) and ev.query() is False
    b.wait_event(ev)
    marker = b.record_event()
    assert marker.query() is False  # b waits behind a's gate
    gate.release.set()
    b.synchronize()
    assert ev.query() and marker.query()
    ev.close()
    marker.close()
    a.close()
    b.close()


def test_wait_stream_orders_streams(gate: Any) -> None:
    a, b = S.Stream(2), S.Stream(2)
    gate.block(a)
    b.wait_stream(a)
    b.wait_stream(b)  # self: no-op
    done = b.record_event()
    assert done.query() is False
    gate.release.set()
    b.synchronize()
    assert done.query()
    with pytest.raises(TypeError):
        b.wait_stream(object())  # type: ignore[arg-type]
    done.close()
    a.close()
    b.close()


def test_wait_on_unrecorded_event_is_noop(gate: Any) -> None:
    """As in torch_npu: no event is created, nothing is queued on the stream, and work
    queued after it runs (an unrecorded event never completes as an ACL event)."""
    s = S.Stream(0)
    ev = Event()
    events = mock_control().stat("events", 0)
    s.wait_event(ev)
    assert mock_control().stat("events", 0) == events  # no aclrtCreateEvent
    assert s.query()  # nothing queued: the stream stays idle
    ran = threading.Event()
    s.launch_host_func(ran.set)  # work after the wait runs
    s.synchronize()
    assert ran.is_set() and ev.query()
    s.close()


def test_close_waits_for_pending_work(gate: Any) -> None:
    s = S.Stream(1)
    gate.block(s)
    closer = threading.Thread(target=s.close)
    closer.start()
    closer.join(0.2)
    gate.release.set()
    closer.join(60)
    assert not closer.is_alive() and s.closed


def test_priority_maps_torch_style_onto_the_acl_range() -> None:
    """0 = the device's least priority, each step below 0 one level higher (negative =
    higher), clamped to the range aclrtDeviceGetStreamPriorityRange reports (the mock:
    least 7, greatest 0, lower ACL numbers being higher priorities)."""
    from pyacl_rt import lowlevel

    D.ensure_device_current(0)
    i32 = lowlevel.scratch().i32
    lowlevel.check(
        lowlevel.lib.aclrtDeviceGetStreamPriorityRange(i32, i32 + 1),
        "aclrtDeviceGetStreamPriorityRange",
    )
    least, greatest = int(i32[0]), int(i32[1])
    assert (least, greatest) == (7, 0)
    assert S.Stream.priority_range(0) == (0, -7)
    cases = {0: 7, -1: 6, -3: 4, -7: 0, -8: 0, -1000: 0, 1: 7, 99: 7}
    for torch_prio, acl in cases.items():
        s = S.Stream(0, priority=torch_prio)
        assert s.acl_priority == acl, torch_prio
        assert _acl_stream_priority(s) == acl, torch_prio
        assert s.priority == max(min(torch_prio, 0), -7)
        s.close()
    hi, lo = S.Stream(0, priority=-2), S.Stream(0)
    assert _acl_stream_priority(hi) < _acl_stream_priority(lo)  # lower ACL = higher
    hi.close()
    lo.close()
    assert S.default_stream(0).acl_priority is None and S.default_stream(0).priority == 0


def test_priority_range_is_queried_once_per_device() -> None:
    mc = mock_control()
    S._priority_ranges.clear()
    D.ensure_device_current(1)
    mc.inject_fault("aclrtDeviceGetStreamPriorityRange", 107000, nth=2)
    try:
        a = S.Stream(1, priority=-1)  # first query: succeeds, cached
        b = S.Stream(1, priority=-1)  # the 2nd query would fail: not made
        assert mc.fault_hits("aclrtDeviceGetStreamPriorityRange") == 0
    finally:
        mc.clear_faults()
    assert a.acl_priority == b.acl_priority == 6
    a.close()
    b.close()


def test_priority_without_a_range_maps_to_zero() -> None:
    """A runtime that cannot report the range: every priority is ACL 0 (not cached)."""
    mc = mock_control()
    S._priority_ranges.clear()
    mc.inject_fault("aclrtDeviceGetStreamPriorityRange", 207000)
    try:
        s = S.Stream(2, priority=-3)
        assert s.acl_priority == 0 and s.priority == 0
        assert mc.fault_hits("aclrtDeviceGetStreamPriorityRange") == 1
    finally:
        mc.clear_faults()
    s.close()
    assert 2 not in S._priority_ranges
    t = S.Stream(2, priority=-3)
    assert t.acl_priority == 4
    t.close()


def test_pool_round_robin() -> None:
    first = S.stream_from_pool(1)
    seen = [first] + [S.stream_from_pool(1) for _ in range(S.STREAMS_PER_POOL - 1)]
    assert len({id(x) for x in seen}) == S.STREAMS_PER_POOL
    assert S.stream_from_pool(1) is first  # wrapped around
    high = S.stream_from_pool(1, priority=-1)
    assert high not in seen
    assert high.acl_priority == 0 and first.acl_priority == 7  # greatest / least
    assert first.kind == "pool"
    first.close()  # not the caller's to close
    assert not first.closed and first.query()
    D.set_device(1)
    assert S.stream_from_pool() is seen[1]
    assert S._drain_pools() == S.STREAMS_PER_POOL + 1
    assert first.closed


def test_from_handle_is_not_owned() -> None:
    owner = S.Stream(0)
    ext = S.Stream.from_handle(owner.handle, 0)
    assert ext.kind == "external" and ext == owner
    assert ext.query() is True
    ext.close()
    assert not ext.closed and owner.query()
    with pytest.raises(ValueError, match="handle"):
        S.Stream.from_handle(-1)
    owner.close()


def test_keep_alive_until_work_completes(gate: Any) -> None:
    class Payload:
        pass

    s = S.Stream(1)
    gate.block(s)
    obj = Payload()
    ref = weakref.ref(obj)
    s.keep_alive(obj)
    s.keep_alive((Payload(), Payload()))
    del obj
    gc.collect()
    assert ref() is not None  # the stream still needs it
    assert s._watch_pending() == 2
    gate.release.set()
    s.synchronize()
    assert s._watch_pending() == 0
    gc.collect()
    assert ref() is None


def test_keep_alive_polls_completed_entries() -> None:
    s = S.Stream(0)
    for _ in range(5):
        s.keep_alive(object())
    s.synchronize()
    assert s._watch_pending() == 0
    s.keep_alive(object())
    D.synchronize(0)  # a device synchronize releases too
    assert s._watch_pending() == 0
    s.close()


def test_idle_marker_events_are_bounded(gate: Any) -> None:
    """Issue 12: a burst of outstanding keep-alive entries left one idle marker event
    per entry for the life of the process (2000 short-lived threads: ~1200 events)."""
    W.markers.drop_all()
    base = mock_control().stat("events", 0)
    s = S.Stream(0)
    gate.block(s)
    n = W.MarkerPool.IDLE_MAX + 100
    for _ in range(n):
        s.keep_alive(object())  # all outstanding behind the gate: n markers
    assert mock_control().stat("events", 0) == base + n
    gate.release.set()
    s.synchronize()
    assert s._watch_pending() == 0
    assert len(W.markers._free[s.ctx_ref]) == W.MarkerPool.IDLE_MAX
    assert mock_control().stat("events", 0) == base + W.MarkerPool.IDLE_MAX
    s.close()


def test_equality_and_hash() -> None:
    a = S.Stream(0)
    b = S.Stream(0)
    assert a == a and a != b and hash(a) == hash(S.Stream.from_handle(a.handle, 0))
    assert (a == 1) is False
    a.close()
    b.close()


def test_stream_used_from_new_thread_without_set_device() -> None:
    s = S.Stream(4)
    out: list[Any] = []

    def work() -> None:
        e = Event()
        e.record(s)
        s.synchronize()
        out.append((e.query(), _state._local.st.device))
        e.close()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert out == [(True, -1)]
    s.close()


def test_finalize_with_live_objects(run_python: Any) -> None:
    code = """
        import threading
        import pyacl_rt._device as D, pyacl_rt._stream as S, pyacl_rt._event as E
        import pyacl_rt._context as C
        from pyacl_rt import _runtime as runtime, errors
        from pyacl_rt.mock import mock_control, REPORT_LAST_FINALIZE
        s = S.Stream(1); p = S.stream_from_pool(2); d = S.default_stream(3)
        e = E.Event(enable_timing=True); e.record(s)
        ctx = C.Context(4)
        with ctx:
            s4 = S.Stream(); e4 = E.Event(); e4.record(s4)
        hit = []
        s.launch_host_func(hit.append, 1)
        s.keep_alive(object())
        runtime.finalize()
        assert hit == [1], hit
        for obj in (s, p, d, e, ctx, s4, e4):
            obj.close()                      # no-op, never raises
        for call in (s.query, p.query, d.query, e.query, s4.synchronize, e4.synchronize,
                     ctx.make_current, lambda: e.record(s)):
            try:
                call()
            except errors.RuntimeFinalizedError:
                pass
            else:
                raise AssertionError(call)
        assert not any(t.name.startswith("pyacl_rt-callbacks") for t in threading.enumerate())
        report = mock_control().leak_report(REPORT_LAST_FINALIZE)
        print(report)
        assert "no leaks" in report.lower(), report
        del s, p, d, e, ctx, s4, e4
        import gc; gc.collect()
        print("OK")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


def test_interpreter_exit_with_live_objects(run_python: Any) -> None:
    code = """
        import pyacl_rt._stream as S, pyacl_rt._event as E
        s = S.Stream(1); e = E.Event(); e.record(s)
        s.launch_host_func(print, "callback ran")
        print("exiting")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "callback ran" in r.stdout
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("func", "code", "exc"),
    [
        ("aclrtCreateStreamWithConfig", 207008, errors.AclResourceError),
        ("aclrtStreamQuery", 507899, errors.AclDeviceLostError),
        # Stream.synchronize() waits in slices (interruptible): the WithTimeout call
        ("aclrtSynchronizeStreamWithTimeout", 507015, errors.AclDeviceLostError),
        ("aclrtStreamWaitEvent", 107000, errors.AclUsageError),
    ],
)
def test_runtime_failures_are_typed(func: str, code: int, exc: type[Exception]) -> None:
    mc = mock_control()
    s = S.Stream(0)
    e = Event()
    e.record(s)
    created: list[S.Stream] = []
    mc.inject_fault(func, code)
    try:
        with pytest.raises(exc) as info:
            created.append(S.Stream(0))  # closed below: close() waits for the stream
            s.query()
            s.synchronize()
            s.wait_event(e)
        assert info.value.code == code  # type: ignore[attr-defined]
        assert info.value.function == func  # type: ignore[attr-defined]
    finally:
        mc.clear_faults()
    for c in created:
        c.close()
    with pytest.raises(TypeError):
        s.wait_event(object())
    s.synchronize()
    e.close()
    s.close()


def test_device_lost_stream_ops_raise_and_close_quietly() -> None:
    mc = mock_control()
    s = S.Stream(6)
    handle = s.handle
    mc.set_device_lost(6, 507010)
    try:
        with pytest.raises(errors.AclDeviceLostError):
            s.synchronize()
        s.close()  # never raises, even on a lost device (the failure is logged)
    finally:
        mc.set_device_lost(6, 0)
    assert s.closed
    # A lost card keeps its resources until reset; release this one for the leak check.
    from pyacl_rt import lowlevel

    lowlevel.check(lowlevel.lib.aclrtDestroyStream(handle), "aclrtDestroyStream")


def test_current_stream_after_reinit(run_python: Any) -> None:
    code = """
        import pyacl_rt._device as D, pyacl_rt._stream as S
        from pyacl_rt import _runtime as runtime, errors
        s = S.Stream(1)
        S.set_stream(s)
        runtime.finalize()
        runtime.init()
        cur = S.current_stream()
        assert cur.kind == "default" and cur.query(), cur
        try:
            s.query()
        except errors.RuntimeFinalizedError:
            print("OK")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_stream_cannot_be_copied_or_pickled(how: str) -> None:
    """A copy would share the raw handle and outlive close() (use after free)."""
    import copy
    import pickle

    do = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}[how]
    s = S.Stream(0)
    try:
        for obj in (s, S.default_stream(0), S.stream_from_pool(0)):
            with pytest.raises(TypeError, match="Stream objects cannot be pickled or copied"):
                do(obj)
    finally:
        s.close()


def test_infinite_timeout_is_the_longest_wait() -> None:
    s = S.Stream(0)
    assert S._timeout_ms(float("inf")) == 2**31 - 1  # was int(inf): OverflowError
    assert S._timeout_ms(2**40) == 2**31 - 1
    assert S._timeout_ms(0.2) == 1
    s.synchronize(timeout=float("inf"))
    s.close()
