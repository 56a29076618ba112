"""pyacl_rt.lowlevel: reachability of every function, real calls on the mock, scratch,
GIL release during blocking calls, and the missing-symbol error."""

from __future__ import annotations

import json
import mmap
import threading
from pathlib import Path
from typing import Any

import pytest

from pyacl_rt._raw._abi_data import BINDING_FUNCTIONS, FUNCTIONS
from pyacl_rt._raw._abi_runtime import CONSTANTS

SIMULATED = sorted(f.name for f in FUNCTIONS if f.mock == "simulate")
ALL_NAMES = sorted(f.name for f in BINDING_FUNCTIONS)


# ---------------------------------------------------------------- reachability
def test_binding_covers_every_function() -> None:
    assert {f.name for f in FUNCTIONS} == set(ALL_NAMES)
    assert len(SIMULATED) >= 250


def test_every_simulated_function_resolved_and_raw(mock_loaded: Any) -> None:
    ll = mock_loaded
    syms = ll.symbols()
    unresolved = [n for n in SIMULATED if not syms[n][0]]
    assert not unresolved, f"simulated functions missing from the mock: {unresolved}"
    for name in SIMULATED:
        fn = getattr(ll, name)
        assert callable(fn)
        # the module attribute IS the raw cffi function: no Python wrapper on the hot path
        assert fn is getattr(ll.lib, name), name


def test_mock_exports_every_binding_function(mock_loaded: Any) -> None:
    syms = mock_loaded.symbols()
    missing = [n for n in ALL_NAMES if not syms[n][0]]
    assert not missing, f"functions the mock does not export: {missing}"
    assert {lib for _ok, lib in syms.values()} == {
        "libascendcl.so",
        "libmsprofiler.so",
        "libascend_dump.so",
    }
    libs = mock_loaded.loaded_libraries()
    assert all(libs[name] for name in mock_loaded.LIBRARIES), libs
    assert mock_loaded.library_errors() == dict.fromkeys(mock_loaded.LIBRARIES, "")


def test_load_is_idempotent(mock_loaded: Any) -> None:
    sel = mock_loaded.load()
    assert mock_loaded.load() is sel and mock_loaded.is_loaded()
    assert mock_loaded.load(sel.path) is sel


def test_unknown_attribute(mock_loaded: Any) -> None:
    with pytest.raises(AttributeError, match="aclrtNoSuchFunction"):
        _ = mock_loaded.aclrtNoSuchFunction


ZERO_ARGS_SMOKE = r"""
from pyacl_rt import lowlevel as ll
from pyacl_rt._raw._abi_data import BINDING_FUNCTIONS, FUNCTIONS
ffi = ll.ffi
sim = {f.name for f in FUNCTIONS if f.mock == "simulate"}
skip = {"aclAppLog"}  # needs strings, covered elsewhere
done = 0
for f in BINDING_FUNCTIONS:
    if f.name not in sim or f.name in skip:
        continue
    args = []
    for ctype, _name in f.params_binding:
        t = ffi.typeof(getattr(ll.lib, f.name)).args[len(args)]
        if t.kind in ("pointer", "function"):
            args.append(ffi.NULL)
        elif t.kind == "struct":
            args.append(ffi.new(t.cname + " *")[0])
        else:
            args.append(0)
    print(f.name, flush=True)
    getattr(ll.lib, f.name)(*args)
    done += 1
print("DONE", done)
"""


def test_every_simulated_function_survives_null_and_zero_args(
    run_python: Any, clean_env: Any
) -> None:
    """Call every simulated function once with NULL/0 arguments: nothing may crash or hang."""
    proc = run_python(ZERO_ARGS_SMOKE, env=clean_env(PYACL_RT_BACKEND="mock"), timeout=120)
    last = proc.stdout.strip().splitlines()[-1:] or ["<nothing>"]
    assert proc.returncode == 0, f"crashed in {last[0]} (rc={proc.returncode})\n{proc.stderr}"
    assert last[0].startswith("DONE ") and int(last[0].split()[1]) >= 240


# ----------------------------------------------------------------- real calls
def test_handful_of_real_calls(mock_loaded: Any) -> None:
    ll = mock_loaded
    s = ll.scratch()
    assert ll.aclrtGetDeviceCount(s.u32) == 0
    n = s.u32[0]
    assert n >= 1
    assert ll.aclrtSetDevice(0) == 0
    try:
        assert ll.aclrtGetDevice(s.i32) == 0 and s.i32[0] == 0
        assert ll.ffi.string(ll.aclrtGetSocName()).decode().startswith("Ascend")
        assert ll.aclDataTypeSize(CONSTANTS["ACL_FLOAT16"]) == 2
        assert ll.aclFloatToFloat16(1.0) == 0x3C00
        assert ll.aclFloat16ToFloat(0x3C00) == 1.0

        assert ll.aclrtCreateStream(s.uptr) == 0
        stream = int(s.uptr[0])
        assert stream != 0
        assert ll.aclrtMalloc(s.uptr, 64, 0) == 0
        dev = int(s.uptr[0])
        assert dev % 64 == 0
        src = ll.ffi.new("char[]", b"pyacl_rt lowlevel!" + bytes(46))
        dst = ll.ffi.new("char[64]")
        src_addr = int(ll.ffi.cast("uintptr_t", src))
        dst_addr = int(ll.ffi.cast("uintptr_t", dst))
        h2d, d2h = CONSTANTS["ACL_MEMCPY_HOST_TO_DEVICE"], CONSTANTS["ACL_MEMCPY_DEVICE_TO_HOST"]
        assert ll.aclrtMemcpyAsync(dev, 64, src_addr, 64, h2d, stream) == 0
        assert ll.aclrtMemcpyAsync(dst_addr, 64, dev, 64, d2h, stream) == 0
        assert ll.aclrtSynchronizeStream(stream) == 0
        assert ll.ffi.buffer(dst, 18)[:] == b"pyacl_rt lowlevel!"
        assert ll.aclrtStreamQuery(stream, s.i32) == 0
        assert s.i32[0] == CONSTANTS["ACL_STREAM_STATUS_COMPLETE"]

        assert ll.aclrtCreateEvent(s.uptr) == 0
        event = int(s.uptr[0])
        assert ll.aclrtRecordEvent(event, stream) == 0
        assert ll.aclrtSynchronizeEvent(event) == 0
        assert ll.aclrtDestroyEvent(event) == 0
        assert ll.aclrtFree(dev) == 0
        assert ll.aclrtDestroyStream(stream) == 0
    finally:
        assert ll.aclrtResetDevice(0) == 0


def test_check_raises_typed_error_with_recent_message(mock_loaded: Any) -> None:
    from pyacl_rt import errors

    ll = mock_loaded
    ll.check(0, "aclrtSetDevice")  # success is a no-op
    rc = ll.aclrtSetDevice(10_000)
    assert rc == 107001
    with pytest.raises(errors.AclUsageError) as ei:
        ll.check(rc, "aclrtSetDevice")
    e = ei.value
    assert e.code == 107001 and e.function == "aclrtSetDevice"
    assert e.recent_message and "aclrtSetDevice" in e.recent_message
    # the message was consumed (cleared on read) by check
    assert ll.recent_error_message() is None


def test_applog_message_is_not_a_format(
    mock_loaded: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # %n/%s in the message must be logged literally, not interpreted
    monkeypatch.setenv("ASCEND_GLOBAL_LOG_LEVEL", "1")  # info and above
    monkeypatch.setenv("ASCEND_SLOG_PRINT_TO_STDOUT", "1")  # the mock logs to stderr
    mock_loaded.aclAppLog(CONSTANTS["ACL_INFO"], b"f", b"file.c", 1, b"100%s %n %d")
    err = capfd.readouterr().err
    assert "[INFO] APP(" in err and "[file.c:1]" in err
    assert err.rstrip("\n").endswith("f: 100%s %n %d")


# -------------------------------------------------------------------- scratch
def test_scratch_is_per_thread(mock_loaded: Any) -> None:
    ll = mock_loaded
    mine = ll.scratch()
    assert ll.scratch() is mine
    for attr, ctype in (
        ("i32", "int32_t[4]"),
        ("u32", "uint32_t[4]"),
        ("i64", "int64_t[4]"),
        ("u64", "uint64_t[4]"),
        ("uptr", "uintptr_t[4]"),
        ("size", "size_t[4]"),
        ("f32", "float[4]"),
    ):
        assert ll.ffi.typeof(getattr(mine, attr)) is ll.ffi.typeof(ctype)
    others: list[Any] = []

    def worker() -> None:
        s = ll.scratch()
        assert ll.scratch() is s
        others.append(s)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in others} | {id(mine)}) == 5


# ------------------------------------------------------------------------ GIL
def test_gil_released_while_process_report_waits(mock_loaded: Any) -> None:
    """While one thread blocks in aclrtProcessReport(timeout), another runs Python."""
    ll = mock_loaded
    started = threading.Event()
    result: dict[str, int] = {}

    def waiter() -> None:
        s = ll.scratch()
        assert ll.aclrtSetDevice(0) == 0
        assert ll.aclrtCreateStream(s.uptr) == 0
        stream = int(s.uptr[0])
        tid = threading.get_ident()
        assert ll.aclrtSubscribeReport(tid, stream) == 0
        started.set()
        result["rc"] = ll.aclrtProcessReport(1500)  # nothing to report: waits, then 507012
        ll.aclrtUnSubscribeReport(tid, stream)
        ll.aclrtDestroyStream(stream)
        ll.aclrtResetDevice(0)

    t = threading.Thread(target=waiter)
    t.start()
    assert started.wait(30)
    progress = 0
    while t.is_alive():
        progress += 1
    t.join()
    assert result["rc"] == 507012  # ACL_ERROR_RT_REPORT_TIMEOUT
    # If the GIL were held during the wait, this loop could not have run at all.
    assert progress > 1000


def test_gil_released_during_synchronize_stream(mock_loaded: Any) -> None:
    """A Python host function blocks the stream until the main thread releases it; the
    thread in aclrtSynchronizeStream must not hold the GIL (or this would deadlock)."""
    ll = mock_loaded
    ffi = ll.ffi
    release = threading.Event()
    ran: list[int] = []

    @ffi.callback("aclrtHostFunc")
    def host_func(_args: Any) -> None:
        release.wait(30)
        ran.append(1)

    s = ll.scratch()
    assert ll.aclrtSetDevice(0) == 0
    assert ll.aclrtCreateStream(s.uptr) == 0
    stream = int(s.uptr[0])
    rc_holder: dict[str, int] = {}
    syncing = threading.Event()

    def syncer() -> None:
        assert ll.aclrtSetDevice(0) == 0
        syncing.set()
        rc_holder["rc"] = ll.aclrtSynchronizeStream(stream)
        ll.aclrtResetDevice(0)

    try:
        assert ll.aclrtLaunchHostFunc(stream, host_func, 0) == 0
        t = threading.Thread(target=syncer)
        t.start()
        assert syncing.wait(30)
        progress = 0
        while progress < 10_000:  # runs only if the syncing thread released the GIL
            progress += 1
        assert t.is_alive()  # still blocked: the host func has not been released
        release.set()
        t.join(30)
        assert not t.is_alive()
        assert rc_holder["rc"] == 0 and ran == [1]
    finally:
        release.set()
        ll.aclrtDestroyStream(stream)
        ll.aclrtResetDevice(0)


# ------------------------------------------------------------- missing symbols
PARTIAL_LIB = r"""
#include <stdint.h>
#include <stddef.h>
static __thread int cur = -1;
int aclrtSetDevice(int32_t d) { cur = d; return 0; }
int aclrtGetDevice(int32_t *d) { if (cur < 0) return 107002; *d = cur; return 0; }
const char *aclGetRecentErrMsg(void) { return NULL; }
"""

MISSING_PROBE = r"""
import json
from pyacl_rt import lowlevel as ll, errors
from pyacl_rt._raw import _backend
out = {}
s = ll.scratch()
out["set"] = ll.aclrtSetDevice(3)
out["get"] = [ll.aclrtGetDevice(s.i32), s.i32[0]]
try:
    ll.aclrtResetDevice(3)
except errors.FunctionNotFoundError as e:
    out["err"] = [e.function, e.library, str(e), isinstance(e, errors.AclError)]
rc = ll.lib.aclrtResetDevice(3)
out["raw_rc"] = rc
try:
    ll.check(rc, "aclrtResetDevice")
except errors.FunctionNotFoundError as e:
    out["check"] = [e.function, e.library]
out["soc_raw_null"] = ll.lib.aclrtGetSocName() == ll.ffi.NULL
out["taken"] = ll.take_missing()
try:
    ll.aclprofInit(b"/tmp", 4)
except errors.FunctionNotFoundError as e:
    out["prof"] = str(e)
syms = ll.symbols()
out["syms"] = [syms["aclrtSetDevice"], syms["aclrtResetDevice"], syms["aclprofInit"]]
info = _backend.backend_info()
out["info"] = [info.backend, info.supports("aclrtGetDevice"), info.supports("aclrtMalloc"),
               len(info.missing)]
print("RESULT " + json.dumps(out))
"""


def test_missing_symbol_raises_function_not_found(
    tmp_path: Path, build_shared_lib: Any, run_python: Any, clean_env: Any
) -> None:
    lib = str(build_shared_lib(tmp_path / "old_cann" / "lib64" / "libascendcl.so", PARTIAL_LIB))
    proc = run_python(MISSING_PROBE, env=clean_env(PYACL_RT_BACKEND="real", PYACL_RT_LIBRARY=lib))
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["set"] == 0 and r["get"] == [0, 3]
    fn, library, text, is_acl = r["err"]
    assert fn == "aclrtResetDevice" and library == lib and is_acl
    assert "aclrtResetDevice" in text and lib in text
    assert r["raw_rc"] == -1 and r["check"] == ["aclrtResetDevice", lib]
    assert r["soc_raw_null"] is True and r["taken"] == "aclrtGetSocName"
    assert "aclprofInit" in r["prof"] and "libmsprofiler.so (not present" in r["prof"]
    assert r["syms"] == [
        [True, "libascendcl.so"],
        [False, "libascendcl.so"],
        [False, "libmsprofiler.so"],
    ]
    assert r["info"][0] == "real" and r["info"][1] is True and r["info"][2] is False
    assert r["info"][3] == len(ALL_NAMES) - 3


def test_extension_has_no_link_dependency_on_acl() -> None:
    """The cffi module must not link libascendcl (it dlopens the chosen library)."""
    import shutil
    import subprocess

    import pyacl_rt._raw._lowlevel_cffi as ext

    readelf = shutil.which("readelf")
    if readelf is None or ext.__file__ is None:
        pytest.skip("readelf not available")
    dyn = subprocess.run([readelf, "-d", ext.__file__], capture_output=True, text=True).stdout
    needed = [ln for ln in dyn.splitlines() if "(NEEDED)" in ln]
    assert needed and not [ln for ln in needed if "ascend" in ln or "msprof" in ln], needed


# ---------------------------------------------------------------- MockControl
MOCK_CONTROL_PROBE = r"""
import json
from pyacl_rt import lowlevel as ll
from pyacl_rt.mock import mock_control, REPORT_LAST_FINALIZE
mc = mock_control()
s = ll.scratch()
out = {"n": mc.device_count, "soc": mc.soc_name, "ver": mc.cann_version,
       "before": mc.counts(1)}
assert ll.aclrtSetDevice(1) == 0
assert ll.aclrtCreateStream(s.uptr) == 0
stream = s.uptr[0]
assert ll.aclrtMalloc(s.uptr, 100, 0) == 0
dev = s.uptr[0]
out["during"] = mc.counts(1)
out["total_allocs"] = mc.stat("allocations")
mc.inject_fault("aclrtMalloc", 500004, nth=2)
out["f1"] = ll.aclrtMalloc(s.uptr, 8, 0)
ll.aclrtFree(s.uptr[0])
out["f2"] = ll.aclrtMalloc(s.uptr, 8, 0)
out["hits"] = mc.fault_hits("aclrtMalloc")
mc.clear_faults()
out["f3"] = ll.aclrtMalloc(s.uptr, 8, 0)
ll.aclrtFree(s.uptr[0])
out["leaks_now"] = mc.leak_report()
mc.set_device_lost(1, 507010)
out["lost"] = [mc.device_lost(1), ll.aclrtSynchronizeStream(stream), mc.device_lost(0)]
mc.set_device_lost(1, 0)
assert ll.aclrtFree(dev) == 0
assert ll.aclrtDestroyStream(stream) == 0
assert ll.aclrtResetDevice(1) == 0
out["after"] = mc.counts(1)
try:
    mc.stat("nonsense")
except ValueError as e:
    out["bad"] = str(e)
print("RESULT " + json.dumps(out))
"""


def test_mock_control(run_python: Any, clean_env: Any) -> None:
    proc = run_python(
        MOCK_CONTROL_PROBE,
        env=clean_env(
            PYACL_RT_BACKEND="mock",
            ASCEND_MOCK_DEVICE_COUNT="4",
            ASCEND_MOCK_CANN_VERSION="8.0.RC3",
        ),
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["n"] == 4 and r["soc"].startswith("Ascend") and r["ver"] == "8.0.RC3"
    assert r["before"]["allocations"] == 0 and r["before"]["streams"] == 0
    assert r["during"]["allocations"] == 1 and r["during"]["bytes"] >= 100
    # the stream the program created; the runtime's own default context and stream apart
    assert r["during"]["streams"] == 1 and r["during"]["contexts"] == 0
    assert r["during"]["default_contexts"] == 1 and r["during"]["default_streams"] == 1
    assert r["total_allocs"] == 1
    assert r["f1"] == 0 and r["f2"] == 500004 and r["hits"] == 1 and r["f3"] == 0
    assert "1" in r["leaks_now"] and r["leaks_now"] != "no leaks"
    assert r["lost"] == [507010, 507010, 0]
    assert r["after"] == dict.fromkeys(r["after"], 0)
    assert "nonsense" in r["bad"]


CANN_FIDELITY_PROBE = r"""
import json
from pyacl_rt import lowlevel as ll, errors
ll.load()
s = ll.scratch()
NULL = ll.ffi.NULL
out = {}
rc = ll.aclrtResetDevice(1)  # never set
try:
    ll.check(rc, "aclrtResetDevice")
except errors.AclError as e:
    out["reset_err"] = [e.code, e.function]
assert ll.aclrtSetDevice(1) == 0 and ll.aclrtSetDevice(1) == 0
out["force"] = [ll.aclrtResetDeviceForce(1), ll.aclrtResetDeviceForce(1), ll.aclrtResetDevice(1)]
out["primary"] = [ll.aclrtGetPrimaryCtxState(1, NULL, s.i32), s.i32[0]]
s.i64[0] = -1
out["sysparam"] = [ll.aclrtGetSysParamOpt(0, s.i64), s.i64[0]]
set_rc = ll.aclrtDeviceSetLimit(1, 1000)  # SIMT divergent-warp stack size
out["limit_before_set"] = [set_rc, ll.aclrtDeviceGetLimit(1, s.size), s.size[0]]
out["simt_stack"] = [ll.aclrtDeviceSetLimit(0, 1000), ll.aclrtDeviceGetLimit(0, s.size)]
out["finalize_ref"] = [ll.aclInit(NULL), ll.aclInit(NULL), ll.aclFinalizeReference(NULL),
                       ll.aclFinalizeReference(NULL), ll.aclFinalize()]
out["arch"] = [ll.aclrtCheckArchCompatibility(ll.aclrtGetSocName(), s.i32), s.i32[0]]
out["count"] = [ll.aclrtGetDeviceCount(s.u32), s.u32[0]]
print("RESULT " + json.dumps(out))
"""


def test_mock_cann_fidelity(run_python: Any, clean_env: Any) -> None:
    """Issue 7 mock-fidelity items seen through the raw binding (each also has a C test)."""
    env = clean_env(PYACL_RT_BACKEND="mock", ASCEND_RT_VISIBLE_DEVICES="0,1,2, 3")
    proc = run_python(CANN_FIDELITY_PROBE, env=env)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["reset_err"] == [107002, "aclrtResetDevice"]  # unbalanced reset is an error
    assert r["force"] == [0, 107002, 107002]  # after a force reset nothing is left to release
    assert r["primary"] == [0, 0]  # NULL flags accepted
    assert r["sysparam"] == [0, 0]  # process option never set: 0, successfully
    assert r["limit_before_set"] == [0, 0, 1008]  # no device needed; rounded up to 16 bytes
    assert r["simt_stack"] == [207000, 207000]  # SIMT stack size: not on Atlas A2/A3 (910B1)
    assert r["finalize_ref"] == [0, 100002, 0, 0, 100037]  # NULL refCount, last one finalises
    assert r["arch"] == [0, 1]
    assert r["count"] == [0, 3]  # the list ends at the bad entry " 3"
    assert "ASCEND_RT_VISIBLE_DEVICES" in proc.stderr  # one warning names the bad entry


def test_mock_counts_tell_created_from_runtime_own(run_python: Any, clean_env: Any) -> None:
    """Issue 14 item 7: one Stream showed as 2 streams (the default stream counted) and,
    after closing it, the leak report said "device 1: 1 contexts 1 streams", which read
    like a leak. Now what the program created and what the runtime keeps are apart."""
    code = """
        import json
        import pyacl_rt as npu
        from pyacl_rt.mock import REPORT_NOW, mock_control

        mc = mock_control()
        s = npu.Stream(1)
        ctx = npu.Context(1)
        out = {"with_stream": mc.counts(1)}
        ctx.close()
        out["report_with_stream"] = mc.leak_report(REPORT_NOW)
        s.close()
        out["report_after_close"] = mc.leak_report(REPORT_NOW)
        out["total"] = mc.counts()
        print(json.dumps(out))
    """
    proc = run_python(code, env=clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_DEVICE_COUNT="2"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["with_stream"] == {
        "contexts": 1,  # the explicit Context
        "streams": 1,  # the one Stream
        "events": 0,
        "allocations": 0,
        "bytes": 0,
        "host_allocations": 0,
        "host_bytes": 0,
        "default_contexts": 1,  # device 1's, held by pyacl_rt until finalize
        "default_streams": 2,  # one per context
    }
    assert out["report_with_stream"] == (
        "mock_libascendcl leak report: device 1: 1 stream (plus the runtime's own: "
        "1 default context, 1 default stream)\n"
    )
    assert out["report_after_close"] == (
        "mock_libascendcl leak report: device 1: only the runtime's own: 1 default context, "
        "1 default stream\n"
    )
    assert out["total"]["streams"] == 0 and out["total"]["default_streams"] == 1


def test_mock_control_refuses_real_library(
    tmp_path: Path, build_shared_lib: Any, run_python: Any, clean_env: Any
) -> None:
    lib = str(build_shared_lib(tmp_path / "real" / "libascendcl.so", PARTIAL_LIB))
    code = (
        "from pyacl_rt.mock import mock_control\n"
        "try:\n    mock_control()\nexcept RuntimeError as e:\n    print('REFUSED', e)\n"
    )
    proc = run_python(code, env=clean_env(PYACL_RT_BACKEND="real", PYACL_RT_LIBRARY=lib))
    assert proc.returncode == 0 and "REFUSED" in proc.stdout and "not the mock" in proc.stdout


def test_dispatch_table_hook(mock_loaded: Any) -> None:
    ll = mock_loaded
    addr, index = ll.dispatch_table()
    table = ll.ffi.cast("void **", addr)
    i = index["aclrtGetDevice"]
    fn = ll.ffi.cast("int (*)(int32_t *)", table[i])
    assert ll.aclrtSetDevice(0) == 0
    try:
        s = ll.scratch()
        assert fn(s.i32) == 0 and s.i32[0] == 0
    finally:
        assert ll.aclrtResetDevice(0) == 0


# ------------------------------------------------------------ fast variants
class _Res:
    """Device 0 + a stream, an event, 64 B device memory and a 64 B host array."""

    def __init__(self, ll: Any) -> None:
        self.ll = ll
        s = ll.scratch()
        assert ll.aclrtSetDevice(0) == 0
        assert ll.aclrtCreateStream(s.uptr) == 0
        self.stream = int(s.uptr[0])
        assert ll.aclrtCreateEvent(s.uptr) == 0
        self.event = int(s.uptr[0])
        assert ll.aclrtMalloc(s.uptr, 64, 0) == 0
        self.dev = int(s.uptr[0])
        self.host = ll.ffi.new("unsigned char[64]")
        self.host_addr = int(ll.ffi.cast("uintptr_t", self.host))

    def close(self) -> None:
        ll = self.ll
        assert ll.aclrtSynchronizeStream(self.stream) == 0
        assert ll.aclrtFree(self.dev) == 0
        assert ll.aclrtDestroyEvent(self.event) == 0
        assert ll.aclrtDestroyStream(self.stream) == 0
        assert ll.aclrtResetDevice(0) == 0


@pytest.fixture
def res(mock_loaded: Any) -> Any:
    r = _Res(mock_loaded)
    try:
        yield r
    finally:
        r.close()


def test_fast_uses_the_same_dispatch_table(mock_loaded: Any) -> None:
    ll = mock_loaded
    assert ll.fast._table_address() == ll.dispatch_table()[0]
    assert ll.fast.GIL_HELD == ("get_device", "get_current_context")


def test_fast_variants_return_what_the_cffi_calls_return(res: Any) -> None:
    ll, fast, s = res.ll, res.ll.fast, res.ll.scratch()
    c = CONSTANTS
    # out-parameter calls: the value the cffi call writes into scratch
    assert ll.aclrtGetDevice(s.i32) == 0 and fast.get_device() == s.i32[0] == 0
    assert ll.aclrtGetCurrentContext(s.uptr) == 0
    ctx = int(s.uptr[0])
    assert fast.get_current_context() == ctx != 0
    assert fast.set_current_context(ctx) is None
    assert fast.get_current_context() == ctx
    assert ll.aclrtStreamQuery(res.stream, s.i32) == 0
    assert fast.stream_query(res.stream) == s.i32[0] == c["ACL_STREAM_STATUS_COMPLETE"]
    assert fast.query_event_status(res.event) in (0, 1)
    # calls without out-parameter: None where cffi returns 0
    assert fast.record_event(res.event, res.stream) is None
    assert fast.synchronize_event(res.event) is None
    assert ll.aclrtQueryEventStatus(res.event, s.i32) == 0
    assert fast.query_event_status(res.event) == s.i32[0]
    assert s.i32[0] == c["ACL_EVENT_RECORDED_STATUS_COMPLETE"]
    assert fast.synchronize_event_with_timeout(res.event, 1000) is None
    assert fast.stream_wait_event(res.stream, res.event) is None
    # copies move the same bytes as the cffi calls
    res.host[0:8] = b"fastcall"
    h2d, d2h = c["ACL_MEMCPY_HOST_TO_DEVICE"], c["ACL_MEMCPY_DEVICE_TO_HOST"]
    assert fast.memcpy_async(res.dev, 64, res.host_addr, 8, h2d, res.stream) is None
    assert fast.memset_async(res.dev + 8, 56, 0x5A, 8, res.stream) is None
    assert fast.synchronize_stream(res.stream) is None
    out = ll.ffi.new("unsigned char[16]")
    out_addr = int(ll.ffi.cast("uintptr_t", out))
    assert fast.memcpy(out_addr, 16, res.dev, 16, d2h) is None
    assert bytes(ll.ffi.buffer(out, 16)) == b"fastcall" + b"\x5a" * 8
    assert ll.aclrtMemcpy(out_addr, 16, res.dev, 16, d2h) == 0
    assert bytes(ll.ffi.buffer(out, 16)) == b"fastcall" + b"\x5a" * 8
    assert fast.synchronize_stream_with_timeout(res.stream, -1) is None
    assert fast.stream_query(res.stream) == c["ACL_STREAM_STATUS_COMPLETE"]
    # __index__ objects and int subclasses are accepted like ints
    import enum

    class Kind(enum.IntEnum):
        H2D = h2d

    class Idx:
        def __init__(self, v: int) -> None:
            self.v = v

        def __index__(self) -> int:
            return self.v

    assert fast.memcpy(Idx(res.dev), Idx(64), res.host_addr, 8, Kind.H2D) is None
    assert fast.stream_query(Idx(res.stream)) == c["ACL_STREAM_STATUS_COMPLETE"]


def test_fast_failures_raise_what_check_raises(res: Any) -> None:
    from pyacl_rt import errors

    ll, fast = res.ll, res.ll.fast
    bogus = 0x1234560
    cases: list[tuple[str, Any, tuple[Any, ...], Any, tuple[Any, ...]]] = [
        ("aclrtSynchronizeStream", fast.synchronize_stream, (bogus,), None, ()),
        ("aclrtStreamQuery", fast.stream_query, (bogus,), "i32", ()),
        ("aclrtQueryEventStatus", fast.query_event_status, (bogus,), "i32", ()),
        ("aclrtRecordEvent", fast.record_event, (bogus, res.stream), None, ()),
        ("aclrtSetCurrentContext", fast.set_current_context, (bogus,), None, ()),
        (
            "aclrtMemcpyAsync",
            fast.memcpy_async,
            (res.dev, 8, res.host_addr, 64, CONSTANTS["ACL_MEMCPY_HOST_TO_DEVICE"], res.stream),
            None,
            (),
        ),
    ]
    for name, fn, args, out, _ in cases:
        raw_args = (*args, getattr(ll.scratch(), out)) if out else args
        rc = getattr(ll, name)(*raw_args)
        assert rc != 0, name
        with pytest.raises(errors.AclError) as raw_err:
            ll.check(rc, name)
        with pytest.raises(errors.AclError) as fast_err:
            fn(*args)
        assert type(fast_err.value) is type(raw_err.value), name
        assert fast_err.value.code == rc and fast_err.value.function == name
        assert fast_err.value.recent_message  # read on this thread, at once
        assert ll.recent_error_message() is None  # and consumed
    # the thread's context is still usable after the failed SetCurrentContext
    assert fast.get_device() == 0


def test_fast_wait_then_host_func(res: Any) -> None:
    """An await's launch: aclrtStreamWaitEvent then aclrtLaunchHostFunc of a C function,
    one call; bad arguments raise before C, a failed wait raises its mapped error."""
    import cffi

    from pyacl_rt import errors

    libc_ffi = cffi.FFI()
    libc_ffi.cdef("int usleep(unsigned int usec);")
    libc = libc_ffi.dlopen(None)
    usleep = int(libc_ffi.cast("uintptr_t", libc_ffi.addressof(libc, "usleep")))
    fast = res.ll.fast
    assert fast.record_event(res.event, res.stream) is None
    assert fast.wait_then_host_func(res.stream, res.event, usleep, 100) is None
    assert fast.synchronize_stream(res.stream) is None
    with pytest.raises(ValueError, match="fn is NULL"):
        fast.wait_then_host_func(res.stream, res.event, 0, 0)
    with pytest.raises(TypeError, match="arg"):
        fast.wait_then_host_func(res.stream, res.event, usleep, "x")
    with pytest.raises(TypeError):
        fast.wait_then_host_func(res.stream, res.event, usleep)
    with pytest.raises(errors.AclError) as err:
        fast.wait_then_host_func(res.stream, 0x1234560, usleep, 0)
    assert err.value.function == "aclrtStreamWaitEvent"
    assert fast.synchronize_stream(res.stream) is None  # nothing was left queued


def test_fast_get_device_without_context_raises(mock_loaded: Any) -> None:
    from pyacl_rt import errors

    box: dict[str, Any] = {}

    def worker() -> None:  # a fresh thread has no current context
        try:
            mock_loaded.fast.get_device()
        except errors.AclError as e:
            box["code"] = e.code
        box["rc"] = mock_loaded.aclrtGetDevice(mock_loaded.scratch().i32)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert box["code"] == box["rc"] == 107002


BAD_HANDLES: list[tuple[Any, type[Exception]]] = [
    ("1", TypeError),
    (1.0, TypeError),
    (None, TypeError),
    (True, TypeError),
    (b"\x00", TypeError),
    (-1, OverflowError),
    (2**64, OverflowError),
    (-(2**70), OverflowError),
]


@pytest.mark.parametrize(("bad", "exc"), BAD_HANDLES)
def test_fast_bad_handles_raise_before_c(res: Any, bad: Any, exc: type[Exception]) -> None:
    fast, h2d = res.ll.fast, CONSTANTS["ACL_MEMCPY_HOST_TO_DEVICE"]
    calls: list[tuple[Any, tuple[Any, ...], str]] = [
        (fast.set_current_context, (bad,), "context"),
        (fast.stream_query, (bad,), "stream"),
        (fast.query_event_status, (bad,), "event"),
        (fast.synchronize_stream, (bad,), "stream"),
        (fast.synchronize_stream_with_timeout, (bad, 10), "stream"),
        (fast.synchronize_event, (bad,), "event"),
        (fast.synchronize_event_with_timeout, (bad, 10), "event"),
        (fast.record_event, (res.event, bad), "stream"),
        (fast.record_event, (bad, res.stream), "event"),
        (fast.stream_wait_event, (bad, res.event), "stream"),
        (fast.memcpy_async, (bad, 64, res.host_addr, 8, h2d, res.stream), "dst"),
        (fast.memcpy_async, (res.dev, bad, res.host_addr, 8, h2d, res.stream), "dst_max"),
        (fast.memcpy_async, (res.dev, 64, res.host_addr, bad, h2d, res.stream), "count"),
        (fast.memcpy_async, (res.dev, 64, res.host_addr, 8, h2d, bad), "stream"),
        (fast.memcpy, (res.dev, 64, bad, 8, h2d), "src"),
        (fast.memset_async, (res.dev, 64, 0, bad, res.stream), "count"),
    ]
    for fn, args, argname in calls:
        with pytest.raises(exc, match=f"argument '{argname}'"):
            fn(*args)
    # nothing was enqueued or changed
    assert fast.stream_query(res.stream) == CONSTANTS["ACL_STREAM_STATUS_COMPLETE"]
    assert fast.get_device() == 0


def test_fast_bad_int32_and_arity(res: Any) -> None:
    fast = res.ll.fast
    for bad, exc in (("1", TypeError), (1.5, TypeError), (2**31, OverflowError)):
        with pytest.raises(exc, match="argument 'kind'"):
            fast.memcpy_async(res.dev, 64, res.host_addr, 8, bad, res.stream)
        with pytest.raises(exc, match="argument 'timeout'"):
            fast.synchronize_stream_with_timeout(res.stream, bad)
        with pytest.raises(exc, match="argument 'value'"):
            fast.memset_async(res.dev, 64, bad, 8, res.stream)
    with pytest.raises(TypeError, match="takes exactly 2 arguments"):
        fast.record_event(res.event)
    with pytest.raises(TypeError, match="takes exactly 6 arguments"):
        fast.memcpy_async(res.dev, 64, res.host_addr, 8, 1)
    with pytest.raises(TypeError):
        fast.stream_query()
    with pytest.raises(TypeError):
        fast.get_device(0)
    with pytest.raises(TypeError):
        fast.synchronize_stream(stream=res.stream)
    with pytest.raises(TypeError):
        fast.record_event(event=res.event, stream=res.stream)


FAST_MISSING_PROBE = r"""
import json
from pyacl_rt import lowlevel as ll, errors
out = {"loaded_before": ll.is_loaded()}
# the first fast call loads the library (like lowlevel's attributes)
try:
    ll.fast.get_device()
except errors.AclError as e:
    out["first"] = e.code
out["loaded_after"] = ll.is_loaded()
assert ll.aclrtSetDevice(3) == 0
out["get"] = ll.fast.get_device()
for name, call in (("sync", lambda: ll.fast.synchronize_stream(0)),
                   ("record", lambda: ll.fast.record_event(1, 2)),
                   ("query", lambda: ll.fast.stream_query(0))):
    try:
        call()
    except errors.FunctionNotFoundError as e:
        out[name] = [e.function, e.library, isinstance(e, errors.AclError)]
out["taken"] = ll.take_missing()
print("RESULT " + json.dumps(out))
"""


def test_fast_missing_symbol_raises_function_not_found(
    tmp_path: Path, build_shared_lib: Any, run_python: Any, clean_env: Any
) -> None:
    lib = str(build_shared_lib(tmp_path / "old_cann" / "lib64" / "libascendcl.so", PARTIAL_LIB))
    proc = run_python(
        FAST_MISSING_PROBE, env=clean_env(PYACL_RT_BACKEND="real", PYACL_RT_LIBRARY=lib)
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["loaded_before"] is False and r["loaded_after"] is True
    assert r["first"] == 107002  # PARTIAL_LIB: no device set yet
    assert r["get"] == 3
    assert r["sync"] == ["aclrtSynchronizeStream", lib, True]
    assert r["record"] == ["aclrtRecordEvent", lib, True]
    assert r["query"] == ["aclrtStreamQuery", lib, True]
    assert r["taken"] is None  # the miss was consumed by the error


WAIT_FLAG_LIB = r"""
#include <stdint.h>
#include <time.h>
static int g_flag, g_timed_out;
/* aclrtHostFunc: blocks its stream until pyacl_test_set_flag(1), at most arg ms (a
 * safety net so that a GIL held by the synchronizing thread fails instead of hanging). */
void pyacl_test_wait_flag(void *arg) {
    long max_ms = (long)(uintptr_t)arg;
    for (long i = 0; i < max_ms && !__atomic_load_n(&g_flag, __ATOMIC_ACQUIRE); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (!__atomic_load_n(&g_flag, __ATOMIC_ACQUIRE))
        __atomic_store_n(&g_timed_out, 1, __ATOMIC_RELEASE);
}
void pyacl_test_set_flag(int v) { __atomic_store_n(&g_flag, v, __ATOMIC_RELEASE); }
int pyacl_test_timed_out(void) { return __atomic_load_n(&g_timed_out, __ATOMIC_ACQUIRE); }
void pyacl_test_reset(void) { g_flag = 0; g_timed_out = 0; }
"""


@pytest.mark.parametrize(
    "which",
    [
        "synchronize_stream",
        "synchronize_stream_with_timeout",
        "synchronize_event",
        "synchronize_event_with_timeout",
    ],
)
def test_fast_blocking_calls_release_the_gil(
    res: Any, which: str, tmp_path: Path, build_shared_lib: Any
) -> None:
    """A stream blocked in C (host func waiting for a flag) and a thread in a fast
    synchronize: the main thread must run Python and release the stream; with the GIL
    held it could not, and the host func would end by its 20 s safety timeout."""
    import ctypes

    ll, fast = res.ll, res.ll.fast
    helper = ctypes.CDLL(str(build_shared_lib(tmp_path / "libwaitflag.so", WAIT_FLAG_LIB)))
    helper.pyacl_test_reset()
    fn_addr = ctypes.cast(helper.pyacl_test_wait_flag, ctypes.c_void_p).value
    assert ll.aclrtLaunchHostFunc(res.stream, ll.ffi.cast("aclrtHostFunc", fn_addr), 20_000) == 0
    fast.record_event(res.event, res.stream)
    call = {
        "synchronize_stream": lambda: fast.synchronize_stream(res.stream),
        "synchronize_stream_with_timeout": lambda: fast.synchronize_stream_with_timeout(
            res.stream, 60_000
        ),
        "synchronize_event": lambda: fast.synchronize_event(res.event),
        "synchronize_event_with_timeout": lambda: fast.synchronize_event_with_timeout(
            res.event, 60_000
        ),
    }[which]
    entered = threading.Event()
    box: dict[str, Any] = {}

    def syncer() -> None:
        assert ll.aclrtSetDevice(0) == 0
        entered.set()
        try:
            box["result"] = call()
        except BaseException as e:  # pragma: no cover - reported below
            box["error"] = e
        ll.aclrtResetDevice(0)

    t = threading.Thread(target=syncer)
    t.start()
    try:
        assert entered.wait(30)
        progress = 0
        while progress < 10_000:  # Python runs on this thread while the other waits in C
            progress += 1
        assert t.is_alive()  # still blocked: the flag is not set yet
        helper.pyacl_test_set_flag(1)
        t.join(30)
        assert not t.is_alive()
    finally:
        helper.pyacl_test_set_flag(1)
        t.join(30)
    assert helper.pyacl_test_timed_out() == 0
    assert "error" not in box and box["result"] is None


def test_buffer_forwarder_exports_the_live_buffer() -> None:
    """_fastcall.BufferForwarder gives Python classes a C-level buffer on every version:
    each export calls ``_export_acquire`` once and, when released, ``_export_release``
    once (explicit export counting); the view's ``obj`` is the instance; an error from
    ``_export_acquire`` propagates."""
    import numpy as np

    from pyacl_rt._raw import _fastcall

    class Owner(_fastcall.BufferForwarder):
        __slots__ = ("data", "n")

        def __init__(self) -> None:
            self.data = bytearray(b"hello")
            self.n = 0

        def _export_acquire(self) -> bytearray:
            self.n += 1
            return self.data

        def _export_release(self) -> None:
            self.n -= 1

    owner = Owner()
    view = memoryview(owner)
    view[0] = ord("J")
    assert bytes(owner.data) == b"Jello"
    assert view.obj is owner and owner.n == 1
    part = view[1:3]  # shares the export
    arr = np.frombuffer(owner, np.uint8)  # numpy holds its own export
    assert owner.n == 2 and arr[0] == ord("J")
    view.release()
    assert owner.n == 2  # part still uses the first export
    part.release()
    assert owner.n == 1
    del arr
    assert owner.n == 0

    class Closed(_fastcall.BufferForwarder):
        def _export_acquire(self) -> bytearray:
            raise ValueError("closed")

    with pytest.raises(ValueError, match="closed"):
        memoryview(Closed())

    class NoBuffer(Owner):
        def _export_acquire(self) -> bytearray:
            self.n += 1
            return 42  # type: ignore[return-value]

    nb = NoBuffer()
    with pytest.raises(TypeError):
        memoryview(nb)
    assert nb.n == 0  # the failed export was undone


def test_mock_mem_info_counts_whole_pages(mock_loaded: Any) -> None:
    """The mock charges device memory in whole pages of the malloc policy: normal
    pages, 2 MiB for HUGE_ONLY, 1 GiB for HUGE1G_ONLY (whose usable size is only
    rounded to 32 bytes, without the +32 padding)."""
    ll = mock_loaded
    s = ll.scratch()
    assert ll.aclrtGetDeviceCount(s.u32) == 0
    dev = int(s.u32[0]) - 1  # the last device: no other test allocates there
    assert ll.aclrtSetDevice(dev) == 0
    try:

        def free_now() -> int:
            assert ll.aclrtGetMemInfo(CONSTANTS["ACL_HBM_MEM"], s.size, s.size + 1) == 0
            return int(s.size[0])

        free_now()
        if int(s.size[1]) < 3 << 30:
            pytest.skip("needs a mock device of at least 3 GiB")
        page = mmap.PAGESIZE
        cases = [
            ("ACL_MEM_MALLOC_NORMAL_ONLY", 1, page, 64),
            ("ACL_MEM_MALLOC_HUGE_FIRST", 100, page, 160),
            ("ACL_MEM_MALLOC_HUGE_FIRST", (1 << 20) + 1, 2 << 20, (1 << 20) + 64),
            ("ACL_MEM_MALLOC_HUGE_ONLY", 1, 2 << 20, 64),
            ("ACL_MEM_MALLOC_HUGE1G_ONLY", 1, 1 << 30, 32),
            ("ACL_MEM_MALLOC_HUGE1G_ONLY_P2P", (1 << 30) + 1, 2 << 30, (1 << 30) + 32),
        ]
        for policy, size, cost, usable in cases:
            before = free_now()
            assert ll.aclrtMalloc(s.uptr, size, CONSTANTS[policy]) == 0, policy
            ptr = int(s.uptr[0])
            assert before - free_now() == cost, policy
            assert ll.aclrtMemGetAddressRange(ptr, s.uptr, s.size + 2) == 0
            assert int(s.uptr[0]) == ptr and int(s.size[2]) == usable, policy
            assert ll.aclrtFree(ptr) == 0
            assert free_now() == before
    finally:
        assert ll.aclrtResetDevice(dev) == 0
