"""Host callbacks: report threads, ordering, errors, refused blocking calls."""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from typing import Any

import pytest

from pyacl_rt import _callbacks as CB
from pyacl_rt import _device as D
from pyacl_rt import _releaser, errors
from pyacl_rt import _stream as S
from pyacl_rt._event import Event
from pyacl_rt.mock import mock_control


# --------------------------------------------------------------------- tests
def test_runs_in_order_on_report_thread() -> None:
    s = S.Stream(1)
    seen: list[tuple[int, str]] = []
    for i in range(20):
        s.launch_host_func(lambda i: seen.append((i, threading.current_thread().name)), i)
    s.synchronize()
    assert [i for i, _ in seen] == list(range(20))
    assert {name for _, name in seen} == {"pyacl_rt-callbacks-npu1"}
    assert CB.report_threads()[1].name == "pyacl_rt-callbacks-npu1"
    s.close()


def test_callable_and_args_kept_alive_until_run() -> None:
    class Arg:
        pass

    s = S.Stream(2)
    gate = threading.Event()
    s.launch_host_func(gate.wait, 60)  # hold the stream
    got: list[Any] = []
    arg = Arg()
    ref = weakref.ref(arg)
    s.launch_host_func(lambda a: got.append(type(a).__name__), arg)
    del arg
    gc.collect()
    assert ref() is not None and CB.pending_count() >= 1
    gate.set()
    s.synchronize()
    assert got == ["Arg"]
    gc.collect()
    assert ref() is None
    s.close()


def test_exception_is_reraised_once_and_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 14 item 4: an exception the next synchronize() re-raises is the user's
    (they catch it); it is not also logged with a traceback (DEBUG only)."""
    s = S.Stream(0)

    def boom(x: int) -> None:
        raise KeyError(f"bad {x}")

    with caplog.at_level(logging.DEBUG, logger="pyacl_rt"):
        s.launch_host_func(boom, 1)
        s.launch_host_func(lambda: None)
        with pytest.raises(KeyError, match="bad 1") as info:
            s.synchronize()
        s.synchronize()  # reported once, then cleared
        s.close()
    assert any("host callback" in n for n in getattr(info.value, "__notes__", []))
    assert [r.levelno for r in caplog.records if "host callback" in r.getMessage()] == [
        logging.DEBUG
    ]


@pytest.mark.parametrize("fate", ["closed", "garbage-collected", "finalized"])
def test_exception_never_reraised_is_logged_once(run_python: Any, fate: str) -> None:
    """... but one that no synchronize() will re-raise (the stream is closed, collected
    or finalized first) is logged then, once, with its traceback: never lost."""
    end = {
        "closed": "s.close()",
        "garbage-collected": "del s; gc.collect()",
        "finalized": "npu.finalize()",
    }[fate]
    code = f"""
        import gc
        import pyacl_rt as npu

        def check_results():
            raise ValueError("bad batch")

        s = npu.Stream()
        s.launch_host_func(check_results)
        npu.synchronize()  # the callback ran; its exception waits for s.synchronize()
        {end}
        import sys
        print("after", file=sys.stderr, flush=True)
    """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert err.count("pyacl_rt: a host callback on <Stream owned ") == 1, err
    assert f"raised, and the stream was {fate} before a synchronize() could re-raise it" in err
    assert err.count("Traceback") == 1 and "ValueError: bad batch" in err
    assert err.index("ValueError") < err.index("after")  # when it happened, not at exit


def test_several_exceptions_first_raised_others_noted() -> None:
    s = S.Stream(0)

    def fail(msg: str) -> None:
        raise ValueError(msg)

    s.launch_host_func(fail, "first")
    s.launch_host_func(fail, "second")
    with pytest.raises(ValueError, match="first") as info:
        s.synchronize()
    assert any("second" in n for n in info.value.__notes__)
    s.close()


def test_blocking_calls_refused_inside_callback() -> None:
    s = S.Stream(3)
    other = S.Stream(3)
    ev = Event()
    ev.record(other)
    results: dict[str, str] = {}

    def cb() -> None:
        for name, call in (
            ("stream", s.synchronize),
            ("other", other.synchronize),
            ("event", ev.synchronize),
            ("device", D.synchronize),
            ("close", s.close),
        ):
            try:
                call()
                results[name] = "ran"
            except errors.CallbackContextError as exc:
                results[name] = "refused:" + str(exc)[:20]

    s.launch_host_func(cb)
    s.synchronize()  # would hang forever if the callback deadlocked
    assert set(results) == {"stream", "other", "event", "device", "close"}
    assert all(v.startswith("refused") for v in results.values()), results
    assert not s.closed
    ev.close()
    other.close()
    s.close()


def test_non_blocking_and_add_callback() -> None:
    s = S.Stream(4)
    got: list[Any] = []
    s.launch_host_func(got.append, "nb", block=False)
    s.add_callback(lambda st, status, arg: got.append((st is s, status, arg)), "x")
    s.synchronize()
    assert "nb" in got and (True, 0, "x") in got
    with pytest.raises(TypeError):
        s.launch_host_func(42)  # type: ignore[arg-type]
    s.close()


def test_default_stream_callbacks() -> None:
    D.set_device(5)
    d = S.current_stream()
    got: list[int] = []
    d.launch_host_func(got.append, 7)
    d.synchronize()
    assert got == [7]
    # A new wrapper of the same default stream reuses the subscription.
    del d
    gc.collect()
    S.default_stream(5).launch_host_func(got.append, 8)
    S.default_stream(5).synchronize()
    assert got == [7, 8]


def test_close_runs_pending_callbacks_first() -> None:
    s = S.Stream(6)
    got: list[int] = []
    gate = threading.Event()
    s.launch_host_func(gate.wait, 60)
    s.launch_host_func(got.append, 1)
    t = threading.Thread(target=s.close)
    t.start()
    gate.set()
    t.join(60)
    assert not t.is_alive() and got == [1] and s.closed


def test_callbacks_launched_from_many_threads() -> None:
    s = S.Stream(7)
    got: list[int] = []
    lock = threading.Lock()

    def add(i: int) -> None:
        with lock:
            got.append(i)

    def launcher(base: int) -> None:
        for i in range(25):
            s.launch_host_func(add, base + i)

    threads = [threading.Thread(target=launcher, args=(k * 100,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.synchronize()
    assert sorted(got) == sorted(k * 100 + i for k in range(4) for i in range(25))
    s.close()


def test_finalize_stops_report_threads(run_python: Any) -> None:
    code = """
        import threading
        import pyacl_rt._stream as S
        from pyacl_rt import _runtime as runtime
        s = S.Stream(1); t = S.Stream(2)
        out = []
        s.launch_host_func(out.append, 1); t.launch_host_func(out.append, 2)
        runtime.finalize()
        assert sorted(out) == [1, 2], out
        names = [t.name for t in threading.enumerate()]
        assert not any(n.startswith("pyacl_rt-callbacks") for n in names), names
        print("OK")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_finalize_from_callback_is_refused(run_python: Any, clean_env: Any) -> None:
    """runtime.finalize() inside a host callback raises CallbackContextError instead of
    deadlocking (resetting the device would wait for the callback); the runtime stays
    up and a later finalize from the main thread releases everything. In a subprocess
    with a timeout: before the guard existed this hung."""
    code = """
        from pyacl_rt import errors, _runtime as runtime
        import pyacl_rt._stream as S
        s = S.Stream(1)
        seen = []

        def cb():
            try:
                runtime.finalize()
            except errors.CallbackContextError as exc:
                seen.append(exc)

        s.launch_host_func(cb)
        s.synchronize()
        assert len(seen) == 1, seen
        assert "finalize" in str(seen[0]) and isinstance(seen[0], RuntimeError)
        assert runtime.is_initialized()
        s.launch_host_func(seen.append, 2)
        s.synchronize()  # the stream and its report thread still work
        assert seen[1] == 2
        s.close()
        runtime.finalize()
        assert runtime.is_finalized()
        print("OK")
    """
    env = clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_LEAK_REPORT="1")
    r = run_python(code, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout
    assert "leak" not in r.stderr.lower(), r.stderr


def test_launch_failure_is_typed_and_releases_callable() -> None:
    mc = mock_control()
    s = S.Stream(0)
    s.launch_host_func(lambda: None)  # subscribe first
    s.synchronize()
    mc.inject_fault("aclrtLaunchCallback", 107000)
    try:
        with pytest.raises(Exception) as info:
            s.launch_host_func(print, "never")
        assert getattr(info.value, "code", None) == 107000
    finally:
        mc.clear_faults()
    assert CB.pending_count() == 0
    s.close()


def test_sync_timeout_with_blocked_callback(gate: Any) -> None:
    s = S.Stream(1)
    gate.block(s)
    with pytest.raises(TimeoutError):
        s.synchronize(timeout=10)
    gate.release.set()
    s.synchronize()
    s.close()


def test_stream_collected_inside_callback_is_released_after_it() -> None:
    import time

    s = S.Stream(1)
    victim = [S.Stream(1)]
    victim[0].launch_host_func(lambda: None)  # subscribed too
    victim[0].synchronize()
    mc = mock_control()
    base = mc.stat("streams", 1)

    def cb() -> None:
        victim.clear()
        gc.collect()  # the finalizer runs here, on the report thread: must not block

    s.launch_host_func(cb)
    s.synchronize()
    for _ in range(3000):  # the releaser thread destroys it after the callback returned
        if mc.stat("streams", 1) == base - 1:
            break
        time.sleep(0.01)
    assert mc.stat("streams", 1) == base - 1
    assert _releaser.flush(60)
    s.close()


def test_context_close_with_live_default_stream_keeps_report_thread_working() -> None:
    from pyacl_rt import _context as C

    ctx = C.Context(2)
    with ctx:
        d = S.current_stream()  # the context's default stream, kept alive here
        d.launch_host_func(lambda: None)
        d.synchronize()
    ctx.close()  # unsubscribes it once (the wrapper and the context both know it)
    assert d.closed
    s = S.Stream(2)
    got: list[int] = []
    s.launch_host_func(got.append, 1)
    s.synchronize()  # hangs if the report thread believed it had no subscription
    assert got == [1]
    s.close()


# Batches in reference cycles, each holding device memory (and every 50th its own
# stream), with one completion callback each (a bound method: the callback holds the
# batch). They are freed by the cycle collector or by the report thread dropping the
# callback's reference - on whatever thread that happens, with default GC settings.
GC_ON_REPORT_THREAD = r"""
import faulthandler, gc, os, sys, threading, time
import pyacl_rt as npu
from pyacl_rt.mock import mock_control

N = 50_000
progress = [0]

def watchdog():
    # A hang fails the test fast (and shows where) instead of hanging CI.
    last, since = -1, time.monotonic()
    while True:
        time.sleep(1.0)
        if progress[0] != last:
            last, since = progress[0], time.monotonic()
        elif time.monotonic() - since > 30:
            print(f"HANG after {last} batches", flush=True)
            faulthandler.dump_traceback(all_threads=True)
            os._exit(3)

threading.Thread(target=watchdog, daemon=True).start()
mc = mock_control()
npu.set_device(0)
s = npu.Stream()
h = npu.HostBuffer(256)
base_allocs = mc.stat("allocations", 0)
base_streams = mc.stat("streams", 0)
done = []

class Batch:
    def __init__(self, i):
        self.i = i
        self.me = self  # a reference cycle
        self.buf = npu.DeviceBuffer(256)
        self.stream = npu.Stream() if i % 50 == 0 else s

    def on_done(self):
        done.append({"batch": self.i})  # allocates on the report thread

for i in range(N):
    b = Batch(i)
    npu.memcpy_async(b.buf, h, 256, b.stream)
    b.stream.launch_host_func(b.on_done)
    del b
    progress[0] = i
s.synchronize()
npu.synchronize()
progress[0] = N + 1
gc.collect()
npu.empty_cache()  # waits for the frees deferred from the report thread
print("RESULT", len(done), npu.memory_allocated(0), mc.stat("allocations", 0) - base_allocs,
      mc.stat("streams", 0) - base_streams, flush=True)
npu.finalize()
"""


def test_gc_on_report_thread_never_deadlocks(run_python: Any) -> None:
    """Issue 7: garbage collection (or the last reference to a batch dropped by the
    report thread after its callback) freed a DeviceBuffer / destroyed a Stream *on the
    report thread*, outside a callback, where ``aclrtSynchronizeStream`` waited for a
    callback only that thread could run: a deadlock. The whole report thread now counts
    as a callback thread and such releases go to the releaser thread."""
    r = run_python(GC_ON_REPORT_THREAD, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")][-1]
    ran, allocated, live_allocations, live_streams = map(int, line.split()[1:])
    assert ran == 50_000  # every callback ran
    assert allocated == 0 and live_allocations == 0  # every deferred free happened
    assert live_streams == 0  # and every deferred stream destroy


def test_empty_cache_inside_callback_does_not_wait_for_releaser(run_python: Any) -> None:
    """empty_cache() waits for the releaser thread, which may itself be waiting for the
    stream of the running callback: inside a callback it must return at once."""
    code = r"""
import gc
import pyacl_rt as npu
s = npu.Stream(0)
box = [npu.DeviceBuffer(64, 0)]
npu.memset(box[0], 1, stream=s, non_blocking=True)
h = npu.HostBuffer(64)
ran = []

def cb():
    box.clear()  # freed on this report thread -> the releaser syncs s, which waits for cb
    gc.collect()
    npu.empty_cache()  # must not wait for the releaser
    ran.append(1)

s.launch_host_func(cb)
s.synchronize(timeout=30_000)
npu.empty_cache()
print("RESULT", ran, npu.memory_allocated(0))
"""
    r = run_python(code, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "RESULT [1] 0" in r.stdout
