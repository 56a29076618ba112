"""Load a kernel binary, launch vector_add over 1 MiB per vector and check the result.

On the mock (the default without a card) the "binary" is the host twin in
``examples/kernels/vector_add_twin.c``, built here with the C compiler and the mock's
flags (``python -m pyacl_rt.mock --cflags``); on an Ascend card pass the path of the
real Ascend C object as the first argument instead. Run: ``python examples/vector_add.py``.
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

BYTES = 1 << 20  # per vector
COUNT = BYTES // 4  # float32 elements
BLOCKS = 48  # the vector cores of an Atlas A2


def build_twin(out_dir: Path) -> Path:
    """Compile the host twin into a shared object (what the mock loads)."""
    src = Path(__file__).resolve().parent / "kernels" / "vector_add_twin.c"
    so = out_dir / "vector_add.so"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", *mock.cflags(), str(src), "-o", str(so)], check=True)
    return so


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(sys.argv[1]) if len(sys.argv) > 1 else build_twin(Path(tmp))
        x = np.arange(COUNT, dtype=np.float32)
        y = np.full(COUNT, 0.5, dtype=np.float32)
        with npu.ObjectCode.from_file(binary) as code, npu.Stream() as stream:
            vector_add = code.get_kernel("vector_add")
            dx, dy, dz = (npu.DeviceBuffer(BYTES, stream=stream) for _ in range(3))
            npu.copy(dx, x, stream=stream, non_blocking=True)
            npu.copy(dy, y, stream=stream, non_blocking=True)
            npu.launch(
                stream, npu.LaunchConfig(blocks=BLOCKS), vector_add, dx, dy, dz, np.uint32(COUNT)
            )
            z = np.empty_like(x)
            npu.copy(z, dz, stream=stream)  # synchronous: waits for the kernel
            for buf in (dx, dy, dz):
                buf.close()
        if not np.array_equal(z, x + y):
            bad = int(np.count_nonzero(z != x + y))
            print(f"vector_add: {bad} of {COUNT} results wrong", file=sys.stderr)
            return 1
    print(f"vector_add: {COUNT} floats ({BYTES} bytes per vector) in {BLOCKS} blocks: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
