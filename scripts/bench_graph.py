#!/usr/bin/env python3
"""Graph replay against the same work issued call by call (issue 15).

    python scripts/bench_graph.py [--rounds R] [--json]

The work: 200 small tasks on one stream, alternating an async device-to-device copy of
4 KiB (``pyacl_rt.copy(..., non_blocking=True)``) and a launch of ``vector_add`` over 16
floats in 1 block (``pyacl_rt.launch``; the C host twin of
``examples/kernels/vector_add_twin.c``, built in this run), on the bundled mock.

``eager``   the 200 Pythonic calls, issued one by one.
``graph``   the same calls captured once into an :class:`pyacl_rt.NPUGraph`, then one
            ``replay()``.

Two figures per variant, each the minimum over ``--rounds`` rounds (variants
interleaved within a round):

* host cost: the time the issuing thread spends issuing (the 200 calls, or the one
  replay) while the stream's worker is held on a host-function gate (so that it does
  not compete for a core with the issuing thread); then the gate opens and the stream is
  synchronized (untimed).
* execution: from the first call to the end of ``synchronize()`` (issuing + running).

Targets: host(graph) / host(eager) <= 1/20; execution(graph) / execution(eager) <= 1.0
(on the mock, running the replay takes no longer than running the tasks one by one).
Prints PASS/FAIL per target; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("PYACL_RT_BACKEND", "mock")

import numpy as np

import pyacl_rt as npu
from pyacl_rt import mock

TASKS = 200
HOST_TARGET = 1 / 20
EXEC_TARGET = 1.0
REPO = Path(__file__).resolve().parent.parent


def build_twin(out_dir: Path) -> Path:
    src = REPO / "examples" / "kernels" / "vector_add_twin.c"
    so = out_dir / "vector_add.so"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", *mock.cflags(), str(src), "-o", str(so)], check=True)
    return so


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        code = npu.ObjectCode.from_file(build_twin(Path(tmp)))
        kernel = code.get_kernel("vector_add")
        cfg = npu.LaunchConfig(blocks=1)
        n = np.uint32(16)
        s = npu.Stream()
        src, dst = npu.DeviceBuffer(4096, stream=s), npu.DeviceBuffer(4096, stream=s)
        x, y, z = (npu.DeviceBuffer(64, stream=s) for _ in range(3))

        def issue(st: npu.Stream) -> None:
            for _ in range(TASKS // 2):
                npu.copy(dst, src, stream=st, non_blocking=True)
                npu.launch(st, cfg, kernel, x, y, z, n)

        issue(s)  # warm-up: packing plans, caches
        s.synchronize()
        g = npu.NPUGraph()
        with npu.graph(g):
            issue(npu.current_stream())
        with npu.stream(s):
            g.replay()
        s.synchronize()

        host = {"eager": [], "graph": []}
        run = {"eager": [], "graph": []}

        def held(st: npu.Stream) -> threading.Event:
            """Hold the stream's worker on a gate so that it does not compete with the
            issuing thread for a core (a loaded 2-core machine would preempt it)."""
            gate = threading.Event()
            st.launch_host_func(gate.wait, 60)
            return gate

        for _ in range(a.rounds):
            for variant in ("eager", "graph"):
                gate = held(s)
                with npu.stream(s):
                    t0 = time.perf_counter()
                    if variant == "eager":
                        issue(s)
                    else:
                        g.replay()
                    t1 = time.perf_counter()
                gate.set()
                s.synchronize()
                host[variant].append(t1 - t0)
                with npu.stream(s):
                    t0 = time.perf_counter()
                    if variant == "eager":
                        issue(s)
                    else:
                        g.replay()
                    s.synchronize()
                    t2 = time.perf_counter()
                run[variant].append(t2 - t0)
        g.reset()
        for b in (src, dst, x, y, z):
            b.close()
        s.close()
        code.close()
    h = {k: min(v) for k, v in host.items()}
    r = {k: min(v) for k, v in run.items()}
    host_ratio = h["graph"] / h["eager"]
    exec_ratio = r["graph"] / r["eager"]
    ok_host = host_ratio <= HOST_TARGET
    ok_exec = exec_ratio <= EXEC_TARGET
    if a.json:
        print(
            json.dumps(
                {"host_s": h, "exec_s": r, "host_ratio": host_ratio, "exec_ratio": exec_ratio}
            )
        )
    print(f"{TASKS} tasks (copies + kernel launches), min of {a.rounds} rounds")
    print(
        f"  host cost   eager {h['eager'] * 1e6:9.1f} us   graph replay {h['graph'] * 1e6:8.1f} us"
    )
    print(
        f"  execution   eager {r['eager'] * 1e6:9.1f} us   graph replay {r['graph'] * 1e6:8.1f} us"
    )
    print(
        f"host(graph)/host(eager) = {host_ratio:.4f} (target <= {HOST_TARGET:.3f}): "
        + ("PASS" if ok_host else "FAIL")
    )
    print(
        f"exec(graph)/exec(eager) = {exec_ratio:.3f} (target <= {EXEC_TARGET:.2f}): "
        + ("PASS" if ok_exec else "FAIL")
    )
    return 0 if ok_host and ok_exec else 1


if __name__ == "__main__":
    sys.exit(main())
