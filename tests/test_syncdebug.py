"""Sync-debug mode (pyacl_rt._syncdebug): every blocking entry point warns / raises,
non-blocking calls and teardown never do, and the mode is scoped per thread and per
asyncio task.

``SCENARIOS`` drives each public name of ``_syncdebug.BLOCKING_CALLS`` (the one list of
blocking calls) at least once; a source scan checks that every ``check_sync`` hook line
in the package is reached by some scenario, so a new hook needs a scenario here and a
new blocking call an entry in the list.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import numpy as np
import pytest
from conftest import _clean_env

import pyacl_rt as npu
from pyacl_rt import _options, _syncdebug
from pyacl_rt._memory import backend as _membackend
from pyacl_rt.errors import AclUsageError, ConfigError

PKG = Path(npu.__file__).resolve().parent
N = 256


@pytest.fixture(autouse=True)
def _restore_mode() -> Iterator[None]:
    """Whatever a test sets, the thread's mode is back to unset afterwards."""
    with npu.sync_debug_mode("default"):
        yield


def _memory_module() -> ModuleType:
    """The module that defines copy() (wherever a relayout puts it; found through the
    function's globals, as its ``__module__`` names the public module)."""
    return sys.modules[npu.copy.__globals__["__name__"]]


# ------------------------------------------------------------------ scenarios
Setup = Callable[[ExitStack, pytest.MonkeyPatch], Callable[[], object]]


def _closing(stack: ExitStack, obj: Any) -> Any:
    stack.callback(obj.close)
    return obj


def _pending_on(stack: ExitStack, buf: Any) -> Any:
    """Give ``buf`` work on a stream (freeing / host use then waits for that stream)."""
    s = _closing(stack, npu.Stream(0))
    dev = _closing(stack, npu.DeviceBuffer(N, device=0))
    if isinstance(buf, npu.HostBuffer):
        npu.copy(buf, dev, stream=s, non_blocking=True)
    else:
        npu.copy(dev, buf, stream=s, non_blocking=True)
    return buf


def _dev(stack: ExitStack, device: int = 0) -> Any:
    return _closing(stack, npu.DeviceBuffer(N, device=device))


def _no_peer(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(_memory_module(), "_ensure_peer", lambda ctx, peer: False)


def _s_synchronize(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    s = _closing(stack, npu.Stream(0))
    s.launch_host_func(lambda: None)
    return s.synchronize


def _s_close(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    return _closing(stack, npu.Stream(0)).close


def _context_sync(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    return _closing(stack, npu.Context(0)).synchronize


def _event_sync(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    e = _closing(stack, npu.Event())
    e.record(_closing(stack, npu.Stream(0)))
    return e.synchronize


def _elapsed(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    s = _closing(stack, npu.Stream(0))
    a = _closing(stack, npu.Event(enable_timing=True))
    b = _closing(stack, npu.Event(enable_timing=True))
    a.record(s)
    b.record(s)
    return lambda: a.elapsed_time(b)


def _copy_h2d(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    dev = _dev(stack)
    return lambda: npu.copy(dev, np.ones(N, np.uint8))


def _copy_d2h(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    dev = _dev(stack)
    return lambda: npu.copy(bytearray(N), dev)


def _copy_h2h_stream(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    s = _closing(stack, npu.Stream(0))
    return lambda: npu.copy(bytearray(N), bytes(N), stream=s)


def _copy_h2h_pending(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    h = _pending_on(stack, _closing(stack, npu.HostBuffer(N)))
    return lambda: npu.copy(bytearray(N), h)


def _copy_staged(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    _no_peer(mp)
    a, b = _dev(stack, 0), _dev(stack, 1)
    return lambda: npu.copy(b, a)


def _copy_2d(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    dev = _dev(stack)
    return lambda: npu.copy_2d(dev, 16, bytes(N), 16, 8, 4)


def _memset(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    dev = _dev(stack)
    return lambda: npu.memset(dev, 1)


def _memcpy_async_staged(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    _no_peer(mp)
    a, b = _dev(stack, 0), _dev(stack, 1)
    s = _closing(stack, npu.Stream(1))
    return lambda: npu.memcpy_async(b, a, N, s)


def _copy_from_host(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    dev = _dev(stack)
    return lambda: dev.copy_from_host(bytes(N))


def _copy_to_host(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    return _dev(stack).copy_to_host


def _dev_fill(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    dev = _dev(stack)
    return lambda: dev.fill(2)


def _dev_memset(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    dev = _dev(stack)
    return lambda: dev.memset(3, 16, 8)


def _native(stack: ExitStack) -> None:
    """Allocate natively (aclrtMalloc per buffer) until the scenario ends: freeing such a
    buffer waits for its streams; the caching allocator's does not."""
    prev = _membackend.select("native")
    stack.callback(_membackend.select, prev.name)


def _dev_close(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    _native(stack)
    return _pending_on(stack, _dev(stack)).close  # type: ignore[no-any-return]


def _host_fill(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    h = _pending_on(stack, _closing(stack, npu.HostBuffer(N)))
    return lambda: h.fill(4)


def _host_close(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    _native(stack)
    return _pending_on(stack, _closing(stack, npu.HostBuffer(N))).close  # type: ignore[no-any-return]


def _dev_dlpack(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    dev = _pending_on(stack, _dev(stack))
    return dev.__dlpack__  # type: ignore[no-any-return]  # stream=None: waits; capsule dropped


def _host_dlpack(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    h = _pending_on(stack, _closing(stack, npu.HostBuffer(N)))
    return h.__dlpack__  # type: ignore[no-any-return]


def _view_dlpack_copy(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    view = _dev(stack).as_dlpack("float32")
    return lambda: view.__dlpack__(dl_device=(1, 0))  # a copy to the host


def _from_dlpack_copy(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    made: list[Any] = []
    stack.callback(lambda: [b.close() for b in made])
    return lambda: made.append(npu.from_dlpack(np.zeros(N, np.uint8), device=0))


def _object_code_close(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    import tempfile

    from test_lowlevel_kernels import _device_elf

    from pyacl_rt import mock

    mock.register_kernel("sd_noop", lambda b, n, x: None, (mock.Out("uint8", N),))
    stack.callback(mock.unregister_kernel, "sd_noop")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.o"
        path.write_bytes(_device_elf(["sd_noop"]))
        code = _closing(stack, npu.ObjectCode.from_file(path))
    s = _closing(stack, npu.Stream(0))
    npu.launch(s, npu.LaunchConfig(), code.get_kernel("sd_noop"), _dev(stack))
    return code.close  # type: ignore[no-any-return]


def _random_offset(stack: ExitStack, mp: pytest.MonkeyPatch) -> Callable[[], object]:
    gen = npu.RandomGenerator(1)
    stack.callback(gen.counter.close)
    return gen.offset


#: (public name as reported, scenario id, setup returning the blocking call). Setups run
#: in mode "default"; the returned call is made in mode "warn" / "error".
SCENARIOS: list[tuple[str, str, Setup]] = [
    ("synchronize()", "device", lambda st, mp: npu.synchronize),
    ("Device.synchronize()", "device", lambda st, mp: npu.Device(0).synchronize),
    ("Context.synchronize()", "context", _context_sync),
    ("Stream.synchronize()", "stream", _s_synchronize),
    ("Stream.close()", "owned", _s_close),
    ("Event.synchronize()", "recorded", _event_sync),
    ("Event.elapsed_time()", "timing", _elapsed),
    ("copy()", "h2d", _copy_h2d),
    ("copy()", "d2h", _copy_d2h),
    ("copy()", "h2h-stream", _copy_h2h_stream),
    ("copy()", "h2h-pending", _copy_h2h_pending),
    ("copy()", "staged", _copy_staged),
    ("copy_2d()", "h2d", _copy_2d),
    ("memset()", "device", _memset),
    ("memcpy_async()", "staged", _memcpy_async_staged),
    ("DeviceBuffer.copy_from_host()", "sync", _copy_from_host),
    ("DeviceBuffer.copy_to_host()", "sync", _copy_to_host),
    ("DeviceBuffer.fill()", "sync", _dev_fill),
    ("DeviceBuffer.memset()", "sync", _dev_memset),
    ("DeviceBuffer.close()", "used", _dev_close),
    ("HostBuffer.fill()", "pending", _host_fill),
    ("HostBuffer.close()", "used", _host_close),
    ("empty_cache()", "any", lambda st, mp: npu.empty_cache),
    ("DeviceBuffer.__dlpack__()", "pending", _dev_dlpack),
    ("HostBuffer.__dlpack__()", "pending", _host_dlpack),
    ("DLPackView.__dlpack__()", "copy", _view_dlpack_copy),
    ("from_dlpack()", "copy", _from_dlpack_copy),
    ("ObjectCode.close()", "launched", _object_code_close),
    ("RandomGenerator.offset()", "sync", _random_offset),
]
IDS = [f"{name}-{sid}" for name, sid, _ in SCENARIOS]


def test_scenarios_cover_exactly_the_blocking_list() -> None:
    assert {name for name, _, _ in SCENARIOS} == set(_syncdebug.BLOCKING_CALLS)
    assert len(set(_syncdebug.BLOCKING_CALLS)) == len(_syncdebug.BLOCKING_CALLS)


@pytest.mark.parametrize("name,sid,setup", SCENARIOS, ids=IDS)
def test_blocking_call_warns_once_at_the_callers_line(
    name: str, sid: str, setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ExitStack() as stack:
        call = setup(stack, monkeypatch)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            with npu.sync_debug_mode("warn"):
                call()
        ours = [w for w in got if issubclass(w.category, npu.SyncDebugWarning)]
        assert len(ours) == 1, [str(w.message) for w in ours]
        w = ours[0]
        assert str(w.message).startswith(f"pyacl_rt: {name} makes the host wait"), w.message
        assert "'warn'" in str(w.message)
        assert w.filename == __file__, (w.filename, w.lineno)  # the user's line, not ours
        assert not [x for x in got if x not in ours], [str(x.message) for x in got]


@pytest.mark.parametrize("name,sid,setup", SCENARIOS, ids=IDS)
def test_blocking_call_raises_before_waiting(
    name: str, sid: str, setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ExitStack() as stack:
        call = setup(stack, monkeypatch)
        with npu.sync_debug_mode("error"), pytest.raises(npu.SyncDebugError) as info:
            call()
        exc = info.value
        assert exc.function == name
        assert name in str(exc) and "'error'" in str(exc)
        assert isinstance(exc, RuntimeError) and isinstance(exc, AclUsageError)
        call()  # nothing was left half done: the same call works in mode "default"


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]


def _hook_sites() -> set[tuple[str, int]]:
    """(file, line) of every ``check_sync(...)`` hook in the package, each checked to
    have the shape ``if [cond and] sync_debug_active(): check_sync("literal")``."""
    sites = set()
    for path in PKG.rglob("*.py"):
        if path.name == "_syncdebug.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.If) or not _calls(node.test, "sync_debug_active"):
                continue
            assert len(node.body) == 1 and not node.orelse, f"{path}:{node.lineno}"
            (call,) = _calls(node.body[0], "check_sync")
            assert len(call.args) == 1 and isinstance(call.args[0], ast.Constant), (
                f"{path}:{call.lineno}: check_sync takes one string literal"
            )
            sites.add((str(path), call.lineno))
        n_checks = len(_calls(tree, "check_sync"))
        assert n_checks == len([s for s in sites if s[0] == str(path)]), (
            f"{path}: a check_sync call outside `if sync_debug_active():`"
        )
    return sites


def test_every_hook_is_reached_by_a_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    fired: set[tuple[str, int]] = set()
    real = _syncdebug._report

    def spy(what: str, hook: FrameType) -> None:
        fired.add((str(Path(hook.f_code.co_filename).resolve()), hook.f_lineno))
        real(what, hook)

    monkeypatch.setattr(_syncdebug, "_report", spy)
    for _name, _sid, setup in SCENARIOS:
        with ExitStack() as stack, monkeypatch.context() as mp:
            call = setup(stack, mp)
            with warnings.catch_warnings(), npu.sync_debug_mode("warn"):
                warnings.simplefilter("ignore", npu.SyncDebugWarning)
                call()
    sites = _hook_sites()
    assert len(sites) >= 12
    assert sites - fired == set(), "hooks no scenario reaches (add one to SCENARIOS)"


# ------------------------------------------------------------ non-blocking
def test_non_blocking_calls_do_not_report(monkeypatch: pytest.MonkeyPatch) -> None:
    with ExitStack() as stack, warnings.catch_warnings():
        warnings.simplefilter("error")
        s = _closing(stack, npu.Stream(0))
        s1 = _closing(stack, npu.Stream(1))
        dev, dev2 = _dev(stack), _dev(stack)
        host = _closing(stack, npu.HostBuffer(N))
        arr = np.zeros(N, np.uint8)
        with npu.sync_debug_mode("error"):
            assert npu.get_sync_debug_mode() == 2
            e = _closing(stack, npu.Event(enable_timing=True))
            e.synchronize()  # never recorded: no wait
            e.record(s)
            e.query()
            e.wait(s1)
            s1.wait_event(e)
            s1.wait_stream(s)
            s.query()
            s.record_event(_closing(stack, npu.Event()))
            s.launch_host_func(lambda: None)
            npu.copy(dev, arr, stream=s, non_blocking=True)
            npu.copy(host, dev, stream=s, non_blocking=True)
            npu.copy(dev2, dev, stream=s, non_blocking=True)
            npu.copy_2d(dev2, 16, dev, 16, 8, 4, stream=s, non_blocking=True)
            npu.memcpy_async(dev2, host, N, s)
            npu.memcpy_async(dev, dev2, N, s)
            dev.copy_from_host_async(arr, s)
            dev.copy_to_host_async(arr, s)
            npu.memset(dev, 0, stream=s, non_blocking=True)
            dev.memset(1, non_blocking=True, stream=s)
            npu.copy(bytearray(8), b"12345678")  # host to host, nothing pending
            npu.memset(bytearray(8), 1)
            npu.mem_get_info(0)
            npu.memory_stats(0)
            npu.current_stream(0)
            npu.default_stream(0)
            npu.stream_from_pool(0)
            npu.DeviceBuffer(N).close()  # never used on a stream: nothing to wait for
            npu.HostBuffer(N).close()
            prev = _membackend.select("caching")
            try:  # the cache takes used blocks back without waiting
                used_dev, used_host = npu.DeviceBuffer(N), npu.HostBuffer(N)
                npu.copy(used_dev, arr, stream=s, non_blocking=True)
                npu.copy(used_host, used_dev, stream=s, non_blocking=True)
                used_dev.close()
                used_host.close()
            finally:
                _membackend.select(prev.name)
            dev[0:16].close()  # a view
            npu.Event().close()
            _closing(stack, npu.Stream(0))
            dev.__dlpack__(stream=-1)  # DLPack: no synchronization asked
            dev.__dlpack__(stream=s)  # the consumer's stream waits, not the host
            npu.HostBuffer(N).__dlpack__()  # nothing pending
            _closing(stack, npu.from_dlpack(arr))  # zero-copy import
        npu.synchronize(0)
        npu.synchronize(1)


def test_off_is_the_default_and_reports_nothing() -> None:
    assert npu.get_sync_debug_mode() == 0
    with ExitStack() as stack, warnings.catch_warnings():
        warnings.simplefilter("error")
        for _name, _sid, setup in SCENARIOS[:8]:
            with pytest.MonkeyPatch.context() as mp:
                setup(stack, mp)()


# ------------------------------------------------------------------ teardown
def test_garbage_collected_buffers_and_streams_never_report() -> None:
    before = npu.memory_allocated(0)
    with warnings.catch_warnings(), npu.sync_debug_mode("error"):
        warnings.simplefilter("error")
        s = npu.Stream(0)
        dev = npu.DeviceBuffer(N, device=0)
        host = npu.HostBuffer(N)
        npu.copy(dev, np.ones(N, np.uint8), stream=s, non_blocking=True)
        npu.copy(host, dev, stream=s, non_blocking=True)
        del dev, host, s
        gc.collect()
    assert npu.memory_allocated(0) == before  # freed (after waiting), silently


def test_context_close_is_teardown() -> None:
    ctx = npu.Context(0)
    with ctx:
        s = npu.Stream()
        buf = npu.DeviceBuffer(N)
        npu.copy(buf, bytes(N), stream=s, non_blocking=True)
    with warnings.catch_warnings(), npu.sync_debug_mode("error"):
        warnings.simplefilter("error")
        ctx.close()
    assert s.closed and buf.closed


def test_finalize_and_exit_in_error_mode(run_python: Any) -> None:
    proc = run_python(
        """
        import warnings
        warnings.simplefilter("error")
        import numpy as np
        import pyacl_rt as npu
        assert npu.get_sync_debug_mode() == 2
        s = npu.Stream(0)
        dev = npu.DeviceBuffer(64)
        npu.copy(dev, np.ones(64, np.uint8), stream=s, non_blocking=True)
        npu.finalize()  # waits for s and frees dev: teardown, not reported
        npu.init()
        s2 = npu.Stream(0)
        dev2 = npu.DeviceBuffer(64)
        npu.copy(dev2, np.ones(64, np.uint8), stream=s2, non_blocking=True)
        print("OK")  # interpreter exit finalizes s2 / dev2
        """,
        env=_clean_env(PYACL_RT_BACKEND="mock", PYACL_RT_SYNC_DEBUG="error"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"
    assert "SyncDebug" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


# ------------------------------------------------------------------ the API
@pytest.mark.parametrize(
    "value,number",
    [("default", 0), ("warn", 1), ("error", 2), (0, 0), (1, 1), (2, 2), (np.int64(2), 2)],
)
def test_set_get(value: str | int, number: int) -> None:
    npu.set_sync_debug_mode(value)
    assert npu.get_sync_debug_mode() == number
    assert type(npu.get_sync_debug_mode()) is int


@pytest.mark.parametrize(
    "bad,exc",
    [
        ("WARN", ValueError),
        ("loud", ValueError),
        (3, ValueError),
        (-1, ValueError),
        (True, TypeError),
        (1.0, TypeError),
        (None, TypeError),
    ],
)
def test_bad_mode_is_refused(bad: Any, exc: type[Exception]) -> None:
    npu.set_sync_debug_mode("warn")
    with pytest.raises(exc, match="debug_mode must be one of 'default', 'warn', 'error'"):
        npu.set_sync_debug_mode(bad)
    with pytest.raises(exc, match="debug_mode must be"):
        npu.sync_debug_mode(bad)
    assert npu.get_sync_debug_mode() == 1  # unchanged


def test_context_manager_restores_exactly() -> None:
    assert npu.get_sync_debug_mode() == 0
    guard = npu.sync_debug_mode("error")
    with guard as mode:
        assert mode == 2 and npu.get_sync_debug_mode() == 2
        npu.set_sync_debug_mode("warn")  # inside the block: undone on exit
        with npu.sync_debug_mode(0):
            assert npu.get_sync_debug_mode() == 0
            with guard:  # re-entrant
                assert npu.get_sync_debug_mode() == 2
            assert npu.get_sync_debug_mode() == 0
        assert npu.get_sync_debug_mode() == 1
    assert npu.get_sync_debug_mode() == 0


def test_context_manager_restores_after_an_exception() -> None:
    s = npu.Stream(0)
    try:
        with pytest.raises(npu.SyncDebugError), npu.sync_debug_mode("error"):
            s.synchronize()
        assert npu.get_sync_debug_mode() == 0
        s.synchronize()
    finally:
        s.close()


def test_warning_points_at_the_calling_line() -> None:
    s = npu.Stream(0)
    dev = npu.DeviceBuffer(N)
    try:
        with pytest.warns(npu.SyncDebugWarning) as rec, npu.sync_debug_mode("warn"):
            line = sys._getframe().f_lineno + 1
            s.synchronize()
        assert (rec[0].filename, rec[0].lineno) == (__file__, line)
        with pytest.warns(npu.SyncDebugWarning) as rec, npu.sync_debug_mode("warn"):
            line = sys._getframe().f_lineno + 1
            dev.copy_to_host()  # waits three calls deep (copy, do_copy, ...)
        assert (rec[0].filename, rec[0].lineno) == (__file__, line)
    finally:
        dev.close()
        s.close()


def test_warnings_filter_error_turns_warn_into_an_exception() -> None:
    s = npu.Stream(0)
    try:
        with warnings.catch_warnings(), npu.sync_debug_mode("warn"):
            warnings.simplefilter("error", npu.SyncDebugWarning)
            with pytest.raises(npu.SyncDebugWarning, match=r"Stream\.synchronize\(\)"):
                s.synchronize()
    finally:
        s.close()


def test_error_pickles() -> None:
    import pickle

    s = npu.Stream(0)
    try:
        with pytest.raises(npu.SyncDebugError) as info, npu.sync_debug_mode("error"):
            s.synchronize()
    finally:
        s.close()
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is npu.SyncDebugError and again.function == "Stream.synchronize()"
    assert str(again) == str(info.value)


def test_refused_copy_and_memset_change_nothing() -> None:
    prev = _membackend.select("native")  # a native buffer's close() waits
    try:
        dev = npu.DeviceBuffer(N)
    finally:
        _membackend.select(prev.name)
    try:
        npu.memset(dev, 0)
        with npu.sync_debug_mode("error"):
            with pytest.raises(npu.SyncDebugError):
                npu.copy(dev, np.ones(N, np.uint8))
            with pytest.raises(npu.SyncDebugError):
                npu.memset(dev, 9)
            with pytest.raises(npu.SyncDebugError):
                dev.close()
            assert not dev.closed
        assert bytes(dev.copy_to_host()) == bytes(N)
    finally:
        dev.close()


# ------------------------------------------------------------------ scoping
def test_threads_have_their_own_mode() -> None:
    s = npu.Stream(0)
    entered, done = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def strict() -> None:
        try:
            npu.set_sync_debug_mode("error")
            entered.set()
            assert done.wait(60)
            s.synchronize()
        except BaseException as exc:
            seen["strict"] = exc

    t = threading.Thread(target=strict)
    t.start()
    try:
        assert entered.wait(60)
        assert npu.get_sync_debug_mode() == 0  # the other thread's setting is not ours
        s.synchronize()
    finally:
        done.set()
        t.join(60)
    assert isinstance(seen.get("strict"), npu.SyncDebugError)
    s.close()


def test_new_thread_starts_from_the_process_default() -> None:
    if getattr(sys.flags, "thread_inherit_context", 0):
        pytest.skip("threads inherit the creator's context on this Python")
    got: list[int] = []
    with npu.sync_debug_mode("error"):
        t = threading.Thread(target=lambda: got.append(npu.get_sync_debug_mode()))
        t.start()
        t.join(60)
    assert got == [0]


def test_asyncio_tasks_have_their_own_mode() -> None:
    s = npu.Stream(0)

    async def strict(ready: asyncio.Event, go: asyncio.Event) -> str:
        with npu.sync_debug_mode("error"):
            ready.set()
            await go.wait()  # the other task runs meanwhile, in its own mode
            try:
                s.synchronize()
            except npu.SyncDebugError:
                return "raised"
            return "waited"

    async def relaxed(ready: asyncio.Event, go: asyncio.Event) -> str:
        await ready.wait()  # the strict task is inside its block now
        mode = npu.get_sync_debug_mode()
        s.synchronize()
        go.set()
        return f"mode {mode}"

    async def setter() -> int:
        npu.set_sync_debug_mode("warn")  # only in this task's context
        return npu.get_sync_debug_mode()

    async def main() -> tuple[list[str], int, int, int]:
        ready, go = asyncio.Event(), asyncio.Event()
        results = await asyncio.gather(strict(ready, go), relaxed(ready, go))
        in_task = await asyncio.create_task(setter())
        after = npu.get_sync_debug_mode()
        with npu.sync_debug_mode("error"):
            inherited = await asyncio.create_task(_mode_in_task())
        return list(results), in_task, after, inherited

    try:
        results, in_task, after, inherited = asyncio.run(main())
    finally:
        s.close()
    assert results == ["raised", "mode 0"]
    assert (in_task, after) == (1, 0)  # a task's set does not leak to its creator
    assert inherited == 2  # a task starts with a copy of its creator's context
    assert npu.get_sync_debug_mode() == 0


async def _mode_in_task() -> int:
    return npu.get_sync_debug_mode()


# --------------------------------------------------------------- environment
@pytest.mark.parametrize(
    "raw,parsed",
    [("warn", "warn"), (" ERROR ", "error"), ("0", "default"), ("1", "warn"), ("2", "error")],
)
def test_env_option_parses(raw: str, parsed: str) -> None:
    assert _options.parse_options({"PYACL_RT_SYNC_DEBUG": raw}).sync_debug == parsed
    assert _options.parse_options({}).sync_debug == "default"


@pytest.mark.parametrize("raw", ["loud", "3", "yes"])
def test_env_option_bad_value(raw: str) -> None:
    with pytest.raises(ConfigError, match="PYACL_RT_SYNC_DEBUG"):
        _options.parse_options({"PYACL_RT_SYNC_DEBUG": raw})


def test_env_sets_the_process_default(run_python: Any) -> None:
    proc = run_python(
        """
        import threading, warnings
        import pyacl_rt as npu
        assert npu.get_sync_debug_mode() == 1
        s = npu.Stream(0)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            s.synchronize()
            with npu.sync_debug_mode("default"):
                s.synchronize()
        assert len(got) == 1 and got[0].category is npu.SyncDebugWarning, got
        modes = []
        t = threading.Thread(target=lambda: modes.append(npu.get_sync_debug_mode()))
        t.start(); t.join()
        assert modes == [1], modes  # every thread starts from the process default
        s.close()
        print("OK")
        """,
        env=_clean_env(PYACL_RT_BACKEND="mock", PYACL_RT_SYNC_DEBUG="warn"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"


def test_env_bad_value_is_a_config_error(run_python: Any) -> None:
    proc = run_python(
        """
        import pyacl_rt as npu  # importing reads nothing
        try:
            npu.get_sync_debug_mode()
        except npu.ConfigError as exc:
            print("ConfigError", exc)
        """,
        env=_clean_env(PYACL_RT_BACKEND="mock", PYACL_RT_SYNC_DEBUG="loud"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ConfigError") and "PYACL_RT_SYNC_DEBUG" in proc.stdout


def test_docs_list_every_blocking_call() -> None:
    """The sync-debug section of the service guide (it was the README's) names every
    reported call."""
    guide = PKG.parent / "docs" / "guides" / "service.md"
    if not guide.is_file():
        pytest.skip("no docs/ in this checkout")
    text = guide.read_text()
    start = text.index("## Finding the calls that make the host wait")
    section = text[start : text.index("\n## ", start + 1)]
    missing = [name for name in _syncdebug.BLOCKING_CALLS if f"`{name}`" not in section]
    assert not missing, f"docs/guides/service.md's sync-debug section does not list {missing}"


def test_first_check_of_a_thread_stores_the_default() -> None:
    """After one blocking call a thread knows its mode: later ones take the fast path
    (``sync_debug_active()`` false, no Python call)."""
    if getattr(sys.flags, "thread_inherit_context", 0):
        pytest.skip("threads inherit the creator's context on this Python")
    s = npu.Stream(0)
    seen: list[int] = []

    def worker() -> None:
        seen.append(_syncdebug.sync_debug_active())
        s.synchronize()
        seen.append(_syncdebug.sync_debug_active())

    t = threading.Thread(target=worker)
    t.start()
    t.join(60)
    s.close()
    assert seen == [_syncdebug._UNRESOLVED, 0]


def test_inside_a_host_callback_the_callback_error_wins() -> None:
    """A blocking call in a host callback would deadlock: CallbackContextError, not the
    sync-debug report, whatever the mode of the report thread."""
    s = npu.Stream(0)
    seen: list[BaseException] = []

    def callback() -> None:
        with npu.sync_debug_mode("error"):
            for call in (s.synchronize, npu.synchronize, lambda: npu.memset(dev, 0)):
                try:
                    call()
                except BaseException as exc:
                    seen.append(exc)

    dev = npu.DeviceBuffer(N)
    try:
        s.launch_host_func(callback)
        s.synchronize()
    finally:
        dev.close()
        s.close()
    assert [type(e) for e in seen] == [npu.CallbackContextError] * 3, seen
