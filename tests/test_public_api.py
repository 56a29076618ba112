"""The public surface of ``pyacl_rt``: every name in ``__all__`` exists, is documented
and is exercised against the mock; ``import pyacl_rt`` loads nothing; every Python
example in README.md runs.

Names are exercised in this process (one parametrised case each, see ``SMOKE``) except
the lifecycle ones that would disturb other tests (``init``/``finalize``, fork, a
missing library), which run in subprocesses (``SUBPROCESS``).
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import _clean_env

import pyacl_rt as npu
from pyacl_rt import _device, _state, _stream, _watch
from pyacl_rt import _runtime as runtime
from pyacl_rt.mock import mock_control

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


def _env(**extra: str) -> dict[str, str]:
    return _clean_env(**{"PYACL_RT_BACKEND": "mock", "PYACL_RT_WARN_FALLBACK": "0", **extra})


def _run(code: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


# ------------------------------------------------------------------ names
def test_all_names_exist_and_are_documented() -> None:
    assert len(npu.__all__) == len(set(npu.__all__)), "duplicates in __all__"
    for name in npu.__all__:
        assert hasattr(npu, name), name
        obj = getattr(npu, name)
        if name == "__version__":
            assert isinstance(obj, str)
            continue
        assert (obj.__doc__ or "").strip(), f"pyacl_rt.{name} has no docstring"
    # the torch_npu.npu names of issue 4 item 6
    torch_npu_names = """is_available device_count set_device current_device device
        device_of synchronize get_device_name get_device_properties mem_get_info utilization
        current_stream default_stream set_stream stream Stream Event can_device_access_peer
        get_soc_version get_cann_version set_op_timeout_ms is_support_inf_nan
        is_bf16_supported"""
    for name in torch_npu_names.split():
        assert name in npu.__all__, name


def test_star_import_matches_all() -> None:
    ns: dict[str, Any] = {}
    exec("from pyacl_rt import *", ns)
    assert set(ns) - {"__builtins__"} == set(npu.__all__)


def test_device_is_a_class_and_stream_a_function() -> None:
    """torch_npu's shapes: ``npu.device`` a context-manager class, ``npu.stream`` a
    function returning a StreamContext; no implementation module is reachable under
    those names (the callable-module trick is gone)."""
    import types

    assert isinstance(npu.device, type) and npu.device is _device.device
    assert isinstance(npu.stream, types.FunctionType) and npu.stream is _stream.stream
    assert isinstance(npu.stream(None), npu.StreamContext)
    for name in npu.__all__:
        assert not isinstance(getattr(npu, name), types.ModuleType) or name in {
            "errors",
            "lowlevel",
        }, name


def test_public_names_report_a_public_module() -> None:
    """Issue 14 item 6: classes and functions exported by pyacl_rt say so in
    ``__module__`` (help(), tracebacks, reprs: ``pyacl_rt.Stream``, never
    ``pyacl_rt._stream.Stream``), resolve through it, and pickle by reference."""
    for name in npu.__all__:
        obj = getattr(npu, name)
        if not isinstance(obj, type) and not callable(obj):
            continue
        if isinstance(obj, type(npu)):  # the public submodules
            continue
        module = obj.__module__
        assert module in ("pyacl_rt", "pyacl_rt.errors"), (name, module)
        assert getattr(sys.modules[module], obj.__qualname__) is obj, name
        assert pickle.loads(pickle.dumps(obj)) is obj, name
    assert repr(npu.Stream) == "<class 'pyacl_rt.Stream'>"
    assert repr(npu.EventTimingError) == "<class 'pyacl_rt.errors.EventTimingError'>"


#: A reference to a private module in documentation: ``pyacl_rt._x``, ``:mod:`_x```,
#: ``:func:`_x```, or a bare private module name of the package.
_PRIVATE_REF = re.compile(
    r"pyacl_rt\._\w|:(?:mod|func|class|data|meth):`[~.]*_\w|(?<![\w.])_(?:callbacks|allocator|"
    r"memory|dlpack|stream|device|raw|runtime|state|event|context|releaser|syncdebug|"
    r"cachecore|history|host|guards|options|loader|fastcall|shadow|extensions)\b"
)


def test_public_docs_do_not_point_into_private_modules() -> None:
    """Issue 14 item 8: ``help()`` of everything the public modules export (and the
    modules themselves) names public objects only; before, ``help(Stream)`` and
    ``help(DeviceBuffer)`` sent readers to ``pyacl_rt._callbacks``, ``_allocator``,
    ``_memory``. Exempt: the C base type of HostBuffer (its name is fixed in C) and
    class annotations of private attributes."""
    import importlib
    import pydoc
    import types

    found: list[str] = []
    for modname in ("pyacl_rt", "pyacl_rt.errors", "pyacl_rt.lowlevel", "pyacl_rt.mock"):
        mod = importlib.import_module(modname)
        texts = {modname: mod.__doc__ or ""}
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, type | types.FunctionType | types.MethodType):
                texts[f"{modname}.{name}"] = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        for where, text in texts.items():
            for line in text.splitlines():
                if "BufferForwarder" in line or "__annotations__" in line:
                    continue
                if _PRIVATE_REF.search(line):
                    found.append(f"{where}: {line.strip()}")
    cli_doc = pydoc.render_doc(importlib.import_module("pyacl_rt.cli").collect_info)
    found += [f"cli.collect_info: {ln}" for ln in cli_doc.splitlines() if _PRIVATE_REF.search(ln)]
    assert not found, "\n".join(found)


def test_device_properties_pickle_and_copy() -> None:
    """A plain value (it refused pickling before: the slots were set one by one)."""
    import copy

    props = npu.get_device_properties(0)
    assert pickle.loads(pickle.dumps(props)) == props
    assert copy.deepcopy(props) == props and copy.copy(props) == props


USER_CODE = """\
from __future__ import annotations

import pyacl_rt as npu


def work() -> float:
    s = npu.Stream()
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    with npu.device(1) as index:
        selected: int = index
        assert selected == npu.current_device()
    with npu.stream(s) as entered:
        assert entered is s
        start.record()
        end.record()
    with npu.device_of(s), s:
        pass
    end.synchronize()
    return start.elapsed_time(end)
"""


def test_user_code_passes_mypy_strict(tmp_path: Path) -> None:
    """``with npu.device(1):`` / ``with npu.stream(s):`` type-check in user code."""
    user = tmp_path / "user_code.py"
    user.write_text(USER_CODE)
    # mypy cannot follow an editable install's import hook: point it at the checkout
    # holding the package (an installed package in site-packages is found as is).
    holder = Path(npu.__file__).resolve().parent.parent
    extra = {} if holder.name in ("site-packages", "dist-packages") else {"MYPYPATH": str(holder)}
    env = _clean_env(**extra)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_loads_no_library_and_starts_no_runtime() -> None:
    code = """
        import sys
        import pyacl_rt
        from pyacl_rt import lowlevel, _runtime as runtime
        assert not lowlevel.is_loaded(), "import pyacl_rt loaded the library"
        assert runtime.state() == "uninitialized"
        assert "pyacl_rt.mock" not in sys.modules
        # first real use loads and initialises
        assert pyacl_rt.device_count() >= 1
        assert lowlevel.is_loaded() and runtime.state() == "ready"
        print("OK")
    """
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout


# --------------------------------------------------------------- fixtures
@pytest.fixture
def rt() -> Iterator[Any]:
    """The runtime up (other tests may have finalized it), thread state reset after."""
    if runtime.is_finalized():
        runtime.init()
    runtime.ensure_initialized()
    mc = mock_control()
    if mc.device_count < 2:
        pytest.skip("needs >= 2 mock devices")
    prev = _state._local.st.device
    yield mc
    mc.clear_faults()
    st = _state._local.st
    st.device = prev
    st.active = None
    st.streams.clear()
    gc.collect()


def _raises(exc: type[BaseException], fn: Callable[[], object]) -> BaseException:
    with pytest.raises(exc) as info:
        fn()
    return info.value


# ---------------------------------------------------------------- the smoke
def _device_functions(mc: Any) -> None:
    n = npu.device_count()
    assert n == mc.device_count and npu.is_available()
    with npu.device(1):
        assert npu.current_device() == 1
    npu.set_device(0)
    assert npu.current_device() == 0


def _smoke_is_available(mc: Any) -> None:
    assert npu.is_available() is True


def _smoke_device_count(mc: Any) -> None:
    assert npu.device_count() == mc.device_count


def _smoke_set_device(mc: Any) -> None:
    npu.set_device("npu:1")
    assert npu.current_device() == 1
    npu.set_device(npu.Device(0))
    assert npu.current_device() == 0
    _raises(npu.InvalidDeviceError, lambda: npu.set_device(mc.device_count))


def _smoke_current_device(mc: Any) -> None:
    npu.set_device(1)
    assert npu.current_device() == 1


def _smoke_device(mc: Any) -> None:
    npu.set_device(0)
    with npu.device(1) as idx:
        assert idx == 1 and npu.current_device() == 1
        with npu.device("npu:0"):
            assert npu.current_device() == 0
        assert npu.current_device() == 1
    assert npu.current_device() == 0
    with npu.device(None):  # no-op, as in torch_npu
        assert npu.current_device() == 0


def _smoke_device_of(mc: Any) -> None:
    s = npu.Stream(1)
    with npu.device_of(s):
        assert npu.current_device() == 1
    with npu.device_of(object()):  # no .device: no-op
        pass
    s.close()


def _smoke_synchronize(mc: Any) -> None:
    buf = npu.DeviceBuffer(256, device=1)
    buf.memset(7, non_blocking=True)
    npu.synchronize(1)
    npu.synchronize()
    buf.close()


def _smoke_set_sync_debug_mode(mc: Any) -> None:
    with npu.sync_debug_mode("default"):  # restores this thread's mode afterwards
        npu.set_sync_debug_mode("error")
        _raises(npu.SyncDebugError, lambda: npu.synchronize(0))
        npu.set_sync_debug_mode(0)
        npu.synchronize(0)


def _smoke_get_sync_debug_mode(mc: Any) -> None:
    assert npu.get_sync_debug_mode() == 0
    with npu.sync_debug_mode(1):
        assert npu.get_sync_debug_mode() == 1


def _smoke_sync_debug_mode(mc: Any) -> None:
    s = npu.Stream(0)
    with npu.sync_debug_mode("error") as mode:
        assert mode == 2
        _raises(npu.SyncDebugError, s.synchronize)
    s.synchronize()
    s.close()


def _smoke_SyncDebugWarning(mc: Any) -> None:
    s = npu.Stream(0)
    warns = pytest.warns(npu.SyncDebugWarning, match=r"Stream\.synchronize\(\)")
    with warns, npu.sync_debug_mode("warn"):
        s.synchronize()
    s.close()


def _smoke_SyncDebugError(mc: Any) -> None:
    buf = npu.DeviceBuffer(64)
    with npu.sync_debug_mode("error"):
        exc = _raises(npu.SyncDebugError, buf.copy_to_host)
    assert isinstance(exc, RuntimeError) and exc.function == "DeviceBuffer.copy_to_host()"
    buf.close()


def _smoke_get_device_name(mc: Any) -> None:
    assert npu.get_device_name(0) == mc.soc_name


def _smoke_get_device_properties(mc: Any) -> None:
    p = npu.get_device_properties(1)
    assert isinstance(p, npu.DeviceProperties)
    assert p.index == 1 and p.name == mc.soc_name and p.total_memory > 0


def _smoke_get_device_capability(mc: Any) -> None:
    assert npu.get_device_capability(0) is None


def _smoke_mem_get_info(mc: Any) -> None:
    free, total = npu.mem_get_info(0)
    assert 0 < free <= total


def _smoke_utilization(mc: Any) -> None:
    assert 0 <= npu.utilization(0) <= 100


def _smoke_can_device_access_peer(mc: Any) -> None:
    assert isinstance(npu.can_device_access_peer(0, 1), bool)
    assert npu.can_device_access_peer(0, 0) is False


def _smoke_get_soc_version(mc: Any) -> None:
    assert npu.get_soc_version() == mc.soc_name


def _smoke_get_cann_version(mc: Any) -> None:
    assert npu.get_cann_version() == mc.cann_version
    assert npu.get_cann_version("HCCL") == ""


def _smoke_set_op_timeout_ms(mc: Any) -> None:
    assert npu.set_op_timeout_ms(2000) >= 0
    _raises(ValueError, lambda: npu.set_op_timeout_ms(-1))


def _smoke_is_support_inf_nan(mc: Any) -> None:
    assert isinstance(npu.is_support_inf_nan(), bool)


def _smoke_is_bf16_supported(mc: Any) -> None:
    assert isinstance(npu.is_bf16_supported(), bool)


def _smoke_current_stream(mc: Any) -> None:
    npu.set_device(0)
    assert npu.current_stream() is npu.default_stream()


def _smoke_default_stream(mc: Any) -> None:
    s = npu.default_stream(1)
    assert s.handle == 0 and s.device_index == 1 and s.kind == "default"
    s.synchronize()


def _smoke_set_stream(mc: Any) -> None:
    s = npu.Stream(1)
    npu.set_stream(s)
    assert npu.current_device() == 1 and npu.current_stream() is s
    npu.set_stream(npu.default_stream(1))
    s.close()


def _smoke_stream(mc: Any) -> None:
    npu.set_device(0)
    s = npu.Stream(1)
    with npu.stream(s) as got:
        assert got is s and npu.current_stream() is s and npu.current_device() == 1
    assert npu.current_device() == 0 and npu.current_stream(1) is not s
    with npu.stream(None):
        pass
    s.close()


def _smoke_Stream(mc: Any) -> None:
    with npu.Stream() as s:
        assert npu.current_stream() is s
        assert s.query() is True
        s.synchronize(timeout=10_000)
    s.close()
    assert s.closed
    _raises(npu.ObjectClosedError, s.query)


def _smoke_stream_from_pool(mc: Any) -> None:
    a = npu.stream_from_pool(0)
    b = npu.stream_from_pool(0)
    assert a is not b and a.kind == "pool"
    a.close()  # no-op for pooled streams
    assert not a.closed


def _smoke_Event(mc: Any) -> None:
    s = npu.Stream(0)
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    assert start.query() is True  # never recorded
    start.record(s)
    s.launch_host_func(lambda: None)
    end.record(s)
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    plain = npu.Event()
    plain.record(s)
    plain.wait(npu.default_stream(0))
    plain.synchronize()
    assert plain.query()
    for e in (start, end, plain):
        e.close()
    s.close()


def _smoke_Device(mc: Any) -> None:
    d = npu.Device(1)
    assert d is npu.Device("npu:1") and int(d) == 1 and str(d) == "npu:1"
    assert d.name == mc.soc_name and d.total_memory > 0 and d.free_memory > 0
    assert set(d.utilization_rates()) == {"cube", "vector", "aicpu", "memory"}
    with d:
        assert npu.current_device() == 1
    d.synchronize()


def _smoke_DeviceProperties(mc: Any) -> None:
    p = npu.Device(0).properties
    assert isinstance(p, npu.DeviceProperties) and p.multi_processor_count


def _smoke_Context(mc: Any) -> None:
    before = mc.stat("contexts", 1)
    ctx = npu.Context(1)
    assert mc.stat("contexts", 1) == before + 1
    with ctx:
        assert npu.current_context() is ctx and npu.current_device() == 1
        s = npu.Stream()
        s.synchronize()
    assert npu.current_context() is None
    ctx.close()
    assert s.closed and ctx.closed and mc.stat("contexts", 1) == before


def _smoke_current_context(mc: Any) -> None:
    assert npu.current_context() is None


def _smoke_DeviceBuffer(mc: Any) -> None:
    data = bytes(range(256)) * 4
    with npu.DeviceBuffer(len(data), device=1) as buf:
        buf.copy_from_host(data)
        view = buf[256:512]
        assert view.nbytes == 256 and view.base is buf
        assert bytes(view.copy_to_host()) == data[256:512]
        buf.fill(0)
        assert bytes(buf.copy_to_host()) == bytes(len(data))
    assert buf.closed


def _smoke_HostBuffer(mc: Any) -> None:
    with npu.HostBuffer(64) as h:
        mv = h.memoryview()
        mv[:4] = b"abcd"
        assert h.tobytes()[:4] == b"abcd"
        mv.release()


def _smoke_copy(mc: Any) -> None:
    src = bytearray(b"x" * 100)
    dst = bytearray(100)
    with npu.DeviceBuffer(100, device=0) as a, npu.DeviceBuffer(100, device=1) as b:
        npu.copy(a, src)
        npu.copy(b, a)  # across devices
        npu.copy(dst, b)
    assert dst == src


def _smoke_copy_2d(mc: Any) -> None:
    src = bytes(range(16))  # 4 rows x 4 bytes
    dst = bytearray(8)
    with npu.DeviceBuffer(16) as d:
        npu.copy(d, src)
        npu.copy_2d(dst, 2, d, 4, 2, 4)  # the first 2 bytes of each row
    assert bytes(dst) == bytes([0, 1, 4, 5, 8, 9, 12, 13])


def _smoke_memset(mc: Any) -> None:
    with npu.DeviceBuffer(32) as d:
        npu.memset(d, 0xAB)
        assert bytes(d.copy_to_host()) == b"\xab" * 32
    _raises(ValueError, lambda: npu.memset(bytearray(4), 256))


def _smoke_memcpy_async(mc: Any) -> None:
    s = npu.Stream(0)
    with npu.HostBuffer(64) as h, npu.DeviceBuffer(64, device=0) as d:
        h.fill(5)
        npu.memcpy_async(d, h, 64, s)
        s.synchronize()
        assert bytes(d.copy_to_host()) == b"\x05" * 64
    s.close()


def _smoke_memory_allocated(mc: Any) -> None:
    base = npu.memory_allocated(0)
    with npu.DeviceBuffer(4096, device=0):
        assert npu.memory_allocated(0) == base + 4096  # a multiple of 512: no rounding
    assert npu.memory_allocated(0) == base


def _smoke_max_memory_allocated(mc: Any) -> None:
    with npu.DeviceBuffer(8192, device=0):
        assert npu.max_memory_allocated(0) >= npu.memory_allocated(0) + 0


def _smoke_memory_reserved(mc: Any) -> None:
    assert npu.memory_reserved(0) == npu.memory_allocated(0)


def _smoke_max_memory_reserved(mc: Any) -> None:
    assert npu.max_memory_reserved(0) >= npu.max_memory_allocated(0)


def _smoke_memory_summary(mc: Any) -> None:
    assert "Allocated memory" in npu.memory_summary(0)


def _smoke_reset_accumulated_memory_stats(mc: Any) -> None:
    npu.reset_accumulated_memory_stats(0)
    assert npu.memory_stats(0)["allocation.all.freed"] == 0


def _smoke_caching_allocator_alloc(mc: Any) -> None:
    p = npu.caching_allocator_alloc(100, device=0)
    assert p and npu.memory_allocated(0) >= 512
    npu.caching_allocator_delete(p)


def _smoke_caching_allocator(mc: Any) -> None:
    h = npu.caching_allocator(device=0)
    h.free(h.alloc(64))


def _smoke_caching_allocator_delete(mc: Any) -> None:
    with pytest.raises(ValueError):
        npu.caching_allocator_delete(1)


def _smoke_set_per_process_memory_fraction(mc: Any) -> None:
    npu.set_per_process_memory_fraction(1.0, 0)


def _smoke_get_per_process_memory_fraction(mc: Any) -> None:
    assert npu.get_per_process_memory_fraction(0) == 1.0


def _smoke_host_memory_stats(mc: Any) -> None:
    assert npu.host_memory_stats()["allocated_bytes.current"] >= 0


def _smoke_memory_snapshot(mc: Any) -> None:
    with npu.DeviceBuffer(100, device=0) as b:
        assert any(
            blk["address"] == b.ptr for seg in npu.memory_snapshot() for blk in seg["blocks"]
        )


def _smoke_record_memory_history(mc: Any) -> None:
    npu.record_memory_history("state")
    npu.record_memory_history(None)


def _smoke_dump_snapshot(mc: Any) -> None:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        npu.dump_snapshot(os.path.join(d, "s.pickle"))
        assert os.path.getsize(os.path.join(d, "s.pickle")) > 0


def _smoke_reset_peak_memory_stats(mc: Any) -> None:
    with npu.DeviceBuffer(1 << 20, device=0):
        pass
    npu.reset_peak_memory_stats(0)
    assert npu.max_memory_allocated(0) == npu.memory_allocated(0)


def _smoke_memory_stats(mc: Any) -> None:
    st = npu.memory_stats(0)
    assert st["allocated_bytes.all.current"] == npu.memory_allocated(0)
    assert 0 < st["free_bytes"] <= st["total_bytes"]


def _smoke_from_dlpack(mc: Any) -> None:
    with npu.DeviceBuffer(16, device=0) as d:
        v = npu.from_dlpack(d)  # a view of the same device memory
        assert isinstance(v, npu.DeviceBuffer) and v.ptr == d.ptr and v.nbytes == 16
        v.close()


def _smoke_empty_cache(mc: Any) -> None:
    npu.empty_cache()


def _smoke_host_memory_allocated(mc: Any) -> None:
    base = npu.host_memory_allocated()
    with npu.HostBuffer(1000):
        assert npu.host_memory_allocated() == base + 1000


def _smoke_is_initialized(mc: Any) -> None:
    assert npu.is_initialized() is True


def _smoke_backend_info(mc: Any) -> None:
    info = npu.backend_info()
    assert info.backend == "mock" and info.path.endswith("libascendcl.so")
    assert info.cann_version == mc.cann_version and info.supports("aclrtMalloc")


# errors ---------------------------------------------------------------------
def _smoke_AclError(mc: Any) -> None:
    mc.inject_fault("aclrtStreamQuery", 507899)
    exc = _raises(npu.AclError, npu.default_stream(0).query)
    assert isinstance(exc, npu.AclError) and exc.code == 507899
    assert exc.function == "aclrtStreamQuery" and exc.name
    clone = pickle.loads(pickle.dumps(exc))
    assert type(clone) is type(exc) and clone.code == exc.code


def _smoke_AclInternalError(mc: Any) -> None:
    mc.inject_fault("aclrtStreamQuery", 507899)
    _raises(npu.AclInternalError, npu.default_stream(0).query)


def _smoke_AclDeviceLostError(mc: Any) -> None:
    mc.inject_fault("aclrtStreamQuery", 507899)
    _raises(npu.AclDeviceLostError, npu.default_stream(0).query)


def _smoke_AclUsageError(mc: Any) -> None:
    _raises(npu.AclUsageError, lambda: npu.Event().elapsed_time(npu.Event()))


def _smoke_AclResourceError(mc: Any) -> None:
    mc.inject_fault("aclrtStreamQuery", 207000)
    _raises(npu.AclResourceError, npu.default_stream(0).query)


def _smoke_FeatureNotSupportedError(mc: Any) -> None:
    mc.inject_fault("aclrtGetDeviceUtilizationRate", 207000)
    _raises(npu.FeatureNotSupportedError, lambda: npu.utilization(0))


def _smoke_AclOutOfMemoryError(mc: Any) -> None:
    exc = _raises(npu.AclOutOfMemoryError, lambda: npu.DeviceBuffer(1 << 50, device=0))
    assert isinstance(exc, MemoryError)


def _smoke_OutOfMemoryError(mc: Any) -> None:
    assert npu.OutOfMemoryError is npu.AclOutOfMemoryError
    _raises(npu.OutOfMemoryError, lambda: npu.DeviceBuffer(1 << 50, device=1))


def _smoke_AclServiceError(mc: Any) -> None:
    mc.inject_fault("aclrtStreamQuery", 345102)
    _raises(npu.AclServiceError, npu.default_stream(0).query)


def _smoke_FunctionNotFoundError(mc: Any) -> None:
    # The bundled mock exports every function, so nothing raises it here; the real
    # trigger (a library built without some symbols) is tested in test_lowlevel.py.
    assert npu.backend_info().missing == ()
    assert issubclass(npu.FunctionNotFoundError, npu.FeatureNotSupportedError)
    exc = npu.FunctionNotFoundError("aclrtNoSuchFunction", "libascendcl.so")
    assert exc.function == "aclrtNoSuchFunction" and "libascendcl.so" in str(exc)
    clone = pickle.loads(pickle.dumps(exc))
    assert str(clone) == str(exc)


def _smoke_CallbackContextError(mc: Any) -> None:
    s = npu.Stream(0)
    s.launch_host_func(npu.synchronize)  # a blocking call inside a callback
    exc = _raises(npu.CallbackContextError, s.synchronize)
    assert "host callback" in str(exc)
    s.close()


def _smoke_EventTimingError(mc: Any) -> None:
    a, b = npu.Event(), npu.Event()
    exc = _raises(npu.EventTimingError, lambda: a.elapsed_time(b))
    assert isinstance(exc, ValueError)


def _smoke_InvalidDeviceError(mc: Any) -> None:
    exc = _raises(npu.InvalidDeviceError, lambda: npu.Device(mc.device_count + 5))
    assert isinstance(exc, ValueError)


def _smoke_ObjectClosedError(mc: Any) -> None:
    e = npu.Event()
    e.record(npu.default_stream(0))
    e.close()
    _raises(npu.ObjectClosedError, e.query)


def _smoke_SyncTimeoutError(mc: Any) -> None:
    s = npu.Stream(0)
    gate = threading.Event()
    s.launch_host_func(gate.wait, 60)  # holds the stream until the gate opens
    exc = _raises(npu.SyncTimeoutError, lambda: s.synchronize(timeout=1))
    assert isinstance(exc, TimeoutError)
    gate.set()
    s.synchronize()
    s.close()


def _smoke_ConfigError(mc: Any) -> None:
    exc = _raises(npu.ConfigError, lambda: npu.init(config_path="/nonexistent/acl.json"))
    assert isinstance(exc, ValueError)


def _smoke_BackendFallbackWarning(mc: Any) -> None:
    assert issubclass(npu.BackendFallbackWarning, UserWarning)
    assert npu.BackendFallbackWarning is npu.errors.BackendFallbackWarning


def _smoke_RaceWarning(mc: Any) -> None:
    # raised for real under ASCEND_MOCK_SANITIZE=1 (a subprocess): tests/test_sanitize.py
    assert issubclass(npu.RaceWarning, UserWarning)
    assert npu.RaceWarning is npu.errors.RaceWarning
    from pyacl_rt import mock

    on = os.environ.get("ASCEND_MOCK_SANITIZE", "0") not in ("", "0")  # pytest --npu-sanitize
    assert mock.sanitizer_mode() == ("report" if on else "off")


def _smoke_RaceError(mc: Any) -> None:
    assert issubclass(npu.RaceError, npu.AclUsageError) and issubclass(npu.RaceError, RuntimeError)
    assert npu.RaceError(reports=()).reports == ()


def _smoke_StreamContext(mc: Any) -> None:
    s = npu.Stream(1)
    guard = npu.StreamContext(s)
    with guard as entered:
        assert entered is s and npu.current_stream() is s
    assert isinstance(npu.stream(None), npu.StreamContext)
    s.close()


def _smoke_forget_thread_context(mc: Any) -> None:
    s = npu.Stream(1)
    npu.lowlevel.aclrtSetDevice(0)  # a foreign context switch behind pyacl_rt's back
    npu.forget_thread_context()
    assert s.query() is True  # re-installs device 1's context first
    npu.lowlevel.aclrtResetDevice(0)
    s.close()


# IPC (the cross-process behaviour is tests/test_ipc.py) --------------------------
def _smoke_IpcMemHandle(mc: Any) -> None:
    buf = npu.DeviceBuffer(4096)
    h = buf.ipc_handle()
    assert isinstance(h, npu.IpcMemHandle) and h.nbytes == 4096 and h.offset + 4096 <= h.size
    del h
    buf.close()


def _smoke_IpcEventHandle(mc: Any) -> None:
    ev = npu.Event(interprocess=True)
    h = ev.ipc_handle()
    assert isinstance(h, npu.IpcEventHandle) and len(h.data) == 64
    del h
    ev.close()


def _smoke_IpcError(mc: Any) -> None:
    buf = npu.DeviceBuffer(4096)
    h = buf.ipc_handle()
    with pytest.raises(npu.IpcError, match="exported by this process"):
        npu.DeviceBuffer.from_ipc_handle(h)
    del h
    buf.close()


def _smoke_IpcPermissionError(mc: Any) -> None:
    assert issubclass(npu.IpcPermissionError, npu.IpcError)
    assert issubclass(npu.IpcPermissionError, PermissionError)


def _smoke_ipc_collect(mc: Any) -> None:
    assert npu.ipc_collect() >= 0


def _smoke_ipc_pid(mc: Any) -> None:
    assert npu.ipc_pid() == os.getpid()  # outside a container the bare tgid is the pid


# kernels ---------------------------------------------------------------------
def _kernel_binary() -> Any:
    """An ObjectCode of a device ELF whose kernel 'smoke_add' has a Python twin."""
    import tempfile

    from test_lowlevel_kernels import _device_elf

    from pyacl_rt import mock

    if "smoke_add" not in mock.registered_kernels():
        mock.register_kernel(
            "smoke_add",
            lambda b, n, x, y, c: y.__setitem__(slice(None), x + y),
            (mock.In("int32", "c"), mock.InOut("int32", "c"), mock.Value("uint32", "c")),
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.o"
        path.write_bytes(_device_elf(["smoke_add"]))
        return npu.ObjectCode.from_file(path)


def _smoke_ObjectCode(mc: Any) -> None:
    with _kernel_binary() as code:
        assert code.handle and not code.closed and code.device == npu.Device(0)
    assert code.closed


def _smoke_Kernel(mc: Any) -> None:
    with _kernel_binary() as code:
        k = code.get_kernel("smoke_add")
        assert isinstance(k, npu.Kernel) and k.name == "smoke_add" and k.num_arguments == 3


def _smoke_ParamInfo(mc: Any) -> None:
    with _kernel_binary() as code:
        info = code.get_kernel("smoke_add").arguments_info
        assert info == (npu.ParamInfo(0, 8), npu.ParamInfo(8, 8), npu.ParamInfo(16, 4))


def _smoke_KernelAttributes(mc: Any) -> None:
    with _kernel_binary() as code:
        attrs = code.get_kernel("smoke_add").attributes
        assert isinstance(attrs, npu.KernelAttributes) and attrs.kernel_type == "aicore"


def _smoke_LaunchConfig(mc: Any) -> None:
    cfg = npu.LaunchConfig(4, timeout_s=2)
    assert cfg.blocks == 4 and cfg.attributes == {"timeout_s": 2}


def _smoke_launch(mc: Any) -> None:
    import numpy as np

    with _kernel_binary() as code:
        x = npu.DeviceBuffer(16)
        x.copy_from_host(np.arange(4, dtype=np.int32).tobytes())
        s = npu.Stream()
        npu.launch(s, npu.LaunchConfig(), code.get_kernel("smoke_add"), x, x, np.uint32(4))
        s.synchronize()
        assert np.frombuffer(x.copy_to_host(), np.int32).tolist() == [0, 2, 4, 6]
        x.close()
        s.close()


def _smoke_reduce_async(mc: Any) -> None:
    a = npu.DeviceBuffer(8)
    a.copy_from_host((3).to_bytes(4, "little") * 2)
    npu.reduce_async(a, a, "sum", "int32")
    npu.synchronize()
    assert a.copy_to_host() == (6).to_bytes(4, "little") * 2
    a.close()


def _smoke_random_async(mc: Any) -> None:
    out, ctr = npu.DeviceBuffer(64), npu.DeviceBuffer(8)
    ctr.memset(0)
    npu.random_async(out, seed=1, counter=ctr)
    npu.synchronize()
    assert int.from_bytes(ctr.copy_to_host(), "little") == 16
    out.close()
    ctr.close()


def _smoke_RandomGenerator(mc: Any) -> None:
    out = npu.DeviceBuffer(64)
    with npu.RandomGenerator(3) as gen:
        gen.uniform(out)
        assert gen.offset() == 16
    out.close()


# submodules -----------------------------------------------------------------
def _smoke_errors(mc: Any) -> None:
    assert npu.errors.error_name(507899) == "ACL_ERROR_RT_DRV_INTERNAL_ERROR"
    assert npu.errors.explain(207001)


def _smoke_lowlevel(mc: Any) -> None:
    ll = npu.lowlevel
    s = ll.scratch()
    ll.check(ll.aclrtGetDeviceCount(s.u32), "aclrtGetDeviceCount")
    assert s.u32[0] == mc.device_count and ll.is_loaded() and ll.is_mock_library()
    assert ll.symbols()["aclrtMalloc"][0] is True


def _smoke___version__(mc: Any) -> None:
    assert npu.__version__ == importlib.metadata.version("pyacl_rt")


def _smoke_NPUGraph(mc: Any) -> None:
    h_in, h_out = npu.HostBuffer(64), npu.HostBuffer(64)
    d = npu.DeviceBuffer(64)
    g = npu.NPUGraph()
    with npu.graph(g):
        s = npu.current_stream()
        npu.copy(d, h_in, stream=s, non_blocking=True)
        npu.copy(h_out, d, stream=s, non_blocking=True)
    h_in.numpy()[:] = 5
    g.replay()
    npu.synchronize()
    assert bytes(h_out) == bytes([5]) * 64
    g.reset()


def _smoke_graph(mc: Any) -> None:
    g = npu.NPUGraph()
    with npu.graph(g, capture_error_mode="relaxed") as gg:
        assert gg is g
    g.reset()


def _smoke_graph_pool_handle(mc: Any) -> None:
    h = npu.graph_pool_handle()
    assert isinstance(h, npu.GraphPoolHandle)
    g = npu.NPUGraph()
    with npu.graph(g, pool=h):
        npu.DeviceBuffer(64)
    g.reset()


def _smoke_GraphPoolHandle(mc: Any) -> None:
    assert isinstance(npu.NPUGraph().pool(), npu.GraphPoolHandle)


def _smoke_make_graphed_callables(mc: Any) -> None:
    x = npu.DeviceBuffer(64)
    y = npu.DeviceBuffer(64)

    def fn(a: npu.DeviceBuffer) -> npu.DeviceBuffer:
        npu.copy(y, a, stream=npu.current_stream(), non_blocking=True)
        return y

    f = npu.make_graphed_callables(fn, (x,), num_warmup_iters=1)
    assert f(x) is y
    npu.synchronize()
    f.graph.reset()


def _smoke_StreamCaptureError(mc: Any) -> None:
    g = npu.NPUGraph()
    exc = _raises(npu.StreamCaptureError, g.capture_begin)  # on the default stream
    assert isinstance(exc, RuntimeError)


def _smoke_StreamCaptureInvalidatedError(mc: Any) -> None:
    assert issubclass(npu.StreamCaptureInvalidatedError, npu.StreamCaptureError)
    assert npu.errors.error_class_for_code(507903) is npu.StreamCaptureInvalidatedError


def _smoke_StreamCaptureUnsupportedError(mc: Any) -> None:
    assert npu.errors.error_class_for_code(107030) is npu.StreamCaptureUnsupportedError


SMOKE: dict[str, Callable[[Any], None]] = {
    name[len("_smoke_") :]: fn for name, fn in list(globals().items()) if name.startswith("_smoke_")
}

#: Names exercised in subprocesses below (lifecycle, fork, missing library).
SUBPROCESS = {"init", "finalize", "NotInitializedError", "RuntimeFinalizedError"}
SUBPROCESS |= {"ForkedProcessError", "LibraryNotFoundError"}


def test_every_public_name_is_exercised() -> None:
    covered = set(SMOKE) | SUBPROCESS | {"device", "stream"}
    assert set(npu.__all__) - covered == set(), "names without a smoke test"
    assert covered - set(npu.__all__) == set(), "smoke tests for names not in __all__"


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_smoke(name: str, rt: Any) -> None:
    before = {d: rt.counts(d) for d in range(rt.device_count)}
    primaries = set(_device.primaries)
    SMOKE[name](rt)
    gc.collect()
    _state._local.st.streams.clear()
    _stream._drain_pools()
    for d in list(_device.primaries):
        npu.synchronize(d)
    gc.collect()
    _watch.markers.drop_all()
    npu.empty_cache()  # the caching allocator keeps freed segments
    new = set(_device.primaries) - primaries
    for d in range(rt.device_count):
        after = rt.counts(d)
        extra = 1 if d in new else 0
        assert after["contexts"] == before[d]["contexts"], (name, d, after)
        assert after["default_contexts"] == before[d]["default_contexts"] + extra, (name, d)
        assert after["allocations"] == before[d]["allocations"], (name, d, after)
        assert after["events"] == before[d]["events"], (name, d, after)


# ----------------------------------------------------------- subprocesses
def test_init_finalize_lifecycle() -> None:
    code = """
        import pyacl_rt as npu
        assert not npu.is_initialized()
        npu.init()
        npu.init()                         # idempotent
        assert npu.is_initialized()
        s = npu.Stream(0)
        npu.finalize()
        npu.finalize()                     # idempotent
        assert not npu.is_initialized()
        try:
            s.query()
        except npu.RuntimeFinalizedError as exc:
            assert isinstance(exc, npu.NotInitializedError)
        else:
            raise AssertionError("use after finalize did not raise")
        try:
            npu.device_count()             # lazy init never restarts a finalized runtime
        except npu.NotInitializedError:
            pass
        else:
            raise AssertionError("implicit use after finalize did not raise")
        s.close()                          # inert: a no-op
        npu.init()                         # explicit init starts again
        assert npu.device_count() == 2 and npu.Stream(1).query()
        print("OK")
    """
    proc = _run(code, ASCEND_MOCK_DEVICE_COUNT="2")
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout


def test_not_initialized_without_lazy_init() -> None:
    code = """
        import pyacl_rt as npu
        try:
            npu.Stream()
        except npu.NotInitializedError as exc:
            print("raised", type(exc).__name__)
        npu.init()
        npu.Stream().close()
        print("OK")
    """
    proc = _run(code, PYACL_RT_LAZY_INIT="0")
    assert proc.returncode == 0, proc.stderr
    assert "raised NotInitializedError" in proc.stdout and "OK" in proc.stdout


@pytest.mark.parametrize("missing", ["pyacl_rt._raw._lowlevel_cffi", "pyacl_rt._raw._fastcall"])
def test_unbuilt_source_tree_says_how_to_build(missing: str) -> None:
    """A checkout without the compiled extensions (``python -c 'import pyacl_rt;
    pyacl_rt.init()'`` before ``pip install -e .``) fails with an error saying exactly
    that and how to build them. Simulated by a finder that reports the module missing."""
    code = f"""
        import sys

        class Unbuilt:
            def find_spec(self, name, path=None, target=None):
                if name == {missing!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, Unbuilt())
        try:
            import pyacl_rt
            pyacl_rt.init()
        except ImportError as exc:
            print(type(exc).__name__ + "|" + str(exc))
        else:
            print("no error")
    """
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    kind, _, message = proc.stdout.strip().partition("|")
    assert kind == "ExtensionNotBuiltError", proc.stdout
    assert "compiled extensions" in message and "are not built" in message
    assert missing in message
    assert f"the source tree {REPO / 'pyacl_rt'}" in message
    assert f"`pip install -e .` in {REPO}" in message


def _unbuilt_checkout(root: Path) -> Path:
    """A copy of this checkout as after ``git clone`` + ``pip install .``: the Python
    sources of pyacl_rt and setup.py, no compiled extension, no bundled mock. The
    package this test suite imports (built) plays the installed copy it shadows."""
    pkg = Path(npu.__file__).resolve().parent
    for src in pkg.rglob("*.py"):
        if "_mock" in src.relative_to(pkg).parts:
            continue
        dst = root / "pyacl_rt" / src.relative_to(pkg)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(src.read_bytes())
    (root / "setup.py").write_text("# the checkout's setup.py\n")
    return root


def test_checkout_shadowing_the_installed_package_says_so(tmp_path: Path) -> None:
    """Issue 14 item 1: inside a fresh checkout, after ``pip install .``, Python imports
    the unbuilt ``./pyacl_rt``. The error says exactly that (which copy, which one it
    hides, why) and gives the two ways out; ``python -m pyacl_rt`` says it in one
    message without a traceback. (Before: "run `pip install .`", which they just did.)"""
    checkout = _unbuilt_checkout(tmp_path / "checkout")
    installed = Path(npu.__file__).resolve().parent
    (checkout / "myscript.py").write_text("import pyacl_rt\nprint(pyacl_rt.device_count())\n")
    env = _env()
    for cmd in (["myscript.py"], ["-c", "import pyacl_rt"]):
        proc = subprocess.run(
            [sys.executable, *cmd], cwd=checkout, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 1, proc.stdout
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("pyacl_rt.errors.ExtensionNotBuiltError: Python imported the ")
        assert f"source tree {checkout / 'pyacl_rt'} instead of the pyacl_rt installed in " in last
        assert f"{installed.parent}: {checkout} comes first on sys.path" in last
        assert "shadows the installed package" in last
        assert f"run from another directory (`cd` out of {checkout})" in last
        assert f"`pip install -e .` in {checkout}" in last
        assert "run `pip install .`" not in last and "install the package with" not in last

    cli = subprocess.run(
        [sys.executable, "-m", "pyacl_rt", "info"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 1 and cli.stdout == ""
    assert "Traceback" not in cli.stderr and len(cli.stderr.splitlines()) == 1
    assert cli.stderr.startswith("pyacl-rt: error: ExtensionNotBuiltError: Python imported")
    assert "`cd` out of" in cli.stderr and "`pip install -e .`" in cli.stderr


def test_mock_build_flags_work_from_an_unbuilt_checkout(tmp_path: Path) -> None:
    """The C build command of docs/guides/testing.md, ``cc prog.c $(python -m
    pyacl_rt.mock --cflags --libs)``, works from inside the checkout: the flags need no
    compiled extension and point at the installed copy's bundled mock (a note on stderr says so)."""
    checkout = _unbuilt_checkout(tmp_path / "checkout")
    installed = Path(npu.__file__).resolve().parent
    proc = subprocess.run(
        [sys.executable, "-m", "pyacl_rt.mock", "--cflags", "--libs", "--cmake-prefix"],
        cwd=checkout,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    prefix = installed / "_mock"
    flags = proc.stdout.split()
    assert flags[0] == f"-I{prefix / 'include'}" and f"-L{prefix / 'lib64'}" in flags
    assert flags[-1] == str(prefix)
    assert proc.stderr == (
        f"pyacl_rt.mock: note: {checkout / 'pyacl_rt'} is an unbuilt source tree; using "
        f"the bundled mock of the pyacl_rt installed in {installed.parent}\n"
    )
    usage = subprocess.run(
        [sys.executable, "-m", "pyacl_rt.mock"], cwd=checkout, env=_env(), capture_output=True
    )
    assert usage.returncode == 2 and b"--cflags" in usage.stderr


def test_unbuilt_checkout_alone_says_how_to_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No other pyacl_rt importable: build in place; ``pip install .`` alone would not
    help from there (it is not what Python imports)."""
    from pyacl_rt._raw import _shadow

    pkg = _unbuilt_checkout(tmp_path / "checkout") / "pyacl_rt"
    # this test suite's own (built) package is what the unbuilt copy would hide
    assert _shadow.other_installations(pkg)[0] == Path(npu.__file__).resolve().parent
    assert not _shadow.is_built(pkg) and _shadow.is_built(Path(npu.__file__).resolve().parent)
    monkeypatch.setattr(_shadow, "other_installations", lambda package_dir: [])
    text = _shadow.unbuilt_message("boom", pkg)
    assert text.startswith(f"pyacl_rt is imported from the source tree {pkg}, whose compiled")
    assert f"`pip install -e .` in {pkg.parent}" in text and text.endswith("(import error: boom)")
    assert "does not import it while" in text
    (pkg.parent / "setup.py").unlink()  # an installed copy that lost its extensions
    assert f"the installation in {pkg} is incomplete" in _shadow.unbuilt_message("boom", pkg)


@pytest.mark.parametrize(
    "orig,argv,expected",
    [
        (["py", "-m", "pyacl_rt.mock", "--cflags"], ["-m", "--cflags"], "pyacl_rt.mock"),
        (["py", "-X", "dev", "-m", "pyacl_rt"], ["-m"], "pyacl_rt"),
        (["py", "-mpyacl_rt.cli", "info"], ["-m", "info"], "pyacl_rt.cli"),
        (["py", "-Im", "pyacl_rt.mock"], ["-m"], "pyacl_rt.mock"),
        (["py", "script.py"], ["script.py"], None),
        (["py", "-m", "pyacl_rt.mock"], ["/x/pyacl_rt/mock.py"], None),  # already running
    ],
)
def test_running_module(
    orig: list[str], argv: list[str], expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyacl_rt._raw import _shadow

    monkeypatch.setattr(sys, "orig_argv", orig)
    monkeypatch.setattr(sys, "argv", argv)
    assert _shadow.running_module() == expected


def test_forked_child_raises() -> None:
    code = """
        import os
        import pyacl_rt as npu
        npu.set_device(0)
        pid = os.fork()
        if pid == 0:
            try:
                npu.Stream(0)
            except npu.ForkedProcessError as exc:
                os._exit(0 if "spawn" in str(exc) else 3)
            os._exit(4)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert "child 0" in proc.stdout


def test_missing_library(tmp_path: Path) -> None:
    code = """
        import pyacl_rt as npu
        assert npu.is_available() is False     # never raises
        try:
            npu.device_count()
        except npu.LibraryNotFoundError as exc:
            assert isinstance(exc, OSError)
            print("raised")
    """
    proc = _run(
        code,
        PYACL_RT_BACKEND="real",
        PYACL_RT_LIBRARY=str(tmp_path / "none" / "libascendcl.so"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "raised" in proc.stdout


# --------------------------------------------------------------- README
def _readme_python_blocks() -> list[tuple[int, str]]:
    if not README.is_file():
        return []
    text = README.read_text()
    blocks = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        blocks.append((line, m.group(1)))
    return blocks


def test_readme_has_python_examples() -> None:
    """One per user at least (scripting a card, a service); the pytest example is run by
    tests/test_readme.py and the guides' examples by tests/test_docs.py."""
    assert len(_readme_python_blocks()) >= 2


#: Prepended to a README example: records what each ``print`` call prints to stdout,
#: with the line it was called from (the example's own ``print`` stays visible).
_PRINT_RECORDER = """\
import builtins as _rb, io as _rio, sys as _rsys
_readme_prints = []
def print(*args, **kw):
    if kw.get("file") in (None, _rsys.stdout):
        _b = _rio.StringIO()
        _rb.print(*args, **{**kw, "file": _b})
        _readme_prints.append((_rsys._getframe(1).f_lineno, _b.getvalue()))
    _rb.print(*args, **kw)
"""
_PRINT_DUMP = """
import json as _rj, os as _ros
with open(_ros.environ["PYACL_RT_README_PRINTS"], "w") as _rf:
    _rj.dump(_readme_prints, _rf)
"""
#: ``print(...)  # prints: EXPECTED`` in a README example: the shown output of that line.
_PRINTS = re.compile(r"^\s*print\(.*\)\s+# prints: (?P<expected>.*)$")


def _shown_output_matches(expected: str, actual: str) -> bool:
    """``actual`` (without its final newline) is ``expected``, where ``...`` stands for
    any text (also across lines)."""
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual.removesuffix("\n"), re.S) is not None


def test_shown_output_matching() -> None:
    assert _shown_output_matches("8 devices, Ascend910B1", "8 devices, Ascend910B1\n")
    assert not _shown_output_matches("8 devices", "2 devices\n")
    assert _shown_output_matches("True ...", "True 94147578789248\n")
    assert _shown_output_matches("a ... c", "a b\nb c\n")
    assert not _shown_output_matches("['segment_alloc', 'alloc']", "['free_completed', 'x']")


def test_readme_print_comments_are_checked() -> None:
    """A comment on a print line of a README example claims its output: it must use
    ``# prints:`` (then test_readme_example_runs compares it), never a description that
    only looks like output (``# ['segment_alloc', 'alloc']`` was wrong half the time)."""
    shown = 0
    for line, code in _readme_python_blocks():
        for k, text in enumerate(code.splitlines()):
            where = f"README.md:{line + 1 + k}"
            if text.lstrip().startswith("print(") and "#" in text:
                assert _PRINTS.match(text), f"{where}: use '# prints: <output>': {text}"
                shown += 1
            elif "# prints:" in text:  # e.g. a print call split over lines (ruff format)
                raise AssertionError(f"{where}: '# prints:' goes on a one-line print(...)")
    assert shown >= 3


@pytest.mark.parametrize(
    "line,code", _readme_python_blocks(), ids=[f"README.md:{n}" for n, _ in _readme_python_blocks()]
)
def test_readme_example_runs(line: int, code: str, tmp_path: Path) -> None:
    """Every README example runs as is with the mock's defaults (what a user sees after
    the quick start), prints nothing on stderr (no traceback, no exit noise), and each
    ``# prints:`` line prints what it shows."""
    if os.environ.get("ASCEND_MOCK_SANITIZE", "0") not in ("", "0") and "interprocess=True" in code:
        pytest.skip(
            "pytest --npu-sanitize: this example orders its work through another process, "
            "whose waits the race sanitizer does not see (mock README 'Race sanitizer')"
        )
    record = tmp_path / "prints.json"
    full = _PRINT_RECORDER + code + _PRINT_DUMP
    # Run from a file, as users run scripts: multiprocessing's spawn re-imports the main
    # module in its children (the IPC example), which `python -c` cannot offer.
    script = tmp_path / "readme_example.py"
    script.write_text(full)
    proc = subprocess.run(
        [sys.executable, str(script)],
        env=_env(PYACL_RT_README_PRINTS=str(record)),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, f"README.md line {line}:\n{code}\n--- stderr:\n{proc.stderr}"
    assert proc.stderr == "", f"README.md line {line} wrote to stderr:\n{proc.stderr}"
    offset = _PRINT_RECORDER.count("\n")
    printed: dict[int, str] = {}
    for at, text in json.loads(record.read_text()):
        printed[at - offset] = printed.get(at - offset, "") + text
    for k, text in enumerate(code.splitlines(), start=1):
        m = _PRINTS.match(text)
        if m is None:
            continue
        where = f"README.md:{line + k}"
        assert k in printed, f"{where}: the line printed nothing"
        assert _shown_output_matches(m.group("expected"), printed[k]), (
            f"{where} shows\n  {m.group('expected')}\nbut printed\n  {printed[k]}"
        )


#: The page with the ``pyacl-rt info`` transcript (it was the README's).
CLI_PAGE = REPO / "docs" / "guides" / "scripting.md"


def _readme_cli_transcripts() -> list[tuple[int, str, list[str]]]:
    """``text`` blocks of the scripting guide that start with ``$ command``: (line,
    command, the lines shown after it)."""
    text = CLI_PAGE.read_text()
    found = []
    for m in re.finditer(r"^```text\n\$ (.*?)\n(.*?)^```", text, re.S | re.M):
        found.append((text.count("\n", 0, m.start()) + 2, m.group(1), m.group(2).splitlines()))
    return found


def test_readme_cli_transcript_is_what_the_command_prints(tmp_path: Path) -> None:
    """The ``pyacl-rt info`` transcript of docs/guides/scripting.md is the command's real
    output: stdout, then stderr (the fallback warning), line by line (``...`` for what
    varies)."""
    transcripts = _readme_cli_transcripts()
    assert [cmd for _, cmd, _ in transcripts] == ["ASCEND_MOCK_DEVICE_COUNT=2 pyacl-rt info"]
    for line, cmd, shown in transcripts:
        *assignments, prog, sub = cmd.split()
        assert prog == "pyacl-rt"
        env = _clean_env(**dict(a.split("=", 1) for a in assignments))
        script = shutil.which(prog)  # the console script; else the same via python -m
        proc = subprocess.run(
            [script, sub] if script else [sys.executable, "-m", "pyacl_rt", sub],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        if "backend:      real" in proc.stdout:  # pragma: no cover - a machine with CANN
            pytest.skip("real CANN library present: the transcript shows the mock fallback")
        actual = proc.stdout.splitlines() + proc.stderr.splitlines()
        assert len(actual) == len(shown), (line, actual)
        for k, (want, got) in enumerate(zip(shown, actual, strict=True)):
            assert _shown_output_matches(want, got), f"{CLI_PAGE.name}:{line + 1 + k}: {got!r}"
