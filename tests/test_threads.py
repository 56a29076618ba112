"""Threads: objects from any thread, 8 threads x 2 devices, GIL released while waiting."""

from __future__ import annotations

import gc
import random
import threading
from typing import Any

from pyacl_rt import _device as D
from pyacl_rt import _state
from pyacl_rt import _stream as S
from pyacl_rt._event import Event


# --------------------------------------------------------------------- tests
def test_eight_threads_two_devices_mixing_streams_and_events(run_threads: Any) -> None:
    devices = (0, 1)
    shared = {d: S.Stream(d) for d in devices}  # created on the main thread
    barrier = threading.Barrier(8)
    counter = [0]
    lock = threading.Lock()

    def add() -> None:
        with lock:
            counter[0] += 1

    def worker(i: int) -> None:
        rng = random.Random(i)
        mine = {d: S.Stream(d) for d in devices}  # no set_device on this thread
        barrier.wait()
        for it in range(15):
            d = devices[(i + it) % 2]
            a = mine[d]
            b = rng.choice([shared[d], S.stream_from_pool(d), S.default_stream(d)])
            e = Event(enable_timing=rng.random() < 0.5)
            e.record(a)
            a.launch_host_func(add)
            b.wait_event(e)
            b.wait_stream(a)
            if rng.random() < 0.5:
                with S.stream(b):
                    after = Event()
                    after.record()
                    assert S.current_stream() is b
                after.synchronize()
                after.close()
            else:
                with D.device(devices[1 - devices.index(d)]):
                    S.current_stream().query()
            b.synchronize()
            assert e.query()
            e.close()
            assert _state._local.st.device == -1  # guards restored "no device selected"
        for s in mine.values():
            s.synchronize()
            s.close()

    errs = run_threads(8, worker)
    assert not errs, errs
    for s in shared.values():
        s.synchronize()
        s.close()
    assert counter[0] == 8 * 15


def test_objects_created_on_main_used_from_fresh_threads(run_threads: Any) -> None:
    D.set_device(3)
    s = S.Stream()
    e = Event(enable_timing=True)
    start = Event(enable_timing=True)

    def worker(i: int) -> None:
        if i == 0:
            start.record(s)
            e.record(s)
        s.synchronize()
        s.query()
        assert _state._local.st.device == -1
        assert D.current_device() == 3  # follows the main thread's selection

    assert not run_threads(4, worker)
    assert start.elapsed_time(e) >= 0.0
    for x in (e, start, s):
        x.close()


def test_stream_created_in_thread_used_on_main_after_thread_exit() -> None:
    box: list[S.Stream] = []
    t = threading.Thread(target=lambda: box.append(S.Stream(2)))
    t.start()
    t.join()
    s = box.pop()
    s.launch_host_func(lambda: None)
    s.synchronize()
    assert s.query()
    s.close()


def test_gil_released_while_synchronize_blocks(gate: Any) -> None:
    s = S.Stream(1)
    gate.block(s)
    done = threading.Event()

    def waiter() -> None:
        s.synchronize()  # blocks in C until the gate opens
        done.set()

    t = threading.Thread(target=waiter)
    t.start()
    # The main thread keeps running Python while `waiter` is blocked in C: if the
    # GIL were held, this loop could not progress and the gate would never open.
    progress = 0
    while progress < 10_000:
        progress += 1
    assert not done.is_set()
    gate.release.set()
    t.join(60)
    assert done.is_set()
    s.close()


def test_concurrent_device_guards_are_per_thread(run_threads: Any) -> None:
    barrier = threading.Barrier(6)

    def worker(i: int) -> None:
        dev = i % 4
        with D.device(dev):
            barrier.wait()
            for _ in range(50):
                assert D.current_device() == dev
                with D.device((dev + 1) % 4):
                    assert D.current_device() == (dev + 1) % 4
                assert D.current_device() == dev
        assert _state._local.st.device == -1

    assert not run_threads(6, worker)


def test_stream_pool_is_thread_safe(run_threads: Any) -> None:
    got: list[S.Stream] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        for _ in range(16):
            st = S.stream_from_pool(0)
            with lock:
                got.append(st)

    assert not run_threads(4, worker)
    assert len({id(x) for x in got}) == S.STREAMS_PER_POOL


def test_fresh_event_recorded_by_many_threads_at_once(run_threads: Any) -> None:
    s = S.Stream(0)
    e = Event()
    barrier = threading.Barrier(6)

    def worker(i: int) -> None:
        barrier.wait()
        e.record(s)

    assert not run_threads(6, worker)
    s.synchronize()
    assert e.query()
    e.close()
    s.close()


def test_keep_alive_shared_stream_from_many_threads(run_threads: Any) -> None:
    import weakref

    class Obj:
        pass

    s = S.Stream(1)
    gate = threading.Event()
    s.launch_host_func(gate.wait, 60)  # everything below stays pending at first
    held: list[weakref.ref[Obj]] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        for k in range(100):
            o = Obj()
            s.keep_alive(o)
            with lock:
                held.append(weakref.ref(o))
            if k % 25 == 0:
                s._watch_pending()  # concurrent polling of the same list

    assert not run_threads(4, worker)
    gc.collect()
    assert all(r() is not None for r in held)  # nothing released while pending
    gate.set()
    s.synchronize()
    assert s._watch_pending() == 0
    gc.collect()
    assert all(r() is None for r in held)
    s.close()


def test_stream_released_by_a_dying_thread_registers_no_dummy_thread() -> None:
    """A thread whose current-stream table holds the last reference to a Stream ends:
    the Stream's finalizer runs while the thread is being torn down (no longer in
    threading's table). It must not call threading.current_thread() there, which
    registers a stray _DummyThread (and on Python 3.13.0 prints 'Exception ignored
    ... _DeleteDummyThreadOnDel' at exit)."""

    def work() -> None:
        s = S.Stream(0)
        S.set_stream(s)
        del s

    t = threading.Thread(target=work)
    t.start()
    t.join()
    gc.collect()
    dummies = [th for th in threading.enumerate() if isinstance(th, threading._DummyThread)]
    assert dummies == []
