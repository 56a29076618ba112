"""Run vector_add over 1 MiB per vector with a Python host twin on the mock.

In CI an application loads its real device binary (an Ascend C ``.o``) unchanged; the mock
resolves the kernel names from the binary's symbol table and runs the twin registered
under each name. Here the "device binary" is a stand-in object compiled from a one-line C
file (pass the path of a real ``.o`` as the first argument instead). The twin gets numpy
views of the device memory and runs once per block on the stream's worker.
Run: ``python examples/python_twin.py``.
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

BYTES = 1 << 20  # per vector
COUNT = BYTES // 4
BLOCKS = 16


def vector_add(
    block: int, blocks: int, x: np.ndarray, y: np.ndarray, z: np.ndarray, n: int
) -> None:
    """One block: z = x + y over this block's share of the n elements."""
    per = (int(n) + blocks - 1) // blocks
    part = slice(block * per, min(int(n), (block + 1) * per))
    z[part] = x[part] + y[part]


def stand_in_binary(out_dir: Path) -> Path:
    """An ELF object whose symbol table names the kernel (what an Ascend C .o provides)."""
    src = out_dir / "kernels.c"
    src.write_text("void vector_add(void) {}\n")
    obj = out_dir / "kernels.o"
    subprocess.run([os.environ.get("CC", "cc"), "-c", str(src), "-o", str(obj)], check=True)
    return obj


def main() -> int:
    params = (In("float32", "n"), In("float32", "n"), Out("float32", "n"), Value("uint32", "n"))
    mock.register_kernel("vector_add", vector_add, params, independent_blocks=True)
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(sys.argv[1]) if len(sys.argv) > 1 else stand_in_binary(Path(tmp))
        x = np.arange(COUNT, dtype=np.float32)
        y = np.full(COUNT, 0.5, dtype=np.float32)
        with npu.ObjectCode.from_file(binary) as code, npu.Stream() as stream:
            kernel = code.get_kernel("vector_add")
            dx, dy, dz = (npu.DeviceBuffer(BYTES, stream=stream) for _ in range(3))
            npu.copy(dx, x, stream=stream, non_blocking=True)
            npu.copy(dy, y, stream=stream, non_blocking=True)
            npu.launch(
                stream, npu.LaunchConfig(blocks=BLOCKS), kernel, dx, dy, dz, np.uint32(COUNT)
            )
            z = np.empty_like(x)
            npu.copy(z, dz, stream=stream)  # synchronous: waits for the kernel
            for buf in (dx, dy, dz):
                buf.close()
    mock.unregister_kernel("vector_add")
    if not np.array_equal(z, x + y):
        print(f"vector_add: {int(np.count_nonzero(z != x + y))} results wrong", file=sys.stderr)
        return 1
    print(f"vector_add (Python twin): {COUNT} floats in {BLOCKS} blocks: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
