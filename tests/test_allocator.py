"""The caching allocator (pyacl_rt._allocator): reuse, stream rules, OOM path,
statistics, snapshots, pinned host pool. Real allocations are counted with the
mock's aclmock* introspection (mock_control)."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import _clean_env

import pyacl_rt
from pyacl_rt import _allocator as A
from pyacl_rt import _device, _releaser, errors
from pyacl_rt import _memory as M
from pyacl_rt import _stream as S
from pyacl_rt import _watch as W
from pyacl_rt._memory import backend as _membackend
from pyacl_rt._memory.torchstats import FIELDS, KINDS, POOLS, SCALARS
from pyacl_rt.mock import mock_control

MiB = 1 << 20


def allocations(device: int = 0) -> int:
    return mock_control().stat("allocations", device)


@pytest.fixture(autouse=True)
def caching(mock_loaded: Any) -> Iterator[A._device.DeviceAllocator]:
    prev = _membackend.select("caching")
    pyacl_rt.set_device(0)
    M.empty_cache()
    M.reset_peak_memory_stats()
    M.reset_accumulated_memory_stats()
    try:
        yield A._backend.allocator(0, _device.primaries[0])
    finally:
        mock_control().clear_faults()
        _membackend.select(prev.name)


def test_freed_block_is_reused_without_aclrtMalloc(caching: Any) -> None:
    base = allocations()
    first = M.DeviceBuffer(1000)
    ptr = first.ptr
    first.close()
    assert allocations() == base + 1  # one 2 MiB segment stays cached
    for _ in range(50):
        with M.DeviceBuffer(1000) as b:
            assert b.ptr == ptr
    assert allocations() == base + 1
    st = M.memory_stats()
    assert st["num_device_alloc"] == 1 and st["allocation.all.allocated"] == 51
    M.empty_cache()
    assert allocations() == base and M.memory_reserved() == 0


def test_same_stream_reuse_is_stream_ordered(gate: Any) -> None:
    """A block freed with work still queued on its own stream is reused at once by
    that stream: the new work runs after the old one."""
    s = S.Stream(0)
    h = M.HostBuffer(4096)
    np.asarray(h)[:] = 7
    a = M.DeviceBuffer(4096, stream=s)
    gate.block(s)
    M.memcpy_async(a, h, 4096, s)  # queued behind the gate
    ptr = a.ptr
    a.close()  # returns at once (the native backend would wait)
    b = M.DeviceBuffer(4096, stream=s)
    assert b.ptr == ptr
    gate.release.set()
    s.synchronize()
    b.close()
    h.close()
    s.close()


def test_block_never_goes_to_another_stream_while_its_work_is_pending(
    gate: Any, caching: Any
) -> None:
    s1, s2 = S.Stream(0), S.Stream(0)
    a = M.DeviceBuffer(4096, stream=s1)
    ptr = a.ptr
    gate.block(s1)
    M.memset(a, 1, stream=s1, non_blocking=True)
    a.close()
    others = [M.DeviceBuffer(4096, stream=s2) for _ in range(4)]
    assert ptr not in {o.ptr for o in others}  # s1's work is pending
    gate.release.set()
    s1.synchronize()
    for o in others:
        o.close()
    # a miss on s2 adopts s1's wholly free segment once an event on s1 completed
    big = M.DeviceBuffer(MiB, stream=s2)
    again = M.DeviceBuffer(4096, stream=s2)
    assert ptr in (big.ptr, again.ptr) or allocations() == 2
    big.close()
    again.close()
    s1.close()
    s2.close()


@pytest.mark.parametrize("how", ["copy", "record_stream"])
def test_cross_stream_use_is_event_guarded(gate: Any, caching: Any, how: str) -> None:
    """A buffer used on a second stream is not reused (even by its own stream) until
    an event recorded on that stream at free time completed."""
    s1, s2 = S.Stream(0), S.Stream(0)
    a = M.DeviceBuffer(4096, stream=s1)
    ptr = a.ptr
    gate.block(s2)
    if how == "copy":
        M.memset(a, 3, stream=s2, non_blocking=True)  # pyacl_rt records s2 itself
    else:
        pyacl_rt.lowlevel.fast.memset_async(a.ptr, 4096, 3, 4096, s2.handle)
        a.record_stream(s2)
    a.close()
    assert len(caching.pending) == 1
    b = M.DeviceBuffer(4096, stream=s1)
    assert b.ptr != ptr
    assert caching.process_pending() == 0  # the event on s2 has not completed
    gate.release.set()
    s2.synchronize()
    assert caching.process_pending() == 1
    b.close()
    c = M.DeviceBuffer(4096, stream=s1)
    assert c.ptr == ptr
    c.close()
    st = M.memory_stats()
    assert st["active_bytes.all.current"] == 0
    s1.close()
    s2.close()


def test_record_stream_checks_its_argument() -> None:
    with M.DeviceBuffer(16) as b, pytest.raises(TypeError, match="Stream"):
        b.record_stream("s")  # type: ignore[arg-type]
    with pytest.raises(errors.ObjectClosedError):
        b.record_stream(pyacl_rt.current_stream())


def test_oom_retry_frees_cached_segments(caching: Any) -> None:
    base = allocations()
    big = M.DeviceBuffer(3 * MiB)  # a 20 MiB large-pool segment, then cached
    big.close()
    assert allocations() == base + 1
    mock_control().inject_fault("aclrtMalloc", 207001, nth=1)
    with M.DeviceBuffer(8 * MiB) as b:  # fits the cached segment: no aclrtMalloc
        assert b.nbytes == 8 * MiB
    assert M.memory_stats()["num_alloc_retries"] == 0
    small = M.DeviceBuffer(1000)  # small pool miss: aclrtMalloc fails once
    st = M.memory_stats()
    assert st["num_alloc_retries"] == 1 and st["num_ooms"] == 0
    assert allocations() == base + 1  # the cached 20 MiB segment was freed first
    assert st["segment.large_pool.current"] == 0
    small.close()


def test_failed_segment_bookkeeping_frees_the_segment(caching: Any) -> None:
    """A new segment whose bookkeeping fails (MemoryError in the core) goes back to
    the runtime instead of leaking."""
    base = allocations()
    real = caching.core

    class FailingCore:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def add_segment(self, *args: Any) -> None:
            raise MemoryError("no memory for the segment record")

    caching.core = FailingCore()
    try:
        with pytest.raises(MemoryError):
            M.DeviceBuffer(3 * MiB)
    finally:
        caching.core = real
    assert allocations() == base


def test_oom_error_reports_allocated_reserved_free(caching: Any) -> None:
    keep = M.DeviceBuffer(1000)
    mock_control().inject_fault("aclrtMalloc", 207001, nth=0)
    with pytest.raises(errors.AclOutOfMemoryError) as ei:
        M.DeviceBuffer(64 * MiB)
    msg = str(ei.value)
    for word in ("out of memory", "device 0", "GiB already allocated", "GiB free", "reserved"):
        assert word in msg, msg
    assert isinstance(ei.value, MemoryError)
    mock_control().clear_faults()
    st = M.memory_stats()
    assert st["num_ooms"] == 1 and st["num_alloc_retries"] >= 1
    keep.close()


def test_memory_fraction_limits_the_cache(caching: Any) -> None:
    with pytest.raises(ValueError):
        A.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError):
        A.set_per_process_memory_fraction("half")  # type: ignore[arg-type]
    total = pyacl_rt.mem_get_info(0)[1]
    try:
        pyacl_rt.set_per_process_memory_fraction(4 * MiB / total)
        with M.DeviceBuffer(1000):
            pass  # a 2 MiB segment fits
        with pytest.raises(pyacl_rt.OutOfMemoryError, match="memory fraction"):
            M.DeviceBuffer(5 * MiB)
        assert pyacl_rt.get_per_process_memory_fraction() == pytest.approx(4 * MiB / total)
    finally:
        pyacl_rt.set_per_process_memory_fraction(1.0)


def test_memory_stats_has_torch_keys_and_real_numbers(caching: Any) -> None:
    st = M.memory_stats()
    expected = {f"{k}.{p}.{f}" for k in KINDS[:9] for p in POOLS for f in FIELDS}
    expected |= {f"{k}.{f}" for k in KINDS[9:] for f in FIELDS}
    expected |= set(SCALARS) | {"free_bytes", "total_bytes"}
    assert set(st) == expected
    a = M.DeviceBuffer(1000)
    b = M.DeviceBuffer(3 * MiB)
    st = M.memory_stats()
    assert st["allocated_bytes.small_pool.current"] == 1024
    assert st["allocated_bytes.large_pool.current"] == 3 * MiB
    assert st["requested_bytes.all.current"] == 1000 + 3 * MiB
    assert st["reserved_bytes.all.current"] == 22 * MiB == M.memory_reserved()
    assert st["segment.all.current"] == 2 and st["inactive_split.all.current"] == 2
    assert M.memory_allocated() == 1024 + 3 * MiB
    a.close()
    b.close()
    assert M.memory_allocated() == 0 and M.max_memory_allocated() == 1024 + 3 * MiB
    M.reset_peak_memory_stats()
    assert M.max_memory_allocated() == 0
    M.reset_accumulated_memory_stats()
    assert M.memory_stats()["allocation.all.allocated"] == 0
    text = M.memory_summary()
    assert "Allocated memory" in text and "NPU reserved memory" in text


def test_raw_address_api(caching: Any) -> None:
    s = pyacl_rt.current_stream()
    p = pyacl_rt.caching_allocator_alloc(100, stream=s)
    assert M.memory_allocated() == 512
    pyacl_rt.caching_allocator_delete(p)
    with pytest.raises(ValueError):
        pyacl_rt.caching_allocator_delete(p)
    with pytest.raises(TypeError):
        pyacl_rt.caching_allocator_alloc(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pyacl_rt.caching_allocator_alloc(8, stream=object())


def test_threads_share_the_cache(run_threads: Callable[..., list[BaseException]]) -> None:
    streams = [S.Stream(0), S.Stream(0)]

    def work(i: int) -> None:
        pyacl_rt.set_device(0)
        s = streams[i % 2]
        for k in range(200):
            b = M.DeviceBuffer(512 * (1 + (i * 7 + k) % 300), stream=s)
            M.memset(b, k % 256, stream=s, non_blocking=True)
            if k % 5 == 0:
                b.record_stream(streams[(i + 1) % 2])
            b.close()

    assert run_threads(8, work) == []
    for s in streams:
        s.synchronize()
    assert M.memory_allocated() == 0
    M.empty_cache()
    assert M.memory_reserved() == 0 and allocations() == 0
    for s in streams:
        s.close()


# ------------------------------------------------------------------ pinned host
def test_pinned_pool_reuses_blocks() -> None:
    base = mock_control().stat("host_allocations")
    n0 = pyacl_rt.host_memory_stats()["num_host_alloc"]
    h = M.HostBuffer(1000)
    ptr = h.ptr
    h.close()
    for _ in range(10):
        with M.HostBuffer(700) as h2:  # same 1 KiB block
            assert h2.ptr == ptr
    assert mock_control().stat("host_allocations") == base + 1
    st = pyacl_rt.host_memory_stats()
    assert st["num_host_alloc"] == n0 + 1 and st["allocated_bytes.current"] == 0
    M.empty_cache()
    assert mock_control().stat("host_allocations") == base


def test_pinned_block_reused_only_after_its_streams(gate: Any) -> None:
    s = S.Stream(0)
    dev = M.DeviceBuffer(4096)
    h = M.HostBuffer(4096)
    ptr = h.ptr
    gate.block(s)
    M.memcpy_async(dev, h, 4096, s)  # the device will still read h
    h.close()
    h2 = M.HostBuffer(4096)
    assert h2.ptr != ptr
    gate.release.set()
    s.synchronize()
    h3 = M.HostBuffer(4096)
    assert h3.ptr == ptr
    for b in (h2, h3, dev):
        b.close()
    s.close()


def test_interrupted_guard_recording_keeps_the_pinned_block(
    gate: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A raise between taking a freed pinned block out of use (its counters moved to
    held) and queueing it behind its guards lost the block: it was never idle again,
    never freed, and its bytes stayed reserved. Now it is queued, guarded by the
    stream itself, and reused / freed once the stream is done."""
    s = S.Stream(0)
    dev = M.DeviceBuffer(4096)
    h = M.HostBuffer(4096)
    ptr = h.ptr
    gate.block(s)
    M.memcpy_async(dev, h, 4096, s)  # the device will still read h

    def interrupted(ev: int, stream: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(A._guards, "_record_event", interrupted)
    h.close()  # a finalizer-like path: never raises, the interrupt is logged
    monkeypatch.undo()
    host = A._backend.host
    assert host is not None and len(host.pending) == 1
    other = M.HostBuffer(4096)
    assert other.ptr != ptr  # still guarded by the busy stream
    gate.release.set()
    s.synchronize()
    h2 = M.HostBuffer(4096)
    assert h2.ptr == ptr  # back in the pool
    h2.close()
    other.close()
    dev.close()
    M.empty_cache()
    assert pyacl_rt.host_memory_stats()["reserved_bytes.current"] == 0
    s.close()


# ------------------------------------------------------------- snapshots
_ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"}
_STATES = {"active_allocated", "active_pending_free", "inactive"}


def validate_snapshot(snap: Any) -> None:
    """What PyTorch's memory visualizer (torch.cuda._memory_viz and MemoryViz.js)
    reads from a snapshot, checked field by field."""
    assert isinstance(snap, dict) and {"segments", "device_traces"} <= set(snap)
    for seg in snap["segments"]:
        for key, typ in (
            ("device", int),
            ("address", int),
            ("total_size", int),
            ("allocated_size", int),
            ("active_size", int),
            ("requested_size", int),
            ("stream", int),
            ("segment_type", str),
            ("frames", list),
            ("blocks", list),
        ):
            assert isinstance(seg[key], typ), (key, seg)
        assert seg["segment_type"] in ("small", "large")
        addr = seg["address"]
        for blk in seg["blocks"]:
            assert blk["address"] == addr and blk["state"] in _STATES
            assert isinstance(blk["size"], int) and isinstance(blk["requested_size"], int)
            assert blk["requested_size"] <= blk["size"]
            validate_frames(blk["frames"])
            addr += blk["size"]
        assert addr == seg["address"] + seg["total_size"]
        allocated = sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
        assert allocated == seg["allocated_size"] <= seg["active_size"] <= seg["total_size"]
    assert isinstance(snap["device_traces"], list)
    for trace in snap["device_traces"]:
        assert isinstance(trace, list)
        for te in trace:
            assert te["action"] in _ACTIONS
            for key in ("addr", "size", "stream", "time_us"):
                assert isinstance(te[key], int), (key, te)
            validate_frames(te["frames"])


def validate_frames(frames: Any) -> None:
    assert isinstance(frames, list)
    for f in frames:
        assert isinstance(f["filename"], str) and isinstance(f["line"], int)
        assert isinstance(f["name"], str)


def test_history_and_snapshot_in_torch_format(tmp_path: Path, caching: Any) -> None:
    pyacl_rt.record_memory_history("all")
    try:
        a = M.DeviceBuffer(1000)
        b = M.DeviceBuffer(3 * MiB)
        a.close()
        path = tmp_path / "snap.pickle"
        pyacl_rt.dump_snapshot(str(path))
        snap = pickle.loads(path.read_bytes())
        validate_snapshot(snap)
        actions = [te["action"] for te in snap["device_traces"][0]]
        assert actions[:4] == ["segment_alloc", "alloc", "segment_alloc", "alloc"]
        assert actions[4:] == ["free_requested", "free_completed"]
        blocks = [blk for seg in snap["segments"] for blk in seg["blocks"]]
        live = [blk for blk in blocks if blk["state"] == "active_allocated"]
        assert [blk["address"] for blk in live] == [b.ptr]
        assert any(
            f["name"] == "test_history_and_snapshot_in_torch_format" for f in live[0]["frames"]
        )
        assert pyacl_rt.memory_snapshot() == snap["segments"]
        b.close()
    finally:
        pyacl_rt.record_memory_history(None)
    validate_snapshot(A._snapshot())
    with pytest.raises(ValueError):
        pyacl_rt.record_memory_history("sometimes")


def test_snapshot_loads_in_torch_memory_viz(tmp_path: Path, caching: Any) -> None:
    """Optional: feed the snapshot to torch's own _memory_viz helpers."""
    memory_viz = pytest.importorskip("torch.cuda._memory_viz")
    pyacl_rt.record_memory_history("all")
    try:
        keep = M.DeviceBuffer(5000)
        M.DeviceBuffer(2 * MiB).close()
        snap = A._snapshot()
    finally:
        pyacl_rt.record_memory_history(None)
    assert "segments: 2" in memory_viz.segsum(snap)
    text = memory_viz.trace(snap)
    assert "cudaMalloc" in text and "free completed" in text
    assert "<html" in memory_viz.trace_plot(snap).lower()
    assert "<html" in memory_viz.segment_plot(snap).lower()
    assert memory_viz.filter_alloc_free_pairs(dict(snap))["device_traces"][0]
    keep.close()


# ------------------------------------------------------------- lifecycle
def test_native_backend_from_environment(run_python: Callable[..., Any]) -> None:
    proc = run_python(
        "import pyacl_rt as p\n"
        "from pyacl_rt._memory import backend\n"
        "b = p.DeviceBuffer(1000)\n"
        "print(p.memory_allocated(), p.memory_reserved(), backend.device().name)\n",
        env=_clean_env(PYACL_RT_BACKEND="mock", PYACL_RT_ALLOCATOR="native"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1000", "1000", "native"]


def test_finalize_frees_cached_segments(run_python: Callable[..., Any]) -> None:
    proc = run_python(
        "import pyacl_rt as p\n"
        "from pyacl_rt.mock import mock_control, REPORT_LAST_FINALIZE\n"
        "keep = p.DeviceBuffer(1000)\n"
        "p.DeviceBuffer(5 << 20).close()\n"
        "h = p.HostBuffer(10); h.close()\n"
        "raw = p.caching_allocator_alloc(64)\n"
        "p.finalize()\n"
        "print(repr(mock_control().leak_report(REPORT_LAST_FINALIZE)))\n"
        "print(keep.closed)\n",
    )
    assert proc.returncode == 0, proc.stderr
    report, closed = proc.stdout.strip().splitlines()
    assert "allocations" not in report and "device bytes" not in report, report
    assert closed == "True"


def test_trim_racing_with_finalize_frees_its_segments(run_python: Callable[..., Any]) -> None:
    """A trim (run by a free that left the cache over budget, on any thread) takes its
    segments out of the cache, then frees them one by one: finalize on another thread
    waits for it to finish (a gated section) before it releases the allocator. Before,
    the gate refused the trim's later aclrtFree calls: those segments, no longer in the
    cache, leaked past aclFinalize."""
    proc = run_python(
        """
        import threading, time
        import pyacl_rt as p
        from pyacl_rt import _allocator as A, _device
        from pyacl_rt.lowlevel import fast
        from pyacl_rt.mock import mock_control, REPORT_LAST_FINALIZE
        p.set_device(0)
        alloc = A._backend.allocator(0, _device.primaries[0])
        for b in [p.DeviceBuffer(12 << 20) for _ in range(3)]:  # a segment each
            b.close()  # cached
        real = A._device.lib
        freed, paused, go = [], threading.Event(), threading.Event()
        class PauseAfterFirstFree:
            def __getattr__(self, name):
                return getattr(real, name)
            def aclrtFree(self, base):
                rc = real.aclrtFree(base)
                freed.append((threading.current_thread().name, rc))
                if len(freed) == 1:
                    paused.set()
                    go.wait(60)
                return rc
        A._device.lib = PauseAfterFirstFree()
        t = threading.Thread(target=alloc.trim, name="trim")
        t.start()
        paused.wait(60)
        fin = threading.Thread(target=p.finalize)
        fin.start()
        while not fast._gate_state()[0]:
            time.sleep(0.001)
        time.sleep(0.1)
        go.set()
        t.join(60)
        fin.join(60)
        print(freed)
        print(repr(mock_control().leak_report(REPORT_LAST_FINALIZE)))
        """
    )
    assert proc.returncode == 0, proc.stderr
    freed, report = proc.stdout.strip().splitlines()
    assert freed == "[('trim', 0), ('trim', 0), ('trim', 0)]", freed
    assert "allocations" not in report and "device bytes" not in report, report


def test_fork_child_forgets_the_cache(run_python: Callable[..., Any]) -> None:
    proc = run_python(
        "import os, pyacl_rt as p\n"
        "from pyacl_rt import _allocator as A\n"
        "b = p.DeviceBuffer(1000); b.close(); h = p.HostBuffer(8); h.close()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if not A._backend.devices and A._backend.host is None else 3)\n"
        "_, st = os.waitpid(pid, 0)\n"
        "print(os.WEXITSTATUS(st), p.memory_reserved(0))\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", str(2 << 20)]


def test_empty_buffer_takes_nothing_from_the_cache(caching: Any) -> None:
    base = allocations()
    with M.DeviceBuffer(0) as b:
        assert b.nbytes == 0 and allocations() == base
    assert M.memory_stats()["allocation.all.allocated"] == 0


def test_free_on_callback_thread_returns_block_to_cache(caching: Any) -> None:
    """A cached buffer dropped inside a host callback is given back by the releaser
    thread (no runtime call on the callback thread), then reused."""
    s = S.Stream(0)
    b = M.DeviceBuffer(4096, stream=s)
    ptr = b.ptr
    box = [b]
    del b

    def drop() -> None:
        box.clear()

    s.launch_host_func(drop)
    s.synchronize()
    _releaser.flush()  # the releaser thread gave the block back
    assert M.memory_allocated() == 0 and M.memory_reserved() == 2 * MiB
    with M.DeviceBuffer(4096, stream=s) as again:
        assert again.ptr == ptr
    s.close()


def test_raw_handle(caching: Any) -> None:
    s = S.Stream(0)
    h = pyacl_rt.caching_allocator(s)
    base = allocations()
    p = h.alloc(1000)  # miss: a new segment through the Python slow path
    assert allocations() == base + 1 and M.memory_allocated() == 1024
    h.free(p)
    for _ in range(20):
        q = h.alloc(np.int64(1000))  # hit: one C call
        assert q == p
        h.free(q)
    assert allocations() == base + 1 and M.memory_allocated() == 0
    with pytest.raises(ValueError, match="not an address"):
        h.free(p)
    with pytest.raises(TypeError, match="nbytes"):
        h.alloc(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ptr"):
        h.free("p")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stream"):
        pyacl_rt.caching_allocator(stream=3)
    other = pyacl_rt.caching_allocator(S.Stream(0))
    r = other.alloc(100)
    with pytest.raises(ValueError):
        h.free(r + 1)
    other.free(r)
    s.close()


def test_raw_handle_is_traced_while_recording(caching: Any) -> None:
    h = pyacl_rt.caching_allocator()
    pyacl_rt.record_memory_history("all")
    try:
        p = h.alloc(4096)
        h.free(p)
        actions = [(te["action"], te["addr"]) for te in A._snapshot()["device_traces"][0]]
    finally:
        pyacl_rt.record_memory_history(None)
    assert ("alloc", p) in actions and ("free_completed", p) in actions


def test_raw_handle_after_finalize(run_python: Callable[..., Any]) -> None:
    proc = run_python(
        "import pyacl_rt as p\n"
        "h = p.caching_allocator()\n"
        "x = h.alloc(100)\n"
        "p.finalize()\n"
        "try:\n"
        "    h.alloc(100)\n"
        "except p.RuntimeFinalizedError:\n"
        "    print('refused')\n"
        "try:\n"
        "    h.free(x)\n"
        "except ValueError:\n"
        "    print('forgotten')\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["refused", "forgotten"]


def test_dlpack_exports_of_cached_buffers(caching: Any) -> None:
    """A DLPack view keeps a cached block allocated; closing the last user gives the
    block back to the cache (not to the runtime)."""
    base = allocations()
    dev = M.DeviceBuffer(64)
    ptr = dev.ptr
    view = pyacl_rt.from_dlpack(dev)
    del dev
    assert view.ptr == ptr and M.memory_allocated() == 512
    view.close()
    assert M.memory_allocated() == 0 and allocations() == base + 1
    with M.DeviceBuffer(64) as again:
        assert again.ptr == ptr
    with M.HostBuffer(16) as pinned:
        arr = np.from_dlpack(pinned)
        arr[:] = 5
        with pytest.raises(BufferError):
            pinned.close()
        del arr


# ------------------------------------------------------- hostile sizes (issue 12)
#: Sizes whose rounding (512 B, 2 MiB, next power of two) or byte counts overflow 64
#: bits or the allocator's signed statistics, and sizes no device can hold.
HUGE_SIZES = [2**64 - 1, 2**64 - 32, 2**64 - 64, 2**64 - 2 * MiB, 2**63 + 1, 2**63, 2**63 - 1]


def _entry_points(s: Any) -> dict[str, Callable[[int], object]]:
    return {
        "DeviceBuffer": lambda n: M.DeviceBuffer(n),
        "DeviceBuffer(stream=)": lambda n: M.DeviceBuffer(n, stream=s),
        "caching_allocator(s).alloc": lambda n: pyacl_rt.caching_allocator(s).alloc(n),
        "caching_allocator_alloc": lambda n: pyacl_rt.caching_allocator_alloc(n, stream=s),
        "HostBuffer": lambda n: M.HostBuffer(n),
    }


@pytest.mark.parametrize("nbytes", HUGE_SIZES)
def test_huge_sizes_raise_before_anything_is_allocated(caching: Any, nbytes: int) -> None:
    """Issue 12: 2**64 - 1 wrapped to a 0-byte block (nbytes 2**64 - 1 over a 2 MiB
    segment the cache owned). Every entry point raises the out-of-memory error native
    raises, naming the size, with nothing allocated and the cache untouched."""
    s = S.Stream(0)
    warm = M.DeviceBuffer(4096, stream=s)  # a cached segment the request must not get
    warm_ptr = warm.ptr
    warm.close()
    before = (allocations(), mock_control().stat("host_allocations"), M.memory_stats())
    for name, fn in _entry_points(s).items():
        with pytest.raises(errors.AclOutOfMemoryError) as ei:
            fn(nbytes)
        assert str(nbytes) in str(ei.value), (name, str(ei.value))
    after = (allocations(), mock_control().stat("host_allocations"), M.memory_stats())
    assert after == before
    with M.DeviceBuffer(4096, stream=s) as again:  # the cached block is intact
        assert again.ptr == warm_ptr
    s.close()


@pytest.mark.parametrize("nbytes", [2**64 - 1, 2**63])
def test_huge_sizes_raise_the_same_family_as_native(native_allocator: None, nbytes: int) -> None:
    for fn in (M.DeviceBuffer, M.HostBuffer):
        with pytest.raises(errors.AclOutOfMemoryError):
            fn(nbytes)


def test_request_larger_than_the_device_keeps_the_cache(caching: Any) -> None:
    """A request no device memory can serve fails at once: the cached segments are not
    given back (the retry could not help)."""
    cached = M.DeviceBuffer(4096)
    cached.close()
    base = allocations()
    total = pyacl_rt.mem_get_info(0)[1]
    with pytest.raises(errors.AclOutOfMemoryError, match=str(total + 1)):
        M.DeviceBuffer(total + 1)
    assert allocations() == base and M.memory_reserved() == 2 * MiB
    assert M.memory_stats()["num_ooms"] == 1


def test_oom_keeps_the_runtime_message(caching: Any) -> None:
    """Issue 12: the allocator's OutOfMemoryError had an empty recent_message; it keeps
    the code, function and text of the aclrtMalloc that failed."""
    with pytest.raises(pyacl_rt.OutOfMemoryError) as ei:
        M.DeviceBuffer(1 << 40)  # more than the mock device's memory
    e = ei.value
    assert e.code == 207001 and e.function == "aclrtMalloc"
    assert e.recent_message and "aclrtMalloc" in e.recent_message, e.recent_message
    assert "runtime message" in str(e) and "GiB already allocated" in str(e)
    # an injected failure: the runtime's own text of that call is kept too
    mock_control().inject_fault("aclrtMalloc", 207018, nth=0)
    with pytest.raises(errors.AclOutOfMemoryError) as ei:
        M.DeviceBuffer(64 * MiB)
    assert ei.value.code == 207018 and ei.value.function == "aclrtMalloc"
    assert ei.value.recent_message


def test_pinned_oom_keeps_the_runtime_message(caching: Any) -> None:
    with pytest.raises(errors.AclOutOfMemoryError) as ei:
        M.HostBuffer(1 << 62)
    e = ei.value
    assert e.function == "aclrtMallocHost" and e.code == 207001
    assert e.recent_message and "aclrtMallocHost" in e.recent_message, e.recent_message


# ------------------------------------------------ guard events (issue 12, item 2)
def _events(device: int = 0) -> int:
    return mock_control().stat("events", device)


def _guard_accounting() -> tuple[int, int, int]:
    """(events created by the guard pools, idle ones, ones held by pending/marks)."""
    pools = list(A._guards._pools.values())
    held = 0
    for a in A._backend.devices.values():
        for _, guards in [*a.pending, *a.marks.values()]:
            held += sum(1 for g in guards if g[0] == "event")
    if A._backend.host is not None:
        for _, guards in A._backend.host.pending:
            held += sum(1 for g in guards if g[0] == "event")
    return sum(len(p.out) for p in pools), sum(len(p.idle) for p in pools), held


def test_guard_events_go_back_to_a_bounded_pool(gate: Any, caching: Any) -> None:
    """Many cross-stream frees under a pending host callback: once their guards passed,
    at most IDLE_MAX events stay idle (the rest are destroyed), and empty_cache()
    destroys those too."""
    base = _events()
    s1, s2 = S.Stream(0), S.Stream(0)
    gate.block(s2)
    n = A._guards.IDLE_MAX + 60
    for _ in range(n):
        b = M.DeviceBuffer(4096, stream=s1)
        M.memset(b, 1, stream=s2, non_blocking=True)
        b.close()  # guarded by an event on s2, behind the gate
    assert len(caching.pending) == n and _guard_accounting() == (n, 0, n)
    gate.release.set()
    s2.synchronize()
    caching.process_pending()
    out, idle, held = _guard_accounting()
    assert held == 0 and out == idle == A._guards.IDLE_MAX
    assert _events() - base <= A._guards.IDLE_MAX + W.MarkerPool.IDLE_MAX
    M.empty_cache()
    assert _guard_accounting() == (0, 0, 0)
    s1.close()
    s2.close()


@pytest.mark.parametrize("pool", ["device", "pinned"])
def test_interrupted_wait_keeps_the_guarded_block(
    gate: Any, caching: Any, monkeypatch: pytest.MonkeyPatch, pool: str
) -> None:
    """A KeyboardInterrupt while empty_cache() waits for a guard event lost the pending
    entry: the block stayed unusable and its events were never given back."""
    s1, s2 = S.Stream(0), S.Stream(0)
    base = _events()
    gate.block(s2)
    if pool == "device":
        b = M.DeviceBuffer(4096, stream=s1)
        M.memset(b, 1, stream=s2, non_blocking=True)
    else:
        b = M.HostBuffer(4096)
        dev = M.DeviceBuffer(4096)
        M.memcpy_async(dev, b, 4096, s2)
    b.close()
    real = A._guards._sync_event

    def interrupted(ev: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(A._guards, "_sync_event", interrupted)
    with pytest.raises(KeyboardInterrupt):
        M.empty_cache()
    monkeypatch.setattr(A._guards, "_sync_event", real)
    out, idle, held = _guard_accounting()
    assert held == 1 and out == idle + held  # the entry and its event are kept
    gate.release.set()
    M.empty_cache()
    assert _guard_accounting() == (0, 0, 0)
    if pool == "device":
        assert M.memory_stats()["active_bytes.all.current"] == 0
        assert M.memory_reserved() == 0
    else:
        dev.close()
        assert pyacl_rt.host_memory_stats()["reserved_bytes.current"] == 0
        M.empty_cache()
    assert _events() == base
    s1.close()
    s2.close()


def test_guards_of_a_failed_free_go_back(caching: Any) -> None:
    """Bookkeeping failing after the guard events were recorded (out of host memory in
    the core) left them neither idle nor guarding anything."""
    s1, s2 = S.Stream(0), S.Stream(0)
    b = M.DeviceBuffer(4096, stream=s1)
    ptr = b.ptr
    M.memset(b, 1, stream=s2, non_blocking=True)
    real = caching.core

    class FailingCore:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def free_pending(self, ptr: int) -> int:
            raise MemoryError("no memory for the free set")

    caching.core = FailingCore()
    try:
        b.close()  # the releaser logs the failure; the block stays allocated
    finally:
        caching.core = real
    out, idle, held = _guard_accounting()
    assert held == 0 and out == idle
    s2.synchronize()
    assert caching.core.free(ptr) == 4096  # still allocated: the cache can take it back
    s1.close()
    s2.close()


def test_failed_completion_gives_each_event_back_once(caching: Any) -> None:
    """complete() failing (out of host memory) after the guards passed: the block is
    completed later, and its events were given back exactly once (an event twice in
    the idle list would be handed to two guards)."""
    s1, s2 = S.Stream(0), S.Stream(0)
    b = M.DeviceBuffer(4096, stream=s1)
    M.memset(b, 1, stream=s2, non_blocking=True)
    b.close()
    s2.synchronize()
    real = caching.core

    class FailingCore:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def complete(self, ptr: int) -> int:
            raise MemoryError("no memory for the free set")

    caching.core = FailingCore()
    try:
        with pytest.raises(MemoryError):
            caching.process_pending()
    finally:
        caching.core = real
    assert caching.process_pending() == 1
    caching.process_pending()
    pools = list(A._guards._pools.values())
    idle = [ev for p in pools for ev in p.idle]
    assert len(idle) == len(set(idle)) == sum(len(p.out) for p in pools) == 1
    assert M.memory_stats()["active_bytes.all.current"] == 0
    s1.close()
    s2.close()
