#!/usr/bin/env python3
"""Host cost of one kernel launch: Pythonic ``pyacl_rt.launch`` and the raw layer against a
hand-written C extension making the same ``aclrtLaunchKernelWithConfig`` call.

    python scripts/bench_launch.py [--number N] [--repeat R] [--stat min|median] [--json]

The kernel is ``vector_add`` (3 device pointers + 1 uint32) of the host twin in
``examples/kernels/vector_add_twin.c``, built in this run and loaded on the bundled mock
(1 block over 16 floats, so the twin's own work is tiny). Every variant launches it on the
same stream through an argument list (``aclrtArgsHandle``) of its own and pays the mock's
cost of each call it makes; each timed statement makes two launches with two different
argument sets (other buffers, another count), so that every argument changes at every
launch and every variant updates all four (no variant profits from skipping unchanged
values):

``C-ext``     baseline: a C extension compiled in this run (source below) with
              ``launch(func, stream, x, y, z, n)``: converts the four Python ints
              (``PyLong_AsUnsignedLongLong``, range-checked count), then with the GIL
              released ``aclrtKernelArgsParaUpdate`` x 4, ``aclrtKernelArgsFinalize`` and
              ``aclrtLaunchKernelWithConfig`` (function pointers from ``dlsym`` on the
              loaded library).
``lowlevel``  the raw layer: ``lowlevel.fast.launch_with_args(func, 1, stream, 0, args,
              plan, (x, y, z, n))`` (the same calls from C, plain ints).
``cffi``      (information, no target) the same six calls as ``lowlevel`` cffi functions.
``pythonic``  ``pyacl_rt.launch(stream, LaunchConfig(1), kernel, dx, dy, dz,
              numpy.uint32(n))`` with DeviceBuffers: the pooled packing plan of the
              argument signature, the binary and context checks, and
              ``lowlevel.fast.launch_objects`` (each buffer's address and stream check,
              each scalar's bytes, then the same calls as ``lowlevel``).

Targets (issue 15): pythonic / C-ext <= 2.5, lowlevel / C-ext <= 1.15. The variants are
interleaved within each round; each figure is the minimum (default) or median over
``--repeat`` rounds of ``--number`` statements; the stream is synchronized (untimed)
after each run. Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Any

import numpy as np

import pyacl_rt as npu
from pyacl_rt import lowlevel as ll
from pyacl_rt import mock as pmock

REPO = Path(__file__).resolve().parent.parent
TWIN = REPO / "examples" / "kernels" / "vector_add_twin.c"
TARGETS = {"pythonic": 2.5, "lowlevel": 1.15}

CEXT_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include "acl/acl.h"

typedef aclError (*init_t)(aclrtFuncHandle, aclrtArgsHandle *);
typedef aclError (*append_t)(aclrtArgsHandle, void *, size_t, aclrtParamHandle *);
typedef aclError (*update_t)(aclrtArgsHandle, aclrtParamHandle, void *, size_t);
typedef aclError (*finalize_t)(aclrtArgsHandle);
typedef aclError (*launch_t)(aclrtFuncHandle, uint32_t, aclrtStream, aclrtLaunchKernelCfg *,
                             aclrtArgsHandle, void *);

static init_t p_init;
static append_t p_append;
static update_t p_update;
static finalize_t p_finalize;
static launch_t p_launch;
static aclrtArgsHandle g_args;
static aclrtParamHandle g_params[4];

static PyObject *init(PyObject *self, PyObject *path)
{
    void *h = dlopen(PyUnicode_AsUTF8(path), RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) {
        return PyErr_Format(PyExc_OSError, "dlopen: %s", dlerror());
    }
    p_init = (init_t)dlsym(h, "aclrtKernelArgsInit");
    p_append = (append_t)dlsym(h, "aclrtKernelArgsAppend");
    p_update = (update_t)dlsym(h, "aclrtKernelArgsParaUpdate");
    p_finalize = (finalize_t)dlsym(h, "aclrtKernelArgsFinalize");
    p_launch = (launch_t)dlsym(h, "aclrtLaunchKernelWithConfig");
    if (!p_init || !p_append || !p_update || !p_finalize || !p_launch) {
        return PyErr_Format(PyExc_OSError, "missing kernel symbols");
    }
    Py_RETURN_NONE;
}

/* prepare(func): the extension's own argument list: 3 pointers + 1 uint32 */
static PyObject *prepare(PyObject *self, PyObject *f)
{
    aclrtFuncHandle func = PyLong_AsVoidPtr(f);
    uint64_t zero = 0;
    aclError rc = p_init(func, &g_args);
    for (int i = 0; rc == 0 && i < 4; i++) {
        rc = p_append(g_args, &zero, i < 3 ? 8 : 4, &g_params[i]);
    }
    if (rc == 0) {
        rc = p_finalize(g_args);
    }
    if (rc) {
        return PyErr_Format(PyExc_RuntimeError, "prepare failed: %d", rc);
    }
    Py_RETURN_NONE;
}

/* launch(func, stream, x, y, z, n): what a hand-written extension does per launch */
static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "launch(func, stream, x, y, z, n)");
        return NULL;
    }
    void *func = PyLong_AsVoidPtr(args[0]);
    void *stream = PyLong_AsVoidPtr(args[1]);
    uint64_t p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = PyLong_AsUnsignedLongLong(args[2 + i]);
    }
    unsigned long n = PyLong_AsUnsignedLong(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (n > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "n does not fit in 32 bits");
        return NULL;
    }
    uint32_t n32 = (uint32_t)n;
    aclError rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; rc == 0 && i < 3; i++) {
        rc = p_update(g_args, g_params[i], &p[i], 8);
    }
    if (rc == 0) rc = p_update(g_args, g_params[3], &n32, 4);
    if (rc == 0) rc = p_finalize(g_args);
    if (rc == 0) rc = p_launch(func, 1, stream, NULL, g_args, NULL);
    Py_END_ALLOW_THREADS
    if (rc) {
        return PyErr_Format(PyExc_RuntimeError, "launch failed: %d", rc);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, NULL},
    {"prepare", prepare, METH_O, NULL},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_bench_launch_cext", NULL, -1, methods};
PyMODINIT_FUNC PyInit__bench_launch_cext(void) { return PyModule_Create(&mod); }
"""


def _cc() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def build_cext(workdir: Path, library: str) -> Any:
    """Compile CEXT_SOURCE against the bundled mock's headers and import it."""
    src = workdir / "_bench_launch_cext.c"
    src.write_text(CEXT_SOURCE)
    out = workdir / ("_bench_launch_cext" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    cmd = [
        *_cc(), "-shared", "-fPIC", "-O2", "-std=c11", "-D_GNU_SOURCE",
        "-I" + sysconfig.get_paths()["include"], *pmock.cflags(),
        str(src), "-o", str(out), "-ldl",
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    spec = importlib.util.spec_from_file_location("_bench_launch_cext", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.init(library)
    return module


def build_twin(workdir: Path) -> Path:
    so = workdir / "vector_add.so"
    subprocess.run(
        [*_cc(), "-shared", "-fPIC", *pmock.cflags(), str(TWIN), "-o", str(so)], check=True
    )
    return so


def raw_plan(func: int) -> tuple[int, bytearray]:
    """An argument list for lowlevel.fast.launch_with_args, built with cffi calls."""
    import struct

    s = ll.scratch()
    ll.check(ll.aclrtKernelArgsInit(func, s.uptr), "aclrtKernelArgsInit")
    args = int(s.uptr[0])
    zero = ll.ffi.new("uint64_t *")
    zaddr = int(ll.ffi.cast("uintptr_t", zero))
    plan = bytearray()
    for size in (8, 8, 8, 4):
        ll.check(ll.aclrtKernelArgsAppend(args, zaddr, size, s.uptr), "aclrtKernelArgsAppend")
        plan += struct.pack("<QII8s", int(s.uptr[0]), size, 0, bytes(8))
    return args, plan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--number", type=int, default=500, help="statements per timed run")
    ap.add_argument("--repeat", type=int, default=25, help="interleaved rounds")
    ap.add_argument("--stat", choices=("min", "median"), default="min")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    opts = ap.parse_args(argv)
    stat = min if opts.stat == "min" else statistics.median

    ll.load()
    if not ll.is_mock_library():
        print("bench_launch: needs the bundled mock (PYACL_RT_BACKEND=mock)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cx = build_cext(work, ll.selection().path)
        code = npu.ObjectCode.from_file(build_twin(work))
    kernel = code.get_kernel("vector_add")
    stream = npu.Stream()
    cfg = npu.LaunchConfig(1)
    bufs = [npu.DeviceBuffer(64, stream=stream) for _ in range(6)]
    for b in bufs:
        b.memset(0)
    x1, y1, z1, x2, y2, z2 = bufs
    n1, n2 = np.uint32(16), np.uint32(15)
    p = [b.ptr for b in bufs]
    func, sh = kernel.handle, stream.resolved_handle
    cx.prepare(func)
    rargs, rplan = raw_plan(func)
    v1, v2 = (p[0], p[1], p[2], 16), (p[3], p[4], p[5], 15)

    # the cffi variant: the same six calls, values written into preallocated cells
    cargs, cplan = raw_plan(func)
    import struct

    cph = [struct.unpack_from("<Q", cplan, 24 * i)[0] for i in range(4)]
    cells = ll.ffi.new("uint64_t[8]")
    caddr = [int(ll.ffi.cast("uintptr_t", cells + i)) for i in range(8)]
    for i, v in enumerate((*v1, *v2)):
        cells[i] = v

    ns: dict[str, Any] = {
        "launch": npu.launch, "stream": stream, "cfg": cfg, "k": kernel,
        "x1": x1, "y1": y1, "z1": z1, "x2": x2, "y2": y2, "z2": z2, "n1": n1, "n2": n2,
        "cx": cx.launch, "func": func, "sh": sh, "p": p,
        "fx": ll.fast.launch_with_args, "rargs": rargs, "rplan": rplan, "v1": v1, "v2": v2,
        "upd": ll.lib.aclrtKernelArgsParaUpdate, "fin": ll.lib.aclrtKernelArgsFinalize,
        "lcfg": ll.lib.aclrtLaunchKernelWithConfig, "NULL": ll.ffi.NULL,
        "cargs": cargs, "cph": cph, "ca": caddr, "check": ll.check,
    }  # fmt: skip
    cffi_lines = []
    for j in range(2):
        for i in range(4):
            cffi_lines.append(f"upd(cargs, cph[{i}], ca[{j * 4 + i}], {8 if i < 3 else 4})")
        cffi_lines += ["fin(cargs)", "lcfg(func, 1, sh, NULL, cargs, 0)"]
    stmts = {
        "C-ext": "cx(func, sh, p[0], p[1], p[2], 16)\ncx(func, sh, p[3], p[4], p[5], 15)",
        "lowlevel": "fx(func, 1, sh, 0, rargs, rplan, v1)\nfx(func, 1, sh, 0, rargs, rplan, v2)",
        "cffi": "\n".join(cffi_lines),
        "pythonic": (
            "launch(stream, cfg, k, x1, y1, z1, n1)\nlaunch(stream, cfg, k, x2, y2, z2, n2)"
        ),
    }
    timers = {k: timeit.Timer(v, globals=ns) for k, v in stmts.items()}
    runs: dict[str, list[float]] = {k: [] for k in stmts}
    for t in timers.values():  # warm-up (plans, caches)
        t.timeit(max(1, opts.number // 10))
        stream.synchronize()
    for _ in range(opts.repeat):
        for k, t in timers.items():
            runs[k].append(t.timeit(opts.number) / (2 * opts.number) * 1e9)
            stream.synchronize()
    ns_per = {k: stat(v) for k, v in runs.items()}
    base = ns_per["C-ext"]
    print(f"kernel launch (vector_add, 3 pointers + 1 uint32), ns per launch ({opts.stat} of "
          f"{opts.repeat} x {opts.number} x 2):")  # fmt: skip
    ok = True
    results: dict[str, Any] = {"ns": ns_per, "ratios": {}}
    for k, v in ns_per.items():
        ratio = v / base
        results["ratios"][k] = ratio
        target = TARGETS.get(k)
        verdict = ""
        if target is not None:
            passed = ratio <= target
            ok &= passed
            verdict = f"target <= {target}: {'PASS' if passed else 'FAIL'}"
        elif k != "C-ext":
            verdict = "(information)"
        print(f"  {k:9s} {v:9.0f} ns   x{ratio:5.2f} of C-ext   {verdict}")
    if opts.json:
        print(json.dumps(results))
    for b in bufs:
        b.close()
    stream.synchronize()
    code.close()
    stream.close()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
