"""Graphs: NPUGraph capture / replay / reset, the graph() context manager and its capture
modes, typed capture errors, the graph-private memory pool, make_graphed_callables."""

from __future__ import annotations

import gc
import json
import threading
from pathlib import Path

import numpy as np
import pytest

import pyacl_rt as npu
from pyacl_rt import _capture, errors
from pyacl_rt._allocator._graphpool import GraphPool

N = 4096


def _fill(h: npu.HostBuffer, value: int) -> None:
    h.numpy()[:] = value


def _pipeline(h_in: npu.HostBuffer, h_out: npu.HostBuffer, side: npu.Stream) -> list[object]:
    """H2D, a d2d on a side stream (joined and rejoined), memset-add, D2H; returns the
    device buffers it allocated (inside the capture: from the graph's pool)."""
    s = npu.current_stream()
    x = npu.DeviceBuffer(N)
    y = npu.DeviceBuffer(N)
    npu.copy(x, h_in, stream=s, non_blocking=True)
    side.wait_stream(s)
    npu.copy(y, x, stream=side, non_blocking=True)
    s.wait_stream(side)
    npu.copy(h_out, y, stream=s, non_blocking=True)
    return [x, y]


def test_capture_replay_1000_times_two_streams_private_pool() -> None:
    h_in, h_out = npu.HostBuffer(N), npu.HostBuffer(N)
    side = npu.Stream()
    g = npu.NPUGraph()
    with npu.graph(g) as captured:
        assert captured is g
        assert "capturing" in repr(g)
        bufs = _pipeline(h_in, h_out, side)
    assert "captured" in repr(g) and g.handle
    pool_keys = npu._allocator._backend.devices[0].graph_keys
    assert len(pool_keys) == 1
    addrs = [b.ptr for b in bufs]  # type: ignore[attr-defined]
    del bufs
    gc.collect()
    # freed after the capture: the pool keeps the blocks, nobody else gets them
    others = [npu.DeviceBuffer(N) for _ in range(8)]
    assert not {o.ptr for o in others} & set(addrs)
    npu.empty_cache()  # never releases a live graph's pool
    assert pool_keys
    s = npu.current_stream()
    for i in range(1000):
        _fill(h_in, i % 251)
        g.replay()
        s.synchronize()
        assert h_out.numpy()[0] == i % 251 and h_out.numpy()[-1] == i % 251
    g.reset()
    assert not pool_keys and g.handle == 0
    assert "empty" in repr(g)


def test_capture_begin_end_on_current_side_stream_and_recapture() -> None:
    s = npu.Stream()
    h_in, h_out = npu.HostBuffer(N), npu.HostBuffer(N)
    d = npu.DeviceBuffer(N)
    g = npu.NPUGraph()
    with npu.stream(s):
        g.capture_begin()
        npu.copy(d, h_in, stream=s, non_blocking=True)
        npu.copy(h_out, d, stream=s, non_blocking=True)
        g.capture_end()
    with pytest.raises(errors.StreamCaptureError, match="reset"), npu.stream(s):
        g.capture_begin()
    _fill(h_in, 7)
    g.replay()
    npu.current_stream().synchronize()
    assert (h_out.numpy() == 7).all()
    g.reset()
    with pytest.raises(errors.StreamCaptureError, match="captured graph"):
        g.replay()
    with npu.graph(g):  # the same object captures again after reset
        npu.copy(h_out, d, stream=npu.current_stream(), non_blocking=True)
    g.replay()
    npu.synchronize()
    g.reset()


def test_default_stream_is_refused() -> None:
    g = npu.NPUGraph()
    with pytest.raises(errors.StreamCaptureError, match="default stream"):
        g.capture_begin()
    assert not _capture.by_stream


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_synchronize_in_capture_raises_typed_error_and_discards(mode: str) -> None:
    g = npu.NPUGraph()
    with pytest.raises(errors.StreamCaptureError) as ei, npu.graph(g, capture_error_mode=mode):
        npu.current_stream().synchronize()
    assert ei.value.code == 107041
    assert "capture" in str(ei.value)
    assert g.handle == 0 and not _capture.by_stream
    assert npu.current_stream().query()  # nothing left capturing


def test_capture_end_reports_invalidation() -> None:
    g = npu.NPUGraph()
    s = npu.Stream()
    with npu.stream(s):
        g.capture_begin()
        with pytest.raises(errors.StreamCaptureError):
            s.query()
        with pytest.raises(errors.StreamCaptureInvalidatedError) as ei:
            g.capture_end()
    assert ei.value.code == 507903
    assert g.handle == 0 and not _capture.by_stream


def test_event_recorded_in_capture_cannot_be_queried() -> None:
    g = npu.NPUGraph()
    with pytest.raises(errors.StreamCaptureError) as ei, npu.graph(g):
        ev = npu.current_stream().record_event()
        ev.query()
    assert ei.value.code == 107028


def test_sync_copy_in_global_capture_is_refused() -> None:
    d = npu.DeviceBuffer(N)
    h = npu.HostBuffer(N)
    g = npu.NPUGraph()
    with pytest.raises(errors.StreamCaptureError) as ei, npu.graph(g):
        npu.copy(d, h)  # a synchronous copy
    assert ei.value.code in (107041, 107031)


def test_pageable_async_copy_is_unsupported() -> None:
    d = npu.DeviceBuffer(N)
    g = npu.NPUGraph()
    with (
        pytest.raises(errors.StreamCaptureUnsupportedError) as ei,
        npu.graph(g, capture_error_mode="relaxed"),
    ):
        npu.copy(d, bytearray(N), stream=npu.current_stream(), non_blocking=True)
    assert ei.value.code == 107030


def test_unjoined_side_stream_fails_capture_end() -> None:
    side = npu.Stream()
    d, e = npu.DeviceBuffer(N), npu.DeviceBuffer(N)
    g = npu.NPUGraph()
    with pytest.raises(errors.StreamCaptureError) as ei, npu.graph(g):
        side.wait_stream(npu.current_stream())
        npu.copy(e, d, stream=side, non_blocking=True)  # never rejoined
    assert ei.value.code == 107025
    assert g.handle == 0


def test_end_on_another_thread_in_global_mode_keeps_capturing() -> None:
    s = npu.Stream()
    g = npu.NPUGraph()
    with npu.stream(s):
        g.capture_begin(capture_error_mode="global")
    box: list[BaseException] = []

    def end() -> None:
        try:
            g.capture_end()
        except BaseException as exc:
            box.append(exc)

    t = threading.Thread(target=end)
    t.start()
    t.join()
    assert isinstance(box[0], errors.StreamCaptureError) and box[0].code == 107038
    assert _capture.by_stream  # still capturing
    g.capture_end()  # the right thread
    g.replay()
    npu.synchronize()
    g.reset()


def _copy_on_other_thread(d: npu.DeviceBuffer, h: npu.HostBuffer) -> list[BaseException]:
    box: list[BaseException] = []

    def other() -> None:
        try:
            npu.copy(d, h)
        except BaseException as exc:
            box.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    return box


def test_relaxed_capture_lets_other_threads_copy_synchronously() -> None:
    d = npu.DeviceBuffer(N)
    h = npu.HostBuffer(N)
    _fill(h, 3)
    g = npu.NPUGraph()
    with npu.graph(g, capture_error_mode="relaxed"):
        box = _copy_on_other_thread(d, h)
    assert not box
    g.reset()
    # global: the other thread's synchronous copy is refused and invalidates the capture
    with pytest.raises(errors.StreamCaptureInvalidatedError), npu.graph(g):
        box = _copy_on_other_thread(d, h)
    assert box and isinstance(box[0], errors.StreamCaptureError)


def test_bad_arguments() -> None:
    g = npu.NPUGraph()
    s = npu.Stream()
    with npu.stream(s):
        with pytest.raises(ValueError, match="capture_error_mode"):
            g.capture_begin(capture_error_mode="loose")
        with pytest.raises(TypeError, match="pool"):
            g.capture_begin(pool=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        npu.graph(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        npu.graph(g, stream=1)  # type: ignore[arg-type]
    with pytest.raises(errors.StreamCaptureError, match="capture_begin"):
        g.capture_end()
    with pytest.raises(errors.StreamCaptureError):
        g.debug_dump("/tmp/x.json")


def test_keep_alive_records_no_marker_in_capture() -> None:
    g = npu.NPUGraph()
    side = npu.Stream()
    with npu.graph(g) as gg:
        cur = npu.current_stream()
        side.wait_stream(cur)  # Stream.keep_alive(event) on a joined stream
        cur.wait_stream(side)  # ... and on the capturing stream
        assert cur._watch_pending() == 0 and side._watch_pending() == 0
    assert gg._st.cap is not None and len(gg._st.cap.keep) == 2
    g.replay()
    npu.synchronize()
    g.reset()


def test_memory_used_by_a_graph_is_freed_with_it() -> None:
    d = npu.DeviceBuffer(1 << 20)
    h = npu.HostBuffer(1 << 20)
    g = npu.NPUGraph()
    with npu.graph(g):
        npu.copy(d, h, stream=npu.current_stream(), non_blocking=True)
    before = npu.memory_allocated()
    addr = d.ptr
    del d
    gc.collect()
    assert npu.memory_allocated() == before  # the replays still write there
    e = npu.DeviceBuffer(1 << 20)
    assert e.ptr != addr
    g.replay()
    g.reset()
    del e
    gc.collect()
    assert npu.memory_allocated() == before - (1 << 20)


def test_frees_in_capture_return_to_the_pool_and_pools_are_shared() -> None:
    g1, g2 = npu.NPUGraph(), npu.NPUGraph()
    with npu.graph(g1):
        t = npu.DeviceBuffer(N)
        first = t.ptr
        del t
        t2 = npu.DeviceBuffer(N)  # the block freed in the capture, from the pool
        assert t2.ptr == first
    keys = npu._allocator._backend.devices[0].graph_keys
    assert len(keys) == 1
    with npu.graph(g2, pool=g1.pool()):
        npu.DeviceBuffer(N)
    assert len(keys) == 1  # one shared pool
    h = npu.graph_pool_handle()
    assert isinstance(h, npu.GraphPoolHandle) and "GraphPoolHandle" in repr(h)
    g1.reset()
    assert len(keys) == 1  # g2 still uses it
    g2.reset()
    assert not keys
    del t2


def test_debug_dump(tmp_path: Path) -> None:
    g = npu.NPUGraph()
    d, e = npu.DeviceBuffer(N), npu.DeviceBuffer(N)
    with npu.graph(g):
        npu.copy(e, d, stream=npu.current_stream(), non_blocking=True)
    out = tmp_path / "g.json"
    g.debug_dump(out)
    data = json.loads(out.read_text())
    assert data
    g.reset()


def test_make_graphed_callables() -> None:
    x = npu.DeviceBuffer(N)
    h = npu.HostBuffer(N)
    h_out = npu.HostBuffer(N)

    def fn(inp: npu.DeviceBuffer) -> npu.DeviceBuffer:
        s = npu.current_stream()
        out = npu.DeviceBuffer(N)
        npu.copy(out, inp, stream=s, non_blocking=True)
        return out

    graphed = npu.make_graphed_callables(fn, (x,), num_warmup_iters=2)
    other = npu.DeviceBuffer(N)
    for v in (5, 9):
        _fill(h, v)
        npu.copy(other, h)
        out = graphed(other)
        npu.copy(h_out, out)
        assert (h_out.numpy() == v).all()
    f1, f2 = npu.make_graphed_callables((fn, fn), ((x,), (x,)))
    assert callable(f1) and callable(f2)
    with pytest.raises(ValueError, match="size"):
        graphed(npu.DeviceBuffer(8))
    with pytest.raises(TypeError):
        npu.make_graphed_callables(fn, (1,))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        npu.make_graphed_callables(fn, (x,), num_warmup_iters=-1)
    graphed.graph.reset()
    f1.graph.reset()
    f2.graph.reset()


def test_graph_deleted_without_reset_releases() -> None:
    g = npu.NPUGraph()
    with npu.graph(g):
        npu.DeviceBuffer(N)
    g.replay()
    keys = npu._allocator._backend.devices[0].graph_keys
    assert keys
    del g
    gc.collect()
    assert not keys


def test_graph_finalizer_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    g = npu.NPUGraph()
    with npu.graph(g):
        npu.DeviceBuffer(N)
    keys = npu._allocator._backend.devices[0].graph_keys
    drop = GraphPool.drop

    def failing_drop(self: GraphPool) -> int:
        drop(self)
        raise RuntimeError("release failed")

    monkeypatch.setattr(GraphPool, "drop", failing_drop)
    g._finalizer()  # raised RuntimeError before: a finalizer never raises
    assert not keys


def test_numpy_results_from_replays() -> None:
    h_in, h_out = npu.HostBuffer(N), npu.HostBuffer(N)
    g = npu.NPUGraph()
    side = npu.Stream()
    with npu.graph(g):
        _pipeline(h_in, h_out, side)
    data = np.arange(N, dtype=np.uint8)
    h_in.numpy()[:] = data
    g.replay()
    npu.current_stream().synchronize()
    assert (h_out.numpy() == data).all()
    g.reset()


def test_snapshot_and_stats_show_the_pool_segments() -> None:
    g = npu.NPUGraph()
    with npu.graph(g):
        b = npu.DeviceBuffer(N)
    segs = [s for s in npu.memory_snapshot() if s["segment_pool_id"] != (0, 0)]
    assert len(segs) == 1 and segs[0]["stream"] == 0
    assert any(
        blk["address"] == b.ptr and blk["state"] == "active_allocated" for blk in segs[0]["blocks"]
    )
    assert npu.memory_reserved() >= segs[0]["total_size"]
    del b
    g.reset()
    assert not [s for s in npu.memory_snapshot() if s["segment_pool_id"] != (0, 0)]
