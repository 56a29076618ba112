"""pyacl_rt._memory.records: the allocation records' life - freeing ordered after
pending work, in-use refusals, deferred frees, threads and contexts, finalize, fork,
interpreter exit (native backend)."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Any

import numpy as np
import pytest

from pyacl_rt import _context as C
from pyacl_rt import _memory as M
from pyacl_rt import _stream as S
from pyacl_rt import errors
from pyacl_rt._memory import records as R
from pyacl_rt._memory.registry import memory
from pyacl_rt.mock import mock_control

# These tests pin down the native backend (one aclrtMalloc per buffer, ordered free);
# the caching allocator has its own tests (tests/test_allocator.py).
pytestmark = pytest.mark.usefixtures("native_allocator")


def allocations(device: int = -1) -> int:
    return mock_control().stat("allocations", device)


def host_allocations() -> int:
    return mock_control().stat("host_allocations")


# ------------------------------------------- freeing while a copy is pending
def test_close_waits_for_pending_copy(gate: Any) -> None:
    base = allocations(0)
    s = S.Stream(0)
    src = M.DeviceBuffer(1 << 16, device=0)
    dst = M.HostBuffer(1 << 16)
    payload = np.random.default_rng(1).integers(0, 256, 1 << 16, dtype=np.uint8)
    M.copy(src, payload)
    gate.block(s)
    M.memcpy_async(dst, src, 1 << 16, s)  # pending behind the gate
    closed = threading.Event()

    def closer() -> None:
        src.close()  # must wait for the copy
        closed.set()

    t = threading.Thread(target=closer)
    t.start()
    assert not closed.wait(0.3), "close() returned while the copy was pending"
    assert allocations(0) == base + 1
    gate.release.set()
    t.join(60)
    assert closed.is_set() and allocations(0) == base
    assert (np.asarray(dst) == payload).all()  # the copy completed correctly
    dst.close()
    s.close()


def _wait_in_use(m: Any) -> None:
    """Wait until another thread marked the allocation ``m`` in use (not a timing test:
    it only waits for a state, bounded so that a bug cannot hang the suite)."""
    for _ in range(60000):
        if m.inuse:
            return
        time.sleep(0.001)
    raise AssertionError("the operation never started")


@pytest.mark.parametrize("op", ["copy", "memset", "copy_2d", "copy-src"])
def test_close_refused_while_host_operation_runs_in_another_thread(gate: Any, op: str) -> None:
    """QA: closing a HostBuffer while another thread runs a synchronous host-side
    memmove / memset on it freed the pinned memory under the running C call (SIGSEGV).
    The operation holds the buffer in use (here it waits for ``stream`` first, blocked
    by a gate); close() raises BufferError and the buffer stays usable."""
    base = host_allocations()
    s = S.Stream(0)
    h = M.HostBuffer(4096)
    src = bytearray(b"\x05" * 4096)
    calls = {
        "copy": lambda: M.copy(h, src, stream=s),
        "memset": lambda: M.memset(h, 7, stream=s),
        "copy_2d": lambda: M.copy_2d(h, 64, src, 64, 64, 64, stream=s),
        "copy-src": lambda: M.copy(src, h, stream=s),
    }
    gate.block(s)
    errs: list[BaseException] = []

    def worker() -> None:
        try:
            calls[op]()
        except BaseException as exc:  # pragma: no cover - reported below
            errs.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    _wait_in_use(h.mem)
    with pytest.raises(BufferError, match="another thread is still using"):
        h.close()
    assert not h.closed and host_allocations() == base + 1
    with pytest.raises(BufferError, match="in use by a synchronous"):
        R._finalize_guard()  # what runtime.finalize() runs first
    gate.release.set()
    t.join(60)
    assert not errs and not h.mem.inuse
    if op != "copy-src":
        assert np.asarray(h)[4095] == (7 if op == "memset" else 5)
    h.close()
    assert h.closed and host_allocations() == base
    s.close()


def test_device_buffer_close_refused_while_resolved() -> None:
    """The same mark protects a DeviceBuffer (and its views) between resolving the
    address and enqueueing; released on every path, so close() works afterwards."""
    from pyacl_rt._memory import args as _membuf

    buf = M.DeviceBuffer(64, device=0)
    view = buf[8:16]
    side = _membuf.resolve(view, "dst", True)
    with pytest.raises(BufferError, match="DeviceBuffer"):
        buf.close()
    assert not buf.closed and view.ptr == buf.ptr + 8
    side.release()
    side.release()  # idempotent
    assert not buf.mem.inuse
    # failures and zero-byte early returns drop the mark too
    with pytest.raises(ValueError):
        M.copy(buf, b"x" * 100)
    M.copy(buf, b"")
    M.copy_2d(buf, 4, b"abcd", 4, 0, 4)
    M.memset(buf, 1, 0)
    with pytest.raises(ValueError):
        buf.copy_to_host_async(bytearray(8), offset=100)
    assert not buf.mem.inuse
    buf.close()
    assert view.closed


def test_gc_of_buffer_with_pending_copy(gate: Any) -> None:
    base = allocations(0)
    s = S.Stream(0)
    dev = M.DeviceBuffer(4096, device=0)
    h = M.HostBuffer(4096)
    np.asarray(h)[:] = 9
    gate.block(s)
    M.memcpy_async(dev, h, 4096, s)
    out = M.HostBuffer(4096)
    M.memcpy_async(out, dev, 4096, s)
    # Drop every reference from another thread: the finalizers wait for the stream.
    holder = [dev, h]
    del dev, h
    done = threading.Event()

    def dropper() -> None:
        holder.clear()
        gc.collect()
        done.set()

    t = threading.Thread(target=dropper)
    t.start()
    assert not done.wait(0.3)
    assert allocations(0) == base + 1
    gate.release.set()
    t.join(60)
    assert done.is_set() and allocations(0) == base
    assert (np.asarray(out) == 9).all()
    out.close()
    s.close()


def test_free_from_host_callback_is_deferred(gate: Any) -> None:
    base = allocations(0)
    s = S.Stream(0)
    gate.block(s)
    dev = M.DeviceBuffer(64, device=0)
    M.memset(dev, 1, stream=s, non_blocking=True)  # pending behind the gate
    box = [dev]
    del dev
    other = S.Stream(1)  # another device: its callbacks are not held up by the gate

    def drop_in_callback() -> None:
        box.clear()  # the finalizer runs on the callback thread: must not block
        gc.collect()

    other.launch_host_func(drop_in_callback)
    other.synchronize()
    assert allocations(0) == base + 1  # not freed under the pending memset
    gate.release.set()
    s.synchronize()
    M.empty_cache()  # waits for the releaser thread, which frees it
    assert allocations(0) == base and not memory.deferred
    s.close()
    other.close()


# --------------------------------------------------------- threads/contexts
def test_buffers_from_new_threads_without_set_device(run_threads: Any) -> None:
    data = np.arange(256, dtype=np.uint8)
    shared = M.DeviceBuffer(256, device=2)
    M.copy(shared, data)
    results: list[bytes] = []

    def worker(i: int) -> None:
        own = M.DeviceBuffer(256, device=i % 3)
        M.copy(own, shared)  # across devices for i % 3 != 2
        s = S.Stream(i % 3)
        out = M.HostBuffer(256)
        M.memcpy_async(out, own, 256, s)
        s.synchronize()
        results.append(bytes(np.asarray(out)))
        own.close()
        out.close()
        s.close()

    errs = run_threads(6, worker)
    assert not errs, errs
    assert results == [data.tobytes()] * 6
    shared.close()


def test_buffer_used_from_another_thread() -> None:
    buf = M.DeviceBuffer(32, device=3)
    out: list[bytes] = []
    t = threading.Thread(target=lambda: (buf.fill(0x11), out.append(bytes(buf.copy_to_host()))))
    t.start()
    t.join()
    assert out == [b"\x11" * 32]
    buf.close()


def test_context_close_frees_its_buffers() -> None:
    base = allocations(4)
    ctx = C.Context(4)
    with ctx:
        buf = M.DeviceBuffer(128)
        assert buf.device_index == 4
    assert allocations(4) == base + 1
    view = buf[0:4]
    ctx.close()
    assert allocations(4) == base
    assert buf.closed and view.closed
    with pytest.raises(errors.ObjectClosedError, match="Context"):
        buf.fill(0)
    buf.close()


def test_buffer_keeps_explicit_context_alive() -> None:
    ctx = C.Context(4)
    with ctx:
        buf = M.DeviceBuffer(16)
    wr = weakref.ref(ctx)
    del ctx
    gc.collect()
    assert wr() is not None
    buf.fill(3)
    assert bytes(buf.copy_to_host()) == b"\x03" * 16
    buf.close()
    gc.collect()
    assert wr() is None


# ---------------------------------------------------------------- finalize
def test_finalize_frees_buffers_and_makes_them_inert(run_python: Any) -> None:
    code = """
        import numpy as np
        import pyacl_rt._memory as M, pyacl_rt._stream as S
        from pyacl_rt import _runtime as runtime, errors
        from pyacl_rt.mock import mock_control, REPORT_LAST_FINALIZE
        a = M.DeviceBuffer(1000, device=0); v = a[0:10]
        b = M.DeviceBuffer(1000, device=1)
        h = M.HostBuffer(64)
        exported = M.HostBuffer(32); arr = np.asarray(exported)
        s = S.Stream(0)
        M.copy(b, np.ones(1000, np.uint8), stream=S.default_stream(1), non_blocking=True)
        M.memcpy_async(h, a, 64, s)
        mc = mock_control()
        assert mc.stat("allocations") == 2, mc.counts()
        try:
            runtime.finalize()  # the numpy array still points at exported's memory
        except BufferError as exc:
            assert "1 exported view" in str(exc) and "nothing was finalized" in str(exc), exc
        else:
            raise AssertionError("finalize with a live export")
        assert runtime.is_initialized() and mc.stat("allocations") == 2
        arr[:] = 3; M.copy(a, exported, 32)  # everything still works
        del arr
        runtime.finalize()
        for obj in (a, v, b, h, exported):
            obj.close()                 # no-op, never raises
        for call in (lambda: a.ptr, lambda: v.fill(0), lambda: M.copy(b, a),
                     lambda: h.memoryview(), lambda: M.memcpy_async(a, b, 1, s)):
            try:
                call()
            except errors.RuntimeFinalizedError:
                pass
            else:
                raise AssertionError(call)
        report = mock_control().leak_report(REPORT_LAST_FINALIZE)
        assert "allocation" not in report.lower(), report
        del a, v, b, h, exported
        import gc; gc.collect()
        runtime.init()
        c = M.DeviceBuffer(8, device=0); c.fill(1); c.close()
        print("OK")
    """
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert "OK" in res.stdout
    assert "still exported" not in res.stderr


def test_finalize_refused_while_host_buffer_exported(run_python: Any) -> None:
    """QA: finalize() with a live memoryview of a HostBuffer let aclFinalize free the
    pinned block under the view (a later write corrupted the heap). finalize() now
    raises BufferError naming the buffer and finalizes nothing, also for an export
    that outlived its collected HostBuffer; at interpreter exit (no guard) the memory is
    left to the process end, silently (issue 14 item 4: it logged a warning about
    "views" the user never made, at every exit)."""
    code = """
        import gc
        import pyacl_rt as npu
        from pyacl_rt import _runtime as runtime
        h = npu.HostBuffer(64)
        mv = h.memoryview()
        for attempt in range(2):
            try:
                npu.finalize()
            except BufferError as exc:
                assert "HostBuffer of 64 bytes" in str(exc), exc
            else:
                raise AssertionError("finalize with a live export")
            assert runtime.is_initialized()
            mv[0:8] = bytes([attempt + 1]) * 8  # still valid memory
            assert bytes(mv[:8]) == bytes([attempt + 1]) * 8
            h = None; gc.collect()  # the export keeps the memory: still refused
        mv.release(); gc.collect()
        npu.finalize()
        assert not runtime.is_initialized()
        runtime.init()
        keep = npu.HostBuffer(16)
        leaked_view = keep.memoryview()  # alive at exit: left to the process end
        print("OK")
    """
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert "OK" in res.stdout
    assert res.stderr == ""


def test_fork_child_refuses_buffers(run_python: Any) -> None:
    code = """
        import os
        import pyacl_rt._memory as M
        from pyacl_rt import errors
        a = M.DeviceBuffer(16, device=0)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                a.fill(0)
            except errors.ForkedProcessError:
                code = 0
            del a
            import gc; gc.collect()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0, status
        a.fill(1)
        assert bytes(a.copy_to_host()) == b"\\x01" * 16
        print("OK")
    """
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert "OK" in res.stdout


def test_synchronous_operations_refused_in_host_callbacks() -> None:
    s = S.Stream(1)
    dev = M.DeviceBuffer(16, device=1)
    src = M.HostBuffer(16)
    np.asarray(src)[:] = 4
    seen: list[str] = []

    def callback() -> None:
        for call in (
            lambda: M.copy(dev, b"x" * 16),
            lambda: M.memset(dev, 0),
            lambda: dev.copy_to_host(),
            lambda: M.copy_2d(dev, 4, b"y" * 16, 4, 4, 4),
        ):
            try:
                call()
            except errors.CallbackContextError:
                seen.append("refused")
        M.memcpy_async(dev, src, 16, other)
        seen.append("async ok")

    other = S.Stream(1)
    s.launch_host_func(callback)
    s.synchronize()
    other.synchronize()
    assert seen == ["refused"] * 4 + ["async ok"]
    assert bytes(dev.copy_to_host()) == b"\x04" * 16
    dev.close()
    src.close()
    s.close()
    other.close()


def test_device_lost_copy_raises_and_close_never_raises(caplog: Any) -> None:
    mc = mock_control()
    base = allocations(6)
    buf = M.DeviceBuffer(64, device=6)
    M.copy(buf, b"k" * 64)
    mc.set_device_lost(6, 507010)
    try:
        with pytest.raises(errors.AclDeviceLostError):
            M.copy(buf, b"x" * 64)
        with pytest.raises(errors.AclDeviceLostError):
            buf.copy_to_host()
        buf.close()  # never raises; the runtime still releases the memory
        assert buf.closed
    finally:
        mc.set_device_lost(6, 0)
    assert allocations(6) == base


def test_concurrent_alloc_copy_free_stress(run_threads: Any) -> None:
    """Threads allocate, copy on their own streams and free buffers made by others
    (some by close(), some by garbage collection)."""
    import queue

    base = allocations()
    handoff: queue.Queue[Any] = queue.Queue()

    def worker(i: int) -> None:
        s = S.Stream(i % 2)
        host = M.HostBuffer(512)
        np.asarray(host)[:] = i
        for j in range(40):
            buf = M.DeviceBuffer(512, device=i % 2)
            M.memcpy_async(buf, host, 512, s)
            M.copy(buf[0:8], bytes([j]) * 8, stream=s, non_blocking=True)
            handoff.put(buf)
            try:
                other = handoff.get_nowait()
            except queue.Empty:
                continue
            if j % 2:
                other.close()
            else:
                del other
        s.synchronize()
        host.close()
        s.close()

    errs = run_threads(4, worker)
    assert not errs, errs
    while not handoff.empty():
        handoff.get().close()
    gc.collect()
    assert allocations() == base


def test_close_during_interpreter_exit_frees_at_once(run_python: Any, clean_env: Any) -> None:
    """A buffer closed during interpreter exit (here from a release hook, after
    weakref.finalize's own atexit hook made plain ``finalize()`` calls no-ops) is freed
    by close() itself, and the mock reports no leak at aclFinalize."""
    code = """
        import atexit
        out = []

        def report():  # registered first: runs after pyacl_rt's finalize
            from pyacl_rt.mock import REPORT_LAST_FINALIZE, mock_control
            print("RESULT", out)
            print("REPORT", mock_control().leak_report(REPORT_LAST_FINALIZE).strip())

        atexit.register(report)
        import pyacl_rt._memory as M
        from pyacl_rt import _runtime as runtime
        from pyacl_rt.mock import mock_control

        buf = M.DeviceBuffer(4096, 0)
        view = buf[16:32]
        host = M.HostBuffer(4096)

        def close_at_exit():
            buf.close()
            host.close()
            mc = mock_control()
            out.append((buf.closed, view.closed, host.closed, M.memory_allocated(0),
                        M.host_memory_allocated(), mc.stat("allocations"),
                        mc.stat("host_allocations")))

        runtime.register_release_hook(close_at_exit, runtime.PRIORITY_FIRST)
    """
    env = clean_env(
        PYACL_RT_BACKEND="mock", ASCEND_MOCK_LEAK_REPORT="1", PYACL_RT_ALLOCATOR="native"
    )
    r = run_python(code, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "RESULT [(True, True, True, 0, 0, 0, 0)]" in r.stdout, (r.stdout, r.stderr)
    assert "REPORT mock_libascendcl leak report: no leaks" in r.stdout, r.stdout
    assert "leak report" not in r.stderr, r.stderr


def test_failed_operations_release_every_side() -> None:
    """Every failure after the arguments were resolved (bad sizes, a bad stream, an
    interrupt raised mid-operation) releases both sides (args.ReleaseOnExit): the
    foreign object is no longer exported (a bytearray can grow again) and the owned
    buffer is no longer marked in use (close() works)."""
    from pyacl_rt._memory import args as A

    dev = M.DeviceBuffer(64, device=0)
    ba = bytearray(64)
    with pytest.raises(ValueError, match="nbytes 65 runs past"):
        M.copy(dev, ba, 65)
    with pytest.raises(ValueError, match="width 9 is larger than dpitch 8"):
        M.copy_2d(ba, 8, dev, 8, 9, 2)
    with pytest.raises(ValueError, match="offset 65 is past the end"):
        M.memset(dev, 0, offset=65)
    with pytest.raises(TypeError, match="stream must be a Stream"):
        M.copy(dev, ba, stream="s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stream is on device 1"):
        M.copy(dev, ba, stream=S.Stream(1))
    ba.extend(b"x")  # not exported any more
    assert not dev.mem.inuse

    d = A.resolve(dev, "dst", True)
    s = A.resolve(ba, "src", False)
    with pytest.raises(KeyboardInterrupt), A.ReleaseOnExit(d, s):
        raise KeyboardInterrupt
    ba.extend(b"y")
    assert not dev.mem.inuse and d.cd is None and s.cd is None
    with A.ReleaseOnExit(d, s):  # success: nothing released twice, nothing raised
        pass
    dev.close()
    assert dev.closed
