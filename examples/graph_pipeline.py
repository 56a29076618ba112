"""The seed's pipeline as a graph: H2D copy, kernel, D2H copy per batch on two streams,
captured once and replayed for every batch.

Capture records the work issued on the capture stream and on a compute stream that joins
it (``wait_stream``) and rejoins it before the end: upload on the capture stream, the
kernel on the compute stream, download on the capture stream. Each batch then costs one
``replay()``: the host writes the batch into the pinned input buffer, replays, waits and
reads the pinned output buffer (the graph's buffers keep their addresses; only their
contents change). On the mock the kernel is a Python twin; on a card pass the path of
the real Ascend C object that defines ``scale_add`` as the first argument.
Run: ``python examples/graph_pipeline.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import pyacl_rt as npu
from pyacl_rt import mock
from pyacl_rt.mock import In, Out, Value

COUNT = 1 << 16  # float32 elements per batch
BYTES = COUNT * 4
BATCHES = 50
BLOCKS = 8


def scale_add(block: int, blocks: int, x: np.ndarray, y: np.ndarray, n: int) -> None:
    """One block: y = 2 * x + 1 over this block's share of the n elements."""
    per = (int(n) + blocks - 1) // blocks
    part = slice(block * per, min(int(n), (block + 1) * per))
    y[part] = 2.0 * x[part] + 1.0


def stand_in_binary(out_dir: Path) -> Path:
    """An object whose symbol table names the kernel (what an Ascend C .o provides)."""
    src = out_dir / "kernels.c"
    src.write_text("void scale_add(void) {}\n")
    obj = out_dir / "kernels.o"
    subprocess.run([os.environ.get("CC", "cc"), "-c", str(src), "-o", str(obj)], check=True)
    return obj


def main() -> int:
    on_mock = npu.backend_info().backend == "mock" and len(sys.argv) < 2
    if on_mock:
        params = (In("float32", "n"), Out("float32", "n"), Value("uint32", "n"))
        mock.register_kernel("scale_add", scale_add, params, independent_blocks=True)
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(sys.argv[1]) if len(sys.argv) > 1 else stand_in_binary(Path(tmp))
        with npu.ObjectCode.from_file(binary) as code:
            kernel = code.get_kernel("scale_add")
            h_in, h_out = npu.HostBuffer(BYTES), npu.HostBuffer(BYTES)
            d_in, d_out = npu.DeviceBuffer(BYTES), npu.DeviceBuffer(BYTES)
            compute = npu.Stream()
            g = npu.NPUGraph()
            with npu.graph(g):
                copy_stream = npu.current_stream()
                npu.copy(d_in, h_in, stream=copy_stream, non_blocking=True)
                compute.wait_stream(copy_stream)
                npu.launch(
                    compute, npu.LaunchConfig(blocks=BLOCKS), kernel, d_in, d_out, np.uint32(COUNT)
                )
                copy_stream.wait_stream(compute)
                npu.copy(h_out, d_out, stream=copy_stream, non_blocking=True)
            stream = npu.current_stream()
            x_in = h_in.numpy("float32")
            y_out = h_out.numpy("float32")
            for batch in range(BATCHES):
                x = np.arange(COUNT, dtype=np.float32) + batch
                x_in[:] = x  # the next batch into the graph's pinned input
                g.replay()
                stream.synchronize()
                wrong += int(np.count_nonzero(y_out != 2.0 * x + 1.0))
            g.reset()
            for buf in (d_in, d_out):
                buf.close()
            compute.close()
    if on_mock:
        mock.unregister_kernel("scale_add")
    if wrong:
        print(f"graph pipeline: {wrong} results wrong", file=sys.stderr)
        return 1
    print(f"graph pipeline: {BATCHES} batches of {COUNT} floats, one replay each: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
