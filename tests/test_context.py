"""Explicit contexts: creation without side effects, with-statement, ownership."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import pytest

from pyacl_rt import _context as C
from pyacl_rt import _device as D
from pyacl_rt import _state, errors, lowlevel
from pyacl_rt import _stream as S
from pyacl_rt._event import Event
from pyacl_rt.mock import mock_control


def raw_current_context() -> int:
    s = lowlevel.scratch()
    lowlevel.check(lowlevel.lib.aclrtGetCurrentContext(s.uptr), "aclrtGetCurrentContext")
    return int(s.uptr[0])


def contexts_on(device: int) -> int:
    return mock_control().stat("contexts", device)


# --------------------------------------------------------------------- tests
def test_create_has_no_side_effect_and_close() -> None:
    D.set_device(1)
    before = raw_current_context()
    base = contexts_on(1)
    ctx = C.Context(1)
    assert contexts_on(1) == base + 1
    assert ctx.handle != 0 and ctx.handle != before
    assert ctx.device == D.Device(1)
    assert raw_current_context() == before  # creation restored the thread's context
    assert C.current_context() is None
    assert "device 1" in repr(ctx) and not ctx.closed
    ctx.close()
    assert ctx.closed and contexts_on(1) == base and "closed" in repr(ctx)
    ctx.close()  # idempotent
    with pytest.raises(errors.ObjectClosedError):
        ctx.make_current()
    with pytest.raises(errors.ObjectClosedError), ctx:
        pass


def test_with_context_makes_it_current_and_restores() -> None:
    D.set_device(0)
    primary0 = raw_current_context()
    ctx = C.Context(2)
    with ctx as same:
        assert same is ctx
        assert C.current_context() is ctx
        assert raw_current_context() == ctx.handle
        assert D.current_device() == 2
        s = S.Stream()  # created in the explicit context
        assert s.ctx_ref is ctx._ref
        with D.device(3):
            assert C.current_context() is None and D.current_device() == 3
        assert C.current_context() is ctx and raw_current_context() == ctx.handle
        ctx.synchronize()
    assert C.current_context() is None
    assert D.current_device() == 0 and raw_current_context() == primary0
    # Objects of the context work outside the block, from any thread.
    assert s.query()
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(s.query()))
    t.start()
    t.join()
    assert out == [True]
    s.close()
    ctx.close()


def test_objects_keep_context_alive() -> None:
    base = contexts_on(4)
    ctx = C.Context(4)
    with ctx:
        s = S.Stream()
        e = Event()
        e.record(s)
    del ctx
    gc.collect()
    assert contexts_on(4) == base + 1  # alive through s and e
    s.synchronize()
    assert e.query()
    del s
    gc.collect()
    assert contexts_on(4) == base + 1  # still alive through e
    del e
    gc.collect()
    assert contexts_on(4) == base


def test_close_closes_children_first() -> None:
    ctx = C.Context(5)
    with ctx:
        s = S.Stream()
        e = Event()
        e.record()  # on the context's default stream
        pooled = S.stream_from_pool()
    ctx.close()
    for call in (s.query, e.query, pooled.query, lambda: S.Stream.synchronize(s)):
        with pytest.raises(errors.ObjectClosedError):
            call()
    s.close()
    e.close()


def test_close_waits_for_releases_in_progress_on_other_threads() -> None:
    """Context.close lets a release of one of its objects that another thread has in
    progress (garbage collection runs finalizers anywhere) finish before it destroys
    anything, and refuses the ones that start later (their handles go with the
    context): no handle of the context is used after it was destroyed."""
    ctx = C.Context(5)
    ref = ctx._ref
    with ctx:
        s = S.Stream()
    inside, leave = threading.Event(), threading.Event()
    seen: list[object] = []

    def release_in_progress() -> None:
        assert ref.enter()
        inside.set()
        leave.wait(60)
        seen.append(s.query())  # the stream is still alive: close waits for this thread
        ref.leave()

    user = threading.Thread(target=release_in_progress)
    user.start()
    inside.wait(60)
    closer = threading.Thread(target=ctx.close)
    closer.start()
    while not ref.closer:
        time.sleep(0.001)
    late: list[bool] = []
    t = threading.Thread(target=lambda: late.append(ref.enter()))
    t.start()
    t.join(60)
    assert late == [False]  # a release starting now leaves the handles to the close
    assert not ctx.closed and not s.closed
    leave.set()
    user.join(60)
    closer.join(60)
    assert seen == [True]
    assert ctx.closed and s.closed and ref.users == []


def test_context_used_on_another_thread() -> None:
    ctx = C.Context(6)

    def body() -> tuple[int, bool, int]:
        with ctx:
            s = S.Stream()
            s.synchronize()
            inside = raw_current_context()
            s.close()
        return inside, C.current_context() is None, _state._local.st.device

    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(body()))
    t.start()
    t.join()
    assert box == [(ctx.handle, True, -1)]
    ctx.close()


def test_default_stream_of_context_and_callbacks() -> None:
    ctx = C.Context(7)
    ran: list[int] = []
    with ctx:
        d = S.current_stream()
        assert d.kind == "default" and d.ctx_ref is ctx._ref
        assert d is not S.default_stream(0)
        d.launch_host_func(ran.append, 1)
        d.synchronize()
    assert ran == [1]
    del d
    ctx.close()


def test_make_current_and_invalid_device() -> None:
    ctx = C.Context(3)
    ctx.make_current()
    assert C.current_context() is ctx and D.current_device() == 3
    D.set_device(0)
    assert C.current_context() is None
    ctx.close()
    with pytest.raises(errors.InvalidDeviceError):
        C.Context(99)


def test_finalize_makes_context_inert(run_python: Any) -> None:
    code = """
        import pyacl_rt._context as C, pyacl_rt._stream as S
        from pyacl_rt import _runtime as runtime, errors
        ctx = C.Context(1)
        with ctx:
            s = S.Stream()
        runtime.finalize()
        ctx.close(); s.close()
        try:
            ctx.make_current()
        except errors.RuntimeFinalizedError:
            print("OK")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_context_errors_are_typed(npu_faults: Any) -> None:
    npu_faults.inject("aclrtCreateContext", 207005)
    with pytest.raises(errors.AclResourceError) as info:
        C.Context(0)
    assert info.value.code == 207005


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_context_cannot_be_copied_or_pickled(how: str) -> None:
    import copy
    import pickle

    do = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}[how]
    ctx = C.Context(0)
    try:
        with pytest.raises(TypeError, match="Context objects cannot be pickled or copied"):
            do(ctx)
    finally:
        ctx.close()
