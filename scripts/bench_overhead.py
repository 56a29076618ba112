#!/usr/bin/env python3
"""Per-call overhead of pyacl_rt.lowlevel vs ctypes vs a hand-written C extension.

    python scripts/bench_overhead.py [--number N] [--repeat R] [--json]

All three call the *same* library instance (the bundled mock, loaded once): the C
extension baseline is compiled in this run from the C string below with the system
compiler, against the bundled mock's headers (``python -m pyacl_rt.mock --cflags --libs``),
as ``METH_O`` / ``METH_FASTCALL`` functions returning an int. Like pyacl_rt.lowlevel (and
cffi in general) the baseline releases the GIL around each call; a second baseline that
keeps the GIL is shown for reference.

Reported: the median over ``--repeat`` timeit runs of the per-call time in ns, and the ratios
lowlevel / C-ext (target <= 1.3) and ctypes / lowlevel (target >= 2). The numbers include
the mock's own cost of each call, identical for all three columns.

Hook for Pythonic hot paths: add a statement to :data:`CASES` (``pythonic=``) or register
a callable with ``pyacl_rt.lowlevel.register_hot_path(case_name, fn)``; it is timed as
``fn()`` in an extra column.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import timeit
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("PYACL_RT_BACKEND", "mock")

from pyacl_rt import lowlevel as ll
from pyacl_rt import mock as pmock
from pyacl_rt._abi_data import CONSTANTS

CEXT_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "acl/acl.h"

#define NOGIL(call) do { Py_BEGIN_ALLOW_THREADS call; Py_END_ALLOW_THREADS } while (0)

static PyObject *set_device(PyObject *self, PyObject *arg) {
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred()) return NULL;
    aclError rc;
    NOGIL(rc = aclrtSetDevice((int32_t)d));
    return PyLong_FromLong(rc);
}
static PyObject *get_device(PyObject *self, PyObject *unused) {
    int32_t d = -1;
    aclError rc;
    NOGIL(rc = aclrtGetDevice(&d));
    return PyLong_FromLong(rc == ACL_SUCCESS ? d : -(long)rc);
}
static PyObject *stream_query(PyObject *self, PyObject *arg) {
    void *s = PyLong_AsVoidPtr(arg);
    if (s == NULL && PyErr_Occurred()) return NULL;
    aclrtStreamStatus st = 0;
    aclError rc;
    NOGIL(rc = aclrtStreamQuery((aclrtStream)s, &st));
    return PyLong_FromLong(rc == ACL_SUCCESS ? (long)st : -(long)rc);
}
static PyObject *record_event(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) { PyErr_SetString(PyExc_TypeError, "2 args"); return NULL; }
    void *e = PyLong_AsVoidPtr(args[0]);
    void *s = PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred()) return NULL;
    aclError rc;
    NOGIL(rc = aclrtRecordEvent((aclrtEvent)e, (aclrtStream)s));
    return PyLong_FromLong(rc);
}
static PyObject *memcpy_async(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 6) { PyErr_SetString(PyExc_TypeError, "6 args"); return NULL; }
    void *dst = PyLong_AsVoidPtr(args[0]);
    size_t dmax = PyLong_AsSize_t(args[1]);
    void *src = PyLong_AsVoidPtr(args[2]);
    size_t cnt = PyLong_AsSize_t(args[3]);
    long kind = PyLong_AsLong(args[4]);
    void *s = PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred()) return NULL;
    aclError rc;
    NOGIL(rc = aclrtMemcpyAsync(dst, dmax, src, cnt, (aclrtMemcpyKind)kind, (aclrtStream)s));
    return PyLong_FromLong(rc);
}
/* same, GIL held */
static PyObject *set_device_gil(PyObject *self, PyObject *arg) {
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(aclrtSetDevice((int32_t)d));
}
static PyObject *get_device_gil(PyObject *self, PyObject *unused) {
    int32_t d = -1;
    aclError rc = aclrtGetDevice(&d);
    return PyLong_FromLong(rc == ACL_SUCCESS ? d : -(long)rc);
}
static PyObject *stream_query_gil(PyObject *self, PyObject *arg) {
    void *s = PyLong_AsVoidPtr(arg);
    if (s == NULL && PyErr_Occurred()) return NULL;
    aclrtStreamStatus st = 0;
    aclError rc = aclrtStreamQuery((aclrtStream)s, &st);
    return PyLong_FromLong(rc == ACL_SUCCESS ? (long)st : -(long)rc);
}
static PyObject *record_event_gil(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) { PyErr_SetString(PyExc_TypeError, "2 args"); return NULL; }
    void *e = PyLong_AsVoidPtr(args[0]);
    void *s = PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromLong(aclrtRecordEvent((aclrtEvent)e, (aclrtStream)s));
}
static PyObject *memcpy_async_gil(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 6) { PyErr_SetString(PyExc_TypeError, "6 args"); return NULL; }
    void *dst = PyLong_AsVoidPtr(args[0]);
    size_t dmax = PyLong_AsSize_t(args[1]);
    void *src = PyLong_AsVoidPtr(args[2]);
    size_t cnt = PyLong_AsSize_t(args[3]);
    long kind = PyLong_AsLong(args[4]);
    void *s = PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromLong(aclrtMemcpyAsync(dst, dmax, src, cnt, (aclrtMemcpyKind)kind,
                                            (aclrtStream)s));
}

static PyMethodDef methods[] = {
    {"set_device", set_device, METH_O, NULL},
    {"get_device", get_device, METH_NOARGS, NULL},
    {"stream_query", stream_query, METH_O, NULL},
    {"record_event", (PyCFunction)(void (*)(void))record_event, METH_FASTCALL, NULL},
    {"memcpy_async", (PyCFunction)(void (*)(void))memcpy_async, METH_FASTCALL, NULL},
    {"set_device_gil", set_device_gil, METH_O, NULL},
    {"get_device_gil", get_device_gil, METH_NOARGS, NULL},
    {"stream_query_gil", stream_query_gil, METH_O, NULL},
    {"record_event_gil", (PyCFunction)(void (*)(void))record_event_gil, METH_FASTCALL, NULL},
    {"memcpy_async_gil", (PyCFunction)(void (*)(void))memcpy_async_gil, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_bench_cext", NULL, -1, methods};
PyMODINIT_FUNC PyInit__bench_cext(void) { return PyModule_Create(&mod); }
"""


def build_cext(workdir: Path) -> Any:
    """Compile CEXT_SOURCE against the bundled mock and import it."""
    src = workdir / "_bench_cext.c"
    src.write_text(CEXT_SOURCE)
    out = workdir / ("_bench_cext" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    cmd = [
        *cc, "-shared", "-fPIC", "-O2", "-std=c11", "-D_GNU_SOURCE",
        "-I" + sysconfig.get_paths()["include"], *pmock.cflags(),
        str(src), "-o", str(out), *pmock.libs(),
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    spec = importlib.util.spec_from_file_location("_bench_cext", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Case:
    """One benchmarked call. Statements run with the namespace built in :func:`main`."""

    name: str
    lowlevel: str
    ctypes: str
    cext: str
    cext_gil: str
    pythonic: str | None = None  # hook: a statement through the Pythonic API, when it exists
    sync_after: bool = False  # enqueues work: synchronize the stream after each timeit run


CASES: list[Case] = [
    Case("aclrtSetDevice", "ll_set(0)", "ct_set(0)", "cx.set_device(0)", "cx.set_device_gil(0)"),
    Case(
        "aclrtGetDevice (+out param)",
        "ll_get(i32); i32[0]",
        "ct_get(ct_i32_ref); ct_i32.value",
        "cx.get_device()",
        "cx.get_device_gil()",
    ),
    Case(
        "aclrtStreamQuery (+out param)",
        "ll_query(stream, i32); i32[0]",
        "ct_query(stream, ct_i32_ref); ct_i32.value",
        "cx.stream_query(stream)",
        "cx.stream_query_gil(stream)",
    ),
    Case(
        "aclrtRecordEvent",
        "ll_record(event, stream)",
        "ct_record(event, stream)",
        "cx.record_event(event, stream)",
        "cx.record_event_gil(event, stream)",
        sync_after=True,
    ),
    Case(
        "aclrtMemcpyAsync (8 B H2D)",
        "ll_copy(dev, 64, host, 8, H2D, stream)",
        "ct_copy(dev, 64, host, 8, H2D, stream)",
        "cx.memcpy_async(dev, 64, host, 8, H2D, stream)",
        "cx.memcpy_async_gil(dev, 64, host, 8, H2D, stream)",
        sync_after=True,
    ),
]


def time_interleaved(
    stmts: dict[str, str], ns: dict[str, Any], number: int, repeat: int, sync: Any
) -> dict[str, float]:
    """Median per-call time in ns of each statement over ``repeat`` rounds of ``number``
    calls. The variants are interleaved within each round, so that background load on
    the machine hits all of them alike."""
    timers = {k: timeit.Timer(v, globals=ns) for k, v in stmts.items()}
    for t in timers.values():
        t.timeit(max(1, number // 10))  # warm-up
        sync()
    runs: dict[str, list[float]] = {k: [] for k in stmts}
    for _ in range(repeat):
        for k, t in timers.items():
            runs[k].append(t.timeit(number) / number * 1e9)
            sync()
    return {k: statistics.median(v) for k, v in runs.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--number", type=int, default=100_000, help="calls per timeit run")
    ap.add_argument("--repeat", type=int, default=7, help="timeit runs (median reported)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)

    sel = ll.load()
    if not ll.is_mock_library():
        print(
            "bench_overhead: the loaded library is not the bundled mock; the C-extension "
            "baseline links the mock, so run with PYACL_RT_BACKEND=mock",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="pyacl_bench_") as tmp:
        cx = build_cext(Path(tmp))

        s = ll.scratch()
        assert ll.aclrtSetDevice(0) == 0
        assert ll.aclrtCreateStream(s.uptr) == 0
        stream = int(s.uptr[0])
        assert ll.aclrtCreateEvent(s.uptr) == 0
        event = int(s.uptr[0])
        assert ll.aclrtMalloc(s.uptr, 64, 0) == 0
        dev = int(s.uptr[0])
        assert ll.aclrtMallocHost(s.uptr, 64) == 0
        host = int(s.uptr[0])

        dll = ctypes.CDLL(sel.path)  # same handle as the one lowlevel loaded
        c_int32, c_void_p, c_size_t = ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t
        ptr_i32 = ctypes.POINTER(c_int32)
        sigs: dict[str, tuple[Any, ...]] = {
            "aclrtSetDevice": (c_int32,),
            "aclrtGetDevice": (ptr_i32,),
            "aclrtStreamQuery": (c_void_p, ptr_i32),
            "aclrtRecordEvent": (c_void_p, c_void_p),
            "aclrtMemcpyAsync": (c_void_p, c_size_t, c_void_p, c_size_t, c_int32, c_void_p),
        }
        for fname, argtypes in sigs.items():
            f = getattr(dll, fname)
            f.argtypes = argtypes
            f.restype = c_int32
        ct_i32 = c_int32()

        ns: dict[str, Any] = {
            "ll_set": ll.aclrtSetDevice,
            "ll_get": ll.aclrtGetDevice,
            "ll_query": ll.aclrtStreamQuery,
            "ll_record": ll.aclrtRecordEvent,
            "ll_copy": ll.aclrtMemcpyAsync,
            "ct_set": dll.aclrtSetDevice,
            "ct_get": dll.aclrtGetDevice,
            "ct_query": dll.aclrtStreamQuery,
            "ct_record": dll.aclrtRecordEvent,
            "ct_copy": dll.aclrtMemcpyAsync,
            "ct_i32": ct_i32,
            "ct_i32_ref": ctypes.byref(ct_i32),
            "cx": cx,
            "i32": s.i32,
            "stream": stream,
            "event": event,
            "dev": dev,
            "host": host,
            "H2D": CONSTANTS["ACL_MEMCPY_HOST_TO_DEVICE"],
        }
        # sanity: every variant really succeeds
        for stmt in ("ll_set(0)", "ct_set(0)", "cx.set_device(0)"):
            assert eval(stmt, ns) == 0, stmt
        assert cx.get_device() == 0 and ll.aclrtGetDevice(s.i32) == 0 and s.i32[0] == 0
        assert ll.aclrtMemcpyAsync(dev, 64, host, 8, ns["H2D"], stream) == 0
        assert cx.memcpy_async(dev, 64, host, 8, ns["H2D"], stream) == 0

        def sync() -> None:
            assert ll.aclrtSynchronizeStream(stream) == 0

        results = []
        for case in CASES:
            sync_fn = sync if case.sync_after else (lambda: None)
            stmts = {
                "lowlevel": case.lowlevel,
                "ctypes": case.ctypes,
                "cext": case.cext,
                "cext_gil": case.cext_gil,
            }
            hot = ll.HOT_PATHS.get(case.name)
            if case.pythonic:
                stmts["pythonic"] = case.pythonic
            elif hot is not None:
                ns["_hot"] = hot
                stmts["pythonic"] = "_hot()"
            row: dict[str, Any] = {"call": case.name}
            row.update(time_interleaved(stmts, ns, args.number, args.repeat, sync_fn))
            row["ll_over_cext"] = row["lowlevel"] / row["cext"]
            row["ctypes_over_ll"] = row["ctypes"] / row["lowlevel"]
            results.append(row)

        sync()
        ll.aclrtDestroyEvent(event)
        ll.aclrtFree(dev)
        ll.aclrtFreeHost(host)
        ll.aclrtDestroyStream(stream)

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"per-call time, median of {args.repeat} x {args.number:,} calls (ns); library: {sel.path}"
    )
    hdr = (
        f"{'call':32} {'lowlevel':>9} {'ctypes':>9} {'C-ext':>9} {'C-ext+GIL':>10}"
        f" {'ll/C-ext':>9} {'ctypes/ll':>10}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        print(
            f"{r['call']:32} {r['lowlevel']:9.0f} {r['ctypes']:9.0f} {r['cext']:9.0f} "
            f"{r['cext_gil']:10.0f} {r['ll_over_cext']:9.2f} {r['ctypes_over_ll']:10.2f}"
            + (f"   pythonic {r['pythonic']:.0f}" if "pythonic" in r else "")
        )
    worst = max(r["ll_over_cext"] for r in results)
    least = min(r["ctypes_over_ll"] for r in results)
    print(
        f"targets: lowlevel <= 1.3x C-ext (worst {worst:.2f}: "
        f"{'met' if worst <= 1.3 else 'MISSED'}); ctypes >= 2x lowlevel (least {least:.2f}: "
        f"{'met' if least >= 2 else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
