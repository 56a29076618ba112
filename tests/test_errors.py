"""pyacl_rt.errors: code -> class mapping, messages, pickling (pure Python part).

Errors produced for real by the mock (fault injection, device lost, unsupported
functions) are tested in test_runtime.py / the mock-driven tests below.
"""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import _clean_env

from pyacl_rt import errors
from pyacl_rt._raw import _abi_runtime as _abi_data
from pyacl_rt.errors import (
    DEVICE_LOST_CODES,
    AclDeviceLostError,
    AclError,
    AclInternalError,
    AclOutOfMemoryError,
    AclResourceError,
    AclServiceError,
    AclUsageError,
    CallbackContextError,
    ConfigError,
    FeatureNotSupportedError,
    ForkedProcessError,
    FunctionNotFoundError,
    InvalidDeviceError,
    LibraryNotFoundError,
    NotInitializedError,
    ObjectClosedError,
    RuntimeFinalizedError,
    SyncTimeoutError,
    error_from_code,
)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (100000, AclUsageError),
        (100001, NotInitializedError),
        (107002, AclUsageError),
        (145000, AclUsageError),
        (148049, AclUsageError),
        (200000, AclOutOfMemoryError),
        (207001, AclOutOfMemoryError),
        (207018, AclOutOfMemoryError),
        (207000, FeatureNotSupportedError),
        (200006, FeatureNotSupportedError),
        (207004, AclResourceError),
        (300000, AclServiceError),
        (345102, AclServiceError),
        (500000, AclInternalError),
        (507000, AclInternalError),
        (507046, SyncTimeoutError),
        (507047, SyncTimeoutError),
        (507010, AclDeviceLostError),
        (507033, AclDeviceLostError),
        (507053, AclDeviceLostError),
        (507054, AclDeviceLostError),
        (507056, AclDeviceLostError),
        (507899, AclDeviceLostError),
        (507901, AclDeviceLostError),
        (999999, AclError),
        (-1, AclError),
    ],
)
def test_class_for_code(code: int, cls: type[AclError]) -> None:
    exc = error_from_code(code, function="aclrtFoo", recent_message="aclrtFoo: text")
    assert type(exc) is cls
    assert exc.code == code
    assert exc.function == "aclrtFoo"
    assert exc.recent_message == "aclrtFoo: text"


def test_family_hierarchy() -> None:
    assert issubclass(AclOutOfMemoryError, MemoryError)
    assert issubclass(AclOutOfMemoryError, AclResourceError)
    assert issubclass(AclDeviceLostError, AclInternalError)
    assert issubclass(NotInitializedError, AclUsageError)
    assert issubclass(RuntimeFinalizedError, NotInitializedError)
    assert issubclass(FunctionNotFoundError, FeatureNotSupportedError)
    assert issubclass(ConfigError, ValueError)
    assert issubclass(LibraryNotFoundError, OSError)
    assert issubclass(ForkedProcessError, RuntimeError)
    for cls in (
        AclUsageError,
        AclResourceError,
        AclServiceError,
        AclInternalError,
        FeatureNotSupportedError,
        FunctionNotFoundError,
        NotInitializedError,
        LibraryNotFoundError,
        ConfigError,
        ForkedProcessError,
    ):
        assert issubclass(cls, AclError)


def test_every_generated_error_code_maps_and_has_name() -> None:
    for name, code in _abi_data.ERROR_CODES.items():
        if code == 0:
            continue
        exc = error_from_code(code, function="f", recent_message=None)
        assert exc.name is not None
        assert exc.name in _abi_data.ERROR_CODES
        assert _abi_data.ERROR_CODES[exc.name] == code
        assert exc.explanation, name
        assert str(code) in str(exc)
        family = code // 100000
        expected = {
            1: AclUsageError,
            2: AclResourceError,
            3: AclServiceError,
            5: AclInternalError,
        }[family]
        assert isinstance(exc, expected), (name, type(exc))


def test_device_lost_codes_are_known_5xxxxx() -> None:
    known = set(_abi_data.ERROR_NAMES)
    for code in DEVICE_LOST_CODES:
        assert code in known
        assert code // 100000 == 5


def test_hand_written_explanations_for_common_codes() -> None:
    generic = {errors.explain(c) for c in (199999, 299999, 399999, 599999)}
    common = [100000, 100001, 100002, 100037, 107000, 107001, 107002, 107003, 107012, 107015]
    common += [107022, 207000, 207001, 207004, 507000, 507004, 507006, 507012, 507046, 507047]
    common += [507899, 507901, 507053, 507054, 507056, 507010, 507015, 207007, 207008, 200000]
    assert len(common) >= 30
    for code in common:
        text = errors.explain(code)
        assert text and text not in generic, code
        assert "\n" not in text


def test_str_is_one_line_plus_runtime_text() -> None:
    exc = error_from_code(
        207001, function="aclrtMalloc", recent_message="aclrtMalloc: out of device memory\n"
    )
    lines = str(exc).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("aclrtMalloc() failed: ACL_ERROR_RT_MEMORY_ALLOCATION (207001).")
    assert "out of memory" in lines[0].lower()
    assert lines[1].strip() == "runtime message: aclrtMalloc: out of device memory"
    no_text = error_from_code(107002, function="aclrtGetDevice", recent_message="")
    assert no_text.recent_message is None
    assert len(str(no_text).splitlines()) == 1
    assert "107002" in repr(no_text)


def _roundtrip(exc: AclError) -> AclError:
    out = pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(out) is type(exc)
    assert out.__dict__ == exc.__dict__
    assert str(out) == str(exc)
    assert out.args == exc.args
    return out


@pytest.mark.parametrize(
    "code", [100000, 100001, 107002, 207000, 207001, 207004, 300000, 500000, 507054, 999999]
)
def test_pickle_from_code(code: int) -> None:
    exc = error_from_code(code, function="aclrtX", recent_message="aclrtX: why")
    out = _roundtrip(exc)
    assert out.code == code and out.function == "aclrtX" and out.recent_message == "aclrtX: why"
    assert out.name == exc.name and out.explanation == exc.explanation


def test_pickle_special_classes() -> None:
    fnf = FunctionNotFoundError("aclrtNewThing", "/opt/lib/libascendcl.so")
    out = _roundtrip(fnf)
    assert isinstance(out, FunctionNotFoundError)
    assert out.code is None and out.function == "aclrtNewThing"
    assert out.library == "/opt/lib/libascendcl.so"
    assert "aclrtNewThing" in str(out) and "/opt/lib/libascendcl.so" in str(out)

    lnf = LibraryNotFoundError("nothing found", searched=["/a", "/b"], backend="real")
    out2 = _roundtrip(lnf)
    assert isinstance(out2, LibraryNotFoundError)
    assert out2.searched == ("/a", "/b") and out2.backend == "real"
    assert "/a" in str(out2) and "/b" in str(out2)

    cfg = ConfigError.for_variable("PYACL_RT_BACKEND", "x", "one of auto, real, mock")
    out3 = _roundtrip(cfg)
    assert isinstance(out3, ConfigError)
    assert (out3.variable, out3.value, out3.accepted) == (
        "PYACL_RT_BACKEND",
        "x",
        "one of auto, real, mock",
    )

    fork = _roundtrip(ForkedProcessError())
    assert "spawn" in str(fork)

    fin = _roundtrip(RuntimeFinalizedError("used after finalize"))
    assert str(fin) == "used after finalize"


def test_pickle_object_errors() -> None:
    """The object-layer errors (moved here from pyacl_rt.device) pickle like the rest."""
    timeout = error_from_code(507047, function="aclrtSynchronizeEventWithTimeout")
    out = _roundtrip(timeout)
    assert isinstance(out, SyncTimeoutError) and isinstance(out, TimeoutError)
    assert isinstance(out, AclInternalError) and out.code == 507047
    inv = _roundtrip(InvalidDeviceError("invalid device index 9", code=107001))
    assert isinstance(inv, ValueError) and isinstance(inv, AclUsageError) and inv.code == 107001
    closed = _roundtrip(ObjectClosedError("this Event is closed", explanation=""))
    assert isinstance(closed, AclUsageError) and str(closed) == "this Event is closed"
    cb = _roundtrip(CallbackContextError("synchronize() called from a callback", explanation=""))
    assert isinstance(cb, RuntimeError) and isinstance(cb, AclUsageError)


def test_object_errors_exported_at_top_level() -> None:
    import pyacl_rt

    assert pyacl_rt.SyncTimeoutError is SyncTimeoutError
    assert pyacl_rt.InvalidDeviceError is InvalidDeviceError
    assert pyacl_rt.ObjectClosedError is ObjectClosedError
    assert pyacl_rt.CallbackContextError is CallbackContextError
    assert {507046, 507047} == errors.SYNC_TIMEOUT_CODES
    assert not errors.SYNC_TIMEOUT_CODES & DEVICE_LOST_CODES


def _exception_classes_reachable_from_pyacl_rt() -> dict[str, type[BaseException]]:
    """Every public exception / warning class of pyacl_rt: attributes of the public
    modules and of every loaded pyacl_rt module (private ones included), whose name is
    public (no leading underscore)."""
    import importlib
    import pkgutil

    import pyacl_rt

    # every module of the package, not only those an earlier test happened to import (the
    # CLI's modules load lazily: an error class there was found only after test_layers ran)
    for info in pkgutil.walk_packages(pyacl_rt.__path__, "pyacl_rt."):
        if not info.name.endswith("_build"):
            importlib.import_module(info.name)
    found: dict[str, type[BaseException]] = {}
    modules = [m for n, m in sorted(sys.modules.items()) if n.split(".")[0] == "pyacl_rt"]
    for module in [pyacl_rt, *modules]:
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("pyacl_rt")
                and not obj.__name__.startswith("_")
            ):
                found[obj.__name__] = obj
    return found


def test_every_error_class_is_in_pyacl_rt_errors() -> None:
    """Issue 14 item 6: the README says every error class is in pyacl_rt.errors; each
    one reachable from pyacl_rt is importable from there, reports that module (as
    tracebacks show it: ``pyacl_rt.errors.EventTimingError``, not a private module)
    and pickles. (``from pyacl_rt.errors import EventTimingError`` failed before.)"""
    classes = _exception_classes_reachable_from_pyacl_rt()
    assert {"EventTimingError", "ExtensionNotBuiltError", "AclError"} <= set(classes)
    for name, cls in classes.items():
        assert getattr(errors, name, None) is cls, f"{name} is not in pyacl_rt.errors"
        assert name in errors.__all__, name
        assert cls.__module__ == "pyacl_rt.errors", (name, cls.__module__)
        assert (cls.__doc__ or "").strip(), name
        if issubclass(cls, AclError):
            assert isinstance(_roundtrip(cls("m")), cls), name
    from pyacl_rt.errors import EventTimingError  # the README's promise

    assert issubclass(EventTimingError, ValueError) and issubclass(EventTimingError, AclUsageError)


def test_traceback_names_the_public_module() -> None:
    import traceback

    import pyacl_rt as npu

    try:
        npu.Event().elapsed_time(npu.Event())
    except npu.EventTimingError as exc:
        last = traceback.format_exception(exc)[-1]
    assert last.startswith("pyacl_rt.errors.EventTimingError: "), last


def test_oom_is_catchable_as_memory_error() -> None:
    with pytest.raises(MemoryError):
        raise error_from_code(207001, function="aclrtMalloc")


def test_function_not_found_message() -> None:
    exc = FunctionNotFoundError("aclrtFoo")
    assert exc.library is None
    assert "aclrtFoo" in str(exc) and "loaded library" in str(exc)


# ------------------------------------------------- produced for real by the mock
_PROBE = """
import pickle, sys
from pyacl_rt import lowlevel as ll
from pyacl_rt.errors import AclError
s = ll.scratch()
def call():
{body}
try:
    call()
except AclError as exc:
    sys.stdout.buffer.write(pickle.dumps(exc))
else:
    sys.stdout.buffer.write(b"NO ERROR")
"""


def _probe(body: str, **env: str) -> AclError:
    """Run ``body`` (the inside of a function) in a fresh process against the mock and
    return the AclError it raised, pickled across the process boundary."""
    full_env = _clean_env(**{"PYACL_RT_BACKEND": "mock", **env})
    code = _PROBE.format(body=textwrap.indent(textwrap.dedent(body).strip(), "    "))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=full_env, capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout != b"NO ERROR", "the call did not fail"
    exc = pickle.loads(proc.stdout)
    assert isinstance(exc, AclError)
    return exc


def test_mock_usage_error_invalid_device() -> None:
    exc = _probe('ll.check(ll.aclrtSetDevice(99), "aclrtSetDevice")', ASCEND_MOCK_DEVICE_COUNT="2")
    assert type(exc) is AclUsageError
    assert exc.code == 107001 and exc.name == "ACL_ERROR_RT_INVALID_DEVICEID"
    assert exc.function == "aclrtSetDevice"
    assert exc.recent_message and "aclrtSetDevice" in exc.recent_message
    assert "aclrtSetDevice" in str(exc) and "107001" in str(exc)


def test_mock_usage_error_zero_size_malloc() -> None:
    exc = _probe(
        """
        ll.check(ll.aclrtSetDevice(0), "aclrtSetDevice")
        ll.check(ll.aclrtMalloc(s.uptr, 0, 0), "aclrtMalloc")
        """
    )
    assert type(exc) is AclUsageError and exc.code == 100000
    assert exc.recent_message and "size" in exc.recent_message


def test_mock_context_null() -> None:
    exc = _probe('ll.check(ll.aclrtGetDevice(s.i32), "aclrtGetDevice")')
    assert type(exc) is AclUsageError and exc.code == 107002
    assert "current context" in exc.explanation


def test_mock_out_of_memory_is_memory_error() -> None:
    exc = _probe(
        """
        ll.check(ll.aclrtSetDevice(0), "aclrtSetDevice")
        ll.check(ll.aclrtMalloc(s.uptr, 2 << 30, 0), "aclrtMalloc")
        """,
        ASCEND_MOCK_MEM_PER_DEVICE="1G",
    )
    assert isinstance(exc, AclOutOfMemoryError) and isinstance(exc, MemoryError)
    assert exc.code == 207001 and exc.function == "aclrtMalloc"
    assert exc.recent_message


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (107000, AclUsageError),
        (207004, AclResourceError),
        (207001, AclOutOfMemoryError),
        (300000, AclServiceError),
        (507000, AclInternalError),
        (507054, AclDeviceLostError),
    ],
)
def test_mock_fault_injection_each_family(code: int, cls: type[AclError]) -> None:
    exc = _probe(
        'll.check(ll.aclrtGetDeviceCount(s.u32), "aclrtGetDeviceCount")',
        ASCEND_MOCK_FAULTS=f"aclrtGetDeviceCount:1:{code}",
    )
    assert type(exc) is cls
    assert exc.code == code and exc.function == "aclrtGetDeviceCount"
    assert exc.recent_message and "aclrtGetDeviceCount" in exc.recent_message


def test_mock_device_lost() -> None:
    exc = _probe(
        """
        ll.check(ll.aclrtSetDevice(0), "aclrtSetDevice")  # device 0 is fine
        ll.check(ll.aclrtSetDevice(1), "aclrtSetDevice")
        """,
        ASCEND_MOCK_DEVICE_COUNT="2",
        ASCEND_MOCK_DEVICE_LOST="1:507010",
    )
    assert type(exc) is AclDeviceLostError
    assert isinstance(exc, AclInternalError)
    assert exc.code == 507010 and exc.name == "ACL_ERROR_RT_LOST_HEARTBEAT"
    assert "down" in exc.explanation


def test_mock_feature_not_supported() -> None:
    # a feature the simulated SoC does not have (the default Ascend910B1, an Atlas A2
    # part, has no SIMT stack limit; mock README "What is simulated", devices)
    exc = _probe('ll.check(ll.aclrtDeviceSetLimit(0, 1024), "aclrtDeviceSetLimit")')
    assert type(exc) is FeatureNotSupportedError
    assert exc.code == 207000 and exc.function == "aclrtDeviceSetLimit"
    assert exc.recent_message and "not supported" in exc.recent_message


def test_mock_not_initialized() -> None:
    # the dump API checks the ACL init flag (acl_abi.md section 5.1)
    exc = _probe('ll.check(ll.aclmdlInitDump(), "aclmdlInitDump")')
    assert type(exc) is NotInitializedError
    assert exc.code == 100001


def test_runtime_not_initialized_state() -> None:
    exc = _probe(
        """
        from pyacl_rt import _runtime as runtime
        runtime.ensure_initialized()
        """,
        PYACL_RT_LAZY_INIT="0",
    )
    assert type(exc) is NotInitializedError
    assert exc.code is None and "init()" in str(exc)


_PARTIAL_LIB = r"""
#include <stddef.h>
#include <stdint.h>
int aclInit(const char *p) { (void)p; return 0; }
int aclFinalize(void) { return 0; }
const char *aclGetRecentErrMsg(void) { return NULL; }
int aclrtGetDeviceCount(uint32_t *n) { *n = 1; return 0; }
"""


def test_function_not_found_in_partial_library(tmp_path: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "partial.c"
    src.write_text(_PARTIAL_LIB)
    lib = tmp_path / "lib64" / "libascendcl.so"
    lib.parent.mkdir()
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    body = """
        from pyacl_rt import _runtime as runtime
        runtime.init()   # works: aclInit exists
        ll.check(ll.aclrtGetDeviceCount(s.u32), "aclrtGetDeviceCount")
        assert s.u32[0] == 1
        {call}
    """
    for call in (
        "ll.aclrtSetDevice(0)",  # module attribute: a stub that raises
        'll.check(ll.lib.aclrtSetDevice(0), "aclrtSetDevice")',  # raw table: sentinel
    ):
        exc = _probe(
            body.format(call=call),
            PYACL_RT_BACKEND="real",
            PYACL_RT_LIBRARY=str(lib),
        )
        assert type(exc) is FunctionNotFoundError
        assert exc.code is None and exc.function == "aclrtSetDevice"
        assert exc.library is not None and str(lib) in exc.library
        assert isinstance(exc, FeatureNotSupportedError)


def test_mock_control_fault_on_worker_thread(mock_loaded: Any) -> None:
    """In-process injection: the error and its runtime text belong to the failing
    thread; another thread's recent message is untouched."""
    from pyacl_rt.mock import mock_control

    ll = mock_loaded
    mc = mock_control()
    ll.recent_error_message()  # start clean on this thread
    mc.inject_fault("aclrtGetDeviceCount", 507033)
    result: dict[str, Any] = {}

    def worker() -> None:
        try:
            ll.check(ll.aclrtGetDeviceCount(ll.scratch().u32), "aclrtGetDeviceCount")
        except AclError as exc:
            result["exc"] = exc

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    try:
        assert mc.fault_hits("aclrtGetDeviceCount") == 1
    finally:
        mc.clear_faults()
    exc = result["exc"]
    assert type(exc) is AclDeviceLostError and exc.code == 507033
    assert exc.recent_message and "aclrtGetDeviceCount" in exc.recent_message
    assert ll.recent_error_message() is None
    # and the next call works again
    ll.check(ll.aclrtGetDeviceCount(ll.scratch().u32), "aclrtGetDeviceCount")
