"""pyacl_rt._kernels: ObjectCode, Kernel, LaunchConfig and launch() on the mock, with host
twins built from C with ``acl/acl_mock_kernel.h`` (mock README "Kernels and host twins")."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pyacl_rt as npu
from pyacl_rt import lowlevel as ll
from pyacl_rt import mock

TWINS = r"""
#include <stdint.h>
#include "acl/acl_mock_kernel.h"

ACLMOCK_KERNEL(vector_add, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT | ACLMOCK_KERNEL_VECTOR,
               ACLMOCK_PTR_IN, ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint32_t))
{
    (void)userData;
    const struct { const float *x, *y; float *z; uint32_t n; } *a = args;
    uint64_t per = ((uint64_t)a->n + blockDim - 1) / blockDim;
    for (uint64_t i = (uint64_t)blockIdx * per; i < a->n && i < (uint64_t)(blockIdx + 1) * per; i++)
        a->z[i] = a->x[i] + a->y[i];
    return 0;
}

/* y[i] = a * x[i] + y[i] with a float16 factor, an int8 flag and a double offset */
ACLMOCK_KERNEL(axpy_mixed, 0, ACLMOCK_PTR_IN, ACLMOCK_PTR_INOUT, ACLMOCK_VALUE(uint16_t),
               ACLMOCK_VALUE(int8_t), ACLMOCK_VALUE(double), ACLMOCK_VALUE(uint64_t))
{
    (void)userData; (void)blockIdx; (void)blockDim;
    const float *x = ACLMOCK_ARG_AT(args, const float *, 0);
    float *y = ACLMOCK_ARG_AT(args, float *, 8);
    uint16_t h = ACLMOCK_ARG_AT(args, uint16_t, 16);
    int8_t flag = ACLMOCK_ARG_AT(args, int8_t, 24);
    double off = ACLMOCK_ARG_AT(args, double, 32);
    uint64_t n = ACLMOCK_ARG_AT(args, uint64_t, 40);
    /* float16 -> float for the values the test uses (normal numbers) */
    uint32_t sign = (uint32_t)(h >> 15), exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    union { uint32_t u; float f; } cv;
    cv.u = (sign << 31) | ((exp - 15 + 127) << 23) | (man << 13);
    for (uint64_t i = 0; i < n; i++)
        y[i] = cv.f * x[i] + y[i] + (float)off + (float)flag;
    return 0;
}

ACLMOCK_KERNEL(broken, 0, ACLMOCK_PTR_IN)
{
    (void)args; (void)blockIdx; (void)blockDim; (void)userData;
    return 1;
}

/* takes a while: spins for about the given microseconds, then writes 1 */
ACLMOCK_KERNEL(slow_write, 0, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint32_t))
{
    (void)blockIdx; (void)blockDim; (void)userData;
    volatile uint64_t spin = 0;
    uint32_t us = ACLMOCK_ARG_AT(args, uint32_t, 8);
    for (uint64_t i = 0; i < (uint64_t)us * 300; i++) spin++;
    *ACLMOCK_ARG_AT(args, uint32_t *, 0) = 1;
    return 0;
}
"""


@pytest.fixture(scope="session")
def twins_so(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc})")
    d = tmp_path_factory.mktemp("twins")
    src = d / "twins.c"
    src.write_text(TWINS)
    so = d / "twins.so"
    subprocess.run([cc, "-shared", "-fPIC", *mock.cflags(), str(src), "-o", str(so)], check=True)
    return so


@pytest.fixture
def code(mock_loaded: Any, twins_so: Path) -> Any:
    with npu.ObjectCode.from_file(twins_so) as c:
        yield c


def _dev(values: np.ndarray[Any, Any], stream: npu.Stream | None = None) -> npu.DeviceBuffer:
    buf = npu.DeviceBuffer(values.nbytes, stream=stream)
    npu.copy(buf, values)
    return buf


def _host(buf: npu.DeviceBuffer, dtype: Any) -> np.ndarray[Any, Any]:
    return np.frombuffer(buf.copy_to_host(), dtype=dtype)


def test_vector_add_over_1mib(code: Any) -> None:
    k = code.get_kernel("vector_add")
    assert code.get_kernel("vector_add") is k and k.name == "vector_add"
    n = (1 << 20) // 4
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.25, dtype=np.float32)
    s = npu.Stream()
    dx, dy, dz = _dev(x), _dev(y), npu.DeviceBuffer(x.nbytes)
    npu.launch(s, npu.LaunchConfig(blocks=48), k, dx, dy, dz, np.uint32(n))
    s.synchronize()
    assert np.array_equal(_host(dz, np.float32), x + y)
    for b in (dx, dy, dz):
        b.close()
    s.close()


def test_kernel_introspection(code: Any) -> None:
    k = code.get_kernel("vector_add")
    assert k.num_arguments == 4
    assert [(p.offset, p.size) for p in k.arguments_info] == [(0, 8), (8, 8), (16, 8), (24, 4)]
    assert k.attributes.kernel_type == "vector" and k.attributes.schedule_mode == 0
    assert k.object_code is code and k.handle and code.handle
    assert code.device == npu.Device(0) and code.path is not None and not code.closed
    assert "vector_add" in repr(k)


def test_from_bytes_and_unknown_kernel(mock_loaded: Any, twins_so: Path) -> None:
    with npu.ObjectCode.from_bytes(twins_so.read_bytes()) as c:
        assert c.path is None
        c.get_kernel("broken")
        with pytest.raises(npu.AclError) as ei:
            c.get_kernel("no_such_kernel")
        assert ei.value.code == 107042 and "vector_add" in str(ei.value)
    assert c.closed and c.handle == 0


def test_object_code_argument_errors(mock_loaded: Any, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        npu.ObjectCode.from_file(tmp_path / "missing.o")
    with pytest.raises(TypeError, match="source must be a path"):
        npu.ObjectCode(12)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        npu.ObjectCode.from_bytes(b"")
    with pytest.raises(TypeError, match="not a path"):
        npu.ObjectCode.from_bytes("x.o")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kernel_type"):
        npu.ObjectCode.from_bytes(b"x", kernel_type="gpu")
    bad = tmp_path / "garbage.o"
    bad.write_bytes(b"not an elf at all")
    with pytest.raises(npu.AclError) as ei:
        npu.ObjectCode.from_file(bad)
    assert ei.value.code == 100006  # ACL_ERROR_PARSE_FILE
    with pytest.raises(TypeError):
        npu.Kernel()


def test_argument_packing_by_type(code: Any) -> None:
    k = code.get_kernel("axpy_mixed")
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, dtype=np.float32)
    dx, dy = _dev(x), _dev(y)
    s = npu.Stream()
    npu.launch(
        s, npu.LaunchConfig(), k, dx, dy, np.float16(2.0), ctypes.c_int8(-1), np.float64(0.5),
        ctypes.c_uint64(8),
    )  # fmt: skip
    s.synchronize()
    assert np.array_equal(_host(dy, np.float32), 2.0 * x + 1 + 0.5 - 1)
    # the same signature again, other values: the plan is reused, values updated
    npu.launch(
        s, npu.LaunchConfig(), k, dx, dy, np.float16(1.0), ctypes.c_int8(0), np.float64(0.0),
        ctypes.c_uint64(4),
    )  # fmt: skip
    s.synchronize()
    out = _host(dy, np.float32)
    assert np.array_equal(out[:4], 3.0 * x[:4] + 0.5) and np.array_equal(out[4:], 2.0 * x[4:] + 0.5)
    assert len(k.plan_pools) == 1
    dx.close()
    dy.close()
    s.close()


def test_bare_python_numbers_and_bad_arguments_are_refused(code: Any) -> None:
    k = code.get_kernel("vector_add")
    s = npu.Stream()
    cfg = npu.LaunchConfig()
    a, b, c = (npu.DeviceBuffer(64) for _ in range(3))
    for bad in (16, 16.0, True):
        with pytest.raises(TypeError, match=r"argument 3 .* bare Python .* width would be a guess"):
            npu.launch(s, cfg, k, a, b, c, bad)
    with pytest.raises(TypeError, match=r"argument 3 .* is 8 bytes .* takes 4 bytes"):
        npu.launch(s, cfg, k, a, b, c, np.uint64(16))
    with pytest.raises(TypeError, match="takes 4 arguments, 3 given"):
        npu.launch(s, cfg, k, a, b, c)
    with pytest.raises(TypeError, match=r"argument 0 .* host array"):
        npu.launch(s, cfg, k, np.zeros(4, np.float32), b, c, np.uint32(4))
    with pytest.raises(TypeError, match=r"argument 1 .* must be a DeviceBuffer"):
        npu.launch(s, cfg, k, a, "x", c, np.uint32(4))
    with pytest.raises(TypeError, match="stream must be a Stream"):
        npu.launch(None, cfg, k, a, b, c, np.uint32(4))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config must be a LaunchConfig"):
        npu.launch(s, 4, k, a, b, c, np.uint32(4))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="kernel must be a Kernel"):
        npu.launch(s, cfg, "vector_add", a, b, c, np.uint32(4))  # type: ignore[arg-type]
    # a signature seen before, then a mismatching argument: still checked
    npu.launch(s, cfg, k, a, b, c, np.uint32(4))
    with pytest.raises(TypeError, match="bare Python int"):
        npu.launch(s, cfg, k, a, b, c, 4)
    c.close()
    with pytest.raises(npu.ObjectClosedError):
        npu.launch(s, cfg, k, a, b, c, np.uint32(4))
    s.synchronize()
    a.close()
    b.close()
    s.close()


def test_views_pass_their_address(code: Any) -> None:
    k = code.get_kernel("vector_add")
    x = np.arange(16, dtype=np.float32)
    dx = _dev(x)
    dz = npu.DeviceBuffer(x.nbytes)
    dz.memset(0)
    s = npu.Stream()
    # z[8:16] = x[0:8] + x[8:16]
    npu.launch(s, npu.LaunchConfig(), k, dx[:32], dx[32:], dz[32:], np.uint32(8))
    s.synchronize()
    out = _host(dz, np.float32)
    assert not out[:8].any() and np.array_equal(out[8:], x[:8] + x[8:])
    dx.close()
    dz.close()
    s.close()


def test_buffer_of_another_device_is_refused(code: Any) -> None:
    k = code.get_kernel("vector_add")
    s = npu.Stream(device=0)
    a, b = npu.DeviceBuffer(64, device=0), npu.DeviceBuffer(64, device=0)
    other = npu.DeviceBuffer(64, device=1)
    with pytest.raises(
        ValueError, match=r"argument 2 .* on device 1 but the stream is on device 0"
    ):
        npu.launch(s, npu.LaunchConfig(), k, a, b, other, np.uint32(4))
    s1 = npu.Stream(device=1)
    with pytest.raises(ValueError, match="the kernel's binary is on device 0"):
        npu.launch(s1, npu.LaunchConfig(), k, other, other, other, np.uint32(4))
    for buf in (a, b, other):
        buf.close()
    s.close()
    s1.close()


def test_host_buffer_is_refused(code: Any) -> None:
    """Pinned host memory is not reachable by a kernel (the mock faults the launch):
    refused before anything is enqueued, also where a DeviceBuffer was planned."""
    k = code.get_kernel("vector_add")
    s = npu.Stream()
    h, d = npu.HostBuffer(64), npu.DeviceBuffer(64)
    with pytest.raises(TypeError, match=r"argument 0 \(HostBuffer\) is host memory"):
        npu.launch(s, npu.LaunchConfig(), k, h, d, d, np.uint32(4))
    npu.launch(s, npu.LaunchConfig(), k, d, d, d, np.uint32(4))
    with pytest.raises(TypeError, match=r"argument 1 \(HostBuffer\) is host memory"):
        npu.launch(s, npu.LaunchConfig(), k, d, h, d, np.uint32(4))
    s.synchronize()
    h.close()
    d.close()
    s.close()


def test_launch_records_its_stream_on_the_buffers(code: Any, gate: Any) -> None:
    """A buffer used by a launch on another stream is not handed out again by the
    caching allocator until that launch completed (the cross-stream rule)."""
    k = code.get_kernel("slow_write")
    s1, s2 = npu.Stream(), npu.Stream()
    out = npu.DeviceBuffer(512, stream=s1)
    ptr = out.ptr
    gate.block(s2)  # s2 cannot run the launch until released
    npu.launch(s2, npu.LaunchConfig(), k, out, np.uint32(1))
    out.close()  # freed while the launch is pending on s2
    again = npu.DeviceBuffer(512, stream=s1)
    assert again.ptr != ptr  # the block waits for s2
    gate.release.set()
    s2.synchronize()
    again.close()
    s1.close()
    s2.close()


def test_dropped_buffer_stays_valid_until_the_launch_ran(code: Any, gate: Any) -> None:
    k = code.get_kernel("slow_write")
    s = npu.Stream()
    gate.block(s)
    out = npu.DeviceBuffer(4, stream=s)
    npu.launch(s, npu.LaunchConfig(), k, out, np.uint32(10))
    del out  # the last reference: memory must stay until the launch ran
    gate.release.set()
    s.synchronize()  # no fault: the twin wrote into live memory
    s.close()


def test_kernel_fault_raises_at_synchronize(code: Any) -> None:
    k = code.get_kernel("broken")
    s = npu.Stream()
    a = npu.DeviceBuffer(8)
    npu.launch(s, npu.LaunchConfig(blocks=2), k, a)
    with pytest.raises(npu.AclError) as ei:
        s.synchronize()
    assert ei.value.code == 507015 and "kernel 'broken' faulted" in str(ei.value)
    s.synchronize()  # reported once
    a.close()
    s.close()


def test_closed_object_code(mock_loaded: Any, twins_so: Path) -> None:
    c = npu.ObjectCode.from_file(twins_so)
    k = c.get_kernel("vector_add")
    a = npu.DeviceBuffer(64)
    s = npu.Stream()
    npu.launch(s, npu.LaunchConfig(), k, a, a, a, np.uint32(4))
    c.close()  # waits for s, then unloads
    c.close()  # idempotent
    assert c.closed and "closed" in repr(c)
    with pytest.raises(npu.ObjectClosedError, match="unloaded"):
        npu.launch(s, npu.LaunchConfig(), k, a, a, a, np.uint32(4))
    with pytest.raises(npu.ObjectClosedError):
        c.get_kernel("vector_add")
    a.close()
    s.close()


def test_concurrent_launches_of_one_kernel(
    code: Any, run_threads: Callable[[int, Callable[[int], object]], list[BaseException]]
) -> None:
    k = code.get_kernel("vector_add")
    n = 1024
    x = np.arange(n, dtype=np.float32)
    dx = _dev(x)
    outs = [npu.DeviceBuffer(x.nbytes) for _ in range(4)]

    def work(i: int) -> None:
        s = npu.Stream()
        for _ in range(50):
            npu.launch(s, npu.LaunchConfig(blocks=4), k, dx, dx, outs[i], np.uint32(n))
        s.synchronize()
        s.close()

    assert run_threads(4, work) == []
    for o in outs:
        assert np.array_equal(_host(o, np.float32), 2 * x)
        o.close()
    dx.close()
    assert 1 <= len(k.cur_plans[1]) <= 4


def test_default_stream_launch(code: Any) -> None:
    k = code.get_kernel("vector_add")
    x = np.arange(8, dtype=np.float32)
    dx, dz = _dev(x), npu.DeviceBuffer(32)
    s = npu.default_stream()
    npu.launch(s, npu.LaunchConfig(), k, dx, dx, dz, np.uint32(8))
    s.synchronize()
    assert np.array_equal(_host(dz, np.float32), 2 * x)
    dx.close()
    dz.close()


# ------------------------------------------------------------- LaunchConfig
def test_launch_config() -> None:
    cfg = npu.LaunchConfig(8, schedule_mode="batch", timeout_us=1500, data_dump=False)
    assert cfg.blocks == 8 and cfg.cfg_address != 0
    assert cfg.attributes == {"schedule_mode": "batch", "timeout_us": 1500, "data_dump": False}
    assert npu.LaunchConfig().cfg_address == 0
    assert cfg == npu.LaunchConfig(8, schedule_mode="batch", timeout_us=1500, data_dump=False)
    assert "timeout_us=1500" in repr(cfg)
    import pickle

    assert pickle.loads(pickle.dumps(cfg)) == cfg
    with pytest.raises(AttributeError):
        cfg.num_blocks = 4
    with pytest.raises(ValueError, match="mutually exclusive"):
        npu.LaunchConfig(timeout_s=1, timeout_us=1)
    with pytest.raises(ValueError, match="blocks"):
        npu.LaunchConfig(0)
    with pytest.raises(TypeError):
        npu.LaunchConfig(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_s"):
        npu.LaunchConfig(timeout_s=70000)
    with pytest.raises(ValueError, match="schedule_mode"):
        npu.LaunchConfig(schedule_mode="fast")
    with pytest.raises(TypeError, match="engine"):
        npu.LaunchConfig(engine=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no_prefetch"):
        npu.LaunchConfig(no_prefetch=1)  # type: ignore[arg-type]


def test_launch_attributes_reach_the_runtime(code: Any) -> None:
    k = code.get_kernel("vector_add")
    x = np.arange(8, dtype=np.float32)
    dx, dz = _dev(x), npu.DeviceBuffer(32)
    s = npu.Stream()
    npu.launch(
        s, npu.LaunchConfig(2, schedule_mode="batch", timeout_s=5), k, dx, dx, dz, np.uint32(8)
    )
    s.synchronize()
    assert np.array_equal(_host(dz, np.float32), 2 * x)
    # another product's attribute: refused by the runtime at the call
    with pytest.raises(npu.FeatureNotSupportedError):
        npu.launch(s, npu.LaunchConfig(engine="aic"), k, dx, dx, dz, np.uint32(8))
    dx.close()
    dz.close()
    s.close()


# --------------------------------------------------------------- raw layer
def test_raw_launch_with_args_checks(code: Any) -> None:
    k = code.get_kernel("vector_add")
    fast = ll.fast
    with pytest.raises(TypeError, match="plan"):
        fast.launch_with_args(k.handle, 1, 0, 0, 0, b"", ())
    with pytest.raises(TypeError, match="values"):
        fast.launch_with_args(k.handle, 1, 0, 0, 0, bytearray(24), 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="1 values for a plan of 0"):
        fast.launch_with_args(k.handle, 1, 0, 0, 0, bytearray(), (1,))
    with pytest.raises(OverflowError, match="num_blocks"):
        fast.launch_with_args(k.handle, 1 << 32, 0, 0, 0, bytearray(), ())
    import struct

    plan = bytearray(struct.pack("<QII8s", 1, 4, 0, bytes(8)))
    with pytest.raises(OverflowError, match="does not fit in 4 bytes"):
        fast.launch_with_args(k.handle, 1, 0, 0, 0, plan, (1 << 40,))
    with pytest.raises(TypeError, match="has 8 bytes but the parameter takes 4"):
        fast.launch_with_args(k.handle, 1, 0, 0, 0, plan, (np.uint64(1),))
    with pytest.raises(TypeError, match="must be an int, a float or an object exporting"):
        fast.launch_with_args(k.handle, 1, 0, 0, 0, plan, (object(),))


def test_finalize_unloads_after_streams(run_python: Any, twins_so: Path) -> None:
    proc = run_python(
        f"""
        import numpy as np, pyacl_rt as npu
        from pyacl_rt.mock import mock_control
        code = npu.ObjectCode.from_file({str(twins_so)!r})
        k = code.get_kernel("slow_write")
        s = npu.Stream()
        out = npu.DeviceBuffer(4)
        for _ in range(20):
            npu.launch(s, npu.LaunchConfig(), k, out, np.uint32(50))
        npu.finalize()  # nothing closed by hand: streams, then the binary, then memory
        assert code.closed
        print("ok", mock_control().leak_report(1))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok") and "no leaks" in proc.stdout
    assert proc.stderr == ""


def test_explicit_context_close_unloads(mock_loaded: Any, twins_so: Path) -> None:
    ctx = npu.Context(0)
    with ctx:
        c = npu.ObjectCode.from_file(twins_so)
        assert c._owner is ctx
    ctx.close()
    assert c.closed
    with pytest.raises(npu.ObjectClosedError):
        c.get_kernel("vector_add")
    c.close()


def test_copy_and_pickle_refused(code: Any) -> None:
    import copy
    import pickle

    for obj in (code, code.get_kernel("vector_add")):
        with pytest.raises(TypeError, match="cannot be pickled or copied"):
            copy.copy(obj)
        with pytest.raises(TypeError):
            pickle.dumps(obj)


def test_lazy_and_kernel_type_options(mock_loaded: Any, twins_so: Path) -> None:
    # (a host twin object's kernel type comes from its twins; device ELFs take the
    # option: tests/test_twins.py)
    with npu.ObjectCode.from_file(twins_so, lazy=True, kernel_type="aicore") as c:
        assert c.get_kernel("vector_add").attributes.kernel_type == "vector"


def test_kernel_without_parameters_launches(mock_loaded: Any, tmp_path: Path) -> None:
    """A kernel that takes no arguments: its (empty) argument list is finalized once when
    the plan is made; before, nothing ever changed, so the list was never finalized and
    every launch failed with 107000 ("the argument list is not finalized")."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    (tmp_path / "k.c").write_text("void no_args_kernel(void) {}\n")
    subprocess.run(["cc", "-c", str(tmp_path / "k.c"), "-o", str(tmp_path / "k.o")], check=True)
    runs: list[int] = []
    mock.register_kernel("no_args_kernel", lambda block, blocks: runs.append(block), ())
    try:
        with npu.ObjectCode.from_file(tmp_path / "k.o") as code, npu.Stream() as s:
            k = code.get_kernel("no_args_kernel")
            for _ in range(3):
                npu.launch(s, npu.LaunchConfig(2), k)
            s.synchronize()
    finally:
        mock.unregister_kernel("no_args_kernel")
    assert sorted(runs) == [0, 0, 0, 1, 1, 1]
