"""pyacl_rt._memcore: allocation records, their registry, and the C base types of
DeviceBuffer / HostBuffer with the caching allocator's hit path.

The hit path (a buffer served from the cache, created, closed and collected in C) must
do exactly what the Python path does: every case where it must not apply is checked
here to fall back (fast_counts() tells which path ran), and the safety rules of the
buffer life (exports, keep-alive, contexts, callbacks, finalize, threads) hold on it.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import pyacl_rt
from pyacl_rt import _allocator as A
from pyacl_rt import _device as D
from pyacl_rt import _memcore, errors, lowlevel
from pyacl_rt import _memory as M
from pyacl_rt import _runtime as runtime
from pyacl_rt import _stream as S
from pyacl_rt._memory import backend as _membackend
from pyacl_rt._memory import records as R
from pyacl_rt._memory.registry import memory
from pyacl_rt.mock import mock_control

KiB = 1 << 10


@pytest.fixture(autouse=True)
def caching(mock_loaded: Any) -> Iterator[None]:
    prev = _membackend.select("caching")
    pyacl_rt.set_device(0)
    M.empty_cache()
    try:
        yield
    finally:
        mock_control().clear_faults()
        _membackend.select(prev.name)


def fast() -> dict[str, int]:
    return _memcore.fast_counts()


def delta(before: dict[str, int]) -> dict[str, int]:
    now = fast()
    return {k: now[k] - before[k] for k in now}


def warm(stream: S.Stream | None = None, nbytes: int = 4 * KiB) -> M.DeviceBuffer:
    """One allocation through the Python path (the stream's cache is remembered); the
    buffer returned keeps the stream's segment in use (a wholly free segment may move to
    another stream that misses, see pyacl_rt._allocator)."""
    M.HostBuffer(nbytes).close()
    return M.DeviceBuffer(nbytes, stream=stream)


# ------------------------------------------------------------------- hit path
def test_cache_hits_run_in_c() -> None:
    s = S.Stream(0)
    pins = [warm(s), warm()]
    before = fast()
    for _ in range(10):
        M.DeviceBuffer(4 * KiB, stream=s).close()
        M.DeviceBuffer(4 * KiB).close()  # the current stream
        M.HostBuffer(4 * KiB).close()
        with M.DeviceBuffer(100, stream=s) as b:
            assert b.mem.fast and b.mem.rel is not None
        M.DeviceBuffer(4 * KiB, stream=s)  # dropped: freed by its reference count
    d = delta(before)
    assert d == {"device_alloc": 40, "device_free": 40, "host_alloc": 10, "host_free": 10}
    assert M.memory_allocated() == 2 * 4 * KiB and _memcore.live_count() == 2
    del pins
    assert M.memory_allocated() == 0 and _memcore.live_count() == 0
    s.close()


def test_hit_path_buffer_is_a_complete_buffer() -> None:
    s = S.Stream(0)
    warm(s)
    b = M.DeviceBuffer(4096, stream=s)
    assert b.mem.fast and b.mem.registered and b.nbytes == len(b) == 4096
    assert b.device_index == 0 and not b.is_view and "4096 bytes" in repr(b)
    assert M.memory_allocated() == 4096 and R.counters(0)["allocated"] == 4096
    v = b[100:200]
    M.memset(v, 7, stream=s)
    out = b.copy_to_host()
    assert out[99] != 7 and set(out[100:200]) == {7}
    ref = weakref.ref(b)
    del b
    assert ref() is not None  # the view keeps its parent alive
    del v
    assert ref() is None and M.memory_allocated() == 0 and R.counters(0)["allocated"] == 0
    h = M.HostBuffer(64)
    assert h.mem.fast and h.mem.owner is h
    np.asarray(h)[:] = 3
    assert h.tobytes() == b"\x03" * 64
    h.close()
    s.close()


def test_argument_errors_are_those_of_the_python_path() -> None:
    s = S.Stream(0)
    s1 = S.Stream(1)
    warm(s)
    with pytest.raises(ValueError, match="stream is on device 1 but this operation runs on"):
        M.DeviceBuffer(64, stream=s1)
    with pytest.raises(TypeError, match="stream must be a Stream or None"):
        M.DeviceBuffer(64, stream=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="nbytes is a size in bytes, not data"):
        M.DeviceBuffer(b"abc", stream=s)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nbytes"):
        M.DeviceBuffer(-1, stream=s)
    with pytest.raises((ValueError, OverflowError), match="nbytes"):
        M.DeviceBuffer(2**64, stream=s)
    with pytest.raises(TypeError, match="missing required argument 'nbytes'"):
        M.DeviceBuffer(stream=s)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        M.DeviceBuffer(64, 0, 0, s)  # type: ignore[misc]  # stream is keyword-only
    with pytest.raises(TypeError, match=r"DeviceBuffer.close\(\) takes no positional"):
        M.DeviceBuffer(64, stream=s).close(1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="nbytes must be > 0"):
        M.HostBuffer(0)
    s1.close()
    with pytest.raises(errors.ObjectClosedError):
        M.DeviceBuffer(64, stream=s1)
    s.close()


def test_misses_and_other_cases_take_the_python_path() -> None:
    s = S.Stream(0)
    warm(s)
    before = fast()
    big = M.DeviceBuffer(3 << 20, stream=s)  # a miss: a new segment
    b = M.DeviceBuffer(np.int64(4096), stream=s)  # an __index__ size
    c = M.DeviceBuffer(4096, device=D.Device(0), stream=s)  # a Device object
    n = M.DeviceBuffer(4096, stream=s, policy=M.ACL_MEM_MALLOC_HUGE_ONLY)  # one aclrtMalloc
    assert n.mem.rel is None and not n.mem.fast
    for x in (big, b, c, n):
        x.close()
    assert delta(before)["device_alloc"] == 0
    s.close()


def test_foreign_context_switch_is_noticed_on_a_hit() -> None:
    """A cache hit checks the thread's context with the runtime, like the Python path:
    after a switch behind pyacl_rt's back the allocation puts the right one back."""

    def raw_device() -> int:
        scratch = lowlevel.scratch()
        lowlevel.check(lowlevel.lib.aclrtGetDevice(scratch.i32), "aclrtGetDevice")
        return int(scratch.i32[0])

    def body() -> None:
        D.context_for(1)
        D.set_device(0)
        warm()
        for make in (lambda: M.DeviceBuffer(4096), lambda: M.HostBuffer(4096)):
            rc = lowlevel.lib.aclrtSetCurrentContext(D.primaries[1].handle)
            lowlevel.check(rc, "aclrtSetCurrentContext")
            assert raw_device() == 1
            buf = make()
            assert raw_device() == 0
            buf.close()

    errs: list[BaseException] = []
    t = threading.Thread(target=lambda: _capture(errs, body))
    t.start()
    t.join(60)
    assert not errs, errs


def _capture(errs: list[BaseException], fn: Any) -> None:
    try:
        fn()
    except BaseException as exc:
        errs.append(exc)


def test_explicit_context_allocates_in_it() -> None:
    from pyacl_rt._context import Context

    warm()
    before = fast()
    ctx = Context(0)
    with ctx:
        b = M.DeviceBuffer(4096)
        assert b.mem.rel is None and b.mem.keep is ctx  # keeps its Context alive
    b.close()
    ctx.close()
    assert delta(before)["device_alloc"] == 0


def test_native_backend_and_history_take_the_python_path() -> None:
    s = S.Stream(0)
    warm(s)
    prev = _membackend.select("native")
    try:
        before = fast()
        b = M.DeviceBuffer(4096, stream=s)
        assert b.mem.rel is None
        b.close()
        assert delta(before)["device_alloc"] == 0
    finally:
        _membackend.select(prev.name)
    warm(s)
    pyacl_rt.record_memory_history("all")
    try:
        before = fast()
        b = M.DeviceBuffer(4096, stream=s)
        b.close()
        assert delta(before)["device_alloc"] == 0 and delta(before)["device_free"] == 0
        actions = [e["action"] for e in A.snapshot()["device_traces"][0][-3:]]
        assert actions == ["alloc", "free_requested", "free_completed"]
    finally:
        pyacl_rt.record_memory_history(None)
    s.close()


def test_close_refused_while_exported_or_in_use() -> None:
    s = S.Stream(0)
    warm(s)
    b = M.DeviceBuffer(4096, stream=s)
    cap = b.__dlpack__(stream=-1)
    with pytest.raises(BufferError, match="DLPack export"):
        b.close()
    assert not b.closed
    del cap
    gc.collect()
    assert b.mem.hold() == b.ptr
    with pytest.raises(BufferError, match="another thread"):
        b.close()
    b.mem.unhold()
    b.close()
    assert b.closed and M.memory_allocated() == 0
    h = M.HostBuffer(64)
    mv = memoryview(h)
    with pytest.raises(BufferError, match="1 exported view"):
        h.close()
    mv.release()
    h.close()
    assert h.closed
    with pytest.raises(errors.ObjectClosedError):
        memoryview(h)
    s.close()


def test_block_used_on_another_stream_is_guarded(gate: Any) -> None:
    """A buffer also used on another stream goes back through the event guard (Python
    path): its block is not handed out while that stream's work is pending."""
    s1, s2 = S.Stream(0), S.Stream(0)
    warm(s1)
    b = M.DeviceBuffer(4096, stream=s1)
    ptr = b.ptr
    gate.block(s2)
    M.memset(b, 1, stream=s2, non_blocking=True)
    before = fast()
    b.close()
    assert delta(before)["device_free"] == 0
    c = M.DeviceBuffer(4096, stream=s1)
    assert c.ptr != ptr  # still guarded
    gate.release.set()
    s2.synchronize()
    c.close()
    # pinned memory used on a stream is guarded the same way
    h = M.HostBuffer(4096)
    M.copy(M.DeviceBuffer(4096, stream=s1), h, stream=s1, non_blocking=True)
    before = fast()
    h.close()
    assert delta(before)["host_free"] == 0
    s1.synchronize()
    M.empty_cache()
    s1.close()
    s2.close()


def test_collected_on_a_callback_thread_is_deferred(gate: Any) -> None:
    """The releaser-thread rule holds for cached blocks too: a buffer collected on a
    host-callback thread is freed by the releaser, not there."""
    s = S.Stream(1)
    warm()
    box = [M.DeviceBuffer(4096)]
    seen: list[bool] = []

    def drop() -> None:
        before = fast()
        box.clear()  # the C path declines; free_mem hands it to the releaser thread
        seen.append(delta(before)["device_free"] == 0)

    s.launch_host_func(drop)
    s.synchronize()
    assert seen == [True]
    M.empty_cache()  # waits for the releaser
    assert not memory.deferred and M.memory_allocated(0) == 0
    s.close()


def test_deferred_frees_are_done_by_the_next_allocation() -> None:
    warm()
    b = M.DeviceBuffer(4096)
    with memory.live_lock:
        memory.deferred.append(b.mem)  # as a host-callback thread leaves it
    before = fast()
    c = M.DeviceBuffer(4096)
    assert delta(before)["device_alloc"] == 0  # the Python path freed it first
    assert not memory.deferred and b.mem.base == 0
    c.close()


def test_zero_byte_buffer() -> None:
    s = S.Stream(0)
    warm(s)
    before = fast()
    z = M.DeviceBuffer(0, stream=s)
    assert z.ptr == 0 and z.nbytes == 0 and not z.closed
    M.memset(z, 1, stream=s)
    z.close()
    assert z.closed and delta(before) == {
        "device_alloc": 1,
        "device_free": 1,
        "host_alloc": 0,
        "host_free": 0,
    }
    assert R.counters(0)["allocated"] == 0 and _memcore.live_count() == 0
    s.close()


def test_threads_share_the_cache() -> None:
    streams = [S.Stream(0) for _ in range(3)]
    for s in streams:
        warm(s)
    errs: list[BaseException] = []

    def work(i: int) -> None:
        s = streams[i % 3]
        for k in range(300):
            b = M.DeviceBuffer(512 * (1 + k % 7), stream=s)
            h = M.HostBuffer(512 * (1 + k % 5))
            if k % 3:
                b.close()
            h.close()

    ts = [threading.Thread(target=_capture, args=(errs, lambda i=i: work(i))) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errs, errs
    gc.collect()
    assert M.memory_allocated() == 0 and _memcore.live_count() == 0
    assert pyacl_rt.host_memory_stats()["allocations.current"] == 0
    for s in streams:
        s.close()


def test_finalize_frees_hit_path_buffers_and_a_new_runtime_serves_again() -> None:
    s = S.Stream(0)
    warm(s)
    b = M.DeviceBuffer(4096, stream=s)
    h = M.HostBuffer(4096)
    assert b.mem.fast and h.mem.fast
    runtime.finalize()
    assert b.closed and h.closed and _memcore.live_count() == 0 and not _memcore.pools()
    b.close()  # no-op after finalize
    with pytest.raises(errors.RuntimeFinalizedError):
        _ = b.ptr
    runtime.init()
    pyacl_rt.set_device(0)
    warm()
    before = fast()
    M.DeviceBuffer(4096).close()
    M.HostBuffer(4096).close()
    assert delta(before)["device_alloc"] == 1 and delta(before)["host_alloc"] == 1


def test_hit_paths_on_another_thread_during_finalize_pass_the_gate() -> None:
    """Issue 12 items 4-5 for the C buffer life: once finalize closed its gate, a
    DeviceBuffer / HostBuffer created, closed or collected on another thread takes the
    Python path (gated) instead of the C hit path - creation raises RuntimeFinalizedError,
    close() and collection leave the memory to finalize's release - so nothing comes out
    of, or goes back into, a cache that finalize is tearing down, and no runtime call
    (the hit path's aclrtGetCurrentContext) is made (before, the hit paths ran there)."""
    s = S.Stream(0)
    warm(s)
    b = M.DeviceBuffer(4096, stream=s)
    h = M.HostBuffer(4096)
    box = [M.DeviceBuffer(4096, stream=s), M.HostBuffer(4096)]
    assert b.mem.fast and h.mem.fast and all(x.mem.fast for x in box)
    seen: dict[str, Any] = {}
    go, done = threading.Event(), threading.Event()

    def other_thread() -> None:
        M.DeviceBuffer(4096, stream=s).close()  # sets this thread's context up:
        M.HostBuffer(4096).close()
        before = fast()
        M.DeviceBuffer(4096, stream=s).close()  # its buffers take the hit path now
        M.HostBuffer(4096).close()
        seen["before"] = delta(before)
        go.wait(60)
        before_finalize = fast()
        for name, make in (
            ("device", lambda: M.DeviceBuffer(4096, stream=s)),
            ("host", lambda: M.HostBuffer(4096)),
        ):
            try:
                make()
                seen[name] = "created"
            except errors.RuntimeFinalizedError:
                seen[name] = "refused"
        b.close()
        h.close()
        box.clear()  # collected here
        seen["fast"] = delta(before_finalize)
        seen["live"] = _memcore.live_count()
        done.set()

    def during_finalize() -> None:  # on the finalizing thread, the gate closed
        seen["gate closed"] = lowlevel.fast._gate_state()[0]
        go.set()
        done.wait(60)

    t = threading.Thread(target=other_thread)
    t.start()
    while "before" not in seen:
        t.join(0.01)
    runtime.register_release_hook(during_finalize, runtime.PRIORITY_EVENTS - 1, once=True)
    runtime.finalize()
    t.join(60)
    assert seen.pop("gate closed") is True
    assert seen.pop("before") == {
        "device_alloc": 1,
        "device_free": 1,
        "host_alloc": 1,
        "host_free": 1,
    }
    assert seen == {
        "device": "refused",
        "host": "refused",
        "fast": {"device_alloc": 0, "device_free": 0, "host_alloc": 0, "host_free": 0},
        "live": 4,  # left to finalize's release of memory ...
    }
    assert _memcore.live_count() == 0 and b.closed and h.closed  # ... which freed them
    runtime.init()
    pyacl_rt.set_device(0)
    warm()


def test_fork_child_forgets_hit_path_buffers(run_python: Any) -> None:
    code = """
        import os
        import pyacl_rt
        import pyacl_rt._memory as M
        from pyacl_rt import _memcore, errors
        pyacl_rt.set_device(0)
        M.DeviceBuffer(64).close()
        M.HostBuffer(64).close()
        a = M.DeviceBuffer(64)
        h = M.HostBuffer(64)
        assert a.mem.fast and h.mem.fast
        pid = os.fork()
        if pid == 0:
            ok = a.closed and h.closed and _memcore.live_count() == 0 and not _memcore.pools()
            try:
                a.fill(0)
                ok = False
            except errors.ForkedProcessError:
                pass
            del a, h
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0, status
        a.fill(1)
        assert bytes(a.copy_to_host()) == b"\\x01" * 64
        a.close()
        h.close()
        print("OK")
    """
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert "OK" in res.stdout


# ------------------------------------------------------------------- records
def test_mem_record_operations() -> None:
    m = _memcore.Mem(0x1000, 64, 0, None)
    assert (m.base, m.ptr, m.nbytes, m.device) == (0x1000, 0x1000, 64, 0)
    assert m.gen == runtime.generation() and m.inuse == 0 and not m.registered
    assert m.streams == [] and m.exports == [] and m.dead == "buffer is closed"
    assert m.rel is None and m.release is None and m.owner is None
    assert m.hold() == 0x1000 and m.inuse == 1
    with pytest.raises(BufferError, match="another thread"):
        m.claim_close("X")
    m.unhold()
    m.unhold()  # never below 0
    assert m.inuse == 0
    assert m.add_export("token") == 0x1000
    with pytest.raises(BufferError, match="1 DLPack export"):
        m.claim_close("X")
    m.exports.clear()
    with pytest.raises(BufferError, match="2 exported view"):
        m.claim_close("HostBuffer", 2)
    before = R.counters(0)
    m.register()
    assert m.registered and m in _memcore.live()
    assert R.counters(0)["allocated"] == before["allocated"] + 64
    assert m.claim_close("X") == 0x1000 and m.ptr == 0
    assert m.hold() == 0 and m.add_export("t") == 0 and m.claim_close("X") == 0
    assert m.take_base() == 0x1000 and m.take_base() == 0 and not m.registered
    after = R.counters(0)
    assert after["allocated"] == before["allocated"] and after["frees"] == before["frees"] + 1
    imported = _memcore.Mem(0x2000, 32, 0, None)
    imported.release = lambda: None
    imported.register()
    assert R.counters(0)["allocs"] == after["allocs"]  # DLPack imports are not counted
    imported.take_base()
    assert _memcore.DEAD.ptr == 0 and not _memcore.DEAD.registered


def test_buffer_base_attributes() -> None:
    b = M.DeviceBuffer.__new__(M.DeviceBuffer)
    assert b.mem is _memcore.DEAD and b.closed and not b._owns
    b.close()  # an empty object: nothing to do
    with pytest.raises(AttributeError, match="readonly"):
        b.mem = _memcore.DEAD  # type: ignore[misc]
    real = M.DeviceBuffer(64)
    assert real._owns
    with pytest.raises(AttributeError, match="readonly"):
        real.window_nbytes = 5  # type: ignore[misc]
    with pytest.raises(IndexError, match="outside a buffer of 64 bytes"):
        real._view(60, 8)
    with pytest.raises(RuntimeError, match="called again"):
        M.DeviceBuffer.__init__(real, 64)
    with pytest.raises(RuntimeError, match="already owns"):
        real.own_mem(_memcore.Mem(1, 1, 0, None))
    real.close()


def test_subclasses_work() -> None:
    class Tagged(M.DeviceBuffer):
        def __init__(self, nbytes: int, tag: str) -> None:
            super().__init__(nbytes)
            self.tag = tag

    t = Tagged(128, "x")
    assert t.tag == "x" and t.nbytes == 128 and isinstance(t, M.DeviceBuffer)
    t.close()

    class Plain(M.HostBuffer):
        pass

    p = Plain(64)
    assert memoryview(p).nbytes == 64  # type: ignore[arg-type]
    p.close()


# ----------------------------------------------------------------- pinned pool
def test_pinned_pool_keeps_host_memory_stats() -> None:
    warm()
    M.empty_cache()
    st0 = pyacl_rt.host_memory_stats()
    hs = [M.HostBuffer(1000) for _ in range(3)]  # 1024-byte blocks
    st = pyacl_rt.host_memory_stats()
    assert st["allocations.current"] == 3 and st["allocated_bytes.current"] == 3072
    assert st["num_host_alloc"] == st0["num_host_alloc"] + 3
    for h in hs:
        h.close()
    again = [M.HostBuffer(700) for _ in range(3)]  # the same blocks, from C
    st = pyacl_rt.host_memory_stats()
    assert st["num_host_alloc"] == st0["num_host_alloc"] + 3
    assert st["allocated_bytes.peak"] >= 3072 and st["reserved_bytes.current"] >= 3072
    assert A._backend.host is not None
    for h in again:
        h.close()
    M.empty_cache()
    st = pyacl_rt.host_memory_stats()
    assert st["reserved_bytes.current"] == 0 and st["allocations.current"] == 0
    assert st["num_host_free"] == st0["num_host_free"] + 3


def test_pinned_blocks_under_pending_work_are_checked_first(gate: Any) -> None:
    """While pinned blocks freed under pending work wait for their events, pool hits
    take the Python path, which checks them (guard events go back to their pool)."""
    s = S.Stream(0)
    warm()
    dev = M.DeviceBuffer(4096, stream=s)
    h = M.HostBuffer(4096)
    gate.block(s)
    M.copy(dev, h, stream=s, non_blocking=True)
    h.close()  # pending: s has not run the copy
    pool = A._backend.host
    assert pool is not None and len(pool.pending) == 1
    before = fast()
    M.HostBuffer(100).close()
    assert delta(before)["host_alloc"] == 0 and len(pool.pending) == 1
    gate.release.set()
    s.synchronize()
    M.HostBuffer(100).close()  # the Python path finds the guard passed
    assert not pool.pending
    before = fast()
    M.HostBuffer(4096).close()
    assert delta(before)["host_alloc"] == 1
    dev.close()
    s.close()
