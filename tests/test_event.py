"""Events: lazy creation, record/query/synchronize/wait, timing, lifetime."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest
from conftest import _clean_env

from pyacl_rt import _context as C
from pyacl_rt import _device as D
from pyacl_rt import _state, errors
from pyacl_rt import _stream as S
from pyacl_rt._event import Event, EventTimingError
from pyacl_rt.mock import mock_control


def events_on(device: int) -> int:
    return mock_control().stat("events", device)


# --------------------------------------------------------------------- tests
def test_unrecorded_event() -> None:
    e = Event()
    assert e.handle == 0 and e.device is None and not e.is_recorded
    assert e.query() is True  # torch_npu: True if never recorded
    e.synchronize()
    e.wait(S.Stream(0))  # no-op; the temporary stream is collected
    assert "not recorded" in repr(e)
    with pytest.raises(EventTimingError):
        Event(enable_timing=True).elapsed_time(Event(enable_timing=True))
    e.close()
    assert e.closed
    with pytest.raises(errors.ObjectClosedError):
        e.record()


def test_record_query_synchronize(gate: Any) -> None:
    D.set_device(1)
    base = events_on(1)
    e = Event()
    e.record()  # current stream = default stream of device 1
    assert events_on(1) == base + 1
    assert e.is_recorded and e.handle != 0 and e.device == D.Device(1)
    e.synchronize()
    assert e.query() is True
    s = S.Stream(1)
    gate.block(s)
    e.record(s)  # re-record: follows the latest record
    assert e.query() is False
    with pytest.raises(errors.SyncTimeoutError) as info:
        e.synchronize(timeout=20)
    assert isinstance(info.value, TimeoutError) and info.value.code == 507047
    gate.release.set()
    e.synchronize()
    assert e.query() is True
    e.close()
    e.close()
    assert events_on(1) == base
    s.close()


def test_record_on_current_stream_from_guard() -> None:
    s = S.Stream(2)
    e = Event()
    with S.stream(s):
        e.record()
    assert e.device == D.Device(2)
    s.synchronize()
    assert e.query()
    e.close()
    s.close()


def test_wait_orders_other_stream(gate: Any) -> None:
    a, b = S.Stream(3), S.Stream(3)
    gate.block(a)
    e = Event()
    e.record(a)
    e.wait(b)
    after = Event()
    after.record(b)
    assert after.query() is False
    gate.release.set()
    after.synchronize()
    assert e.query()
    with S.stream(b):
        e.wait()  # current stream
    b.synchronize()
    for x in (e, after, a, b):
        x.close()
    with pytest.raises(TypeError):
        Event().wait("s")  # type: ignore[arg-type]


def test_elapsed_time() -> None:
    s = S.Stream(0)
    start, end = Event(enable_timing=True), Event(enable_timing=True)
    assert start.enable_timing and not Event().enable_timing
    start.record(s)
    s.launch_host_func(lambda: None)
    end.record(s)
    ms = start.elapsed_time(end)  # synchronizes both first
    assert isinstance(ms, float) and ms >= 0.0
    with pytest.raises(TypeError):
        start.elapsed_time(1)  # type: ignore[arg-type]
    for x in (start, end, s):
        x.close()


def test_elapsed_time_errors() -> None:
    s = S.Stream(0)
    plain, timed, unrecorded = Event(), Event(enable_timing=True), Event(enable_timing=True)
    plain.record(s)
    timed.record(s)
    with pytest.raises(EventTimingError, match="enable_timing=False"):
        plain.elapsed_time(timed)
    with pytest.raises(EventTimingError, match="enable_timing=False"):
        timed.elapsed_time(plain)
    with pytest.raises(EventTimingError, match="never recorded") as info:
        timed.elapsed_time(unrecorded)
    assert isinstance(info.value, ValueError) and isinstance(info.value, errors.AclError)
    timed.close()
    with pytest.raises(errors.ObjectClosedError):
        Event(enable_timing=True).elapsed_time(timed) if False else timed.elapsed_time(timed)
    for x in (plain, s):
        x.close()


def test_flags_and_unsupported(run_python: Any) -> None:
    e = Event(blocking=True)
    assert e.blocking is True
    assert Event(interprocess=True).interprocess  # supported: tests/test_ipc.py
    # A SoC without IPC events refuses to create one (at its creation: the first
    # record, or ipc_handle()).
    r = run_python(
        """
        import pyacl_rt as npu
        from pyacl_rt import errors
        ev = npu.Event(interprocess=True)
        try:
            ev.ipc_handle()
        except errors.FeatureNotSupportedError as exc:
            print("refused", exc.code)
        """,
        env=_clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_SOC_NAME="Ascend310B1"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "refused 207000"


def test_event_bound_to_one_device() -> None:
    e = Event()
    e.record(S.default_stream(0))
    with pytest.raises(errors.AclUsageError, match="device 0"):
        e.record(S.default_stream(1))
    e.close()


def test_context_manager_closes() -> None:
    D.set_device(4)
    base = events_on(4)
    with Event() as e:
        e.record()
        assert events_on(4) == base + 1
    assert e.closed and events_on(4) == base


def test_gc_destroys_event() -> None:
    D.set_device(5)
    base = events_on(5)
    e = Event()
    e.record()
    assert events_on(5) == base + 1
    del e
    gc.collect()
    assert events_on(5) == base


def test_event_used_from_new_thread(gate: Any) -> None:
    s = S.Stream(6)
    gate.block(s)
    e = Event()
    e.record(s)
    out: list[Any] = []

    def waiter() -> None:
        out.append(e.query())
        gate.release.set()
        e.synchronize()
        out.append(e.query())
        out.append(_state._local.st.device)

    t = threading.Thread(target=waiter)
    t.start()
    t.join(60)
    assert out == [False, True, -1]
    e.close()
    s.close()


def test_event_keeps_its_context_alive() -> None:
    ctx = C.Context(7)
    with ctx:
        e = Event()
        e.record()
    handle = ctx.handle
    del ctx
    gc.collect()
    assert e.query() is True  # the context is still alive through the event
    assert C.current_context() is None
    e.close()
    del e
    gc.collect()
    # Context gone now: only the primary context of device 7 (if any) remains.
    assert mock_control().stat("default_contexts", 7) == (1 if 7 in D.primaries else 0)
    assert handle != 0


def test_elapsed_time_torch_style_usage() -> None:
    t0, t1 = Event(enable_timing=True), Event(enable_timing=True)
    side = S.Stream(1)
    with S.stream(side):
        t0.record()
        t1.record()
    S.current_stream(1).wait_stream(side)
    t1.synchronize()
    assert t0.elapsed_time(t1) >= 0.0
    for x in (t0, t1, side):
        x.close()


def test_record_on_closed_stream_names_the_stream() -> None:
    s = S.Stream(0)
    e = Event()
    e.record(s)
    s2 = S.Stream(0)
    s2.close()
    with pytest.raises(errors.ObjectClosedError, match="stream is closed"):
        e.record(s2)
    e.close()
    s.close()


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_event_cannot_be_copied_or_pickled(how: str) -> None:
    import copy
    import pickle

    do = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}[how]
    fresh = Event()
    recorded = Event()
    recorded.record(S.default_stream(0))
    try:
        for ev in (fresh, recorded):
            with pytest.raises(TypeError, match="Event objects cannot be pickled or copied"):
                do(ev)
    finally:
        recorded.close()


def test_bad_arguments_are_named() -> None:
    """QA: record(5) gave AttributeError; on a never-recorded event, a bad timeout
    and a closed stream were accepted silently."""
    e = Event()
    for bad in (5, "s", Event()):
        with pytest.raises(TypeError, match=r"Event.record\(\): stream must be a Stream or None"):
            e.record(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"Event.wait\(\): stream must be a Stream or None"):
            e.wait(bad)  # type: ignore[arg-type]
    assert not e.is_recorded and e.handle == 0
    for timeout in (-5, 0, float("nan")):
        with pytest.raises(ValueError, match="timeout must be > 0"):
            e.synchronize(timeout=timeout)
    with pytest.raises(TypeError, match="timeout must be a number"):
        e.synchronize(timeout="1")  # type: ignore[arg-type]
    e.synchronize(timeout=10)  # valid: no-op before the first record
    closed = S.Stream(0)
    closed.close()
    with pytest.raises(errors.ObjectClosedError, match="closed"):
        e.wait(closed)
    with pytest.raises(errors.ObjectClosedError, match="closed"):
        closed.wait_event(e)
    # after recording, the same arguments are refused the same way
    s = S.Stream(0)
    e.record(s)
    with pytest.raises(TypeError, match="stream must be a Stream or None"):
        e.record(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout must be > 0"):
        e.synchronize(timeout=-5)
    with pytest.raises(errors.ObjectClosedError, match="closed"):
        e.wait(closed)
    e.synchronize()
    e.close()
    s.close()
