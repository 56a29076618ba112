#!/usr/bin/env python3
"""Benchmark of IPC memory in the mock libascendcl.so: import time and copy bandwidth.

    python scripts/bench_ipc.py [--lib-dir DIR] [--size-mib M] [--reps R] [--json]

A small C driver (embedded below) is compiled in this run against the mock's public
headers and linked to a mock ``libascendcl.so`` (found as ``scripts/bench_mock.py`` finds
it). The driver is the exporter; it starts itself again as the importer, a second process
(spawned, never forked after ``aclInit``), and both print ``RESULT`` lines.

Measured (device 0):

* **first contact** (informational): the importer's first import (of the small buffer
  below), which also connects to the exporter's broker and reserves the importer's
  device address space; on a loaded machine the scheduler's wake-up of the exporter's
  broker thread dominates it;
* **import of a 1 GiB exported buffer** (``aclrtIpcMemImportByKey`` of a 1 GiB
  ``ACL_MEM_MALLOC_HUGE_ONLY`` allocation, in ms): ``--reps`` imports (each closed before
  the next), median / first / max; the importer reads the first and last bytes to check
  that the mapping is the exporter's memory (mapped, not copied: the time does not grow
  with the size);
* **device-to-device copy between processes** at ``--size-mib`` MiB: ``aclrtMemcpy``
  (D2D) from the imported buffer into the importer's own device memory, and from its own
  memory into the imported buffer, against the same copy between two device buffers of
  the importer itself, measured in the same run, alternating (median of ``--reps``; all
  buffers pre-faulted).

The same again through pyacl_rt's Python API (``--no-python`` skips it): this process
exports a 1 GiB ``DeviceBuffer`` (``buf.ipc_handle()``) and a ``--size-mib`` one; a
spawned importer times ``DeviceBuffer.from_ipc_handle`` of the 1 GiB handle (each open
closed before the next, so every one is a real ``aclrtIpcMemImportByKey``), checks
zero-copy both ways (the importer writes, synchronizes and signals, the exporter reads
the bytes; then the other way round) and times ``pyacl_rt.copy`` D2D from / into the
imported buffer against the same copy between two of its own buffers.

Targets: 1 GiB import < 5 ms (median); each cross-process copy >= 0.8x the in-process
copy; for both the C driver and the Python API. The exit status is 0 when all targets
are met, 1 otherwise. Timings depend on the machine and its load; nothing in the test
suite asserts on them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mock import compile_driver, find_library

IMPORT_TARGET_MS = 5.0
COPY_TARGET = 0.8  # x the same copy inside one process

DRIVER_C = r"""
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"

extern char **environ;

#define CHECK(expr)                                                                  \
    do {                                                                             \
        aclError rc_ = (expr);                                                       \
        if (rc_ != ACL_SUCCESS) {                                                    \
            const char *m_ = aclGetRecentErrMsg();                                   \
            fprintf(stderr, "%s failed: %d %s\n", #expr, (int)rc_, m_ ? m_ : "");    \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

#define GIB ((size_t)1 << 30)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static double copy_gbps(void *dst, const void *src, size_t n)
{
    double t = now_ms();
    CHECK(aclrtMemcpy(dst, n, src, n, ACL_MEMCPY_DEVICE_TO_DEVICE));
    return (double)n / ((now_ms() - t) / 1e3) / 1e9;
}

static int importer(const char *big_key, const char *src_key, size_t size, int reps)
{
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    /* first contact: connects to the exporter, reserves this process's device region */
    void *remote = NULL;
    double t = now_ms();
    CHECK(aclrtIpcMemImportByKey(&remote, src_key, 0));
    double contact = now_ms() - t;
    /* the 1 GiB imports */
    void *big = NULL;
    t = now_ms();
    CHECK(aclrtIpcMemImportByKey(&big, big_key, 0));
    double first = now_ms() - t;
    unsigned char edge[2] = {0, 0};
    CHECK(aclrtMemcpy(&edge[0], 1, big, 1, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(aclrtMemcpy(&edge[1], 1, (char *)big + GIB - 1, 1, ACL_MEMCPY_DEVICE_TO_HOST));
    if (edge[0] != 0xA1 || edge[1] != 0xA2) {
        fprintf(stderr, "the imported buffer is not the exporter's memory\n");
        return 3;
    }
    double *ms = calloc((size_t)reps, sizeof *ms);
    ms[0] = first;
    for (int i = 1; i < reps; i++) {
        CHECK(aclrtIpcMemClose(big_key));
        t = now_ms();
        CHECK(aclrtIpcMemImportByKey(&big, big_key, 0));
        ms[i] = now_ms() - t;
    }
    CHECK(aclrtIpcMemClose(big_key));
    double med = median(ms, reps), max = ms[reps - 1];

    /* copies between processes against the same copies inside this one */
    void *mine = NULL, *dst = NULL;
    CHECK(aclrtMalloc(&mine, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dst, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(mine, size, 7, size));
    CHECK(aclrtMemset(dst, size, 9, size));
    CHECK(aclrtMemcpy(dst, size, remote, size, ACL_MEMCPY_DEVICE_TO_DEVICE)); /* warm up */
    CHECK(aclrtMemcpy(remote, size, dst, size, ACL_MEMCPY_DEVICE_TO_DEVICE));
    double *rd = calloc((size_t)reps, sizeof *rd), *wr = calloc((size_t)reps, sizeof *wr);
    double *lr = calloc((size_t)reps, sizeof *lr), *lw = calloc((size_t)reps, sizeof *lw);
    for (int i = 0; i < reps; i++) {
        rd[i] = copy_gbps(dst, remote, size); /* read the other process's memory */
        lr[i] = copy_gbps(dst, mine, size);
        wr[i] = copy_gbps(remote, dst, size); /* write into it */
        lw[i] = copy_gbps(mine, dst, size);
    }
    printf("RESULT first_contact_ms %.4f\n", contact);
    printf("RESULT import_1gib_first_ms %.4f\n", first);
    printf("RESULT import_1gib_median_ms %.4f\n", med);
    printf("RESULT import_1gib_max_ms %.4f\n", max);
    printf("RESULT d2d_read_remote_gbps %.4f\n", median(rd, reps));
    printf("RESULT d2d_write_remote_gbps %.4f\n", median(wr, reps));
    printf("RESULT d2d_local_read_gbps %.4f\n", median(lr, reps));
    printf("RESULT d2d_local_write_gbps %.4f\n", median(lw, reps));
    fflush(stdout);
    CHECK(aclrtIpcMemClose(src_key));
    CHECK(aclrtFree(mine));
    CHECK(aclrtFree(dst));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "importer") == 0) {
        return importer(argv[2], argv[3], (size_t)atoll(argv[4]), atoi(argv[5]));
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s SIZE_MIB REPS\n", argv[0]);
        return 2;
    }
    size_t size = (size_t)atoll(argv[1]) << 20;
    int reps = atoi(argv[2]);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    void *big = NULL, *src = NULL;
    CHECK(aclrtMalloc(&big, GIB, ACL_MEM_MALLOC_HUGE_ONLY));
    unsigned char a = 0xA1, b = 0xA2;
    CHECK(aclrtMemcpy(big, 1, &a, 1, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy((char *)big + GIB - 1, 1, &b, 1, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMalloc(&src, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(src, size, 5, size));
    char big_key[65], src_key[65], size_s[32], reps_s[16];
    uint64_t any_pid = ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION;
    CHECK(aclrtIpcMemGetExportKey(big, GIB, big_key, sizeof big_key, any_pid));
    CHECK(aclrtIpcMemGetExportKey(src, size, src_key, sizeof src_key, any_pid));
    snprintf(size_s, sizeof size_s, "%zu", size);
    snprintf(reps_s, sizeof reps_s, "%d", reps);
    char *child_argv[] = {"/proc/self/exe", "importer", big_key, src_key, size_s, reps_s, NULL};
    pid_t pid;
    fflush(stdout);
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, child_argv, environ) != 0) {
        perror("posix_spawn");
        return 2;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(aclrtIpcMemClose(big_key));
    CHECK(aclrtIpcMemClose(src_key));
    CHECK(aclrtFree(big));
    CHECK(aclrtFree(src));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}
"""


def run_driver(exe: Path, size_mib: int, reps: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_")}
    out = subprocess.run(
        [str(exe), str(size_mib), str(reps)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    ).stdout
    results: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "RESULT":
            results[parts[1]] = float(parts[2])
    return results


# ----------------------------------------------------------- the Python API
GIB = 1 << 30


def _median(v: list[float]) -> float:
    return sorted(v)[len(v) // 2]


def _gbps(fn: Any, n: int) -> float:
    t = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t) / 1e9


def python_importer(conn: Any, size: int, reps: int) -> None:
    """The spawned importer of the Python section (sends its RESULT dict back)."""
    import pyacl_rt as npu

    npu.set_device(0)
    big_h, src_h = conn.recv()
    remote = npu.DeviceBuffer.from_ipc_handle(src_h)  # first contact
    ms: list[float] = []
    for _ in range(reps):
        t = time.perf_counter()
        big = npu.DeviceBuffer.from_ipc_handle(big_h)
        ms.append((time.perf_counter() - t) * 1e3)
        edge = bytes(big[:1].copy_to_host()) + bytes(big[GIB - 1 :].copy_to_host())
        if edge != b"\xa1\xa2":
            raise SystemExit("the imported buffer is not the exporter's memory")
        big.close()
    # zero-copy both ways: write here, the exporter reads; it writes, we read
    remote[:4096].fill(0x3C)  # synchronous: done on the device when it returns
    conn.send("written")
    if conn.recv() != "rewritten":
        raise SystemExit("protocol")
    seen_back = set(remote[4096:8192].copy_to_host()) == {0x4D}
    mine, dst = npu.DeviceBuffer(size), npu.DeviceBuffer(size)
    mine.fill(7)
    dst.fill(9)
    npu.copy(dst, remote)  # warm up
    npu.copy(remote, dst)
    rd, wr, lr, lw = [], [], [], []
    for _ in range(reps):
        rd.append(_gbps(lambda: npu.copy(dst, remote), size))
        lr.append(_gbps(lambda: npu.copy(dst, mine), size))
        wr.append(_gbps(lambda: npu.copy(remote, dst), size))
        lw.append(_gbps(lambda: npu.copy(mine, dst), size))
    for b in (remote, mine, dst):
        b.close()
    conn.send(
        {
            "import_1gib_median_ms": _median(ms),
            "import_1gib_first_ms": ms[0],
            "import_1gib_max_ms": max(ms),
            "zero_copy_back": 1.0 if seen_back else 0.0,
            "d2d_read_remote_gbps": _median(rd),
            "d2d_write_remote_gbps": _median(wr),
            "d2d_local_read_gbps": _median(lr),
            "d2d_local_write_gbps": _median(lw),
        }
    )


def run_python(size_mib: int, reps: int) -> dict[str, float]:
    """The Python section: this process exports, a spawned one imports."""
    import pyacl_rt as npu

    npu.set_device(0)
    size = size_mib << 20
    big = npu.DeviceBuffer(GIB)
    big[:1].fill(0xA1)
    big[GIB - 1 :].fill(0xA2)
    src = npu.DeviceBuffer(size)
    src.fill(5)
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=python_importer, args=(b, size, reps))
    p.start()
    a.send((big.ipc_handle(), src.ipc_handle()))
    if a.recv() != "written":
        raise SystemExit("protocol")
    seen = set(src[:4096].copy_to_host()) == {0x3C}  # the importer's write, zero-copy
    src[4096:8192].fill(0x4D)
    a.send("rewritten")
    r: dict[str, float] = a.recv()
    p.join(600)
    r["zero_copy"] = 1.0 if seen and r.pop("zero_copy_back") else 0.0
    npu.ipc_collect()
    return r


def evaluate(
    r: dict[str, float], size_mib: int, label: str = ""
) -> tuple[list[dict[str, Any]], bool]:
    checks: list[dict[str, Any]] = []
    if "zero_copy" in r:
        checks.append(
            {
                "name": f"{label}writes seen by the other process, both ways",
                "value": r["zero_copy"],
                "unit": "(1 = yes)",
                "target": "1",
                "ok": r["zero_copy"] == 1.0,
            }
        )
    med = r["import_1gib_median_ms"]
    checks.append(
        {
            "name": f"{label}import 1 GiB in another process (median)",
            "value": med,
            "unit": "ms",
            "target": f"< {IMPORT_TARGET_MS}",
            "ok": med < IMPORT_TARGET_MS,
        }
    )
    prefix = label
    for cross, local, what in (
        ("d2d_read_remote_gbps", "d2d_local_read_gbps", "D2D from the other process"),
        ("d2d_write_remote_gbps", "d2d_local_write_gbps", "D2D into the other process"),
    ):
        ratio = r[cross] / r[local] if r[local] > 0 else 0.0
        checks.append(
            {
                "name": f"{prefix}{what} @ {size_mib} MiB",
                "value": ratio,
                "unit": "x in-process",
                "target": f">= {COPY_TARGET}",
                "ok": ratio >= COPY_TARGET,
            }
        )
    return checks, all(c["ok"] for c in checks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib-dir", help="directory containing the mock libascendcl.so to measure")
    ap.add_argument("--size-mib", type=int, default=64, help="copy size in MiB (default 64)")
    ap.add_argument("--reps", type=int, default=9, help="repetitions, median taken (default 9)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--no-python", action="store_true", help="skip the pyacl_rt API section")
    args = ap.parse_args(argv)
    if args.size_mib < 1 or args.reps < 1:
        ap.error("--size-mib and --reps must be positive")

    with tempfile.TemporaryDirectory(prefix="bench_ipc_") as tmp:
        work = Path(tmp)
        lib, origin = find_library(args.lib_dir, work)
        exe = compile_driver(work, lib, DRIVER_C, "bench_ipc_driver")
        r = run_driver(exe, args.size_mib, args.reps)

    checks, ok = evaluate(r, args.size_mib, "C: ")
    py: dict[str, float] = {}
    if not args.no_python:
        py = run_python(args.size_mib, args.reps)
        py_checks, py_ok = evaluate(py, args.size_mib, "pyacl_rt: ")
        checks += py_checks
        ok = ok and py_ok
    if args.json:
        doc = {"library": str(lib), "origin": origin, "results": r, "python": py}
        print(json.dumps({**doc, "checks": checks, "ok": ok}, indent=2))
        return 0 if ok else 1

    print(f"library: {lib / 'libascendcl.so'} ({origin})")
    print(f"cpu count: {os.cpu_count()}")
    print()
    print(f"first contact with the exporter (ms): {r['first_contact_ms']:.3f}")
    print("import of a 1 GiB exported buffer (ms)")
    print(
        f"  median {r['import_1gib_median_ms']:.3f}   first {r['import_1gib_first_ms']:.3f}"
        f"   max {r['import_1gib_max_ms']:.3f}"
    )
    print()
    print(f"D2D copy @ {args.size_mib} MiB (GB/s)     other process   same process")
    print(f"  read   {r['d2d_read_remote_gbps']:21.2f} {r['d2d_local_read_gbps']:14.2f}")
    print(f"  write  {r['d2d_write_remote_gbps']:21.2f} {r['d2d_local_write_gbps']:14.2f}")
    if py:
        print()
        print("pyacl_rt API: DeviceBuffer.from_ipc_handle of a 1 GiB buffer (ms)")
        print(
            f"  median {py['import_1gib_median_ms']:.3f}   first {py['import_1gib_first_ms']:.3f}"
            f"   max {py['import_1gib_max_ms']:.3f}"
        )
        print(f"pyacl_rt.copy D2D @ {args.size_mib} MiB (GB/s)  other process   same process")
        print(f"  read   {py['d2d_read_remote_gbps']:21.2f} {py['d2d_local_read_gbps']:14.2f}")
        print(f"  write  {py['d2d_write_remote_gbps']:21.2f} {py['d2d_local_write_gbps']:14.2f}")
    print()
    for c in checks:
        print(
            f"  [{'PASS' if c['ok'] else 'FAIL'}] {c['name']}: "
            f"{c['value']:.3f} {c['unit']} (target {c['target']})"
        )
    print(f"overall: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
