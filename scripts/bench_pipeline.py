#!/usr/bin/env python3
"""The seed's pipeline comparison on the mock's timing model (issue 17).

    python scripts/bench_pipeline.py [--lib-dir DIR] [--batches N] [--batch-kib K]
                                     [--kernel-us U] [--pace P] [--paced-batches N]
                                     [--target X] [--json]

Builds ``mock_libascendcl/tests/programs/pipeline.c`` (the C example) against the mock
and runs it twice:

1. ``ASCEND_MOCK_TIMING=virtual``: the modeled time of the naive loop (per batch:
   allocate, synchronous copies of pageable memory, compute, synchronize, copy back,
   free) against the preallocated two-stream pipeline (pinned memory, asynchronous
   H2D, compute, D2H per batch, one synchronization), same batches. The modeled times
   are deterministic: the same on every run and machine.
2. ``ASCEND_MOCK_TIMING=paced`` with ``pace`` P (wall time = P x modeled time, so that
   the host's real copies stay below the model): the same comparison in wall time,
   measured with a stopwatch.

Target: the pipelined version is at least ``--target`` (5) times faster in both, the
seed's "up to an order of magnitude". The library comes from ``--lib-dir`` (a CMake
build of mock_libascendcl), else the copy bundled in the Python package. Prints the
figures and PASS/FAIL; exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "mock_libascendcl" / "tests" / "programs" / "pipeline.c"
RESULT_RE = re.compile(r"^RESULT (.*)$", re.M)


def _flags(lib_dir: str | None) -> tuple[list[str], list[str]]:
    if lib_dir:
        lib = Path(lib_dir).resolve()
        include = ROOT / "mock_libascendcl" / "include"
        return [f"-I{include}"], [f"-L{lib}", f"-Wl,-rpath,{lib}", "-lascendcl"]
    from pyacl_rt import mock

    return mock.cflags(), mock.libs()


def build(workdir: Path, lib_dir: str | None) -> Path:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        sys.exit(f"bench_pipeline: no C compiler ({cc})")
    cflags, libs = _flags(lib_dir)
    exe = workdir / "pipeline"
    cmd = [cc, "-std=c11", "-O2", "-D_GNU_SOURCE", *cflags, str(SOURCE), *libs, "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def run(exe: Path, mode: str, args: list[str], model: str | None = None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_")}
    env["ASCEND_MOCK_TIMING"] = mode
    if model:
        env["ASCEND_MOCK_TIMING_MODEL"] = model
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=600)
    m = RESULT_RE.search(proc.stdout)
    if proc.returncode not in (0, 1) or m is None:
        sys.exit(
            f"bench_pipeline: {exe.name} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
        )
    out: dict[str, float] = {}
    for item in m.group(1).split():
        key, _, value = item.partition("=")
        with contextlib.suppress(ValueError):
            out[key] = float(value)
    if "wrong results" in proc.stdout:
        sys.exit("bench_pipeline: the pipeline produced wrong results")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--lib-dir", help="directory of a mock libascendcl.so (a CMake build)")
    ap.add_argument("--batches", type=int, default=16)
    ap.add_argument("--batch-kib", type=int, default=4096)
    ap.add_argument("--kernel-us", type=float, default=50.0)
    ap.add_argument("--pace", type=float, default=50.0, help="paced mode: wall = pace x model")
    ap.add_argument("--paced-batches", type=int, default=12)
    ap.add_argument("--target", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    common = ["--batch-kib", str(a.batch_kib), "--kernel-us", str(a.kernel_us)]
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp), a.lib_dir)
        virt = run(exe, "virtual", ["--batches", str(a.batches), *common])
        paced = run(
            exe, "paced", ["--batches", str(a.paced_batches), *common], json.dumps({"pace": a.pace})
        )
    v_ratio = virt["naive_model_us"] / virt["pipelined_model_us"]
    p_ratio = paced["naive_wall_us"] / paced["pipelined_wall_us"]
    ok_v, ok_p = v_ratio >= a.target, p_ratio >= a.target
    if a.json:
        print(
            json.dumps(
                {
                    "virtual": virt,
                    "paced": paced,
                    "virtual_speedup": v_ratio,
                    "paced_wall_speedup": p_ratio,
                    "target": a.target,
                },
                indent=2,
            )
        )
    else:
        print(f"batches of {a.batch_kib} KiB, kernel {a.kernel_us:g} us (modeled)")
        print(
            f"virtual ({a.batches} batches): naive {virt['naive_model_us'] / 1e3:9.3f} ms, "
            f"pipelined {virt['pipelined_model_us'] / 1e3:9.3f} ms modeled -> {v_ratio:5.2f}x "
            f"{'PASS' if ok_v else 'FAIL'} (target >= {a.target:g}x)"
        )
        print(
            f"paced x{a.pace:g} ({a.paced_batches} batches): naive "
            f"{paced['naive_wall_us'] / 1e3:9.1f} ms, pipelined "
            f"{paced['pipelined_wall_us'] / 1e3:9.1f} ms wall -> {p_ratio:5.2f}x "
            f"{'PASS' if ok_p else 'FAIL'} (target >= {a.target:g}x)"
        )
    print("PASS" if ok_v and ok_p else "FAIL")
    return 0 if ok_v and ok_p else 1


if __name__ == "__main__":
    sys.exit(main())
