#!/usr/bin/env python3
"""Benchmark of the mock libascendcl.so: task latency, event round trip, memcpy bandwidth.

    python scripts/bench_mock.py [--lib-dir DIR] [--iters N] [--size-mib M] [--reps R]
                                 [--isolation] [--json]

A small C driver (embedded below) is compiled in this run against the mock's public
headers and linked to a mock ``libascendcl.so``; it runs the measurements and prints
``RESULT`` lines that this script parses. The library is taken from, in order:

1. ``--lib-dir`` (a directory containing ``libascendcl.so``, e.g. a cmake build dir),
2. an existing cmake build in ``build/`` or ``mock_libascendcl/build/``,
3. the library bundled in the Python package (``pyacl_rt/_mock/lib64``),
4. otherwise a fresh build of ``mock_libascendcl`` (RelWithDebInfo, the project default)
   in a temporary directory.

Measured (device 0, one explicit stream):

* empty-task round trip: ``aclrtLaunchHostFunc(no-op)`` + ``aclrtSynchronizeStream``,
  median / p90 / min over ``--iters`` runs (enqueue-to-completion latency);
* a tiny async memset + synchronize (another "empty" task, through the memory path);
* event round trip: ``aclrtRecordEvent`` + ``aclrtSynchronizeEvent``;
* ``aclrtMemcpy`` bandwidth at ``--size-mib`` MiB for H2D, D2H, D2D, H2H (pinned host
  memory from ``aclrtMallocHost``) and H2D from pageable ``malloc`` memory, against a plain
  host ``memcpy`` of the same size between ``malloc`` buffers measured in the same run
  (median of ``--reps`` repetitions, all buffers pre-faulted, the order of the kinds
  rotated between repetitions).

Targets: every memcpy kind >= 0.8x host memcpy at 64 MiB; empty-task round trip median
< 20 us. The exit status is 0 when all targets are met, 1 otherwise. Timings depend on the
machine and its load; nothing in the test suite asserts on them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MOCK_SRC = ROOT / "mock_libascendcl"

MEMCPY_TARGET = 0.8  # x host memcpy
LATENCY_TARGET_US = 20.0

DRIVER_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"

#define CHECK(expr)                                                                  \
    do {                                                                             \
        aclError rc_ = (expr);                                                       \
        if (rc_ != ACL_SUCCESS) {                                                    \
            const char *m_ = aclGetRecentErrMsg();                                   \
            fprintf(stderr, "%s failed: %d %s\n", #expr, (int)rc_, m_ ? m_ : "");    \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report_latency(const char *name, double *s, int n)
{
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    printf("RESULT %s_median_us %.3f\n", name, s[n / 2]);
    printf("RESULT %s_p90_us %.3f\n", name, s[(n * 9) / 10]);
    printf("RESULT %s_min_us %.3f\n", name, s[0]);
}

static void noop(void *arg) { (void)arg; }

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    size_t size = (size_t)(argc > 2 ? atoi(argv[2]) : 64) << 20;
    int reps = argc > 3 ? atoi(argv[3]) : 9;
    double *s = malloc(sizeof(double) * (size_t)(iters > reps ? iters : reps));
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));
    aclrtEvent ev = NULL;
    CHECK(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC));
    void *small = NULL;
    CHECK(aclrtMalloc(&small, 64, ACL_MEM_MALLOC_HUGE_FIRST));

    /* warm-up */
    for (int i = 0; i < 200; i++) {
        CHECK(aclrtLaunchHostFunc(stream, noop, NULL));
        CHECK(aclrtSynchronizeStream(stream));
    }
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        CHECK(aclrtLaunchHostFunc(stream, noop, NULL));
        CHECK(aclrtSynchronizeStream(stream));
        s[i] = now_us() - t0;
    }
    report_latency("hostfunc_roundtrip", s, iters);
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        CHECK(aclrtMemsetAsync(small, 64, 0, 64, stream));
        CHECK(aclrtSynchronizeStream(stream));
        s[i] = now_us() - t0;
    }
    report_latency("memset64_roundtrip", s, iters);
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        CHECK(aclrtRecordEvent(ev, stream));
        CHECK(aclrtSynchronizeEvent(ev));
        s[i] = now_us() - t0;
    }
    report_latency("event_roundtrip", s, iters);

    /* bandwidth */
    void *pin_a = NULL, *pin_b = NULL, *dev_a = NULL, *dev_b = NULL;
    CHECK(aclrtMallocHost(&pin_a, size));
    CHECK(aclrtMallocHost(&pin_b, size));
    CHECK(aclrtMalloc(&dev_a, size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dev_b, size, ACL_MEM_MALLOC_HUGE_FIRST));
    char *host_a = malloc(size), *host_b = malloc(size);
    if (!s || !host_a || !host_b) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    memset(host_a, 1, size);
    memset(host_b, 2, size);
    memset(pin_a, 3, size);
    memset(pin_b, 4, size);
    CHECK(aclrtMemset(dev_a, size, 5, size));
    CHECK(aclrtMemset(dev_b, size, 6, size));

    enum { K_HOST, K_H2D, K_D2H, K_D2D, K_H2H, K_H2D_PAGEABLE, K_N };
    static const char *names[K_N] = {"host_memcpy", "h2d", "d2h", "d2d", "h2h", "h2d_pageable"};
    double *t[K_N];
    for (int k = 0; k < K_N; k++) t[k] = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        for (int j = 0; j < K_N; j++) {
            int k = (j + r) % K_N; /* rotate the order: no kind always runs first */
            void *dst = NULL, *src = NULL;
            aclrtMemcpyKind kind = ACL_MEMCPY_HOST_TO_DEVICE;
            switch (k) {
            case K_H2D: dst = dev_a; src = pin_a; kind = ACL_MEMCPY_HOST_TO_DEVICE; break;
            case K_D2H: dst = pin_b; src = dev_a; kind = ACL_MEMCPY_DEVICE_TO_HOST; break;
            case K_D2D: dst = dev_b; src = dev_a; kind = ACL_MEMCPY_DEVICE_TO_DEVICE; break;
            case K_H2H: dst = pin_b; src = pin_a; kind = ACL_MEMCPY_HOST_TO_HOST; break;
            case K_H2D_PAGEABLE: dst = dev_b; src = host_a; kind = ACL_MEMCPY_HOST_TO_DEVICE; break;
            default: break;
            }
            double t0 = now_us();
            if (k == K_HOST) {
                memcpy(host_b, host_a, size);
            } else {
                CHECK(aclrtMemcpy(dst, size, src, size, kind));
            }
            t[k][r] = now_us() - t0;
        }
    }
    for (int k = 0; k < K_N; k++) {
        qsort(t[k], (size_t)reps, sizeof(double), cmp_double);
        double med = t[k][reps / 2];
        printf("RESULT %s_gbps %.3f\n", names[k], (double)size / (med * 1e3));
        printf("RESULT %s_median_us %.1f\n", names[k], med);
        free(t[k]);
    }
    printf("RESULT size_bytes %zu\n", size);

    CHECK(aclrtFree(dev_a));
    CHECK(aclrtFree(dev_b));
    CHECK(aclrtFree(small));
    CHECK(aclrtFreeHost(pin_a));
    CHECK(aclrtFreeHost(pin_b));
    CHECK(aclrtDestroyEvent(ev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    free(host_a);
    free(host_b);
    free(s);
    return 0;
}
"""


def _has_lib(d: Path) -> bool:
    return (d / "libascendcl.so").is_file()


def find_library(lib_dir: str | None, workdir: Path) -> tuple[Path, str]:
    """Directory holding libascendcl.so and a description of where it came from."""
    if lib_dir:
        d = Path(lib_dir).resolve()
        if not _has_lib(d):
            raise SystemExit(f"bench_mock: {d} has no libascendcl.so")
        return d, "--lib-dir"
    for cand in (ROOT / "build", MOCK_SRC / "build", ROOT / "build" / "mock"):
        if _has_lib(cand):
            return cand, f"existing build {cand}"
    bundled = ROOT / "pyacl_rt" / "_mock" / "lib64"
    if _has_lib(bundled):
        return bundled, f"bundled {bundled}"
    if shutil.which("cmake") is None:
        raise SystemExit("bench_mock: no mock library found and cmake is not installed")
    build = workdir / "build"
    print(f"bench_mock: building mock_libascendcl in {build} ...", file=sys.stderr)
    subprocess.run(
        [
            "cmake",
            "-S",
            str(MOCK_SRC),
            "-B",
            str(build),
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            "-DMOCK_BUILD_TESTS=OFF",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        ["cmake", "--build", str(build), "-j2", "--target", "ascendcl"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return build, f"fresh build {build}"


def compile_driver(
    workdir: Path, lib: Path, source: str = DRIVER_C, name: str = "bench_driver"
) -> Path:
    """Compiles the C driver `source` into workdir/name, linked against lib's
    libascendcl.so (also used by bench_ipc.py)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit(f"{Path(sys.argv[0]).stem}: no C compiler (cc/gcc) found")
    src = workdir / f"{name}.c"
    src.write_text(source)
    exe = workdir / name
    cmd = [
        cc,
        "-O2",
        "-std=c11",
        "-D_GNU_SOURCE",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-I",
        str(MOCK_SRC / "include"),
        str(src),
        "-o",
        str(exe),
        "-L",
        str(lib),
        "-lascendcl",
        f"-Wl,-rpath,{lib}",
        "-lpthread",
    ]
    subprocess.run(cmd, check=True)
    return exe


def run_driver(
    exe: Path, iters: int, size_mib: int, reps: int, isolation: bool
) -> dict[str, float]:
    env = dict(os.environ)
    env["ASCEND_MOCK_ISOLATION"] = "1" if isolation else "0"
    env.pop("ASCEND_MOCK_FAULTS", None)
    env.pop("ASCEND_MOCK_DEVICE_LOST", None)
    out = subprocess.run(
        [str(exe), str(iters), str(size_mib), str(reps)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    results: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "RESULT":
            results[parts[1]] = float(parts[2])
    return results


def evaluate(r: dict[str, float], size_mib: int) -> tuple[list[dict[str, Any]], bool]:
    checks: list[dict[str, Any]] = []
    host = r["host_memcpy_gbps"]
    for kind in ("h2d", "d2h", "d2d", "h2h"):
        ratio = r[f"{kind}_gbps"] / host if host > 0 else 0.0
        checks.append(
            {
                "name": f"memcpy {kind.upper()} @ {size_mib} MiB",
                "value": ratio,
                "unit": "x host",
                "target": f">= {MEMCPY_TARGET}",
                "ok": ratio >= MEMCPY_TARGET,
            }
        )
    lat = r["hostfunc_roundtrip_median_us"]
    checks.append(
        {
            "name": "empty task round trip (median)",
            "value": lat,
            "unit": "us",
            "target": f"< {LATENCY_TARGET_US}",
            "ok": lat < LATENCY_TARGET_US,
        }
    )
    return checks, all(c["ok"] for c in checks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib-dir", help="directory containing the mock libascendcl.so to measure")
    ap.add_argument(
        "--iters", type=int, default=2000, help="latency samples per measurement (default 2000)"
    )
    ap.add_argument("--size-mib", type=int, default=64, help="memcpy size in MiB (default 64)")
    ap.add_argument(
        "--reps", type=int, default=9, help="memcpy repetitions, median taken (default 9)"
    )
    ap.add_argument("--isolation", action="store_true", help="run with ASCEND_MOCK_ISOLATION=1")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)
    if args.iters < 1 or args.size_mib < 1 or args.reps < 1:
        ap.error("--iters, --size-mib and --reps must be positive")

    with tempfile.TemporaryDirectory(prefix="bench_mock_") as tmp:
        work = Path(tmp)
        lib, origin = find_library(args.lib_dir, work)
        exe = compile_driver(work, lib)
        r = run_driver(exe, args.iters, args.size_mib, args.reps, args.isolation)

    checks, ok = evaluate(r, args.size_mib)
    if args.json:
        print(
            json.dumps(
                {
                    "library": str(lib),
                    "origin": origin,
                    "isolation": args.isolation,
                    "results": r,
                    "checks": checks,
                    "ok": ok,
                },
                indent=2,
            )
        )
        return 0 if ok else 1

    print(
        f"library: {lib / 'libascendcl.so'} ({origin}); "
        f"isolation {'on' if args.isolation else 'off'}"
    )
    print(f"cpu count: {os.cpu_count()}")
    print()
    print("latency (us)                 median      p90      min")
    for key, label in (
        ("hostfunc_roundtrip", "hostfunc + sync stream"),
        ("memset64_roundtrip", "memset 64 B + sync stream"),
        ("event_roundtrip", "record + sync event"),
    ):
        print(
            f"  {label:<26} {r[key + '_median_us']:8.2f} "
            f"{r[key + '_p90_us']:8.2f} {r[key + '_min_us']:8.2f}"
        )
    print()
    host = r["host_memcpy_gbps"]
    print(f"bandwidth @ {args.size_mib} MiB          GB/s   x host")
    for kind, label in (
        ("host_memcpy", "plain host memcpy"),
        ("h2d", "H2D (pinned)"),
        ("d2h", "D2H (pinned)"),
        ("d2d", "D2D"),
        ("h2h", "H2H (pinned)"),
        ("h2d_pageable", "H2D (pageable malloc)"),
    ):
        g = r[kind + "_gbps"]
        print(f"  {label:<26} {g:8.2f}   {g / host if host else 0:5.2f}")
    print()
    for c in checks:
        print(
            f"  [{'PASS' if c['ok'] else 'FAIL'}] {c['name']}: "
            f"{c['value']:.2f} {c['unit']} (target {c['target']})"
        )
    print(f"overall: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
