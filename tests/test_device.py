"""Devices: counts, per-thread selection, guards, queries, no stray contexts."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from pyacl_rt import _device as D
from pyacl_rt import _devinfo as DI
from pyacl_rt import _state, errors, lowlevel
from pyacl_rt import _stream as S
from pyacl_rt.mock import mock_control


def in_thread(fn: Any, *args: Any) -> Any:
    """Run fn in a fresh thread, return its result or re-raise its exception."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["r"] = fn(*args)
        except BaseException as exc:
            box["e"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert not t.is_alive(), "thread hung"
    if "e" in box:
        raise box["e"]
    return box.get("r")


def raw_get_device() -> int | None:
    s = lowlevel.scratch()
    rc = lowlevel.lib.aclrtGetDevice(s.i32)
    if rc == 107002:
        lowlevel.recent_error_message()
        return None
    lowlevel.check(rc, "aclrtGetDevice")
    return int(s.i32[0])


# --------------------------------------------------------------------- tests
def test_count_and_available() -> None:
    assert D.device_count() == mock_control().device_count == 8
    assert D.is_available() is True


def test_current_device_default_and_per_thread() -> None:
    assert D.current_device() == 0
    D.set_device(2)
    assert D.current_device() == 2
    assert raw_get_device() == 2
    # A thread that never selected a device follows the main thread's selection.
    assert in_thread(D.current_device) == 2

    def other() -> tuple[int, int]:
        D.set_device(1)
        return D.current_device(), raw_get_device() or -1

    assert in_thread(other) == (1, 1)
    assert D.current_device() == 2  # untouched by the other thread
    assert raw_get_device() == 2


def test_set_device_accepts_forms() -> None:
    D.set_device("npu:1")
    assert D.current_device() == 1
    D.set_device(D.Device(3))
    assert D.current_device() == 3
    D.set_device("2")
    assert D.current_device() == 2


@pytest.mark.parametrize("bad", [8, 99, -1, "npu:8", "npu:x", "gpu:1"])
def test_invalid_device_index(bad: object) -> None:
    with pytest.raises(errors.InvalidDeviceError) as info:
        D.set_device(bad)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, errors.AclUsageError)


@pytest.mark.parametrize("bad", [1.5, True, object()])
def test_device_type_errors(bad: object) -> None:
    with pytest.raises((TypeError, errors.InvalidDeviceError)):
        D.set_device(bad)  # type: ignore[arg-type]


def test_nested_device_guard_restores_exactly() -> None:
    D.set_device(1)
    with D.device(2) as idx:
        assert idx == 2
        assert D.current_device() == 2
        with D.device(3):
            assert D.current_device() == 3
            assert raw_get_device() == 3
        assert D.current_device() == 2
        assert raw_get_device() == 2
        with D.device(None):
            assert D.current_device() == 2
    assert D.current_device() == 1
    assert raw_get_device() == 1


def test_device_guard_on_fresh_thread_restores_no_device() -> None:
    def body() -> tuple[int, int, int]:
        before = _state._local.st.device
        with D.device(1):
            inside = D.current_device()
        return before, inside, _state._local.st.device

    assert in_thread(body) == (-1, 1, -1)


def test_device_guard_restores_after_exception() -> None:
    D.set_device(0)
    with pytest.raises(KeyError), D.device(4):
        raise KeyError("x")
    assert D.current_device() == 0


def test_device_object() -> None:
    d = D.Device(1)
    assert d is D.Device(1) is D.Device("npu:1")
    assert d.index == 1 == int(d) == [10, 11][d] - 10
    assert d == 1 and d == D.Device(1) and d != D.Device(2)
    assert hash(d) == hash(D.Device(1))
    assert repr(d) == "Device(1)" and str(d) == "npu:1"
    mc = mock_control()
    assert d.name == mc.soc_name == d.soc_name
    assert d.total_memory == mc.config(2)
    free, total = d.mem_get_info()
    assert 0 < free <= total == d.total_memory
    assert d.free_memory <= total
    props = d.properties
    assert props.index == 1 and props.name == mc.soc_name
    assert props.total_memory == total
    assert props.cube_core_num is not None and props.vector_core_num is not None
    assert props.L2_cache_size is not None and props.L2_cache_size > 0
    assert d.info(D.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE) == total
    assert d.capability(D.ACL_DEVICE_INFO_AI_CORE_NUM) > 0
    assert d.feature(1) in (0, 1)  # ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV
    with pytest.raises(errors.AclError):
        d.info(-12345)  # unknown attribute: a typed error naming the function
    rates = d.utilization_rates()
    assert set(rates) == {"cube", "vector", "aicpu", "memory"}
    assert rates["memory"] is None  # ACL always reports -1 for memory
    assert 0 <= d.utilization() <= 100
    assert d.can_access_peer(1) is False
    assert d.can_access_peer(2) in (True, False)
    d.synchronize()


def test_device_object_as_guard() -> None:
    D.set_device(0)
    with D.Device(5) as dev:
        assert dev.index == 5
        assert D.current_device() == 5
        with D.Device(6):
            assert D.current_device() == 6
        assert D.current_device() == 5
    assert D.current_device() == 0
    D.Device(4).set_current()
    assert D.current_device() == 4


def test_device_of() -> None:
    s = S.Stream(3)
    D.set_device(0)
    with D.device_of(s):
        assert D.current_device() == 3
    assert D.current_device() == 0
    with D.device_of(object()):
        assert D.current_device() == 0
    s.close()


def test_torch_style_functions() -> None:
    mc = mock_control()
    assert DI.get_device_name() == mc.soc_name == DI.get_device_name(2)
    assert DI.get_soc_version() == mc.soc_name
    assert isinstance(DI.get_cann_version(), str)
    assert DI.get_cann_version("HCCL") == ""
    assert DI.is_support_inf_nan() is True  # default mock SoC: Ascend910B1
    assert DI.is_bf16_supported() is True
    assert DI.get_device_capability(0) is None
    free, total = DI.mem_get_info(1)
    assert free <= total
    assert 0 <= DI.utilization(1) <= 100
    props = DI.get_device_properties(2)
    assert props.index == 2 and props.total_memory == total
    assert DI.can_device_access_peer(0, 0) is False
    assert isinstance(DI.can_device_access_peer(0, 1), bool)
    D.synchronize()
    D.synchronize(1)
    D.synchronize("npu:2")


def test_set_op_timeout_ms() -> None:
    applied = DI.set_op_timeout_ms(2000)
    assert isinstance(applied, int) and applied >= 0
    with pytest.raises(ValueError):
        DI.set_op_timeout_ms(-1)
    with pytest.raises(TypeError):
        DI.set_op_timeout_ms(1.5)  # type: ignore[arg-type]


def test_objects_work_on_a_new_thread_without_set_device() -> None:
    s = S.Stream(2)

    def use() -> tuple[bool, int]:
        s.synchronize()
        return s.query(), _state._local.st.device

    assert in_thread(use) == (True, -1)
    s.close()


def test_forget_thread_context_after_raw_switch() -> None:
    s = S.Stream(1)
    s.query()
    # Switch the context behind pyacl_rt's back, then tell it.
    lowlevel.check(lowlevel.lib.aclrtSetCurrentContext(D.context_for(2).handle), "set")
    _state.forget_thread_context()
    assert s.query() is True
    assert raw_get_device() == 1
    s.close()


def test_device_errors_propagate_when_device_lost() -> None:
    mc = mock_control()
    D.set_device(6)
    mc.set_device_lost(6, 507010)
    try:
        with pytest.raises(errors.AclDeviceLostError):
            D.synchronize(6)
    finally:
        mc.set_device_lost(6, 0)
    D.synchronize(6)


def test_no_stray_contexts_when_using_only_device_3(run_python: Any) -> None:
    code = """
        import threading
        import pyacl_rt._device as D, pyacl_rt._devinfo as DI
        import pyacl_rt._stream as S, pyacl_rt._event as E
        from pyacl_rt.mock import mock_control
        assert D.current_device() == 0          # a query: must not create anything
        assert D.is_available()
        for i in range(D.device_count()):
            DI.get_device_properties(i)          # device-id queries: no context either
        s = S.Stream(3)
        e = E.Event()
        e.record(s)
        DI.mem_get_info(3)
        def worker():
            s.query(); e.synchronize()
            s2 = S.Stream(3); s2.synchronize(); s2.close()
            with D.device(3):
                S.current_stream().synchronize()
        t = threading.Thread(target=worker); t.start(); t.join()
        mc = mock_control()
        counts = [mc.stat("default_contexts", d) for d in range(8)]
        assert [mc.stat("contexts", d) for d in range(8)] == [0] * 8  # none explicit
        print(counts)
        assert counts == [0, 0, 0, 1, 0, 0, 0, 0], counts
        print("OK")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_fresh_thread_queries_do_not_create_contexts(run_python: Any) -> None:
    code = """
        import threading
        import pyacl_rt._device as D
        from pyacl_rt.mock import mock_control
        D.set_device(5)
        out = []
        t = threading.Thread(target=lambda: out.append(D.current_device())); t.start(); t.join()
        assert out == [5], out
        mc = mock_control()
        assert [mc.stat("default_contexts", d) for d in range(8)] == [0]*5 + [1] + [0, 0]
        print("OK")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr


def test_soc_dependent_queries(run_python: Any, clean_env: Any) -> None:
    code = """
        import pyacl_rt._device as D, pyacl_rt._devinfo as DI
        print(DI.get_soc_version(), DI.is_support_inf_nan(), DI.is_bf16_supported())
    """
    r = run_python(code, env=clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_SOC_NAME="Ascend310P3"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Ascend310P3", "False", "False"]


def test_fork_child_refuses_objects(run_python: Any) -> None:
    code = """
        import os
        import pyacl_rt._device as D, pyacl_rt._stream as S
        from pyacl_rt import errors
        s = S.Stream(1)
        s.query()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                s.query()
            except errors.ForkedProcessError:
                code = 0
            try:
                D.set_device(1)
                code = 1
            except errors.ForkedProcessError:
                pass
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert s.query()
        print("OK")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


TORCH_NPU_NAMES = {
    "pyacl_rt._device": [
        "is_available",
        "device_count",
        "set_device",
        "current_device",
        "device",
        "device_of",
        "synchronize",
    ],
    "pyacl_rt._devinfo": [
        "get_device_name",
        "get_device_properties",
        "mem_get_info",
        "utilization",
        "can_device_access_peer",
        "get_soc_version",
        "get_cann_version",
        "set_op_timeout_ms",
        "is_support_inf_nan",
        "is_bf16_supported",
    ],
    "pyacl_rt._stream": ["current_stream", "default_stream", "set_stream", "stream", "Stream"],
    "pyacl_rt._event": ["Event"],
}


@pytest.mark.parametrize(
    "module",
    [
        "pyacl_rt._device",
        "pyacl_rt._devinfo",
        "pyacl_rt._context",
        "pyacl_rt._stream",
        "pyacl_rt._event",
        "pyacl_rt._callbacks",
        "pyacl_rt._state",
    ],
)
def test_public_names_exist_and_are_documented(module: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    assert mod.__doc__ and len(mod.__doc__) > 200
    for name in mod.__all__:
        obj = getattr(mod, name)
        if callable(obj) and not isinstance(obj, int):
            assert obj.__doc__, f"{module}.{name} has no docstring"
    for name in TORCH_NPU_NAMES.get(module, []):
        assert name in mod.__all__, name


def test_device_creation_failure_is_typed_and_leaves_nothing(run_python: Any) -> None:
    code = """
        import pyacl_rt._device as D, pyacl_rt._stream as S
        from pyacl_rt import errors
        from pyacl_rt.mock import mock_control
        mc = mock_control()
        mc.inject_fault("aclrtSetDevice", 507033)
        try:
            S.Stream(2)
        except errors.AclDeviceLostError as exc:
            assert exc.code == 507033 and exc.function == "aclrtSetDevice"
        else:
            raise AssertionError("no error")
        assert 2 not in D.primaries and mc.stat("default_contexts", 2) == 0
        s = S.Stream(2)      # the next attempt works
        s.close()
        print("OK")
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_is_available_does_not_hide_a_configuration_error(run_python: Any, clean_env: Any) -> None:
    """Issue 14 item 6: ``PYACL_RT_BACKEND=bogus`` made is_available() return False
    silently while device_count() raised ConfigError: now both raise it. A missing
    library is still just False."""
    code = """
        import pyacl_rt as npu
        for f in (npu.is_available, npu.device_count):
            try:
                f()
            except npu.ConfigError as exc:
                print(f.__name__, "ConfigError", exc.variable)
    """
    proc = run_python(code, env=clean_env(PYACL_RT_BACKEND="bogus"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "is_available ConfigError PYACL_RT_BACKEND",
        "device_count ConfigError PYACL_RT_BACKEND",
    ]


@pytest.mark.parametrize(
    "env_extra",
    [
        {"ASCEND_RT_VISIBLE_DEVICES": "3,1"},  # not ascending: the runtime refuses it
        {"ASCEND_RT_VISIBLE_DEVICES": "abc"},  # malformed
        {"ASCEND_MOCK_DEVICE_COUNT": "0"},  # no device at all
    ],
)
def test_no_visible_device(run_python: Any, clean_env: Any, env_extra: dict[str, str]) -> None:
    """ACL_ERROR_RT_NO_DEVICE (207004) means 0 devices (like torch), not an error;
    selecting a device then names the reason."""
    code = """
        import pyacl_rt as npu
        import pyacl_rt._device as D
        from pyacl_rt import errors
        assert D.device_count() == 0 and npu.device_count() == 0
        assert D.is_available() is False
        for use in (lambda: D.set_device(0), lambda: npu.Stream(), lambda: D.Device(0)):
            try:
                use()
            except errors.AclError as exc:
                print("raised", type(exc).__name__, exc.code, str(exc))
        print("reason", D._no_device_reason)
    """
    env = clean_env(PYACL_RT_BACKEND="mock", **env_extra)
    r = run_python(code, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    raised = [line for line in lines if line.startswith("raised")]
    assert len(raised) == 3, r.stdout
    for line in raised:
        assert line.startswith("raised InvalidDeviceError 107001 invalid device index 0: ")
        assert "no device is visible (ACL_ERROR_RT_NO_DEVICE (207004): " in line
    assert lines[-1].startswith("reason ACL_ERROR_RT_NO_DEVICE (207004): aclrtGetDeviceCount")


def test_visible_devices_renumber(run_python: Any, clean_env: Any) -> None:
    code = """
        import pyacl_rt._device as D, pyacl_rt._stream as S
        from pyacl_rt.mock import mock_control
        assert D.device_count() == 2
        S.Stream(1).close()
        assert mock_control().physical_device(1) == 5
        print("OK")
    """
    env = clean_env(PYACL_RT_BACKEND="mock", ASCEND_RT_VISIBLE_DEVICES="2,5")
    r = run_python(code, env=env)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_fallback_follows_main_thread_guards() -> None:
    D.set_device(1)
    with D.device(4):
        assert in_thread(D.current_device) == 4
    assert in_thread(D.current_device) == 1


def test_device_copy_and_pickle_give_the_same_device() -> None:
    """A Device is an index (no handle): copying/pickling is fine and yields Device(i)."""
    import copy
    import pickle

    dev = D.Device(1)
    assert copy.copy(dev) is dev
    assert copy.deepcopy(dev) is dev
    assert copy.deepcopy({"d": dev})["d"] is dev
    assert pickle.loads(pickle.dumps(dev)) is dev


def _foreign_switch(dev: int) -> None:
    """Make device ``dev``'s primary context current behind pyacl_rt's back (what raw
    lowlevel code, torch_npu or a C extension may do)."""
    rc = lowlevel.lib.aclrtSetCurrentContext(D.primaries[dev].handle)
    lowlevel.check(rc, "aclrtSetCurrentContext")
    assert raw_get_device() == dev


def test_creation_and_selection_survive_a_foreign_context_switch() -> None:
    """QA: npu.set_device(0); raw switch to device 1; DeviceBuffer() allocated on
    device 1 while claiming device 0. Creation, allocation and selection re-validate."""
    from pyacl_rt import DeviceBuffer, HostBuffer
    from pyacl_rt._context import Context
    from pyacl_rt._event import Event

    mc = mock_control()

    def stats(what: str) -> tuple[int, int]:
        return mc.stat(what, 0), mc.stat(what, 1)

    def body() -> None:
        D.context_for(1)  # device 1's primary: the "foreign" context below
        D.set_device(0)

        before = stats("allocations")
        _foreign_switch(1)
        b = DeviceBuffer(1 << 20)
        assert b.device_index == 0
        assert stats("allocations") == (before[0] + 1, before[1])
        assert raw_get_device() == 0
        b.close()

        # Pinned host memory is allocated through the selected device's context too.
        _foreign_switch(1)
        h = HostBuffer(4096)
        assert raw_get_device() == 0
        h.close()

        before = stats("streams")
        _foreign_switch(1)
        s = S.Stream()
        assert s.device_index == 0
        assert stats("streams") == (before[0] + 1, before[1])

        before = stats("events")
        _foreign_switch(1)
        ev = Event()
        ev.record(s)  # first record creates the ACL event in s's context
        assert stats("events") == (before[0] + 1, before[1])
        ev.synchronize()
        ev.close()
        s.close()

        _foreign_switch(1)
        D.set_device(0)
        assert raw_get_device() == 0

        _foreign_switch(1)
        with D.device(0):
            assert raw_get_device() == 0
        assert raw_get_device() == 0

        _foreign_switch(1)
        D.synchronize(0)
        assert raw_get_device() == 0

        # Creating a Context puts back the foreign context that was current.
        _foreign_switch(1)
        before = stats("contexts")
        ctx = Context(0)
        assert stats("contexts") == (before[0] + 1, before[1])
        assert raw_get_device() == 1
        ctx.close()
        D.set_device(0)
        assert raw_get_device() == 0

    in_thread(body)


def test_device_synchronize_timeout(gate: Any) -> None:
    """Issue 7: ``synchronize(device, timeout=)`` and ``Device.synchronize(timeout=)``
    exist, as on streams: SyncTimeoutError (a TimeoutError) on expiry."""
    import numpy as np

    import pyacl_rt as npu

    s = S.Stream(1)
    gate.block(s)
    with pytest.raises(npu.SyncTimeoutError) as info:
        npu.synchronize(1, timeout=10)
    assert isinstance(info.value, TimeoutError)
    assert info.value.function == "aclrtSynchronizeDeviceWithTimeout"
    with pytest.raises(npu.SyncTimeoutError):
        npu.Device(1).synchronize(timeout=5.5)
    with pytest.raises(npu.SyncTimeoutError):
        npu.synchronize(device=1, timeout=np.int64(5))
    with pytest.raises(ValueError, match="timeout must be > 0"):
        npu.synchronize(1, timeout=0)
    with pytest.raises(TypeError, match="timeout"):
        npu.synchronize(1, timeout="10")  # type: ignore[arg-type]
    gate.release.set()
    npu.synchronize(1, timeout=60_000)
    npu.Device(1).synchronize(timeout=float("inf"))
    s.close()
