"""Finalize and interpreter-exit races, each run many times under CPU load (issue 12).

Each program runs in its own subprocess (finalize and exit are process-global) while two
CPU-burning processes load the machine, which is what made these races show up. The
assertions are about stderr only (no timing):

* garbage collection on a thread that never used pyacl_rt releases streams, events and
  buffers (reference cycles) while ``finalize()`` / interpreter exit releases everything:
  every handle is destroyed exactly once, so the runtime never reports a handle that is
  not live (it reported ``aclrtDestroyStream(0x...) failed with 107000 ... is not a live
  stream handle`` before the finalize gate);
* the same while explicit Contexts are closed (``Context.close`` waits for releases of
  its objects in progress on other threads);
* a daemon thread loops ``memset(..., non_blocking=True)`` on its own stream while the
  interpreter exits: no call reaches the runtime with a handle finalize destroyed, and
  the thread ends without a traceback (``RuntimeFinalizedError`` ends a daemon thread
  quietly at exit);
* daemon threads create, use, close and drop cached DeviceBuffers / HostBuffers (the
  C hit paths of the buffer life) while the interpreter exits: nothing comes out of or
  goes back into a cache finalize releases, nothing is logged.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.slow

# Rounds of: objects in reference cycles -> a collector thread (which never used
# pyacl_rt, so its finalizers switch contexts) collects them, with random pauses at
# every call to widen the race windows -> finalize() meanwhile -> init() again. The
# last round leaves garbage and a collecting thread behind at interpreter exit.
CHURN = """
    import gc, random, sys, threading, time
    import pyacl_rt as npu

    class Holder:
        pass

    def make(n):
        for i in range(n):
            d = i % 2
            h = Holder()
            h.self = h  # a reference cycle: only the garbage collector frees it
            h.s = npu.Stream(d)
            h.p = npu.stream_from_pool(d)
            h.b = npu.DeviceBuffer(4096, device=d)
            npu.memset(h.b, 0, stream=h.s, non_blocking=True)
            h.e = npu.Event()
            h.e.record(h.s)

    def jitter(frame, event, arg):
        if event in ("call", "c_call") and random.random() < 0.3:
            time.sleep(random.random() * 0.001)

    def collector(go):
        go.wait()
        sys.setprofile(jitter)
        gc.collect()

    gc.disable()
    for r in range(ROUNDS):
        npu.init()
        go = threading.Event()
        t = threading.Thread(target=collector, args=(go,), daemon=True)
        t.start()
        make(100)
        go.set()
        time.sleep(random.random() * 0.004)
        if r < ROUNDS - 1:
            npu.finalize()
            t.join()
    print("done")
"""

# The same while explicit Contexts close: their streams, events and buffers (reference
# cycles) are released by a collector thread while the main thread closes the Context.
CONTEXT_CHURN = """
    import gc, random, sys, threading, time
    import pyacl_rt as npu

    class Holder:
        pass

    def jitter(frame, event, arg):
        if event in ("call", "c_call") and random.random() < 0.3:
            time.sleep(random.random() * 0.001)

    def collector(go):
        go.wait()
        sys.setprofile(jitter)
        gc.collect()

    gc.disable()
    for r in range(ROUNDS):
        ctx = npu.Context(r % 2)
        with ctx:
            for i in range(80):
                h = Holder()
                h.self = h
                h.s = npu.Stream()
                h.e = npu.Event()
                h.e.record(h.s)
                h.b = npu.DeviceBuffer(4096)
                npu.memset(h.b, 0, stream=h.s, non_blocking=True)
        del h
        go = threading.Event()
        t = threading.Thread(target=collector, args=(go,), daemon=True)
        t.start()
        go.set()
        time.sleep(random.random() * 0.05)
        ctx.close()
        t.join()
    print("done")
"""

# The daemon thread of issue 12 item 5, plus a few more calls on its objects.
DAEMON = """
    import threading, time
    import pyacl_rt as npu

    b = npu.DeviceBuffer(1 << 16)
    st = npu.Stream()
    ev = npu.Event()
    ready = threading.Event()

    def loop():
        ready.set()
        i = 0
        while True:
            npu.memset(b, 1, stream=st, non_blocking=True)
            i += 1
            if i % 8 == 0:
                ev.record(st)
                st.query()

    threading.Thread(target=loop, daemon=True).start()
    ready.wait()
    time.sleep(0.02)
    print("exiting")
"""

# Daemon threads living buffers from the caches (C hit paths) while the main thread exits.
BUFFER_DAEMON = """
    import threading, time
    import pyacl_rt as npu

    ready = threading.Barrier(3)

    def device_lives():
        st = npu.Stream()
        keep = npu.DeviceBuffer(4096, stream=st)  # keeps the stream's segment cached
        ready.wait()
        while True:
            b = npu.DeviceBuffer(4096, stream=st)
            npu.memset(b, 1, stream=st, non_blocking=True)
            b.close()
            npu.DeviceBuffer(512, stream=st)  # dropped: freed by its collection

    def host_lives():
        npu.HostBuffer(4096).close()
        ready.wait()
        while True:
            h = npu.HostBuffer(4096)
            h.numpy()[:8] = 1
            h.close()
            npu.HostBuffer(64)  # dropped

    for fn in (device_lives, host_lives):
        threading.Thread(target=fn, daemon=True).start()
    ready.wait()
    time.sleep(0.02)
    print("exiting")
"""


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """Two processes burning CPU for the duration of the test."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for p in burners:
            p.kill()
        for p in burners:
            p.wait()


def _run(code: str, clean_env: Callable[..., dict[str, str]]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=clean_env(PYACL_RT_BACKEND="mock"),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _bad_lines(stderr: str) -> list[str]:
    """A handle used after finalize destroyed it ("not a live ... handle"), a release
    that failed, a buffer given back to an allocator finalize tore down, a traceback."""
    marks = ("not a live", "failed with", "unknown block", "Traceback")
    return [line for line in stderr.splitlines() if any(m in line for m in marks)]


def test_gc_on_another_thread_during_finalize_destroys_each_handle_once(
    clean_env: Any, cpu_load: None
) -> None:
    failures = []
    for run in range(10):
        proc = _run(CHURN.replace("ROUNDS", "8"), clean_env)
        bad = _bad_lines(proc.stderr)
        if proc.returncode != 0 or bad or "done" not in proc.stdout:
            failures.append(f"run {run}: rc={proc.returncode}\n{proc.stderr[-3000:]}")
    assert not failures, f"{len(failures)} of 10 runs failed:\n" + "\n".join(failures[:3])


def test_gc_on_another_thread_while_a_context_closes(clean_env: Any, cpu_load: None) -> None:
    """Closing an explicit Context waits for the releases of its objects in progress on
    other threads; later ones leave the handles to the context's destroy (before, a
    collected stream was destroyed - or synchronized - after its context was gone)."""
    failures = []
    for run in range(10):
        proc = _run(CONTEXT_CHURN.replace("ROUNDS", "12"), clean_env)
        bad = _bad_lines(proc.stderr)
        if proc.returncode != 0 or bad or "done" not in proc.stdout:
            failures.append(f"run {run}: rc={proc.returncode}\n{proc.stderr[-3000:]}")
    assert not failures, f"{len(failures)} of 10 runs failed:\n" + "\n".join(failures[:3])


def test_daemon_thread_using_a_stream_while_the_interpreter_exits(
    clean_env: Any, cpu_load: None
) -> None:
    failures = []
    for run in range(60):
        proc = _run(DAEMON, clean_env)
        # Nothing at all on stderr: no handle finalize destroyed reached the runtime
        # (the mock names it "not a live ... handle"), no traceback of the daemon thread.
        if proc.returncode != 0 or proc.stderr.strip() or "exiting" not in proc.stdout:
            failures.append(f"run {run}: rc={proc.returncode}\n{proc.stderr[-3000:]}")
    assert not failures, f"{len(failures)} of 60 runs failed:\n" + "\n".join(failures[:3])


def test_daemon_threads_living_cached_buffers_while_the_interpreter_exits(
    clean_env: Any, cpu_load: None
) -> None:
    failures = []
    for run in range(40):
        proc = _run(BUFFER_DAEMON, clean_env)
        if proc.returncode != 0 or proc.stderr.strip() or "exiting" not in proc.stdout:
            failures.append(f"run {run}: rc={proc.returncode}\n{proc.stderr[-3000:]}")
    assert not failures, f"{len(failures)} of 40 runs failed:\n" + "\n".join(failures[:3])
