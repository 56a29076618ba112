"""pyacl_rt._runtime: init/finalize, lazy init, external ACL, release hooks, atexit,
generations (objects outliving finalize), fork guard and spawn.

Everything that changes process-global state runs in a subprocess against the mock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import _clean_env


def _env(**extra: str) -> dict[str, str]:
    return _clean_env(**{"PYACL_RT_BACKEND": "mock", **extra})


def run_py(
    code: str, *, check: bool = True, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"subprocess failed ({proc.returncode})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


def last_json(proc: subprocess.CompletedProcess[str]) -> Any:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout + proc.stderr
    return json.loads(lines[-1])


# --------------------------------------------------------------- init/finalize
def test_init_finalize_idempotent() -> None:
    proc = run_py(
        """
        import json
        from pyacl_rt import lowlevel as ll, _runtime as runtime
        from pyacl_rt.errors import RuntimeFinalizedError
        out = {"initial": runtime.state(), "gen0": runtime.generation()}
        runtime.init()
        runtime.init()          # no-op
        runtime.ensure_initialized()
        out["after_init"] = runtime.state()
        out["gen1"] = runtime.generation()
        out["external"] = runtime.is_external()
        runtime.finalize()
        runtime.finalize()      # no-op
        out["after_finalize"] = runtime.state()
        out["is_finalized"] = runtime.is_finalized()
        out["is_initialized"] = runtime.is_initialized()
        # pyacl_rt really called aclFinalize: ACL reports a repeated finalize now
        out["acl_finalize_again"] = ll.aclFinalize()
        try:
            runtime.ensure_initialized()
        except RuntimeFinalizedError as exc:
            out["lazy_after_finalize"] = type(exc).__name__
            out["lazy_msg"] = str(exc)
        # explicit init after finalize starts a new generation (ACL allows re-init)
        runtime.init()
        out["gen2"] = runtime.generation()
        out["state2"] = runtime.state()
        print(json.dumps(out))
        """
    )
    out = last_json(proc)
    assert out["initial"] == "uninitialized" and out["gen0"] == 0
    assert out["after_init"] == "ready" and out["gen1"] == 1
    assert out["external"] is False
    assert out["after_finalize"] == "finalized"
    assert out["is_finalized"] is True and out["is_initialized"] is False
    assert out["acl_finalize_again"] == 100037
    assert out["lazy_after_finalize"] == "RuntimeFinalizedError"
    assert "init()" in out["lazy_msg"]
    assert out["gen2"] == 2 and out["state2"] == "ready"


def test_objects_after_finalize_say_init_and_recreate() -> None:
    """Issue 14 item 6: an object of a finalized runtime says both steps (before: only
    "create a new one", and creating one then said "call pyacl_rt.init() first");
    after a new init() it says only to create a new one."""
    proc = run_py(
        """
        import json
        import pyacl_rt as npu

        ctx = npu.Context(0)
        s, e, b = npu.Stream(), npu.Event(), npu.DeviceBuffer(16)
        e.record(s)
        npu.finalize()
        out = {}
        uses = {"stream": s.synchronize, "event": e.synchronize, "context": ctx.synchronize,
                "buffer": b.copy_to_host}
        for name, use in uses.items():
            try:
                use()
            except npu.RuntimeFinalizedError as exc:
                out[name] = str(exc)
        npu.init()
        try:
            s.synchronize()
        except npu.RuntimeFinalizedError as exc:
            out["after_init"] = str(exc)
        print(json.dumps(out))
        """
    )
    out = last_json(proc)
    assert set(out) == {"stream", "event", "context", "buffer", "after_init"}, out
    for name in ("stream", "event", "context", "buffer"):
        assert "belongs to a runtime that was finalized" in out[name], out[name]
        assert out[name].endswith(
            "call pyacl_rt.init() to start the runtime again, then create a new one"
        ), out[name]
    assert "(its memory was released)" in out["buffer"]
    assert out["after_init"].endswith("the runtime was started again since: create a new one")


def test_finalize_before_init_is_noop() -> None:
    proc = run_py(
        """
        from pyacl_rt import _runtime as runtime
        runtime.finalize()
        print(runtime.state())
        """
    )
    assert proc.stdout.strip() == "uninitialized"


def test_lazy_init_on_first_use() -> None:
    proc = run_py(
        """
        from pyacl_rt import _runtime as runtime
        assert not runtime.is_initialized()
        runtime.ensure_initialized()
        print(runtime.state(), runtime.generation())
        """
    )
    assert proc.stdout.split() == ["ready", "1"]


def test_lazy_init_disabled_raises_not_initialized() -> None:
    proc = run_py(
        """
        from pyacl_rt import _runtime as runtime
        from pyacl_rt.errors import NotInitializedError
        try:
            runtime.ensure_initialized()
        except NotInitializedError as exc:
            print("raised", exc.code, "PYACL_RT_LAZY_INIT=0" in str(exc))
        runtime.init()
        runtime.ensure_initialized()
        print(runtime.state())
        """,
        PYACL_RT_LAZY_INIT="0",
    )
    assert proc.stdout.splitlines() == ["raised None True", "ready"]


def test_concurrent_first_use_initialises_once() -> None:
    proc = run_py(
        """
        import threading
        from pyacl_rt import _runtime as runtime
        barrier = threading.Barrier(8)
        errs = []
        def worker():
            barrier.wait()
            try:
                runtime.ensure_initialized()
            except Exception as exc:
                errs.append(exc)
        ts = [threading.Thread(target=worker) for _ in range(8)]
        for t in ts: t.start()
        for t in ts: t.join()
        # one aclInit: generation 1, and it was not a repeated init (not external)
        print(len(errs), runtime.generation(), runtime.is_external())
        """
    )
    assert proc.stdout.split() == ["0", "1", "False"]


def test_concurrent_init_finalize_is_consistent() -> None:
    """Threads racing init()/finalize(): every generation is finalized exactly once
    (the persistent hook runs once per generation) and ACL ends finalized."""
    proc = run_py(
        """
        import threading
        from pyacl_rt import lowlevel as ll, _runtime as rt
        runs = []
        rt.register_release_hook(lambda: runs.append(rt.generation()), rt.PRIORITY_EVENTS)
        errs = []
        def worker(k):
            try:
                for i in range(25):
                    (rt.init if (i + k) % 2 == 0 else rt.finalize)()
            except Exception as exc:
                errs.append(repr(exc))
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        rt.finalize()
        gens = rt.generation()
        print(errs, runs == list(range(1, gens + 1)), gens > 1, rt.state(), ll.aclFinalize())
        """
    )
    assert proc.stdout.split() == ["[]", "True", "True", "finalized", "100037"]


def test_config_path(tmp_path: Path) -> None:
    cfg = tmp_path / "acl.json"
    cfg.write_text("{}")
    other = tmp_path / "other.json"
    other.write_text("{}")
    proc = run_py(
        f"""
        from pyacl_rt import _runtime as runtime
        from pyacl_rt.errors import ConfigError
        try:
            runtime.init({str(tmp_path / "missing.json")!r})
        except ConfigError as exc:
            print("missing:", "does not exist" in str(exc))
        runtime.init()   # PYACL_RT_ACL_CONFIG
        print(runtime.status()["config_path"] == {str(cfg)!r})
        runtime.init({str(cfg)!r})   # same config: no-op
        try:
            runtime.init({str(other)!r})
        except ConfigError as exc:
            print("switch:", "already initialised" in str(exc))
        """,
        PYACL_RT_ACL_CONFIG=str(cfg),
    )
    assert proc.stdout.splitlines() == ["missing: True", "True", "switch: True"]


def test_bad_config_content_raises_acl_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = run_py(
        f"""
        from pyacl_rt import _runtime as runtime
        from pyacl_rt.errors import AclError
        try:
            runtime.init({str(bad)!r})
        except AclError as exc:
            print(type(exc).__name__, exc.code, exc.function)
        print(runtime.state())
        """
    )
    lines = proc.stdout.splitlines()
    assert lines[-1] == "uninitialized"
    _name, code, func = lines[0].split()
    assert func == "aclInit" and code.isdigit() and int(code) // 100000 == 1, lines


# ----------------------------------------------------- someone else initialised
_AFTER_EXIT = """
import atexit
def _after_everything():
    # registered before pyacl_rt._runtime is imported, so it runs after its atexit hook
    from pyacl_rt import lowlevel as ll
    print("after-exit aclFinalize:", ll.aclFinalize(), flush=True)
atexit.register(_after_everything)
"""


def test_external_init_is_not_finalized_at_exit() -> None:
    proc = run_py(
        _AFTER_EXIT
        + """
from pyacl_rt import lowlevel as ll
assert ll.aclInit(ll.ffi.NULL) == 0      # "torch_npu" initialises ACL first
from pyacl_rt import _runtime as runtime
hook_ran = []
runtime.register_release_hook(lambda: print("hook ran", flush=True), runtime.PRIORITY_DEVICES)
runtime.init()
print("external:", runtime.is_external(), flush=True)
"""
    )
    lines = proc.stdout.splitlines()
    assert "external: True" in lines
    assert "hook ran" in lines  # our own resources are still released at exit
    # ... but ACL is left initialised for its owner: its own aclFinalize succeeds
    assert lines[-1] == "after-exit aclFinalize: 0"


def test_external_explicit_finalize_skips_acl_finalize() -> None:
    proc = run_py(
        """
        from pyacl_rt import lowlevel as ll, _runtime as runtime
        assert ll.aclInit(ll.ffi.NULL) == 0
        runtime.init()
        assert runtime.is_external()
        # the 100002 of our aclInit must not leak into the next error's text
        print(repr(ll.recent_error_message()))
        runtime.finalize()
        print(runtime.state(), ll.aclFinalize())
        """
    )
    assert proc.stdout.splitlines() == ["None", "finalized 0"]


def test_owned_init_is_finalized_at_exit() -> None:
    proc = run_py(
        _AFTER_EXIT
        + """
from pyacl_rt import _runtime as runtime
runtime.init()
print("external:", runtime.is_external(), flush=True)
"""
    )
    lines = proc.stdout.splitlines()
    assert "external: False" in lines
    assert lines[-1] == "after-exit aclFinalize: 100037"  # we already finalized


# ---------------------------------------------------------------- release hooks
def test_release_hook_order_at_finalize() -> None:
    proc = run_py(
        """
        import json
        from pyacl_rt import _runtime as rt
        order = []
        def mk(name):
            return lambda: order.append(name)
        # registered in scrambled order
        rt.register_release_hook(mk("devices"), rt.PRIORITY_DEVICES)
        rt.register_release_hook(mk("memory"), rt.PRIORITY_MEMORY)
        rt.register_release_hook(mk("events"), rt.PRIORITY_EVENTS)
        rt.register_release_hook(mk("contexts"), rt.PRIORITY_CONTEXTS)
        rt.register_release_hook(mk("streams"), rt.PRIORITY_STREAMS)
        rt.register_release_hook(mk("memory-later-registered"), rt.PRIORITY_MEMORY)
        def boom():
            order.append("boom")
            raise RuntimeError("hook failure")
        rt.register_release_hook(boom, rt.PRIORITY_STREAMS, name="boom-hook")
        removed = rt.register_release_hook(mk("removed"), rt.PRIORITY_EVENTS)
        removed.remove()
        once = rt.register_release_hook(mk("once"), rt.PRIORITY_LAST, once=True)
        rt.init()
        rt.finalize()        # a failing hook is logged, never raised
        first = list(order)
        order.clear()
        rt.init()
        rt.finalize()        # persistent hooks run again, 'once' hooks do not
        print(json.dumps({"first": first, "second": order,
                          "once_registered": once.registered}))
        """
    )
    out = last_json(proc)
    assert out["first"] == [
        "events",
        "boom",
        "streams",
        "memory-later-registered",
        "memory",
        "contexts",
        "devices",
        "once",
    ]
    assert out["second"] == out["first"][:-1]
    assert out["once_registered"] is False
    assert "boom-hook" in proc.stderr and "hook failure" in proc.stderr


def test_hooks_may_remove_and_register_hooks() -> None:
    proc = run_py(
        """
        from pyacl_rt import _runtime as rt
        order = []
        later = rt.register_release_hook(lambda: order.append("removed-by-earlier"),
                                         rt.PRIORITY_MEMORY)
        def first():
            order.append("first")
            later.remove()   # e.g. closing an object removes its own hook
            rt.register_release_hook(lambda: order.append("added-during"), rt.PRIORITY_LAST)
        rt.register_release_hook(first, rt.PRIORITY_EVENTS)
        rt.init()
        rt.finalize()
        print(order)
        """
    )
    assert proc.stdout.strip() == "['first', 'added-during']"


def test_register_release_hook_validates() -> None:
    proc = run_py(
        """
        from pyacl_rt import _runtime as rt
        for args in [(42, 1), (print, "high"), (print, True)]:
            try:
                rt.register_release_hook(*args)
            except TypeError as exc:
                print("TypeError")
        """
    )
    assert proc.stdout.split() == ["TypeError"] * 3


def test_atexit_runs_hooks_in_order_then_acl_finalize() -> None:
    proc = run_py(
        _AFTER_EXIT
        + """
from pyacl_rt import _runtime as rt
for name, prio in [("contexts", rt.PRIORITY_CONTEXTS), ("events", rt.PRIORITY_EVENTS),
                   ("devices", rt.PRIORITY_DEVICES), ("memory", rt.PRIORITY_MEMORY),
                   ("streams", rt.PRIORITY_STREAMS)]:
    rt.register_release_hook(lambda n=name: print("hook", n, flush=True), prio)
rt.ensure_initialized()
print("main done", flush=True)
"""
    )
    assert proc.stdout.splitlines() == [
        "main done",
        "hook events",
        "hook streams",
        "hook memory",
        "hook contexts",
        "hook devices",
        "after-exit aclFinalize: 100037",
    ]


def test_atexit_watchdog_names_a_blocked_hook() -> None:
    """A hook stuck at interpreter exit is reported by name (the hook here waits,
    bounded, until the watchdog's warning has been logged - no timing assertion)."""
    proc = run_py(
        """
        import logging, threading
        from pyacl_rt import _runtime as rt
        rt.EXIT_WATCHDOG_SECONDS = 0.05
        warned = threading.Event()
        seen = []
        class Seen(logging.Handler):
            def emit(self, record):
                if "has taken more than" in record.getMessage():
                    seen.append(record.getMessage())
                    warned.set()
        logging.getLogger("pyacl_rt.runtime").addHandler(Seen())
        def slow_hook():
            print("watchdog warned:", warned.wait(60), flush=True)
            print(seen[0] if seen else "no message", flush=True)
        rt.register_release_hook(slow_hook, rt.PRIORITY_STREAMS, name="slow-hook")
        rt.init()
        """
    )
    assert "watchdog warned: True" in proc.stdout
    assert "release hook 'slow-hook' (priority 200)" in proc.stdout


def test_atexit_finalizes_even_when_no_thread_can_start() -> None:
    """Python >= 3.12 refuses new threads during interpreter shutdown; the exit
    watchdog must not stop finalize from running (regression: it raised there)."""
    proc = run_py(
        _AFTER_EXIT
        + """
import threading
from pyacl_rt import _runtime as rt
def refuse(self):
    raise RuntimeError("can't create new thread at interpreter shutdown")
threading.Timer.start = refuse
rt.register_release_hook(lambda: print("hook ran", flush=True), rt.PRIORITY_STREAMS)
rt.ensure_initialized()
"""
    )
    assert proc.stdout.splitlines() == ["hook ran", "after-exit aclFinalize: 100037"]


def test_atexit_without_init_does_nothing() -> None:
    proc = run_py(
        _AFTER_EXIT
        + """
from pyacl_rt import _runtime as rt
rt.register_release_hook(lambda: print("hook ran", flush=True), rt.PRIORITY_EVENTS)
print("main done", flush=True)
"""
    )
    # never initialised: no hooks, no aclFinalize (ACL reports it was never initialised
    # or already finalized - anything but 0)
    lines = proc.stdout.splitlines()
    assert lines[0] == "main done"
    assert "hook ran" not in lines
    assert lines[-1] != "after-exit aclFinalize: 0"


# --------------------------------------------------- objects outliving finalize
_TRACKED_BUFFER = """
from pyacl_rt import lowlevel as ll, _runtime as rt

class TrackedBuffer:
    '''A minimal owning object, the way device buffers use the lifecycle API.'''
    live = {}
    def __init__(self, nbytes):
        rt.ensure_initialized()
        self.gen = rt.generation()
        s = ll.scratch()
        ll.check(ll.aclrtMalloc(s.uptr, nbytes, 0), "aclrtMalloc")
        self.ptr = int(s.uptr[0])
        TrackedBuffer.live[id(self)] = self
        self.frees = 0
    def use(self):
        rt.check_alive(self.gen, "TrackedBuffer")
        return self.ptr
    def close(self):
        if not rt.is_alive(self.gen):
            return               # died with the runtime: inert
        if TrackedBuffer.live.pop(id(self), None) is not None:
            ll.check(ll.aclrtFree(self.ptr), "aclrtFree")
            self.frees += 1

def _release_all():
    for buf in list(TrackedBuffer.live.values()):
        buf.close()

rt.register_release_hook(_release_all, rt.PRIORITY_MEMORY)
"""


def test_finalize_with_live_objects_makes_them_inert() -> None:
    proc = run_py(
        _TRACKED_BUFFER
        + """
import ctypes, json
from pyacl_rt.errors import RuntimeFinalizedError
ll.check(ll.aclrtSetDevice(0), "aclrtSetDevice")
rt.register_release_hook(lambda: ll.aclrtResetDevice(0), rt.PRIORITY_DEVICES)
a = TrackedBuffer(1024)
b = TrackedBuffer(4096)
b.close()
mock = ctypes.CDLL(ll.selection().path)
mock.aclmockGetStat.restype = ctypes.c_int64
live_before = mock.aclmockGetStat(-1, 3)      # ACLMOCK_STAT_ALLOCATIONS
gen = a.gen
rt.finalize()
out = {"live_before": live_before, "alive": rt.is_alive(gen), "frees": a.frees}
a.close()                                     # no-op, no double free
out["frees_after_close"] = a.frees
try:
    a.use()
except RuntimeFinalizedError as exc:
    out["use"] = str(exc)
out["live_after"] = mock.aclmockGetStat(-1, 3)
buf = ctypes.create_string_buffer(4096)
mock.aclmockGetLeakReport(buf, 4096, 1)       # ACLMOCK_REPORT_LAST_FINALIZE
out["leaks_at_finalize"] = buf.value.decode()
# a new generation: old objects stay dead, new ones work
rt.init()
ll.check(ll.aclrtSetDevice(0), "aclrtSetDevice")
c = TrackedBuffer(64)
out["old_alive_in_new_gen"] = rt.is_alive(gen)
try:
    a.use()
except RuntimeFinalizedError as exc:
    out["old_use"] = str(exc)
out["new_ptr"] = c.use() != 0
print(json.dumps(out))
"""
    )
    out = last_json(proc)
    assert out["live_before"] == 1
    assert out["alive"] is False
    assert out["frees"] == 1 and out["frees_after_close"] == 1
    assert "finalized" in out["use"] and "TrackedBuffer" in out["use"]
    assert out["live_after"] == 0
    assert "no leaks" in out["leaks_at_finalize"].lower()
    assert out["old_alive_in_new_gen"] is False
    assert "earlier runtime generation" in out["old_use"]
    assert out["new_ptr"] is True


def test_finalize_with_live_runtime_objects() -> None:
    """Real Stream/Event objects alive at finalize: released by their hooks (the mock
    shows nothing left), then inert: close() is a no-op, use raises."""
    proc = run_py(
        """
        import ctypes, json
        from pyacl_rt import lowlevel as ll, _runtime as rt
        from pyacl_rt.errors import RuntimeFinalizedError
        from pyacl_rt._event import Event
        from pyacl_rt._stream import Stream
        s = Stream(device=1)
        e = Event()
        e.record(s)
        s.synchronize()
        mock = ctypes.CDLL(ll.selection().path)
        mock.aclmockGetStat.restype = ctypes.c_int64
        stats = lambda: [mock.aclmockGetStat(-1, k) for k in range(3)]  # ctx, streams, events
        out = {"before": stats()}
        rt.finalize()
        out["after"] = stats()
        s.close()
        e.close()
        out["after_close"] = stats()
        uses = []
        for use in (s.query, e.query, s.synchronize):
            try:
                use()
                uses.append("no error")
            except RuntimeFinalizedError:
                uses.append("RuntimeFinalizedError")
        out["uses"] = uses
        buf = ctypes.create_string_buffer(4096)
        mock.aclmockGetLeakReport(buf, 4096, 1)
        out["leaks"] = buf.value.decode()
        print(json.dumps(out))
        """
    )
    out = last_json(proc)
    assert all(n > 0 for n in out["before"]), out
    assert out["after"] == [0, 0, 0]
    assert out["after_close"] == [0, 0, 0]
    assert out["uses"] == ["RuntimeFinalizedError"] * 3
    assert "no leaks" in out["leaks"]
    assert "raised during finalize" not in proc.stderr, proc.stderr


def test_status_snapshot() -> None:
    proc = run_py(
        """
        import json
        from pyacl_rt import _runtime as rt
        rt.register_release_hook(lambda: None, rt.PRIORITY_EVENTS)
        rt.init()
        print(json.dumps(rt.status()))
        """
    )
    st = last_json(proc)
    assert st["state"] == "ready" and st["generation"] == 1 and st["external"] is False
    assert st["bad_fork"] is False and st["release_hooks"] >= 1


# ------------------------------------------------------------ the finalize gate
def test_finalize_waits_for_calls_in_flight_and_refuses_new_ones() -> None:
    """finalize closes the gate, then waits for what other threads have in flight
    (here a gated section, as a release or a host-side copy holds) before it releases
    anything; a new call from a third thread meanwhile is refused before it reaches the
    runtime; the thread inside the gate may still finish its work."""
    proc = run_py(
        """
        import threading, time
        import pyacl_rt as npu
        from pyacl_rt import _runtime as rt, _state
        from pyacl_rt.errors import RuntimeFinalizedError
        from pyacl_rt.lowlevel import fast
        s = npu.Stream()
        inside, leave = threading.Event(), threading.Event()
        def user():
            _state.gate_enter("a test section")
            inside.set()
            leave.wait(60)
            print("inside: query", s.query(), flush=True)  # still allowed in the gate
            _state.gate_exit()
        t = threading.Thread(target=user)
        t.start()
        inside.wait(60)
        done = threading.Event()
        fin = threading.Thread(target=lambda: (npu.finalize(), done.set()))
        fin.start()
        while not fast._gate_state()[0]:
            time.sleep(0.001)
        print("finalize waits:", not done.wait(0.2), "stream open:", not s.closed, flush=True)
        def third():
            try:
                s.query()
                print("third: no error", flush=True)
            except RuntimeFinalizedError as exc:
                print("third: refused", "was not called" in str(exc), flush=True)
        th = threading.Thread(target=third)
        th.start()
        th.join(60)
        leave.set()
        t.join(60)
        fin.join(60)
        print("finalized:", done.is_set(), rt.state(), s.closed, fast._gate_state()[:2], flush=True)
        rt.init()
        print("after init:", fast._gate_state()[:2], npu.Stream().query(), flush=True)
        """
    )
    assert proc.stdout.splitlines() == [
        "finalize waits: True stream open: True",
        "third: refused True",
        "inside: query True",
        "finalized: True finalized True (True, 0)",
        "after init: (False, 0) True",
    ], proc.stdout + proc.stderr


def test_finalize_names_calls_in_flight_it_keeps_waiting_for() -> None:
    """finalize never releases under a call in flight; while it waits it logs a warning
    every GATE_WARN_SECONDS saying so (the thread here leaves once it was logged)."""
    proc = run_py(
        """
        import logging, threading
        import pyacl_rt as npu
        from pyacl_rt import _runtime as rt, _state
        rt.GATE_WARN_SECONDS = 0.05
        warned = threading.Event()
        seen = []
        class Seen(logging.Handler):
            def emit(self, record):
                if "in flight" in record.getMessage():
                    seen.append(record.getMessage())
                    warned.set()
        logging.getLogger("pyacl_rt.runtime").addHandler(Seen())
        npu.Stream()
        inside = threading.Event()
        def user():
            _state.gate_enter("a test section")
            inside.set()
            print("warned:", warned.wait(60), flush=True)
            _state.gate_exit()
        t = threading.Thread(target=user)
        t.start()
        inside.wait(60)
        npu.finalize()
        t.join(60)
        print(rt.state(), "(1)" in seen[0], flush=True)
        """
    )
    assert proc.stdout.splitlines() == ["warned: True", "finalized True"], proc.stderr


def test_a_release_refused_during_finalize_is_handed_to_finalize() -> None:
    """A stream and an event whose last references are dropped on another thread while
    finalize runs (their finalizers run there, after the gate closed): the releases are
    refused on that thread and run by finalize, before contexts and devices go - each
    handle destroyed exactly once, nothing logged."""
    proc = run_py(
        """
        import logging, threading, time
        import pyacl_rt as npu
        from pyacl_rt import _runtime as rt, _state
        from pyacl_rt.lowlevel import fast
        from pyacl_rt.mock import mock_control
        logs = []
        class Keep(logging.Handler):
            def emit(self, record):
                logs.append(record.getMessage())
        logging.getLogger("pyacl_rt").addHandler(Keep())
        mc = mock_control()
        npu.set_device(0)
        base = (mc.stat("streams", 0), mc.stat("events", 0))
        holder = [npu.Stream(0)]
        ev = npu.Event()
        ev.record(holder[0])
        holder.append(ev)
        del ev
        seen = {}
        def check():  # a release hook between the handed-over releases and the contexts
            seen["left"] = (mc.stat("streams", 0), mc.stat("events", 0))
        rt.register_release_hook(check, rt.PRIORITY_CONTEXTS, once=True)
        inside, leave = threading.Event(), threading.Event()
        def blocker():  # keeps finalize waiting in the gate until the drop happened
            _state.gate_enter("a test section")
            inside.set()
            leave.wait(60)
            _state.gate_exit()
        b = threading.Thread(target=blocker)
        b.start()
        inside.wait(60)
        fin = threading.Thread(target=npu.finalize)
        fin.start()
        while not fast._gate_state()[0]:
            time.sleep(0.001)
        d = threading.Thread(target=holder.clear)  # the finalizers run on that thread
        d.start()
        d.join(60)
        print("handed over:", len(rt.runtime.late), flush=True)
        leave.set()
        b.join(60)
        fin.join(60)
        print("left:", seen["left"] == base, "logged:", logs, flush=True)
        """
    )
    assert proc.stdout.splitlines() == ["handed over: 2", "left: True logged: []"], (
        proc.stdout + proc.stderr
    )


def test_daemon_thread_ended_by_finalize_at_exit_prints_nothing() -> None:
    """A daemon thread whose pyacl_rt call comes after finalize at interpreter exit gets
    RuntimeFinalizedError (the API's answer) and ends quietly: no traceback printed
    into the shutdown (it printed "Exception in thread ..." before)."""
    proc = run_py(
        """
        import atexit, threading
        go = threading.Event()
        def after_pyacl_rt_finalize():  # registered first: atexit runs it last
            go.set()
            t.join(10)
            print("daemon ended:", not t.is_alive(), flush=True)
        atexit.register(after_pyacl_rt_finalize)
        import pyacl_rt as npu
        s = npu.Stream()
        def daemon():
            go.wait()
            s.query()
        t = threading.Thread(target=daemon, daemon=True)
        t.start()
        print("exiting", flush=True)
        """
    )
    assert proc.stdout.splitlines() == ["exiting", "daemon ended: True"]
    assert proc.stderr == ""


def test_ctrl_c_while_finalize_waits_releases_nothing() -> None:
    """finalize first waits for the queued device work, in slices: Ctrl-C there raises
    KeyboardInterrupt with nothing released; the objects stay usable and a later
    finalize works."""
    proc = run_py(
        """
        import os, signal, threading, time
        import pyacl_rt as npu
        from pyacl_rt import _runtime as rt
        from pyacl_rt.lowlevel import fast
        s = npu.Stream()
        s.launch_host_func(time.sleep, 5.0)  # holds the stream
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            npu.finalize()
            print("finalized", flush=True)
        except KeyboardInterrupt:
            print("interrupted early:", time.monotonic() - t0 < 4.0, flush=True)
        print(rt.state(), s.closed, fast._gate_state()[:2], flush=True)
        s.synchronize()
        print("query", s.query(), flush=True)
        npu.finalize()
        print(rt.state(), s.closed, flush=True)
        """
    )
    assert proc.stdout.splitlines() == [
        "interrupted early: True",
        "ready False (False, 0)",
        "query True",
        "finalized True",
    ], proc.stdout + proc.stderr


# -------------------------------------------------------------- fork and spawn
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_raises() -> None:
    proc = run_py(
        """
        import os, sys
        from pyacl_rt import lowlevel as ll, _runtime as rt
        from pyacl_rt.errors import ForkedProcessError
        rt.register_release_hook(lambda: print("parent hook", os.getpid() == parent, flush=True),
                                 rt.PRIORITY_EVENTS)
        parent = os.getpid()
        rt.init()
        gen = rt.generation()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            results = []
            for fn in (rt.ensure_initialized, rt.init, lambda: rt.check_alive(gen)):
                try:
                    fn()
                    results.append("no error")
                except ForkedProcessError as exc:
                    results.append("spawn" in str(exc))
            rt.finalize()          # quiet no-op in the child
            results.append(rt.in_bad_fork())
            results.append(rt.is_alive(gen))
            results.append(rt.is_initialized())
            print("child", results, flush=True)
            sys.exit(0)            # runs atexit: must not finalize the parent's runtime
        _, status = os.waitpid(pid, 0)
        print("child status", os.waitstatus_to_exitcode(status), flush=True)
        print("parent alive", rt.is_alive(gen), rt.in_bad_fork(), flush=True)
        """
    )
    lines = proc.stdout.splitlines()
    assert "child [True, True, True, True, False, False]" in lines
    assert "child status 0" in lines
    assert "parent alive True False" in lines
    # the parent's hook ran exactly once, in the parent, at the parent's exit
    assert lines.count("parent hook True") == 1
    assert "parent hook False" not in lines


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_before_init_is_allowed() -> None:
    proc = run_py(
        """
        import os, sys
        from pyacl_rt import _runtime as rt
        rt.register_release_hook(lambda: print("hook in", os.getpid() == parent, flush=True),
                                 rt.PRIORITY_EVENTS)
        parent = os.getpid()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            rt.ensure_initialized()
            print("child", rt.state(), rt.in_bad_fork(), flush=True)
            rt.finalize()        # hooks registered before the fork still run here
            print("child", rt.state(), flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("status", os.waitstatus_to_exitcode(status), flush=True)
        """
    )
    lines = proc.stdout.splitlines()
    assert lines == ["child ready False", "hook in False", "child finalized", "status 0"]


_MP_SCRIPT = """
import multiprocessing as mp
import sys

def child_job(q):
    from pyacl_rt import lowlevel as ll, _runtime as rt
    from pyacl_rt.errors import ForkedProcessError
    try:
        rt.ensure_initialized()
        s = ll.scratch()
        ll.check(ll.aclrtGetDeviceCount(s.u32), "aclrtGetDeviceCount")
        q.put(("ok", int(s.u32[0]), rt.state()))
    except ForkedProcessError as exc:
        q.put(("forked", str(exc), type(exc).__name__))

if __name__ == "__main__":
    from pyacl_rt import _runtime as rt
    rt.init()                      # the parent uses the runtime first
    ctx = mp.get_context(sys.argv[1])
    q = ctx.Queue()
    p = ctx.Process(target=child_job, args=(q,))
    p.start()
    res = q.get(timeout=60)
    p.join(60)
    print(repr(res))
    print("exitcode", p.exitcode)
"""


def test_spawn_child_works(tmp_path: Path) -> None:
    script = tmp_path / "mp_spawn.py"
    script.write_text(_MP_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), "spawn"],
        env=_env(ASCEND_MOCK_DEVICE_COUNT="3"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["('ok', 3, 'ready')", "exitcode 0"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_multiprocessing_fork_child_raises(tmp_path: Path) -> None:
    script = tmp_path / "mp_fork.py"
    script.write_text(_MP_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script), "fork"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("('forked',")
    assert "spawn" in first and "ForkedProcessError" in first


def test_settle_brings_pyacl_rt_to_rest(mock_loaded: Any) -> None:
    """settle(): the thread's selection and current streams are forgotten, pooled
    streams destroyed, cached memory given back; the runtime stays up."""
    import pyacl_rt
    from pyacl_rt import _memory as M
    from pyacl_rt import _runtime as rt
    from pyacl_rt import _state
    from pyacl_rt import _stream as S
    from pyacl_rt.mock import mock_control

    pyacl_rt.set_device(1)
    streams = mock_control().stat("streams", 1)
    pooled = S.stream_from_pool(1)
    assert mock_control().stat("streams", 1) == streams + 1
    S.set_stream(pooled)
    M.DeviceBuffer(1024, device=1).close()  # cached by the caching allocator
    assert M.memory_reserved(1) > 0
    rt.settle()
    assert rt.is_initialized()
    assert _state._local.st.device == -1 and not _state._local.st.streams
    assert pooled.closed and mock_control().stat("streams", 1) == streams
    assert M.memory_reserved(1) == 0
