"""The mock's diagnostics through the raw layer (issue 17, mock README "Timing model",
"Profiling", "Dump", "Device log", "Race sanitizer"): what a Python profiler, dump
helper, log exporter and sanitizer front end will build on.

The switches are read once per process, so most scenarios run in a subprocess with
their environment; they drive the mock with ``pyacl_rt.lowlevel`` (every ACL function
1:1) and the ``aclmock*`` calls through ctypes.
"""

from __future__ import annotations

import csv
import itertools
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

PRELUDE = textwrap.dedent(
    r"""
    import ctypes, json, sys
    from pyacl_rt import lowlevel as ll
    from pyacl_rt._raw._abi_runtime import CONSTANTS as C
    ll.load()
    from pyacl_rt.mock import mock_control
    mock = ctypes.CDLL(mock_control().path)
    s = ll.scratch()

    def ok(rc, what=""):
        assert rc == 0, (what, rc, ll.recent_error_message())

    def new(fn, *args):
        ok(fn(s.uptr, *args), fn)
        return int(s.uptr[0])

    class Arg(ctypes.Structure):  # aclmockOpArg
        _fields_ = [
            ("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("access", ctypes.c_uint32),
            ("dtype", ctypes.c_int32), ("ndim", ctypes.c_uint32), ("dims", ctypes.c_int64 * 8),
        ]

    class OpDesc(ctypes.Structure):  # aclmockOpDesc
        _fields_ = [
            ("name", ctypes.c_char_p), ("costNs", ctypes.c_uint64),
            ("args", ctypes.POINTER(Arg)), ("numArgs", ctypes.c_uint32),
            ("func", ctypes.c_void_p), ("userData", ctypes.c_void_p),
        ]

    def launch(name, cost_ns, args, stream):
        arr = (Arg * len(args))(*args)
        d = OpDesc(name.encode(), cost_ns, arr, len(args), None, None)
        ok(mock.aclmockLaunchOp(ctypes.byref(d), ctypes.c_void_p(stream)), name)

    H2D, D2H = C["ACL_MEMCPY_HOST_TO_DEVICE"], C["ACL_MEMCPY_DEVICE_TO_HOST"]
    ok(ll.aclInit(ll.ffi.NULL), "aclInit")
    ok(ll.aclrtSetDevice(0), "aclrtSetDevice")
    """
)


def _run(run_python: Any, clean_env: Any, body: str, **env: str) -> Any:
    proc = run_python(
        PRELUDE + textwrap.dedent(body), env=clean_env(PYACL_RT_BACKEND="mock", **env)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# ------------------------------------------------------------------- profiling

PIPELINE = r"""
N = 1 << 20
s1, s2 = new(ll.aclrtCreateStream), new(ll.aclrtCreateStream)
dev = [new(ll.aclrtMalloc, N, 0) for _ in range(2)]
host = [new(ll.aclrtMallocHost, N) for _ in range(2)]
ev = new(ll.aclrtCreateEvent)
mock.aclmockSetNextTaskTag(b"pipeline.py:12")
ok(ll.aclrtMemcpyAsync(dev[0], N, host[0], N, H2D, s1))
launch("matmul", 200000, [Arg(dev[0], N, 3, C["ACL_FLOAT"], 2, (ctypes.c_int64 * 8)(512, 512))], s1)
ok(ll.aclrtRecordEvent(ev, s1))
ok(ll.aclrtMemcpyAsync(dev[1], N, host[1], N, H2D, s2))
ok(ll.aclrtStreamWaitEvent(s2, ev))
ok(ll.aclrtMemcpyAsync(host[1], N, dev[0], N, D2H, s2))
mock.aclmockProfStep()
ok(ll.aclrtSynchronizeDevice())
for p in dev:
    ok(ll.aclrtFree(p))
for p in host:
    ok(ll.aclrtFreeHost(p))
ok(ll.aclrtDestroyEvent(ev))
ok(ll.aclrtDestroyStream(s1))
ok(ll.aclrtDestroyStream(s2))
ok(ll.aclrtResetDevice(0))
ok(ll.aclFinalize())
"""


def _profile(run_python: Any, clean_env: Any, out: Path, program: str = PIPELINE) -> Path:
    _run(
        run_python,
        clean_env,
        program,
        ASCEND_MOCK_TIMING="virtual",
        ASCEND_PROFILER_FLAGS="enable",
        ASCEND_PROFILER_OUTPUT=str(out),
    )
    folders = sorted(out.glob("mock_prof_*"))
    assert len(folders) == 1, folders
    return folders[0]


METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def _validate_chrome_trace(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Checks the Chrome trace event format (JSON object form); returns the events."""
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    assert trace["displayTimeUnit"] in ("ms", "ns")
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    names: set[tuple[int, int]] = set()
    processes: set[int] = set()
    used: set[tuple[int, int]] = set()
    for e in events:
        assert (
            isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        ), e
        ph = e["ph"]
        assert ph in ("X", "i", "M"), e
        if ph == "M":
            assert e["name"] in METADATA, e
            assert ("name" in e["args"]) or ("sort_index" in e["args"]), e
            if e["name"] == "process_name":
                processes.add(e["pid"])
            if e["name"] == "thread_name":
                names.add((e["pid"], e["tid"]))
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        assert isinstance(e["cat"], str) and isinstance(e["args"], dict), e
        used.add((e["pid"], e["tid"]))
        if ph == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
            a = e["args"]
            assert round(e["ts"] * 1000) == a["start_ns"], e
            assert round(e["dur"] * 1000) == a["end_ns"] - a["start_ns"], e
        else:
            assert e["s"] in ("t", "p", "g"), e
    assert {pid for pid, _ in used} <= processes, "a process without process_name"
    assert used <= names, f"tracks without thread_name: {used - names}"
    return events


def test_profile_shows_a_wait_on_an_event_already_complete(
    run_python: Any, clean_env: Any, tmp_path: Path
) -> None:
    """A stream wait on an event that has already completed is still a task of the trace (as
    on a card): it was skipped whenever s1 finished before the wait was issued, so the
    pipeline's trace lost its event_wait at random (CI failure; failed before the fix)."""
    program = PIPELINE.replace(
        "ok(ll.aclrtStreamWaitEvent(s2, ev))",
        "ok(ll.aclrtSynchronizeStream(s1))\nok(ll.aclrtStreamWaitEvent(s2, ev))",
    )
    folder = _profile(run_python, clean_env, tmp_path / "a", program)
    trace = json.loads((folder / "trace.json").read_text())
    kinds = sorted(
        e["cat"] for e in _validate_chrome_trace(trace) if e["ph"] == "X" and e["pid"] > 0
    )
    assert kinds == ["copy_d2h", "copy_h2d", "copy_h2d", "event_wait", "kernel"]


def test_profile_is_a_chrome_trace_with_summaries(
    run_python: Any, clean_env: Any, tmp_path: Path
) -> None:
    folder = _profile(run_python, clean_env, tmp_path / "a")
    trace = json.loads((folder / "trace.json").read_text())
    events = _validate_chrome_trace(trace)
    assert trace["otherData"]["timing"] == "virtual"
    tasks = [e for e in events if e["ph"] == "X" and e["pid"] > 0]
    kinds = sorted(e["cat"] for e in tasks)
    assert kinds == ["copy_d2h", "copy_h2d", "copy_h2d", "event_wait", "kernel"]
    # one track per stream: the tasks of a track do not overlap
    by_track: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in tasks:
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    assert len(by_track) == 2
    for track in by_track.values():
        track.sort(key=lambda e: e["ts"])
        for a, b in itertools.pairwise(track):
            assert b["args"]["start_ns"] >= a["args"]["end_ns"]
    h2d_tagged = [e for e in tasks if e["args"].get("tag") == "pipeline.py:12"]
    assert len(h2d_tagged) == 1 and h2d_tagged[0]["cat"] == "copy_h2d"
    # the wait: the D2H on s2 starts after the kernel on s1
    kernel = next(e for e in tasks if e["cat"] == "kernel")
    d2h = next(e for e in tasks if e["cat"] == "copy_d2h")
    assert d2h["args"]["start_ns"] >= kernel["args"]["end_ns"]
    assert kernel["args"]["bytes"] == 1 << 20
    assert any(e["ph"] == "i" and e["name"] == "step 1" for e in events)

    summary = json.loads((folder / "summary.json").read_text())
    counts = {k["kind"]: k["count"] for k in summary["kinds"]}
    assert counts == {"copy_h2d": 2, "kernel": 1, "copy_d2h": 1, "event_record": 1, "event_wait": 1}
    with (folder / "kind_summary.csv").open() as f:
        rows = {r["kind"]: r for r in csv.DictReader(f)}
    assert {k: int(r["count"]) for k, r in rows.items()} == counts
    h2d = rows["copy_h2d"]
    assert float(h2d["bandwidth_gbps"]) == pytest.approx(
        int(h2d["bytes"]) / (float(h2d["total_us"]) * 1e3), rel=1e-3
    )
    with (folder / "stream_summary.csv").open() as f:
        streams = list(csv.DictReader(f))
    assert len(streams) == 2
    assert {int(r["tasks"]) for r in streams} == {3}
    # the two streams overlap (the second H2D waits for the engine, but the kernel runs
    # while it copies)
    assert all(float(r["overlap_us"]) > 0 for r in streams)
    assert summary["devices"][0]["overlap_us"] == pytest.approx(
        min(float(r["overlap_us"]) for r in streams), abs=1e-3
    )


def test_virtual_profile_is_deterministic(run_python: Any, clean_env: Any, tmp_path: Path) -> None:
    """The golden-trace property: two runs of the same program give the same device
    timeline, to the nanosecond."""

    def timeline(folder: Path) -> list[tuple[Any, ...]]:
        events = json.loads((folder / "trace.json").read_text())["traceEvents"]
        return sorted(
            (e["pid"], e["tid"], e["cat"], e["name"], e["args"]["start_ns"], e["args"]["end_ns"])
            for e in events
            if e["ph"] in ("X", "i") and e["pid"] > 0
        )

    a = timeline(_profile(run_python, clean_env, tmp_path / "a"))
    b = timeline(_profile(run_python, clean_env, tmp_path / "b"))
    assert a == b and len(a) >= 6


# ---------------------------------------------------------------------- timing


def test_virtual_elapsed_time_is_the_model(run_python: Any, clean_env: Any) -> None:
    proc = _run(
        run_python,
        clean_env,
        r"""
        N = 24_000_000
        st = new(ll.aclrtCreateStream)
        d, h = new(ll.aclrtMalloc, N, 0), new(ll.aclrtMallocHost, N)
        a, b = new(ll.aclrtCreateEvent), new(ll.aclrtCreateEvent)
        ok(ll.aclrtRecordEvent(a, st))
        ok(ll.aclrtMemcpyAsync(d, N, h, N, H2D, st))
        ok(ll.aclrtRecordEvent(b, st))
        ok(ll.aclrtSynchronizeStream(st))
        ok(ll.aclrtEventElapsedTime(s.f32, a, b))
        print(json.dumps({"ms": s.f32[0], "mode": mock.aclmockTimingGetMode()}))
        """,
        ASCEND_MOCK_TIMING="virtual",
        ASCEND_MOCK_TIMING_MODEL='{"launch_ns": 0, "latency_ns": 0, "h2d_gbps": 12}',
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["mode"] == 1
    assert out["ms"] == pytest.approx(2.0, rel=1e-6)  # 24 MB over 12 GB/s, nothing else


# --------------------------------------------------------------------- sanitizer

REPORT = r"""
class Access(ctypes.Structure):  # aclmockSanitizerAccess
    _fields_ = [
        ("taskId", ctypes.c_uint64), ("device", ctypes.c_int32), ("streamId", ctypes.c_int32),
        ("stream", ctypes.c_void_p), ("access", ctypes.c_uint32), ("name", ctypes.c_char * 64),
        ("tag", ctypes.c_char * 256),
    ]

class Report(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("device", ctypes.c_int32), ("address", ctypes.c_uint64),
                ("size", ctypes.c_uint64), ("current", Access), ("previous", Access),
                ("message", ctypes.c_char * 1024)]

mock.aclmockSanitizerGetReportCount.restype = ctypes.c_uint64
mock.aclmockSanitizerGetReports.restype = ctypes.c_size_t

def reports():
    n = mock.aclmockSanitizerGetReportCount()
    arr = (Report * max(n, 1))()
    got = mock.aclmockSanitizerGetReports(arr, ctypes.c_size_t(n), ctypes.c_size_t(0))
    def acc(a):
        return {"stream": a.streamId, "name": a.name.decode(), "tag": a.tag.decode(),
                "access": a.access}
    return [{"kind": r.kind, "size": r.size, "current": acc(r.current), "previous": acc(r.previous),
             "message": r.message.decode()} for r in arr[:got]]
"""


def test_sanitizer_reports_a_host_read_of_a_pending_copy(run_python: Any, clean_env: Any) -> None:
    proc = _run(
        run_python,
        clean_env,
        REPORT
        + textwrap.dedent(
            r"""
        N = 4096
        st = new(ll.aclrtCreateStream)
        d, h = new(ll.aclrtMalloc, N, 0), new(ll.aclrtMallocHost, N)
        mock.aclmockSetNextTaskTag(b"app.py:10")
        ok(ll.aclrtMemcpyAsync(h, N, d, N, D2H, st))
        mock.aclmockSetNextTaskTag(b"app.py:11")
        ok(mock.aclmockSanitizerHostAccess(ctypes.c_void_p(h), ctypes.c_size_t(N), 1))  # the bug
        ok(ll.aclrtSynchronizeStream(st))
        ok(mock.aclmockSanitizerHostAccess(ctypes.c_void_p(h), ctypes.c_size_t(N), 1))  # fine now
        print(json.dumps(reports()))
        """
        ),
        ASCEND_MOCK_SANITIZE="1",
    )
    reps = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(reps) == 1
    r = reps[0]
    assert r["kind"] == 2 and r["size"] == 4096
    assert r["current"] == {"stream": -1, "name": "host read", "tag": "app.py:11", "access": 1}
    assert r["previous"]["name"] == "aclrtMemcpyAsync" and r["previous"]["tag"] == "app.py:10"
    assert r["previous"]["access"] == 2 and r["previous"]["stream"] >= 0
    assert "race sanitizer: host access while a task is pending" in proc.stderr
    assert "[app.py:11]" in proc.stderr and "[app.py:10]" in proc.stderr


def test_sanitizer_is_off_by_default(run_python: Any, clean_env: Any) -> None:
    def unset_env(**env: str) -> dict[str, str]:  # not inherited from pytest --npu-sanitize
        out: dict[str, str] = clean_env(**env)
        out.pop("ASCEND_MOCK_SANITIZE", None)
        return out

    proc = _run(
        run_python,
        unset_env,
        REPORT
        + textwrap.dedent(
            r"""
        st = new(ll.aclrtCreateStream)
        d, h = new(ll.aclrtMalloc, 64, 0), new(ll.aclrtMallocHost, 64)
        ok(ll.aclrtMemcpyAsync(h, 64, d, 64, D2H, st))
        ok(mock.aclmockSanitizerHostAccess(ctypes.c_void_p(h), ctypes.c_size_t(64), 1))
        print(mock.aclmockSanitizerGetMode(), len(reports()), mock.aclmockTimingGetMode(),
              mock.aclmockProfIsActive())
        """
        ),
    )
    assert proc.stdout.split() == ["0", "0", "0", "0"]
    assert "sanitizer" not in proc.stderr


# -------------------------------------------------------------------------- dump


def test_dump_files_load_with_numpy(run_python: Any, clean_env: Any, tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    cfg = tmp_path / "dump.json"
    cfg.write_text(
        json.dumps(
            {
                "dump": {
                    "dump_path": str(tmp_path / "out"),
                    "dump_mode": "all",
                    "dump_list": [{"model_name": "net", "layer": ["softmax"]}],
                }
            }
        )
    )
    _run(
        run_python,
        clean_env,
        rf"""
        import numpy as np
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        d = new(ll.aclrtMalloc, x.nbytes, 0)
        ok(ll.aclrtMemcpy(d, x.nbytes, x.ctypes.data, x.nbytes, H2D))
        ok(ll.aclmdlInitDump())
        ok(ll.aclmdlSetDump({str(cfg)!r}.encode()))
        dims = (ctypes.c_int64 * 8)(2, 3, 4)
        launch("softmax", 1000, [Arg(d, x.nbytes, 3, C["ACL_FLOAT"], 3, dims)], 0)
        launch("relu", 1000, [Arg(d, x.nbytes, 3, C["ACL_FLOAT"], 3, dims)], 0)
        ok(ll.aclrtSynchronizeStream(0))
        ok(ll.aclmdlFinalizeDump())
        ok(ll.aclrtFree(d))
        """,
    )
    (root,) = (tmp_path / "out").glob("mock_dump_*")
    index = json.loads((root / "index.json").read_text())
    assert [(e["op"], e["io"], e["index"]) for e in index] == [
        ("softmax", "input", 0),
        ("softmax", "output", 0),
    ]
    want = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for e in index:
        assert e["dtype"] == "float32" and e["shape"] == [2, 3, 4] and e["bytes"] == 96
        arr = np.load(root / e["file"])
        assert arr.dtype == np.float32 and arr.shape == (2, 3, 4)
        np.testing.assert_array_equal(arr, want)


# ---------------------------------------------------------------------- device log


def test_device_log_in_process(mock_loaded: Any) -> None:
    import ctypes

    from pyacl_rt.mock import mock_control

    mock = ctypes.CDLL(mock_control().path)
    ll = mock_loaded
    s = ll.scratch()
    assert ll.aclrtSetDevice(1) == 0
    try:
        assert ll.aclrtMalloc(s.uptr, 0, 0) != 0
        ll.recent_error_message()
        buf = ctypes.create_string_buffer(1 << 16)
        n = mock.aclmockGetDeviceLog(1, buf, len(buf))
        text = buf.value.decode()
        assert n == len(text) and "[device 1]" in text and "aclrtMalloc" in text
        assert text.startswith("[ERROR] RUNTIME(")
    finally:
        assert ll.aclrtResetDevice(1) == 0


# ------------------------------------------------------------------- kernel launches

KERNEL = r"""
import pathlib
KernelFn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                            ctypes.c_void_p)

class Param(ctypes.Structure):  # aclmockKernelParam
    _fields_ = [("size", ctypes.c_uint32), ("access", ctypes.c_uint32)]

class KernelDesc(ctypes.Structure):  # aclmockKernelDesc
    _fields_ = [
        ("version", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("name", ctypes.c_char_p),
        ("fn", KernelFn), ("userData", ctypes.c_void_p), ("numParams", ctypes.c_uint32),
        ("reserved0", ctypes.c_uint32), ("params", ctypes.POINTER(Param)),
        ("costNsPerBlock", ctypes.c_uint64), ("costFn", ctypes.c_void_p),
        ("reserved", ctypes.c_void_p * 4),
    ]

@KernelFn
def double(args, idx, dim, user):  # out[i] = 2 * in[i], one block
    a = ctypes.cast(args, ctypes.POINTER(ctypes.c_uint64))
    src = ctypes.cast(a[0], ctypes.POINTER(ctypes.c_float))
    dst = ctypes.cast(a[1], ctypes.POINTER(ctypes.c_float))
    for i in range(a[2]):
        dst[i] = 2.0 * src[i]
    return 0

params = (Param * 3)(Param(8, 1), Param(8, 2), Param(8, 0))  # in, out, n
desc = KernelDesc(1, 0, b"double", double, None, 3, 0, params, 40000, None)
ok(mock.aclmockRegisterKernelDesc(ctypes.byref(desc)), "register")
"""


def test_kernel_launch_is_seen_by_the_diagnostics(
    run_python: Any, clean_env: Any, tmp_path: Path
) -> None:
    """A kernel launch of a Python host twin with a declared cost: the model gives it
    latency + cost, the profile names it, and the sanitizer checks its declared
    pointer arguments (a read of its output on another stream races)."""
    from test_lowlevel_kernels import _device_elf

    elf = tmp_path / "kernels.o"
    elf.write_bytes(_device_elf(["double"]))
    body = KERNEL + textwrap.dedent(
        f"""
        ok(ll.aclrtBinaryLoadFromFile({str(elf)!r}.encode(), ll.ffi.NULL, s.uptr), "load")
        bin_ = int(s.uptr[0])
        ok(ll.aclrtBinaryGetFunction(bin_, b"double", s.uptr), "function")
        func = int(s.uptr[0])
        s1, s2 = new(ll.aclrtCreateStream), new(ll.aclrtCreateStream)
        n = 256
        src, dst = new(ll.aclrtMalloc, 4 * n, 0), new(ll.aclrtMalloc, 4 * n, 0)
        host = (ctypes.c_float * n)(*range(n))
        ok(ll.aclrtMemcpy(src, 4 * n, ctypes.addressof(host), 4 * n, H2D))
        a, b = new(ll.aclrtCreateEvent), new(ll.aclrtCreateEvent)
        prof_dir, all_devices = {str(tmp_path / "prof")!r}.encode(), ctypes.c_uint64(2**64 - 1)
        ok(mock.aclmockProfStart(prof_dir, all_devices, ctypes.c_uint64(0)))
        block = (ctypes.c_uint64 * 3)(src, dst, n)
        ok(ll.aclrtRecordEvent(a, s1))
        ok(ll.aclrtLaunchKernelWithHostArgs(func, 1, s1, ll.ffi.NULL, ctypes.addressof(block), 24,
                                            ll.ffi.NULL, 0), "launch")
        ok(ll.aclrtRecordEvent(b, s1))
        mock.aclmockSetNextTaskTag(b"reader.py:7")
        ok(ll.aclrtMemcpyAsync(ctypes.addressof(host), 4 * n, dst, 4 * n, D2H, s2))
        ok(ll.aclrtSynchronizeDevice())
        out = ctypes.create_string_buffer(4096)
        ok(mock.aclmockProfStop(out, ctypes.c_size_t(4096)))
        fs = ll.ffi.new("float *")
        ok(ll.aclrtEventElapsedTime(fs, a, b))
        print(json.dumps({{"ms": fs[0], "folder": out.value.decode(),
                          "reports": mock.aclmockSanitizerGetReportCount()}}))
        """
    )
    proc = _run(run_python, clean_env, body, ASCEND_MOCK_TIMING="virtual", ASCEND_MOCK_SANITIZE="1")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    # A2 model: launch_ns 4000 (the second record's launch) + latency 2000 + 40000 per block
    assert res["ms"] == pytest.approx(0.046, abs=1e-6)
    trace = json.loads((Path(res["folder"]) / "trace.json").read_text())
    kernels = [e for e in _validate_chrome_trace(trace) if e.get("cat") == "kernel"]
    assert [e["name"] for e in kernels] == ["double"]
    assert kernels[0]["dur"] == pytest.approx(42.0)  # latency + cost, in us
    assert res["reports"] == 1
    assert '"double"' in proc.stderr and "reader.py:7" in proc.stderr
