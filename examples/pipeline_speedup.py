"""The seed's pipeline comparison: a naive loop against a preallocated two-stream pipeline.

Same batches of float32 data through "copy to the device, compute, copy back":

* naive: per batch allocate the device buffers, synchronous copies of pageable (numpy)
  memory, compute, synchronize, copy back, free - the host and every engine wait;
* pipelined: device and pinned host buffers allocated once, two streams, batch i on
  stream i % 2, asynchronous copies; the copies of one batch overlap the compute and the
  copies of the other (separate H2D and D2H copy engines).

The compute is ``reduce_async`` (``dst += src``, a kernel-class task). Times come from
events (``Event.elapsed_time``). On the mock the example selects the deterministic timing
model (``ASCEND_MOCK_TIMING=virtual``, mock README "Timing model") unless the variable is
set, so the printed times are the model's (the pipelined one is the same on every run and
machine; the naive one moves by a few modeled submissions with the caching allocator's
run-time reuse decisions); on a card they are measured.
Run: ``python examples/pipeline_speedup.py [--batches N] [--batch-kib K]``.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("ASCEND_MOCK_TIMING", "virtual")  # read by the mock at aclInit

import numpy as np

import pyacl_rt as npu


def naive(batches: list[np.ndarray], stream: npu.Stream) -> tuple[float, list[np.ndarray]]:
    """Per batch: allocate, synchronous copies, compute, synchronize, free. (ms, results)"""
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    results = []
    start.record(stream)
    for x in batches:
        d_in = npu.DeviceBuffer(x.nbytes)
        d_out = npu.DeviceBuffer(x.nbytes)
        npu.copy(d_in, x, stream=stream)  # waits
        npu.memset(d_out, 0, stream=stream, non_blocking=True)
        npu.reduce_async(d_out, d_in, "sum", "float32", stream=stream)
        stream.synchronize()
        out = np.empty_like(x)
        npu.copy(out, d_out, stream=stream)  # waits
        results.append(out)
        d_in.close()
        d_out.close()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end), results


def pipelined(
    batches: list[np.ndarray], streams: list[npu.Stream]
) -> tuple[float, list[np.ndarray]]:
    """Preallocated pinned + device buffers, two streams, asynchronous copies. (ms, results)"""
    nbytes = batches[0].nbytes
    h_in = npu.HostBuffer(nbytes * len(batches))
    h_out = npu.HostBuffer(nbytes * len(batches))
    np.asarray(h_in).view(np.float32)[:] = np.concatenate(batches)
    d_in = [npu.DeviceBuffer(nbytes) for _ in streams]
    d_out = [npu.DeviceBuffer(nbytes) for _ in streams]
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    start.record(streams[0])
    for s in streams[1:]:
        s.wait_event(start)
    for i in range(len(batches)):
        k = i % len(streams)
        s = streams[k]
        npu.copy(d_in[k], h_in, nbytes, src_offset=i * nbytes, stream=s, non_blocking=True)
        npu.memset(d_out[k], 0, stream=s, non_blocking=True)
        npu.reduce_async(d_out[k], d_in[k], "sum", "float32", stream=s)
        npu.copy(h_out, d_out[k], nbytes, dst_offset=i * nbytes, stream=s, non_blocking=True)
    for s in streams[1:]:
        streams[0].wait_stream(s)
    end.record(streams[0])
    end.synchronize()
    flat = np.asarray(h_out).view(np.float32).copy()
    for b in (*d_in, *d_out, h_in, h_out):
        b.close()
    return start.elapsed_time(end), list(flat.reshape(len(batches), -1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--batches", type=int, default=16)
    ap.add_argument("--batch-kib", type=int, default=1024, help="KiB per batch")
    a = ap.parse_args(argv)
    count = a.batch_kib * 1024 // 4
    rng = np.random.default_rng(0)
    batches = [rng.random(count, dtype=np.float32) for _ in range(a.batches)]
    with npu.Stream() as s0, npu.Stream() as s1:
        t_naive, r_naive = naive(batches, s0)
        t_pipe, r_pipe = pipelined(batches, [s0, s1])
    for x, y, z in zip(batches, r_naive, r_pipe, strict=True):
        if not (np.array_equal(x, y) and np.array_equal(x, z)):
            print("pipeline_speedup: wrong results", file=sys.stderr)
            return 1
    timing = os.environ.get("ASCEND_MOCK_TIMING", "real")
    where = f"mock, {timing} timing" if npu.backend_info().backend == "mock" else "device"
    print(f"{a.batches} batches of {a.batch_kib} KiB ({where}):")
    print(f"  naive      {t_naive:8.3f} ms")
    print(f"  pipelined  {t_pipe:8.3f} ms")
    print(f"  speedup    {t_naive / t_pipe:8.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
